//! The tasks that carry out one attempt of a step: the bead's worktree is made ready at the
//! step's starting commit, the context files and prompt are written, the agent (or the gate's
//! commands) runs, and the daemon commits what an agent that reported DONE left behind.
//!
//! A task never touches the engine's state: it gets a [`StepJob`] built by the engine and
//! reports a [`StepDone`] back on the engine's channel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::daemon::agent::{self, RunSpec};
use crate::daemon::fsutil;
use crate::daemon::worktree::{self, CommitId, Repo};
use crate::domain::agent::outcome::outcome;
use crate::domain::agent::profile::{AgentProfile, OutputFormat, StdinMode};
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::context::{self, Context, EarlierStep, Feedback, FeedbackKind, StepInfo};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Role, Status, StepMeta};
use crate::domain::prompt::PromptVars;
use crate::domain::result::{ResultStatus, StepResult};
use crate::domain::router::Outcome;

use super::Engine;

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

/// Everything one agent attempt needs, built by the engine at dispatch.
#[derive(Debug)]
pub struct StepJob {
    work: BeadId,
    step: BeadId,
    step_name: String,
    role: Role,
    attempt: u32,
    repo: Repo,
    target: String,
    run_dir: PathBuf,
    reset_to: Option<String>,
    context: Context,
    /// Run folders of earlier steps whose final messages go into the context.
    earlier_runs: Vec<Option<PathBuf>>,
    prompt: String,
    settings: serde_json::Value,
    spec: RunSpec,
}

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
        StepDone {
            work: work.clone(),
            step: step.clone(),
            role,
            attempt,
            outcome: Some(Outcome::Failed {
                reason: reason.clone(),
            }),
            exit: reason,
            duration_ms: 0,
            cost_usd: None,
            base: None,
            commit: None,
        }
    }
}

/// What `result.json` holds.
#[derive(Serialize)]
struct ResultRecord<'a> {
    outcome: &'a Option<Outcome>,
    base: &'a Option<CommitId>,
    commit: &'a Option<CommitId>,
}

impl StepJob {
    /// Builds the job from the engine's state: the context (the bead's text, earlier steps,
    /// feedback, comments), the rendered prompt and the agent's command.
    pub(super) fn build(
        engine: &Engine,
        work: &BeadId,
        step: &Bead,
        meta: &StepMeta,
        attempt: u32,
        model: &str,
    ) -> Result<StepJob, String> {
        let state = engine.store.state();
        let config = &engine.loaded.config;
        let bead = state
            .get(work.as_str())
            .ok_or_else(|| format!("bead `{work}` is gone"))?;
        let run_dir = engine.paths.run_dir(work, &meta.step, attempt);
        let worktree = engine.repo.worktree_path(work);
        let (earlier_steps, earlier_runs) = earlier(engine, work, &step.id);
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
            },
            earlier_steps,
            feedback: feedback(engine, work),
            comments: bead.comments.iter().map(Into::into).collect(),
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
            branch: worktree::branch_name(work),
            target_branch: config.target_branch.clone(),
            context_md: run_dir.join(context::CONTEXT_MD),
            context_json: run_dir.join(context::CONTEXT_JSON),
            run_dir: run_dir.clone(),
            result_contract: engine.loaded.prompts.contract().to_owned(),
        };
        let template = meta.prompt.as_deref().unwrap_or(meta.role.as_str());
        let prompt = engine
            .loaded
            .prompts
            .render(template, &vars)
            .map_err(|e| e.to_string())?;
        let mut profile = config.profile()?;
        if let Some(tools) = config.role_policy(meta.role).tools_for(meta.tools.as_ref()) {
            profile = profile.with_tools(tools);
        }
        let env = vec![
            (
                "CATALYST_SOCKET".to_owned(),
                engine.paths.socket().display().to_string(),
            ),
            ("CATALYST_BEAD".to_owned(), work.to_string()),
            ("CATALYST_STEP".to_owned(), step.id.to_string()),
            ("CATALYST_ROLE".to_owned(), meta.role.to_string()),
            (
                "CATALYST_CONTEXT".to_owned(),
                run_dir.join(context::CONTEXT_MD).display().to_string(),
            ),
        ];
        let timeout = Duration::from_secs(meta.timeout.unwrap_or(config.agent_timeout_secs));
        let spec = RunSpec {
            profile,
            model: config.model_id(model).to_owned(),
            prompt: prompt.clone(),
            worktree,
            run_dir: run_dir.clone(),
            env,
            settings_path: Some(run_dir.join(SETTINGS_FILE)),
            timeout,
            stall_timeout: config.stall_timeout(),
            grace: config.grace(),
            output_cap: config.output_cap_bytes,
        };
        Ok(StepJob {
            work: work.clone(),
            step: step.id.clone(),
            step_name: meta.step.clone(),
            role: meta.role,
            attempt,
            repo: engine.repo.clone(),
            target: config.target_branch.clone(),
            run_dir,
            reset_to: meta.reset_to.clone(),
            context,
            earlier_runs,
            prompt,
            settings: engine.hook_settings(meta.role),
            spec,
        })
    }
}

