//! Running an agent CLI (Claude Code, Codex, or anything that prints text) for one step, and
//! reading how it went (DESIGN §7).
//!
//! [`run`] is the whole life of one agent process:
//! - the prompt is written to `prompt.md` in the run folder, and to the agent's stdin (which is
//!   then closed) or onto its command line, as its [`AgentProfile`] says;
//! - the agent starts in the worktree, in a process group of its own, with the daemon's
//!   environment plus the profile's plus the step's `CATALYST_*` variables, and with
//!   `PR_SET_PDEATHSIG` so that it dies with the daemon (see `spawn` for why one long-lived
//!   thread forks every agent);
//! - stdout and stderr go to `stdout` and `stderr` in the run folder, each cut at
//!   [`RunSpec::output_cap`] with a marker line saying how much was dropped. stdout is parsed as
//!   it arrives, one line at a time with a bounded buffer, keeping only what the report needs,
//!   so memory does not grow with output size;
//! - a timeout, a stall (no output on either stream for [`RunSpec::stall_timeout`]) or the
//!   cancel token stops the agent: SIGTERM to the whole group, [`RunSpec::grace`] to exit, then
//!   SIGKILL to the group;
//! - whenever the leader has exited, on its own or not, the group is SIGKILLed once more: a
//!   background server or test runner it left behind would otherwise keep the worktree busy,
//!   and keep the output pipes open so the run never ended.
//!
//! [`outcome`] turns the [`RunReport`] into the router's `Outcome`; the engine stores the report
//! in the run folder as `report.json`. [`kill_leftover_group`] cleans up after a daemon that
//! died with agents running.

mod claude;
mod codex;
mod events;
mod group;
mod limits;
mod outcome;
mod output;
mod profile;
mod run;
mod spawn;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::time::Timestamp;

pub use events::{MAX_LINE, TEXT_TAIL};
pub use group::{kill_leftover_group, KillError};
pub use outcome::outcome;
pub use profile::{
    AgentProfile, OutputFormat, ProfileError, StdinMode, Vars, FORBIDDEN_FLAGS, PLACEHOLDERS,
};

/// The prompt's file in the run folder.
pub const PROMPT_FILE: &str = "prompt.md";
/// The agent's process group id, in the run folder while it runs (crash recovery kills it).
pub const PID_FILE: &str = "pid";
/// The agent's stdout in the run folder.
pub const STDOUT_FILE: &str = "stdout";
/// The agent's stderr in the run folder.
pub const STDERR_FILE: &str = "stderr";

/// Everything needed to run one agent for one step.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub profile: AgentProfile,
    pub model: String,
    pub prompt: String,
    /// The agent's working directory: the bead's worktree.
    pub worktree: PathBuf,
    /// The attempt's run folder (`runs/<bead>/<step>/<attempt>/`); created if missing.
    pub run_dir: PathBuf,
    /// Set last, over the daemon's environment and the profile's: `CATALYST_SOCKET`,
    /// `CATALYST_BEAD`, `CATALYST_STEP`, `CATALYST_ROLE`, `CATALYST_CONTEXT`.
    pub env: Vec<(String, String)>,
    /// The hook settings file `{settings}` expands to; required when the profile uses it.
    pub settings_path: Option<PathBuf>,
    /// The longest the agent may run, from spawn.
    pub timeout: Duration,
    /// The longest the agent may go without printing anything on stdout or stderr.
    pub stall_timeout: Duration,
    /// How long a stopped agent has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bytes kept of each of stdout and stderr.
    pub output_cap: u64,
}

/// How the agent process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited by itself with this code.
    Code(i32),
    /// It was killed by this signal, not by catalyst.
    Signal(i32),
    /// catalyst stopped it when [`RunSpec::timeout`] ran out.
    TimedOut { after_ms: u64 },
    /// catalyst stopped it after [`RunSpec::stall_timeout`] without output.
    Stalled { after_ms: u64 },
    /// catalyst stopped it because the cancel token fired.
    Cancelled,
    /// It never ran: the run folder, the command line or the spawn failed.
    SpawnFailed(String),
    /// Waiting for it failed; its group was killed.
    WaitFailed(String),
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(n) => match nix::sys::signal::Signal::try_from(*n) {
                Ok(signal) => write!(f, "killed by {}", signal.as_str()),
                Err(_) => write!(f, "killed by signal {n}"),
            },
            Exit::TimedOut { after_ms } => write!(f, "timed out after {}", human_ms(*after_ms)),
            Exit::Stalled { after_ms } => write!(f, "no output for {}", human_ms(*after_ms)),
            Exit::Cancelled => f.write_str("cancelled"),
            Exit::SpawnFailed(why) => write!(f, "could not start the agent: {why}"),
            Exit::WaitFailed(why) => write!(f, "lost track of the agent: {why}"),
        }
    }
}

/// `600s`, `1.5s`, `250ms`.
fn human_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// What happened in one run, as the daemon stores it (`report.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub exit: Exit,
    /// The agent's pid, which is also its process group id; 0 when it never started.
    pub pid: u32,
    pub started: Timestamp,
    pub duration_ms: u64,
    /// Claude: the `result` of the last `result` event. Codex: the text of the last completed
    /// `agent_message`. Text: all of stdout, or its last [`TEXT_TAIL`] bytes (from a line start)
    /// when stdout passed the cap.
    pub final_message: Option<String>,
    /// The agent reported a failure: Claude's `is_error` or an `error_*` subtype, a failed
    /// Codex turn or a fatal Codex `error` event.
    pub is_error: bool,
    /// The agent's own words about that failure, on one line.
    pub error: Option<String>,
    /// Why the agent could not work: a rate or usage limit, or an overloaded API.
    pub usage_limit: Option<String>,
    pub cost_usd: Option<f64>,
    /// Token usage as the agent reported it (Claude's `usage`, Codex's `turn.completed`).
    pub usage: Option<serde_json::Value>,
    /// Bytes the agent wrote, including any dropped at the cap.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Whether either stream passed [`RunSpec::output_cap`].
    pub truncated: bool,
}

impl RunReport {
    fn empty(exit: Exit) -> RunReport {
        RunReport {
            exit,
            pid: 0,
            started: Timestamp::now(),
            duration_ms: 0,
            final_message: None,
            is_error: false,
            error: None,
            usage_limit: None,
            cost_usd: None,
            usage: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
        }
    }
}

/// Runs one agent to its end; see the module documentation. Never fails: a run that could not
/// start is reported as [`Exit::SpawnFailed`].
///
/// `cancel` stops the agent (SIGTERM, grace, SIGKILL) and reports [`Exit::Cancelled`]; whether
/// that means "shut down and resume later" or "drop the step" is the caller's decision. If the
/// returned future is dropped instead, the agent's group is SIGKILLed.
pub async fn run(spec: RunSpec, cancel: CancellationToken) -> RunReport {
    run::run(spec, cancel).await
}

#[cfg(test)]
mod tests;
