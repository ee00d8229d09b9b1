//! How answers and events read for people: one line per event, tables, progress bars.

use serde_json::{json, Value};

/// One event on one line for people: `seq  time  type  subject  details`.
pub fn render_event(e: &Value) -> String {
    let kind = e["type"].as_str().unwrap_or("?");
    let time = e["ts"].as_str().and_then(|t| t.get(11..19)).unwrap_or("");
    let subject = e["step"]
        .as_str()
        .or(e["id"].as_str())
        .or(e["bead"].as_str())
        .or(e["bead"]["id"].as_str())
        .or(e["model"].as_str())
        .unwrap_or("");
    let detail = match kind {
        "bead.created" => format!("{:?}", e["bead"]["title"].as_str().unwrap_or("")),
        "bead.status" => format!(
            "-> {}{}",
            e["status"].as_str().unwrap_or(""),
            e["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        "bead.comment" => e["comment"]["text"].as_str().unwrap_or("").to_owned(),
        "molecule.poured" => {
            let steps: Vec<&str> = e["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["metadata"]["catalyst"]["step"].as_str())
                .collect();
            format!(
                "{} ({})",
                e["formula"].as_str().unwrap_or(""),
                steps.join(" -> ")
            )
        }
        "step.dispatched" => format!(
            "attempt {} model {}",
            e["attempt"],
            e["model"].as_str().unwrap_or("-")
        ),
        "step.finished" => format!(
            "attempt {}: {} in {} ms",
            e["attempt"],
            e["exit"].as_str().unwrap_or(""),
            e["duration_ms"]
        ),
        "step.result" => format!(
            "{} {} {} -> {}",
            e["outcome"].as_str().unwrap_or(""),
            e["status"].as_str().unwrap_or(""),
            e["verdict"].as_str().unwrap_or(""),
            e["decision"]["type"].as_str().unwrap_or("")
        ),
        "fix.created" => format!(
            "{} (iteration {})",
            e["step"]["id"].as_str().unwrap_or(""),
            e["iteration"]
        ),
        "agent.tool" => format!(
            "{} {}{}{}",
            e["tool"].as_str().unwrap_or(""),
            if e["allowed"] == json!(true) {
                "allowed"
            } else {
                "DENIED"
            },
            e["target"]
                .as_str()
                .map(|t| format!(" `{t}`"))
                .unwrap_or_default(),
            e["reason"]
                .as_str()
                .filter(|_| e["allowed"] != json!(true))
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        "merge.completed" => format!(
            "`{}` {} -> {}",
            e["target"].as_str().unwrap_or(""),
            short(&e["from"]),
            short(&e["to"])
        ),
        _ => e["reason"]
            .as_str()
            .or(e["output"].as_str())
            .map(|s| s.lines().next().unwrap_or("").to_owned())
            .unwrap_or_default(),
    };
    format!("{:>5}  {time}  {kind:<16} {subject:<22} {detail}", e["seq"])
}

fn short(v: &Value) -> String {
    v.as_str()
        .map(|s| s.chars().take(10).collect())
        .unwrap_or_default()
}

pub fn compact(v: &Value) -> String {
    match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}: {}",
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// `[####----] 2/4`.
pub fn progress_bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (done as usize * width).div_ceil(total as usize).min(width)
    };
    format!(
        "[{}{}] {done}/{total}",
        "#".repeat(filled),
        "-".repeat(width - filled)
    )
}

pub fn render_list(beads: &Value) -> String {
    let rows = beads.as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return "no beads\n".into();
    }
    let mut out = format!(
        "{:<14} {:<12} {:>3}  {:<20} {:<14} {}\n",
        "ID", "STATUS", "PRI", "PROGRESS", "STEP", "TITLE"
    );
    for b in rows {
        let step = b["running"]["step"]
            .as_str()
            .and_then(|s| s.rsplit_once('.').map(|(_, n)| n.to_owned()))
            .or(b["current"].as_str().map(str::to_owned))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<14} {:<12} {:>3}  {:<20} {:<14} {}\n",
            b["id"].as_str().unwrap_or(""),
            b["status"].as_str().unwrap_or(""),
            b["priority"],
            progress_bar(
                b["done"].as_u64().unwrap_or(0),
                b["total"].as_u64().unwrap_or(0),
                10
            ),
            step,
            b["title"].as_str().unwrap_or(""),
        ));
    }
    out
}

pub fn render_status(s: &Value) -> String {
    let mut out = format!(
        "catalystd {} (pid {}) on {}\nseq {}  ready {}  running {}{}{}\n",
        s["version"].as_str().unwrap_or(""),
        s["pid"],
        s["workspace"].as_str().unwrap_or(""),
        s["seq"],
        s["ready"],
        s["running"].as_array().map_or(0, Vec::len),
        if s["paused"] == json!(true) {
            "  PAUSED"
        } else {
            ""
        },
        s["storage_error"]
            .as_str()
            .map(|e| format!("\nSTORAGE ERROR: {e}"))
            .unwrap_or_default(),
    );
    if let Some(counts) = s["beads"].as_object() {
        let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!("beads: {}\n", parts.join(", ")));
    }
    for r in s["running"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  running {} attempt {} ({}) for {}s\n",
            r["step"].as_str().unwrap_or(""),
            r["attempt"],
            r["model"].as_str().unwrap_or("gate"),
            r["elapsed_ms"].as_u64().unwrap_or(0) / 1000
        ));
    }
    for w in s["waiting_approval"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  waiting for approval: {}\n",
            w.as_str().unwrap_or("")
        ));
    }
    out.push('\n');
    out.push_str(&render_list(&s["active"]));
    out
}