/// The molecule's steps that closed before `current`, in creation order, with the run folder
/// of each one's last attempt.
fn earlier(
    engine: &Engine,
    work: &BeadId,
    current: &BeadId,
) -> (Vec<EarlierStep>, Vec<Option<PathBuf>>) {
    let mut steps = Vec::new();
    let mut runs = Vec::new();
    for bead in engine.store.state().steps(work.as_str()) {
        if bead.id == *current || bead.status != Status::Closed {
            continue;
        }
        let Some(meta) = bead.step_meta() else {
            continue;
        };
        runs.push(
            (meta.attempts > 0).then(|| engine.paths.run_dir(work, &meta.step, meta.attempts)),
        );
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

/// Every rejection so far: the fix steps' texts, which are the instructions they carry.
fn feedback(engine: &Engine, work: &BeadId) -> Vec<Feedback> {
    let state = engine.store.state();
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

/// Runs the git side in a blocking thread.
async fn git<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, worktree::GitError> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("git task failed: {e}"))?
        .map_err(|e| e.to_string())
}

/// Makes the bead's worktree ready at the step's starting commit: created if missing, reset
/// to `reset_to` (an interrupted attempt's start) or to the branch tip, so that nothing a
/// failed attempt left behind leaks into this one.
async fn prepare_worktree(
    repo: &Repo,
    work: &BeadId,
    target: &str,
    reset_to: Option<&str>,
) -> Result<CommitId, String> {
    let (repo, work, target) = (repo.clone(), work.clone(), target.to_owned());
    let reset_to = reset_to.map(str::to_owned);
    git(move || {
        let tree = repo.create(&work, &target)?;
        let base = match reset_to.as_deref().map(CommitId::parse) {
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
                repo.reset_to(&work, &base)?;
                Ok(base)
            }
            // The usual case: the worktree is clean at the tip after the daemon's last commit.
            // Only leftovers of a failed attempt (or a read-only role's stray writes) need the
            // reset, which costs a checkout.
            None => {
                if repo.changed_since(&work, &tree.head)? {
                    repo.reset_to(&work, &tree.head)?;
                }
                Ok(tree.head)
            }
        }
    })
    .await
}

/// One attempt of an agent step, start to end.
pub async fn run_agent_step(mut job: StepJob, cancel: CancellationToken) -> StepDone {
    let mut done = StepDone::failed(&job.work, &job.step, job.role, job.attempt, String::new());
    let base =
        match prepare_worktree(&job.repo, &job.work, &job.target, job.reset_to.as_deref()).await {
            Ok(base) => base,
            Err(e) => {
                return StepDone::failed(
                    &job.work,
                    &job.step,
                    job.role,
                    job.attempt,
                    format!("cannot prepare the worktree: {e}"),
                )
            }
        };
    done.base = Some(base.clone());
    let written = write_inputs(&mut job, &base).and_then(|()| match job.role {
        Role::Merge => {
            let tip = job
                .repo
                .target_head(&job.target)
                .map_err(std::io::Error::other)?;
            fsutil::write_atomic(&job.run_dir.join(TARGET_FILE), tip.as_str().as_bytes())
        }
        _ => Ok(()),
    });
    if let Err(e) = written {
        return StepDone {
            base: Some(base),
            ..StepDone::failed(
                &job.work,
                &job.step,
                job.role,
                job.attempt,
                format!("cannot write the run folder: {e}"),
            )
        };
    }
    let report = agent::run(job.spec.clone(), cancel).await;
    write_json(&job.run_dir.join(REPORT_FILE), &report);
    done.exit = report.exit.to_string();
    done.duration_ms = report.duration_ms;
    done.cost_usd = report.cost_usd;
    if report.exit == Exit::Cancelled {
        done.outcome = None;
        return done;
    }
    let (outcome, commit) = judge(&job, &report, &base).await;
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
    done
}

