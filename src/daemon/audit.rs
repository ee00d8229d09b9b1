//! The audit trail of a bead (`ctl show BEAD --runs`): every attempt of every step, from its
//! run folder (what the agent was given and what it did) and the journal (when it was
//! dispatched, with which model).
//!
//! Read by the connection task ([`add_runs`]) on top of the engine's `show`: reading run
//! folders and scanning a long journal must not hold up the engine.

use crate::domain::router::Decision;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::daemon::agent::{PROMPT_FILE, STDERR_FILE, STDOUT_FILE};
use crate::daemon::store::JOURNAL_FILE;
use crate::daemon::worktree::{branch_name, BranchDiff, GitError, Repo};
use crate::daemon::Paths;
use crate::domain::agent::report::Exit;
use crate::domain::context::{CONTEXT_JSON, CONTEXT_MD};
use crate::domain::event::{Event, EventBody};
use crate::domain::id::BeadId;
use crate::domain::time::Timestamp;
use crate::protocol::{GateCommand, RunFiles, RunRecord, ShowAnswer};

/// The engine's `show` of `p.id`, then every attempt from the run folders and the journal,
/// read off the runtime: the engine must not wait on files. For `ctl show --runs` and the web
/// dashboard's bead page.
pub async fn show_with_runs(
    engine: &crate::daemon::engine::EngineHandle,
    paths: &Paths,
    p: crate::protocol::IdParams,
) -> Result<ShowAnswer, crate::protocol::RpcError> {
    use crate::protocol::RpcError;
    let mut show = engine.show(p).await?;
    let paths = paths.clone();
    tokio::task::spawn_blocking(move || {
        add_runs(&mut show, &paths);
        show
    })
    .await
    .map_err(|e| RpcError::internal(format!("reading the run folders failed: {e}")))
}

/// Why a work bead's diff cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// It has no branch and was not merged: not started, or cancelled (said which).
    #[error("{0}")]
    NoBranch(String),
    #[error("{0}")]
    Failed(String),
}

/// The diff of the work bead `show` (its stat at most `width` columns wide): its branch
/// against the workspace's target branch, or once merged what its merge brought
/// ([`crate::daemon::worktree::Repo::work_diff`]). Reads the config and the repository: call
/// it off the runtime.
pub fn diff(paths: &Paths, show: &ShowAnswer, width: usize) -> Result<BranchDiff, DiffError> {
    let config = crate::daemon::load::config(&paths.config())
        .map_err(|e| DiffError::Failed(format!("cannot read the workspace's config: {e}")))?;
    let merged = crate::domain::state::merged(&show.bead);
    let diff = Repo::open(&paths.workspace, &paths.worktrees())
        .and_then(|repo| repo.work_diff(&show.id, merged.as_ref(), &config.target_branch, width));
    match diff {
        Ok(diff) => Ok(diff),
        Err(GitError::NoBranch { .. }) => Err(DiffError::NoBranch(why_no_branch(show))),
        Err(e) => Err(DiffError::Failed(e.to_string())),
    }
}

/// Why a bead has no branch, from what the daemon says of it.
fn why_no_branch(show: &ShowAnswer) -> String {
    let id = &show.id;
    let branch = branch_name(id);
    if show.bead.is_cancelled() {
        format!("`{id}` was cancelled: its branch `{branch}` was removed")
    } else if show.status.is_closed() {
        format!("`{id}` is closed and its branch `{branch}` is gone (a merged bead's commits are on the target branch)")
    } else if show.total == 0 {
        format!("`{id}` has no branch yet: it has not started")
    } else {
        format!("`{id}` has no branch `{branch}`")
    }
}

/// Adds every attempt of every step to a `show` answer: the run folders' records, and when and
/// with which model each attempt was dispatched.
pub fn add_runs(show: &mut ShowAnswer, paths: &Paths) {
    let found = dispatches(&paths.state, show.id.as_str());
    for step in &mut show.steps {
        let Some(detail) = &mut step.detail else {
            continue;
        };
        let mut records = runs(paths, &show.id, &detail.step, detail.attempts);
        for record in &mut records {
            if let Some(found) = found.get(&(step.id.to_string(), record.attempt)) {
                if let Some((ts, model)) = &found.at {
                    record.dispatched_at = Some(*ts);
                    record.model = Some(model.clone());
                }
                record.failed.clone_from(&found.failed);
            }
        }
        detail.runs = Some(records);
    }
}

