//! The audit trail of a bead (`ctl show BEAD --runs`): every attempt of every step, from its
//! run folder (what the agent was given and what it did) and the journal (when it was
//! dispatched, with which model).
//!
//! The run folder part is read by the engine when it answers `show`; the journal part is added
//! by the connection task afterwards ([`add_dispatches`]), since scanning a long journal must
//! not hold up the engine.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::daemon::agent::{PROMPT_FILE, STDERR_FILE, STDOUT_FILE};
use crate::daemon::store::JOURNAL_FILE;
use crate::daemon::Paths;
use crate::domain::context::{CONTEXT_JSON, CONTEXT_MD};
use crate::domain::id::BeadId;

/// The run folder's files an audit names, by the key it names them with.
const FILES: [(&str, &str); 9] = [
    ("prompt", PROMPT_FILE),
    ("context", CONTEXT_MD),
    ("context_json", CONTEXT_JSON),
    ("settings", "settings.json"),
    ("stdout", STDOUT_FILE),
    ("stderr", STDERR_FILE),
    ("report", "report.json"),
    ("result", "result.json"),
    ("base", "base"),
];

fn read_json(path: &Path) -> Value {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// Every attempt of `step` (its id within the formula) of bead `work`, from the run folders.
///
/// Each record has the attempt, its folder, the paths of the files there (`files`: prompt,
/// context, stdout, stderr, …, only those that exist), the agent's report and the daemon's
/// result as stored, and flattened for people: `exit`, `duration_ms`, `cost_usd`, `outcome`,
/// `status`, `verdict`, `summary`, `reason`, `commit`. A gate's attempt lists its `commands`
/// with their output files instead.
pub fn runs(paths: &Paths, work: &BeadId, step: &str, attempts: u32) -> Vec<Value> {
    (1..=attempts)
        .map(|attempt| run(&paths.run_dir(work, step, attempt), attempt))
        .collect()
}

fn run(dir: &Path, attempt: u32) -> Value {
    let report = read_json(&dir.join("report.json"));
    let result = read_json(&dir.join("result.json"));
    let outcome = &result["outcome"];
    let mut record = json!({
        "attempt": attempt,
        "run_dir": dir,
        "files": files(dir),
        "report": report,
        "result": result,
        "exit": serde_json::from_value::<crate::domain::agent::report::Exit>(report["exit"].clone())
            .map_or(Value::Null, |e| json!(e.to_string())),
        "duration_ms": report["duration_ms"],
        "cost_usd": report["cost_usd"],
        "outcome": outcome["type"],
        "status": outcome["result"]["status"],
        "verdict": outcome["result"]["verdict"],
        "summary": outcome["result"]["summary"],
        "reason": outcome["reason"],
        "commit": result["commit"],
    });
    if let Some(commands) = result["commands"].as_array() {
        record["commands"] = json!(commands
            .iter()
            .map(|c| {
                let mut c = c.clone();
                if let Some(d) = c["dir"].as_str().map(PathBuf::from) {
                    c["files"] = files(&d);
                }
                c
            })
            .collect::<Vec<_>>());
        record["exit"] = result["exit"].clone();
        record["duration_ms"] = result["duration_ms"].clone();
    }
    record
}

fn files(dir: &Path) -> Value {
    let found: Map<String, Value> = FILES
        .iter()
        .map(|(key, name)| (key, dir.join(name)))
        .filter(|(_, path)| path.exists())
        .map(|(key, path)| ((*key).to_owned(), json!(path)))
        .collect();
    Value::Object(found)
}

/// When and with which model each attempt of a bead's steps was dispatched, from every journal
/// segment in the state folder: `(step id, attempt) → (ts, model)`.
pub fn dispatches(state: &Path, bead: &str) -> HashMap<(String, u64), (Value, Value)> {
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
            if !line.contains("\"step.dispatched\"") || !line.contains(&quoted) {
                continue;
            }
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event["bead"] != bead {
                continue;
            }
            let (Some(step), Some(attempt)) = (event["step"].as_str(), event["attempt"].as_u64())
            else {
                continue;
            };
            out.insert(
                (step.to_owned(), attempt),
                (event["ts"].clone(), event["model"].clone()),
            );
        }
    }
    out
}

/// Adds `dispatched_at` and `model` from the journal to every run of a `show --runs` answer.
pub fn add_dispatches(show: &mut Value, state: &Path) {
    let Some(bead) = show["bead"]["id"].as_str().map(str::to_owned) else {
        return;
    };
    let found = dispatches(state, &bead);
    for step in show["steps"].as_array_mut().into_iter().flatten() {
        let Some(id) = step["id"].as_str().map(str::to_owned) else {
            continue;
        };
        for run in step["runs"].as_array_mut().into_iter().flatten() {
            let Some(attempt) = run["attempt"].as_u64() else {
                continue;
            };
            if let Some((ts, model)) = found.get(&(id.clone(), attempt)) {
                run["dispatched_at"] = ts.clone();
                run["model"] = model.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(found[&("cat-1.implement".to_owned(), 1)].1, "sonnet");
        assert_eq!(
            found[&("cat-1.implement".to_owned(), 2)].1,
            "opus",
            "the later dispatch of an attempt wins"
        );

        let mut show = json!({"bead": {"id": "cat-1"}, "steps": [
            {"id": "cat-1.implement", "runs": [{"attempt": 1}, {"attempt": 2}, {"attempt": 3}]},
        ]});
        add_dispatches(&mut show, dir.path());
        let runs = &show["steps"][0]["runs"];
        assert_eq!(runs[0]["model"], "sonnet");
        assert_eq!(runs[1]["model"], "opus");
        assert_eq!(runs[1]["dispatched_at"], "2026-01-01T00:00:03Z");
        assert!(runs[2].get("model").is_none());
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
        assert_eq!(r["files"]["prompt"], json!(run_dir.join(PROMPT_FILE)));
        assert_eq!(r["files"]["context"], json!(run_dir.join(CONTEXT_MD)));
        assert!(r["files"].get("stderr").is_none(), "only files that exist");
        assert_eq!(r["exit"], "exit code 0");
        assert_eq!(r["duration_ms"], 12);
        assert_eq!(r["cost_usd"], 0.5);
        assert_eq!(r["outcome"], "finished");
        assert_eq!(r["summary"], "did it");
        assert_eq!(r["commit"], "abc");
    }
}
