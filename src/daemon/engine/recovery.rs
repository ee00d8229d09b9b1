//! Start-up: steps that were running when the previous daemon stopped are recorded as
//! interrupted (their leftover process groups killed, their worktrees to be reset to the
//! step's starting commit), and worktrees nobody needs are swept.
//!
//! The disk and git side runs in one blocking task; until it reports [`Recovered`], the
//! engine holds every other input and starts nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::daemon::agent::PID_FILE;
use crate::daemon::runner::BASE_FILE;
use crate::daemon::worktree::Repo;
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Phase, Status};

use super::error::EngineError;
use super::reports::Recovered;
use super::storage::Deferred;
use super::{Engine, Input};

/// A step that was running, as the task needs it.
struct WasRunning {
    step: BeadId,
    run_dir: PathBuf,
}

/// Everything the recovery task needs.
struct RecoveryJob {
    repo: Repo,
    target: String,
    marker: PathBuf,
    /// Where an older daemon left its marker.
    older_marker: PathBuf,
    running: Vec<WasRunning>,
    /// The run folders' root: agents of this workspace carry a path under it.
    runs: PathBuf,
    /// Closed beads, and whether each is done with its branch: cancelled, or merged as the
    /// journal records (a squashed or rebased bead's branch is never an ancestor of the
    /// target, so git alone cannot tell).
    closed: HashMap<BeadId, bool>,
}

impl Engine {
    /// Starts recovery: the engine holds its inputs until the task reports back.
    pub(super) fn recover(&mut self) {
        let state = self.store.state();
        let running = self
            .running_steps()
            .into_iter()
            .map(|(work, step, attempt)| {
                let name = state
                    .get(step.as_str())
                    .and_then(|s| s.step_meta())
                    .map(|m| m.step)
                    .unwrap_or_default();
                WasRunning {
                    run_dir: self.paths.run_dir(&work, &name, attempt),
                    step,
                }
            })
            .collect();
        let closed = state
            .beads()
            .filter(|b| b.status == Status::Closed)
            .map(|b| {
                let cancelled = b
                    .close_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("cancelled"));
                let done = cancelled || crate::domain::state::merged(b).is_some();
                (b.id.clone(), done)
            })
            .collect();
        let job = RecoveryJob {
            repo: self.repo.clone(),
            target: self.loaded.config.target_branch.clone(),
            marker: self.paths.merge_marker(),
            older_marker: self.paths.older_merge_marker(),
            runs: self.paths.runs(),
            running,
            closed,
        };
        self.intake.begin_recovery();
        self.tasks.blocking(
            move || Input::Recovered(Box::new(look(job))),
            |e| {
                tracing::error!(error = %e, "the recovery task failed; recording interruptions without it");
                Input::Recovered(Box::default())
            },
        );
    }

    /// The recovery task reported: record the interruptions, sweep, and handle what waited.
    pub(super) fn recovered(&mut self, recovered: Box<Recovered>) {
        if let Err(EngineError::Unwritten(_)) = self.record_interruptions(&recovered) {
            // Recorded later by the storage retry (no group is killed then: a group id can
            // be taken by a stranger once the old group is gone).
            let sweep = recovered.sweep.clone();
            self.storage.defer(Deferred::Recover(recovered));
            self.start_removals(&sweep);
        } else {
            self.start_removals(&recovered.sweep);
        }
        for input in self.intake.recovered() {
            self.handle(input);
        }
    }

    fn start_removals(&mut self, beads: &[BeadId]) {
        for bead in beads {
            self.start_removal(bead);
        }
    }

    /// Records the interruption of every step whose phase is still `running`, resetting it
    /// to the starting commit its run folder names (or the one it had).
    pub(super) fn record_interruptions(
        &mut self,
        recovered: &Recovered,
    ) -> Result<(), EngineError> {
        let state = self.store.state();
        let mut events = Vec::new();
        for (work, step, attempt) in self.running_steps() {
            let meta = state.get(step.as_str()).and_then(|s| s.step_meta());
            let reset_to = recovered
                .bases
                .get(&step)
                .cloned()
                .or(meta.and_then(|m| m.reset_to));
            tracing::info!(step = %step, attempt, "step was running when the daemon stopped: interrupted");
            events.push(EventBody::StepInterrupted {
                bead: work,
                step: step.clone(),
                attempt,
                reset_to,
            });
            events.push(EventBody::BeadStatus {
                id: step,
                status: Status::Open,
                reason: None,
            });
        }
        let active: Vec<BeadId> = state
            .beads()
            .filter(|b| !b.is_step() && b.status == Status::InProgress)
            .filter(|b| state.steps(b.id.as_str()).next().is_some())
            .map(|b| b.id.clone())
            .collect();
        self.active.extend(active);
        self.record(events).map(drop)
    }

    /// Steps in progress whose phase is `running`, of work beads in progress: (work, step,
    /// attempt).
    fn running_steps(&self) -> Vec<(BeadId, BeadId, u32)> {
        let state = self.store.state();
        let mut found = Vec::new();
        let works = state
            .beads()
            .filter(|b| !b.is_step() && b.status == Status::InProgress);
        for work in works {
            for step in state.steps(work.id.as_str()) {
                if step.status != Status::InProgress {
                    continue;
                }
                let Some(meta) = step.step_meta() else {
                    continue;
                };
                if let Some(Phase::Running { attempt, .. }) = meta.phase {
                    found.push((work.id.clone(), step.id.clone(), attempt));
                }
            }
        }
        found
    }
}

