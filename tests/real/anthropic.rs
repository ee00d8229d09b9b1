//! A mock of the Anthropic Messages API as Claude Code uses it: `POST /v1/messages` streamed
//! as server-sent events (or whole, when `stream` is false), `count_tokens`, and a default text
//! answer for whatever else Claude Code asks (titles, topic detection, quota checks).
//!
//! Conversations are scripted by role: a request whose first user message contains
//! `(role: <role>)` (as every catalyst prompt does) gets the turn numbered by how many assistant
//! messages it already holds, so a tool call's result, or the Stop hook's objection, moves the
//! conversation to the next turn. Every request is recorded.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::http::{self, Request, Response};

/// The API key the mock refuses with a 401.
pub const INVALID_KEY: &str = "sk-ant-invalid";

/// One answer of the model.
#[derive(Clone, Debug)]
pub enum Turn {
    /// A text message ending the turn.
    Text(String),
    /// Tool calls, `(tool name, input)`, with optional text before them.
    Tools(Vec<(String, Value)>),
    /// An HTTP error: status and the API's error type (`rate_limit_error`, …).
    Error(u16, String),
}

impl Turn {
    pub fn tool(name: &str, input: Value) -> Turn {
        Turn::Tools(vec![(name.to_owned(), input)])
    }

    /// A final message: `text`, then a result block with `summary` and the extra lines
    /// (`VERDICT: APPROVED`, …).
    pub fn done(text: &str, summary: &str, extra: &[&str]) -> Turn {
        let mut block = String::from("---STEP-RESULT---\nSTATUS: DONE\n");
        for line in extra {
            block.push_str(line);
            block.push('\n');
        }
        block.push_str(&format!("SUMMARY: {summary}\n---END-RESULT---"));
        Turn::Text(format!("{text}\n\n{block}"))
    }
}

/// Token counts reported per answer; Claude Code prices them into `total_cost_usd`.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Default for Usage {
    fn default() -> Usage {
        Usage {
            input_tokens: 100,
            output_tokens: 20,
        }
    }
}

#[derive(Default)]
struct State {
    /// `(role, turns)`.
    script: Vec<(String, Vec<Turn>)>,
    usage: Usage,
    requests: Vec<Request>,
}

/// A running mock; clones share it.
#[derive(Clone)]
pub struct MockAnthropic {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl MockAnthropic {
    /// Starts the mock on loopback with `script`: `(role, turns)`.
    pub async fn start(script: Vec<(&str, Vec<Turn>)>) -> MockAnthropic {
        let state = Arc::new(Mutex::new(State {
            script: script
                .into_iter()
                .map(|(role, turns)| (role.to_owned(), turns))
                .collect(),
            ..State::default()
        }));
        let shared = state.clone();
        let addr = http::serve(Arc::new(move |req: &Request| {
            let mut state = shared.lock().expect("mock state");
            state.requests.push(req.clone());
            answer(&state, req)
        }))
        .await;
        MockAnthropic {
            url: format!("http://{addr}"),
            state,
        }
    }

    /// The usage every later answer reports.
    pub fn set_usage(&self, usage: Usage) {
        self.state.lock().expect("mock state").usage = usage;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().expect("mock state").requests.clone()
    }

    /// The agent-loop requests (those offering tools) of `role`'s conversations.
    pub fn conversation(&self, role: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.body.get("tools").is_some() && role_of(&r.body).as_deref() == Some(role))
            .collect()
    }
}

/// The text of every user message's text blocks, joined.
pub fn user_text(body: &Value) -> String {
    let mut out = String::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] != "user" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => out.push_str(s),
            Value::Array(blocks) => {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        out.push_str(t);
                        out.push('\n');
                    }
                    if let Some(t) = b["content"].as_str() {
                        out.push_str(t);
                        out.push('\n');
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The catalyst role whose prompt the request's first user message carries.
fn role_of(body: &Value) -> Option<String> {
    let first = body["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")?;
    let text = match &first["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let start = text.find("(role: ")? + "(role: ".len();
    let end = text[start..].find(')')?;
    Some(text[start..start + end].to_owned())
}

/// The worktree the prompt names (`Worktree: <path> (branch …`).
fn worktree_of(body: &Value) -> Option<String> {
    let text = user_text(body);
    let start = text.find("Worktree: ")? + "Worktree: ".len();
    let line = text[start..].lines().next()?;
    Some(line.split(" (").next()?.trim().to_owned())
}

/// `input` with `{worktree}` in its strings replaced by the step's worktree.
pub fn with_worktree(input: &Value, worktree: Option<&str>) -> Value {
    let Some(worktree) = worktree else {
        return input.clone();
    };
    match input {
        Value::String(s) => Value::String(s.replace("{worktree}", worktree)),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), with_worktree(v, Some(worktree))))
            .collect(),
        other => other.clone(),
    }
}

fn answer(state: &State, req: &Request) -> Response {
    if req.path.contains("count_tokens") {
        return Response::json(200, &json!({"input_tokens": 100}));
    }
    if req.header("x-api-key") == Some(INVALID_KEY) {
        return Response::json(
            401,
            &json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        );
    }
    if req.method != "POST" || !req.path.starts_with("/v1/messages") {
        return Response::json(200, &json!({}));
    }
    let body = &req.body;
    let scripted = body.get("tools").is_some().then(|| role_of(body)).flatten();
    let turn = scripted.and_then(|role| {
        let turns = &state.script.iter().find(|(r, _)| *r == role)?.1;
        let done = body["messages"].as_array().map_or(0, |ms| {
            ms.iter().filter(|m| m["role"] == "assistant").count()
        });
        turns.get(done).or(turns.last()).cloned()
    });
    let turn = turn.unwrap_or_else(|| Turn::Text("OK".into()));
    let model = body["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let stream = body["stream"].as_bool().unwrap_or(false);
    let id = format!("msg_{}", state.requests.len());
    let (content, stop) = match turn {
        Turn::Error(status, kind) => {
            let mut r = Response::json(
                status,
                &json!({"type": "error", "error": {"type": kind, "message": "mock: try again later"}}),
            );
            r.headers.push(("retry-after", "0".into()));
            return r;
        }
        Turn::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
        Turn::Tools(calls) => (
            calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    let input = with_worktree(&input, worktree_of(body).as_deref());
                    json!({"type": "tool_use", "id": format!("toolu_{}_{i}", state.requests.len()), "name": name, "input": input})
                })
                .collect(),
            "tool_use",
        ),
    };
    let usage = state.usage;
    if !stream {
        return Response::json(
            200,
            &json!({"id": id, "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}}),
        );
    }
    let mut events = vec![(
        "message_start".to_owned(),
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": 1}}}),
    )];
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = if block["type"] == "text" {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        } else {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        };
        events.push((
            "content_block_start".into(),
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push((
            "content_block_delta".into(),
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            "content_block_stop".into(),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta".into(),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": usage.output_tokens}}),
    ));
    events.push(("message_stop".into(), json!({"type": "message_stop"})));
    Response::sse(&events)
}
