//! The daemon's side of an agent attempt that runs on another machine ([`run_on_worker`]),
//! which ends as a local one does, with a [`StepDone`] for the engine; the order it sends is
//! made by [`super::order`].

use std::time::{Duration, Instant};

use std::future::Future;
use std::pin::Pin;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::daemon::agent::{STDERR_FILE, STDOUT_FILE};
use crate::daemon::fsutil;
use crate::daemon::worktree::{transport, CommitId};
use crate::domain::cluster::{attempt_ref, base_ref, AttemptEnd, AttemptOrder};
use crate::domain::id::BeadId;
use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

use super::agent_step::{merge_back, unprepared, write_inputs, write_result};
use super::order::order_of;
use super::{git, write_json, HandOutError, Preparation, StepDone, StepJob, REPORT_FILE};

/// The daemon's way to its workers (the cluster's bus implements it).
pub trait Remote: Send + Sync {
    /// The git repository the daemon and its workers share.
    fn url(&self) -> &str;
    /// How long a worker holds an attempt without renewing its lease.
    fn lease(&self) -> Duration;
    /// Hands `order` out to the workers of its model.
    fn send(
        &self,
        order: AttemptOrder,
    ) -> Pin<Box<dyn Future<Output = Result<Pending, HandOutError>> + Send + '_>>;
    /// Tells whoever runs `dispatch` to stop, and stops waiting for its end.
    fn cancel(&self, dispatch: &str);
    /// Whether the order of `dispatch` has left the queue: some worker took it (false when
    /// that cannot be told).
    fn taken(&self, dispatch: &str) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
    /// A ref of the shared remote known to hold `commit`, if one is.
    fn known(&self, commit: &str) -> Option<String>;
    /// Notes that the shared remote's `reference` holds `commit`.
    fn remember(&self, commit: &str, reference: &str);
    /// The bead's worktree is gone here: its refs in the shared remote may go too.
    fn retire(&self, work: &BeadId);
    /// How many workers said they were there lately (none: attempts wait for one).
    fn workers_seen(&self) -> usize;
}

/// An order handed out: its end once a worker sends it, and when a worker last renewed its
/// lease (and which), once one has taken it.
pub struct Pending {
    pub end: oneshot::Receiver<AttemptEnd>,
    pub leases: watch::Receiver<Option<(String, Instant)>>,
}

/// One attempt of an agent step run by a worker, as the daemon sees it: the worktree made
/// ready at the step's starting commit (which goes to the shared remote), the run folder's
/// inputs written here too, the order handed out, and its end taken back: the worker's
/// commit fetched, checked to follow the start, and put on the branch; the run folder's
/// records written from what the worker sent. An attempt whose worker stops renewing its
/// lease, or that is cancelled, ends as interrupted (not counted).
pub async fn run_on_worker(
    job: StepJob,
    cancel: CancellationToken,
    remote: std::sync::Arc<dyn Remote>,
    model: String,
    started: impl FnOnce(String) + Send,
) -> StepDone {
    if !job.beside() {
        return run_remote(job, cancel, remote, model, started).await;
    }
    // As a local step beside others of its bead (see `run_agent_step`): its worktree goes
    // however it ended, and it starts again from the bead's branch.
    let (repo, tree) = (job.repo.clone(), job.tree.clone());
    let mut done = run_remote(job, cancel, remote, model, started).await;
    done.base = None;
    if let Err(e) = git(move || repo.remove(&tree)).await {
        tracing::warn!(step = %done.step, error = %e, "cannot remove the step's own worktree");
    }
    done
}

