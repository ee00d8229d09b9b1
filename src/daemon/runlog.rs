//! `logs`: an attempt's output served from its file in the run folder.
//!
//! The answer names the file, then its content follows as `{"type":"log","data":…}` lines,
//! each a whole number of UTF-8 characters (a read that ends inside a character keeps its
//! first bytes for the next line). Without `follow` the stream ends with `log.end` at the end
//! of the file. With `follow` it goes on as the agent writes, woken by file-system
//! notifications, and ends with `log.end` once the attempt is over: the runner writes
//! `report.json` after the agent's output is complete. A follower naming an attempt whose
//! output does not exist yet (just dispatched, its worktree still being made) waits for it to
//! appear, so a client can follow an attempt from the moment it is dispatched.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use serde_json::Value;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::daemon::fswatch::file_changes;
use crate::daemon::runner::REPORT_FILE;
use crate::daemon::wire::{send, Conn};
use crate::daemon::Paths;
use crate::domain::id::BeadId;
use crate::protocol::{LogData, LogEnd, LogsOpened, LogsParams, Response, RpcError};

/// An error line, which has no result.
type ErrorLine = Response<()>;

/// How much of the file one `log` line carries at most.
const CHUNK: usize = 64 * 1024;

/// Serves one `logs` request on `conn`; returns when the stream is over, the client hung up
/// or the daemon stops.
pub async fn serve(
    conn: &mut Conn,
    id: Value,
    p: LogsParams,
    paths: &Paths,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let path = match output_path(paths, &p) {
        Ok(path) => path,
        Err(error) => return send(conn, &ErrorLine::err(id, error)).await,
    };
    let wait = p.follow && p.attempt.is_some();
    if !path.exists() {
        if !wait {
            let stream = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("output");
            let attempt = path
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|n| n.to_str())
                .unwrap_or("?");
            let error =
                RpcError::not_found(format!("no {stream} for `{}` attempt {attempt}", p.step));
            return send(conn, &ErrorLine::err(id, error)).await;
        }
        if !appeared(&path, shutdown).await? {
            return Ok(());
        }
    }
    send(conn, &Response::ok(id, LogsOpened { file: path.clone() })).await?;
    let mut tail = OutputTail::open(&path, p.follow).await?;
    // The client closed its sending side: it may still read (see `server::subscribe`).
    let mut half_closed = false;
    loop {
        match tail.read().await? {
            Piece::Text(data) => send(conn, &LogData::new(data)).await?,
            Piece::End => return send(conn, &LogEnd::default()).await,
            Piece::Wait => tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = tail.changed() => if !changed { return Ok(()) },
                next = conn.next(), if !half_closed => half_closed = next.is_none(),
            },
        }
    }
}

/// What [`OutputTail::read`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// Text written since the last read, whole characters only.
    Text(String),
    /// Nothing new yet: wait for [`OutputTail::changed`].
    Wait,
    /// Everything was read: the end of the file, or (when following) the attempt is over.
    End,
}

/// Reads an attempt's output file as it grows. Following, it ends once the attempt is over:
/// the runner writes `report.json` after the agent's output is complete.
pub struct OutputTail {
    file: File,
    offset: u64,
    buf: Vec<u8>,
    /// Bytes read that are not whole characters yet.
    pending: Vec<u8>,
    report: PathBuf,
    follow: bool,
    changed: watch::Receiver<()>,
    _watchers: [Option<crate::daemon::fswatch::Watching>; 2],
    /// Set by a skip, until the next read.
    skipped: bool,
    ended: bool,
}

impl OutputTail {
    /// Opens `path`, which must exist; `follow` watches it and its run folder's report.
    pub async fn open(path: &Path, follow: bool) -> std::io::Result<OutputTail> {
        let report = path.with_file_name(REPORT_FILE);
        let (tx, changed) = watch::channel(());
        let watchers = if follow {
            [file_changes(path, tx.clone()), file_changes(&report, tx)]
        } else {
            [None, None]
        };
        Ok(OutputTail {
            file: File::open(path).await?,
            offset: 0,
            buf: vec![0u8; CHUNK],
            pending: Vec::new(),
            report,
            follow,
            changed,
            _watchers: watchers,
            skipped: false,
            ended: false,
        })
    }

