//! Writing a bead's final status back to beads (`bd close …`, `bd update …`).
//!
//! The engine queues a [`Job`] when a bead taken from the followed beads file reaches a final
//! status; this task runs the command and reports back. A failure is reported (a comment on
//! the bead the first time, a warning every time) and retried with a doubling delay, for as
//! long as the daemon runs. What was written is recorded in the bead's metadata once the
//! command succeeded, so after a restart the engine queues again whatever was not: a
//! write-back is never lost, and may run twice if the daemon stopped between the command and
//! its record (`bd close` of a closed issue does no harm).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::domain::id::BeadId;
use crate::domain::model::Status;

/// How long one command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest delay between two tries.
const MAX_DELAY: Duration = Duration::from_secs(600);

/// One status to write back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: BeadId,
    pub status: Status,
    pub argv: Vec<String>,
    /// The delay after the first failure.
    pub retry: Duration,
}

/// What became of a try, sent to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Done {
        id: BeadId,
        status: Status,
    },
    Failed {
        id: BeadId,
        status: Status,
        attempt: u32,
        error: String,
        retry_in: Duration,
    },
}

/// Fills `{id}`, `{status}` and `{reason}` into a command template.
pub fn render(template: &[String], id: &BeadId, status: &Status, reason: &str) -> Vec<String> {
    template
        .iter()
        .map(|arg| {
            arg.replace("{id}", id.as_str())
                .replace("{status}", status.as_str())
                .replace("{reason}", reason)
        })
        .collect()
}

/// Starts the task; it ends when the returned sender is dropped or the engine is gone.
pub fn spawn<T: From<Report> + Send + 'static>(
    cwd: PathBuf,
    engine: mpsc::Sender<T>,
) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(run(cwd, rx, engine));
    tx
}

struct Pending {
    job: Job,
    attempt: u32,
    not_before: Instant,
}

async fn run<T: From<Report>>(
    cwd: PathBuf,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    engine: mpsc::Sender<T>,
) {
    let mut queue: Vec<Pending> = Vec::new();
    loop {
        let next = queue
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| p.not_before)
            .map(|(i, p)| (i, p.not_before));
        tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => {
                    // A newer status of the same bead replaces an older one not yet written.
                    queue.retain(|p| p.job.id != job.id);
                    queue.push(Pending { job, attempt: 0, not_before: Instant::now() });
                }
                None => return,
            },
            () = sleep_until(next.map(|(_, t)| t)), if next.is_some() => {
                let Some((i, _)) = next else { continue };
                let mut pending = queue.swap_remove(i);
                pending.attempt += 1;
                let (id, status) = (pending.job.id.clone(), pending.job.status.clone());
                let report = match run_command(&cwd, &pending.job.argv).await {
                    Ok(()) => Report::Done { id, status },
                    Err(error) => {
                        let attempt = pending.attempt;
                        let retry_in = delay(pending.job.retry, attempt);
                        pending.not_before = Instant::now() + retry_in;
                        queue.push(pending);
                        Report::Failed { id, status, attempt, error: error.to_string(), retry_in }
                    }
                };
                if engine.send(report.into()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The delay after the `attempt`-th failure: `retry`, doubled each time, at most ten minutes.
fn delay(retry: Duration, attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    retry.saturating_mul(factor).min(MAX_DELAY)
}

/// Why a write-back command did not succeed; the text goes in the bead's comment.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("an empty command")]
    Empty,
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {COMMAND_TIMEOUT:?}")]
    TimedOut { command: String },
    #[error("`{command}`: {source}")]
    Wait {
        command: String,
        source: std::io::Error,
    },
    /// It ran and failed: its exit status and the first line of its stderr.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

async fn run_command(cwd: &std::path::Path, argv: &[String]) -> Result<(), CommandError> {
    let shown = argv.join(" ");
    let (program, args) = argv.split_first().ok_or(CommandError::Empty)?;
    let child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| CommandError::Spawn {
            command: shown.clone(),
            source,
        })?;
    let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| CommandError::TimedOut {
            command: shown.clone(),
        })?
        .map_err(|source| CommandError::Wait {
            command: shown.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(CommandError::Failed {
        command: shown,
        status: output.status,
        stderr: first.to_owned(),
    })
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_filled_and_delays_double_up_to_a_cap() {
        let id = BeadId::new("bd-1").unwrap();
        let argv = render(
            &[
                "bd".into(),
                "close".into(),
                "{id}".into(),
                "--reason={reason}".into(),
            ],
            &id,
            &Status::Closed,
            "merged",
        );
        assert_eq!(argv, ["bd", "close", "bd-1", "--reason=merged"]);
        let s = Duration::from_secs;
        assert_eq!(delay(s(10), 1), s(10));
        assert_eq!(delay(s(10), 3), s(40));
        assert_eq!(delay(s(10), 40), MAX_DELAY);
    }

    #[tokio::test]
    async fn a_failing_command_is_reported_and_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        // Fails until the file `ok` exists.
        let argv: Vec<String> = ["sh", "-c", "test -e ok || { echo locked >&2; exit 3; }"]
            .map(str::to_owned)
            .to_vec();
        let (engine, mut reports) = mpsc::channel(8);
        let jobs = spawn(dir.path().to_owned(), engine);
        let id = BeadId::new("bd-1").unwrap();
        jobs.send(Job {
            id: id.clone(),
            status: Status::Closed,
            argv,
            retry: Duration::from_millis(50),
        })
        .unwrap();
        let Some(Report::Failed { attempt, error, .. }) = reports.recv().await else {
            panic!("a failure report")
        };
        assert_eq!(attempt, 1);
        assert!(error.contains("locked"), "{error}");
        std::fs::write(dir.path().join("ok"), "").unwrap();
        loop {
            match reports.recv().await {
                Some(Report::Done { id: done, .. }) => {
                    assert_eq!(done, id);
                    break;
                }
                Some(Report::Failed { .. }) => continue,
                other => panic!("{other:?}"),
            }
        }
    }
}
