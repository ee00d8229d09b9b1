//! Agent profiles: the command template of an agent CLI, how its prompt is delivered and how its
//! output is read (docs/agents.md).
//!
//! A profile comes from the daemon's TOML config ([`ProfileConfig`], laid over the built-in
//! profile of the same name if there is one) and is checked when it is loaded
//! ([`AgentProfile::validate`] runs in [`ProfileConfig::resolve`]), so a typo in a placeholder
//! or a flag that would switch the hooks off is a config error at start-up, not a failed step
//! hours later.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::sandbox::{Network, SandboxKind};

/// How the agent's stdout is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// Claude Code's `--output-format stream-json --verbose`: one JSON event per line; the final
    /// message is the `result` of the last `result` event.
    #[default]
    ClaudeStreamJson,
    /// `codex exec --json`: one JSON event per line; the final message is the text of the last
    /// completed `agent_message` item.
    CodexJson,
    /// Plain text: the final message is all of stdout.
    Text,
}

/// What the agent's stdin is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StdinMode {
    /// The prompt is written to stdin, which is then closed.
    #[default]
    Prompt,
    /// stdin is `/dev/null`; the prompt reaches the agent through `{prompt}` or `{prompt_file}`.
    Null,
    /// Claude Code's `--input-format stream-json`: the prompt is the first user message, and
    /// stdin stays open until the agent's `result`. The daemon judges that final message: one
    /// without a valid result block is sent back once, as a second user message with the
    /// result contract; otherwise stdin is closed and the agent exits
    /// ([`super::conversation`]). This is what a `Stop` hook would do, without the two
    /// processes Claude Code starts to run one. Only for the `claude-stream-json` format, and
    /// the command must pass `--input-format stream-json`.
    Conversation,
}

/// A command template plus the way to talk to the agent it starts.
///
/// Each element of `command` may contain placeholders, replaced when a step is run:
/// - `{model}`: the step's model id;
/// - `{settings}`: the JSON settings file the daemon writes in the run folder (hooks);
/// - `{worktree}`, `{run_dir}`: the bead's worktree and the step's run folder;
/// - `{prompt_file}`: `prompt.md` in the run folder;
/// - `{prompt}`: the prompt itself, as one argument. Discouraged for Claude Code: its list-valued
///   flags (`--allowedTools a b …`) swallow a trailing argument, so the prompt would be read as a
///   tool name. Use stdin there, as [`AgentProfile::claude`] does.
///
/// `{{` and `}}` stand for literal braces, so inline JSON can still be written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProfile {
    pub command: Vec<String>,
    pub format: OutputFormat,
    /// Extra environment for the agent, over the daemon's own; the step's `CATALYST_*` variables
    /// are set after these and win.
    pub env: BTreeMap<String, String>,
    pub stdin: StdinMode,
    /// How the agent is confined by the operating system (see [`super::sandbox`]).
    pub sandbox: SandboxKind,
    /// What the agent may reach on the network.
    pub network: Network,
    /// Paths the agent CLI writes besides the worktree (its own state and credentials
    /// folders); `~/` is the agent's `HOME` (the profile's `env`, else the daemon's). Only
    /// these are writable outside the worktree when sandboxed.
    pub writable: Vec<String>,
    /// The `host:port`s of the agent's model API, the only places a `model-only` network
    /// reaches (besides the host of `ANTHROPIC_BASE_URL` or `OPENAI_BASE_URL` when set).
    pub model_hosts: Vec<String>,
}

/// A profile as written in the config: every key optional, since a profile named after a
/// built-in one takes what it leaves out from it ([`ProfileConfig::resolve`]).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    pub command: Option<Vec<String>>,
    pub format: Option<OutputFormat>,
    pub env: Option<BTreeMap<String, String>>,
    pub stdin: Option<StdinMode>,
    pub sandbox: Option<SandboxKind>,
    pub network: Option<Network>,
    pub writable: Option<Vec<String>>,
    pub model_hosts: Option<Vec<String>>,
}

