//! An agent's own socket: what `CATALYST_SOCKET` names for one attempt. It speaks the control
//! protocol but answers only `hook` calls for that attempt's step; every other method (approve,
//! submit, shutdown…) and any other step is refused with `forbidden`. So an agent holds its own
//! attempt's capabilities and no more, even though it runs as the daemon's user: the daemon's
//! control socket is not reachable from the sandbox.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::daemon::wire::{codec_io, send, Line, RequestLines};
use crate::domain::agent::attempt::{ToolRecord, TOOL_LOG_FILE};
use crate::domain::id::BeadId;
use crate::protocol::{
    parse_request, ErrorCode, Hello, HookAnswer, HookParams, Method, Response, RpcError,
    TOOL_USED_EVENT,
};

/// The hook event by which the daemon's own network proxy records a refused connection
/// (`payload.target` is the `host:port`). Agents may not send it.
pub const NETWORK_EVENT: &str = "NetworkRefused";

/// Asks the engine about one hook call.
pub type Ask = Arc<
    dyn Fn(HookParams) -> Pin<Box<dyn Future<Output = Result<HookAnswer, RpcError>> + Send>>
        + Send
        + Sync,
>;

/// Serves the attempt's socket until dropped, then removes it.
pub struct HookSocket {
    _stop: DropGuard,
    path: std::path::PathBuf,
}

impl Drop for HookSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The decisions an attempt's hooks made on their own, appended to its run folder's
/// [`TOOL_LOG_FILE`]: read from where the last read ended, whole lines only, so each is
/// recorded once and in the order it was made.
#[derive(Debug)]
pub struct ToolLog {
    path: PathBuf,
    read: std::sync::Mutex<u64>,
}

/// The most of the log one read takes: an agent can write to its run folder, and the rest
/// waits for the next read.
const TOOL_LOG_READ: u64 = 1 << 20;

impl ToolLog {
    pub fn new(run_dir: &Path) -> Arc<ToolLog> {
        Arc::new(ToolLog {
            path: run_dir.join(TOOL_LOG_FILE),
            read: std::sync::Mutex::new(0),
        })
    }

    /// The records appended since the last call. A line that is not a record is skipped.
    pub fn take_new(&self) -> Vec<ToolRecord> {
        use std::io::{Read, Seek, SeekFrom};
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut bytes = Vec::new();
        let taken = file
            .seek(SeekFrom::Start(*read))
            .and_then(|_| file.take(TOOL_LOG_READ).read_to_end(&mut bytes));
        if taken.is_err() {
            return Vec::new();
        }
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        *read += whole as u64;
        bytes[..whole]
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect()
    }
}

/// Binds `path` (0600, a stale file replaced) and answers `step`'s hook calls on it; a
/// [`TOOL_USED_EVENT`] call has the records new in `tools` recorded.
pub fn start(
    path: &Path,
    step: BeadId,
    ask: Ask,
    tools: Arc<ToolLog>,
) -> std::io::Result<HookSocket> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let stop = CancellationToken::new();
    let token = stop.clone();
    let uid = nix::unistd::getuid().as_raw();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = token.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let (step, ask, token) = (step.clone(), ask.clone(), token.clone());
            let tools = tools.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = token.cancelled() => {}
                    _ = connection(stream, &step, &ask, &tools, uid) => {}
                }
            });
        }
    });
    Ok(HookSocket {
        _stop: stop.drop_guard(),
        path: path.to_owned(),
    })
}

async fn connection(
    stream: UnixStream,
    step: &BeadId,
    ask: &Ask,
    tools: &ToolLog,
    uid: u32,
) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    let mut conn = Framed::new(stream, RequestLines::new());
    if peer != uid {
        let error = RpcError::new(
            ErrorCode::Forbidden,
            format!("uid {peer} may not use this socket"),
        );
        return send(&mut conn, &Response::<()>::err(Value::Null, error)).await;
    }
    // A hook that hands over a record writes its line and closes at once, without reading:
    // the hello may find the socket closed, and the line is read all the same.
    let _ = send(&mut conn, &Hello::new()).await;
    while let Some(line) = conn.next().await {
        let line = match line.map_err(codec_io)? {
            Line::Text(line) if line.trim().is_empty() => continue,
            Line::Text(line) => line,
            Line::TooLong | Line::NotUtf8 => {
                let error = RpcError::bad_request("not a request line");
                send(&mut conn, &Response::<()>::err(Value::Null, error)).await?;
                continue;
            }
            Line::OverBudget => {
                let error = RpcError::bad_request("the daemon holds too many unfinished lines");
                return send(&mut conn, &Response::<()>::err(Value::Null, error)).await;
            }
        };
        let answer = match parse_request(line.as_bytes()) {
            Err((id, error)) => Response::err(id, error),
            Ok(request) => match request.method {
                Method::Hook(p) if p.event == NETWORK_EVENT => Response::err(
                    request.id,
                    forbidden(format!("`{NETWORK_EVENT}` is the daemon's own record")),
                ),
                Method::Hook(p) if p.event == TOOL_USED_EVENT && p.step == step.as_str() => {
                    let records = tools.take_new();
                    if records.is_empty() {
                        Response::answer(request.id, Ok(HookAnswer::default()))
                    } else {
                        let params = HookParams {
                            payload: serde_json::json!({ "records": records }),
                            ..p
                        };
                        Response::answer(request.id, ask(params).await)
                    }
                }
                Method::Hook(p) if p.step == step.as_str() => {
                    Response::answer(request.id, ask(p).await)
                }
                Method::Hook(p) => Response::err(
                    request.id,
                    forbidden(format!(
                        "this socket answers the hooks of `{step}` only, not of `{}`",
                        p.step
                    )),
                ),
                other => Response::err(
                    request.id,
                    forbidden(format!(
                        "an agent's socket answers its own hooks only, not `{}`",
                        other.name()
                    )),
                ),
            },
        };
        send(&mut conn, &answer).await?;
    }
    Ok(())
}

fn forbidden(message: String) -> RpcError {
    RpcError::new(ErrorCode::Forbidden, message)
}
