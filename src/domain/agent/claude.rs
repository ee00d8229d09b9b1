//! Claude Code's `--output-format stream-json --verbose` events.
//!
//! One JSON object per line: a `system` event (`init`, and `api_retry` while the API is
//! retried), `assistant` and `user` events carrying the conversation (tool calls and their
//! results), and a final `result` event with `subtype`, `is_error`, `result` (the final message),
//! `total_cost_usd`, `usage` and (since 2.1) `api_error_status`. Only the last `result` event is the run's answer: a result block
//! quoted in an assistant message or returned by a tool is conversation, not the final message.

use serde::Deserialize;
use serde_json::Value;

use super::limits;
use super::stream::Parsed;
use super::unavailable;
use crate::domain::unavailable::{Hindrance, Unavailable};

/// The fields catalyst reads; everything else (the whole `message` of conversation events) is
/// skipped by serde without being kept.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    total_cost_usd: Option<f64>,
    #[serde(default)]
    usage: Option<Value>,
    /// On an `assistant` event: the API error the message stands for (`rate_limit`, …).
    #[serde(default)]
    error: Option<Value>,
    /// On an error `result`: what went wrong, when there is no `result` text.
    #[serde(default)]
    errors: Option<Vec<Value>>,
    /// On a `system`/`api_retry` event: the HTTP status being retried.
    #[serde(default)]
    error_status: Option<Value>,
    /// On a `result` (Claude Code 2.1): the HTTP status of the API error that ended the run,
    /// `null` when there was none.
    #[serde(default)]
    api_error_status: Option<Value>,
}

/// The last `result` event, as far as catalyst cares.
#[derive(Clone)]
struct Final {
    subtype: Option<String>,
    is_error: bool,
    result: Option<String>,
    errors: Option<String>,
    api_error_status: Option<u64>,
    cost_usd: Option<f64>,
    usage: Option<Value>,
}

impl Final {
    /// An `error_*` subtype (`error_max_turns`, `error_during_execution`) is a failure even if
    /// `is_error` were missing; `is_error: true` is one even with `subtype: success`.
    fn failed(&self) -> bool {
        self.is_error
            || self
                .subtype
                .as_deref()
                .is_some_and(|s| s.starts_with("error"))
    }
}

#[derive(Clone, Default)]
pub(crate) struct Claude {
    last: Option<Final>,
    /// A limit signalled by structure, not text (an `api_retry` on 429 or 529, an assistant
    /// message standing for a `rate_limit` error) and not yet followed by a normal assistant
    /// message. It counts only if the run then fails.
    pending_limit: Option<String>,
    /// A failure no retry helps, seen while the run goes on: Claude Code retrying a 401, or
    /// retrying a connection before the model said anything. The runner stops the agent at
    /// once instead of waiting out the CLI's own retries.
    pub(crate) hopeless: Option<Hindrance>,
    /// A connection failure Claude Code is retrying after the model had spoken: the run may
    /// still recover, so it only counts if the run then fails.
    pending_unavailable: Option<Hindrance>,
    /// Whether a normal assistant message has arrived.
    spoke: bool,
}

