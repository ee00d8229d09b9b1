//! One attempt of an agent step: worktree, run folder inputs, the agent, the judgement and
//! the daemon's commit of its work.

use std::path::PathBuf;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::hook_socket::{self, Ask, HookSocket, ToolLog, NETWORK_EVENT};
use crate::daemon::agent;
use crate::daemon::fsutil;
use crate::daemon::netproxy::OnRefused;
use crate::daemon::worktree::{self, BranchMerge, CommitId, GitError};
use crate::domain::agent::attempt::POLICY_FILE;
use crate::domain::agent::outcome::outcome;
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::agent::unavailable;
use crate::domain::context::Change;
use crate::domain::id::BeadId;
use crate::domain::model::Role;
use crate::domain::prompt::PromptError;
use crate::domain::result::{ResultStatus, StepResult};
use crate::domain::router::{answer_sum, Outcome};
use crate::domain::unavailable::Unavailable;
use crate::protocol::HookParams;

use super::error::MergeBackError;
use super::job::fill_final_messages;
use super::{
    git, write_json, GitTaskError, Preparation, StepDone, StepJob, BASE_FILE, REPORT_FILE,
    RESULT_FILE, SETTINGS_FILE, TARGET_FILE,
};

/// What `result.json` holds.
#[derive(Serialize)]
struct ResultRecord<'a> {
    outcome: &'a Option<Outcome>,
    base: &'a Option<CommitId>,
    commit: &'a Option<CommitId>,
}

/// One attempt of an agent step, start to end. A step that ran beside others of its bead, in
/// a worktree of its own, has its work merged into the bead's branch, and its worktree removed.
pub async fn run_agent_step(job: StepJob, cancel: CancellationToken, ask: Ask) -> StepDone {
    if !job.beside() {
        return run_in_worktree(job, cancel, ask).await;
    }
    let (repo, tree) = (job.repo.clone(), job.tree.clone());
    let mut done = run_in_worktree(job, cancel, ask).await;
    // Its starting commit was in its own worktree, which is gone: an attempt that was cut
    // short starts again from the bead's branch, never resetting it (steps beside it may have
    // merged into it since).
    done.base = None;
    if let Err(e) = git(move || repo.remove(&tree)).await {
        tracing::warn!(step = %done.step, error = %e, "cannot remove the step's own worktree");
    }
    done
}

async fn run_in_worktree(mut job: StepJob, cancel: CancellationToken, ask: Ask) -> StepDone {
    let mut done = failed(&job, String::new());
    let (rendered, prepared) = match prepare_with_prompt(&job).await {
        Ok(both) => both,
        Err(e) => return unprepared(&job, format!("cannot prepare the worktree: {e}")),
    };
    job.spec.prompt = match rendered {
        // The step, its context file and its tool policy close the prompt, for every agent
        // (a `SessionStart` hook would cost a process per attempt, and Codex runs no hooks).
        Ok(prompt) => format!("{}\n\n{}\n", prompt.trim_end(), job.policy.session_text()),
        Err(reason) => return failed(&job, reason.to_string()),
    };
    let base = match prepared {
        Ok(base) => base,
        Err(e) => return unprepared(&job, format!("cannot prepare the worktree: {e}")),
    };
    done.base = Some(base.clone());
    let tools = ToolLog::new(&job.run_dir);
    // Served until the attempt ends.
    let _socket = match ready(&mut job, &base, ask, tools.clone()).await {
        Ok(socket) => socket,
        Err(reason) => {
            return StepDone {
                base: Some(base),
                ..unprepared(&job, reason)
            }
        }
    };
    // Dispatched ahead of its turn, the attempt waits here for an agent slot, its worktree and
    // run folder ready; the slot is held while the agent runs, not while it is judged.
    let slot = match &job.slots {
        Some(slots) => match slots.take(&cancel).await {
            Some(slot) => Some(slot),
            None => {
                forget_policy(&job);
                done.exit = Exit::Cancelled.to_string();
                done.outcome = None;
                return done;
            }
        },
        None => None,
    };
    job.in_slot
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut report = agent::run(job.spec.clone(), cancel).await;
    if let Some(h) = report
        .unavailable
        .as_mut()
        .filter(|h| h.cause == Unavailable::Connection)
    {
        // A person reading the pause's reason needs to know which API was out of reach.
        let url = unavailable::api_url(&job.spec.profile, &|key| std::env::var(key).ok());
        h.reason = unavailable::naming_the_api(&h.reason, url.as_deref());
    }
    drop(slot);
    // What the hooks decided and the daemon was not told of yet: recorded with the end.
    done.tool_records = tools.take_new();
    forget_policy(&job);
    write_json(&job.run_dir.join(REPORT_FILE), &report);
    if job.spec.sandbox.is_some() {
        let (repo, tree, private) = (
            job.repo.clone(),
            job.tree.clone(),
            job.run_dir.join(SANDBOX_DIR),
        );
        if let Err(e) = git(move || repo.adopt_sandbox_ref(&tree, &private)).await {
            tracing::warn!(bead = %job.work, error = %e, "cannot take the commits made in the sandbox");
        }
    }
    done.exit = report.exit.to_string();
    done.duration_ms = report.duration_ms;
    done.cost_usd = report.cost_usd;
    if report.exit == Exit::Cancelled {
        done.outcome = None;
        return done;
    }
    let Judged {
        outcome,
        commit,
        comment,
        answer,
    } = judge(&job, &report, &base).await;
    done.comment = comment;
    done.answer = answer;
    let (outcome, commit) = match commit {
        Some(_) if job.beside() => merge_back(&job).await.map_or_else(
            |e| {
                let reason = e.to_string();
                (Outcome::Failed { reason }, None)
            },
            |merged| (outcome, Some(merged)),
        ),
        _ => (outcome, commit),
    };
    done.outcome = Some(outcome);
    done.commit = commit;
    write_result(&job, &done);
    done
}

