//! An agent attempt that runs on another machine: the [`AttemptOrder`] the daemon makes of a
//! job, the job a `catalyst worker` makes of the order, which then runs exactly as a local
//! attempt does ([`super::run_agent_step`]: same profile, hooks, sandbox, limits, judgement
//! and commit), and the daemon's side of such an attempt ([`run_on_worker`]), which ends as
//! a local one does, with a [`StepDone`] for the engine.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::daemon::agent::{Launcher, RunSpec, SandboxSpec, STDERR_FILE, STDOUT_FILE};
use crate::daemon::fsutil;
use crate::daemon::worktree::{self, transport, CommitId, Repo};
use crate::daemon::Paths;
use crate::domain::cluster::{
    attempt_ref, base_ref, AttemptEnd, AttemptOrder, Limits, Marker, WorkerPaths,
};
use crate::domain::context::{self, Change};
use crate::domain::model::Role;
use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

use super::agent_step::{final_message, merge_back, prepare_side, write_inputs, ResultRecord};
use super::job::{attempt_socket, PendingPrompt};
use super::{
    git, prepare_worktree, write_json, StepDone, StepJob, REPORT_FILE, RESULT_FILE, SETTINGS_FILE,
};

/// The whole patch of the change under review, in a run folder (as the local runner names it).
const CHANGE_FILE: &str = "change.diff";

impl StepJob {
    /// The order a worker runs this attempt from, starting at `base` (the daemon's side). The
    /// prompt is rendered here, with markers for the worker's paths; the earlier steps' final
    /// messages and the change under review are read here, where their files are. A worker
    /// holds it for `lease` without renewing.
    pub async fn order(
        &self,
        dispatch: String,
        model: &str,
        base: (&CommitId, &str),
        lease: Duration,
    ) -> Result<AttemptOrder, String> {
        let (base, base_ref) = base;
        let prompt = self.prompt.render_marked().await?;
        let mut context = self.context.clone();
        for (step, run) in context.earlier_steps.iter_mut().zip(&self.earlier_runs) {
            step.final_message = run.as_deref().and_then(final_message);
        }
        let change = match self.role {
            Role::Review | Role::Merge => {
                let (repo, tree, target) =
                    (self.repo.clone(), self.tree.clone(), self.target.clone());
                let found = tokio::task::spawn_blocking(move || repo.change(&tree, &target))
                    .await
                    .map_err(|e| format!("reading the change failed: {e}"))?;
                match found {
                    Ok((files, patch)) => {
                        let range =
                            format!("{}...{}", self.target, worktree::branch_name(&self.tree));
                        let full = PathBuf::from(Marker::RunDir.text()).join(CHANGE_FILE);
                        context.change = Some(Change::new(range, files, &patch, full));
                        Some(patch)
                    }
                    Err(e) => {
                        tracing::warn!(bead = %self.work, error = %e, "cannot put the change into the order");
                        None
                    }
                }
            }
            _ => None,
        };
        let spec = &self.spec;
        Ok(AttemptOrder {
            dispatch,
            work: self.work.clone(),
            step: self.step.clone(),
            tree: self.tree.clone(),
            step_name: self.step_name.clone(),
            role: self.role,
            attempt: self.attempt,
            model: model.to_owned(),
            base: base.to_string(),
            base_ref: base_ref.to_owned(),
            target: self.target.clone(),
            prompt,
            context,
            change,
            policy: self.policy.clone(),
            profile: spec.profile.clone(),
            model_id: spec.model.clone(),
            limits: Limits {
                timeout_secs: spec.timeout.as_secs(),
                stall_timeout_secs: spec.stall_timeout.as_secs(),
                grace_secs: spec.grace.as_secs(),
                output_cap_bytes: spec.output_cap,
                max_file_bytes: self.repo.max_file_bytes(),
                max_processes: spec.max_processes,
                nice: spec.nice,
            },
            lease_secs: lease.as_secs().max(1),
        })
    }

    /// The job a worker runs `order` as, in its own workspace `from` (the worker's side).
    pub fn from_order(order: &AttemptOrder, from: WorkerSources<'_>) -> StepJob {
        let run_dir = from
            .paths
            .run_dir(&order.work, &order.step_name, order.attempt);
        let worktree = from.repo.worktree_path(&order.tree);
        let context_md = run_dir.join(context::CONTEXT_MD);
        let context_json = run_dir.join(context::CONTEXT_JSON);
        let paths = WorkerPaths {
            worktree: &worktree,
            run_dir: &run_dir,
            context_md: &context_md,
            context_json: &context_json,
        };
        let prompt = PendingPrompt::Rendered(paths.fill(&order.prompt));
        let mut context = order.context.clone();
        if let Some(change) = &mut context.change {
            change.full_diff = run_dir.join(CHANGE_FILE);
        }
        let mut policy = order.policy.clone();
        policy.worktree = worktree.clone();
        policy.context = context_md.clone();
        let socket = attempt_socket(&run_dir);
        let sandbox = from.sandbox.map(|template| SandboxSpec {
            socket: socket.clone(),
            ..template.clone()
        });
        let env = vec![
            ("CATALYST_SOCKET".to_owned(), socket.display().to_string()),
            ("CATALYST_BEAD".to_owned(), order.work.to_string()),
            ("CATALYST_STEP".to_owned(), order.step.to_string()),
            ("CATALYST_ROLE".to_owned(), order.role.to_string()),
            (
                "CATALYST_CONTEXT".to_owned(),
                context_md.display().to_string(),
            ),
        ];
        let limits = &order.limits;
        let spec = RunSpec {
            profile: order.profile.clone(),
            model: order.model_id.clone(),
            prompt: String::new(),
            worktree: worktree.clone(),
            run_dir: run_dir.clone(),
            env,
            settings_path: Some(run_dir.join(SETTINGS_FILE)),
            timeout: Duration::from_secs(limits.timeout_secs),
            stall_timeout: Duration::from_secs(limits.stall_timeout_secs),
            grace: Duration::from_secs(limits.grace_secs),
            output_cap: limits.output_cap_bytes,
            sandbox,
            max_processes: limits.max_processes,
            nice: limits.nice,
        };
        StepJob {
            work: order.work.clone(),
            step: order.step.clone(),
            tree: order.tree.clone(),
            step_name: order.step_name.clone(),
            role: order.role,
            attempt: order.attempt,
            repo: from.repo.clone().with_max_file_bytes(limits.max_file_bytes),
            target: order.target.clone(),
            run_dir,
            socket,
            reset_to: Some(order.base.clone()),
            context,
            earlier_runs: Vec::new(),
            prompt,
            policy,
            settings: from.settings.clone(),
            spec,
            launcher: from.launcher.clone(),
            on_worker: true,
            given_change: order.change.clone(),
        }
    }
}