/// The recovery task: clears the locks of an interrupted merge, kills leftover agents and
/// reads their starting commits, and finds the worktrees to sweep.
fn look(job: RecoveryJob) -> Recovered {
    adopt_older_marker(&job.marker, &job.older_marker);
    clear_interrupted_merge(&job);
    let mut bases = HashMap::new();
    for was in &job.running {
        if let Some(pgid) = read_number(&was.run_dir.join(PID_FILE)) {
            match crate::daemon::agent::kill_leftover_group(pgid) {
                Ok(true) => tracing::info!(step = %was.step, pgid, "killed a leftover agent"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(step = %was.step, pgid, error = %e, "cannot kill a leftover agent")
                }
            }
        }
        let base = std::fs::read_to_string(was.run_dir.join(BASE_FILE))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        if let Some(base) = base {
            bases.insert(was.step.clone(), base);
        }
    }
    let orphans = crate::daemon::agent::kill_orphans(&job.runs);
    if orphans > 0 {
        tracing::info!(
            groups = orphans,
            "killed agents a previous daemon left without a pid file"
        );
    }
    Recovered {
        bases,
        sweep: sweep(&job),
    }
}

/// Makes the merge marker's folder (durably: a marker written later is fsynced into it, and a
/// power cut must not take the folder away with it), and moves a marker an older daemon left
/// in the state folder into it (a rename keeps its time, which tells a merge a kill
/// interrupted).
fn adopt_older_marker(marker: &Path, older: &Path) {
    if let Some(folder) = marker.parent() {
        if let Err(e) = crate::daemon::fsutil::create_dir_durable(folder) {
            tracing::warn!(path = %folder.display(), error = %e, "cannot make the merge marker's folder");
            return;
        }
    }
    if !older.exists() {
        return;
    }
    // Both exist only after a daemon of each kind was killed in a merge: the later one counts.
    let time = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let moved = if time(marker) > time(older) {
        std::fs::remove_file(older)
    } else {
        std::fs::rename(older, marker)
    };
    if let Err(e) = moved {
        tracing::warn!(path = %older.display(), error = %e, "cannot move an older daemon's merge marker");
    }
}

/// A merge marker left by the previous daemon means it was killed during a merge: the lock
/// files that merge held on the target are stale. (The bead itself merges first again, see
/// `merge`.)
fn clear_interrupted_merge(job: &RecoveryJob) {
    let Ok(since) = std::fs::metadata(&job.marker).and_then(|m| m.modified()) else {
        return;
    };
    if let Err(e) = job.repo.clear_interrupted_merge_locks(&job.target, since) {
        tracing::warn!(error = %e, "cannot clear the locks of an interrupted merge");
    }
}

/// Worktrees and branches of beads that are closed and merged (or cancelled). A branch whose
/// bead is unknown, open or blocked is kept, and so is a cancelled or merged bead's branch that
/// another store made (its bead of the same id is another bead).
fn sweep(job: &RecoveryJob) -> Vec<BeadId> {
    let listed = match job.repo.list() {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list worktrees for the start-up sweep");
            return Vec::new();
        }
    };
    listed
        .into_iter()
        .filter(|bead| match job.closed.get(bead) {
            None => false,
            Some(true) => job.repo.made_here(bead),
            Some(false) => job.repo.is_merged(bead, &job.target).unwrap_or(false),
        })
        .collect()
}

fn read_number(path: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn aged(path: &Path, bead: &str, secs_ago: u64) {
        std::fs::write(path, bead).expect("write a marker");
        let when = SystemTime::now() - Duration::from_secs(secs_ago);
        let file = std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open");
        file.set_modified(when).expect("set its time");
    }

    #[test]
    fn an_older_daemons_marker_is_moved_into_the_merge_folder_with_its_time() {
        let state = tempfile::tempdir().expect("tempdir");
        let paths = crate::daemon::paths::Paths::new(state.path());
        std::fs::create_dir_all(&paths.state).expect("state");
        let (marker, older) = (paths.merge_marker(), paths.older_merge_marker());
        adopt_older_marker(&marker, &older);
        assert!(
            marker.parent().expect("folder").is_dir(),
            "the folder is made"
        );
        assert!(!marker.exists());

        aged(&older, "cat-1", 60);
        let time = std::fs::metadata(&older)
            .and_then(|m| m.modified())
            .expect("time");
        adopt_older_marker(&marker, &older);
        assert!(!older.exists());
        assert_eq!(std::fs::read_to_string(&marker).expect("moved"), "cat-1");
        let moved = std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .expect("time");
        assert_eq!(moved, time, "a kill is told by the marker's time");

        // Both: the later one counts.
        aged(&older, "cat-2", 10);
        adopt_older_marker(&marker, &older);
        assert_eq!(std::fs::read_to_string(&marker).expect("marker"), "cat-2");
        aged(&older, "cat-3", 600);
        adopt_older_marker(&marker, &older);
        assert!(!older.exists());
        assert_eq!(std::fs::read_to_string(&marker).expect("marker"), "cat-2");
    }
}
