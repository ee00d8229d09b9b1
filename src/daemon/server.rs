//! The daemon's side of the control socket.
//!
//! One task per connection: it sends the hello line, reads request lines (at most
//! [`MAX_LINE`] bytes; a longer or malformed line gets an error reply and the connection stays
//! usable), forwards each request to the engine and writes the answer. `subscribe` and
//! `logs --follow` turn the connection into a stream served from files (the journal, a run's
//! output: [`crate::daemon::runlog`]), so a slow reader never holds up the engine and never
//! misses an event.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::fs::File;
use tokio::io::{AsyncBufReadExt, AsyncSeekExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::engine::EngineHandle;
use crate::daemon::runlog;
use crate::daemon::store::journal::seq_of;
use crate::daemon::store::Segments;
use crate::daemon::wire::{codec_io, send, Conn, Line, RequestLines};
use crate::daemon::Paths;
use crate::protocol::{
    parse_request, Answer, ConnectionMethod, EngineRequest, ErrorCode, Hello, IdParams, Response,
    Route, RpcError, Stopping, StreamEnd, SubscribeParams, Subscribed, MAX_LINE,
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
    shutdown: CancellationToken,
    uid: u32,
}

/// Accepts connections until `shutdown` fires.
pub async fn serve(
    listener: UnixListener,
    engine: EngineHandle,
    paths: Paths,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let shared = Shared {
        engine,
        paths,
        shutdown: shutdown.clone(),
        uid: nix::unistd::getuid().as_raw(),
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
        let method = match request.method.route() {
            Route::Engine(request) => {
                let answer = shared.engine.request(request).await;
                send(&mut conn, &Response::answer(id, answer)).await?;
                continue;
            }
            Route::Connection(method) => method,
        };
        match method {
            ConnectionMethod::Subscribe(p) => return subscribe(conn, id, p, &shared).await,
            ConnectionMethod::Logs(p) if p.follow => {
                return runlog::serve(&mut conn, id, p, &shared.paths, &shared.shutdown).await
            }
            ConnectionMethod::Logs(p) => {
                runlog::serve(&mut conn, id, p, &shared.paths, &shared.shutdown).await?
            }
            ConnectionMethod::Shutdown => {
                let answer = Stopping { stopping: true };
                send(&mut conn, &Response::ok(id, answer)).await?;
                shared.shutdown.cancel();
                return Ok(());
            }
            ConnectionMethod::ShowRuns(p) => {
                let answer = show_runs(p, &shared).await;
                send(&mut conn, &Response::answer(id, answer)).await?;
            }
        }
    }
}

/// `show --runs`: the engine's `show`, then every attempt from the run folders and the
/// journal, read here: the engine must not wait on files.
async fn show_runs(p: IdParams, shared: &Shared) -> Result<Answer, RpcError> {
    let Answer::Show(mut show) = shared.engine.request(EngineRequest::Show(p)).await? else {
        return Err(RpcError::internal(
            "the engine answered `show` with something else",
        ));
    };
    let paths = shared.paths.clone();
    tokio::task::spawn_blocking(move || {
        crate::daemon::audit::add_runs(&mut show, &paths);
        Answer::Show(show)
    })
    .await
    .map_err(|e| RpcError::internal(format!("reading the run folders failed: {e}")))
}

/// Streams journal events: replay from `since` out of the journal file, then follow it as the
/// engine publishes new seqs.
async fn subscribe(
    mut conn: Conn,
    id: Value,
    p: SubscribeParams,
    shared: &Shared,
) -> std::io::Result<()> {
    let mut seq = shared.engine.seq.clone();
    let since = p.since.unwrap_or(*seq.borrow());
    let types = p.types.clone();
    let bead = p.bead.clone();
    let answer = Subscribed {
        since,
        subscribed: true,
    };
    send(&mut conn, &Response::ok(id, answer)).await?;
    let path = shared.engine.journal.clone();
    replay_segments(
        &mut conn,
        &shared.engine.segments,
        since,
        bead.as_deref(),
        types.as_deref(),
    )
    .await?;
    let mut journal = File::open(&path).await?;
    // Start near `since` rather than at the journal's first line: `ctl status` and `ctl watch`
    // ask for the last few events of journals of any length.
    let start =
        tokio::task::spawn_blocking(move || line_before(&mut std::fs::File::open(&path)?, since))
            .await
            .map_err(std::io::Error::other)??;
    journal.seek(std::io::SeekFrom::Start(start)).await?;
    let mut file = BufReader::new(journal);
    let mut partial = String::new();
    let mut caught_up = false;
    let mut half_closed = false;
    // A complete line the engine has not published yet (written, not yet synced).
    let mut held: Option<String> = None;
    loop {
        let durable = *seq.borrow();
        // Read whatever complete lines the journal has now, up to the last durable event.
        loop {
            let full = match held.take() {
                Some(line) => line,
                None => {
                    let mut line = String::new();
                    let n = file.read_line(&mut line).await?;
                    if n == 0 {
                        break;
                    }
                    partial.push_str(&line);
                    if !partial.ends_with('\n') {
                        continue;
                    }
                    std::mem::take(&mut partial)
                }
            };
            // Events of a batch are written as they are decided and synced together: a
            // subscriber sees them once the engine publishes their seq, never before.
            if seq_of(full.as_bytes()).is_some_and(|s| s > durable) {
                held = Some(full);
                break;
            }
            // Once past `since`, an unfiltered subscription passes every line without parsing
            // it: with many subscribers that parse is most of the fan-out's cost.
            let pass = caught_up && bead.is_none() && types.is_none();
            if pass || wanted(&full, since, bead.as_deref(), types.as_deref()) {
                caught_up = true;
                // Buffered: one write per batch of lines rather than one per event, which is
                // what lets many subscribers keep up with a burst.
                // As the event was written, without the journal's checksum.
                let (event, _) = crate::daemon::store::journal::unseal(full.trim_end());
                conn.feed(event.into_owned()).await.map_err(codec_io)?;
            }
        }
        conn.flush().await.map_err(codec_io)?;
        if !p.follow {
            let last = *seq.borrow();
            return send(&mut conn, &StreamEnd::new(last)).await;
        }
        tokio::select! {
            () = shared.shutdown.cancelled() => return Ok(()),
            changed = seq.changed() => if changed.is_err() { return Ok(()) },
            // Anything the client sends is ignored. The end of its input is not a hang-up
            // (`nc -U` closes its sending side and goes on reading): the stream ends when a
            // write fails.
            next = conn.next(), if !half_closed => half_closed = next.is_none(),
        }
    }
}

/// Sends the wanted events after `since` that compaction rotated out of the live journal
/// into older `segments`.
async fn replay_segments(
    conn: &mut Conn,
    segments: &Segments,
    since: u64,
    bead: Option<&str>,
    types: Option<&[String]>,
) -> std::io::Result<()> {
    let rotated = &segments.rotated;
    for (i, (_, segment)) in rotated.iter().enumerate() {
        let after = rotated
            .get(i + 1)
            .map_or(segments.live_first, |(first, _)| *first);
        // Every event of this segment is at most `since`.
        if after <= since + 1 {
            continue;
        }
        let mut lines = BufReader::new(File::open(segment).await?).lines();
        while let Some(line) = lines.next_line().await? {
            if wanted(&line, since, bead, types) {
                let (event, _) = crate::daemon::store::journal::unseal(&line);
                conn.feed(event.into_owned()).await.map_err(codec_io)?;
            }
        }
    }
    conn.flush().await.map_err(codec_io)
}

/// How far back from the end [`line_before`] reads at a time.
const SCAN_BLOCK: u64 = 64 * 1024;

/// The offset of a line of the journal `file` at or before the first event after `since`:
/// blocks are read backwards from the end, and the first whole line starting in a block is
/// looked at until one has a seq of at most `since`. Lines between it and the first event
/// wanted are skipped by [`wanted`], so only a block or two is read for a recent `since`; a
/// line that does not start `{"seq":N` is passed over, and the worst case is the journal's
/// start.
fn line_before(file: &mut std::fs::File, since: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    if since == 0 {
        return Ok(0);
    }
    let mut end = file.metadata()?.len();
    let mut block = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(SCAN_BLOCK);
        block.resize(usize::try_from(end - start).unwrap_or(0), 0);
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        let line = if start == 0 {
            Some(0)
        } else {
            block.iter().position(|&b| b == b'\n').map(|i| i + 1)
        };
        if let Some(at) = line {
            if seq_of(&block[at..]).is_some_and(|seq| seq <= since) {
                return Ok(start + at as u64);
            }
        }
        end = start;
    }
    Ok(0)
}

