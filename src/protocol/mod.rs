//! The control protocol, shared by the daemon and `catalyst ctl` (docs/protocol.md).
//!
//! NDJSON over a Unix socket. On connect the daemon sends a [`Hello`]; then each request line
//! `{"id":…,"method":"…","params":{…}}` gets one response line with the same `id`, either
//! `{"id":…,"result":…}` or `{"id":…,"error":{"code":"…","message":"…"}}`. After `subscribe`
//! the connection carries journal events, one per line, until the client hangs up.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::event::BeadPatch;
use crate::domain::model::JsonMap;

/// Protocol version sent in the hello line.
pub const PROTOCOL: u32 = 1;

/// The longest request line accepted, in bytes (newline excluded).
pub const MAX_LINE: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
}

impl Hello {
    pub fn new() -> Hello {
        Hello {
            kind: "hello".into(),
            protocol: PROTOCOL,
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }
}

impl Default for Hello {
    fn default() -> Self {
        Hello::new()
    }
}

/// Error codes (docs/protocol.md#errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    UnknownMethod,
    NotFound,
    Conflict,
    TooLarge,
    Forbidden,
    ShuttingDown,
    Internal,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::Conflict, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::Internal, message)
    }
}

/// One response line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The request's id; `null` when the request had none or could not be read.
    pub id: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Response {
    pub fn ok(id: Value, result: Value) -> Response {
        Response {
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn err(id: Value, error: RpcError) -> Response {
        Response {
            id,
            result: None,
            error: Some(error),
        }
    }
}

/// A request with its method and typed parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: Value,
    pub method: Method,
}

/// Every method of the control protocol (docs/protocol.md) with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    Status,
    Ready,
    List(ListParams),
    Show(ShowParams),
    Submit(Vec<BeadInput>),
    Update(Box<UpdateParams>),
    Comment(CommentParams),
    Close(CloseParams),
    Reopen(IdParams),
    Approve(ApproveParams),
    Reject(RejectParams),
    Retry(IdParams),
    Cancel(CloseParams),
    Pause(PauseParams),
    Resume(PauseParams),
    Subscribe(SubscribeParams),
    Logs(LogsParams),
    Reload,
    Shutdown,
    Hook(HookParams),
    Import(ImportParams),
    Export,
}

/// The method names, for `unknown_method` errors and completions.
pub const METHODS: [&str; 22] = [
    "status",
    "ready",
    "list",
    "show",
    "submit",
    "update",
    "comment",
    "close",
    "reopen",
    "approve",
    "reject",
    "retry",
    "cancel",
    "pause",
    "resume",
    "subscribe",
    "logs",
    "reload",
    "shutdown",
    "hook",
    "import",
    "export",
];

impl Method {
    pub fn name(&self) -> &'static str {
        match self {
            Method::Status => "status",
            Method::Ready => "ready",
            Method::List(_) => "list",
            Method::Show(_) => "show",
            Method::Submit(_) => "submit",
            Method::Update(_) => "update",
            Method::Comment(_) => "comment",
            Method::Close(_) => "close",
            Method::Reopen(_) => "reopen",
            Method::Approve(_) => "approve",
            Method::Reject(_) => "reject",
            Method::Retry(_) => "retry",
            Method::Cancel(_) => "cancel",
            Method::Pause(_) => "pause",
            Method::Resume(_) => "resume",
            Method::Subscribe(_) => "subscribe",
            Method::Logs(_) => "logs",
            Method::Reload => "reload",
            Method::Shutdown => "shutdown",
            Method::Hook(_) => "hook",
            Method::Import(_) => "import",
            Method::Export => "export",
        }
    }

    /// The `params` object of this method, for the client side.
    pub fn params(&self) -> Value {
        let v = match self {
            Method::Status | Method::Ready | Method::Reload | Method::Shutdown | Method::Export => {
                Ok(Value::Object(JsonMap::new()))
            }
            Method::List(p) => serde_json::to_value(p),
            Method::Show(p) => serde_json::to_value(p),
            Method::Submit(beads) => Ok(serde_json::json!({ "beads": beads })),
            Method::Update(p) => serde_json::to_value(p),
            Method::Comment(p) => serde_json::to_value(p),
            Method::Close(p) | Method::Cancel(p) => serde_json::to_value(p),
            Method::Reopen(p) | Method::Retry(p) => serde_json::to_value(p),
            Method::Approve(p) => serde_json::to_value(p),
            Method::Reject(p) => serde_json::to_value(p),
            Method::Pause(p) | Method::Resume(p) => serde_json::to_value(p),
            Method::Subscribe(p) => serde_json::to_value(p),
            Method::Logs(p) => serde_json::to_value(p),
            Method::Hook(p) => serde_json::to_value(p),
            Method::Import(p) => serde_json::to_value(p),
        };
        v.unwrap_or(Value::Null)
    }
}