pub fn render_show(s: &Value) -> String {
    let bead = &s["bead"];
    let mut out = format!(
        "{}  {}\nstatus {}  priority {}  formula {}  {}\n",
        bead["id"].as_str().unwrap_or(""),
        bead["title"].as_str().unwrap_or(""),
        bead["status"].as_str().unwrap_or(""),
        bead["priority"],
        s["formula"].as_str().unwrap_or("-"),
        progress_bar(
            s["done"].as_u64().unwrap_or(0),
            s["total"].as_u64().unwrap_or(0),
            20
        ),
    );
    if let Some(r) = bead["close_reason"].as_str() {
        out.push_str(&format!("reason: {r}\n"));
    }
    out.push_str(&format!(
        "\n{:<24} {:<10} {:<12} {:>8}  {}\n",
        "STEP", "ROLE", "STATUS", "ATTEMPTS", "SUMMARY"
    ));
    for step in s["steps"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<24} {:<10} {:<12} {:>8}  {}\n",
            step["id"].as_str().unwrap_or(""),
            step["role"].as_str().unwrap_or(""),
            step["status"].as_str().unwrap_or(""),
            step["attempts"],
            step["summary"].as_str().unwrap_or(""),
        ));
        for run in step["runs"].as_array().into_iter().flatten() {
            out.push_str(&render_run(run));
        }
    }
    let comments = bead["comments"].as_array().cloned().unwrap_or_default();
    if !comments.is_empty() {
        out.push_str("\ncomments:\n");
        for c in comments {
            out.push_str(&format!(
                "  {} {}: {}\n",
                c["created_at"]
                    .as_str()
                    .and_then(|t| t.get(..19))
                    .unwrap_or(""),
                c["author"].as_str().unwrap_or(""),
                c["text"].as_str().unwrap_or("")
            ));
        }
    }
    out
}

/// One attempt of `show --runs`: a line with how it went, then its files.
fn render_run(run: &Value) -> String {
    let text = |v: &Value| match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    let mut result = text(&run["outcome"]);
    for key in ["status", "verdict"] {
        if let Some(v) = run[key].as_str() {
            result.push(' ');
            result.push_str(&v.to_uppercase());
        }
    }
    if let Some(why) = run["summary"].as_str().or(run["reason"].as_str()) {
        let line = why.lines().next().unwrap_or("");
        result.push_str(&format!(": {line}"));
    }
    let mut out = format!(
        "    attempt {}  model {}  {}  {} ms  cost {}  {}\n",
        run["attempt"],
        text(&run["model"]),
        text(&run["exit"]),
        text(&run["duration_ms"]),
        run["cost_usd"]
            .as_f64()
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "-".into()),
        result,
    );
    render_files(&mut out, "      ", &run["files"]);
    for command in run["commands"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "      $ {}  ({}, {} ms)\n",
            text(&command["command"]),
            text(&command["exit"]),
            text(&command["duration_ms"]),
        ));
        render_files(&mut out, "        ", &command["files"]);
    }
    out
}

/// The files of a run a person looks at, one per line.
fn render_files(out: &mut String, indent: &str, files: &Value) {
    for key in ["prompt", "context", "stdout", "stderr", "result"] {
        if let Some(path) = files[key].as_str() {
            out.push_str(&format!("{indent}{key:<8} {path}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bars() {
        assert_eq!(progress_bar(0, 4, 8), "[--------] 0/4");
        assert_eq!(progress_bar(2, 4, 8), "[####----] 2/4");
        assert_eq!(progress_bar(4, 4, 8), "[########] 4/4");
        assert_eq!(progress_bar(0, 0, 4), "[----] 0/0");
    }

    #[test]
    fn tool_decisions_read_as_one_line() {
        let denied = json!({"seq": 7, "ts": "2026-01-01T10:00:00Z", "type": "agent.tool",
            "bead": "cat-1", "step": "cat-1.review", "tool": "Write", "allowed": false,
            "target": "notes.txt", "reason": "read-only"});
        let line = render_event(&denied);
        assert!(
            line.ends_with("cat-1.review           Write DENIED `notes.txt`: read-only"),
            "{line}"
        );
        let allowed = json!({"seq": 8, "type": "agent.tool", "step": "cat-1.implement",
            "tool": "Bash", "allowed": true, "target": "cargo test"});
        assert!(render_event(&allowed).ends_with("Bash allowed `cargo test`"));
    }

    #[test]
    fn a_run_shows_its_model_result_and_files() {
        let run = json!({
            "attempt": 2, "model": "opus", "exit": "exit code 0", "duration_ms": 1500,
            "cost_usd": 0.25, "outcome": "finished", "status": "done", "verdict": "rejected",
            "summary": "needs a test",
            "files": {"prompt": "/r/2/prompt.md", "context": "/r/2/context.md", "stdout": "/r/2/stdout"},
        });
        let text = render_run(&run);
        assert!(
            text.starts_with("    attempt 2  model opus  exit code 0  1500 ms  cost $0.2500  finished DONE REJECTED: needs a test\n"),
            "{text}"
        );
        assert!(text.contains("      prompt   /r/2/prompt.md\n"), "{text}");
        assert!(text.contains("      context  /r/2/context.md\n"), "{text}");
        assert!(text.contains("      stdout   /r/2/stdout\n"), "{text}");
        let gate = json!({"attempt": 1, "exit": "exit code 1", "outcome": "gate_failed",
            "commands": [{"command": "make test", "exit": "exit code 1", "duration_ms": 5,
                          "files": {"stdout": "/r/1/command-1/stdout"}}]});
        let text = render_run(&gate);
        assert!(text.contains("model -  exit code 1"), "{text}");
        assert!(
            text.contains(
                "      $ make test  (exit code 1, 5 ms)\n        stdout   /r/1/command-1/stdout\n"
            ),
            "{text}"
        );
    }
}
