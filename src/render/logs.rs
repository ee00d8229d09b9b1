//! `ctl logs` for people: which attempt, then what the agent did, one entry at a time.

use super::style::{Paint, BOLD, CYAN, DIM, GREEN, RED, YELLOW};
use crate::domain::agent::transcript::{Entry, Transcript};

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

/// An attempt's output as people read it, fed as it comes (`ctl logs`, the dashboard's live
/// output): cut into whole lines, each read as a transcript entry and rendered (or, `plain`,
/// shown as it is: stderr).
#[derive(Default)]
pub struct TranscriptView {
    plain: bool,
    paint: Paint,
    partial: String,
    transcript: Transcript,
    last_message: Option<String>,
    ended: bool,
}

impl TranscriptView {
    /// A view of stdout (`plain = false`) or of text such as stderr.
    pub fn new(plain: bool, paint: Paint) -> TranscriptView {
        TranscriptView {
            plain,
            paint,
            ..TranscriptView::default()
        }
    }

    /// Whether it shows text as it is (stderr).
    pub fn is_plain(&self) -> bool {
        self.plain
    }

    /// What the whole lines of `data` (with what was left of the last feed) show.
    pub fn feed(&mut self, data: &str) -> String {
        self.partial.push_str(data);
        let mut out = String::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            self.line(line.trim_end_matches(['\n', '\r']), &mut out);
        }
        out
    }

    /// The rest: a last line without its newline, then, when the run is `over` and its
    /// output did not say how it ended, how the daemon read its end.
    pub fn finish(&mut self, over: bool) -> String {
        let mut out = String::new();
        let rest = std::mem::take(&mut self.partial);
        if !rest.is_empty() {
            self.line(&rest, &mut out);
        }
        if over && !self.plain {
            let transcript = std::mem::take(&mut self.transcript);
            if let Some(end) = transcript.finish().filter(|_| !self.ended) {
                self.entry(&end, &mut out);
            }
        }
        out
    }

    fn line(&mut self, line: &str, out: &mut String) {
        if self.plain {
            out.push_str(line);
            out.push('\n');
            return;
        }
        for entry in self.transcript.line(line) {
            self.entry(&entry, out);
        }
    }

    fn entry(&mut self, entry: &Entry, out: &mut String) {
        out.push_str(&render_entry(
            entry,
            self.last_message.as_deref(),
            self.paint,
        ));
        match entry {
            Entry::Message(m) => self.last_message = Some(m.clone()),
            Entry::End(_) => self.ended = true,
            _ => {}
        }
    }
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
    fn a_view_shows_whole_lines_as_they_come_and_the_rest_at_the_end() {
        let mut view = TranscriptView::new(false, Paint::OFF);
        let init = r#"{"type":"system","subtype":"init","model":"sonnet"}"#;
        assert_eq!(view.feed(&init[..10]), "", "half a line waits");
        let started = view.feed(&format!("{}\n", &init[10..]));
        assert_eq!(started, "session started (sonnet)\n");
        let rest = view.finish(true);
        assert!(
            rest.contains("no result"),
            "how it ended, when it did not say: {rest}"
        );
        let mut stderr = TranscriptView::new(true, Paint::OFF);
        assert_eq!(stderr.feed("a\r\nb"), "a\n");
        assert_eq!(stderr.finish(true), "b\n", "text as it is, no end added");
    }

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
