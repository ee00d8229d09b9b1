//! Agent attempts as they travel to another machine (see [`crate::domain::cluster`]): the
//! order the daemon makes of a job ([`order_of`]), and the job a `catalyst worker` makes of an
//! order ([`job_from_order`]), which then runs exactly as a local attempt does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::agent::{RunSpec, SandboxSpec};
use crate::daemon::worktree::{CommitId, Repo};
use crate::daemon::Paths;
use crate::domain::cluster::{AttemptOrder, Limits, Marker, WorkerPaths};
use crate::domain::context;

use super::agent_step::{read_change, CHANGE_FILE};
use super::job::{attempt_env, attempt_socket, fill_final_messages, with_socket, PendingPrompt};
use super::{StepJob, SETTINGS_FILE};
use crate::domain::agent::conversation::Conversation;

/// The order a worker runs `job` from, starting at `base` (the commit and a ref of the shared
/// remote that holds it): the daemon's side. The prompt is rendered here, with markers for the
/// worker's paths; the earlier steps' final messages and the change under review are read
/// here, where their files are. A worker holds it for `lease` without renewing.
pub async fn order_of(
    job: &StepJob,
    dispatch: String,
    model: &str,
    base: (&CommitId, &str),
    lease: Duration,
) -> Result<AttemptOrder, super::RenderError> {
    let (base, base_ref) = base;
    let prompt = job.prompt.render_marked().await?;
    let mut context = job.context.clone();
    fill_final_messages(&mut context.earlier_steps, &job.earlier_runs);
    let full = PathBuf::from(Marker::RunDir.text()).join(CHANGE_FILE);
    let change = read_change(job, full).await.map(|(change, patch)| {
        context.change = Some(change);
        patch
    });
    let spec = &job.spec;
    let repo = job.repo.clone();
    let identity = tokio::task::spawn_blocking(move || repo.commit_identity())
        .await
        .map_err(|e| e.to_string())
        .and_then(|found| found.map_err(|e| e.to_string()));
    let (author, committer) = match identity {
        Ok((author, committer)) => (Some(author), Some(committer)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell the worker whom the commit names; it uses its own");
            (None, None)
        }
    };
    Ok(AttemptOrder {
        dispatch,
        work: job.work.clone(),
        step: job.step.clone(),
        tree: job.tree.clone(),
        step_name: job.step_name.clone(),
        role: job.role,
        attempt: job.attempt,
        model: model.to_owned(),
        base: base.to_string(),
        base_ref: base_ref.to_owned(),
        target: job.target.clone(),
        prompt,
        context,
        change,
        policy: job.policy.clone(),
        agent: job.agent.clone(),
        model_id: spec.model.clone(),
        limits: Limits {
            timeout_secs: spec.timeout.as_secs(),
            stall_timeout_secs: spec.stall_timeout.as_secs(),
            grace_secs: spec.grace.as_secs(),
            output_cap_bytes: spec.output_cap,
            max_file_bytes: job.repo.max_file_bytes(),
            max_processes: spec.max_processes,
            nice: spec.nice,
        },
        lease_secs: lease.as_secs().max(1),
        author,
        committer,
    })
}

/// The job a worker runs `order` as, in its own workspace `from` (the worker's side): the
/// same job the daemon would have built, with the worker's paths.
pub fn job_from_order(order: &AttemptOrder, from: WorkerSources<'_>) -> StepJob {
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
    let sandbox = with_socket(from.sandbox, &socket);
    let env = attempt_env(&socket, &order.work, &order.step, order.role, &context_md);
    let limits = &order.limits;
    let spec = RunSpec {
        profile: from.profile.clone(),
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
        conversation: Some(Conversation::new(order.role, &policy.contract)),
    };
    StepJob {
        work: order.work.clone(),
        step: order.step.clone(),
        tree: order.tree.clone(),
        step_name: order.step_name.clone(),
        role: order.role,
        attempt: order.attempt,
        repo: with_identity(from.repo, order).with_max_file_bytes(limits.max_file_bytes),
        target: order.target.clone(),
        run_dir,
        socket,
        reset_to: Some(order.base.clone()),
        context,
        earlier_runs: Vec::new(),
        prompt,
        policy,
        settings: from.settings.clone(),
        agent: order.agent.clone(),
        spec,
        slots: None,
        in_slot: Arc::default(),
        on_worker: true,
        given_change: order.change.clone(),
    }
}

/// The worker's repository, its commits naming whom `order` says (a name that does not read
/// as `Name <email>` leaves the worker's own).
fn with_identity(repo: &Repo, order: &AttemptOrder) -> Repo {
    use crate::domain::config::merge::Identity;
    let committer = order
        .committer
        .as_deref()
        .and_then(|c| Identity::parse(c, "committer").ok());
    let author = order
        .author
        .as_deref()
        .and_then(|a| Identity::parse(a, "author").ok());
    match committer {
        Some(committer) => repo.clone().with_identity(author, committer),
        None => repo.clone(),
    }
}

/// What a worker builds its jobs from: its own workspace (a clone of the shared remote), the
/// hook settings for its own binaries, its own profile of the name the order asks for (with
/// the order's caps and tools), and the sandbox that profile asks for.
#[derive(Clone, Copy)]
pub struct WorkerSources<'a> {
    pub paths: &'a Paths,
    pub repo: &'a Repo,
    pub settings: &'a serde_json::Value,
    pub profile: &'a crate::domain::agent::profile::AgentProfile,
    pub sandbox: Option<&'a SandboxSpec>,
}
