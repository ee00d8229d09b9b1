//! The daemon's side of the control socket.
//!
//! One task per connection: it sends the hello line, reads request lines (at most
//! [`MAX_LINE`] bytes; a longer or malformed line gets an error reply and the connection stays
//! usable), forwards each request to the engine and writes the answer. `subscribe` and
//! `logs --follow` turn the connection into a stream: of the journal's events
//! ([`crate::daemon::follow`]: recent ones from memory shared by every subscriber, older ones
//! from the files) or of a run's output ([`crate::daemon::runlog`]), so a slow reader never
//! holds up the engine and never misses an event.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::engine::EngineHandle;
use crate::daemon::follow::{Filter, Follower};
use crate::daemon::runlog;
use crate::daemon::store::feed::Line as JournalLine;
use crate::daemon::wire::{codec_io, send, Conn, Line, RequestLines};
use crate::daemon::Paths;
use crate::protocol::{
    parse_request, Answer, ErrorCode, Hello, Method, Response, RpcError, Stopping, StreamEnd,
    SubscribeParams, Subscribed, MAX_LINE,
};

/// An error line, which has no result.
type ErrorLine = Response<()>;

/// Binds the control socket at `path`: the folder is made private (0700), a stale socket
/// left by a dead daemon is replaced, and the socket itself is 0600.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        if dir
            .file_name()
            .is_some_and(|n| n == crate::daemon::paths::STATE_DIR)
        {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// What every connection task shares.
#[derive(Clone)]
struct Shared {
    engine: EngineHandle,
    paths: Paths,
    /// Fires when the server stops: streams end then.
    shutdown: CancellationToken,
    /// Asks the daemon to stop (a `shutdown` request); the server goes on answering while the
    /// running agents get their grace period, so `status` says `stopping`.
    stop: CancellationToken,
    uid: u32,
    /// The cluster's bus when `[cluster]` is on (`workers`).
    cluster: Option<Arc<crate::daemon::cluster::bus::Bus>>,
}

/// Accepts connections until `shutdown` fires; a `shutdown` request fires `stop`.
pub async fn serve(
    listener: UnixListener,
    engine: EngineHandle,
    paths: Paths,
    (shutdown, stop): (CancellationToken, CancellationToken),
    tracker: TaskTracker,
    cluster: Option<Arc<crate::daemon::cluster::bus::Bus>>,
) {
    let shared = Shared {
        engine,
        paths,
        shutdown: shutdown.clone(),
        stop,
        uid: nix::unistd::getuid().as_raw(),
        cluster,
    };
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors (EMFILE) fails every accept until a connection
                    // closes: pause instead of spinning on it.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let shared = shared.clone();
        tracker.spawn(async move {
            if let Err(e) = connection(stream, shared).await {
                tracing::debug!(error = %e, "control connection ended");
            }
        });
    }
}

