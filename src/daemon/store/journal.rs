//! The append-only journal: one JSON event per line, written in groups and fsynced once per
//! group before anyone is told the group is durable.
//!
//! Each line is sealed with the CRC32C of the event's JSON as written, as its last key
//! (`…,"crc":"1a2b3c4d"}`): replay recomputes it, so a byte changed inside a value is
//! corruption named by file and line rather than a title silently changed. Lines of journals
//! written before checksums have none and still load; once a sealed line has been read, every
//! later line must be sealed too.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::feed::Feed;

use crate::domain::event::{Event, EventBody};
use crate::domain::time::Timestamp;

/// The writing end of the journal.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    next_seq: u64,
    /// Bytes known to be durable; a failed write is cut back to this length.
    len: u64,
    /// A failed append could not be cut back: the file may hold a partial group past `len`,
    /// which must go before anything else is appended (else it would sit in the middle of the
    /// journal, where replay calls it corruption).
    cut_pending: bool,
    /// The file's device and inode: a file put in its place under the daemon is noticed.
    identity: (u64, u64),
    /// Appends leave their fsync to [`Journal::sync`] (several groups, one fsync).
    deferred: bool,
    /// Bytes were written since the last fsync.
    unsynced: bool,
    /// How many times the journal was fsynced since it was opened.
    syncs: u64,
    /// The seq of the file's first event (the next one's, while it is empty).
    first_seq: u64,
    /// Where each appended event's line also goes, for the journal's followers.
    feed: Option<Arc<Feed>>,
}

/// The seq a journal line starts with (`{"seq":N,…`, as [`write_line`] writes it).
pub fn seq_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// The seq of the first event of a journal file, read from its first bytes.
fn first_seq_in(file: &File) -> Option<u64> {
    let mut head = [0u8; 32];
    let n = file.read_at(&mut head, 0).ok()?;
    seq_of(&head[..n])
}

impl Journal {
    /// Opens `path` for appending after replay found `len` good bytes ending at seq
    /// `next_seq - 1`. Anything past `len` (a torn tail) is cut off first.
    ///
    /// The file is opened to append (`O_APPEND`): every write lands at its end, never at an
    /// offset of the daemon's own, so a file shortened under the daemon never gets a hole of
    /// NUL bytes. Such a file is refused before writing instead (see [`Journal::append`]).
    pub(crate) fn open(path: &Path, next_seq: u64, len: u64) -> io::Result<Journal> {
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        let meta = file.metadata()?;
        if meta.len() != len {
            file.set_len(len)?;
            file.sync_all()?;
        }
        let first_seq = match len {
            0 => next_seq,
            _ => first_seq_in(&file).unwrap_or(next_seq),
        };
        Ok(Journal {
            first_seq,
            file,
            path: path.to_owned(),
            next_seq,
            len,
            cut_pending: false,
            identity: (meta.dev(), meta.ino()),
            deferred: false,
            unsynced: false,
            syncs: 0,
            feed: None,
        })
    }

