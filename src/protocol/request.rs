//! Request lines: the methods with their parameters, how a line is read, and which side of the
//! daemon serves each method.

use serde::Deserialize;
use serde_json::Value;

use super::error::{ErrorCode, RpcError};
use super::params::{
    ApproveParams, BeadInput, CloseParams, CommentParams, HookParams, IdParams, ImportParams,
    ListParams, LogsParams, PauseParams, RejectParams, ShowParams, SubscribeParams, UpdateParams,
};
use crate::domain::model::JsonMap;

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
    Workers,
}

/// The method names, for `unknown_method` errors and completions.
pub const METHODS: [&str; 23] = [
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
    "workers",
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
            Method::Workers => "workers",
        }
    }

    /// The `params` object of this method, for the client side.
    pub fn params(&self) -> Value {
        let v = match self {
            Method::Status
            | Method::Ready
            | Method::Reload
            | Method::Shutdown
            | Method::Export
            | Method::Workers => Ok(Value::Object(JsonMap::new())),
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

/// Refuses a subscription to an event type that does not exist: it would wait forever. The
/// socket's `subscribe` and the web's `/events` both check with it.
pub fn known_types(p: SubscribeParams) -> Result<SubscribeParams, RpcError> {
    let kinds = crate::domain::event::EventBody::KINDS;
    if let Some(unknown) = p
        .types
        .iter()
        .flatten()
        .find(|t| !kinds.contains(&t.as_str()))
    {
        return Err(RpcError::bad_request(format!(
            "unknown event type `{}` (one of: {})",
            unknown.chars().take(64).collect::<String>(),
            kinds.join(", ")
        )));
    }
    Ok(p)
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
        "workers" => none(&params).map(|()| Method::Workers)?,
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
        "subscribe" => Method::Subscribe(known_types(typed(method, params)?)?),
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

/// Who serves a method: the connection task itself, or the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    Connection(ConnectionMethod),
    Engine(EngineRequest),
}

/// The methods a connection serves without the engine's help, or with the engine's state and
/// files the engine must not read itself (run folders, the journal).
#[derive(Clone, Debug, PartialEq)]
pub enum ConnectionMethod {
    Subscribe(SubscribeParams),
    Logs(LogsParams),
    Shutdown,
    /// `show` with `runs`: the engine's `show`, then each attempt's run folder and dispatch.
    ShowRuns(IdParams),
    /// The workers on other machines (`[cluster]`), from their presence messages.
    Workers,
}

/// The methods the engine answers: the ones that read or change its state.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineRequest {
    Status,
    Ready,
    List(ListParams),
    /// The dashboard's board: each lane's count and its first `cards` beads.
    Board {
        cards: usize,
    },
    Show(IdParams),
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
    Reload,
    Hook(HookParams),
    Import(ImportParams),
    Export,
}

impl Method {
    /// Which side of the daemon serves this method.
    pub fn route(self) -> Route {
        use EngineRequest as E;
        let engine = match self {
            Method::Subscribe(p) => return Route::Connection(ConnectionMethod::Subscribe(p)),
            Method::Logs(p) => return Route::Connection(ConnectionMethod::Logs(p)),
            Method::Shutdown => return Route::Connection(ConnectionMethod::Shutdown),
            Method::Workers => return Route::Connection(ConnectionMethod::Workers),
            Method::Show(p) if p.runs => {
                return Route::Connection(ConnectionMethod::ShowRuns(IdParams { id: p.id }))
            }
            Method::Show(p) => E::Show(IdParams { id: p.id }),
            Method::Status => E::Status,
            Method::Ready => E::Ready,
            Method::List(p) => E::List(p),
            Method::Submit(p) => E::Submit(p),
            Method::Update(p) => E::Update(p),
            Method::Comment(p) => E::Comment(p),
            Method::Close(p) => E::Close(p),
            Method::Reopen(p) => E::Reopen(p),
            Method::Approve(p) => E::Approve(p),
            Method::Reject(p) => E::Reject(p),
            Method::Retry(p) => E::Retry(p),
            Method::Cancel(p) => E::Cancel(p),
            Method::Pause(p) => E::Pause(p),
            Method::Resume(p) => E::Resume(p),
            Method::Reload => E::Reload,
            Method::Hook(p) => E::Hook(p),
            Method::Import(p) => E::Import(p),
            Method::Export => E::Export,
        };
        Route::Engine(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{PauseParams, ShowParams, SubscribeParams};

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
    fn connection_methods_never_reach_the_engine() {
        let follow = SubscribeParams {
            since: None,
            bead: None,
            types: None,
            follow: true,
        };
        assert!(matches!(
            Method::Subscribe(follow).route(),
            Route::Connection(ConnectionMethod::Subscribe(_))
        ));
        assert_eq!(
            Method::Shutdown.route(),
            Route::Connection(ConnectionMethod::Shutdown)
        );
        let show = |runs| {
            Method::Show(ShowParams {
                id: "cat-1".into(),
                runs,
            })
            .route()
        };
        assert!(matches!(
            show(true),
            Route::Connection(ConnectionMethod::ShowRuns(_))
        ));
        assert!(matches!(show(false), Route::Engine(EngineRequest::Show(_))));
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
