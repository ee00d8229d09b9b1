//! An agent's output streams: copied to capped files in the run folder and handed, chunk by
//! chunk, to a parser, with memory that does not grow with the size of the output.
//!
//! Reading never stops at the cap: an agent blocked on a full pipe would stall and be killed
//! for it. Bytes past the cap are counted and dropped, and a marker line at the end of the file
//! says how many.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::fs::File;
use std::io::Write;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Bytes read from a pipe at a time.
const CHUNK: usize = 64 * 1024;

/// Receives a stream's bytes as they arrive.
pub(crate) trait Consumer {
    fn feed(&mut self, chunk: &[u8]);
    /// The stream ended; a last line without a newline is complete now.
    fn end(&mut self);
}

/// What became of one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamStats {
    /// Bytes the agent wrote, kept or not.
    pub total: u64,
    /// Whether bytes were dropped at the cap.
    pub truncated: bool,
}

/// A file that keeps the first `cap` bytes written to it. Each chunk is written through as it
/// arrives (no buffer held back), so `ctl logs -f` shows an agent's output while it runs.
///
/// Written in place, not on a blocking thread: a chunk is at most [`CHUNK`] bytes into the
/// page cache, and a hand-off to another thread per chunk cost more than the write (it put a
/// thread wake-up between an agent's last line and the end of its attempt).
pub(crate) struct CappedFile {
    path: PathBuf,
    out: File,
    cap: u64,
    stats: StreamStats,
    /// Set on the first write error; later bytes are counted but not written. The run goes on:
    /// a full disk loses the log, not the step.
    failed: bool,
}

impl CappedFile {
    pub(crate) fn create(path: &Path, cap: u64) -> io::Result<CappedFile> {
        let file = File::create(path)?;
        Ok(CappedFile {
            path: path.to_owned(),
            out: file,
            cap,
            stats: StreamStats::default(),
            failed: false,
        })
    }

    fn write(&mut self, chunk: &[u8]) {
        let kept = self.stats.total.min(self.cap);
        self.stats.total += chunk.len() as u64;
        let room = usize::try_from(self.cap - kept).unwrap_or(usize::MAX);
        let keep = &chunk[..chunk.len().min(room)];
        if keep.len() < chunk.len() {
            self.stats.truncated = true;
        }
        if keep.is_empty() || self.failed {
            return;
        }
        if let Err(e) = self.out.write_all(keep) {
            self.failed = true;
            tracing::warn!(path = %self.path.display(), error = %e, "cannot write agent output; dropping the rest");
        }
    }

    /// Appends the truncation marker if bytes were dropped, and flushes.
    fn finish(mut self) -> StreamStats {
        if self.stats.truncated && !self.failed {
            let marker = format!(
                "\n[catalyst] output truncated: kept the first {} bytes, dropped {} bytes\n",
                self.cap,
                self.stats.total - self.cap
            );
            if let Err(e) = self.out.write_all(marker.as_bytes()) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write the truncation marker");
            }
        }
        if let Err(e) = self.out.flush() {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot flush agent output");
        }
        self.stats
    }
}

/// Copies `src` into `sink` and `consumer` until end of file or until `stop` fires, noting each
/// chunk on `activity` (the stall timer). `stop` exists for output that never ends: a process
/// that left the agent's group keeps the pipe open after the group is killed.
pub(crate) async fn pump<R, C>(
    mut src: R,
    mut sink: CappedFile,
    mut consumer: C,
    activity: Arc<Notify>,
    stop: CancellationToken,
) -> (StreamStats, C)
where
    R: AsyncRead + Unpin,
    C: Consumer,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            read = src.read(&mut buf) => match read {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read agent output");
                    break;
                }
            },
        };
        activity.notify_one();
        sink.write(&buf[..n]);
        consumer.feed(&buf[..n]);
    }
    consumer.end();
    (sink.finish(), consumer)
}

