//! The store: beads as the fold of an fsynced journal, with snapshots and readiness.
//!
//! Files under the state folder (`<workspace>/.catalyst/`):
//! - `journal.jsonl`: the live journal segment (see [`journal`]).
//! - `snapshot.jsonl`: the state at some seq (see [`snapshot`]).
//! - `journal.<first-seq>.jsonl`: older segments, rotated out by compaction and kept for
//!   subscribers that replay from an old seq.
//!
//! Opening loads the snapshot and replays the journal events after its seq. Compaction writes a
//! snapshot first and rotates the journal second, so a crash between the two leaves a journal
//! whose events the snapshot already holds; replay skips them by seq.

pub mod feed;
pub mod journal;
pub mod snapshot;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::daemon::fsutil;
use crate::domain::event::{Event, EventBody};

pub use crate::domain::state::{ApplyError, State};

/// A new store's id: 16 hex digits from the system's random source (the time and pid when it
/// cannot be read).
pub fn new_store_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    let n = match random {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos ^ (u64::from(std::process::id()) << 40)
        }
    };
    format!("{n:016x}")
}
pub use journal::{Journal, ReadError, ReadSummary};
pub use snapshot::SnapshotError;

pub const JOURNAL_FILE: &str = "journal.jsonl";
pub const SNAPSHOT_FILE: &str = "snapshot.jsonl";

/// A start that replays at least this many journal events compacts the store before serving
/// (see [`Store::compact`]), so the next start loads a snapshot.
pub const COMPACT_AFTER: u64 = 10_000;

/// The journal files a store's events are in (see [`Store::segments`]).
#[derive(Clone, Debug, Default)]
pub struct Segments {
    /// The segments compaction rotated out, oldest first, each with its first event's seq.
    pub rotated: Vec<(u64, PathBuf)>,
    /// The seq of the live journal's first event (the next event's, while it is empty).
    pub live_first: u64,
}

/// The journal segments compaction rotated out of `dir`, oldest first, each with the seq of
/// its first event (from its name, `journal.<first-seq>.jsonl`).
pub fn segments(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let first = name.strip_prefix("journal.")?.strip_suffix(".jsonl")?;
            Some((first.parse().ok()?, path))
        })
        .collect();
    found.sort();
    found
}
/// The file [`Store::probe`] writes and removes.
const PROBE_FILE: &str = ".write-probe";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error(transparent)]
    Journal(#[from] ReadError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The events were refused before anything was written.
    #[error(transparent)]
    Refused(#[from] ApplyError),
    /// A blocking task working on the store did not finish (it panicked).
    #[error("a store task failed: {0}")]
    Task(String),
}

/// Why replay stopped at an event.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("seq {seq} does not follow {last} (the snapshot's or the previous event's)")]
    OutOfOrder { seq: u64, last: u64 },
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl StoreError {
    fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
        move |source| StoreError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }
}

/// What opening the store found, for the start-up log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// The seq of the snapshot loaded, if there was one.
    pub snapshot_seq: Option<u64>,
    /// Journal events applied on top of the snapshot.
    pub replayed: u64,
    /// A torn tail that was dropped: its first line and size in bytes.
    pub torn: Option<(u64, u64)>,
}

