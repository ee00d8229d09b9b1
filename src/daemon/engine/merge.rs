//! The daemon's fast-forward of the target for merge steps whose agent is done.
//!
//! Merges run one at a time: they all move the same target and update the same checkout of
//! it, which `Repo::merge_into_target` requires to be serialized. The bead whose merge is in
//! flight is written to the merge marker first (`merge/merging`, see `Paths::merge_marker`),
//! and the marker stays until that merge's outcome is settled (a merge that must wait keeps
//! it). A daemon killed half-way through updating the checkout leaves files that only that
//! bead's merge recognizes as its own, so that bead merges first, as a resumed merge
//! (`resume_merge_into_target`) that also overwrites files the kill cut short.
//!
//! Everything that touches the disk (the marker, git, the run folder's `target` file) runs in
//! one blocking task, which reports a [`MergeReport`]; the engine then decides from the state
//! and records.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::daemon::runner::{GitTaskError, TARGET_FILE};
use crate::daemon::worktree::{BranchMerge, CommitId, Landing, MergeGuard, MergeOutcome, Repo};
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Phase, Status};
use crate::domain::router::Outcome;
use crate::domain::time::Timestamp;
use crate::domain::workflow::WorkflowFiles;

use super::error::EngineError;
use super::reports::{MergeFailure, MergeRan, MergeReport};
use super::route::{block_events, comment_at, Attempt, Routed};
use super::{Engine, Input, Now};

/// How long to wait before trying again a merge whose marker could not be written.
const MARKER_RETRY: Duration = Duration::from_secs(1);

/// A bead whose merge step waits for the daemon's merge.
#[derive(Debug)]
struct Candidate {
    work: BeadId,
    step: BeadId,
    /// The run folder of the merge step's last attempt.
    run_dir: PathBuf,
    /// The branch tip a person approved for its workflow files, if any.
    approved: Option<CommitId>,
    /// Whether the formula wants steps run again when the daemon merges the target in.
    recheck: bool,
    /// How the bead lands on the target.
    landing: Landing,
}

/// Everything the merge task needs.
struct MergeJob {
    /// Beads waiting, by priority then age.
    candidates: Vec<Candidate>,
    marker: PathBuf,
    /// When this daemon started: a marker older than this was left by a killed one.
    started: SystemTime,
    repo: Repo,
    target: String,
    /// The files a change may touch only with a person's approval.
    workflow_files: Option<Arc<WorkflowFiles>>,
}

