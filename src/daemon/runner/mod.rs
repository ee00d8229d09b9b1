//! The tasks that carry out one attempt of a step: the bead's worktree is made ready at the
//! step's starting commit, the context files and prompt are written, the agent (or the gate's
//! commands) runs, and the daemon commits what an agent that reported DONE left behind.
//!
//! A task never touches the engine's state: it gets a [`StepJob`] or [`GateJob`] built from
//! the parts it needs ([`JobSources`]) and returns a [`StepDone`], which the engine receives
//! as one of its inputs.

mod agent_step;
mod error;
mod gate;
pub mod hook_socket;
mod job;
mod order;
mod remote;
mod slots;

use std::path::Path;

use serde::Serialize;

use crate::daemon::fsutil;
use crate::daemon::worktree::{self, CommitId, Repo};
use crate::domain::agent::attempt::ToolRecord;
use crate::domain::id::BeadId;
use crate::domain::model::Role;
use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

pub use agent_step::run_agent_step;
pub use error::{GitTaskError, HandOutError, JobError, RenderError};
pub use gate::{run_gate_step, GateJob};
pub use job::{gate_sandbox_template, sandbox_template, JobSources, StepJob};
pub use order::{job_from_order, WorkerSources};
pub use remote::{run_on_worker, Pending, Remote};
pub use slots::{AgentSlot, AgentSlots};

/// The starting commit of an attempt, in its run folder (crash recovery reads it back).
pub const BASE_FILE: &str = "base";
/// The target branch's tip when a merge step's attempt started, in its run folder: if the
/// target has moved on by the time the daemon fast-forwards it, the attempt lost a race with
/// another bead's merge, which is not the agent's failure.
pub const TARGET_FILE: &str = "target";
/// The parsed result and outcome of an attempt, in its run folder.
pub const RESULT_FILE: &str = "result.json";
/// The agent's run report, in its run folder.
pub const REPORT_FILE: &str = "report.json";
/// The hook settings passed with `--settings`.
pub const SETTINGS_FILE: &str = "settings.json";

/// How an attempt ended, for the engine.
#[derive(Clone, Debug)]
pub struct StepDone {
    pub work: BeadId,
    pub step: BeadId,
    pub role: Role,
    pub attempt: u32,
    /// `None` when the attempt was cancelled (shutdown, or a person's cancel): an interruption,
    /// which the router never sees.
    pub outcome: Option<Outcome>,
    pub exit: String,
    pub duration_ms: u64,
    pub cost_usd: Option<f64>,
    /// The step's starting commit.
    pub base: Option<CommitId>,
    /// The commit the daemon made of the agent's work.
    pub commit: Option<CommitId>,
    /// A comment the daemon adds to the bead about this attempt (e.g. the file it would not
    /// commit).
    pub comment: Option<String>,
    /// Decisions the attempt's hooks made on their own that were not recorded yet.
    pub tool_records: Vec<ToolRecord>,
    /// A checksum of the agent's answer (`router::answer_sum`), when it gave one.
    pub answer: Option<u32>,
}

impl StepDone {
    /// An attempt that failed before anything ran.
    pub fn failed(
        work: &BeadId,
        step: &BeadId,
        role: Role,
        attempt: u32,
        reason: String,
    ) -> StepDone {
        let outcome = Outcome::Failed {
            reason: reason.clone(),
        };
        StepDone::before_start(work, step, role, attempt, outcome, reason)
    }

    /// An attempt that could not start for a reason outside the bead (the daemon could not
    /// prepare it, the agent cannot run as configured): no attempt is spent on it.
    pub fn unavailable(
        work: &BeadId,
        step: &BeadId,
        role: Role,
        attempt: u32,
        cause: Unavailable,
        reason: String,
    ) -> StepDone {
        let outcome = Outcome::Unavailable {
            cause,
            reason: reason.clone(),
        };
        StepDone::before_start(work, step, role, attempt, outcome, reason)
    }

    fn before_start(
        work: &BeadId,
        step: &BeadId,
        role: Role,
        attempt: u32,
        outcome: Outcome,
        reason: String,
    ) -> StepDone {
        StepDone {
            work: work.clone(),
            step: step.clone(),
            role,
            attempt,
            outcome: Some(outcome),
            exit: reason,
            duration_ms: 0,
            cost_usd: None,
            base: None,
            commit: None,
            comment: None,
            tool_records: Vec::new(),
            answer: None,
        }
    }
}

