//! The invocation log (`STUB_CLAUDE_LOG`): one JSON line per event, appended by every
//! invocation, and the functions tests use to read it back.
//!
//! Each line is written with a single `write` on a file opened with `O_APPEND`, so lines from
//! parallel invocations never interleave. Every line carries the invocation's `session_id`,
//! which ties its events together even when a pid is reused.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub pid: u32,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    pub session_id: String,
    #[serde(flatten)]
    pub event: LogEvent,
}

/// What happened, tagged by `event`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LogEvent {
    /// The invocation began; written before it does anything else.
    Start(StartEntry),
    /// A `SessionStart` hook added context.
    SessionStart { additional_context: String },
    /// A tool call and whether it was allowed (by the tool flags, then the hooks).
    Tool(ToolEntry),
    /// A `shell` command ran (past the hooks).
    Shell(ShellEntry),
    /// A `Stop` hook run that blocked; the second one is ignored, as Claude Code's loop guard
    /// ignores it.
    StopBlock {
        reason: String,
        stop_hook_active: bool,
        ignored: bool,
    },
    /// A user message after the first, read from stdin under `--input-format stream-json`
    /// once the previous turn's result was out; another turn answers it.
    FollowUp { text: String },
    /// The invocation failed before answering (bad scenario, refused write, ...).
    Error { message: String },
    /// The invocation ended normally (no line when it dies by a signal); once per session,
    /// with its last turn's result.
    End(EndEntry),
}

/// The `start` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartEntry {
    pub role: Option<String>,
    pub step: Option<String>,
    pub bead: Option<String>,
    pub model: Option<String>,
    /// The arguments after the program name.
    pub argv: Vec<String>,
    pub cwd: String,
    /// The index of the scenario rule that answered, if any.
    pub rule: Option<usize>,
    /// The index of the response within that rule.
    pub response: Option<usize>,
    pub prompt: String,
}

/// A `tool` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolEntry {
    pub name: String,
    pub allowed: bool,
    pub reason: Option<String>,
    pub input: Value,
}

/// A `shell` line: the command, its exit code (`None` when a signal ended it) and output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShellEntry {
    pub command: String,
    pub exit_code: Option<i32>,
    pub output: String,
}

/// The `end` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndEntry {
    pub exit_code: i32,
    pub is_error: bool,
    pub usage_limit: bool,
    pub num_turns: u32,
    pub cost_usd: f64,
    /// The final message (the `result` of the result event).
    pub result: String,
}

/// One invocation, gathered from its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    pub session_id: String,
    pub pid: u32,
    pub role: Option<String>,
    pub step: Option<String>,
    pub bead: Option<String>,
    pub model: Option<String>,
    pub argv: Vec<String>,
    pub cwd: String,
    pub rule: Option<usize>,
    pub response: Option<usize>,
    pub prompt: String,
    pub started_ms: u64,
    /// `None` while running, or when the invocation died without ending (signal, kill).
    pub ended_ms: Option<u64>,
    pub end: Option<EndEntry>,
    pub tools: Vec<ToolEntry>,
    pub shell: Vec<ShellEntry>,
    pub stop_blocks: Vec<String>,
    /// The follow-up user messages, in order (stream-json input).
    pub follow_ups: Vec<String>,
    pub additional_context: Vec<String>,
    pub errors: Vec<String>,
}

impl Invocation {
    /// The role, or "" when `CATALYST_ROLE` was not set.
    pub fn role(&self) -> &str {
        self.role.as_deref().unwrap_or("")
    }

    /// The exit code of an invocation that ended normally.
    pub fn exit_code(&self) -> Option<i32> {
        self.end.as_ref().map(|e| e.exit_code)
    }
}

/// Reads every complete line of the log. A missing file is an empty log; a last line without
/// its newline is being written and is left out.
pub fn read_log(path: impl AsRef<Path>) -> io::Result<Vec<LogEntry>> {
    let text = match std::fs::read_to_string(path.as_ref()) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .or_else(|e| {
                    // A stub killed in the middle of its write leaves part of a line, which the
                    // next writer's whole line follows: that one is read, the torn part dropped.
                    match line.rfind(LINE_START).filter(|&at| at > 0) {
                        Some(at) => serde_json::from_str(&line[at..]),
                        None => Err(e),
                    }
                })
                .map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} line {}: {e}", path.as_ref().display(), i + 1),
                    )
                })
        })
        .collect()
}

/// How every line of the log starts (`pid` is the first field of [`LogEntry`]).
const LINE_START: &str = "{\"pid\":";

