//! Start-up: rebuild the engine's indexes from the store, record steps that were running when
//! the previous daemon stopped as interrupted (their leftover process groups killed, their
//! worktrees to be reset to the step's starting commit), and sweep worktrees nobody needs.

use crate::event::EventBody;
use crate::model::{Phase, Status};

use super::runner::BASE_FILE;
use super::Engine;

use crate::agent::PID_FILE;

impl Engine {
    pub(super) fn recover(&mut self) {
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
                if let Some(pgid) = read_number(&run_dir.join(PID_FILE)) {
                    match crate::agent::kill_leftover_group(pgid) {
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
        self.record(events);
        self.sweep();
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