impl Engine {
    /// Starts the merge task for the beads whose merge step waits for the daemon.
    pub(super) fn start_merges(&mut self) {
        // With pull requests, the forge merges (`Engine::start_forge`).
        if !self.git.may_start() || self.merges_on_forge() {
            return;
        }
        let state = self.store.state();
        let mut waiting: Vec<(u8, Timestamp, Candidate)> = self
            .active
            .iter()
            .filter(|w| !self.dispatch.busy(w))
            .filter_map(|w| {
                let step = state.steps(w.as_str()).find(|s| {
                    s.status == Status::InProgress
                        && s.step_meta().and_then(|m| m.phase) == Some(Phase::Merging)
                })?;
                let meta = step.step_meta()?;
                let work = state.get(w.as_str())?;
                let run_dir = self.paths.run_dir(w, &meta.step, meta.attempts);
                let approved = meta
                    .hold
                    .as_ref()
                    .and_then(|h| h.approved_commit())
                    .and_then(|c| CommitId::parse(c).ok());
                let candidate = Candidate {
                    work: w.clone(),
                    step: step.id.clone(),
                    run_dir,
                    approved,
                    recheck: !meta.recheck.is_empty(),
                    landing: Landing {
                        strategy: meta.strategy.unwrap_or(self.loaded.config.merge.strategy),
                        title: work.title.clone(),
                    },
                };
                Some((work.priority, work.created_at, candidate))
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        waiting.sort_by(|a, b| (a.0, a.1, &a.2.work).cmp(&(b.0, b.1, &b.2.work)));
        let job = MergeJob {
            candidates: waiting.into_iter().map(|(_, _, c)| c).collect(),
            marker: self.paths.merge_marker(),
            started: self.started,
            repo: self
                .repo
                .clone()
                .with_identity_of(&self.loaded.config.merge),
            target: self.loaded.config.target_branch.clone(),
            workflow_files: self.loaded.workflow_files.clone(),
        };
        self.git
            .started(job.candidates.iter().map(|c| c.work.clone()));
        self.hold_publication();
        self.tasks.blocking(
            move || Input::MergeDone(Box::new(run_merge(job))),
            |e| Input::MergeDone(Box::new(MergeReport::Failed(GitTaskError::Panicked(e)))),
        );
    }

    /// The merge task ended: decide from the state, then record.
    pub(super) fn merge_done(&mut self, report: MergeReport) -> Result<(), EngineError> {
        self.git.ended();
        let now = Now::read();
        let ran = match report {
            MergeReport::Ran(ran) => ran,
            MergeReport::NotStarted => {
                self.git.retry_in(now.mono, MARKER_RETRY);
                return Ok(());
            }
            MergeReport::Failed(e) => {
                tracing::error!(error = %e, "the merge task failed; trying again later");
                self.git.retry_in(now.mono, MARKER_RETRY);
                return Ok(());
            }
        };
        let state = self.store.state();
        let (Some(bead), Some(step_bead)) = (
            state.get(ran.work.as_str()).cloned(),
            state.get(ran.step.as_str()).cloned(),
        ) else {
            return Ok(());
        };
        // An approved change to workflow files is in the target now: read them again.
        let approved_workflow_change = matches!(ran.result, Ok(MergeOutcome::Merged { .. }))
            && step_bead
                .step_meta()
                .and_then(|m| m.hold)
                .is_some_and(|h| h.approved);
        match self.merge_verdict(&bead, &step_bead, ran, now.wall) {
            MergeVerdict::Decided(routed) => {
                self.apply_routed(&bead.id, routed, now)?;
                if approved_workflow_change {
                    self.start_reload(None);
                }
                Ok(())
            }
            MergeVerdict::Wait { conflict, retry } => {
                self.git.retry_in(now.mono, retry);
                self.record(vec![conflict]).map(drop)
            }
        }
    }

    /// What a merge's outcome means for the bead, from the state at `now`.
    fn merge_verdict(
        &self,
        work: &Bead,
        step: &Bead,
        ran: MergeRan,
        now: Timestamp,
    ) -> MergeVerdict {
        let MergeRan {
            result,
            target_at_start,
            head,
            conflicts,
            rechecking,
            ..
        } = ran;
        let target = self.loaded.config.target_branch.clone();
        let retry = Duration::from_secs(self.loaded.config.dirty_target_retry_secs);
        let decided = |events| {
            MergeVerdict::Decided(Routed {
                events,
                pause: None,
            })
        };
        if rechecking {
            return decided(self.recheck_events(work, step, &target, now));
        }
        match result {
            Ok(MergeOutcome::Merged { from, to }) => {
                tracing::info!(bead = %work.id, %from, %to, "merged into `{target}`");
                decided(self.merged_events(work, step, target, from.to_string(), to.to_string()))
            }
            Ok(MergeOutcome::AlreadyMerged) => {
                let head = head.unwrap_or_default();
                decided(self.merged_events(work, step, target, head.clone(), head))
            }
            Ok(MergeOutcome::Held { commit, files }) => {
                tracing::warn!(bead = %work.id, ?files, "the change touches workflow files; its merge waits for `ctl approve`");
                decided(vec![EventBody::MergeHeld {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    commit: commit.to_string(),
                    files,
                }])
            }
            Ok(MergeOutcome::NotUpToDate { target: t, branch }) => {
                if !step.step_meta().is_some_and(|m| m.merge_agent) {
                    return decided(to_the_agent(work, step, target, conflicts, now));
                }
                if target_at_start.is_some_and(|s| s.trim() != t.as_str()) {
                    // Another bead's merge moved the target after this merge agent began: it
                    // lost a race, it did not fail. It runs again, not counted.
                    return decided(overtaken(work, step, target, t.as_str()));
                }
                let (tip, branch) = (t.as_str(), branch.as_str());
                self.not_up_to_date(work, step, &target, (tip, branch), &conflicts, now)
            }
            Ok(MergeOutcome::TargetDirty { files }) => {
                let reason = format!(
                    "`{target}` is checked out with uncommitted changes ({}); waiting, trying again in {}s",
                    files.join(", "),
                    retry.as_secs()
                );
                tracing::warn!(bead = %work.id, "{reason}");
                MergeVerdict::wait(&work.id, target, reason, retry)
            }
            Err(e) if e.transient => {
                let reason = format!(
                    "cannot move `{target}` yet: {}; trying again in {}s",
                    e.error,
                    retry.as_secs()
                );
                tracing::warn!(bead = %work.id, "{reason}");
                MergeVerdict::wait(&work.id, target, reason, retry)
            }
            Err(e) => {
                let reason = format!("cannot move `{target}`: {}", e.error);
                tracing::error!(bead = %work.id, "{reason}");
                decided(block_events(work, Some(&step.id), &reason, now))
            }
        }
    }

    /// The bead's branch cannot take `target` (a ref) without a merge agent: it gets its turn,
    /// or, when it had it, the attempt failed. `tips` are the target's and the branch's; the
    /// forge's pushes come here when the forge's target conflicts with the branch.
    pub(super) fn branch_conflicts(
        &mut self,
        work: &BeadId,
        step: &BeadId,
        target: &str,
        (tip, branch): (&str, &str),
        files: Vec<String>,
    ) -> Result<(), EngineError> {
        let now = Now::read();
        let state = self.store.state();
        let (Some(work_bead), Some(step_bead)) = (
            state.get(work.as_str()).cloned(),
            state.get(step.as_str()).cloned(),
        ) else {
            return Ok(());
        };
        let verdict = if step_bead.step_meta().is_some_and(|m| m.merge_agent) {
            self.not_up_to_date(
                &work_bead,
                &step_bead,
                target,
                (tip, branch),
                &files,
                now.wall,
            )
        } else {
            let events = to_the_agent(&work_bead, &step_bead, target.to_owned(), files, now.wall);
            MergeVerdict::Decided(Routed {
                events,
                pause: None,
            })
        };
        match verdict {
            MergeVerdict::Decided(routed) => self.apply_routed(work, routed, now),
            MergeVerdict::Wait { conflict, .. } => self.record(vec![conflict]).map(drop),
        }
    }

    /// The merge agent did not bring the branch up to date, and the daemon cannot either: a
    /// failed attempt of the step. `tips` are the target's and the branch's.
    fn not_up_to_date(
        &self,
        work: &Bead,
        step: &Bead,
        target: &str,
        (tip, branch): (&str, &str),
        conflicts: &[String],
        now: Timestamp,
    ) -> MergeVerdict {
        let Some(meta) = step.step_meta() else {
            return MergeVerdict::Decided(Routed {
                events: Vec::new(),
                pause: None,
            });
        };
        let reason = if conflicts.is_empty() {
            format!(
                "the merge agent finished, but `{target}` ({tip}) is still not merged into the bead's branch ({branch}) and the daemon could not merge it"
            )
        } else {
            format!(
                "the merge agent finished, but `{target}` ({tip}) still conflicts with the bead's branch ({branch}) in {}",
                conflicts.join(", ")
            )
        };
        let conflict = EventBody::MergeConflict {
            bead: work.id.clone(),
            target: target.to_owned(),
            reason: reason.clone(),
            step: None,
            files: Vec::new(),
        };
        let outcome = Outcome::Failed { reason };
        let attempt = Attempt {
            work,
            step,
            meta: &meta,
            number: meta.attempts,
            outcome: &outcome,
            answer: None,
        };
        let mut routed = self.routed(&attempt, now);
        routed.events.insert(0, conflict);
        MergeVerdict::Decided(routed)
    }

    /// The merge step closes, and the bead with it when that was its last step.
    fn merged_events(
        &self,
        work: &Bead,
        step: &Bead,
        target: String,
        from: String,
        to: String,
    ) -> Vec<EventBody> {
        let summary = step.step_meta().and_then(|m| m.summary);
        let mut events = vec![
            EventBody::MergeCompleted {
                bead: work.id.clone(),
                target: target.clone(),
                from,
                to,
            },
            EventBody::BeadStatus {
                id: step.id.clone(),
                status: Status::Closed,
                reason: Some(format!("merged into `{target}`")),
            },
        ];
        events.extend(self.close_if_done(
            work,
            &step.id,
            summary.or(Some(format!("merged into `{target}`"))),
        ));
        events
    }
}

/// What the engine does about a merge that ran.
enum MergeVerdict {
    /// Record the events and keep the indexes in step with them.
    Decided(Routed),
    /// The merge must wait: record the conflict and try again after `retry`.
    Wait {
        conflict: EventBody,
        retry: Duration,
    },
}

impl MergeVerdict {
    fn wait(work: &BeadId, target: String, reason: String, retry: Duration) -> MergeVerdict {
        MergeVerdict::Wait {
            conflict: EventBody::MergeConflict {
                bead: work.clone(),
                target,
                reason,
                step: None,
                files: Vec::new(),
            },
            retry,
        }
    }
}

impl Engine {
    /// The daemon merged the target into the branch and the formula wants its checks on the
    /// merged code: those steps open again, and so does the merge step, which runs after them.
    fn recheck_events(
        &self,
        work: &Bead,
        step: &Bead,
        target: &str,
        now: Timestamp,
    ) -> Vec<EventBody> {
        let names = step.step_meta().map(|m| m.recheck).unwrap_or_default();
        let reason = format!("`{target}` merged into the branch: checking the merged code again");
        let mut events: Vec<EventBody> = self
            .store
            .state()
            .steps(work.id.as_str())
            .filter(|s| s.step_meta().is_some_and(|m| names.contains(&m.step)))
            .map(|s| EventBody::BeadStatus {
                id: s.id.clone(),
                status: Status::Open,
                reason: Some(reason.clone()),
            })
            .collect();
        events.push(EventBody::BeadStatus {
            id: step.id.clone(),
            status: Status::Open,
            reason: Some(reason),
        });
        tracing::info!(bead = %work.id, steps = ?names, "merged `{target}` into the branch; running the checks again");
        events.push(comment_at(
            work,
            format!(
                "[daemon] MERGED `{target}` into the branch; running again before the merge: {}",
                names.join(", ")
            ),
            now,
        ));
        events
    }
}

/// The daemon could not merge the target into the branch itself: the merge step goes to the
/// merge agent, not counted as an attempt.
fn to_the_agent(
    work: &Bead,
    step: &Bead,
    target: String,
    conflicts: Vec<String>,
    now: Timestamp,
) -> Vec<EventBody> {
    let reason = if conflicts.is_empty() {
        format!("`{target}` cannot be merged into the bead's branch by the daemon; the merge agent merges it")
    } else {
        format!(
            "`{target}` and the bead's branch change the same lines in {}; the merge agent resolves them",
            conflicts.join(", ")
        )
    };
    tracing::info!(bead = %work.id, %reason, "merge conflict: calling the merge agent");
    // In the bead's comments, the merge agent's context says why it runs.
    let comment = comment_at(work, format!("[daemon] MERGE CONFLICT: {reason}"), now);
    vec![
        EventBody::MergeConflict {
            bead: work.id.clone(),
            target,
            reason,
            step: Some(step.id.clone()),
            files: conflicts,
        },
        comment,
    ]
}

/// A merge another bead's merge overtook: the step runs again, not counted.
fn overtaken(work: &Bead, step: &Bead, target: String, tip: &str) -> Vec<EventBody> {
    let reason = format!(
        "`{target}` moved on to {tip} while the merge agent worked; bringing the branch up to date again"
    );
    vec![
        EventBody::MergeConflict {
            bead: work.id.clone(),
            target,
            reason: reason.clone(),
            step: None,
            files: Vec::new(),
        },
        EventBody::StepRetry {
            bead: work.id.clone(),
            step: step.id.clone(),
            reason,
            counted: false,
            manual: false,
            not_before: None,
        },
        EventBody::BeadStatus {
            id: step.id.clone(),
            status: Status::Open,
            reason: None,
        },
    ]
}

/// Writes the merge marker, making its folder again (durably) if someone removed it.
fn write_marker(marker: &std::path::Path, work: &BeadId) -> std::io::Result<()> {
    use crate::daemon::fsutil::{create_dir_durable, write_atomic};
    match write_atomic(marker, work.as_str().as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(folder) = marker.parent() {
                create_dir_durable(folder)?;
            }
            write_atomic(marker, work.as_str().as_bytes())
        }
        written => written,
    }
}

/// The merge task: picks the bead (the one a marker names first), marks it, merges, reads
/// what the engine needs to judge the outcome, and drops the marker unless the merge waits.
fn run_merge(mut job: MergeJob) -> MergeReport {
    let marker = &job.marker;
    let marked = std::fs::read_to_string(marker).ok().and_then(|bead| {
        let since = std::fs::metadata(marker).and_then(|m| m.modified()).ok()?;
        let at = job
            .candidates
            .iter()
            .position(|c| c.work.as_str() == bead.trim());
        if at.is_none() {
            // That merge's outcome is recorded: the marker only outlived it.
            let _ = std::fs::remove_file(marker);
        }
        Some((at?, since))
    });
    let pick = marked.map_or(0, |(at, _)| at);
    // A marker written before this daemon started is a merge a kill interrupted: what it may
    // have cut short was written between then and this start.
    let interrupted = marked
        .map(|(_, since)| since)
        .filter(|since| *since < job.started)
        .map(|since| (since, job.started));
    let Candidate {
        work,
        step,
        run_dir,
        approved,
        recheck,
        landing,
    } = job.candidates.swap_remove(pick);
    let guard = MergeGuard {
        files: job.workflow_files.clone(),
        approved,
    };
    if marked.is_none() {
        if let Err(e) = write_marker(marker, &work) {
            tracing::error!(path = %marker.display(), error = %e, "cannot record the merge about to start; not merging");
            return MergeReport::NotStarted;
        }
    }
    let failure = |e: crate::daemon::worktree::GitError| MergeFailure {
        transient: e.is_transient(),
        error: e.into(),
    };
    let mut result = match interrupted {
        Some(window) => {
            job.repo
                .resume_merge_into_target(&work, &job.target, &guard, &landing, window)
        }
        None => job
            .repo
            .merge_into_target(&work, &job.target, &guard, &landing),
    }
    .map_err(failure);
    // Not up to date: the daemon merges the target into the branch itself when git can, and
    // moves the target then; the merge agent is called only for a conflict.
    let mut conflicts = Vec::new();
    let mut rechecking = false;
    if matches!(result, Ok(MergeOutcome::NotUpToDate { .. })) {
        match job.repo.merge_target_into_branch(&work, &job.target) {
            // The formula wants its checks on the merged code before the target moves.
            Ok(BranchMerge::Merged(_)) if recheck => rechecking = true,
            Ok(BranchMerge::Merged(_) | BranchMerge::UpToDate(_)) => {
                result = job
                    .repo
                    .merge_into_target(&work, &job.target, &guard, &landing)
                    .map_err(failure);
            }
            Ok(BranchMerge::Conflict { files }) => conflicts = files,
            Err(e) => {
                tracing::warn!(bead = %work, error = %e, "cannot merge the target into the bead's branch");
            }
        }
    }
    let target_at_start = match &result {
        Ok(MergeOutcome::NotUpToDate { .. }) => {
            std::fs::read_to_string(run_dir.join(TARGET_FILE)).ok()
        }
        _ => None,
    };
    let head = match &result {
        Ok(MergeOutcome::AlreadyMerged) => job.repo.head(&work).ok().map(|c| c.to_string()),
        _ => None,
    };
    // A merge that must wait keeps its marker (it goes first when it is tried again, and
    // files an interrupted checkout cut short stay recognizable); any other outcome ends the
    // merge. If the outcome is not recorded, the bead stays in phase `merging` and merges
    // again; a stale marker is dropped by the next merge task.
    let waits = matches!(result, Ok(MergeOutcome::TargetDirty { .. }))
        || matches!(&result, Err(e) if e.transient);
    if !waits {
        if let Err(e) = std::fs::remove_file(marker) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %marker.display(), error = %e, "cannot remove the merge marker");
            }
        }
    }
    MergeReport::Ran(MergeRan {
        work,
        step,
        result,
        target_at_start,
        head,
        conflicts,
        rechecking,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_written_even_when_its_folder_was_removed() {
        let state = tempfile::tempdir().expect("tempdir");
        let marker = state.path().join("merge").join("merging");
        let bead = BeadId::new("cat-1").expect("id");
        write_marker(&marker, &bead).expect("written into a new folder");
        assert_eq!(std::fs::read_to_string(&marker).expect("marker"), "cat-1");
    }
}