async fn run_remote(
    mut job: StepJob,
    cancel: CancellationToken,
    remote: std::sync::Arc<dyn Remote>,
    model: String,
    started: impl FnOnce(String) + Send,
) -> StepDone {
    let side = job.beside();
    let preparation = Preparation::of(&job);
    let prepared = git(move || preparation.run()).await;
    let base = match prepared {
        Ok(base) => base,
        Err(e) => return unprepared(&job, format!("cannot prepare the worktree: {e}")),
    };
    let mut done = end_without_outcome(&job, &base);
    if let Err(e) = write_inputs(&mut job, &base, None) {
        return unprepared(&job, format!("cannot write the run folder: {e}"));
    }
    let dispatch = dispatch_id(&job);
    // The start goes to the shared remote, unless it holds it already (the commit of an
    // earlier attempt, or a start pushed before).
    let reference = match remote.known(base.as_str()) {
        Some(reference) => reference,
        None => {
            let reference = base_ref(&job.work, &job.step_name, job.attempt);
            let workspace = job.repo.workspace().to_owned();
            let pushed = transport::push(&workspace, remote.url(), base.as_str(), &reference);
            if let Err(e) = pushed.await {
                return unprepared(&job, format!("cannot push the starting commit: {e}"));
            }
            remote.remember(base.as_str(), &reference);
            reference
        }
    };
    let lease = remote.lease();
    let order = match order_of(&job, dispatch.clone(), &model, (&base, &reference), lease).await {
        Ok(order) => order,
        Err(reason) => return unprepared(&job, reason.to_string()),
    };
    let Pending { end, mut leases } = match remote.send(order).await {
        Ok(pending) => pending,
        Err(reason) => return unprepared(&job, format!("cannot hand the attempt out: {reason}")),
    };
    let mut check = tokio::time::interval((lease / 3).max(Duration::from_millis(100)));
    let mut started = Some(started);
    // When the order was first seen gone from the queue with no lease taken for it.
    let mut unleased: Option<Instant> = None;
    tokio::pin!(end);
    let end = loop {
        tokio::select! {
            Ok(()) = leases.changed(), if started.is_some() => {
                let taker = leases.borrow_and_update().as_ref().map(|(w, _)| w.clone());
                if let (Some(worker), Some(tell)) = (taker, started.take()) {
                    tell(worker);
                }
            }
            ended = &mut end => match ended {
                Ok(end) => break end,
                // The bus stopped (the daemon is stopping): interrupted.
                Err(_) => return done,
            },
            () = cancel.cancelled() => {
                remote.cancel(&dispatch);
                return done;
            }
            _ = check.tick() => {
                // Taken off the queue, but by no worker whose lease the daemon takes (one it
                // does not list, say): after a lease's time, it runs again.
                if leases.borrow().is_none() && remote.taken(&dispatch).await {
                    let since = *unleased.get_or_insert_with(Instant::now);
                    if since.elapsed() > lease {
                        tracing::warn!(step = %job.step, attempt = job.attempt, "a worker took the attempt but none the daemon trusts holds it; it runs again");
                        remote.cancel(&dispatch);
                        return done;
                    }
                }
                let lost = leases
                    .borrow_and_update()
                    .as_ref()
                    .filter(|(_, at)| at.elapsed() > lease)
                    .map(|(worker, _)| worker.clone());
                if let Some(worker) = lost {
                    tracing::warn!(step = %job.step, attempt = job.attempt, %worker, "the worker lost its lease; the attempt runs again");
                    remote.cancel(&dispatch);
                    return done;
                }
            }
        }
    };
    // An end that came before its first lease was seen still says who ran it.
    if let Some(tell) = started.take() {
        tell(end.worker.clone());
    }
    record_end(&job, &end);
    done.exit = end.exit.clone();
    done.duration_ms = end.duration_ms;
    done.cost_usd = end.cost_usd;
    done.comment = end.comment.clone();
    done.tool_records = end.tool_records.clone();
    if let Some(Outcome::Unavailable {
        cause: Unavailable::Preparation,
        reason,
    }) = &end.outcome
    {
        // Its fetch, worktree, run folder or sandbox failed on the worker's machine: the
        // worker's trouble, not the attempt's, nor the daemon's to pause for. It runs again,
        // not counted, on whichever worker takes it next (this one waits a while first).
        tracing::warn!(step = %job.step, attempt = job.attempt, worker = %end.worker, %reason, "a worker could not prepare the attempt; it runs again");
        done.comment = Some(format!(
            "worker `{}` could not prepare attempt {} of `{}`: {reason}; it runs again",
            end.worker, job.attempt, job.step_name
        ));
        return done;
    }
    let Some(mut outcome) = end.outcome.clone() else {
        return done;
    };
    let mut commit = None;
    if let Some(theirs) = &end.commit {
        match adopt(&job, remote.url(), theirs, &base).await {
            Ok(taken) => {
                let reference = attempt_ref(&job.work, &job.step_name, job.attempt);
                remote.remember(taken.as_str(), &reference);
                commit = Some(taken);
            }
            Err(reason) => outcome = Outcome::Failed { reason },
        }
    }
    if side && commit.is_some() {
        match merge_back(&job).await {
            Ok(merged) => commit = Some(merged),
            Err(e) => {
                outcome = Outcome::Failed {
                    reason: e.to_string(),
                };
                commit = None;
            }
        }
    }
    done.outcome = Some(outcome);
    done.commit = commit;
    write_result(&job, &done);
    done
}

/// The worker's commit, from the shared remote onto the tree's branch, once checked to follow
/// the attempt's start.
async fn adopt(
    job: &StepJob,
    url: &str,
    theirs: &str,
    base: &CommitId,
) -> Result<CommitId, String> {
    let commit = CommitId::parse(theirs).map_err(|e| format!("the worker's commit: {e}"))?;
    let reference = attempt_ref(&job.work, &job.step_name, job.attempt);
    let workspace = job.repo.workspace().to_owned();
    transport::fetch(&workspace, url, &[format!("+{reference}:{reference}")])
        .await
        .map_err(|e| format!("cannot fetch the worker's commit: {e}"))?;
    let (repo, tree, taken) = (job.repo.clone(), job.tree.clone(), commit.clone());
    let parent = git(move || repo.parent_of(&taken))
        .await
        .map_err(|e| format!("cannot read the worker's commit: {e}"))?;
    if parent.as_ref() != Some(base) {
        return Err(format!(
            "the worker's commit `{commit}` does not follow the attempt's start `{base}`"
        ));
    }
    let (repo, taken) = (job.repo.clone(), commit.clone());
    git(move || repo.reset_to(&tree, &taken))
        .await
        .map_err(|e| format!("cannot put the worker's commit on the branch: {e}"))?;
    Ok(commit)
}

/// The run folder's records of an attempt a worker ran: its report, and the end of its
/// output (the whole output stays on the worker).
fn record_end(job: &StepJob, end: &AttemptEnd) {
    if let Some(report) = &end.report {
        write_json(&job.run_dir.join(REPORT_FILE), report);
    }
    for (file, text) in [(STDOUT_FILE, &end.stdout), (STDERR_FILE, &end.stderr)] {
        if let Err(e) = fsutil::write_replace(&job.run_dir.join(file), text.as_bytes()) {
            tracing::warn!(step = %job.step, error = %e, "cannot write the worker's output");
        }
    }
}

/// The attempt's end with no outcome yet: an interruption, which runs again from `base`.
fn end_without_outcome(job: &StepJob, base: &CommitId) -> StepDone {
    StepDone {
        outcome: None,
        base: Some(base.clone()),
        ..StepDone::failed(&job.work, &job.step, job.role, job.attempt, String::new())
    }
}

/// A name for this hand-out of the attempt, unique across the daemon's restarts.
fn dispatch_id(job: &StepJob) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{}-{nanos:x}", job.step, job.attempt)
}
