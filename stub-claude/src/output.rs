//! What the stub prints, in the shapes Claude Code prints for `--output-format`.
//!
//! `stream-json` is one JSON object per line: a `system`/`init` event, an `assistant` event per
//! text or tool call, a `user` event per tool result, and a `result` event ending each turn
//! (one, unless follow-ups come in on stream-json input). `json` is the result object alone;
//! `text` is the final message alone (each once per turn). Every line is flushed as it is
//! written, so the daemon sees output as it happens (its stall detection depends on that).
//! The same `assistant`/`user` messages go to the transcript file handed to hooks.

use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;

use serde_json::{json, Value};

use crate::cli::OutputFormat;

/// Bytes that are not UTF-8, for `non_utf8` (a lone continuation byte, an invalid start byte,
/// and a truncated two-byte sequence).
const NOT_UTF8: &[u8] = &[0x80, 0xff, 0xfe, 0xc3, 0x28];
const PLACEHOLDER: &str = "@@NOT-UTF8@@";

/// What the final `result` event says.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub subtype: &'static str,
    pub is_error: bool,
    pub result: String,
    pub num_turns: u32,
    pub duration_ms: u64,
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub permission_denials: Vec<Value>,
}

/// Writes events to stdout in the chosen format, and messages to the transcript.
pub struct Emitter {
    format: OutputFormat,
    out: Box<dyn Write>,
    /// Set when stdout went away: nobody reads any more, so the rest is dropped quietly.
    broken: bool,
    partial: bool,
    session_id: String,
    model: String,
    cwd: String,
    transcript: Option<File>,
}

impl Emitter {
    pub fn new(
        format: OutputFormat,
        out: Box<dyn Write>,
        partial: bool,
        session_id: &str,
        model: &str,
        cwd: &str,
        transcript: Option<File>,
    ) -> Emitter {
        Emitter {
            format,
            out,
            broken: false,
            partial,
            session_id: session_id.to_string(),
            model: model.to_string(),
            cwd: cwd.to_string(),
            transcript,
        }
    }

    fn streaming(&self) -> bool {
        self.format == OutputFormat::StreamJson
    }

    fn write_bytes(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        if self
            .out
            .write_all(bytes)
            .and_then(|()| self.out.flush())
            .is_err()
        {
            self.broken = true;
        }
    }

    fn line(&mut self, event: &Value) {
        let mut bytes = event.to_string().into_bytes();
        bytes.push(b'\n');
        self.write_bytes(&bytes);
    }

    /// Records a conversation message in the transcript, in Claude Code's jsonl shape.
    fn transcribe(&mut self, kind: &str, message: &Value, uuid: &str) {
        let Some(file) = self.transcript.as_mut() else {
            return;
        };
        let entry = json!({
            "type": kind,
            "message": message,
            "uuid": uuid,
            "sessionId": self.session_id,
            "cwd": self.cwd,
        });
        // One write per line: the file is not buffered, and `Value`'s `Display` writes
        // token by token (hundreds of system calls a line). The transcript is a courtesy to
        // hooks; losing a line must not fail the step.
        let _ = file.write_all(format!("{entry}\n").as_bytes());
    }

    /// A user message as a transcript entry: the prompt first, then each follow-up (under
    /// stream-json input). Claude Code does not echo them on stdout.
    pub fn prompt(&mut self, prompt: &str) {
        let message = json!({"role": "user", "content": prompt});
        self.transcribe("user", &message, &uuid());
    }

    /// The `system`/`init` event.
    pub fn init(&mut self, tools: &[String], permission_mode: &str) {
        if !self.streaming() {
            return;
        }
        let event = json!({
            "type": "system",
            "subtype": "init",
            "cwd": self.cwd,
            "session_id": self.session_id,
            "tools": tools,
            "mcp_servers": [],
            "model": self.model,
            "permissionMode": permission_mode,
            "slash_commands": [],
            "apiKeySource": "none",
            "claude_code_version": crate::cli::VERSION_LINE.split(' ').next(),
            "output_style": "default",
            "agents": [],
            "skills": [],
            "uuid": uuid(),
        });
        self.line(&event);
    }