/// What a worker builds its jobs from: its own workspace (a clone of the shared remote), the
/// hook settings for its own binaries, the sandbox its profile asks for, and its launcher.
#[derive(Clone, Copy)]
pub struct WorkerSources<'a> {
    pub paths: &'a Paths,
    pub repo: &'a Repo,
    pub settings: &'a serde_json::Value,
    pub sandbox: Option<&'a SandboxSpec>,
    pub launcher: &'a Arc<Launcher>,
}

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
    ) -> Pin<Box<dyn Future<Output = Result<Pending, String>> + Send + '_>>;
    /// Tells whoever runs `dispatch` to stop, and stops waiting for its end.
    fn cancel(&self, dispatch: &str);
    /// A ref of the shared remote known to hold `commit`, if one is.
    fn known(&self, commit: &str) -> Option<String>;
    /// Notes that the shared remote's `reference` holds `commit`.
    fn remember(&self, commit: &str, reference: &str);
}

/// An order handed out: its end once a worker sends it, and when a worker last renewed its
/// lease (and which), once one has taken it.
pub struct Pending {
    pub end: oneshot::Receiver<AttemptEnd>,
    pub leases: watch::Receiver<Option<(String, std::time::Instant)>>,
}

/// One attempt of an agent step run by a worker, as the daemon sees it: the worktree made
/// ready at the step's starting commit (which goes to the shared remote), the run folder's
/// inputs written here too, the order handed out, and its end taken back: the worker's
/// commit fetched, checked to follow the start, and put on the branch; the run folder's
/// records written from what the worker sent. An attempt whose worker stops renewing its
/// lease, or that is cancelled, ends as interrupted (not counted).
pub async fn run_on_worker(
    mut job: StepJob,
    cancel: CancellationToken,
    remote: std::sync::Arc<dyn Remote>,
    model: String,
    started: impl FnOnce(String) + Send,
) -> StepDone {
    let side = job.tree != job.work;
    let prepared = if side {
        prepare_side(&job.repo, &job.tree, &job.work, &job.target).await
    } else {
        prepare_worktree(&job.repo, &job.tree, &job.target, job.reset_to.as_deref()).await
    };
    let base = match prepared {
        Ok(base) => base,
        Err(e) => return unavailable(&job, format!("cannot prepare the worktree: {e}")),
    };
    let mut done = end_without_outcome(&job, &base);
    if let Err(e) = write_inputs(&mut job, &base, None) {
        return unavailable(&job, format!("cannot write the run folder: {e}"));
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
                return unavailable(&job, format!("cannot push the starting commit: {e}"));
            }
            remote.remember(base.as_str(), &reference);
            reference
        }
    };
    let order = match job
        .order(
            dispatch.clone(),
            &model,
            (&base, &reference),
            remote.lease(),
        )
        .await
    {
        Ok(order) => order,
        Err(reason) => return unavailable(&job, reason),
    };
    let Pending { end, mut leases } = match remote.send(order).await {
        Ok(pending) => pending,
        Err(reason) => return unavailable(&job, format!("cannot hand the attempt out: {reason}")),
    };
    let lease = remote.lease();
    let mut check = tokio::time::interval((lease / 3).max(Duration::from_millis(100)));
    let mut started = Some(started);
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
    record_end(&job, &end);
    done.exit = end.exit.clone();
    done.duration_ms = end.duration_ms;
    done.cost_usd = end.cost_usd;
    done.comment = end.comment.clone();
    done.tool_records = end.tool_records.clone();
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
            Err(reason) => {
                outcome = Outcome::Failed { reason };
                commit = None;
            }
        }
    }
    done.outcome = Some(outcome);
    done.commit = commit;
    write_json(
        &job.run_dir.join(RESULT_FILE),
        &ResultRecord {
            outcome: &done.outcome,
            base: &done.base,
            commit: &done.commit,
        },
    );
    if side {
        let (repo, tree) = (job.repo.clone(), job.tree.clone());
        if let Err(e) = git(move || repo.remove(&tree)).await {
            tracing::warn!(step = %done.step, error = %e, "cannot remove the step's own worktree");
        }
        done.base = None;
    }
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

/// The attempt's end when the daemon could not hand it out: not the agent's failure.
fn unavailable(job: &StepJob, reason: String) -> StepDone {
    StepDone::unavailable(
        &job.work,
        &job.step,
        job.role,
        job.attempt,
        Unavailable::Preparation,
        reason,
    )
}

/// A name for this hand-out of the attempt, unique across the daemon's restarts.
fn dispatch_id(job: &StepJob) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{}-{nanos:x}", job.step, job.attempt)
}