/// Every attempt of `step` (its id within the formula) of bead `work`, from the run folders.
///
/// Each record has the attempt, its folder, the paths of the files there (only those that
/// exist), the agent's report and the daemon's result as stored, and flattened for people:
/// `exit`, `duration_ms`, `cost_usd`, `outcome`, `status`, `verdict`, `summary`, `reason`,
/// `commit`. A gate's attempt lists its `commands` with their output files instead.
pub fn runs(paths: &Paths, work: &BeadId, step: &str, attempts: u32) -> Vec<RunRecord> {
    (1..=attempts)
        .map(|attempt| run(&paths.run_dir(work, step, attempt), attempt))
        .collect()
}

fn read_json(path: &Path) -> Value {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// The value at `path` in `value` as a `T`, if there is one of that type.
fn typed<T: serde::de::DeserializeOwned>(value: &Value, path: &[&str]) -> Option<T> {
    let mut at = value;
    for key in path {
        at = at.get(key)?;
    }
    T::deserialize(at).ok()
}

fn number(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn run(dir: &Path, attempt: u32) -> RunRecord {
    let report = read_json(&dir.join("report.json"));
    let result = read_json(&dir.join("result.json"));
    let commands = result
        .get("commands")
        .and_then(|c| serde_json::from_value::<Vec<GateCommand>>(c.clone()).ok());
    let mut record = RunRecord {
        attempt,
        commands: None,
        commit: typed(&result, &["commit"]),
        cost_usd: report.get("cost_usd").and_then(Value::as_f64),
        dispatched_at: None,
        failed: None,
        duration_ms: number(&report, "duration_ms"),
        exit: report
            .get("exit")
            .and_then(|e| serde_json::from_value::<Exit>(e.clone()).ok())
            .map(|e| e.to_string()),
        files: files(dir),
        instructions: crate::daemon::rundir::finished_result(&result)
            .map(|r| r.instructions)
            .unwrap_or_default(),
        model: None,
        outcome: typed(&result, &["outcome", "type"]),
        reason: typed(&result, &["outcome", "reason"]),
        report: Value::Null,
        result: Value::Null,
        run_dir: dir.to_owned(),
        status: typed(&result, &["outcome", "result", "status"]),
        summary: typed(&result, &["outcome", "result", "summary"]),
        verdict: typed(&result, &["outcome", "result", "verdict"]),
    };
    if let Some(mut commands) = commands {
        for c in &mut commands {
            c.files = Some(files(&c.dir));
        }
        record.commands = Some(commands);
        record.exit = typed(&result, &["exit"]);
        record.duration_ms = number(&result, "duration_ms");
    }
    record.report = report;
    record.result = result;
    record
}

fn files(dir: &Path) -> RunFiles {
    let at = |name: &str| Some(dir.join(name)).filter(|p| p.exists());
    RunFiles {
        base: at("base"),
        context: at(CONTEXT_MD),
        context_json: at(CONTEXT_JSON),
        prompt: at(PROMPT_FILE),
        report: at("report.json"),
        result: at("result.json"),
        settings: at("settings.json"),
        stderr: at(STDERR_FILE),
        stdout: at(STDOUT_FILE),
    }
}

/// What the journal says of one attempt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dispatch {
    /// When and with which model it was dispatched.
    pub at: Option<(Timestamp, Option<String>)>,
    /// Why the daemon counted it as failed (it retried, escalated or blocked after it).
    pub failed: Option<String>,
}

/// What each attempt of a bead's steps was, from every journal segment in the state folder:
/// `(step id, attempt) → Dispatch`.
pub fn dispatches(state: &Path, bead: &str) -> HashMap<(String, u32), Dispatch> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(state)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("journal.") && n.ends_with(".jsonl") && n != JOURNAL_FILE
            })
        })
        .collect();
    // Rotated segments are named by their first seq with a fixed width, so names sort in
    // journal order; the live segment comes last.
    segments.sort();
    segments.push(state.join(JOURNAL_FILE));
    let quoted = format!("\"{bead}");
    let mut out = HashMap::new();
    for segment in segments {
        let Ok(file) = std::fs::File::open(&segment) else {
            continue;
        };
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            // Most lines are something else: skip them before parsing.
            let wanted = line.contains("\"step.dispatched\"") || line.contains("\"step.result\"");
            if !wanted || !line.contains(&quoted) {
                continue;
            }
            let Ok(event) = serde_json::from_str::<Event>(&line) else {
                continue;
            };
            match event.body {
                EventBody::StepDispatched {
                    bead: b,
                    step,
                    attempt,
                    model,
                } if b.as_str() == bead => {
                    let entry: &mut Dispatch = out.entry((step.to_string(), attempt)).or_default();
                    entry.at = Some((event.ts, model));
                }
                EventBody::StepResult {
                    bead: b,
                    step,
                    attempt,
                    decision,
                    ..
                } if b.as_str() == bead => {
                    let failed = match decision {
                        Decision::Retry { reason, .. }
                        | Decision::Escalate { reason, .. }
                        | Decision::Block { reason, .. } => Some(reason),
                        _ => None,
                    };
                    out.entry((step.to_string(), attempt)).or_default().failed = failed;
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dispatches_are_read_from_every_segment_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let line = |seq: u64, step: &str, attempt: u32, model: &str| {
            json!({"seq": seq, "ts": format!("2026-01-01T00:00:0{seq}Z"), "type": "step.dispatched",
                   "bead": "cat-1", "step": step, "attempt": attempt, "model": model})
            .to_string()
        };
        std::fs::write(
            dir.path().join("journal.000000000001.jsonl"),
            format!(
                "{}\n{}\n",
                line(1, "cat-1.implement", 1, "sonnet"),
                line(2, "cat-1.implement", 2, "sonnet")
            ),
        )
        .expect("segment");
        let other = json!({"seq": 4, "ts": "2026-01-01T00:00:04Z", "type": "step.dispatched",
                           "bead": "cat-12", "step": "cat-12.review", "attempt": 1, "model": "haiku"});
        std::fs::write(
            dir.path().join(JOURNAL_FILE),
            format!("{}\n{other}\n{{torn", line(3, "cat-1.implement", 2, "opus")),
        )
        .expect("live");
        let found = dispatches(dir.path(), "cat-1");
        assert_eq!(found.len(), 2);
        let at = |attempt| {
            found[&("cat-1.implement".to_owned(), attempt)]
                .at
                .clone()
                .expect("dispatched")
        };
        let model = |attempt| at(attempt).1;
        assert_eq!(model(1).as_deref(), Some("sonnet"));
        assert_eq!(
            model(2).as_deref(),
            Some("opus"),
            "the later dispatch of an attempt wins"
        );
        assert_eq!(at(2).0.to_string(), "2026-01-01T00:00:03Z");
    }

    #[test]
    fn a_run_lists_its_files_and_flattens_its_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run_dir = dir.path().join("1");
        std::fs::create_dir_all(&run_dir).expect("run dir");
        for name in [PROMPT_FILE, CONTEXT_MD, STDOUT_FILE] {
            std::fs::write(run_dir.join(name), "x").expect("file");
        }
        std::fs::write(
            run_dir.join("report.json"),
            json!({"exit": {"code": 0}, "duration_ms": 12, "cost_usd": 0.5}).to_string(),
        )
        .expect("report");
        std::fs::write(
            run_dir.join("result.json"),
            json!({"outcome": {"type": "finished", "result": {"status": "done", "summary": "did it"}}, "commit": "abc"}).to_string(),
        )
        .expect("result");
        let r = run(&run_dir, 1);
        assert_eq!(r.files.prompt, Some(run_dir.join(PROMPT_FILE)));
        assert_eq!(r.files.context, Some(run_dir.join(CONTEXT_MD)));
        assert_eq!(r.files.stderr, None, "only files that exist");
        assert_eq!(r.exit.as_deref(), Some("exit code 0"));
        assert_eq!(r.duration_ms, Some(12));
        assert_eq!(r.cost_usd, Some(0.5));
        assert_eq!(
            r.outcome,
            Some(crate::domain::router::OutcomeKind::Finished)
        );
        assert_eq!(r.summary.as_deref(), Some("did it"));
        assert_eq!(r.commit.as_deref(), Some("abc"));
    }
}