impl ProfileConfig {
    /// The profile called `name`: the keys this one sets, over the built-in profile of that
    /// name ([`AgentProfile::builtin`]) so that, say, `[profiles.claude]` with only `env`
    /// changes the environment of the built-in `claude` and keeps its command. Any other name
    /// is a new profile: it must set `command`, and its other keys default. Checked by
    /// [`AgentProfile::validate`].
    pub fn resolve(self, name: &str) -> Result<AgentProfile, ProfileError> {
        let base = match AgentProfile::builtin(name) {
            Some(builtin) => builtin,
            None => AgentProfile {
                command: self
                    .command
                    .clone()
                    .ok_or_else(|| ProfileError::NoCommand {
                        profile: name.to_owned(),
                    })?,
                format: OutputFormat::default(),
                env: BTreeMap::new(),
                stdin: StdinMode::default(),
                sandbox: SandboxKind::default(),
                network: Network::default(),
                writable: Vec::new(),
                model_hosts: Vec::new(),
            },
        };
        let profile = AgentProfile {
            command: self.command.unwrap_or(base.command),
            format: self.format.unwrap_or(base.format),
            env: self.env.unwrap_or(base.env),
            stdin: self.stdin.unwrap_or(base.stdin),
            sandbox: self.sandbox.unwrap_or(base.sandbox),
            network: self.network.unwrap_or(base.network),
            writable: self.writable.unwrap_or(base.writable),
            model_hosts: self.model_hosts.unwrap_or(base.model_hosts),
        };
        profile.validate()?;
        Ok(profile)
    }
}

/// Flags that make Claude Code skip its hooks, which carry the tool policy (docs/agents.md#hooks).
pub const FORBIDDEN_FLAGS: [&str; 2] = ["--bare", "--safe-mode"];

/// The placeholders a command template may use.
pub const PLACEHOLDERS: [&str; 6] = [
    "model",
    "settings",
    "worktree",
    "run_dir",
    "prompt_file",
    "prompt",
];

/// The names of the built-in profiles ([`AgentProfile::builtin`]).
pub const BUILTIN_PROFILES: [&str; 2] = ["claude", "codex"];

/// Why a profile cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("no `command`: `{profile}` is not a built-in profile ({builtins}) whose command it could keep", builtins = builtin_list())]
    NoCommand { profile: String },
    #[error("the agent command is empty")]
    EmptyCommand,
    #[error("unknown placeholder `{{{name}}}` in agent command argument `{arg}` (known: {known})", known = known_list())]
    UnknownPlaceholder { name: String, arg: String },
    #[error("unbalanced brace in agent command argument `{arg}` (write `{{{{` or `}}}}` for a literal brace)")]
    UnbalancedBrace { arg: String },
    #[error("agent command argument `{flag}` is refused: it makes Claude Code skip the hooks that enforce the tool policy")]
    ForbiddenFlag { flag: String },
    #[error("the agent command uses `{{settings}}` but no settings file was given")]
    NoSettings,
    #[error("`stdin = \"conversation\"` needs `format = \"claude-stream-json\"` and `--input-format stream-json` in the command; add them, or set `stdin = \"prompt\"`")]
    ConversationNeedsStreamJson,
}