/// Whether a journal line passes a subscription's filters.
fn wanted(line: &str, since: u64, bead: Option<&str>, types: Option<&[String]>) -> bool {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        seq: u64,
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        /// A bead id on step events, a whole bead on `bead.created`.
        #[serde(default)]
        bead: Option<Value>,
        #[serde(default, borrow)]
        id: Option<std::borrow::Cow<'a, str>>,
    }
    let Ok(head) = serde_json::from_str::<Head>(line) else {
        return false;
    };
    if head.seq <= since {
        return false;
    }
    if let Some(types) = types {
        if !types.iter().any(|t| t == head.kind.as_ref()) {
            return false;
        }
    }
    if let Some(bead) = bead {
        let about = match &head.bead {
            Some(Value::String(id)) => id.as_str(),
            Some(Value::Object(b)) => b.get("id").and_then(Value::as_str).unwrap_or(""),
            _ => head.id.as_deref().unwrap_or(""),
        };
        if about != bead
            && !about
                .strip_prefix(bead)
                .is_some_and(|rest| rest.starts_with('.'))
        {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recent_since_reads_only_the_journals_end() {
        use std::io::{BufRead, Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.jsonl");
        let mut out = std::fs::File::create(&path).expect("create");
        for seq in 1..=20_000u64 {
            writeln!(out, r#"{{"seq":{seq},"ts":"2026-01-01T00:00:00Z","type":"bead.updated","id":"cat-{seq}"}}"#)
                .expect("write");
        }
        drop(out);
        let len = std::fs::metadata(&path).expect("len").len();
        let mut file = std::fs::File::open(&path).expect("open");
        let first_seq = |file: &mut std::fs::File, at: u64| {
            file.seek(SeekFrom::Start(at)).expect("seek");
            let mut line = String::new();
            std::io::BufReader::new(&*file)
                .read_line(&mut line)
                .expect("read");
            seq_of(line.as_bytes()).expect("a seq")
        };
        for since in [19_990, 15_000, 2] {
            let at = line_before(&mut file, since).expect("offset");
            let seq = first_seq(&mut file, at);
            assert!(
                seq <= since,
                "no event after {since} is skipped: starts at {seq}"
            );
        }
        let at = line_before(&mut file, 19_990).expect("offset");
        assert!(
            len - at <= 2 * SCAN_BLOCK,
            "the last events come from the last blocks: {} of {len} bytes",
            len - at
        );
        assert_eq!(line_before(&mut file, 0).expect("offset"), 0);
        assert_eq!(seq_of(b"{\"seq\":42,\"ts\":\"x\"}"), Some(42));
        assert_eq!(seq_of(b"not a line"), None);
    }

    #[test]
    fn subscription_filters() {
        let status = r#"{"seq":5,"ts":"2026-01-01T00:00:00Z","type":"bead.status","id":"cat-1.review","status":"closed"}"#;
        assert!(wanted(status, 0, None, None));
        assert!(!wanted(status, 5, None, None), "since is exclusive");
        assert!(
            wanted(status, 0, Some("cat-1"), None),
            "a step's events belong to its bead"
        );
        assert!(!wanted(status, 0, Some("cat-12"), None));
        assert!(!wanted(status, 0, None, Some(&["step.result".into()])));
        let created = r#"{"seq":1,"ts":"2026-01-01T00:00:00Z","type":"bead.created","bead":{"id":"cat-2","title":"x"}}"#;
        assert!(wanted(created, 0, Some("cat-2"), None));
    }
}
