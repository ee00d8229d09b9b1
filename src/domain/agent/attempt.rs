//! What an attempt's hooks need to answer on their own: the daemon writes it into the run
//! folder as [`POLICY_FILE`] before the agent starts and removes it when the agent has ended,
//! so `catalyst hook` decides a tool call, judges a stop and tells the session its step
//! without asking the daemon (docs/agents.md#hooks). The decisions are the pure ones of
//! [`crate::domain::policy`] and [`crate::domain::result`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::id::BeadId;
use crate::domain::model::{Role, StepMeta};
use crate::domain::policy::{Access, RolePolicy};

/// The name of the file in the run folder.
pub const POLICY_FILE: &str = "policy.json";

/// The file in the run folder where the hooks append the decisions they made on their own,
/// one [`ToolRecord`] per line, for the daemon to record as `agent.tool` events.
pub const TOOL_LOG_FILE: &str = "tools.jsonl";

/// One decision a hook made on its own: an `agent.tool` event's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRecord {
    pub tool: String,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The `tool` of the `agent.tool` event that records a blocked stop.
pub const STOP_TOOL: &str = "Stop";

/// The marker a blocked stop leaves in the run folder: a stop is sent back once per attempt.
pub const STOP_BLOCKED_FILE: &str = "stop-blocked";

/// An attempt's policy, as its hooks read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptPolicy {
    pub bead: BeadId,
    pub step: BeadId,
    pub role: Role,
    pub attempt: u32,
    pub access: Access,
    /// The step's tool list; `None`: no list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The worktree the agent works in.
    pub worktree: PathBuf,
    pub target_branch: String,
    /// The context file the agent reads first.
    pub context: PathBuf,
    /// The result contract, which a stop without a valid block is sent back with.
    pub contract: String,
}

impl AttemptPolicy {
    /// The policy of attempt `attempt` of `step` (its metadata `meta`), under its role's
    /// `role_policy` and `target_branch`, in `worktree`, with its run folder `run_dir`.
    #[allow(clippy::too_many_arguments)]
    pub fn for_step(
        role_policy: &RolePolicy,
        target_branch: &str,
        step: &BeadId,
        meta: &StepMeta,
        attempt: u32,
        worktree: PathBuf,
        run_dir: &Path,
        contract: &str,
    ) -> AttemptPolicy {
        AttemptPolicy {
            bead: meta.bead.clone(),
            step: step.clone(),
            role: meta.role,
            attempt,
            access: role_policy.access,
            tools: role_policy
                .tools_for(meta.tools.as_ref())
                .map(<[String]>::to_vec),
            worktree,
            target_branch: target_branch.to_owned(),
            context: run_dir.join(crate::domain::context::CONTEXT_MD),
            contract: contract.to_owned(),
        }
    }

    /// The step, its files and its tool policy, added to the agent's context when its session
    /// starts.
    pub fn session_text(&self) -> String {
        let policy = match self.access {
            Access::ReadOnly => "read-only: catalyst denies tools that change files, and \
                 allows only read-only shell commands (ls, cat, grep, rg, find, git \
                 status/diff/log/show, ...)"
                .to_owned(),
            Access::Worktree => format!(
                "write only inside the worktree, never under `.git/` or `.catalyst/`; no `git \
                 push`, and do not check out `{}`: catalyst commits and merges",
                self.target_branch
            ),
        };
        format!(
            "catalyst step `{}` of bead `{}`: role `{}`, attempt {}.\n\
             Worktree: {}\nRead the context file first: {}\nTool policy: {policy}.\n\
             Your final message must end with a ---STEP-RESULT--- block.",
            self.step,
            self.bead,
            self.role,
            self.attempt,
            self.worktree.display(),
            self.context.display(),
        )
    }

    /// Why a final message that `malformed` says has no valid result block is sent back.
    pub fn stop_reason(&self, malformed: &str) -> String {
        stop_reason(&self.contract, malformed)
    }
}

/// Why a final message that `malformed` says has no valid result block is sent back, with the
/// result `contract` it must follow.
pub fn stop_reason(contract: &str, malformed: &str) -> String {
    format!(
        "catalyst cannot use your final message: {malformed}. Do not redo the work: send your \
         final message again, ending with a valid result block as described below.\n{contract}"
    )
}
