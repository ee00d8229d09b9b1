//! Building an agent step's job at dispatch: the context (the bead's text, earlier steps,
//! feedback, comments), the rendered prompt and the agent's command.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::slots::AgentSlots;
use crate::daemon::agent::{NetPlan, RunSpec, SandboxSpec};
use crate::daemon::sandbox::BWRAP;
use crate::daemon::worktree::{self, Repo};
use crate::daemon::Paths;
use crate::domain::agent::attempt::AttemptPolicy;
use crate::domain::agent::profile::AgentProfile;
use crate::domain::agent::sandbox::{expand_path, url_endpoint, Network, SandboxKind};
use crate::domain::cluster::{AgentAsk, Marker};
use crate::domain::config::Config;
use crate::domain::context::{self, Context, EarlierStep, Feedback, FeedbackKind, StepInfo};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Role, Status, StepMeta};
use crate::domain::prompt::{PromptError, PromptSet, PromptVars};
use crate::domain::state::State;

use super::{JobError, RenderError, RESULT_FILE, SETTINGS_FILE};
use crate::domain::agent::conversation::Conversation;

/// What a job is built from: the state as of its dispatch and the daemon's settings.
#[derive(Clone, Copy, Debug)]
pub struct JobSources<'a> {
    /// Where a new bead's branch starts, and what its changes are told from: the target
    /// branch, or the forge's as last fetched.
    pub target: &'a str,
    pub state: &'a State,
    pub paths: &'a Paths,
    pub repo: &'a Repo,
    pub config: &'a Config,
    pub prompts: &'a Arc<PromptSet>,
    /// The `--settings` JSON: the hooks that ask the daemon.
    pub settings: &'a serde_json::Value,
    /// The profile's sandbox, as [`sandbox_template`] worked it out at load.
    pub sandbox: Option<&'a SandboxSpec>,
    /// The agent slots the attempt's agent takes to run.
    pub slots: &'a Arc<AgentSlots>,
}

/// Everything one agent attempt needs, built at dispatch.
#[derive(Debug)]
pub struct StepJob {
    pub(super) work: BeadId,
    pub(super) step: BeadId,
    /// Whose worktree the agent works in: the bead's, or the step's own when it runs beside
    /// other steps of its bead (its branch then starts at the bead's branch and is merged
    /// into it when the step is done).
    pub(super) tree: BeadId,
    pub(super) step_name: String,
    pub(super) role: Role,
    pub(super) attempt: u32,
    pub(super) repo: Repo,
    pub(super) target: String,
    pub(super) run_dir: PathBuf,
    /// The attempt's own socket (see [`attempt_socket`]).
    pub(super) socket: PathBuf,
    pub(super) reset_to: Option<String>,
    pub(super) context: Context,
    /// Run folders of earlier steps whose final messages go into the context.
    pub(super) earlier_runs: Vec<Option<PathBuf>>,
    /// The prompt, rendered by the attempt's task at its start (off the engine's task).
    pub(super) prompt: PendingPrompt,
    /// What the attempt's hooks decide from, written to the run folder.
    pub(super) policy: AttemptPolicy,
    pub(super) settings: serde_json::Value,
    /// The profile by name with this attempt's caps and tools, as an order names it (the
    /// spec's profile is it, resolved).
    pub(super) agent: AgentAsk,
    pub(super) spec: RunSpec,
    /// The agent slots its agent takes to run, waiting in line; `None` on a worker, whose
    /// orders the daemon's slots already count.
    pub(super) slots: Option<Arc<AgentSlots>>,
    /// Set once its agent has a slot (see [`StepJob::in_slot`]).
    pub(super) in_slot: Arc<AtomicBool>,
    /// Run by a `catalyst worker` for the daemon of another machine: the worktree is the
    /// tree's own, at the order's base, and the daemon merges a side step's work itself.
    pub(super) on_worker: bool,
    /// The patch under review, as the daemon worked it out (a worker's copy of the target
    /// may be behind).
    pub(super) given_change: Option<String>,
}

impl StepJob {
    /// Whether the step runs in a worktree of its own beside its bead's, whose work the
    /// attempt merges into the bead's branch (on a worker, the order's tree is the step's and
    /// the daemon merges).
    pub(super) fn beside(&self) -> bool {
        self.tree != self.work && !self.on_worker
    }