fn builtin_list() -> String {
    BUILTIN_PROFILES
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn known_list() -> String {
    PLACEHOLDERS
        .iter()
        .map(|p| format!("`{{{p}}}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The values placeholders expand to for one run.
#[derive(Clone, Copy, Debug)]
pub struct Vars<'a> {
    pub model: &'a str,
    pub settings: Option<&'a Path>,
    pub worktree: &'a Path,
    pub run_dir: &'a Path,
    pub prompt_file: &'a Path,
    pub prompt: &'a str,
}

impl AgentProfile {
    /// The built-in profile called `name`, if there is one (see [`BUILTIN_PROFILES`]).
    pub fn builtin(name: &str) -> Option<AgentProfile> {
        match name {
            "claude" => Some(AgentProfile::claude()),
            "codex" => Some(AgentProfile::codex()),
            _ => None,
        }
    }

    /// Claude Code in print mode with streamed JSON both ways (the prompt is the first user
    /// message of a [`StdinMode::Conversation`]) and the daemon's hook settings. Never `--bare` or `--safe-mode`: they skip hooks. No `--permission-mode` and
    /// no `--dangerously-skip-permissions` (refused as root, like `bypassPermissions`): in
    /// print mode the PreToolUse hook's explicit `allow` is what lets a writing role edit files
    /// and run commands without a prompt, as root or not (checked against Claude Code 2.1.197
    /// by the tests in `tests/real`).
    pub fn claude() -> AgentProfile {
        AgentProfile {
            command: [
                "claude",
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "{model}",
                "--settings",
                "{settings}",
            ]
            .map(String::from)
            .into(),
            format: OutputFormat::ClaudeStreamJson,
            env: BTreeMap::new(),
            stdin: StdinMode::Conversation,
            sandbox: SandboxKind::default(),
            network: Network::default(),
            writable: ["~/.claude", "~/.claude.json", "~/.claude.json.lock"]
                .map(String::from)
                .into(),
            model_hosts: vec!["api.anthropic.com:443".into()],
        }
    }

    /// `codex exec` with JSON events, the prompt as its last argument and stdin `/dev/null`:
    /// codex 0.169 appends whatever its stdin holds to the prompt when stdin is not a
    /// terminal ("Reading additional input from stdin..."), so an inherited stdin would hang
    /// it or leak into the prompt. Inside catalyst's sandbox (the default on Linux) Codex's own
    /// (`-s workspace-write`, itself bubblewrap) cannot nest, so it runs with
    /// `danger-full-access` and the outer sandbox confines it; where catalyst has no sandbox,
    /// Codex's own confines it to the worktree.
    pub fn codex() -> AgentProfile {
        let sandbox = SandboxKind::default();
        let codex_sandbox = match sandbox {
            SandboxKind::Bwrap => "danger-full-access",
            SandboxKind::None => "workspace-write",
        };
        AgentProfile {
            command: [
                "codex",
                "exec",
                "--json",
                "-s",
                codex_sandbox,
                "-C",
                "{worktree}",
                "-m",
                "{model}",
                "{prompt}",
            ]
            .map(String::from)
            .into(),
            format: OutputFormat::CodexJson,
            env: BTreeMap::new(),
            stdin: StdinMode::Null,
            sandbox,
            network: Network::default(),
            writable: vec!["$CODEX_HOME".into(), "~/.codex".into()],
            model_hosts: vec!["api.openai.com:443".into(), "chatgpt.com:443".into()],
        }
    }

    /// `sh -c {prompt}` with its output read as text, stdin `/dev/null`, unconfined: how the
    /// daemon runs a gate's own commands (the formula's, not an agent's).
    pub fn shell() -> AgentProfile {
        AgentProfile {
            command: ["sh", "-c", "{prompt}"].map(String::from).into(),
            format: OutputFormat::Text,
            env: BTreeMap::new(),
            stdin: StdinMode::Null,
            sandbox: SandboxKind::None,
            network: Network::Open,
            writable: Vec::new(),
            model_hosts: Vec::new(),
        }
    }

    /// The profile with Claude Code's per-attempt caps appended to its command: `--max-turns`
    /// and `--max-budget-usd` (what is left of the bead's budget). Other formats have no such
    /// flags and are returned unchanged. Must come before [`AgentProfile::with_tools`], whose
    /// list takes every argument after it.
    pub fn with_caps(mut self, max_turns: Option<u32>, budget_left: Option<f64>) -> AgentProfile {
        if self.format != OutputFormat::ClaudeStreamJson {
            return self;
        }
        if let Some(turns) = max_turns {
            self.command.push("--max-turns".into());
            self.command.push(turns.to_string());
        }
        if let Some(left) = budget_left {
            self.command.push("--max-budget-usd".into());
            self.command.push(format!("{:.2}", left.max(0.01)));
        }
        self
    }

    /// The profile with `--tools` and `tools` appended to its command, for Claude Code
    /// profiles (`claude-stream-json`); other formats do not take Claude's flags and are
    /// returned unchanged. The flag goes last: Claude's list-valued flags take every argument
    /// up to the next flag, which is why the prompt goes on stdin. An empty list is passed as
    /// `--tools ""`, Claude Code's spelling of "no tools".
    pub fn with_tools(mut self, tools: &[String]) -> AgentProfile {
        if self.format != OutputFormat::ClaudeStreamJson {
            return self;
        }
        self.command.push("--tools".into());
        if tools.is_empty() {
            self.command.push(String::new());
        }
        // Braces are the template's placeholders; a tool rule cannot contain one literally.
        self.command.extend(
            tools
                .iter()
                .map(|t| t.replace('{', "{{").replace('}', "}}")),
        );
        self
    }

    /// Checks the template: a program, known placeholders, balanced braces, no hook-skipping
    /// flag, and a conversation only with Claude Code's stream-json both ways. Called when a profile is deserialized; [`AgentProfile::argv`] checks again, since
    /// a profile built in code skips deserialization.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.command.first().is_none_or(|c| c.trim().is_empty()) {
            return Err(ProfileError::EmptyCommand);
        }
        for arg in &self.command {
            check_flag(OsStr::new(arg))?;
            for piece in pieces(arg)? {
                if let Piece::Var(name) = piece {
                    if !PLACEHOLDERS.contains(&name) {
                        return Err(ProfileError::UnknownPlaceholder {
                            name: name.to_owned(),
                            arg: arg.clone(),
                        });
                    }
                }
            }
        }
        if self.stdin == StdinMode::Conversation
            && (self.format != OutputFormat::ClaudeStreamJson || !self.takes_stream_json())
        {
            return Err(ProfileError::ConversationNeedsStreamJson);
        }
        Ok(())
    }

    /// Whether the command passes `--input-format stream-json` (or `--input-format=stream-json`).
    fn takes_stream_json(&self) -> bool {
        self.command
            .windows(2)
            .any(|w| w[0] == "--input-format" && w[1] == "stream-json")
            || self
                .command
                .iter()
                .any(|a| a == "--input-format=stream-json")
    }

    /// The command line for one run, placeholders expanded.
    ///
    /// The expanded arguments are checked for forbidden flags too: a model id of `--bare` must
    /// not get through either.
    pub fn argv(&self, vars: &Vars<'_>) -> Result<Vec<OsString>, ProfileError> {
        self.validate()?;
        let mut argv = Vec::with_capacity(self.command.len());
        for arg in &self.command {
            let mut out = OsString::new();
            for piece in pieces(arg)? {
                match piece {
                    Piece::Text(t) => out.push(t),
                    Piece::Var(name) => match expand(name, vars)? {
                        Some(value) => out.push(value),
                        None => {
                            return Err(ProfileError::UnknownPlaceholder {
                                name: name.to_owned(),
                                arg: arg.clone(),
                            })
                        }
                    },
                }
            }
            check_flag(&out)?;
            argv.push(out);
        }
        Ok(argv)
    }
}

/// The value of a placeholder; `None` for an unknown name.
fn expand<'a>(name: &str, vars: &Vars<'a>) -> Result<Option<&'a OsStr>, ProfileError> {
    Ok(Some(match name {
        "model" => OsStr::new(vars.model),
        "settings" => vars.settings.ok_or(ProfileError::NoSettings)?.as_os_str(),
        "worktree" => vars.worktree.as_os_str(),
        "run_dir" => vars.run_dir.as_os_str(),
        "prompt_file" => vars.prompt_file.as_os_str(),
        "prompt" => OsStr::new(vars.prompt),
        _ => return Ok(None),
    }))
}