/// Reads one request line. The error carries the id when one could be read, so that the reply
/// can name it.
pub fn parse_request(line: &[u8]) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::bad_request(format!("invalid JSON: {e}")),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err((
            Value::Null,
            RpcError::bad_request("a request must be a JSON object"),
        ));
    };
    let id = match obj.remove("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id,
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::bad_request("`id` must be a number or a string"),
            ))
        }
        None => return Err((Value::Null, RpcError::bad_request("missing `id`"))),
    };
    let fail = |e: RpcError| (id.clone(), e);
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return Err(fail(RpcError::bad_request("`method` must be a string"))),
        None => return Err(fail(RpcError::bad_request("missing `method`"))),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(JsonMap::new()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => return Err(fail(RpcError::bad_request("`params` must be an object"))),
    };
    if let Some(key) = obj.keys().next() {
        return Err(fail(RpcError::bad_request(format!(
            "unknown key `{key}` in the request"
        ))));
    }
    let method = parse_method(&method, params).map_err(fail)?;
    Ok(Request { id, method })
}

fn typed<T: for<'de> Deserialize<'de>>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::bad_request(format!("`{method}` params: {e}")))
}

fn parse_method(method: &str, params: Value) -> Result<Method, RpcError> {
    let none = |params: &Value| -> Result<(), RpcError> {
        match params.as_object() {
            Some(o) if o.is_empty() => Ok(()),
            _ => Err(RpcError::bad_request(format!("`{method}` takes no params"))),
        }
    };
    Ok(match method {
        "status" => none(&params).map(|()| Method::Status)?,
        "ready" => none(&params).map(|()| Method::Ready)?,
        "reload" => none(&params).map(|()| Method::Reload)?,
        "shutdown" => none(&params).map(|()| Method::Shutdown)?,
        "export" => none(&params).map(|()| Method::Export)?,
        "import" => Method::Import(typed(method, params)?),
        "list" => Method::List(typed(method, params)?),
        "show" => Method::Show(typed(method, params)?),
        "submit" => Method::Submit(submit_params(params)?),
        "update" => Method::Update(Box::new(typed(method, params)?)),
        "comment" => Method::Comment(typed(method, params)?),
        "close" => Method::Close(typed(method, params)?),
        "reopen" => Method::Reopen(typed(method, params)?),
        "approve" => Method::Approve(typed(method, params)?),
        "reject" => Method::Reject(typed(method, params)?),
        "retry" => Method::Retry(typed(method, params)?),
        "cancel" => Method::Cancel(typed(method, params)?),
        "pause" => Method::Pause(typed(method, params)?),
        "resume" => Method::Resume(typed(method, params)?),
        "subscribe" => Method::Subscribe(typed(method, params)?),
        "logs" => Method::Logs(typed(method, params)?),
        "hook" => Method::Hook(typed(method, params)?),
        other => {
            return Err(RpcError::new(
                ErrorCode::UnknownMethod,
                format!(
                    "unknown method `{}`",
                    other.chars().take(64).collect::<String>()
                ),
            ))
        }
    })
}

/// `submit` takes `{"beads":[…]}` or one bead's fields directly.
fn submit_params(params: Value) -> Result<Vec<BeadInput>, RpcError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Many {
        beads: Vec<BeadInput>,
    }
    if params.get("beads").is_some() {
        let many: Many = typed("submit", params)?;
        if many.beads.is_empty() {
            return Err(RpcError::bad_request("`submit` needs at least one bead"));
        }
        Ok(many.beads)
    } else {
        Ok(vec![typed("submit", params)?])
    }
}