/// The invocations in the log, in the order they started.
pub fn invocations(path: impl AsRef<Path>) -> io::Result<Vec<Invocation>> {
    let mut out: Vec<Invocation> = Vec::new();
    for entry in read_log(path)? {
        if let LogEvent::Start(start) = entry.event {
            out.push(Invocation {
                session_id: entry.session_id,
                pid: entry.pid,
                role: start.role,
                step: start.step,
                bead: start.bead,
                model: start.model,
                argv: start.argv,
                cwd: start.cwd,
                rule: start.rule,
                response: start.response,
                prompt: start.prompt,
                started_ms: entry.ts_ms,
                ended_ms: None,
                end: None,
                tools: Vec::new(),
                shell: Vec::new(),
                stop_blocks: Vec::new(),
                follow_ups: Vec::new(),
                additional_context: Vec::new(),
                errors: Vec::new(),
            });
            continue;
        }
        let Some(inv) = out
            .iter_mut()
            .rev()
            .find(|i| i.session_id == entry.session_id)
        else {
            continue;
        };
        match entry.event {
            LogEvent::Start(_) => {}
            LogEvent::SessionStart { additional_context } => {
                inv.additional_context.push(additional_context)
            }
            LogEvent::Tool(tool) => inv.tools.push(tool),
            LogEvent::Shell(shell) => inv.shell.push(shell),
            LogEvent::StopBlock { reason, .. } => inv.stop_blocks.push(reason),
            LogEvent::FollowUp { text } => inv.follow_ups.push(text),
            LogEvent::Error { message } => inv.errors.push(message),
            LogEvent::End(end) => {
                inv.ended_ms = Some(entry.ts_ms);
                inv.end = Some(end);
            }
        }
    }
    Ok(out)
}

/// Appends this invocation's events to the log, when there is one.
pub(crate) struct LogWriter {
    file: Option<File>,
    session_id: String,
}

impl LogWriter {
    /// Opens the log for appending; `None` writes nothing.
    pub fn open(path: Option<&Path>, session_id: &str) -> io::Result<LogWriter> {
        let file = match path {
            Some(path) => Some(OpenOptions::new().append(true).create(true).open(path)?),
            None => None,
        };
        Ok(LogWriter {
            file,
            session_id: session_id.to_string(),
        })
    }

    /// Writes one event as one line. A failed write is reported on stderr and otherwise
    /// ignored: the log is for the test to read, and the invocation's answer matters more.
    pub fn write(&mut self, event: LogEvent) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let entry = LogEntry {
            pid: std::process::id(),
            ts_ms: now_ms(),
            session_id: self.session_id.clone(),
            event,
        };
        let line = match serde_json::to_string(&entry) {
            Ok(mut line) => {
                line.push('\n');
                line
            }
            Err(e) => {
                eprintln!("stub-claude: cannot encode a log line: {e}");
                return;
            }
        };
        if let Err(e) = file.write_all(line.as_bytes()) {
            eprintln!("stub-claude: cannot append to STUB_CLAUDE_LOG: {e}");
        }
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_into_invocations() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log.jsonl");
        let mut log = LogWriter::open(Some(&path), "s-1").expect("open");
        log.write(LogEvent::Start(StartEntry {
            role: Some("review".into()),
            step: Some("cat-1.review".into()),
            bead: Some("cat-1".into()),
            model: Some("haiku".into()),
            argv: vec!["-p".into()],
            cwd: "/w".into(),
            rule: Some(0),
            response: Some(1),
            prompt: "review it".into(),
        }));
        log.write(LogEvent::Tool(ToolEntry {
            name: "Write".into(),
            allowed: false,
            reason: Some("read-only".into()),
            input: serde_json::json!({"file_path": "x"}),
        }));
        log.write(LogEvent::FollowUp {
            text: "again".into(),
        });
        log.write(LogEvent::End(EndEntry {
            exit_code: 0,
            is_error: false,
            usage_limit: false,
            num_turns: 2,
            cost_usd: 0.0,
            result: "ok".into(),
        }));
        // A line still being written is not read.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"{\"pid\":1,"))
            .expect("append a torn line");

        let entries = read_log(&path).expect("read");
        assert_eq!(entries.len(), 4);
        let text = std::fs::read_to_string(&path).expect("read the log");
        assert!(
            text.contains(r#""event":"follow_up","text":"again""#),
            "{text}"
        );
        let all = invocations(&path).expect("invocations");
        assert_eq!(all.len(), 1);
        let inv = &all[0];
        assert_eq!(inv.role(), "review");
        assert_eq!(inv.response, Some(1));
        assert_eq!(inv.tools.len(), 1);
        assert!(!inv.tools[0].allowed);
        assert_eq!(inv.follow_ups, ["again"]);
        assert_eq!(inv.exit_code(), Some(0));
        assert!(inv.ended_ms.is_some());

        // A writer killed mid-line, then another writer's whole line after it.
        let whole = std::fs::read_to_string(&path).expect("read the log");
        let second = whole.lines().nth(1).expect("a second line").to_owned();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{second}\n").as_bytes()))
            .expect("append after the torn line");
        let entries = read_log(&path).expect("the torn part is dropped");
        assert_eq!(entries.len(), 5);
    }

    #[test]
    fn a_missing_log_is_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(read_log(dir.path().join("none")).expect("read").is_empty());
    }
}