/// The outcome of a finished agent, and the daemon's commit of its work when it reported DONE.
async fn judge(job: &StepJob, report: &RunReport, base: &CommitId) -> (Outcome, Option<CommitId>) {
    let (repo, work, base2) = (job.repo.clone(), job.work.clone(), base.clone());
    let changed = match git(move || repo.changed_since(&work, &base2)).await {
        Ok(changed) => changed,
        Err(e) => {
            return (
                Outcome::Failed {
                    reason: format!("cannot inspect the worktree: {e}"),
                },
                None,
            )
        }
    };
    let Some(outcome) = outcome(report, job.role, changed) else {
        return (
            Outcome::Failed {
                reason: "cancelled".into(),
            },
            None,
        );
    };
    // Only roles that write get their work committed; what a read-only role left behind is
    // discarded by the next attempt's reset.
    let summary = match &outcome {
        Outcome::Finished { result, .. }
            if result.status == ResultStatus::Done && job.role.writes() =>
        {
            commit_summary(result)
        }
        _ => return (outcome, None),
    };
    let message = format!(
        "{} {}: {summary}\n\nCatalyst-Step: {}/{}\n",
        job.work, job.step_name, job.step_name, job.attempt
    );
    let (repo, work) = (job.repo.clone(), job.work.clone());
    match git(move || repo.commit_all(&work, &message)).await {
        Ok(commit) => (outcome, commit),
        Err(e) => (
            Outcome::Failed {
                reason: format!("cannot commit the agent's work: {e}"),
            },
            None,
        ),
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
fn write_inputs(job: &mut StepJob, base: &CommitId) -> std::io::Result<()> {
    fsutil::create_dir_durable(&job.run_dir)?;
    fsutil::write_atomic(&job.run_dir.join(BASE_FILE), base.as_str().as_bytes())?;
    for (step, run) in job.context.earlier_steps.iter_mut().zip(&job.earlier_runs) {
        step.final_message = run.as_deref().and_then(final_message);
    }
    crate::daemon::rundir::write_context(&job.run_dir, &job.context)?;
    let settings = serde_json::to_vec_pretty(&job.settings).map_err(std::io::Error::other)?;
    fsutil::write_replace(&job.run_dir.join(SETTINGS_FILE), &settings)?;
    debug_assert_eq!(job.spec.prompt, job.prompt);
    Ok(())
}

/// The message an earlier attempt's agent wrote before its result block.
fn final_message(run_dir: &Path) -> Option<String> {
    let text = std::fs::read(run_dir.join(RESULT_FILE)).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let message = value.pointer("/outcome/result/message")?.as_str()?;
    (!message.is_empty()).then(|| message.to_owned())
}

fn write_json<T: Serialize>(path: &Path, value: &T) {
    let written = serde_json::to_vec_pretty(value)
        .map_err(std::io::Error::other)
        .and_then(|bytes| fsutil::write_replace(path, &bytes));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot write a run record");
    }
}

/// One attempt of a gate step: its commands, run by the daemon in the worktree.
#[derive(Debug)]
pub struct GateJob {
    pub work: BeadId,
    pub step: BeadId,
    pub attempt: u32,
    pub commands: Vec<String>,
    pub repo: Repo,
    pub target: String,
    pub run_dir: PathBuf,
    pub timeout: Duration,
    pub grace: Duration,
    pub output_cap: u64,
    pub reset_to: Option<String>,
}

/// The most output of a failed gate command passed on to the fix step.
const GATE_OUTPUT_TAIL: usize = 16 * 1024;

/// One gate command's run, in the gate's `result.json`.
#[derive(Serialize)]
struct CommandRecord {
    command: String,
    /// `command-<n>` in the run folder: its `stdout`, `stderr` and `report.json`.
    dir: PathBuf,
    exit: String,
    duration_ms: u64,
}

/// What a gate's `result.json` holds.
#[derive(Serialize)]
struct GateRecord<'a> {
    outcome: &'a Option<Outcome>,
    base: &'a Option<CommitId>,
    exit: &'a str,
    duration_ms: u64,
    commands: &'a [CommandRecord],
}

