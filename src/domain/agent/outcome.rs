//! From a run's report to the router's [`Outcome`].

use crate::domain::model::Role;
use crate::domain::result;
use crate::domain::router::Outcome;

use super::limits::one_line;
use super::report::{Exit, RunReport};

/// How the step ended, for [`crate::domain::router::route`]; `None` for a cancelled run.
///
/// A cancelled run was interrupted by the daemon (shutdown, a person's `cancel`), not ended by
/// the agent: the engine re-queues or drops the step itself and never routes it, so it counts no
/// attempt (as the router's contract says of interruptions).
///
/// In order, the first that applies:
/// 1. cancelled → `None`;
/// 2. a failure retrying cannot fix (a refused key, an unreachable API, an agent CLI that
///    cannot start, a run folder the daemon cannot write) → [`Outcome::Unavailable`];
/// 3. the agent could not be started or waited for otherwise → [`Outcome::Failed`];
/// 4. a reported rate or usage limit → [`Outcome::UsageLimit`], even with a non-zero exit or
///    a timeout (Claude Code exits 1 on a limit, and may be killed while it retries one);
/// 5. timeout, stall, death by a signal, stopped as hopeless → `Failed` ("timed out after
///    600s", "no output for 120s", "killed by SIGSEGV");
/// 6. an error the agent reported (`is_error`, a failed Codex turn) → `Failed` ("agent reported
///    an error: …"), before the exit code because it says more;
/// 7. a non-zero exit → `Failed` ("exit code 3");
/// 8. no final message → [`Outcome::Malformed`] ("no final message");
/// 9. otherwise the final message's result block: [`Outcome::Finished`] or `Malformed` with
///    the parser's reason.
pub fn outcome(report: &RunReport, role: Role, worktree_changed: bool) -> Option<Outcome> {
    let failed = |reason: String| Some(Outcome::Failed { reason });
    if report.exit == Exit::Cancelled {
        return None;
    }
    if let Some(h) = &report.unavailable {
        return Some(Outcome::Unavailable {
            cause: h.cause,
            reason: h.reason.clone(),
        });
    }
    if let Exit::SpawnFailed(_) | Exit::WaitFailed(_) = &report.exit {
        return failed(report.exit.to_string());
    }
    if let Some(reason) = &report.usage_limit {
        return Some(Outcome::UsageLimit {
            reason: reason.clone(),
        });
    }
    match report.exit {
        Exit::TimedOut { .. } | Exit::Stalled { .. } | Exit::Signal(_) | Exit::Hopeless => {
            return failed(report.exit.to_string())
        }
        _ => {}
    }
    if report.is_error {
        let detail = report
            .error
            .as_deref()
            .or(report.final_message.as_deref())
            .map(one_line)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "no details".into());
        return failed(format!("agent reported an error: {detail}"));
    }
    if report.exit != Exit::Code(0) {
        return failed(report.exit.to_string());
    }
    let Some(message) = &report.final_message else {
        return Some(Outcome::Malformed {
            reason: "no final message".into(),
        });
    };
    Some(match result::parse(message, Some(role)) {
        Ok(result) => Outcome::Finished {
            result,
            worktree_changed,
        },
        Err(e) => Outcome::Malformed {
            reason: e.to_string(),
        },
    })
}
