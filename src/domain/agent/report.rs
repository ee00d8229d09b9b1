//! What one agent run reports when it ends (`report.json` in its run folder).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::time::Timestamp;

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
    /// catalyst stopped it because its output showed a failure no retry can fix (a refused
    /// key, an unreachable API: [`RunReport::unavailable`] says which).
    Hopeless,
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
            Exit::Hopeless => f.write_str("stopped: it cannot reach or use its API"),
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
    /// Why no attempt can succeed until something outside the bead changes: a refused key, an
    /// unreachable API, an agent that cannot run as configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<crate::domain::unavailable::Hindrance>,
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
    /// The report of a run that never started (the agent was not spawned).
    pub fn empty(exit: Exit, started: Timestamp) -> RunReport {
        RunReport {
            exit,
            pid: 0,
            started,
            duration_ms: 0,
            final_message: None,
            is_error: false,
            error: None,
            usage_limit: None,
            unavailable: None,
            cost_usd: None,
            usage: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
        }
    }
}