    fn assistant(&mut self, content: Value) {
        let message = json!({
            "id": format!("msg_stub_{:016x}", random_u64()),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [content],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        });
        let id = uuid();
        self.transcribe("assistant", &message, &id);
        if self.streaming() {
            let event = json!({
                "type": "assistant",
                "message": message,
                "parent_tool_use_id": null,
                "session_id": self.session_id,
                "uuid": id,
            });
            self.line(&event);
        }
    }

    fn user(&mut self, content: Value) {
        let message = json!({"role": "user", "content": [content]});
        let id = uuid();
        self.transcribe("user", &message, &id);
        if self.streaming() {
            let event = json!({
                "type": "user",
                "message": message,
                "parent_tool_use_id": null,
                "session_id": self.session_id,
                "uuid": id,
            });
            self.line(&event);
        }
    }

    /// An assistant text message (with its partial delta first, under
    /// `--include-partial-messages`).
    pub fn assistant_text(&mut self, text: &str) {
        if self.streaming() && self.partial {
            let event = json!({
                "type": "stream_event",
                "event": {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
                "session_id": self.session_id,
                "parent_tool_use_id": null,
                "uuid": uuid(),
            });
            self.line(&event);
        }
        self.assistant(json!({"type": "text", "text": text}));
    }

    /// The assistant's call of a tool.
    pub fn tool_use(&mut self, id: &str, name: &str, input: &Value) {
        self.assistant(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }

    /// The result of a tool call, as the user message Claude Code sends back to the model.
    pub fn tool_result(&mut self, id: &str, content: &str, is_error: bool) {
        self.user(json!({
            "tool_use_id": id,
            "type": "tool_result",
            "content": content,
            "is_error": is_error,
        }));
    }

    /// Text sent back to the model, e.g. a Stop hook's reason for not stopping yet.
    pub fn user_text(&mut self, text: &str) {
        self.user(json!({"type": "text", "text": text}));
    }

    /// Output that is not UTF-8: inside an assistant text event for `stream-json` (so the line
    /// is otherwise well-formed), as a line of its own in the other formats.
    pub fn not_utf8(&mut self) {
        let mut bytes = Vec::new();
        if self.streaming() {
            let event = json!({
                "type": "assistant",
                "message": {
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [{"type": "text", "text": format!("bytes: {PLACEHOLDER}")}],
                },
                "parent_tool_use_id": null,
                "session_id": self.session_id,
                "uuid": uuid(),
            })
            .to_string();
            let (before, after) = event.split_once(PLACEHOLDER).unwrap_or((&event, ""));
            bytes.extend_from_slice(before.as_bytes());
            bytes.extend_from_slice(NOT_UTF8);
            bytes.extend_from_slice(after.as_bytes());
        } else {
            bytes.extend_from_slice(b"bytes: ");
            bytes.extend_from_slice(NOT_UTF8);
        }
        bytes.push(b'\n');
        self.write_bytes(&bytes);
    }

    /// At least `total` bytes of filler: assistant text events for `stream-json`, lines of
    /// text otherwise (exactly `total` bytes).
    pub fn flood(&mut self, total: u64) {
        const CHUNK: usize = 8 * 1024;
        // Every filler event is the same line: encoded once, so that a gibibyte takes the
        // time of writing it, not of encoding it.
        let event = self.streaming().then(|| {
            let mut line = json!({
                "type": "assistant",
                "message": {
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [{"type": "text", "text": "flood ".repeat(CHUNK / 6)}],
                },
                "parent_tool_use_id": null,
                "session_id": self.session_id,
            })
            .to_string()
            .into_bytes();
            line.push(b'\n');
            line
        });
        let mut written: u64 = 0;
        while written < total && !self.broken {
            let bytes = match &event {
                Some(line) => line.clone(),
                None => {
                    let n = (total - written).min(CHUNK as u64) as usize;
                    let mut text = vec![b'x'; n.saturating_sub(1)];
                    text.push(b'\n');
                    text
                }
            };
            written += bytes.len() as u64;
            self.write_bytes(&bytes);
        }
    }

    /// The `rate_limit_event` Claude Code streams when the account's limit rejects a request.
    pub fn rate_limit_rejected(&mut self, resets_at: u64) {
        if !self.streaming() {
            return;
        }
        let event = json!({
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": "rejected",
                "resetsAt": resets_at,
                "rateLimitType": "five_hour",
            },
            "uuid": uuid(),
            "session_id": self.session_id,
        });
        self.line(&event);
    }

    /// The final result, in the chosen format.
    pub fn result(&mut self, outcome: &Outcome) {
        match self.format {
            OutputFormat::Text => {
                let mut text = outcome.result.clone();
                text.push('\n');
                self.write_bytes(text.as_bytes());
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                let event = self.result_event(outcome);
                self.line(&event);
            }
        }
    }

    fn result_event(&self, o: &Outcome) -> Value {
        let mut model_usage = serde_json::Map::new();
        model_usage.insert(
            self.model.clone(),
            json!({
                "inputTokens": o.input_tokens,
                "outputTokens": o.output_tokens,
                "cacheReadInputTokens": 0,
                "cacheCreationInputTokens": 0,
                "webSearchRequests": 0,
                "costUSD": o.cost_usd,
            }),
        );
        json!({
            "type": "result",
            "subtype": o.subtype,
            "is_error": o.is_error,
            "duration_ms": o.duration_ms,
            "duration_api_ms": o.duration_ms / 2,
            "num_turns": o.num_turns,
            "result": o.result,
            "stop_reason": "end_turn",
            "session_id": self.session_id,
            "total_cost_usd": o.cost_usd,
            "usage": {
                "input_tokens": o.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": o.output_tokens,
                "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                "service_tier": "standard",
            },
            "modelUsage": model_usage,
            "permission_denials": o.permission_denials,
            "uuid": uuid(),
        })
    }
}

/// A random 64-bit number from std's per-process random hash keys; ids need to be unique,
/// not unpredictable.
pub fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(crate::log::now_ms());
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// A random version-4-shaped UUID.
pub fn uuid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn emitter(format: OutputFormat) -> (Emitter, Shared) {
        let shared = Shared::default();
        let e = Emitter::new(
            format,
            Box::new(shared.clone()),
            false,
            "s",
            "m",
            "/w",
            None,
        );
        (e, shared)
    }

    #[test]
    fn text_flood_is_exact_and_stream_flood_is_json_lines() {
        let (mut e, out) = emitter(OutputFormat::Text);
        e.flood(100_000);
        assert_eq!(out.0.lock().expect("lock").len(), 100_000);

        let (mut e, out) = emitter(OutputFormat::StreamJson);
        e.flood(100_000);
        let bytes = out.0.lock().expect("lock").clone();
        assert!(bytes.len() >= 100_000);
        for line in String::from_utf8(bytes).expect("utf-8").lines() {
            let v: Value = serde_json::from_str(line).expect("json line");
            assert_eq!(v["type"], "assistant");
        }
    }

    #[test]
    fn not_utf8_keeps_the_stream_line_shape() {
        let (mut e, out) = emitter(OutputFormat::StreamJson);
        e.not_utf8();
        let bytes = out.0.lock().expect("lock").clone();
        assert!(String::from_utf8(bytes.clone()).is_err());
        let lossy = String::from_utf8_lossy(&bytes);
        assert!(lossy.starts_with("{\"") && lossy.ends_with("}\n"));
    }

    #[test]
    fn uuids_differ() {
        assert_ne!(uuid(), uuid());
        assert_eq!(uuid().len(), 36);
    }
}