    /// Set once the attempt's agent has one of the engine's agent slots: until then its
    /// worktree and run folder may be ready, and it waits in line (`status` says so).
    pub fn in_slot(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.in_slot)
    }

    /// Builds the job for attempt `attempt` of `step` with `model`; `side`: in a worktree of
    /// its own beside the bead's.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        from: JobSources<'_>,
        work: &BeadId,
        step: &Bead,
        meta: &StepMeta,
        attempt: u32,
        model: &str,
        side: bool,
    ) -> Result<StepJob, JobError> {
        let config = from.config;
        let bead = from
            .state
            .get(work.as_str())
            .ok_or_else(|| JobError::BeadGone(work.clone()))?;
        let run_dir = from.paths.run_dir(work, &meta.step, attempt);
        let tree = if side { &step.id } else { work };
        let worktree = from.repo.worktree_path(tree);
        let (earlier_steps, earlier_runs) = earlier(from, work, &step.id);
        let context = Context {
            bead: bead.into(),
            step: StepInfo {
                id: step.id.clone(),
                step: meta.step.clone(),
                role: meta.role,
                title: step.title.clone(),
                description: step.description.clone(),
                formula: meta.formula.clone(),
                attempt,
                iteration: meta.iteration.unwrap_or(0),
                fixes: meta.fixes.clone(),
                output: meta.output.clone(),
            },
            earlier_steps,
            feedback: feedback(from.state, work),
            comments: bead.comments.iter().map(Into::into).collect(),
            change: None,
        };
        let vars = PromptVars {
            bead_id: work.clone(),
            step_id: step.id.clone(),
            step: meta.step.clone(),
            role: meta.role,
            model: model.to_owned(),
            attempt,
            iteration: meta.iteration.unwrap_or(0),
            worktree: worktree.clone(),
            branch: worktree::branch_name(tree),
            // What the agent diffs and merges against: with pull requests, the forge's target
            // as last fetched, since the local one is not moved.
            target_branch: from.target.to_owned(),
            context_md: run_dir.join(context::CONTEXT_MD),
            context_json: run_dir.join(context::CONTEXT_JSON),
            run_dir: run_dir.clone(),
            result_contract: from.prompts.contract().to_owned(),
        };
        let template = meta.prompt.as_deref().unwrap_or(meta.role.as_str());
        if !from.prompts.has(template) {
            return Err(PromptError::UnknownTemplate(template.to_owned()).into());
        }
        let prompt = PendingPrompt::Template {
            prompts: Arc::clone(from.prompts),
            template: template.to_owned(),
            vars: Box::new(vars),
        };
        let policy = AttemptPolicy::for_step(
            &config.role_policy(meta.role),
            &config.target_branch,
            &step.id,
            meta,
            attempt,
            worktree.clone(),
            &run_dir,
            from.prompts.contract(),
        );
        let socket = attempt_socket(&run_dir);
        let agent = agent_ask(config, from.state, bead, meta);
        let mut spec = run_spec(
            from,
            bead,
            (&step.id, meta),
            (model, &agent),
            &run_dir,
            &socket,
        )?;
        spec.worktree = worktree;
        spec.conversation = Some(Conversation::new(policy.role, &policy.contract));
        Ok(StepJob {
            work: work.clone(),
            step: step.id.clone(),
            tree: tree.clone(),
            step_name: meta.step.clone(),
            role: meta.role,
            attempt,
            repo: from
                .repo
                .clone()
                .with_max_file_bytes(config.max_file_bytes)
                .with_identity_of(&config.merge),
            target: from.target.to_owned(),
            run_dir,
            socket,
            reset_to: meta.reset_to.clone(),
            context,
            earlier_runs,
            prompt,
            policy,
            settings: from.settings.clone(),
            agent,
            spec,
            slots: Some(from.slots.clone()),
            in_slot: Arc::default(),
            on_worker: false,
            given_change: None,
        })
    }
}

/// The prompt of an attempt: a template and the values to render it with, or (on a worker)
/// the prompt the daemon rendered.
#[derive(Clone, Debug)]
pub enum PendingPrompt {
    Template {
        prompts: Arc<PromptSet>,
        template: String,
        vars: Box<PromptVars>,
    },
    Rendered(String),
}