    /// Skips all but about the last `keep` bytes written so far (from a character's start).
    pub async fn skip_to_last(&mut self, keep: u64) -> std::io::Result<()> {
        let len = self.file.metadata().await?.len();
        self.offset = len.saturating_sub(keep);
        self.skipped = self.offset > 0;
        Ok(())
    }

    /// What was written since the last read.
    pub async fn read(&mut self) -> std::io::Result<Piece> {
        if self.ended {
            return Ok(Piece::End);
        }
        // Looked at before reading: once it exists, everything the agent wrote is in the file.
        let finished = self.follow && self.report.exists();
        loop {
            self.file.seek(SeekFrom::Start(self.offset)).await?;
            let n = self.file.read(&mut self.buf).await?;
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            self.pending.extend_from_slice(&self.buf[..n]);
            if std::mem::take(&mut self.skipped) {
                // A skip that landed inside a character drops the rest of that character.
                let lead = self
                    .pending
                    .iter()
                    .take_while(|b| *b & 0xC0 == 0x80)
                    .count();
                self.pending.drain(..lead.min(3));
            }
            let whole = complete_prefix(&self.pending);
            if whole > 0 {
                let data = String::from_utf8_lossy(&self.pending[..whole]).into_owned();
                self.pending.drain(..whole);
                return Ok(Piece::Text(data));
            }
        }
        if self.follow && !finished {
            return Ok(Piece::Wait);
        }
        self.ended = true;
        if self.pending.is_empty() {
            return Ok(Piece::End);
        }
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        Ok(Piece::Text(rest))
    }

    /// Waits until the file or the report changes; `false` if it can no longer tell.
    pub async fn changed(&mut self) -> bool {
        self.changed.changed().await.is_ok()
    }
}

/// The output file of a step's attempt (the latest when none is given); it may not exist.
fn output_path(paths: &Paths, p: &LogsParams) -> Result<PathBuf, RpcError> {
    let step = BeadId::new(&p.step).map_err(|e| RpcError::bad_request(e.to_string()))?;
    let (work, name) = step.as_str().split_once('.').ok_or_else(|| {
        RpcError::bad_request(format!("`{step}` is not a step id (`<bead>.<step>`)"))
    })?;
    let stream = match p.stream.as_deref().unwrap_or("stdout") {
        s @ ("stdout" | "stderr") => s,
        other => {
            return Err(RpcError::bad_request(format!(
                "unknown stream `{other}` (stdout or stderr)"
            )))
        }
    };
    let dir = paths.runs().join(work).join(name);
    let attempt = match p.attempt {
        Some(a) => a,
        None => std::fs::read_dir(&dir)
            .map_err(|_| RpcError::not_found(format!("`{step}` has not run yet")))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .max()
            .ok_or_else(|| RpcError::not_found(format!("`{step}` has not run yet")))?,
    };
    Ok(dir.join(attempt.to_string()).join(stream))
}

/// Waits until `path` exists, watching the folder nearest to it that does (the run folder
/// of a new step is made when its first attempt starts). `false` when the daemon stops first.
pub async fn appeared(path: &Path, shutdown: &CancellationToken) -> std::io::Result<bool> {
    loop {
        let Some(missing) = path.ancestors().take_while(|a| !a.exists()).last() else {
            return Ok(true);
        };
        let (tx, mut changed) = watch::channel(());
        let Some(_watcher) = file_changes(missing, tx) else {
            return Err(std::io::Error::other(format!(
                "cannot watch for `{}`",
                missing.display()
            )));
        };
        // It may have appeared while the watch was being set up.
        if missing.exists() {
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(false),
            c = changed.changed() => if c.is_err() { return Ok(false) },
        }
    }
}

/// How much of `bytes` can be sent as text now: all but the first bytes of a character cut
/// at the end. Invalid bytes elsewhere count (they are replaced when sent).
fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let needs = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needs > back { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_at_the_end_waits_for_its_other_bytes() {
        let text = "a é € 𝄞".as_bytes();
        for cut in 0..=text.len() {
            let whole = complete_prefix(&text[..cut]);
            assert!(
                std::str::from_utf8(&text[..whole]).is_ok(),
                "cut at {cut}: {whole}"
            );
            assert!(cut - whole < 4, "at most a character's first bytes wait");
        }
        assert_eq!(complete_prefix(text), text.len());
        assert_eq!(
            complete_prefix(b"ok\xff"),
            3,
            "an invalid byte is not waited for"
        );
    }
}
