//! Start-up: rebuild the engine's indexes from the store, record steps that were running when
//! the previous daemon stopped as interrupted (their leftover process groups killed, their
//! worktrees to be reset to the step's starting commit), and sweep worktrees nobody needs.

use crate::domain::event::EventBody;
use crate::domain::model::{Phase, Status};

use super::Engine;
use crate::daemon::runner::BASE_FILE;

use crate::daemon::agent::PID_FILE;

impl Engine {
    /// Records the steps that were running when the previous daemon stopped as interrupted
    /// (killing their leftover process groups first) and sweeps worktrees nobody needs.
    /// Returns whether the interruptions were recorded; when the journal cannot be written
    /// they are recorded later by [`Engine::record_interruptions`].
    pub(super) fn recover(&mut self) -> bool {
        self.clear_interrupted_merge();
        let recorded = self.record_interruptions(true);
        self.sweep();
        recorded
    }

    /// Builds and records the interruption of every step whose phase is still `running`.
    /// `kill` kills their leftover groups: only on the first try, since a group id can be
    /// taken by a stranger once the old group is gone.
    pub(super) fn record_interruptions(&mut self, kill: bool) -> bool {
        let state = self.store.state();
        let active: Vec<_> = state
            .beads()
            .filter(|b| !b.is_step() && b.status == Status::InProgress)
            .filter(|b| state.steps(b.id.as_str()).next().is_some())
            .map(|b| b.id.clone())
            .collect();
        let mut events = Vec::new();
        for work in &active {
            for step in state.steps(work.as_str()) {
                let Some(meta) = step.step_meta() else {
                    continue;
                };
                if step.status != Status::InProgress {
                    continue;
                }
                let Some(Phase::Running { attempt, .. }) = meta.phase else {
                    continue;
                };
                let run_dir = self.paths.run_dir(work, &meta.step, attempt);
                if let Some(pgid) = read_number(&run_dir.join(PID_FILE)).filter(|_| kill) {
                    match crate::daemon::agent::kill_leftover_group(pgid) {
                        Ok(true) => {
                            tracing::info!(step = %step.id, pgid, "killed a leftover agent")
                        }
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(step = %step.id, pgid, error = %e, "cannot kill a leftover agent")
                        }
                    }
                }
                let reset_to = std::fs::read_to_string(run_dir.join(BASE_FILE))
                    .ok()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .or(meta.reset_to.clone());
                tracing::info!(step = %step.id, attempt, "step was running when the daemon stopped: interrupted");
                events.push(EventBody::StepInterrupted {
                    bead: work.clone(),
                    step: step.id.clone(),
                    attempt,
                    reset_to,
                });
                events.push(EventBody::BeadStatus {
                    id: step.id.clone(),
                    status: Status::Open,
                    reason: None,
                });
            }
        }
        self.active.extend(active);
        self.record(events).is_some()
    }

    /// A merge marker left by the previous daemon means it was killed during a merge: the
    /// lock files that merge held on the target are stale. (The bead itself merges first
    /// again, see `start_merges`.)
    fn clear_interrupted_merge(&mut self) {
        let marker = self.paths.state.join(super::schedule::MERGING_FILE);
        let Ok(since) = std::fs::metadata(&marker).and_then(|m| m.modified()) else {
            return;
        };
        let target = self.loaded.config.target_branch.clone();
        if let Err(e) = self.repo.clear_interrupted_merge_locks(&target, since) {
            tracing::warn!(error = %e, "cannot clear the locks of an interrupted merge");
        }
    }

    /// Removes worktrees and branches of beads that are closed and merged (or cancelled). A
    /// branch whose bead is unknown, open or blocked is kept.
    fn sweep(&mut self) {
        let listed = match self.repo.list() {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list worktrees for the start-up sweep");
                return;
            }
        };
        let target = self.loaded.config.target_branch.clone();
        for bead in listed {
            let Some(b) = self.store.state().get(bead.as_str()) else {
                continue;
            };
            if b.status != Status::Closed {
                continue;
            }
            let cancelled = b
                .close_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("cancelled"));
            if cancelled || self.repo.is_merged(&bead, &target).unwrap_or(false) {
                self.start_removal(&bead);
            }
        }
    }
}

fn read_number(path: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 1)
}