impl PendingPrompt {
    /// Renders the prompt on the calling thread, which may block: a render is bounded (see
    /// [`crate::domain::prompt::FUEL`]) but may still take some milliseconds, so call it on a
    /// blocking thread. The usual prompt takes tens of microseconds.
    pub fn render_now(&self) -> Result<String, PromptError> {
        match self {
            PendingPrompt::Rendered(text) => Ok(text.clone()),
            PendingPrompt::Template {
                prompts,
                template,
                vars,
            } => prompts.render(template, vars),
        }
    }

    /// The prompt rendered with [`Marker`]s for the paths of the machine that runs it (see
    /// [`crate::domain::cluster`]).
    pub async fn render_marked(&self) -> Result<String, RenderError> {
        let marked = match self {
            PendingPrompt::Rendered(text) => return Ok(text.clone()),
            PendingPrompt::Template {
                prompts,
                template,
                vars,
            } => {
                let mut vars = vars.clone();
                vars.worktree = PathBuf::from(Marker::Worktree.text());
                vars.run_dir = PathBuf::from(Marker::RunDir.text());
                vars.context_md = PathBuf::from(Marker::ContextMd.text());
                vars.context_json = PathBuf::from(Marker::ContextJson.text());
                PendingPrompt::Template {
                    prompts: Arc::clone(prompts),
                    template: template.clone(),
                    vars,
                }
            }
        };
        Ok(tokio::task::spawn_blocking(move || marked.render_now()).await??)
    }
}

/// The agent of one attempt of `meta`'s step: the config's profile by name, with the turn
/// limit, what is left of the bead's, the day's and the total budget, and the role's tools.
fn agent_ask(config: &Config, state: &State, bead: &Bead, meta: &StepMeta) -> AgentAsk {
    AgentAsk {
        profile: config.agent.clone(),
        max_turns: config.turn_limit(),
        budget_left_usd: crate::domain::budget::left(
            &config.spending_limits(),
            state.spending(),
            crate::domain::state::spent(bead),
            &crate::daemon::clock::now(),
        ),
        tools: config
            .role_policy(meta.role)
            .tools_for(meta.tools.as_ref())
            .map(<[String]>::to_vec),
    }
}

/// The agent's command, environment and limits for one attempt; its prompt is rendered when
/// the attempt starts.
fn run_spec(
    from: JobSources<'_>,
    bead: &Bead,
    (step, meta): (&BeadId, &StepMeta),
    (model, agent): (&str, &AgentAsk),
    run_dir: &Path,
    socket: &Path,
) -> Result<RunSpec, JobError> {
    let config = from.config;
    let profile = agent.apply(config.profile()?);
    let context_md = run_dir.join(context::CONTEXT_MD);
    let env = attempt_env(socket, &bead.id, step, meta.role, &context_md);
    let sandbox = with_socket(from.sandbox, socket);
    Ok(RunSpec {
        profile,
        model: config.model_id(model).to_owned(),
        prompt: String::new(),
        worktree: from.repo.worktree_path(&bead.id),
        run_dir: run_dir.to_owned(),
        env,
        settings_path: Some(run_dir.join(SETTINGS_FILE)),
        timeout: Duration::from_secs(meta.timeout.unwrap_or(config.agent_timeout_secs)),
        stall_timeout: config.stall_timeout(),
        grace: config.grace(),
        output_cap: config.output_cap_bytes,
        sandbox,
        max_processes: config.process_limit(),
        nice: config.agent_nice,
        conversation: None,
    })
}

/// The `CATALYST_*` variables an attempt's agent gets: its socket, bead, step, role and
/// context file.
pub(super) fn attempt_env(
    socket: &Path,
    bead: &BeadId,
    step: &BeadId,
    role: Role,
    context_md: &Path,
) -> Vec<(String, String)> {
    vec![
        ("CATALYST_SOCKET".to_owned(), socket.display().to_string()),
        ("CATALYST_BEAD".to_owned(), bead.to_string()),
        ("CATALYST_STEP".to_owned(), step.to_string()),
        ("CATALYST_ROLE".to_owned(), role.to_string()),
        (
            "CATALYST_CONTEXT".to_owned(),
            context_md.display().to_string(),
        ),
    ]
}