/// Renders the prompt and makes the worktree ready, one after the other in one blocking task:
/// each hand-off to a blocking thread costs two thread wake-ups, and the render takes tens
/// of microseconds (see `PendingPrompt::render_now`) while the attempt waits for its slot.
/// The error: the task panicked.
async fn prepare_with_prompt(
    job: &StepJob,
) -> Result<(Result<String, PromptError>, Result<CommitId, GitError>), tokio::task::JoinError> {
    let prompt = job.prompt.clone();
    let preparation = Preparation::of(job);
    tokio::task::spawn_blocking(move || (prompt.render_now(), preparation.run())).await
}

/// Removes the attempt's policy file: hooks of a process the agent left behind decide nothing
/// any more; without the policy they ask the daemon, which denies a step that is not running.
fn forget_policy(job: &StepJob) {
    if let Err(e) = std::fs::remove_file(job.run_dir.join(POLICY_FILE)) {
        tracing::warn!(step = %job.step, error = %e, "cannot remove the attempt's policy file");
    }
}

/// The run folder's `result.json`: the attempt's outcome, start and commit.
pub(super) fn write_result(job: &StepJob, done: &StepDone) {
    write_json(
        &job.run_dir.join(RESULT_FILE),
        &ResultRecord {
            outcome: &done.outcome,
            base: &done.base,
            commit: &done.commit,
        },
    );
}

/// Merges the work a step did in its own worktree into its bead's branch, as `git merge` would
/// when it needs nobody; returns the merge commit. When the work conflicts with what steps
/// beside it merged first, nothing is merged and the attempt fails, naming the files: its next
/// attempt starts from the bead's branch, with their work in it.
pub(super) async fn merge_back(job: &StepJob) -> Result<CommitId, MergeBackError> {
    let (repo, work, side) = (
        job.repo.clone(),
        job.work.clone(),
        worktree::branch_name(&job.tree),
    );
    match git(move || repo.merge_target_into_branch(&work, &side)).await {
        Ok(BranchMerge::Merged(commit) | BranchMerge::UpToDate(commit)) => Ok(commit),
        Ok(BranchMerge::Conflict { files }) => Err(MergeBackError::Conflict { files }),
        Err(e) => Err(MergeBackError::Git(e)),
    }
}

/// The attempt's end before its agent ran, for `reason`.
fn failed(job: &StepJob, reason: String) -> StepDone {
    StepDone::failed(&job.work, &job.step, job.role, job.attempt, reason)
}

/// The attempt's end when the daemon could not prepare it: not the agent's failure.
pub(super) fn unprepared(job: &StepJob, reason: String) -> StepDone {
    let (work, step) = (&job.work, &job.step);
    StepDone::unavailable(
        work,
        step,
        job.role,
        job.attempt,
        Unavailable::Preparation,
        reason,
    )
}

