//! A mock of the OpenAI Responses API as `codex exec` uses it: `POST /v1/responses` streamed as
//! server-sent events (`response.created`, `response.output_item.added`/`done`,
//! `response.output_text.delta`, `response.completed`), answering with messages and
//! `exec_command` function calls (Codex's shell tool).
//!
//! Conversations are scripted by role like the Anthropic mock: the request whose user input
//! contains `(role: <role>)` gets the turn numbered by how many answers (function calls and
//! assistant messages) its input already holds. Every request is recorded.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::anthropic::with_worktree;
use crate::http::{self, Request, Response};

/// One answer of the model.
#[derive(Clone, Debug)]
pub enum Turn {
    /// An assistant message ending the turn.
    Text(String),
    /// A shell command through Codex's `exec_command` tool; `{worktree}` is replaced.
    Exec(String),
    /// The response fails (`response.failed`) with this message.
    Fail(String),
    /// An HTTP error: status and the API's error code (`rate_limit_exceeded`, …).
    Error(u16, String),
}

#[derive(Default)]
struct State {
    script: Vec<(String, Vec<Turn>)>,
    requests: Vec<Request>,
}

#[derive(Clone)]
pub struct MockOpenAi {
    /// The base URL, ending in `/v1`.
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl MockOpenAi {
    pub async fn start(script: Vec<(&str, Vec<Turn>)>) -> MockOpenAi {
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
        MockOpenAi {
            url: format!("http://{addr}/v1"),
            state,
        }
    }

    /// The `/responses` requests of `role`'s conversations.
    pub fn conversation(&self, role: &str) -> Vec<Request> {
        self.state
            .lock()
            .expect("mock state")
            .requests
            .iter()
            .filter(|r| r.path.ends_with("/responses") && role_of(&r.body).as_deref() == Some(role))
            .cloned()
            .collect()
    }
}

/// All `input_text` of the user messages in a request's input.
pub fn user_text(body: &Value) -> String {
    let mut out = String::new();
    for item in body["input"].as_array().into_iter().flatten() {
        if item["type"] == "message" && item["role"] == "user" {
            for c in item["content"].as_array().into_iter().flatten() {
                if let Some(t) = c["text"].as_str() {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
    }
    out
}

fn role_of(body: &Value) -> Option<String> {
    let text = user_text(body);
    let start = text.find("(role: ")? + "(role: ".len();
    let end = text[start..].find(')')?;
    Some(text[start..start + end].to_owned())
}

fn worktree_of(body: &Value) -> Option<String> {
    let text = user_text(body);
    let start = text.find("Worktree: ")? + "Worktree: ".len();
    let line = text[start..].lines().next()?;
    Some(line.split(" (").next()?.trim().to_owned())
}

fn answer(state: &State, req: &Request) -> Response {
    if req.method != "POST" || !req.path.ends_with("/responses") {
        return Response::json(200, &json!({"data": [], "models": []}));
    }
    let body = &req.body;
    let n = state.requests.len();
    let turn = role_of(body).and_then(|role| {
        let turns = &state.script.iter().find(|(r, _)| *r == role)?.1;
        let done = body["input"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|i| {
                    i["type"] == "function_call"
                        || (i["type"] == "message" && i["role"] == "assistant")
                })
                .count()
        });
        turns.get(done).or(turns.last()).cloned()
    });
    let turn = turn.unwrap_or_else(|| Turn::Text("OK".into()));
    let id = format!("resp_{n}");
    let mut events = vec![json!({"type": "response.created", "response": {"id": id}})];
    let item = match turn {
        Turn::Error(status, code) => {
            let mut r = Response::json(
                status,
                &json!({"error": {"type": code, "code": code, "message": "mock: try again later"}}),
            );
            r.headers.push(("retry-after", "0".into()));
            return r;
        }
        Turn::Fail(message) => {
            events.push(json!({"type": "response.failed", "response": {"id": id,
                "error": {"code": "server_error", "message": message}}}));
            return sse(events);
        }
        Turn::Exec(cmd) => {
            let cmd = with_worktree(&Value::String(cmd), worktree_of(body).as_deref());
            let item = json!({"type": "function_call", "id": format!("fc_{n}"),
                "call_id": format!("call_{n}"), "name": "exec_command",
                "arguments": json!({"cmd": cmd}).to_string()});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            );
            item
        }
        Turn::Text(text) => {
            let msg_id = format!("msg_{n}");
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": msg_id, "content": []}}),
            );
            events.push(
                json!({"type": "response.output_text.delta", "item_id": msg_id,
                "output_index": 0, "content_index": 0, "delta": text}),
            );
            json!({"type": "message", "role": "assistant", "id": msg_id,
                "content": [{"type": "output_text", "text": text}]})
        }
    };
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(
        json!({"type": "response.completed", "response": {"id": id, "usage": {
        "input_tokens": 100, "input_tokens_details": null, "output_tokens": 20,
        "output_tokens_details": null, "total_tokens": 120}}}),
    );
    sse(events)
}

fn sse(events: Vec<Value>) -> Response {
    let events: Vec<(String, Value)> = events
        .into_iter()
        .map(|e| (e["type"].as_str().unwrap_or_default().to_owned(), e))
        .collect();
    Response::sse(&events)
}
