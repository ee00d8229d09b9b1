//! Following the journal's events, for the control socket's `subscribe` and the web's
//! `/events`: a [`Follower`] hands out the events after the last one it gave, up to the seq
//! the engine published (durable), filtered by bead and type. Recent events come from the
//! store's in-memory [`Feed`], shared by every follower; a follower that asks for older events,
//! or fell further behind than the feed keeps, reads them from the journal files (the segments
//! compaction rotated out, then the live journal) until it reaches what the feed holds. A slow
//! follower never holds up the engine and never misses an event.

use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use crate::daemon::store::feed::{Feed, Line};
use crate::daemon::store::journal::{seq_of, unseal};
use crate::daemon::store::Segments;

/// How many events one read from the journal files hands out at most, so a follower that asks
/// for the whole history gets it in pieces instead of all in memory.
const FILE_BATCH: usize = 4096;

/// Which events a follower wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only events about this bead (its steps included).
    pub bead: Option<String>,
    /// Only these event types.
    pub types: Option<Vec<String>>,
}

impl From<&crate::protocol::SubscribeParams> for Filter {
    fn from(p: &crate::protocol::SubscribeParams) -> Filter {
        Filter {
            bead: p.bead.clone(),
            types: p.types.clone(),
        }
    }
}

impl Filter {
    fn is_empty(&self) -> bool {
        self.bead.is_none() && self.types.is_none()
    }

    /// Whether the event `line` passes the filter.
    pub fn passes(&self, line: &str) -> bool {
        self.is_empty() || wanted(line, 0, self.bead.as_deref(), self.types.as_deref())
    }
}

/// Where the events are: the feed, the published seq and the journal's files.
#[derive(Clone, Debug)]
pub struct Journal {
    pub feed: Arc<Feed>,
    pub seq: watch::Receiver<u64>,
    pub live: PathBuf,
    pub segments: Arc<Segments>,
}

/// One follower of the journal (see the module documentation).
pub struct Follower {
    journal: Journal,
    filter: Filter,
    /// The last seq handed out or passed over.
    last: u64,
}

impl Follower {
    /// A follower that hands out the events after `since`.
    pub fn new(journal: Journal, since: u64, filter: Filter) -> Follower {
        Follower {
            journal,
            filter,
            last: since,
        }
    }

    /// The last seq handed out or passed over.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The last durable seq.
    pub fn durable(&self) -> u64 {
        *self.journal.seq.borrow()
    }

    /// The next wanted events after the last one handed out, up to the last durable seq;
    /// empty when there are none yet.
    pub async fn read(&mut self) -> io::Result<Vec<Line>> {
        let upto = self.durable();
        let mut out = Vec::new();
        while self.last < upto && out.is_empty() {
            let mut lines = Vec::new();
            if !self.journal.feed.read(self.last, upto, &mut lines) {
                let (after, journal) = (self.last, self.journal.clone());
                lines = tokio::task::spawn_blocking(move || from_files(&journal, after, upto))
                    .await
                    .map_err(io::Error::other)??;
                if lines.is_empty() {
                    // The files end before `upto` (cannot happen while the engine runs):
                    // give up on what is missing rather than read again and again.
                    self.last = upto;
                }
            }
            if let Some((seq, _)) = lines.last() {
                self.last = *seq;
            }
            out.extend(
                lines
                    .into_iter()
                    .filter(|(_, line)| self.filter.passes(line)),
            );
        }
        Ok(out)
    }

    /// Waits until the engine publishes a new durable seq; `false` once it is gone.
    pub async fn changed(&mut self) -> bool {
        self.journal.seq.changed().await.is_ok()
    }
}

/// Up to [`FILE_BATCH`] events after `after` and at most `upto`, from the rotated segments
/// and the live journal.
fn from_files(journal: &Journal, after: u64, upto: u64) -> io::Result<Vec<Line>> {
    let mut out = Vec::new();
    let segments = &journal.segments;
    let rotated = &segments.rotated;
    for (i, (_, segment)) in rotated.iter().enumerate() {
        let next_first = rotated
            .get(i + 1)
            .map_or(segments.live_first, |(first, _)| *first);
        // Every event of this segment is at most `after`.
        if next_first <= after + 1 {
            continue;
        }
        read_lines(segment, 0, after, upto, &mut out)?;
        if out.len() >= FILE_BATCH {
            return Ok(out);
        }
    }
    let start = line_before(&mut std::fs::File::open(&journal.live)?, after)?;
    read_lines(&journal.live, start, after, upto, &mut out)?;
    Ok(out)
}

/// Reads the events after `after` and at most `upto` of the journal file `path` from byte
/// `start`, until `out` holds [`FILE_BATCH`]. A line not yet complete ends the read.
fn read_lines(
    path: &Path,
    start: u64,
    after: u64,
    upto: u64,
    out: &mut Vec<Line>,
) -> io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut reader = io::BufReader::new(file);
    let mut line = String::new();
    while out.len() < FILE_BATCH {
        line.clear();
        if reader.read_line(&mut line)? == 0 || !line.ends_with('\n') {
            break;
        }
        let Some(seq) = seq_of(line.as_bytes()) else {
            continue;
        };
        if seq > upto {
            break;
        }
        if seq > after {
            let (event, _) = unseal(line.trim_end());
            out.push((seq, Arc::from(event.as_ref())));
        }
    }
    Ok(())
}

/// How far back from the end [`line_before`] reads at a time.
const SCAN_BLOCK: u64 = 64 * 1024;

/// The offset of a line of the journal `file` at or before the first event after `since`:
/// blocks are read backwards from the end, and the first whole line starting in a block is
/// looked at until one has a seq of at most `since`. Lines between it and the first event
/// wanted are skipped, so only a block or two is read for a recent `since`; a line that does
/// not start `{"seq":N` is passed over, and the worst case is the journal's start.
fn line_before(file: &mut std::fs::File, since: u64) -> io::Result<u64> {
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
mod tests;
