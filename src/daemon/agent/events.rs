//! What is read from an agent's streams while it runs: its stdout parsed per
//! [`OutputFormat`], and its stderr scanned for a limit notice.
//!
//! Both keep only what the report needs, so memory stays bounded whatever the agent prints:
//! one line at most [`MAX_LINE`] long, the last `result` (Claude) or `agent_message` (Codex),
//! and for `text` a bounded tail.

use super::output::{Consumer, LineSplitter, Tail};
use crate::domain::agent::claude::Claude;
use crate::domain::agent::codex::Codex;
use crate::domain::agent::limits;
use crate::domain::agent::profile::OutputFormat;
pub(crate) use crate::domain::agent::stream::Parsed;
use crate::domain::agent::unavailable;
use crate::domain::unavailable::Hindrance;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest stdout line parsed. A longer line is skipped: no real event is that large, and
/// buffering it whole would let output size decide memory use.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// The longest stderr line scanned for a limit notice.
const MAX_STDERR_LINE: usize = 64 * 1024;

/// The most of a `text` agent's output kept in memory for when its output passes the cap.
pub const TEXT_TAIL: usize = 1024 * 1024;

/// Reads stdout as it arrives, and fires `hopeless` when it shows a failure no retry fixes.
pub(crate) struct StdoutParser {
    format: Format,
    hopeless: CancellationToken,
    /// Told of each `result` event of a conversation, as it is read.
    turns: Option<mpsc::UnboundedSender<TurnEnd>>,
}

/// A turn's `result`: its final message, and whether it is an error.
#[derive(Debug)]
pub(crate) struct TurnEnd {
    pub(crate) message: Option<String>,
    pub(crate) is_error: bool,
}

enum Format {
    Claude(LineSplitter, Claude),
    Codex(LineSplitter, Codex),
    /// The final message is read back from the stdout file at the end; the tail stands in
    /// when the file was cut at the cap.
    Text(Tail),
}

impl StdoutParser {
    pub(crate) fn new(format: OutputFormat, cap: u64, hopeless: CancellationToken) -> StdoutParser {
        let format = match format {
            OutputFormat::ClaudeStreamJson => {
                Format::Claude(LineSplitter::new(MAX_LINE), Claude::default())
            }
            OutputFormat::CodexJson => Format::Codex(LineSplitter::new(MAX_LINE), Codex::default()),
            OutputFormat::Text => {
                let max = usize::try_from(cap).unwrap_or(usize::MAX).min(TEXT_TAIL);
                Format::Text(Tail::new(max))
            }
        };
        StdoutParser {
            format,
            hopeless,
            turns: None,
        }
    }

    /// Sends each `result` event to `turns` as it is read (Claude Code's format only).
    pub(crate) fn with_turns(mut self, turns: mpsc::UnboundedSender<TurnEnd>) -> StdoutParser {
        self.turns = Some(turns);
        self
    }

    /// What the JSON formats found. For `text`, `Parsed` is empty and the tail is returned for
    /// the caller to use when the stdout file was truncated.
    pub(crate) fn finish(self) -> (Parsed, Option<Tail>) {
        match self.format {
            Format::Claude(lines, claude) => {
                log_oversized(&lines);
                (claude.finish(), None)
            }
            Format::Codex(lines, codex) => {
                log_oversized(&lines);
                (codex.finish(), None)
            }
            Format::Text(tail) => (Parsed::default(), Some(tail)),
        }
    }
}

/// Tells a conversation's holder of the `result` `claude` just read, each as it comes.
fn tell_turn_end(turns: Option<&mpsc::UnboundedSender<TurnEnd>>, claude: &Claude) {
    if let (Some(turns), Some((message, is_error))) = (turns, claude.last_result()) {
        let _ = turns.send(TurnEnd {
            message: message.map(str::to_owned),
            is_error,
        });
    }
}

/// A `result` too long to parse still ends its turn: told as a result without a final
/// message, it closes the conversation (the attempt's end then finds no result), where
/// waiting for another would last until the stall timeout.
fn tell_cut_result(turns: Option<&mpsc::UnboundedSender<TurnEnd>>, head: &[u8]) {
    let Some(turns) = turns else { return };
    let head = String::from_utf8_lossy(head);
    let compact: String = head.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.starts_with(r#"{"type":"result""#) {
        tracing::warn!(
            max = MAX_LINE,
            "the agent's result event is too long to parse; ending the conversation"
        );
        let _ = turns.send(TurnEnd {
            message: None,
            is_error: false,
        });
    }
}

fn log_oversized(lines: &LineSplitter) {
    if lines.oversized > 0 {
        tracing::warn!(
            lines = lines.oversized,
            max = MAX_LINE,
            "skipped agent output lines too long to parse"
        );
    }
}

impl Consumer for StdoutParser {
    fn feed(&mut self, chunk: &[u8]) {
        match &mut self.format {
            Format::Claude(lines, claude) => {
                let turns = &self.turns;
                lines.feed_noting_cut(
                    chunk,
                    &mut |l| {
                        if claude.line(&String::from_utf8_lossy(l)) {
                            tell_turn_end(turns.as_ref(), claude);
                        }
                    },
                    &mut |head| tell_cut_result(turns.as_ref(), head),
                );
                if claude.hopeless.is_some() {
                    self.hopeless.cancel();
                }
            }
            Format::Codex(lines, codex) => {
                lines.feed(chunk, &mut |l| codex.line(&String::from_utf8_lossy(l)));
            }
            Format::Text(tail) => tail.feed(chunk),
        }
    }

    fn end(&mut self) {
        match &mut self.format {
            Format::Claude(lines, claude) => {
                lines.end(&mut |l| {
                    claude.line(&String::from_utf8_lossy(l));
                });
            }
            Format::Codex(lines, codex) => {
                lines.end(&mut |l| codex.line(&String::from_utf8_lossy(l)));
            }
            Format::Text(_) => {}
        }
    }
}

/// Watches stderr for a limit notice or a failure no retry fixes: agent CLIs that fail before
/// producing events (an exhausted quota, a missing key, a sandbox that cannot find the
/// program) say why there.
pub(crate) struct StderrScanner {
    lines: LineSplitter,
    pub(crate) usage_limit: Option<String>,
    pub(crate) unavailable: Option<Hindrance>,
}

impl StderrScanner {
    pub(crate) fn new() -> StderrScanner {
        StderrScanner {
            lines: LineSplitter::new(MAX_STDERR_LINE),
            usage_limit: None,
            unavailable: None,
        }
    }
}

impl Consumer for StderrScanner {
    fn feed(&mut self, chunk: &[u8]) {
        let (limit, unavailable) = (&mut self.usage_limit, &mut self.unavailable);
        self.lines.feed(chunk, &mut |l| scan(limit, unavailable, l));
    }

    fn end(&mut self) {
        let (limit, unavailable) = (&mut self.usage_limit, &mut self.unavailable);
        self.lines.end(&mut |l| scan(limit, unavailable, l));
    }
}

fn scan(limit: &mut Option<String>, unavailable: &mut Option<Hindrance>, line: &[u8]) {
    let line = String::from_utf8_lossy(line);
    if let Some(reason) = limits::in_error_text(&line) {
        *limit = Some(reason);
    }
    if unavailable.is_none() {
        *unavailable = unavailable::in_error_text(&line);
    }
}