impl Claude {
    /// Reads one stdout line; `true` when it was a `result` event, which ends a turn (a
    /// conversation's turn, or the whole run), and [`Claude::last_result`] then tells it.
    pub(crate) fn line(&mut self, line: &str) -> bool {
        let Ok(event) = serde_json::from_str::<Event>(line) else {
            return false;
        };
        match event.kind.as_str() {
            "result" => {
                let errors = event.errors.map(|errs| {
                    errs.iter()
                        .map(|e| match e {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                });
                self.last = Some(Final {
                    subtype: event.subtype,
                    is_error: event.is_error.unwrap_or(false),
                    result: event.result,
                    errors: errors.filter(|e| !e.is_empty()),
                    api_error_status: event.api_error_status.as_ref().and_then(Value::as_u64),
                    cost_usd: event.total_cost_usd,
                    usage: event.usage,
                });
                return true;
            }
            "system" if event.subtype.as_deref() == Some("api_retry") => {
                let status = event.error_status.as_ref().and_then(Value::as_u64);
                let error = event
                    .error
                    .as_ref()
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                if let Some(status @ (429 | 529)) = status {
                    self.pending_limit = Some(format!(
                        "the API answered {status} ({}) and Claude Code was retrying",
                        if status == 429 {
                            "rate limited"
                        } else {
                            "overloaded"
                        }
                    ));
                } else if let Some(cause) = status
                    .and_then(unavailable::by_status)
                    .or((error == "authentication_failed").then_some(Unavailable::Auth))
                {
                    let status = status.map_or_else(|| "an error".to_owned(), |s| s.to_string());
                    self.hopeless = Some(Hindrance::new(
                        cause,
                        format!("the API answered {status} ({error}) and Claude Code was retrying"),
                    ));
                } else if status.is_none() {
                    let seen = Hindrance::new(
                        Unavailable::Connection,
                        format!("Claude Code cannot reach the API ({error}) and was retrying"),
                    );
                    if self.spoke {
                        self.pending_unavailable = Some(seen);
                    } else {
                        self.hopeless = Some(seen);
                    }
                }
            }
            "assistant" => match event.error.as_ref().and_then(Value::as_str) {
                Some(kind @ ("rate_limit" | "overloaded" | "billing_error")) => {
                    self.pending_limit = Some(format!("Claude Code reported `{kind}`"));
                }
                Some("authentication_failed") => {
                    self.pending_limit = None;
                    self.pending_unavailable = Some(Hindrance::new(
                        Unavailable::Auth,
                        "Claude Code reported `authentication_failed`",
                    ));
                }
                _ => {
                    self.pending_limit = None;
                    self.pending_unavailable = None;
                    self.spoke = true;
                }
            },
            _ => {}
        }
        false
    }

    /// The final message of the last `result` event, and whether that result is an error.
    pub(crate) fn last_result(&self) -> Option<(Option<&str>, bool)> {
        self.last
            .as_ref()
            .map(|last| (last.result.as_deref(), last.failed()))
    }

    pub(crate) fn finish(self) -> Parsed {
        let Some(last) = self.last else {
            // No result at all: the run failed, and a limit being retried is the likely cause.
            return Parsed {
                usage_limit: self.pending_limit,
                unavailable: self.hopeless.or(self.pending_unavailable),
                ..Parsed::default()
            };
        };
        let is_error = last.failed();
        let (error, usage_limit, hindrance) = if is_error {
            let text = last
                .result
                .as_deref()
                .filter(|r| !r.trim().is_empty())
                .or(last.errors.as_deref())
                .or(last.subtype.as_deref())
                .unwrap_or("no details")
                .to_owned();
            // A 429 or 529 ended the run whatever its message says (a proxy or a newer API may
            // word it without "rate limit").
            let by_status = match last.api_error_status {
                Some(status @ (429 | 529)) => Some(format!(
                    "the API answered {status}: {}",
                    limits::one_line(&text)
                )),
                _ => None,
            };
            let limit = limits::in_error_text(&text)
                .or(by_status)
                .or(self.pending_limit);
            let hindrance = last
                .api_error_status
                .and_then(unavailable::by_status)
                .map(|cause| {
                    Hindrance::new(
                        cause,
                        format!(
                            "the API answered {}: {}",
                            last.api_error_status.unwrap_or_default(),
                            limits::one_line(&text)
                        ),
                    )
                })
                .or_else(|| unavailable::in_error_text(&text))
                .or(self.pending_unavailable);
            (Some(limits::one_line(&text)), limit, hindrance)
        } else {
            let limit = last.result.as_deref().and_then(limits::in_bare_notice);
            (None, limit, None)
        };
        Parsed {
            final_message: last.result,
            is_error,
            error,
            usage_limit,
            unavailable: self.hopeless.or(hindrance),
            cost_usd: last.cost_usd,
            usage: last.usage,
        }
    }
}