/// Splits a byte stream into lines without holding more than `max` bytes: a longer line is
/// skipped (counted in `oversized`), not buffered whole.
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    /// Inside a line that outgrew `max`: drop bytes until its end.
    skipping: bool,
    /// The first [`HEAD_KEPT`] bytes of the line being skipped.
    head: Vec<u8>,
    pub(crate) oversized: u64,
}

/// How much of a skipped line's start is kept, for telling what kind of line it was.
pub(crate) const HEAD_KEPT: usize = 64;

/// The buffer capacity kept between lines; a long line's allocation is given back after it.
const KEEP_CAPACITY: usize = 64 * 1024;

impl LineSplitter {
    pub(crate) fn new(max: usize) -> LineSplitter {
        LineSplitter {
            buf: Vec::new(),
            max,
            skipping: false,
            head: Vec::new(),
            oversized: 0,
        }
    }

    /// Calls `on_line` with each line completed by `chunk`, without its `\n`.
    pub(crate) fn feed(&mut self, chunk: &[u8], on_line: &mut dyn FnMut(&[u8])) {
        self.feed_noting_cut(chunk, on_line, &mut |_| {});
    }

    /// [`LineSplitter::feed`], and `on_cut` with the start (at most [`HEAD_KEPT`] bytes) of
    /// each line that ends in `chunk` after it was skipped for its length.
    pub(crate) fn feed_noting_cut(
        &mut self,
        chunk: &[u8],
        on_line: &mut dyn FnMut(&[u8]),
        on_cut: &mut dyn FnMut(&[u8]),
    ) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let Some(i) = rest.iter().position(|&b| b == b'\n') else {
                self.extend(rest);
                return;
            };
            let (piece, after) = (&rest[..i], &rest[i + 1..]);
            if !self.skipping && self.buf.is_empty() && piece.len() <= self.max {
                on_line(piece);
            } else {
                self.extend(piece);
                if self.skipping {
                    on_cut(&self.head);
                } else {
                    on_line(&self.buf);
                }
                self.skipping = false;
                self.head.clear();
                self.clear();
            }
            rest = after;
        }
    }

    /// Hands over a last line that had no newline.
    pub(crate) fn end(&mut self, on_line: &mut dyn FnMut(&[u8])) {
        if !self.skipping && !self.buf.is_empty() {
            on_line(&self.buf);
        }
        self.skipping = false;
        self.head.clear();
        self.clear();
    }

    fn extend(&mut self, piece: &[u8]) {
        if self.skipping {
            return;
        }
        if self.buf.len() + piece.len() > self.max {
            self.skipping = true;
            self.oversized += 1;
            let from_buf = self.buf.len().min(HEAD_KEPT);
            self.head.extend_from_slice(&self.buf[..from_buf]);
            let from_piece = (HEAD_KEPT - from_buf).min(piece.len());
            self.head.extend_from_slice(&piece[..from_piece]);
            self.clear();
        } else {
            self.buf.extend_from_slice(piece);
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.buf.shrink_to(KEEP_CAPACITY);
    }
}

/// The last `max` bytes of a stream.
pub(crate) struct Tail {
    buf: VecDeque<u8>,
    max: usize,
    /// Whether bytes have fallen off the front.
    cut: bool,
}

impl Tail {
    pub(crate) fn new(max: usize) -> Tail {
        Tail {
            buf: VecDeque::new(),
            max,
            cut: false,
        }
    }

    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let chunk = if chunk.len() > self.max {
            self.cut = true;
            self.buf.clear();
            &chunk[chunk.len() - self.max..]
        } else {
            chunk
        };
        self.buf.extend(chunk);
        if self.buf.len() > self.max {
            self.cut = true;
            let excess = self.buf.len() - self.max;
            self.buf.drain(..excess);
        }
    }

    /// The kept bytes as text. When the front was cut, the partial first line is dropped so the
    /// text starts on a line boundary.
    pub(crate) fn into_text(self) -> String {
        let bytes: Vec<u8> = self.buf.into();
        let start = if self.cut {
            bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}