/// Refuses `--bare`, `--safe-mode` and their `--flag=value` spellings.
fn check_flag(arg: &OsStr) -> Result<(), ProfileError> {
    let arg = arg.to_string_lossy();
    let name = arg.split_once('=').map_or(&*arg, |(name, _)| name);
    if FORBIDDEN_FLAGS.contains(&name) {
        return Err(ProfileError::ForbiddenFlag {
            flag: arg.into_owned(),
        });
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Splits a template argument into literal text and placeholder names.
fn pieces(arg: &str) -> Result<Vec<Piece<'_>>, ProfileError> {
    let unbalanced = || ProfileError::UnbalancedBrace {
        arg: arg.to_owned(),
    };
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(i) = rest.find(['{', '}']) {
        if i > 0 {
            out.push(Piece::Text(&rest[..i]));
        }
        let brace = &rest[i..i + 1];
        let after = &rest[i + 1..];
        if after.starts_with(brace) {
            // `{{` or `}}`: one literal brace.
            out.push(Piece::Text(brace));
            rest = &after[1..];
        } else if brace == "}" {
            return Err(unbalanced());
        } else {
            let end = after.find(['{', '}']).ok_or_else(unbalanced)?;
            if &after[end..end + 1] != "}" {
                return Err(unbalanced());
            }
            out.push(Piece::Var(&after[..end]));
            rest = &after[end + 1..];
        }
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}