/// The journal and the state it folds to. Every change goes through [`Store::commit`].
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    journal: Journal,
    state: State,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<(Store, OpenReport), StoreError> {
        fsutil::create_dir_durable(dir).map_err(StoreError::io("cannot create", dir))?;
        let mut report = OpenReport::default();
        let mut state = snapshot::read(&dir.join(SNAPSHOT_FILE))?.unwrap_or_default();
        let base = state.seq();
        if base > 0 {
            report.snapshot_seq = Some(base);
        }
        let journal_path = dir.join(JOURNAL_FILE);
        let summary = journal::read(&journal_path, |_, event| {
            if event.seq <= base {
                return Ok(());
            }
            if event.seq != state.seq() + 1 {
                return Err(ReplayError::OutOfOrder {
                    seq: event.seq,
                    last: state.seq(),
                });
            }
            report.replayed += 1;
            state.apply(event).map_err(ReplayError::from)
        })?;
        if let Some((line, bytes)) = summary.torn {
            tracing::warn!(
                path = %journal_path.display(),
                line,
                bytes,
                "dropped an incomplete write at the end of the journal"
            );
            report.torn = summary.torn;
        }
        let next = state.seq().max(summary.last_seq) + 1;
        let journal = Journal::open(&journal_path, next, summary.good_len)
            .map_err(StoreError::io("cannot open", &journal_path))?;
        Ok((
            Store {
                dir: dir.to_owned(),
                journal,
                state,
            },
            report,
        ))
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn journal_path(&self) -> &Path {
        self.journal.path()
    }

    /// Validates a group of events against the state, writes them with one fsync, then applies
    /// them. Returns the events as written (with seq and ts). If the group is refused or the
    /// write fails, neither the journal nor the state changes.
    pub fn commit(&mut self, bodies: Vec<EventBody>) -> Result<Vec<Event>, StoreError> {
        self.state.check_group(&bodies)?;
        let events = self
            .journal
            .append(bodies, crate::daemon::clock::now())
            .map_err(StoreError::io("cannot append to", self.journal.path()))?;
        for event in &events {
            if let Err(e) = self.state.apply(event.clone()) {
                // check_group accepted the group, so this is a bug in the fold, not bad input.
                tracing::error!(seq = event.seq, error = %e, "checked event failed to apply");
            }
        }
        Ok(events)
    }

    /// Hands every event committed from now on to `feed` as well (see [`feed`]).
    pub fn feed_into(&mut self, feed: std::sync::Arc<feed::Feed>) {
        self.journal.feed_into(feed);
    }

    /// Whether commits write without waiting for their fsync until [`Store::sync`]. The state
    /// applies deferred commits at once: whoever defers holds back every effect of them until
    /// the sync.
    pub fn defer_sync(&mut self, deferred: bool) {
        self.journal.defer_sync(deferred);
    }

    /// Makes every commit so far durable with one fsync.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.journal
            .sync()
            .map_err(StoreError::io("cannot sync", self.journal.path()))
    }

    /// How many times the live journal was fsynced since it was opened.
    pub fn syncs(&self) -> u64 {
        self.journal.syncs()
    }

    /// Where the events are: the segments compaction rotated out, and where the live journal
    /// starts. Compaction runs only before the daemon serves, so this holds for its lifetime.
    pub fn segments(&self) -> Segments {
        Segments {
            rotated: segments(&self.dir),
            live_first: self.journal.first_seq(),
        }
    }

    /// Checks that the state folder takes a durable write again after a failed append: writes,
    /// syncs and removes a small file next to the journal. The engine's storage retry timer
    /// calls it before handling again what it could not record.
    pub fn probe(&self) -> Result<(), StoreError> {
        Store::probe_dir(&self.dir)
    }

    /// [`Store::probe`] of the state folder `dir`, for a task that does not hold the store.
    pub fn probe_dir(dir: &Path) -> Result<(), StoreError> {
        let path = dir.join(PROBE_FILE);
        let written = fsutil::write_atomic(&path, &[b'\n'; 4096]);
        let _ = fs::remove_file(&path);
        written.map_err(StoreError::io("cannot write", &path))
    }

    /// Writes a snapshot of the current state and starts a new journal segment. The old
    /// segment is kept as `journal.<first-seq>.jsonl`.
    pub fn compact(&mut self) -> Result<(), StoreError> {
        let snap = self.dir.join(SNAPSHOT_FILE);
        snapshot::write(&snap, &self.state).map_err(StoreError::io("cannot write", &snap))?;
        let live = self.dir.join(JOURNAL_FILE);
        let first = self.state.seq() + 1;
        let archived = self
            .dir
            .join(format!("journal.{:012}.jsonl", self.journal.first_seq()));
        if fs::metadata(&live).is_ok_and(|m| m.len() > 0) {
            fs::rename(&live, &archived).map_err(StoreError::io("cannot rotate", &live))?;
        }
        self.journal =
            Journal::open(&live, first, 0).map_err(StoreError::io("cannot open", &live))?;
        fsutil::sync_dir(&self.dir).map_err(StoreError::io("cannot sync", &self.dir))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