/// Everything between the worktree and the agent: the run folder's inputs (with the change
/// for the steps that judge it, and the target's tip for a merge), the sandbox's git paths
/// and the agent's own socket, which is served while the returned value lives. The error is
/// the attempt's failure reason.
async fn ready(
    job: &mut StepJob,
    base: &CommitId,
    ask: Ask,
    tools: Arc<ToolLog>,
) -> Result<HookSocket, String> {
    let patch = match job.given_change.take() {
        Some(patch) => Some(patch),
        None => change(job).await,
    };
    write_inputs(job, base, patch.as_deref())
        .and_then(|()| match job.role {
            Role::Merge => {
                let tip = job
                    .repo
                    .target_head(&job.target)
                    .map_err(std::io::Error::other)?;
                fsutil::write_atomic(&job.run_dir.join(TARGET_FILE), tip.as_str().as_bytes())
            }
            _ => Ok(()),
        })
        .map_err(|e| {
            format!(
                "cannot write the run folder `{}`: {e}",
                job.run_dir.display()
            )
        })?;
    confine(job)
        .await
        .map_err(|e| format!("cannot prepare the sandbox: {e}"))?;
    if let Some(net) = job.spec.sandbox.as_mut().and_then(|s| s.net.as_mut()) {
        net.refused = Some(tell_refused(job.step.clone(), ask.clone()));
    }
    hook_socket::start(&job.socket, job.step.clone(), ask, tools).map_err(|e| {
        format!(
            "cannot open the agent's socket `{}`: {e}",
            job.socket.display()
        )
    })
}

/// Records each connection the attempt's proxy refuses, as the daemon's own hook call (see
/// [`NETWORK_EVENT`]).
fn tell_refused(step: BeadId, ask: Ask) -> OnRefused {
    OnRefused(Arc::new(move |target: &str| {
        let params = HookParams {
            step: step.to_string(),
            event: NETWORK_EVENT.into(),
            payload: serde_json::json!({ "target": target }),
        };
        let asked = ask(params);
        tokio::spawn(async move {
            if let Err(e) = asked.await {
                tracing::warn!(error = %e.message, "cannot record a refused connection");
            }
        });
    }))
}

/// The whole patch of the bead's branch, in the run folder of a step that judges it.
pub(super) const CHANGE_FILE: &str = "change.diff";

/// For the steps that judge the work (review, merge): what the bead's branch changes against
/// the target, put into the context; returns the whole patch for the run folder. A git
/// failure leaves the context without it (the agent can still run `git diff`).
async fn change(job: &mut StepJob) -> Option<String> {
    let (change, patch) = read_change(job, job.run_dir.join(CHANGE_FILE)).await?;
    job.context.change = Some(change);
    Some(patch)
}

/// For a step that judges the work (review, merge): the change of its tree against the
/// target, for its context (the whole patch said to be at `full`), and the whole patch.
pub(super) async fn read_change(job: &StepJob, full: PathBuf) -> Option<(Change, String)> {
    if !matches!(job.role, Role::Review | Role::Merge) {
        return None;
    }
    let (repo, work, target) = (job.repo.clone(), job.tree.clone(), job.target.clone());
    match git(move || repo.change(&work, &target)).await {
        Ok((files, patch)) => {
            let range = format!("{}...{}", job.target, worktree::branch_name(&job.tree));
            Some((Change::new(range, files, &patch, full), patch))
        }
        Err(e) => {
            tracing::warn!(bead = %job.work, error = %e, "cannot put the change into the context");
            None
        }
    }
}

/// The attempt's private copy of its branch ref and reflogs, in the run folder.
const SANDBOX_DIR: &str = "sandbox";

/// Adds the git paths of the bead's worktree to a sandboxed attempt's spec.
async fn confine(job: &mut StepJob) -> Result<(), GitTaskError> {
    if job.spec.sandbox.is_none() {
        return Ok(());
    }
    let (repo, tree, private) = (
        job.repo.clone(),
        job.tree.clone(),
        job.run_dir.join(SANDBOX_DIR),
    );
    let mounts = git(move || repo.sandbox_mounts(&tree, &private)).await?;
    job.spec.env.extend(mounts.env());
    if let Some(sandbox) = &mut job.spec.sandbox {
        sandbox.git = Some(mounts);
    }
    Ok(())
}

/// What [`judge`] made of a finished agent.
struct Judged {
    outcome: Outcome,
    /// The daemon's commit of the agent's work, when it reported DONE.
    commit: Option<CommitId>,
    /// A comment for the bead about this attempt.
    comment: Option<String>,
    /// The attempt's [`answer_sum`], when it gave a final message.
    answer: Option<u32>,
}

