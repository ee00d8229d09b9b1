//! `ctl logs` for people: which attempt, then what the agent did, one entry at a time.

use super::style::{Paint, BOLD, CYAN, DIM, GREEN, RED, YELLOW};
use crate::domain::agent::transcript::Entry;

/// The lines of a tool result shown; the rest is counted.
const RESULT_LINES: usize = 4;
/// The longest a shown line of a tool result is.
const RESULT_CHARS: usize = 160;

/// `== cat-3.implement · attempt 2 · sonnet ==` (`gate` for a gate step).
pub fn render_attempt_header(
    step: &str,
    attempt: u32,
    model: Option<&str>,
    paint: Paint,
) -> String {
    let header = format!(
        "== {step} · attempt {attempt} · {} ==",
        model.unwrap_or("gate")
    );
    format!("{}\n", paint.paint(BOLD, &header))
}

/// One entry as lines ending in a newline. `last_message` is the agent's last message shown,
/// which the run's final message usually repeats: it is then not printed twice.
pub fn render_entry(entry: &Entry, last_message: Option<&str>, paint: Paint) -> String {
    match entry {
        Entry::Started { model } => {
            let model = model
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            lines(&paint.paint(DIM, &format!("session started{model}")))
        }
        Entry::Message(text) => lines(text.trim_end()),
        Entry::Thinking(text) => {
            let indented: Vec<String> = text
                .trim_end()
                .lines()
                .map(|l| paint.paint(DIM, &format!("  {l}")))
                .collect();
            format!(
                "{}\n{}\n",
                paint.paint(DIM, "thinking:"),
                indented.join("\n")
            )
        }
        Entry::ToolCall { name, input } => {
            let input = if input.is_empty() {
                String::new()
            } else {
                format!(" {input}")
            };
            lines(&format!(
                "{} {}{input}",
                paint.paint(CYAN, "→"),
                paint.paint(BOLD, name)
            ))
        }
        Entry::ToolResult { text, is_error } => tool_result(text, *is_error, paint),
        Entry::Notice(text) => lines(&paint.paint(YELLOW, &format!("! {}", text.trim_end()))),
        Entry::Text(text) => lines(text),
        Entry::End(parsed) => {
            let cost = parsed
                .cost_usd
                .map(|c| format!(" · ${c:.4}"))
                .unwrap_or_default();
            let (what, style) = match (&parsed.usage_limit, parsed.is_error, &parsed.final_message)
            {
                (Some(limit), _, _) => (format!("usage limit: {limit}"), YELLOW),
                (None, true, _) => (
                    format!(
                        "failed: {}",
                        parsed
                            .error
                            .as_deref()
                            .unwrap_or("the agent reported an error")
                    ),
                    RED,
                ),
                (None, false, Some(_)) => ("finished".to_owned(), GREEN),
                (None, false, None) => (
                    "no result: the output ended before the agent finished".to_owned(),
                    RED,
                ),
            };
            let mut out = lines(&paint.paint(style, &format!("== {what}{cost} ==")));
            let repeated = |m: &str| last_message.is_some_and(|l| l.trim() == m.trim());
            if let Some(message) = parsed.final_message.as_deref().filter(|m| !repeated(m)) {
                if !message.trim().is_empty() && !parsed.is_error {
                    out.push_str(&lines(message.trim_end()));
                }
            }
            out
        }
    }
}

fn lines(text: &str) -> String {
    format!("{text}\n")
}

/// `  ← ` and the first lines of what the tool gave back, the rest counted.
fn tool_result(text: &str, is_error: bool, paint: Paint) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    let style = if is_error { RED } else { DIM };
    if all.is_empty() {
        let empty = if is_error {
            "(failed, no output)"
        } else {
            "(no output)"
        };
        return lines(&paint.paint(style, &format!("  ← {empty}")));
    }
    let mut out = String::new();
    for (i, line) in all.iter().take(RESULT_LINES).enumerate() {
        let cut = if line.chars().count() > RESULT_CHARS {
            "…"
        } else {
            ""
        };
        let line: String = line.chars().take(RESULT_CHARS).chain(cut.chars()).collect();
        let lead = if i == 0 { "  ← " } else { "    " };
        out.push_str(&lines(&paint.paint(style, &format!("{lead}{line}"))));
    }
    if all.len() > RESULT_LINES {
        let more = all.len() - RESULT_LINES;
        out.push_str(&lines(
            &paint.paint(DIM, &format!("    … {more} more lines")),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::agent::stream::Parsed;

    #[test]
    fn tool_calls_and_results_read_short() {
        let call = Entry::ToolCall {
            name: "Bash".into(),
            input: "cargo test".into(),
        };
        assert_eq!(render_entry(&call, None, Paint::OFF), "→ Bash cargo test\n");
        let long = (1..=10)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
            .join("\n");
        let result = Entry::ToolResult {
            text: long,
            is_error: false,
        };
        assert_eq!(
            render_entry(&result, None, Paint::OFF),
            "  ← line 1\n    line 2\n    line 3\n    line 4\n    … 6 more lines\n"
        );
        let wide = Entry::ToolResult {
            text: "x".repeat(200),
            is_error: true,
        };
        let text = render_entry(&wide, None, Paint::ON);
        assert!(
            text.starts_with("\u{1b}[31m  ← xxx") && text.contains("x…"),
            "{text:?}"
        );
    }

    #[test]
    fn the_end_says_how_the_run_went_without_repeating_the_last_message() {
        let done = Entry::End(Parsed {
            final_message: Some("All done.".into()),
            cost_usd: Some(0.5),
            ..Parsed::default()
        });
        assert_eq!(
            render_entry(&done, Some("All done.\n"), Paint::OFF),
            "== finished · $0.5000 ==\n"
        );
        assert_eq!(
            render_entry(&done, Some("Working on it."), Paint::OFF),
            "== finished · $0.5000 ==\nAll done.\n"
        );
        let failed = Entry::End(Parsed {
            is_error: true,
            error: Some("API Error: 401".into()),
            ..Parsed::default()
        });
        assert_eq!(
            render_entry(&failed, None, Paint::OFF),
            "== failed: API Error: 401 ==\n"
        );
        assert_eq!(
            render_entry(&Entry::End(Parsed::default()), None, Paint::OFF),
            "== no result: the output ended before the agent finished ==\n"
        );
    }

    #[test]
    fn the_header_names_step_attempt_and_model() {
        assert_eq!(
            render_attempt_header("cat-3.implement", 2, Some("sonnet"), Paint::OFF),
            "== cat-3.implement · attempt 2 · sonnet ==\n"
        );
        assert_eq!(
            render_attempt_header("cat-3.checks", 1, None, Paint::OFF),
            "== cat-3.checks · attempt 1 · gate ==\n"
        );
    }
}
