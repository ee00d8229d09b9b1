//! What an agent's tools may do, by role (docs/routing.md, docs/agents.md#tool-policy): the pure decision behind the
//! `PreToolUse` hook.
//!
//! Two layers keep a role within its policy. The first is the agent's command line: a role's
//! [`RolePolicy::tools`] become `--tools …` for Claude Code profiles, so a reviewer is never
//! offered `Write`. The second is this module, asked through the hook for every tool call the
//! agent makes: [`decide`] maps (access, tool, input, worktree, target branch) to
//! [`Permission::Allow`] or [`Permission::Deny`] with a reason the agent reads.
//!
//! - [`Access::ReadOnly`] (refine, review): only tools that read; `Bash` only for commands on a
//!   read-only allowlist (see [`bash`]); anything else is denied, unknown tools included.
//! - [`Access::Worktree`] (implement, fix, merge, task): file tools may write only inside the
//!   worktree and never under `.git/` or `.catalyst/` (paths resolved through `..` and
//!   symlinks, see [`path`]); `Bash` may not `git push`, check out the target branch or touch
//!   `.git/` / `.catalyst/` with anything but a read-only command. Bash is a language, so this
//!   check is a best effort against mistakes, not a sandbox: what an agent leaves behind is
//!   still committed only by the daemon, and every attempt starts from a reset worktree.
//!
//! Decisions are data in, data out, except that paths are resolved against the file system
//! (symlinks cannot be judged otherwise).

pub mod bash;
pub mod path;
mod shell;

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::model::Role;

/// What a role's agent may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Nothing: reading tools, and read-only shell commands.
    ReadOnly,
    /// Files inside the bead's worktree, outside `.git/` and `.catalyst/`.
    Worktree,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::Worktree => "worktree",
        }
    }
}

/// A role's tool policy, as written under `[tool_policy.<role>]` in the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolePolicy {
    pub access: Access,
    /// The tools offered on the agent's command line (`--tools`, Claude Code profiles only).
    /// `None`: the agent CLI's own default set. A formula step's `tools` key replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// The tools a read-only role is offered by default. `Bash` is there so that a reviewer can run
/// `git diff`; the hook lets through only read-only commands, and the sandbox makes that so.
pub const READ_TOOLS: [&str; 4] = ["Read", "Grep", "Glob", "Bash"];

/// The tools a writing role is offered by default: files, search, the shell and a to-do list.
/// Subagents (`Task`, `Agent`), the web, worktrees, schedules and messages are off unless a
/// formula step's `tools` or the config's `[tool_policy.<role>]` names them.
pub const WRITE_TOOLS: [&str; 9] = [
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "Bash",
    "TodoWrite",
    "NotebookEdit",
];

/// Claude Code's tools that change files, with the input key naming the file.
pub const FILE_WRITE_TOOLS: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// Tools a read-only role may call: they read, search, or only touch the agent's own session
/// (its todo list, sub-agents, which run under the same hooks).
const READ_ONLY_ALLOWED: [&str; 12] = [
    "Read",
    "Grep",
    "Glob",
    "LS",
    "NotebookRead",
    "TodoWrite",
    "TodoRead",
    "Task",
    "WebFetch",
    "WebSearch",
    "BashOutput",
    "ExitPlanMode",
];

impl RolePolicy {
    /// The built-in policy of a role: refine and review are read-only and offered
    /// [`READ_TOOLS`]; the others write in the worktree with the CLI's default tools.
    pub fn default_for(role: Role) -> RolePolicy {
        match role {
            Role::Refine | Role::Review => RolePolicy {
                access: Access::ReadOnly,
                tools: Some(READ_TOOLS.map(String::from).to_vec()),
            },
            _ => RolePolicy {
                access: Access::Worktree,
                tools: Some(WRITE_TOOLS.map(String::from).to_vec()),
            },
        }
    }

    /// The command-line tool list of a step: the formula step's own, else the role's.
    pub fn tools_for<'a>(&'a self, step_tools: Option<&'a Vec<String>>) -> Option<&'a [String]> {
        step_tools.or(self.tools.as_ref()).map(Vec::as_slice)
    }
}