/// Runs the git side in a blocking thread.
pub(crate) async fn git<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, worktree::GitError> + Send + 'static,
) -> Result<T, GitTaskError> {
    tokio::task::spawn_blocking(f).await?.map_err(Into::into)
}

/// Makes the bead's worktree ready at the step's starting commit: created if missing, reset
/// to `reset_to` (an interrupted attempt's start) or to the branch tip, so that nothing a
/// failed attempt left behind leaks into this one.
async fn prepare_worktree(
    repo: &Repo,
    work: &BeadId,
    target: &str,
    reset_to: Option<&str>,
) -> Result<CommitId, GitTaskError> {
    let (repo, work, target) = (repo.clone(), work.clone(), target.to_owned());
    let reset_to = reset_to.map(str::to_owned);
    git(move || prepare_worktree_now(&repo, &work, &target, reset_to.as_deref())).await
}

/// What making an attempt's worktree ready needs, owned, for a blocking thread.
struct Preparation {
    repo: Repo,
    tree: BeadId,
    work: BeadId,
    target: String,
    reset_to: Option<String>,
    beside: bool,
}

impl Preparation {
    fn of(job: &StepJob) -> Preparation {
        Preparation {
            repo: job.repo.clone(),
            tree: job.tree.clone(),
            work: job.work.clone(),
            target: job.target.clone(),
            reset_to: job.reset_to.clone(),
            beside: job.beside(),
        }
    }

    /// Makes the worktree ready on the calling thread, which may block, and returns the
    /// attempt's starting commit: the step's own beside its bead's ([`prepare_side_now`]),
    /// else the bead's ([`prepare_worktree_now`]).
    fn run(&self) -> Result<CommitId, worktree::GitError> {
        if self.beside {
            prepare_side_now(&self.repo, &self.tree, &self.work, &self.target)
        } else {
            prepare_worktree_now(
                &self.repo,
                &self.tree,
                &self.target,
                self.reset_to.as_deref(),
            )
        }
    }
}

/// A fresh worktree for a step that runs beside others of its bead: branch
/// `catalyst/<step>` at the tip of the bead's branch, which is made first if this is the
/// bead's first step (a leftover of an attempt a crash cut short is removed first). Returns
/// its starting commit. Blocks.
fn prepare_side_now(
    repo: &Repo,
    tree: &BeadId,
    work: &BeadId,
    target: &str,
) -> Result<CommitId, worktree::GitError> {
    repo.create(work, target)?;
    repo.remove(tree)?;
    Ok(repo.create(tree, &worktree::branch_name(work))?.head)
}

/// [`prepare_worktree`] on the calling thread, which may block.
fn prepare_worktree_now(
    repo: &Repo,
    work: &BeadId,
    target: &str,
    reset_to: Option<&str>,
) -> Result<CommitId, worktree::GitError> {
    let tree = repo.create(work, target)?;
    let base = match reset_to.map(CommitId::parse) {
        Some(Ok(commit)) => Some(commit),
        // A base file from a crash that cannot be read back: start from the tip.
        Some(Err(e)) => {
            tracing::warn!(bead = %work, error = %e, "unreadable starting commit; using the branch tip");
            None
        }
        None => None,
    };
    match base {
        Some(base) => {
            // A worktree made just now (checked out, or a cleaned spare reset) at the
            // starting commit is already there, with nothing else in it: a worker's usual
            // case, whose every attempt names its start.
            if !(tree.fresh && tree.head == base) {
                repo.reset_to(work, &base)?;
            }
            Ok(base)
        }
        // The usual case: the worktree is clean at the tip after the daemon's last commit
        // (or just made). Only leftovers of a failed attempt (or a read-only role's stray
        // writes) need the reset, which costs a checkout.
        None => {
            if !tree.fresh && repo.changed_since(work, &tree.head)? {
                repo.reset_to(work, &tree.head)?;
            }
            Ok(tree.head)
        }
    }
}

/// Writes a run record; a record that cannot be written is logged, the attempt goes on.
fn write_json<T: Serialize>(path: &Path, value: &T) {
    let written = serde_json::to_vec_pretty(value)
        .map_err(std::io::Error::other)
        .and_then(|bytes| fsutil::write_replace(path, &bytes));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot write a run record");
    }
}
