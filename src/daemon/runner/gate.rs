//! One attempt of a gate step: its commands, run by the daemon in the worktree.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::daemon::agent::{self, RunSpec, SandboxSpec};
use crate::daemon::worktree::{CommitId, Repo};
use crate::domain::agent::profile::AgentProfile;
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::id::BeadId;
use crate::domain::model::Role;
use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

use super::{prepare_worktree, write_json, StepDone, REPORT_FILE, RESULT_FILE};

/// What one attempt of a gate step needs.
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
    /// The most processes the gate's commands may have at once (`max_processes`).
    pub max_processes: Option<u32>,
    /// The niceness its commands run at (`agent_nice`).
    pub nice: u32,
    pub reset_to: Option<String>,
    /// The gates' sandbox (`gate_sandbox`); `None` runs the commands unconfined.
    pub sandbox: Option<Arc<SandboxSpec>>,
}

/// The most output of a failed gate command passed on to the fix step.
const GATE_OUTPUT_TAIL: usize = 16 * 1024;

/// The exit status by which a command says it could not run, so it has no verdict on the
/// code (`EX_TEMPFAIL` of `sysexits.h`: a service it needs is down, say). The gate fails as
/// an attempt, retried after a delay, rather than as a rejection that starts a fix.
pub const COULD_NOT_RUN: i32 = 75;

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
/// gate fails. The first command that fails fails the gate with its output; one that exits
/// [`COULD_NOT_RUN`] fails the attempt instead. Each command's
/// output and report stay in the run folder, under `command-<n>/`.
pub async fn run_gate_step(job: GateJob, cancel: CancellationToken) -> StepDone {
    let mut done = StepDone::failed(&job.work, &job.step, Role::Gate, job.attempt, String::new());
    let unprepared = |reason: String| {
        StepDone::unavailable(
            &job.work,
            &job.step,
            Role::Gate,
            job.attempt,
            Unavailable::Preparation,
            reason,
        )
    };
    let base =
        match prepare_worktree(&job.repo, &job.work, &job.target, job.reset_to.as_deref()).await {
            Ok(base) => base,
            Err(e) => return unprepared(format!("cannot prepare the worktree: {e}")),
        };
    done.base = Some(base);
    let sandbox = match confine(&job).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            return unprepared(format!(
                "cannot find the repository's git folder for the gate's sandbox: {e}"
            ))
        }
    };
    let deadline = tokio::time::Instant::now() + job.timeout;
    let mut records = Vec::new();
    let mut outcome = Some(Outcome::GatePassed);
    for (i, command) in job.commands.iter().enumerate() {
        // At least a second, so a command that starts at the deadline still gets to report.
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_secs(1));
        let spec = command_spec(&job, sandbox.as_ref(), i, command, left);
        let report = agent::run(spec.clone(), cancel.clone()).await;
        write_json(&spec.run_dir.join(REPORT_FILE), &report);
        gather_output(&job.run_dir, &spec.run_dir, command, &report);
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
        if report.exit == Exit::Code(COULD_NOT_RUN) {
            let output = gate_output(&spec.run_dir, command, &report);
            let reason = format!(
                "a gate command could not run (exit {COULD_NOT_RUN}): no verdict, so no fix\n{output}"
            );
            outcome = Some(Outcome::Failed { reason });
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

/// Appends a finished command's stdout and stderr to the attempt's own `stdout` and `stderr`,
/// each headed by the command line and ended by how it ended: what `ctl logs` shows of a gate.
/// Best effort: the command's own files stay whatever happens here.
fn gather_output(attempt_dir: &Path, command_dir: &Path, command: &str, report: &RunReport) {
    use std::io::Write;
    for stream in [agent::STDOUT_FILE, agent::STDERR_FILE] {
        let path = attempt_dir.join(stream);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| {
                writeln!(file, "$ {command}")?;
                // Copied, not read whole: a command's output may be as large as the cap.
                if let Ok(mut output) = std::fs::File::open(command_dir.join(stream)) {
                    std::io::copy(&mut output, &mut file)?;
                }
                // Its own line, whether or not the output ended one.
                writeln!(file)?;
                writeln!(file, "({})", report.exit)
            });
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot gather a gate command's output");
        }
    }
}

/// The gate's sandbox with the repository's git folder readable in it (a repository under
/// `/tmp` would be behind the sandbox's private `/tmp`), or `None` when it runs unconfined.
async fn confine(job: &GateJob) -> Result<Option<SandboxSpec>, String> {
    let Some(template) = &job.sandbox else {
        return Ok(None);
    };
    let repo = job.repo.clone();
    let common = tokio::task::spawn_blocking(move || repo.common_dir())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let mut sandbox = SandboxSpec::clone(template);
    sandbox.readable.push(common);
    Ok(Some(sandbox))
}

/// How the gate's `n`th command (from 0) runs: `sh -c command` in the bead's worktree, within
/// `left` of the gate's time, in `sandbox` when there is one.
fn command_spec(
    job: &GateJob,
    sandbox: Option<&SandboxSpec>,
    n: usize,
    command: &str,
    left: Duration,
) -> RunSpec {
    RunSpec {
        profile: AgentProfile::shell(),
        model: String::new(),
        prompt: command.to_owned(),
        worktree: job.repo.worktree_path(&job.work),
        run_dir: job.run_dir.join(format!("command-{}", n + 1)),
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
        sandbox: sandbox.cloned(),
        max_processes: job.max_processes,
        nice: job.nice,
        conversation: None,
    }
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
