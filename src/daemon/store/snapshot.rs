//! Snapshots: the whole state in beads export format, so that start-up replays only the
//! journal written since.
//!
//! `snapshot.jsonl` starts with a header line `{"_type":"catalyst.snapshot","version":1,
//! "seq":N,"beads":COUNT}` and continues with one bead per line, exactly as `bd export` writes
//! them. It is written atomically; the journal is then rotated.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::daemon::fsutil;
use crate::domain::model::Bead;

use crate::domain::state::State;

pub const HEADER_TYPE: &str = "catalyst.snapshot";
pub const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    #[serde(rename = "_type")]
    pub kind: String,
    pub version: u32,
    /// The seq of the last event folded into the snapshot.
    pub seq: u64,
    /// Number of bead lines that follow.
    pub beads: u64,
    /// The store's id (see [`State::store_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// What the agents spent (see [`State::spending`]); a snapshot without it gets the
    /// beads' total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spending: Option<crate::domain::budget::Spending>,
    /// Where each webhook's notifier is (see [`State::notified`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub notified: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read snapshot `{path}`: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("snapshot `{path}` line {line}: {problem}")]
    Corrupt {
        path: PathBuf,
        line: u64,
        problem: String,
    },
}

/// Writes `state` to `path` atomically.
pub fn write(path: &Path, state: &State) -> io::Result<()> {
    fsutil::write_atomic_with(path, |w| {
        let header = Header {
            kind: HEADER_TYPE.into(),
            version: VERSION,
            seq: state.seq(),
            beads: state.len() as u64,
            store: state.store_id().map(str::to_owned),
            spending: Some(state.spending().clone()),
            notified: state.notified().clone(),
        };
        serde_json::to_writer(&mut *w, &header).map_err(io::Error::other)?;
        w.write_all(b"\n")?;
        for bead in state.beads() {
            serde_json::to_writer(&mut *w, bead).map_err(io::Error::other)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Loads the snapshot at `path` into a new state (readiness computed once at the end), or
/// `None` when there is no snapshot yet. A snapshot is written atomically, so anything wrong
/// with it is corruption and an error.
pub fn read(path: &Path) -> Result<Option<State>, SnapshotError> {
    let io_err = |source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    };
    let corrupt = |line, problem: String| SnapshotError::Corrupt {
        path: path.to_owned(),
        line,
        problem,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    let file_len = file.metadata().map_err(io_err)?.len();
    let mut lines = BufReader::with_capacity(1 << 20, file).split(b'\n');
    let first = lines
        .next()
        .ok_or_else(|| corrupt(1, "empty file, no header".into()))?
        .map_err(io_err)?;
    let header: Header =
        serde_json::from_slice(&first).map_err(|e| corrupt(1, format!("bad header: {e}")))?;
    if header.kind != HEADER_TYPE || header.version != VERSION {
        return Err(corrupt(
            1,
            format!(
                "header says `{}` version {}, expected `{HEADER_TYPE}` version {VERSION}",
                header.kind, header.version
            ),
        ));
    }
    let mut state = State::default();
    // The header's count, bounded by what the file could hold (a bead line is longer than 64
    // bytes), so a damaged header cannot ask for more memory than the file justifies.
    state.reserve(usize::try_from(header.beads.min(file_len / 64)).unwrap_or(0));
    let mut count = 0u64;
    for (i, line) in lines.enumerate() {
        let line = line.map_err(io_err)?;
        let line_no = i as u64 + 2;
        let bead: Bead =
            serde_json::from_slice(&line).map_err(|e| corrupt(line_no, e.to_string()))?;
        state
            .load_bead(bead)
            .map_err(|e| corrupt(line_no, e.to_string()))?;
        count += 1;
    }
    if count != header.beads {
        return Err(corrupt(
            count + 1,
            format!("{count} beads where the header promises {}", header.beads),
        ));
    }
    state.recompute_readiness();
    state.set_seq(header.seq);
    state.set_store_id(header.store);
    state.set_spending(header.spending);
    state.set_notified(header.notified);
    Ok(Some(state))
}