/// A bead as submitted by a person or a script. The daemon assigns the id unless one is given,
/// and the timestamps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeadInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_criteria: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Shorthand for the label `formula:<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// Beads this one waits for (`blocks` dependencies): it starts after they are merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only beads with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Include step beads too.
    #[serde(default)]
    pub steps: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowParams {
    pub id: String,
    /// Include every attempt's run record.
    #[serde(default)]
    pub runs: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateParams {
    pub id: String,
    pub set: BeadPatch,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentParams {
    pub id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdParams {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectParams {
    pub id: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseParams {
    /// Pause or resume one model; without it, all dispatching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    /// Replay events with a seq greater than this (0: from the start); without it, only new
    /// events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Only events about this bead (its steps included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bead: Option<String>,
    /// Only these event types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Keep following after the replay (the default). Without it the daemon sends
    /// `{"type":"end","seq":N}` after the last event it has and closes the connection.
    #[serde(default = "yes")]
    pub follow: bool,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    pub step: String,
    /// Which attempt (the latest by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `stdout` (default) or `stderr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Keep the connection open and send what is appended.
    #[serde(default)]
    pub follow: bool,
}

/// Beads export lines to add to the store (see `beads::import`). A client sends a large file
/// in several requests, each under [`MAX_LINE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportParams {
    pub beads: Vec<crate::domain::model::Bead>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookParams {
    /// The step the agent runs (`CATALYST_STEP`).
    pub step: String,
    /// `PreToolUse`, `Stop` or `SessionStart`.
    pub event: String,
    /// The hook's JSON from Claude Code, with what the daemon does not need left out (file
    /// contents) and, for `Stop`, the final message filled in from the transcript when the
    /// agent CLI did not send it.
    pub payload: Value,
}

/// The daemon's answer to a `hook` request, which `catalyst hook` turns into Claude Code's
/// hook output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookAnswer {
    /// `PreToolUse`: allow or deny the call. `Stop`: allow or block the stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<HookDecision>,
    /// Why, for the agent (a denial or block) or for the log (an allow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `SessionStart`: text added to the agent's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    Allow,
    Deny,
    Block,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> (Value, RpcError) {
        parse_request(line.as_bytes()).unwrap_err()
    }

    #[test]
    fn requests_parse_with_typed_params() {
        let r = parse_request(br#"{"id":1,"method":"show","params":{"id":"cat-1","runs":true}}"#)
            .unwrap();
        assert_eq!(r.id, Value::from(1));
        assert_eq!(
            r.method,
            Method::Show(ShowParams {
                id: "cat-1".into(),
                runs: true
            })
        );
        let r = parse_request(br#"{"id":"a","method":"status"}"#).unwrap();
        assert_eq!(r.method, Method::Status);
        let r = parse_request(
            br#"{"id":2,"method":"submit","params":{"title":"x","after":["cat-1"]}}"#,
        )
        .unwrap();
        let Method::Submit(beads) = r.method else {
            panic!()
        };
        assert_eq!(beads[0].after, ["cat-1"]);
    }

    #[test]
    fn malformed_requests_get_precise_errors() {
        for (line, code, needle) in [
            ("{nope", ErrorCode::BadRequest, "invalid JSON"),
            ("[1,2]", ErrorCode::BadRequest, "JSON object"),
            (
                r#"{"method":"status"}"#,
                ErrorCode::BadRequest,
                "missing `id`",
            ),
            (
                r#"{"id":{},"method":"status"}"#,
                ErrorCode::BadRequest,
                "`id`",
            ),
            (r#"{"id":1}"#, ErrorCode::BadRequest, "missing `method`"),
            (r#"{"id":1,"method":7}"#, ErrorCode::BadRequest, "`method`"),
            (
                r#"{"id":1,"method":"explode"}"#,
                ErrorCode::UnknownMethod,
                "explode",
            ),
            (
                r#"{"id":1,"method":"show","params":{"id":5}}"#,
                ErrorCode::BadRequest,
                "show",
            ),
            (
                r#"{"id":1,"method":"show","params":{"id":"a","bogus":1}}"#,
                ErrorCode::BadRequest,
                "bogus",
            ),
            (
                r#"{"id":1,"method":"status","params":{"x":1}}"#,
                ErrorCode::BadRequest,
                "no params",
            ),
            (
                r#"{"id":1,"method":"status","extra":1}"#,
                ErrorCode::BadRequest,
                "extra",
            ),
            (
                r#"{"id":1,"method":"submit","params":{"beads":[]}}"#,
                ErrorCode::BadRequest,
                "at least one",
            ),
        ] {
            let (_, e) = err(line);
            assert_eq!(e.code, code, "{line}");
            assert!(e.message.contains(needle), "{line}: {}", e.message);
        }
        assert_eq!(
            err(r#"{"id":9,"method":"nope"}"#).0,
            Value::from(9),
            "the reply names the id"
        );
    }

    #[test]
    fn client_params_parse_back() {
        for method in [
            Method::Status,
            Method::Show(ShowParams {
                id: "cat-1".into(),
                runs: false,
            }),
            Method::Submit(vec![BeadInput {
                title: "t".into(),
                ..Default::default()
            }]),
            Method::Subscribe(SubscribeParams {
                since: Some(0),
                bead: None,
                types: None,
                follow: true,
            }),
            Method::Pause(PauseParams::default()),
        ] {
            let line =
                serde_json::json!({"id": 1, "method": method.name(), "params": method.params()});
            let back = parse_request(line.to_string().as_bytes()).unwrap();
            assert_eq!(back.method, method);
        }
    }
}
