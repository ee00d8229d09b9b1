//! An agent's stdout as a person reads it (`ctl logs`): what the agent said, the tools it
//! called and what they gave back, and how the run ended.
//!
//! The end is read by the parsers that decide the step's outcome ([`super::claude`],
//! [`super::codex`]), fed every line as the daemon feeds them, so what `ctl logs` says of a
//! run is what the daemon made of it. The conversation, which those parsers skip, is read
//! here. The format is told by the events themselves (Claude Code's `type`s are `system`,
//! `assistant`, `user`, `result`; Codex's are dotted, `item.completed`, `turn.failed`), so an
//! attempt needs no profile to be read back; a line that is neither is plain text.

use std::collections::HashSet;

use serde_json::Value;

use super::claude::Claude;
use super::codex::Codex;
use super::limits::shorten;
use super::stream::Parsed;

/// One thing an agent did, in the order it printed them.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// The session started; the model, when the agent CLI says which.
    Started { model: Option<String> },
    /// The agent's words.
    Message(String),
    /// Its reasoning, when the CLI prints it.
    Thinking(String),
    /// A tool call: the tool and what it was given, as one short line.
    ToolCall { name: String, input: String },
    /// What a tool call gave back.
    ToolResult { text: String, is_error: bool },
    /// Something the agent CLI says about the run itself (an API retry, a limit, text sent
    /// back to the model such as a Stop hook's reason).
    Notice(String),
    /// A line that is no event of a known format: plain-text agents, stray output.
    Text(String),
    /// How the run ended, as the daemon reads it.
    End(Parsed),
}

enum Format {
    Claude(Claude),
    Codex(Codex),
}

/// Reads one attempt's stdout, line by line.
#[derive(Default)]
pub struct Transcript {
    format: Option<Format>,
    /// The run's end was read (Claude's `result`, Codex's `turn.completed`/`turn.failed`).
    ended: bool,
    /// Codex command items whose start was shown, so their completion shows only the output.
    started: HashSet<String>,
}

impl Transcript {
    pub fn new() -> Transcript {
        Transcript::default()
    }

    /// What one line of stdout (without its newline) says.
    pub fn line(&mut self, line: &str) -> Vec<Entry> {
        let event: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            _ => return text(line),
        };
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            return text(line);
        };
        if self.format.is_none() {
            self.format = if CLAUDE_TYPES.contains(&kind) {
                Some(Format::Claude(Claude::default()))
            } else if CODEX_TYPES.contains(&kind) {
                Some(Format::Codex(Codex::default()))
            } else {
                None
            };
        }
        match &mut self.format {
            Some(Format::Claude(parser)) => {
                parser.line(line);
                if kind == "result" {
                    self.ended = true;
                    return vec![Entry::End(parser.clone().finish())];
                }
                claude_entries(kind, &event)
            }
            Some(Format::Codex(parser)) => {
                parser.line(line);
                if matches!(kind, "turn.completed" | "turn.failed") {
                    self.ended = true;
                    return vec![Entry::End(parser.clone().finish())];
                }
                codex_entries(kind, &event, &mut self.started)
            }
            None => text(line),
        }
    }

    /// The run's end when the output stopped without one (a killed agent): what the parser
    /// makes of it. `None` once the end was read, and for plain text.
    pub fn finish(self) -> Option<Entry> {
        if self.ended {
            return None;
        }
        match self.format? {
            Format::Claude(parser) => Some(Entry::End(parser.finish())),
            Format::Codex(parser) => Some(Entry::End(parser.finish())),
        }
    }
}

const CLAUDE_TYPES: [&str; 6] = [
    "system",
    "assistant",
    "user",
    "result",
    "stream_event",
    "rate_limit_event",
];

const CODEX_TYPES: [&str; 8] = [
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.started",
    "item.updated",
    "item.completed",
    "error",
];

