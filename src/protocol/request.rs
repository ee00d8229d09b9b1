//! Request lines: the methods with their parameters, and how a line is read.
//!
//! [`Method`] is the one declaration of the methods: serde reads and writes a request's
//! `method` and `params` from it (adjacently tagged), and strum derives the names from it
//! ([`Method::NAMES`], [`Method::name`]).

use serde::{Deserialize, Serialize};
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

/// A request line as a client writes it: `{"id":…,"method":"…","params":{…}}`.
#[derive(Debug, Serialize)]
pub struct RequestLine<'a> {
    pub id: u64,
    #[serde(flatten)]
    pub method: &'a Method,
}

impl RequestLine<'_> {
    /// The line, without its newline. It is written through a JSON value, whose keys print
    /// sorted, because that is how clients have always written requests: the bytes a client
    /// sends stay the same whatever order the parameters' fields are declared in.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_value(self).map(|line| line.to_string())
    }
}

/// Every method of the control protocol (docs/protocol.md) with its parameters. The methods
/// without parameters take `{}` (or no `params`, or `null`) and are written with `{}`.
#[derive(
    Clone, Debug, PartialEq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantNames,
)]
#[serde(tag = "method", content = "params", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Method {
    #[serde(with = "no_params")]
    Status,
    #[serde(with = "no_params")]
    Ready,
    List(ListParams),
    Show(ShowParams),
    /// `submit` takes `{"beads":[…]}` or one bead's fields directly.
    Submit(#[serde(with = "submit_params")] Vec<BeadInput>),
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
    #[serde(with = "no_params")]
    Reload,
    #[serde(with = "no_params")]
    Shutdown,
    Hook(HookParams),
    Import(ImportParams),
    #[serde(with = "no_params")]
    Export,
    #[serde(with = "no_params")]
    Workers,
}

impl Method {
    /// The method names: a name not among them is `unknown_method`, not `bad_request`.
    pub const NAMES: &'static [&'static str] = <Method as strum::VariantNames>::VARIANTS;

    /// The method's name on the wire.
    pub fn name(&self) -> &'static str {
        self.into()
    }
}

/// The `params` of a method that takes none: `{}` written, `{}` read. Anything else is refused
/// with `NO_PARAMS`, which `parse_request` words with the method's name.
mod no_params {
    use serde::de::IgnoredAny;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))?.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
        let params = std::collections::BTreeMap::<String, IgnoredAny>::deserialize(d)
            .map_err(|_| serde::de::Error::custom(super::NO_PARAMS))?;
        if params.is_empty() {
            Ok(())
        } else {
            Err(serde::de::Error::custom(super::NO_PARAMS))
        }
    }
}

/// The error `no_params` gives, recognised by [`parse_request`].
const NO_PARAMS: &str = "takes no params";

/// `submit`'s two shapes: `{"beads":[…]}`, or one bead's fields directly.
mod submit_params {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use super::BeadInput;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Many<T> {
        beads: T,
    }

    pub fn serialize<S: Serializer>(beads: &[BeadInput], s: S) -> Result<S::Ok, S::Error> {
        Many { beads }.serialize(s)
    }

    /// Which shape it is shows only in the keys, so the object is read once as JSON and then
    /// as the shape its keys name: an untagged enum would hide why a bead was refused.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<BeadInput>, D::Error> {
        let params = Value::deserialize(d)?;
        let beads = if params.get("beads").is_some() {
            serde_json::from_value::<Many<Vec<BeadInput>>>(params).map(|m| m.beads)
        } else {
            serde_json::from_value::<BeadInput>(params).map(|bead| vec![bead])
        };
        beads.map_err(serde::de::Error::custom)
    }
}

/// Reads one request line. The error carries the id when one could be read, so that the reply
/// can name it.
///
/// The line's keys are checked one by one before the method is read, so that each mistake gets
/// its own message and the id is found even when the rest is wrong; the method and its params
/// are then read by [`Method`]'s own deserializer. The line is read as a JSON value first
/// because the errors of reading from a value name no line and column: the messages of the
/// answers stay the ones scripts have seen, and make sense for a one-line request.
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
    let method = read_method(method, params).map_err(fail)?;
    Ok(Request { id, method })
}

/// Reads `method` with its `params`, and checks what their types cannot say.
fn read_method(method: String, params: Value) -> Result<Method, RpcError> {
    if !Method::NAMES.contains(&method.as_str()) {
        return Err(RpcError::new(
            ErrorCode::UnknownMethod,
            format!(
                "unknown method `{}`",
                method.chars().take(64).collect::<String>()
            ),
        ));
    }
    let mut line = JsonMap::new();
    line.insert("method".into(), Value::String(method.clone()));
    line.insert("params".into(), params);
    let read = Method::deserialize(Value::Object(line)).map_err(|e| match e.to_string() {
        no if no == NO_PARAMS => RpcError::bad_request(format!("`{method}` {NO_PARAMS}")),
        e => RpcError::bad_request(format!("`{method}` params: {e}")),
    });
    match read? {
        Method::Submit(beads) if beads.is_empty() => {
            Err(RpcError::bad_request("`submit` needs at least one bead"))
        }
        Method::Subscribe(p) => known_types(p).map(Method::Subscribe),
        method => Ok(method),
    }
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
            let line = RequestLine {
                id: 1,
                method: &method,
            }
            .to_json()
            .unwrap();
            let back = parse_request(line.as_bytes()).unwrap();
            assert_eq!(back.method, method);
        }
    }

    #[test]
    fn requests_are_written_as_before() {
        for (method, line) in [
            (Method::Status, r#"{"id":1,"method":"status","params":{}}"#),
            (
                Method::Reopen(IdParams { id: "cat-1".into() }),
                r#"{"id":1,"method":"reopen","params":{"id":"cat-1"}}"#,
            ),
            (
                Method::Submit(vec![BeadInput {
                    title: "t".into(),
                    ..Default::default()
                }]),
                r#"{"id":1,"method":"submit","params":{"beads":[{"title":"t"}]}}"#,
            ),
            (
                Method::Comment(CommentParams {
                    id: "cat-1".into(),
                    text: "hi".into(),
                    author: Some("bot".into()),
                }),
                r#"{"id":1,"method":"comment","params":{"author":"bot","id":"cat-1","text":"hi"}}"#,
            ),
        ] {
            let written = RequestLine {
                id: 1,
                method: &method,
            }
            .to_json()
            .unwrap();
            assert_eq!(written, line);
        }
    }

    #[test]
    fn the_names_are_the_tags_serde_reads() {
        for name in Method::NAMES {
            let line = format!(r#"{{"id":1,"method":"{name}"}}"#);
            match parse_request(line.as_bytes()) {
                Ok(request) => assert_eq!(request.method.name(), *name),
                Err((_, e)) => assert_ne!(e.code, ErrorCode::UnknownMethod, "{name}: {e}"),
            }
        }
        assert_eq!(Method::NAMES.len(), 23);
    }
}