/// The answer to one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    Allow,
    /// Denied, with the reason the agent is shown.
    Deny(String),
}

impl Permission {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Permission::Allow)
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Permission::Allow => None,
            Permission::Deny(reason) => Some(reason),
        }
    }
}

/// Why a command or a write is refused, in words the agent reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<&str> for Refusal {
    fn from(reason: &str) -> Self {
        Refusal(reason.to_owned())
    }
}

/// A [`Refusal`] with a formatted reason.
macro_rules! refuse {
    ($($arg:tt)*) => {
        $crate::domain::policy::Refusal(format!($($arg)*))
    };
}
use refuse;

fn deny(reason: impl Into<String>) -> Permission {
    Permission::Deny(reason.into())
}

/// Where a step's agent works, for [`decide`].
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub access: Access,
    /// The bead's worktree.
    pub worktree: &'a Path,
    /// The branch beads merge into, which agents must not check out or move.
    pub target_branch: &'a str,
    /// How paths are resolved (the real file system, in the daemon).
    pub fs: &'a dyn path::Resolve,
    /// The step's tool list; a tool not on it is denied. `None`: no list.
    pub tools: Option<&'a [String]>,
}

/// The tool a tool-list entry names: `Bash` of `Bash(git log:*)`.
fn listed_name(entry: &str) -> &str {
    entry.split('(').next().unwrap_or(entry).trim()
}

/// Decides one tool call. `input` is the tool's input as the hook received it; `cwd` the
/// session's folder, against which relative paths are resolved (the worktree when absent).
pub fn decide(scope: &Scope<'_>, tool: &str, input: &Value, cwd: Option<&Path>) -> Permission {
    let base = cwd.filter(|c| c.is_absolute()).unwrap_or(scope.worktree);
    if let Some(tools) = scope.tools {
        if !tools.iter().any(|t| listed_name(t) == tool) {
            return deny(format!(
                "`{tool}` is not on this step's tool list ({})",
                tools.join(", ")
            ));
        }
    }
    if let Some((_, key)) = FILE_WRITE_TOOLS.iter().find(|(name, _)| *name == tool) {
        if scope.access == Access::ReadOnly {
            return deny(format!(
                "`{tool}` is not allowed: this step is read-only (it may read and search, not change files)"
            ));
        }
        let Some(file) = input.get(*key).and_then(Value::as_str) else {
            return deny(format!("`{tool}` without a `{key}` cannot be checked"));
        };
        return match path::check_write(scope.fs, scope.worktree, base, Path::new(file)) {
            Ok(()) => Permission::Allow,
            Err(why) => deny(format!("`{tool}` of `{file}` is not allowed: {why}")),
        };
    }
    if tool == "Bash" {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            return deny("`Bash` without a `command` cannot be checked");
        };
        let checked = match scope.access {
            Access::ReadOnly => bash::check_read_only(command),
            Access::Worktree => bash::check_writer(command, scope.target_branch),
        };
        return match checked {
            Ok(()) => Permission::Allow,
            Err(why) => deny(format!("this command is not allowed: {why}")),
        };
    }
    if scope.access == Access::ReadOnly && !READ_ONLY_ALLOWED.contains(&tool) {
        return deny(format!(
            "`{tool}` is not allowed: this step is read-only, and `{tool}` is not known to only read"
        ));
    }
    Permission::Allow
}

/// What the `agent.tool` event records about a call: the file or the command, on one line and
/// at most 200 characters, so the journal stays small and readable.
pub fn target(tool: &str, input: &Value) -> Option<String> {
    let key = FILE_WRITE_TOOLS
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, key)| *key)
        .or(match tool {
            "Bash" => Some("command"),
            "Read" => Some("file_path"),
            "Grep" | "Glob" => Some("pattern"),
            "WebFetch" => Some("url"),
            _ => None,
        })?;
    let text = input.get(key)?.as_str()?;
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = one_line.chars().take(200).collect();
    if cut.len() < one_line.len() {
        cut.push('…');
    }
    Some(cut)
}

#[cfg(test)]
mod tests;
