//! `ctl show`: a bead, its steps in aligned columns and (with `--runs`) every attempt.

use super::list::{status_label, waiting_for};
use super::style::{self, Paint, BOLD, DIM};
use super::table::{Cell, Table};
use super::{progress_bar, time};
use crate::domain::id::BeadId;
use crate::domain::state::Stuck;
use crate::protocol::{RunFiles, RunRecord, ShowAnswer, StepView};

pub fn render_show(s: &ShowAnswer, paint: Paint) -> String {
    let bead = &s.bead;
    let status = status_label(&bead.status, bead.close_reason.as_deref());
    let mut out = format!(
        "{}  {}\nstatus {}  priority {}  formula {}  {}\n",
        paint.paint(BOLD, bead.id.as_str()),
        bead.title,
        paint.paint(style::status(&status), &status),
        bead.priority,
        s.formula.as_deref().unwrap_or("-"),
        progress_bar(s.done, s.total, 20),
    );
    if let Some(waiting) = waiting_for(&s.waiting_for, &s.stuck_on) {
        out.push_str(&paint.paint(DIM, &waiting));
        out.push('\n');
    }
    for (id, why) in &s.stuck_on {
        out.push_str(&format!("  {}\n", unstick_hint(&bead.id, id, *why)));
    }
    if let Some(r) = &bead.close_reason {
        out.push_str(&format!("reason: {r}\n"));
    }
    out.push_str(&format!("created {}", time::date_time(&bead.created_at)));
    if let Some(closed) = &bead.closed_at {
        out.push_str(&format!("  closed {}", time::date_time(closed)));
    }
    out.push('\n');
    let mut table = Table::new();
    table.line("");
    table.row(
        ["STEP", "ROLE", "STATUS", "ATTEMPTS", "SUMMARY"]
            .into_iter()
            .map(|h| Cell::new(h, BOLD))
            .collect(),
    );
    for step in &s.steps {
        add_step(&mut table, step);
    }
    out.push_str(&table.render(paint));
    if !bead.comments.is_empty() {
        out.push_str("\ncomments:\n");
        for c in &bead.comments {
            // A comment of several lines (a block reason with a gate's output or a review's
            // instructions) stays under its first line.
            out.push_str(&format!(
                "  {} {}: {}\n",
                paint.paint(DIM, &time::date_time(&c.created_at)),
                c.author,
                c.text.trim_end().replace('\n', "\n    ")
            ));
        }
    }
    out
}

/// What a person can do about `bead` waiting for `stuck`, which will not merge by itself.
fn unstick_hint(bead: &BeadId, stuck: &BeadId, why: Stuck) -> String {
    let drop = format!("`catalyst ctl update {bead} --drop-after {stuck}` stops waiting for it");
    match why {
        Stuck::Blocked => {
            format!("{stuck} is blocked: `catalyst ctl retry {stuck}` runs it again, or {drop}")
        }
        Stuck::Cancelled => format!("{stuck} was cancelled and will not merge: {drop}"),
        Stuck::Unmerged => format!(
            "{stuck} was closed without merging: `catalyst ctl reopen {stuck}` finishes it, or {drop}"
        ),
    }
}

/// A step's row, then its attempts with `show --runs`.
fn add_step(table: &mut Table, step: &StepView) {
    let detail = step.detail.as_ref();
    let status = step.status.to_string();
    table.row(vec![
        Cell::plain(step.id.to_string()),
        Cell::plain(detail.map(|d| d.role.to_string()).unwrap_or_default()),
        Cell::new(status.clone(), style::status(&status)),
        Cell::plain(or_dash(detail.map(attempts))),
        Cell::plain(detail.and_then(|d| d.summary.clone()).unwrap_or_default()),
    ]);
    if let Some(instructions) = detail.and_then(|d| d.instructions.as_deref()) {
        let what = detail
            .and_then(|d| d.fixes.as_ref())
            .map_or_else(String::new, |f| {
                format!(" ({})", f.as_str().rsplit('.').next().unwrap_or(f.as_str()))
            });
        table.line(format!("    to fix{what}:"));
        for line in instructions.lines() {
            table.line(format!("      {line}"));
        }
    }
    for run in detail.and_then(|d| d.runs.as_ref()).into_iter().flatten() {
        let text = render_run(run);
        table.line(text.strip_suffix('\n').unwrap_or(&text));
    }
}

/// The attempts that counted against the step, and those that did not when there were any:
/// `2`, `2 (+1 not counted)`.
fn attempts(d: &crate::protocol::StepDetail) -> String {
    let counted = d.attempts.saturating_sub(d.uncounted);
    if d.uncounted == 0 {
        counted.to_string()
    } else {
        format!("{counted} (+{} not counted)", d.uncounted)
    }
}

/// A value of a run record for people: `-` when there is none.
fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// One attempt of `show --runs`: a line with how it went, then its files.
fn render_run(run: &RunRecord) -> String {
    let mut result = or_dash(run.outcome.as_ref());
    let words = [
        run.status.map(|s| s.as_str()),
        run.verdict.map(|v| v.as_str()),
    ];
    for word in words.into_iter().flatten() {
        result.push(' ');
        result.push_str(word);
    }
    if let Some(why) = run.summary.as_ref().or(run.reason.as_ref()) {
        let line = why.lines().next().unwrap_or("");
        result.push_str(&format!(": {line}"));
    }
    let mut out = format!(
        "    attempt {}{}  model {}  {}  {} ms  cost {}  {}\n",
        run.attempt,
        run.dispatched_at
            .as_ref()
            .map(|at| format!("  {}", time::date_time(at)))
            .unwrap_or_default(),
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
    use crate::domain::result::{ResultStatus, Verdict};
    use crate::domain::router::OutcomeKind;
    use crate::protocol::GateCommand;
    use serde_json::Value;

    fn record(attempt: u32) -> RunRecord {
        RunRecord {
            attempt,
            commands: None,
            commit: None,
            cost_usd: None,
            dispatched_at: None,
            failed: None,
            duration_ms: None,
            exit: None,
            files: RunFiles::default(),
            instructions: Vec::new(),
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
            outcome: Some(OutcomeKind::Finished),
            status: Some(ResultStatus::Done),
            verdict: Some(Verdict::Rejected),
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
            outcome: Some(OutcomeKind::GateFailed),
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
