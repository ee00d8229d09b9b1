//! How answers and events read for people: one line per event ([`event`]), tables and
//! progress bars.

mod event;
mod status;

use serde_json::Value;

pub use event::render_event;
pub use status::render_status;

use crate::protocol::{BeadSummary, RunFiles, RunRecord, ShowAnswer, StepView};

/// A small answer on one line: `key: value, …`, strings without their quotes.
pub fn compact(v: &Value) -> String {
    match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
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

pub fn render_list(beads: &[BeadSummary]) -> String {
    if beads.is_empty() {
        return "no beads\n".into();
    }
    let mut out = format!(
        "{:<14} {:<12} {:>3}  {:<20} {:<14} {}\n",
        "ID", "STATUS", "PRI", "PROGRESS", "STEP", "TITLE"
    );
    for b in beads {
        let step = b
            .running
            .as_ref()
            .and_then(|r| {
                r.step
                    .to_string()
                    .rsplit_once('.')
                    .map(|(_, n)| n.to_owned())
            })
            .or_else(|| b.current.clone())
            .unwrap_or_default();
        // The priority is not padded: the columns after it have always started right after it.
        out.push_str(&format!(
            "{:<14} {:<12} {}  {:<20} {:<14} {}\n",
            b.id.to_string(),
            b.status.to_string(),
            b.priority,
            progress_bar(b.done, b.total, 10),
            step,
            b.title,
        ));
    }
    out
}

pub fn render_show(s: &ShowAnswer) -> String {
    let bead = &s.bead;
    let mut out = format!(
        "{}  {}\nstatus {}  priority {}  formula {}  {}\n",
        bead.id,
        bead.title,
        bead.status,
        bead.priority,
        s.formula.as_deref().unwrap_or("-"),
        progress_bar(s.done, s.total, 20),
    );
    if let Some(r) = &bead.close_reason {
        out.push_str(&format!("reason: {r}\n"));
    }
    out.push_str(&format!(
        "\n{:<24} {:<10} {:<12} {:>8}  {}\n",
        "STEP", "ROLE", "STATUS", "ATTEMPTS", "SUMMARY"
    ));
    for step in &s.steps {
        out.push_str(&render_step(step));
    }
    if !bead.comments.is_empty() {
        out.push_str("\ncomments:\n");
        for c in &bead.comments {
            let at = c.created_at.to_string();
            out.push_str(&format!(
                "  {} {}: {}\n",
                at.get(..19).unwrap_or(""),
                c.author,
                c.text
            ));
        }
    }
    out
}

/// A step's line, then its attempts with `show --runs`.
fn render_step(step: &StepView) -> String {
    let detail = step.detail.as_ref();
    // The attempts are not padded, and read `null` for a bead that is no formula's step, as
    // they always have.
    let attempts = detail.map_or_else(|| "null".to_owned(), |d| d.attempts.to_string());
    let mut out = format!(
        "{:<24} {:<10} {:<12} {}  {}\n",
        step.id.to_string(),
        detail.map(|d| d.role.to_string()).unwrap_or_default(),
        step.status.to_string(),
        attempts,
        detail.and_then(|d| d.summary.as_deref()).unwrap_or(""),
    );
    for run in detail.and_then(|d| d.runs.as_ref()).into_iter().flatten() {
        out.push_str(&render_run(run));
    }
    out
}

/// A value of a run record for people: `-` when there is none.
fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// One attempt of `show --runs`: a line with how it went, then its files.
fn render_run(run: &RunRecord) -> String {
    let mut result = or_dash(run.outcome.as_ref());
    for v in [&run.status, &run.verdict].into_iter().flatten() {
        result.push(' ');
        result.push_str(&v.to_uppercase());
    }
    if let Some(why) = run.summary.as_ref().or(run.reason.as_ref()) {
        let line = why.lines().next().unwrap_or("");
        result.push_str(&format!(": {line}"));
    }
    let mut out = format!(
        "    attempt {}  model {}  {}  {} ms  cost {}  {}\n",
        run.attempt,
        or_dash(run.model.clone().flatten()),
        or_dash(run.exit.as_ref()),
        or_dash(run.duration_ms),
        run.cost_usd
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "-".into()),
        result,
    );
    render_files(&mut out, "      ", &run.files);
    for command in run.commands.iter().flatten() {
        out.push_str(&format!(
            "      $ {}  ({}, {} ms)\n",
            command.command, command.exit, command.duration_ms,
        ));
        if let Some(files) = &command.files {
            render_files(&mut out, "        ", files);
        }
    }
    out
}

/// The files of a run a person looks at, one per line.
fn render_files(out: &mut String, indent: &str, files: &RunFiles) {
    for (key, path) in [
        ("prompt", &files.prompt),
        ("context", &files.context),
        ("stdout", &files.stdout),
        ("stderr", &files.stderr),
        ("result", &files.result),
    ] {
        if let Some(path) = path {
            out.push_str(&format!("{indent}{key:<8} {}\n", path.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::GateCommand;

    #[test]
    fn progress_bars() {
        assert_eq!(progress_bar(0, 4, 8), "[--------] 0/4");
        assert_eq!(progress_bar(2, 4, 8), "[####----] 2/4");
        assert_eq!(progress_bar(4, 4, 8), "[########] 4/4");
        assert_eq!(progress_bar(0, 0, 4), "[----] 0/0");
    }

    fn record(attempt: u32) -> RunRecord {
        RunRecord {
            attempt,
            commands: None,
            commit: None,
            cost_usd: None,
            dispatched_at: None,
            duration_ms: None,
            exit: None,
            files: RunFiles::default(),
            model: None,
            outcome: None,
            reason: None,
            report: Value::Null,
            result: Value::Null,
            run_dir: "/r".into(),
            status: None,
            summary: None,
            verdict: None,
        }
    }

    #[test]
    fn a_run_shows_its_model_result_and_files() {
        let run = RunRecord {
            model: Some(Some("opus".into())),
            exit: Some("exit code 0".into()),
            duration_ms: Some(1500),
            cost_usd: Some(0.25),
            outcome: Some("finished".into()),
            status: Some("done".into()),
            verdict: Some("rejected".into()),
            summary: Some("needs a test".into()),
            files: RunFiles {
                prompt: Some("/r/2/prompt.md".into()),
                context: Some("/r/2/context.md".into()),
                stdout: Some("/r/2/stdout".into()),
                ..RunFiles::default()
            },
            ..record(2)
        };
        let text = render_run(&run);
        assert!(
            text.starts_with("    attempt 2  model opus  exit code 0  1500 ms  cost $0.2500  finished DONE REJECTED: needs a test\n"),
            "{text}"
        );
        assert!(text.contains("      prompt   /r/2/prompt.md\n"), "{text}");
        assert!(text.contains("      context  /r/2/context.md\n"), "{text}");
        assert!(text.contains("      stdout   /r/2/stdout\n"), "{text}");
        let gate = RunRecord {
            exit: Some("exit code 1".into()),
            outcome: Some("gate_failed".into()),
            commands: Some(vec![GateCommand {
                command: "make test".into(),
                dir: "/r/1/command-1".into(),
                duration_ms: 5,
                exit: "exit code 1".into(),
                files: Some(RunFiles {
                    stdout: Some("/r/1/command-1/stdout".into()),
                    ..RunFiles::default()
                }),
            }]),
            ..record(1)
        };
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