/// The profile's sandbox (see [`sandbox_template`]) for an attempt with the socket `socket`.
pub(super) fn with_socket(template: Option<&SandboxSpec>, socket: &Path) -> Option<SandboxSpec> {
    template.map(|template| SandboxSpec {
        socket: Some(socket.to_owned()),
        ..template.clone()
    })
}

/// Where `program` is installed (the folder above its `bin/` or `debug/`), when the sandbox's
/// private `/tmp` or hidden state folder would cover it; `None` for a program elsewhere, which
/// the read-only root already shows. A program named without a path is looked up on `PATH`.
fn install_prefix(program: &Path, state: &Path) -> Option<PathBuf> {
    let found = if program.components().count() > 1 {
        program.to_owned()
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())?
    };
    let hidden = |p: &Path| p.starts_with("/tmp") || p.starts_with(state);
    if !hidden(&found) {
        return None;
    }
    found.parent()?.parent().map(Path::to_owned)
}

/// The attempt's own socket (see [`super::hook_socket`]): `hook.sock` in its run folder, or,
/// when that path is too long for a Unix socket, a name in the temporary folder derived from
/// it.
pub fn attempt_socket(run_dir: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let local = run_dir.join(HOOK_SOCKET);
    if local.as_os_str().len() <= crate::daemon::paths::MAX_SOCKET_PATH {
        return local;
    }
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    run_dir.hash(&mut hash);
    std::env::temp_dir().join(format!("catalyst-hook-{:016x}.sock", hash.finish()))
}

/// The attempt socket's name in the run folder.
const HOOK_SOCKET: &str = "hook.sock";

/// The sandbox a profile asks for, worked out once when the config is loaded (it reads the
/// environment and looks programs up on `PATH`); each attempt adds its socket, and the runner
/// its git paths once the worktree exists. `None` for a profile with `sandbox = "none"`.
pub fn sandbox_template(
    profile: &AgentProfile,
    paths: &Paths,
    catalyst: &Path,
) -> Option<SandboxSpec> {
    if profile.sandbox == SandboxKind::None {
        return None;
    }
    // The agent's environment: the profile's over the daemon's.
    let var = |name: &str| {
        profile
            .env
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
    };
    let writable = profile
        .writable
        .iter()
        .filter_map(|p| expand_path(p, &var))
        .collect();
    let net = (profile.network == Network::ModelOnly).then(|| {
        let mut plan = NetPlan {
            forwarder: crate::daemon::load::forwarder(catalyst),
            forwards: Vec::new(),
            hosts: profile.model_hosts.clone(),
            refused: None,
        };
        for url in ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"].iter().filter_map(|n| var(n)) {
            match url_endpoint(&url) {
                Some((host, port, true)) => {
                    let ip = if host == "localhost" { "127.0.0.1" } else { host.trim_matches(['[', ']']) };
                    if let Ok(ip) = ip.parse() {
                        plan.forwards.push(std::net::SocketAddr::new(ip, port));
                    }
                }
                Some((host, port, false)) => plan.hosts.push(format!("{host}:{port}")),
                None => tracing::warn!(%url, "a model base URL that is not http(s); the sandbox does not reach it"),
            }
        }
        plan.forwards.dedup();
        plan
    });
    let programs = profile
        .command
        .first()
        .map(PathBuf::from)
        .into_iter()
        .chain([catalyst.to_owned()]);
    let readable = programs
        .filter_map(|p| install_prefix(&p, &paths.state))
        .collect();
    Some(SandboxSpec {
        readable,
        bwrap: PathBuf::from(BWRAP),
        state: paths.state.clone(),
        socket: None,
        git: None,
        writable,
        hidden: Vec::new(),
        network: profile.network,
        net,
    })
}

/// The gates' sandbox, worked out when the config is loaded: the agents' confinement with no
/// socket, no model, the network `gate_network` says and, writable, only the worktree, a
/// private `/tmp` and `gate_writable`. The runner adds the repository's git folder, read-only.
/// `None` when `gate_sandbox = "none"`.
pub fn gate_sandbox_template(config: &Config, paths: &Paths) -> Option<SandboxSpec> {
    if config.gate_sandbox == SandboxKind::None {
        return None;
    }
    let var = |name: &str| std::env::var(name).ok();
    let writable = config
        .gate_writable
        .iter()
        .filter_map(|p| expand_path(p, &var))
        .collect();
    Some(SandboxSpec {
        readable: Vec::new(),
        bwrap: PathBuf::from(BWRAP),
        state: paths.state.clone(),
        socket: None,
        git: None,
        writable,
        hidden: Vec::new(),
        network: config.gate_network,
        net: None,
    })
}