async fn connection(stream: UnixStream, shared: Shared) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    let mut conn = Framed::new(stream, RequestLines::new());
    if peer != shared.uid {
        let error = RpcError::new(
            ErrorCode::Forbidden,
            format!(
                "uid {peer} may not control a daemon running as uid {}",
                shared.uid
            ),
        );
        return send(&mut conn, &ErrorLine::err(Value::Null, error)).await;
    }
    send(&mut conn, &Hello::new()).await?;
    loop {
        let line = tokio::select! {
            () = shared.shutdown.cancelled() => return Ok(()),
            line = conn.next() => line,
        };
        let line = match line {
            None => return Ok(()),
            Some(Ok(Line::Text(line))) => line,
            Some(Ok(Line::TooLong)) => {
                let error = RpcError::new(
                    ErrorCode::TooLarge,
                    format!("a request line may be at most {MAX_LINE} bytes"),
                );
                send(&mut conn, &ErrorLine::err(Value::Null, error)).await?;
                continue;
            }
            Some(Ok(Line::NotUtf8)) => {
                let error = RpcError::bad_request("a request line must be UTF-8");
                send(&mut conn, &ErrorLine::err(Value::Null, error)).await?;
                continue;
            }
            Some(Ok(Line::OverBudget)) => {
                let error = RpcError::new(
                    ErrorCode::TooLarge,
                    format!(
                        "the daemon's connections hold {} bytes of unfinished request lines, its most; this connection's line is dropped and the connection closed",
                        crate::daemon::wire::MAX_BUFFERED
                    ),
                );
                return send(&mut conn, &ErrorLine::err(Value::Null, error)).await;
            }
            Some(Err(e)) => return Err(codec_io(e)),
        };
        if line.trim().is_empty() {
            continue;
        }
        let request = match parse_request(line.as_bytes()) {
            Ok(r) => r,
            Err((id, error)) => {
                send(&mut conn, &ErrorLine::err(id, error)).await?;
                continue;
            }
        };
        let id = request.id;
        // The methods served here, beside the engine: streams, the stop, the workers seen and
        // the run folders. Every other method is the engine's.
        match request.method {
            Method::Subscribe(p) => return subscribe(conn, id, p, &shared).await,
            Method::Logs(p) if p.follow => {
                return runlog::serve(&mut conn, id, p, &shared.paths, &shared.shutdown).await
            }
            Method::Logs(p) => {
                runlog::serve(&mut conn, id, p, &shared.paths, &shared.shutdown).await?
            }
            Method::Shutdown => {
                let answer = Stopping { stopping: true };
                send(&mut conn, &Response::ok(id, answer)).await?;
                shared.stop.cancel();
                return Ok(());
            }
            Method::Workers => {
                let workers = shared
                    .cluster
                    .as_ref()
                    .map(|bus| bus.workers())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(beat, seen)| crate::protocol::WorkerView {
                        name: beat.name,
                        slots: beat.slots,
                        models: beat.models,
                        running: beat.running,
                        seen_ms: seen.as_millis() as u64,
                        trouble: beat.trouble,
                    })
                    .collect();
                let answer = crate::protocol::WorkersAnswer {
                    cluster: shared.cluster.is_some(),
                    workers,
                };
                send(&mut conn, &Response::ok(id, answer)).await?;
            }
            Method::Show(p) if p.runs => {
                let p = crate::protocol::IdParams { id: p.id };
                let answer = crate::daemon::audit::show_with_runs(&shared.engine, &shared.paths, p)
                    .await
                    .map(|show| Answer::Show(Box::new(show)));
                send(&mut conn, &Response::answer(id, answer)).await?;
            }
            method => {
                let answer = shared.engine.request(method).await;
                send(&mut conn, &Response::answer(id, answer)).await?;
            }
        }
    }
}

/// The most buffers one `writev` takes (Linux's `IOV_MAX`).
const MAX_SLICES: usize = 1024;

/// Writes journal lines, each followed by a newline, with as few `writev`s as the socket
/// takes: one for a batch of events, rather than one per event, which is what lets many
/// subscribers keep up with a burst. The lines go from the feed every subscriber shares
/// straight to the socket, without a copy of their own.
async fn write_lines(stream: &mut UnixStream, lines: &[JournalLine]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut slices = Vec::with_capacity(lines.len() * 2);
    for (_, line) in lines {
        slices.push(std::io::IoSlice::new(line.as_bytes()));
        slices.push(std::io::IoSlice::new(b"\n"));
    }
    let mut rest = slices.as_mut_slice();
    while !rest.is_empty() {
        let written = stream
            .write_vectored(&rest[..rest.len().min(MAX_SLICES)])
            .await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

/// Streams journal events: those after `since`, then (with `follow`) each new one as the
/// engine publishes it ([`Follower`]: recent events from memory, older ones from the files).
async fn subscribe(
    mut conn: Conn,
    id: Value,
    p: SubscribeParams,
    shared: &Shared,
) -> std::io::Result<()> {
    let journal = shared.engine.journal.clone();
    let since = p.since.unwrap_or(*journal.seq.borrow());
    let filter = Filter::from(&p);
    let answer = Subscribed {
        since,
        subscribed: true,
    };
    send(&mut conn, &Response::ok(id, answer)).await?;
    let mut follower = Follower::new(journal, since, filter);
    let mut half_closed = false;
    loop {
        loop {
            let lines = follower.read().await?;
            if lines.is_empty() {
                break;
            }
            // The connection's own buffer is empty (answers are flushed as they are sent).
            write_lines(conn.get_mut(), &lines).await?;
        }
        if !p.follow {
            return send(&mut conn, &StreamEnd::new(follower.last())).await;
        }
        tokio::select! {
            () = shared.shutdown.cancelled() => return Ok(()),
            changed = follower.changed() => if !changed { return Ok(()) },
            // Anything the client sends is ignored. The end of its input is not a hang-up
            // (`nc -U` closes its sending side and goes on reading): the stream ends when a
            // write fails.
            next = conn.next(), if !half_closed => half_closed = next.is_none(),
        }
    }
}