fn text(line: &str) -> Vec<Entry> {
    if line.trim().is_empty() {
        Vec::new()
    } else {
        vec![Entry::Text(line.to_owned())]
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The longest a tool call's input is shown.
const INPUT_CHARS: usize = 160;

/// A tool's input on one line: the file or command the tool policy records for it, else the
/// input as JSON, cut short.
fn short_input(tool: &str, input: &Value) -> String {
    if let Some(target) = crate::domain::policy::target(tool, input) {
        return target;
    }
    let pick = ["description", "query", "path", "pattern", "prompt"]
        .iter()
        .find_map(|k| str_at(input, k));
    let text = match pick {
        Some(s) => s.to_owned(),
        None if input.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => input.to_string(),
    };
    shorten(&text, INPUT_CHARS)
}

fn claude_entries(kind: &str, event: &Value) -> Vec<Entry> {
    let message = event.get("message");
    let blocks = message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    match kind {
        "system" => match str_at(event, "subtype") {
            Some("init") => vec![Entry::Started {
                model: str_at(event, "model").map(str::to_owned),
            }],
            Some("api_retry") => {
                let status = event
                    .get("error_status")
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "an error".into());
                vec![Entry::Notice(format!(
                    "the API answered {status}; Claude Code retries"
                ))]
            }
            _ => Vec::new(),
        },
        "assistant" => blocks
            .iter()
            .filter_map(|b| match str_at(b, "type")? {
                "text" => Some(Entry::Message(str_at(b, "text")?.to_owned())),
                "thinking" => Some(Entry::Thinking(str_at(b, "thinking")?.to_owned())),
                "tool_use" => {
                    let name = str_at(b, "name").unwrap_or("?").to_owned();
                    let input = short_input(&name, b.get("input").unwrap_or(&Value::Null));
                    Some(Entry::ToolCall { name, input })
                }
                _ => None,
            })
            .collect(),
        "user" => blocks
            .iter()
            .filter_map(|b| match str_at(b, "type")? {
                "tool_result" => Some(Entry::ToolResult {
                    text: result_text(b.get("content")),
                    is_error: b.get("is_error").and_then(Value::as_bool) == Some(true),
                }),
                "text" => Some(Entry::Notice(str_at(b, "text")?.to_owned())),
                _ => None,
            })
            .collect(),
        "rate_limit_event" => {
            let info = event.get("rate_limit_info");
            match info.and_then(|i| str_at(i, "status")) {
                Some("rejected") => vec![Entry::Notice(
                    "the account's usage limit was reached".into(),
                )],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// A tool result's `content`: a string, or text blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| str_at(b, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn codex_entries(kind: &str, event: &Value, started: &mut HashSet<String>) -> Vec<Entry> {
    if kind == "error" {
        let message = str_at(event, "message").unwrap_or("codex reported an error");
        return vec![Entry::Notice(message.to_owned())];
    }
    let Some(item) = event.get("item") else {
        return match kind {
            "thread.started" => vec![Entry::Started { model: None }],
            _ => Vec::new(),
        };
    };
    let item_type = str_at(item, "type").or_else(|| str_at(item, "item_type"));
    let id = str_at(item, "id").unwrap_or_default().to_owned();
    match (kind, item_type) {
        ("item.started", Some("command_execution")) => {
            started.insert(id);
            vec![command_call(item)]
        }
        ("item.completed", Some("command_execution")) => {
            let mut entries = Vec::new();
            if !started.remove(&id) {
                entries.push(command_call(item));
            }
            let exit = item.get("exit_code").and_then(Value::as_i64);
            let mut text = str_at(item, "aggregated_output")
                .unwrap_or_default()
                .to_owned();
            if let Some(code) = exit.filter(|c| *c != 0) {
                text = format!("exit code {code}\n{text}");
            }
            entries.push(Entry::ToolResult {
                text,
                is_error: exit.is_some_and(|c| c != 0),
            });
            entries
        }
        ("item.completed", Some("agent_message" | "assistant_message")) => str_at(item, "text")
            .map(|t| vec![Entry::Message(t.to_owned())])
            .unwrap_or_default(),
        ("item.completed", Some("reasoning")) => str_at(item, "text")
            .map(|t| vec![Entry::Thinking(t.to_owned())])
            .unwrap_or_default(),
        ("item.completed", Some("file_change")) => {
            let changes: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let path = str_at(c, "path")?;
                    Some(match str_at(c, "kind") {
                        Some(k) => format!("{k} {path}"),
                        None => path.to_owned(),
                    })
                })
                .collect();
            vec![Entry::ToolCall {
                name: "file_change".into(),
                input: shorten(&changes.join(", "), INPUT_CHARS),
            }]
        }
        ("item.completed", Some("mcp_tool_call")) => {
            let name = format!(
                "{}.{}",
                str_at(item, "server").unwrap_or("mcp"),
                str_at(item, "tool").unwrap_or("?")
            );
            let input = short_input(&name, item.get("arguments").unwrap_or(&Value::Null));
            vec![Entry::ToolCall { name, input }]
        }
        ("item.completed", Some("web_search")) => vec![Entry::ToolCall {
            name: "web_search".into(),
            input: shorten(str_at(item, "query").unwrap_or_default(), INPUT_CHARS),
        }],
        ("item.completed", Some("error")) => str_at(item, "message")
            .map(|m| vec![Entry::Notice(m.to_owned())])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn command_call(item: &Value) -> Entry {
    Entry::ToolCall {
        name: "shell".into(),
        input: shorten(str_at(item, "command").unwrap_or_default(), INPUT_CHARS),
    }
}