    /// Whether the file is still the one the daemon opened, as long as it wrote it: a journal
    /// another program shortened, extended, replaced or removed is not written on (the daemon
    /// stops dispatching, and a restart reads the file as it now is).
    fn check_unchanged(&self) -> io::Result<()> {
        let changed = |what: String| {
            io::Error::other(format!(
                "the journal `{}` {what} while the daemon was writing it; nothing more is written to it (restart catalystd to read it as it is now)",
                self.path.display()
            ))
        };
        let ours = self.file.metadata()?.len();
        if ours != self.len {
            return Err(changed(format!(
                "changed length from {} to {ours} bytes",
                self.len
            )));
        }
        match std::fs::metadata(&self.path) {
            Ok(meta) if (meta.dev(), meta.ino()) == self.identity => Ok(()),
            Ok(_) => Err(changed("was replaced by another file".into())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(changed("was removed".into())),
            Err(e) => Err(e),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seq the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The seq of the file's first event (the next event's, while the file is empty).
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Hands every event appended from now on to `feed` as well.
    pub fn feed_into(&mut self, feed: Arc<Feed>) {
        self.feed = Some(feed);
    }

    /// Whether appends leave their fsync to [`Journal::sync`] (a group commit of several
    /// groups) instead of each making itself durable.
    pub fn defer_sync(&mut self, deferred: bool) {
        self.deferred = deferred;
    }

    /// Makes every group written so far durable (one fsync, if anything is pending).
    pub fn sync(&mut self) -> io::Result<()> {
        if self.unsynced {
            self.file.sync_data()?;
            self.unsynced = false;
            self.syncs += 1;
        }
        Ok(())
    }

    /// How many times the journal was fsynced since it was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// Appends a group of events with one write and one fsync (unless the fsync is deferred,
    /// see [`Journal::defer_sync`]). On success every event is durable (or will be at the next
    /// [`Journal::sync`]); on failure (a full disk, an I/O error) the file is cut back to
    /// where it was, so that no partial group stays behind, and nothing is numbered.
    pub fn append(&mut self, bodies: Vec<EventBody>, ts: Timestamp) -> io::Result<Vec<Event>> {
        let count = bodies.len();
        let mut events = Vec::with_capacity(count);
        let mut buf = Vec::new();
        let mut lines = Vec::with_capacity(if self.feed.is_some() { count } else { 0 });
        for (i, body) in bodies.into_iter().enumerate() {
            let event = Event {
                seq: self.next_seq + i as u64,
                ts,
                more: i + 1 < count,
                body,
            };
            let start = buf.len();
            write_line(&mut buf, &event)?;
            if self.feed.is_some() {
                lines.push((event.seq, unsealed(&buf[start..])));
            }
            events.push(event);
        }
        if events.is_empty() {
            return Ok(events);
        }
        if self.cut_pending {
            self.cut_back()?;
        }
        // Once per group commit: a later group of the same batch follows within microseconds,
        // and the file was found unchanged (and then only written by this journal) before
        // the batch's first group.
        if !(self.deferred && self.unsynced) {
            self.check_unchanged()?;
        }
        let written = self.file.write_all(&buf).and_then(|()| {
            if self.deferred {
                self.unsynced = true;
                Ok(())
            } else {
                self.file.sync_data().map(|()| self.syncs += 1)
            }
        });
        if let Err(e) = written {
            // If even this fails, replay drops the partial group as torn, and the next append
            // tries the cut again before writing.
            if self.cut_back().is_err() {
                self.cut_pending = true;
            }
            return Err(e);
        }
        self.len += buf.len() as u64;
        self.next_seq += count as u64;
        if let Some(feed) = &self.feed {
            feed.push(lines);
        }
        Ok(events)
    }
}

impl Journal {
    /// Cuts the file back to its durable length (appends then go on from there).
    fn cut_back(&mut self) -> io::Result<()> {
        self.file.set_len(self.len)?;
        self.cut_pending = false;
        Ok(())
    }
}

/// What precedes a line's checksum: `,"crc":"`.
const CRC_KEY: &[u8] = b",\"crc\":\"";

/// The bytes a checksum adds at the end of a line (before its newline): the key, eight hex
/// digits and `"}`, less the `}` the event's JSON ended with.
const SEAL_LEN: usize = CRC_KEY.len() + 8 + 2;

/// Appends `event` to `buf` as one sealed journal line, newline included.
pub fn write_line(buf: &mut Vec<u8>, event: &Event) -> io::Result<()> {
    let start = buf.len();
    serde_json::to_writer(&mut *buf, event).map_err(io::Error::other)?;
    let crc = crc32c::crc32c(&buf[start..]);
    // The event's JSON is an object: its closing brace moves after the checksum.
    buf.pop();
    buf.extend_from_slice(CRC_KEY);
    writeln!(buf, "{crc:08x}\"}}")?;
    Ok(())
}

/// The event's JSON of a line [`write_line`] just wrote (checksum and newline taken off).
fn unsealed(sealed: &[u8]) -> Arc<str> {
    let line = String::from_utf8_lossy(sealed);
    Arc::from(unseal(line.trim_end_matches('\n')).0.as_ref())
}

/// A journal line (without its newline) as it was before it was sealed, and the checksum it
/// was sealed with; a line without a checksum (an older journal's) is given back as it is.
pub fn unseal(line: &str) -> (std::borrow::Cow<'_, str>, Option<&str>) {
    let Some(at) = line.len().checked_sub(SEAL_LEN) else {
        return (line.into(), None);
    };
    let (event, seal) = line.split_at(at);
    match seal
        .strip_prefix(",\"crc\":\"")
        .and_then(|s| s.strip_suffix("\"}"))
    {
        Some(crc) => (format!("{event}}}").into(), Some(crc)),
        None => (line.into(), None),
    }
}

/// Checks and removes the checksum of `line` (without its newline), leaving the event's JSON
/// as it was written. Returns whether the line was sealed.
fn verify(line: &mut Vec<u8>) -> Result<bool, String> {
    let Some(at) = line.len().checked_sub(SEAL_LEN) else {
        return Ok(false);
    };
    let seal = &line[at..];
    if !seal.starts_with(CRC_KEY) || !seal.ends_with(b"\"}") {
        return Ok(false);
    }
    let hex = &seal[CRC_KEY.len()..CRC_KEY.len() + 8];
    let written = std::str::from_utf8(hex)
        .ok()
        .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("its checksum is not eight hex digits")?;
    line.truncate(at);
    line.push(b'}');
    let now = crc32c::crc32c(line);
    if now != written {
        return Err(format!(
            "its checksum does not match its content (written {written:08x}, now {now:08x}): the line was changed after it was written"
        ));
    }
    Ok(true)
}

/// What reading a journal found besides its events.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadSummary {
    /// Events passed to the callback.
    pub events: u64,
    /// The seq of the last complete event, 0 if none.
    pub last_seq: u64,
    /// Length of the file up to the end of the last complete group.
    pub good_len: u64,
    /// Set when an incomplete tail was dropped: the 1-based line where it starts and its size.
    pub torn: Option<(u64, u64)>,
}

/// A line in the middle of the journal that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read `{path}`: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("`{path}` line {line}: {problem}")]
    Corrupt {
        path: PathBuf,
        line: u64,
        problem: String,
    },
}