/// The outcome of a finished agent, and the daemon's commit of its work when it reported DONE.
async fn judge(job: &StepJob, report: &RunReport, base: &CommitId) -> Judged {
    let judged = |outcome, commit, comment, changed| Judged {
        outcome,
        commit,
        comment,
        answer: report
            .final_message
            .as_deref()
            .map(|message| answer_sum(message, changed)),
    };
    let (repo, tree, base2) = (job.repo.clone(), job.tree.clone(), base.clone());
    let changed = match git(move || repo.changed_since(&tree, &base2)).await {
        Ok(changed) => changed,
        Err(e) => {
            let reason = format!("cannot inspect the worktree: {e}");
            return judged(Outcome::Failed { reason }, None, None, false);
        }
    };
    let Some(outcome) = outcome(report, job.role, changed) else {
        let reason = "cancelled".into();
        return judged(Outcome::Failed { reason }, None, None, changed);
    };
    let outcome = match (&outcome, &job.context.step.output) {
        (Outcome::Finished { result, .. }, Some(output))
            if result.status == ResultStatus::Done && !job.spec.worktree.join(output).exists() =>
        {
            // A DONE without the file the formula asks for is not believed.
            Outcome::Malformed {
                reason: format!("the step's output `{output}` is not in the worktree"),
            }
        }
        _ => outcome,
    };
    // Only roles that write get their work committed; what a read-only role left behind is
    // discarded by the next attempt's reset. A worktree the check above found unchanged has
    // nothing to commit, and is not read again.
    let summary = match &outcome {
        Outcome::Finished { result, .. }
            if changed && result.status == ResultStatus::Done && job.role.writes() =>
        {
            commit_summary(result)
        }
        _ => return judged(outcome, None, None, changed),
    };
    let message = format!(
        "{} {}: {summary}\n\nCatalyst-Step: {}/{}\n",
        job.work, job.step_name, job.step_name, job.attempt
    );
    let (repo, tree) = (job.repo.clone(), job.tree.clone());
    match git(move || repo.commit_all(&tree, &message)).await {
        Ok(commit) => judged(outcome, commit, None, changed),
        Err(e) => {
            let reason = format!("cannot commit the agent's work: {e}");
            // What the agent left is the bead's business: it is told in a comment.
            let comment =
                matches!(e, GitTaskError::Git(GitError::TooBig { .. })).then(|| reason.clone());
            judged(Outcome::Failed { reason }, None, comment, changed)
        }
    }
}

/// The SUMMARY on one line, as the daemon's commit subject.
fn commit_summary(result: &StepResult) -> String {
    let line: String = result
        .summary
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut subject: String = line.chars().take(100).collect();
    if subject.is_empty() {
        subject.push_str("done");
    }
    subject
}

/// Writes the run folder's inputs: starting commit, context files (with earlier steps' final
/// messages read from their run folders), prompt and hook settings.
pub(super) fn write_inputs(
    job: &mut StepJob,
    base: &CommitId,
    patch: Option<&str>,
) -> std::io::Result<()> {
    // Run folders are records, not state: nothing here is fsynced (a power cut that loses the
    // starting commit leaves the restart to reset the worktree to its branch's tip instead,
    // and git's own writes in the worktree are no more durable).
    std::fs::create_dir_all(&job.run_dir)?;
    if let Some(patch) = patch {
        fsutil::write_input(&job.run_dir.join(CHANGE_FILE), patch.as_bytes())?;
    }
    // A daemon that restarts resets the bead's worktree to it; a step in a worktree of its own
    // starts again from the bead's branch instead (see `run_agent_step`).
    if job.tree == job.work {
        fsutil::write_replace(&job.run_dir.join(BASE_FILE), base.as_str().as_bytes())?;
    }
    fill_final_messages(&mut job.context.earlier_steps, &job.earlier_runs);
    crate::daemon::rundir::write_context(&job.run_dir, &job.context)?;
    let settings = crate::domain::agent::settings::for_stdin(&job.settings, job.spec.profile.stdin);
    let settings = serde_json::to_vec_pretty(&settings).map_err(std::io::Error::other)?;
    fsutil::write_input(&job.run_dir.join(SETTINGS_FILE), &settings)?;
    let policy = serde_json::to_vec_pretty(&job.policy).map_err(std::io::Error::other)?;
    fsutil::write_input(&job.run_dir.join(POLICY_FILE), &policy)?;
    Ok(())
}