/// Runs the gate's commands one after the other (`sh -c`), each in its own process group;
/// together they may take the gate's timeout, after which the one running is stopped and the
/// gate fails. The first command that fails fails the gate with its output. Each command's
/// output and report stay in the run folder, under `command-<n>/`.
pub async fn run_gate_step(job: GateJob, cancel: CancellationToken) -> StepDone {
    let mut done = StepDone::failed(&job.work, &job.step, Role::Gate, job.attempt, String::new());
    let base =
        match prepare_worktree(&job.repo, &job.work, &job.target, job.reset_to.as_deref()).await {
            Ok(base) => base,
            Err(e) => {
                return StepDone::failed(
                    &job.work,
                    &job.step,
                    Role::Gate,
                    job.attempt,
                    format!("cannot prepare the worktree: {e}"),
                )
            }
        };
    done.base = Some(base);
    let profile = AgentProfile {
        command: vec!["sh".into(), "-c".into(), "{prompt}".into()],
        format: OutputFormat::Text,
        env: Default::default(),
        stdin: StdinMode::Null,
    };
    let deadline = tokio::time::Instant::now() + job.timeout;
    let mut records = Vec::new();
    let mut outcome = Some(Outcome::GatePassed);
    for (i, command) in job.commands.iter().enumerate() {
        // At least a second, so a command that starts at the deadline still gets to report.
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_secs(1));
        let spec = RunSpec {
            profile: profile.clone(),
            model: String::new(),
            prompt: command.clone(),
            worktree: job.repo.worktree_path(&job.work),
            run_dir: job.run_dir.join(format!("command-{}", i + 1)),
            env: vec![
                ("CATALYST_BEAD".into(), job.work.to_string()),
                ("CATALYST_STEP".into(), job.step.to_string()),
                ("CATALYST_ROLE".into(), "gate".into()),
            ],
            settings_path: None,
            timeout: left,
            stall_timeout: left,
            grace: job.grace,
            output_cap: job.output_cap,
        };
        let report = agent::run(spec.clone(), cancel.clone()).await;
        write_json(&spec.run_dir.join(REPORT_FILE), &report);
        done.duration_ms += report.duration_ms;
        done.exit = report.exit.to_string();
        records.push(CommandRecord {
            command: command.clone(),
            dir: spec.run_dir.clone(),
            exit: done.exit.clone(),
            duration_ms: report.duration_ms,
        });
        if report.exit == Exit::Cancelled {
            outcome = None;
            break;
        }
        if report.exit != Exit::Code(0) {
            let output = gate_output(&spec.run_dir, command, &report);
            outcome = Some(Outcome::GateFailed { output });
            break;
        }
    }
    done.outcome = outcome;
    if done.outcome.is_some() {
        write_json(
            &job.run_dir.join(RESULT_FILE),
            &GateRecord {
                outcome: &done.outcome,
                base: &done.base,
                exit: &done.exit,
                duration_ms: done.duration_ms,
                commands: &records,
            },
        );
    }
    done
}

/// A failed command's output for the fix agent: the command, the end of its stdout and
/// stderr, and how it ended.
fn gate_output(run_dir: &Path, command: &str, report: &RunReport) -> String {
    let tail = |name: &str| {
        let bytes = std::fs::read(run_dir.join(name)).unwrap_or_default();
        let start = bytes.len().saturating_sub(GATE_OUTPUT_TAIL);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    };
    format!(
        "$ {command}\n{}{}\n({})",
        tail(agent::STDOUT_FILE),
        tail(agent::STDERR_FILE),
        report.exit
    )
}
