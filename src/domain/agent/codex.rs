//! `codex exec --json` events.
//!
//! One JSON object per line: `thread.started`, `turn.started`, `item.started` / `item.updated`
//! / `item.completed` (an `item` with a `type`: `agent_message` with its `text`, `reasoning`,
//! `command_execution`, `file_change`, …), then `turn.completed` with `usage`, or `turn.failed`
//! with `error.message`. A top-level `error` event with a `message` is fatal, except
//! `Reconnecting... N/M (…)`, which codex emits while it retries a dropped stream and then
//! carries on.

use serde::Deserialize;
use serde_json::Value;

use super::limits;
use super::stream::Parsed;

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    usage: Option<Value>,
    /// On `turn.failed`.
    #[serde(default)]
    error: Option<ErrorBody>,
    /// On `error`.
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    /// Early versions of `--json` spelt it `item_type`.
    #[serde(rename = "type", alias = "item_type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
}

#[derive(Clone, Default)]
pub(crate) struct Codex {
    final_message: Option<String>,
    error: Option<String>,
    usage: Option<Value>,
}

impl Codex {
    pub(crate) fn line(&mut self, line: &str) {
        let Ok(event) = serde_json::from_str::<Event>(line) else {
            return;
        };
        match event.kind.as_str() {
            "item.completed" => {
                if let Some(Item {
                    kind: Some(kind),
                    text: Some(text),
                }) = event.item
                {
                    if kind == "agent_message" || kind == "assistant_message" {
                        self.final_message = Some(text);
                    }
                }
            }
            "turn.completed" if event.usage.is_some() => self.usage = event.usage,
            "turn.failed" => {
                let message = event.error.and_then(|e| e.message);
                self.error = Some(message.unwrap_or_else(|| "the turn failed".into()));
            }
            "error" => {
                let message = event.message.unwrap_or_default();
                if !message.starts_with("Reconnecting...") {
                    self.error = Some(if message.trim().is_empty() {
                        "codex reported an error".into()
                    } else {
                        message
                    });
                }
            }
            _ => {}
        }
    }

    pub(crate) fn finish(self) -> Parsed {
        let usage_limit = self.error.as_deref().and_then(limits::in_error_text);
        Parsed {
            final_message: self.final_message,
            is_error: self.error.is_some(),
            error: self.error.as_deref().map(limits::one_line),
            usage_limit,
            unavailable: self
                .error
                .as_deref()
                .and_then(super::unavailable::in_error_text),
            cost_usd: None,
            usage: self.usage,
        }
    }
}