/// The molecule's steps that closed before `current`, in creation order, with the run folder
/// of each one's last attempt.
fn earlier(
    from: JobSources<'_>,
    work: &BeadId,
    current: &BeadId,
) -> (Vec<EarlierStep>, Vec<Option<PathBuf>>) {
    let mut steps = Vec::new();
    let mut runs = Vec::new();
    for bead in from.state.steps(work.as_str()) {
        if bead.id == *current || bead.status != Status::Closed {
            continue;
        }
        let Some(meta) = bead.step_meta() else {
            continue;
        };
        runs.push((meta.attempts > 0).then(|| from.paths.run_dir(work, &meta.step, meta.attempts)));
        steps.push(EarlierStep {
            id: bead.id.clone(),
            step: meta.step.clone(),
            role: meta.role,
            status: bead.status.clone(),
            summary: meta.summary.clone(),
            final_message: None,
        });
    }
    (steps, runs)
}

/// Each earlier step's final message, from the run folder of its last attempt.
pub(super) fn fill_final_messages(steps: &mut [EarlierStep], runs: &[Option<PathBuf>]) {
    for (step, run) in steps.iter_mut().zip(runs) {
        step.final_message = run.as_deref().and_then(final_message);
    }
}

/// The message an earlier attempt's agent wrote before its result block.
fn final_message(run_dir: &Path) -> Option<String> {
    let text = std::fs::read(run_dir.join(RESULT_FILE)).ok()?;
    let written = serde_json::from_slice(&text).ok()?;
    let message = crate::daemon::rundir::finished_result(&written)?.message;
    (!message.is_empty()).then_some(message)
}

/// Every rejection so far: the fix steps' texts, which are the instructions they carry.
fn feedback(state: &State, work: &BeadId) -> Vec<Feedback> {
    state
        .steps(work.as_str())
        .filter_map(|fix| {
            let meta = fix.step_meta()?;
            let fixed = meta.fixes.as_ref()?;
            let fixed_meta = state.get(fixed.as_str())?.step_meta()?;
            let kind = match fixed_meta.role {
                Role::Gate => FeedbackKind::Gate,
                Role::Approval => FeedbackKind::Approval,
                _ => FeedbackKind::Review,
            };
            Some(Feedback {
                step: fixed_meta.step,
                kind,
                iteration: meta.iteration,
                text: fix.description.clone().unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_the_sandbox_would_hide_keeps_its_install_prefix_readable() {
        let state = Path::new("/srv/repo/.catalyst");
        assert_eq!(
            install_prefix(Path::new("/tmp/ci/target/debug/catalyst"), state),
            Some(PathBuf::from("/tmp/ci/target"))
        );
        assert_eq!(
            install_prefix(Path::new("/tmp/ci/agents/bin/claude"), state),
            Some(PathBuf::from("/tmp/ci/agents"))
        );
        assert_eq!(
            install_prefix(Path::new("/srv/repo/.catalyst/tools/bin/x"), state),
            Some(PathBuf::from("/srv/repo/.catalyst/tools"))
        );
        // The read-only root shows the rest as it is.
        assert_eq!(
            install_prefix(Path::new("/usr/local/bin/claude"), state),
            None
        );
        assert_eq!(install_prefix(Path::new("sh"), state), None);
    }

    #[test]
    fn the_attempts_socket_is_in_its_run_folder_unless_the_path_is_too_long() {
        let short = Path::new("/r/.catalyst/runs/cat-1/implement/1");
        assert_eq!(attempt_socket(short), short.join(HOOK_SOCKET));
        let long = PathBuf::from(format!("/{}/runs/cat-1/implement/1", "x".repeat(120)));
        let socket = attempt_socket(&long);
        assert!(
            socket.as_os_str().len() <= crate::daemon::paths::MAX_SOCKET_PATH,
            "{}",
            socket.display()
        );
        assert_eq!(
            attempt_socket(&long),
            socket,
            "the same run folder, the same socket"
        );
    }
}
