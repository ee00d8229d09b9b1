//! A few counts that say what the daemon is doing, for service managers (`STATUS=` lines of
//! sd_notify) and anything else that wants a one-line answer without the full `status`.

use std::fmt;

use serde::Serialize;

use crate::domain::model::{Phase, Status};

use super::Engine;

/// What the daemon is doing, in counts of work beads (steps are not counted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Steps with an agent or gate running now.
    pub running: usize,
    /// Work beads ready to start.
    pub ready: usize,
    /// Work beads whose molecule is in progress.
    pub in_progress: usize,
    /// Work beads that wait for a person (`blocked`).
    pub blocked: usize,
    /// Approval steps waiting for `ctl approve` / `ctl reject`.
    pub waiting_approval: usize,
    pub paused: bool,
    pub stopping: bool,
    /// The journal cannot be written: nothing is dispatched.
    pub storage_error: bool,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.stopping {
            f.write_str("stopping: ")?;
        }
        write!(
            f,
            "running {}, ready {}, in progress {}, blocked {}",
            self.running, self.ready, self.in_progress, self.blocked
        )?;
        if self.waiting_approval > 0 {
            write!(f, ", waiting for approval {}", self.waiting_approval)?;
        }
        if self.paused {
            f.write_str("; paused")?;
        }
        if self.storage_error {
            f.write_str("; cannot write the journal")?;
        }
        Ok(())
    }
}

impl Engine {
    /// Counts the summary. Linear in the number of beads (the blocked count has no index), so
    /// callers ask for it at a bounded rate.
    pub(super) fn counts(&self) -> Summary {
        let state = self.store.state();
        let blocked = state
            .beads()
            .filter(|b| !b.is_step() && b.status == Status::Blocked)
            .count();
        let waiting_approval = self
            .active
            .iter()
            .flat_map(|w| state.steps(w.as_str()))
            .filter(|s| s.step_meta().and_then(|m| m.phase) == Some(Phase::WaitingApproval))
            .count();
        Summary {
            running: self.dispatch.running.len(),
            ready: state.ready(crate::daemon::clock::now()).count(),
            in_progress: self.active.len(),
            blocked,
            waiting_approval,
            paused: self.dispatch.paused,
            stopping: self.shutdown.stopping,
            storage_error: self.storage.error.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_names_counts_and_conditions() {
        let mut s = Summary {
            running: 2,
            ready: 1,
            in_progress: 3,
            blocked: 0,
            ..Default::default()
        };
        assert_eq!(
            s.to_string(),
            "running 2, ready 1, in progress 3, blocked 0"
        );
        s.waiting_approval = 1;
        s.paused = true;
        s.stopping = true;
        assert_eq!(
            s.to_string(),
            "stopping: running 2, ready 1, in progress 3, blocked 0, waiting for approval 1; paused"
        );
    }
}