/// Reads every complete group of `path` in order, calling `each` with the 1-based line number
/// and the event. A missing file reads as empty.
///
/// The tail is *torn* when the last line has no newline, or when the last group ends in an
/// event marked `more`: both are what an interrupted append leaves, and neither was ever
/// reported durable, so they are dropped (and reported in the summary). Any other unreadable
/// line, or a seq out of order, is corruption and an error naming the line.
pub fn read<E>(
    path: &Path,
    mut each: impl FnMut(u64, Event) -> Result<(), E>,
) -> Result<ReadSummary, ReadError>
where
    E: std::fmt::Display,
{
    let io_err = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let corrupt = |line, problem: String| ReadError::Corrupt {
        path: path.to_owned(),
        line,
        problem,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadSummary::default()),
        Err(e) => return Err(io_err(e)),
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut summary = ReadSummary::default();
    let mut line = Vec::new();
    let mut line_no = 0u64;
    let mut offset = 0u64;
    // Events of a group not yet closed, with their line numbers, and where the group started.
    let mut group: Vec<(u64, Event)> = Vec::new();
    let mut sealed = false;
    let mut group_start = (0u64, 0u64);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.last() != Some(&b'\n') {
            // An unterminated last line: an append cut short.
            if group.is_empty() {
                group_start = (line_no, offset);
            }
            summary.torn = Some((group_start.0, offset + n as u64 - group_start.1));
            group.clear();
            break;
        }
        offset += n as u64;
        line.pop();
        match verify(&mut line) {
            Ok(true) => sealed = true,
            Ok(false) if sealed => {
                return Err(corrupt(
                    line_no,
                    "it has no checksum, though the lines before it have".into(),
                ))
            }
            Ok(false) => {}
            Err(problem) => return Err(corrupt(line_no, problem)),
        }
        let event: Event = serde_json::from_slice(&line)
            .map_err(|e| corrupt(line_no, format!("not a valid event: {e}")))?;
        let expected = summary.last_seq + group.len() as u64 + 1;
        if summary.last_seq != 0 && event.seq != expected {
            return Err(corrupt(
                line_no,
                format!("seq {} where {expected} was expected", event.seq),
            ));
        }
        if group.is_empty() {
            group_start = (line_no, offset - n as u64);
        }
        let more = event.more;
        group.push((line_no, event));
        if !more {
            for (no, ev) in group.drain(..) {
                summary.last_seq = ev.seq;
                summary.events += 1;
                each(no, ev).map_err(|e| corrupt(no, e.to_string()))?;
            }
            summary.good_len = offset;
        }
    }
    if !group.is_empty() {
        summary.torn = Some((group_start.0, offset - group_start.1));
    }
    Ok(summary)
}
