//! Running an agent CLI (Claude Code, Codex, or anything that prints text) for one step, and
//! reading how it went (docs/agents.md).
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

mod events;
mod group;
mod output;
mod priority;
mod run;
mod spawn;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::agent::profile::AgentProfile;
use crate::domain::agent::report::RunReport;
use crate::domain::agent::sandbox::{GitMounts, Network};

pub use events::{MAX_LINE, TEXT_TAIL};
pub use group::{kill_leftover_group, kill_orphans, pids_with_env, KillError};
#[cfg(test)]
pub(crate) use spawn::ChildSetup;

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
    /// The operating-system sandbox the agent runs in; `None` runs it unconfined.
    pub sandbox: Option<SandboxSpec>,
    /// The most processes (threads included) the attempt may have at once, enforced by a
    /// control group where the machine has one (see [`crate::daemon::cgroup`]); `None`: no limit.
    pub max_processes: Option<u32>,
    /// The niceness the agent's processes run at (0: the daemon's).
    pub nice: u32,
    /// How the answers of an agent whose profile holds a conversation on stdin are judged;
    /// `None` lets its first answer stand.
    pub conversation: Option<crate::domain::agent::conversation::Conversation>,
}

/// How one attempt is confined (see [`crate::domain::agent::sandbox`]).
#[derive(Clone, Debug)]
pub struct SandboxSpec {
    /// The `bwrap` program.
    pub bwrap: PathBuf,
    /// The daemon's state folder, hidden but for the run folder and the socket.
    pub state: PathBuf,
    /// The attempt's own socket (its hooks); none for a gate.
    pub socket: Option<PathBuf>,
    /// Set by the runner once the bead's worktree exists.
    pub git: Option<GitMounts>,
    /// Paths the agent may write besides its worktree and run folder.
    pub writable: Vec<PathBuf>,
    /// Folders to keep readable over the private `/tmp` and the hidden state folder.
    pub readable: Vec<PathBuf>,
    /// Files the daemon's secrets are in (the forge's token), shown empty inside.
    pub hidden: Vec<PathBuf>,
    pub network: Network,
    /// How a `model-only` network reaches the model; `None` for the others.
    pub net: Option<NetPlan>,
}

/// The model endpoints a `model-only` attempt reaches through the daemon (see
/// [`crate::daemon::netproxy`]).
#[derive(Clone, Debug)]
pub struct NetPlan {
    /// The program whose `__sandbox-net` runs inside the namespace
    /// ([`crate::daemon::load::forwarder`]).
    pub forwarder: PathBuf,
    /// Loopback model APIs, reached at the same address inside.
    pub forwards: Vec<std::net::SocketAddr>,
    /// The `host:port`s the HTTPS proxy connects to.
    pub hosts: Vec<String>,
    /// Told of each connection the proxy refuses.
    pub refused: Option<crate::daemon::netproxy::OnRefused>,
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
