//! `catalyst import` and `catalyst export`: through the running daemon when there is one (it
//! holds the workspace lock and owns the store), and on the store directly when there is not
//! (taking the lock, so a daemon cannot start meanwhile).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::client::{Client, ClientError};
use crate::daemon::store::Store;
use crate::daemon::Paths;
use crate::domain::model::Bead;
use crate::protocol::MAX_LINE;

use crate::domain::beads::import::{self, ImportReport};
use crate::domain::beads::jsonl;

/// How the work was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the daemon's control socket.
    Daemon,
    /// On the store, with no daemon running.
    Offline,
}

#[derive(Debug, thiserror::Error)]
pub enum InterchangeError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    #[error(transparent)]
    Store(#[from] crate::daemon::store::StoreError),
    #[error("bead `{0}` is too large to send to the daemon in one request (1 MiB)")]
    TooLarge(String),
}

/// What an import did.
#[derive(Debug)]
pub struct Imported {
    pub report: ImportReport,
    /// Lines skipped, by `_type`.
    pub skipped: BTreeMap<String, usize>,
    pub mode: Mode,
}

/// Requests are kept well under the daemon's line limit.
const BATCH_BYTES: usize = MAX_LINE / 2;

/// Imports a beads export file (`-`: stdin).
pub async fn import_file(
    paths: &Paths,
    socket: &Path,
    file: &Path,
) -> Result<Imported, InterchangeError> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|source| InterchangeError::Read {
        path: file.to_owned(),
        source,
    })?;
    let (parsed, bad_lines) = jsonl::parse(&text, &file.display().to_string());
    // A line that is not a bead is counted and the others go in: one odd line of a real
    // export must not keep the whole file out.
    let mut report = ImportReport {
        invalid: bad_lines
            .into_iter()
            .map(|e| (format!("{}:{}", e.source_name, e.line), e.problem))
            .collect(),
        ..ImportReport::default()
    };
    let (imported, mode) = match Client::connect(socket).await {
        Ok(client) => (import_through(client, parsed.beads).await?, Mode::Daemon),
        Err(ClientError::NotRunning(_)) => (import_offline(paths, parsed.beads)?, Mode::Offline),
        Err(e) => return Err(e.into()),
    };
    report.add(imported);
    Ok(Imported {
        report,
        skipped: parsed.skipped,
        mode,
    })
}

async fn import_through(
    mut client: Client,
    beads: Vec<Bead>,
) -> Result<ImportReport, InterchangeError> {
    let mut report = ImportReport::default();
    let mut batch = Vec::new();
    let mut size = 0;
    let mut iter = beads.into_iter().peekable();
    while let Some(bead) = iter.next() {
        let len = serde_json::to_string(&bead).map_or(0, |s| s.len()) + 1;
        if len > BATCH_BYTES {
            return Err(InterchangeError::TooLarge(bead.id.to_string()));
        }
        size += len;
        batch.push(bead);
        let full = iter.peek().is_none_or(|next| {
            size + serde_json::to_string(next).map_or(0, |s| s.len()) > BATCH_BYTES
        });
        if full {
            let part = client.import(std::mem::take(&mut batch)).await?;
            report.add(part.0);
            size = 0;
        }
    }
    Ok(report)
}

fn import_offline(paths: &Paths, beads: Vec<Bead>) -> Result<ImportReport, InterchangeError> {
    let _lock = crate::daemon::lock(paths)?;
    let (mut store, _) = Store::open(&paths.state)?;
    let (events, report) = import::plan(store.state(), beads);
    if !events.is_empty() {
        store.commit(events)?;
    }
    Ok(report)
}

/// Every bead of the store, in the order they entered it.
pub async fn export(paths: &Paths, socket: &Path) -> Result<(Vec<Bead>, Mode), InterchangeError> {
    match Client::connect(socket).await {
        Ok(mut client) => {
            let exported = client.export().await?;
            Ok((exported.beads, Mode::Daemon))
        }
        Err(ClientError::NotRunning(_)) => {
            if !paths.state.is_dir() {
                return Ok((Vec::new(), Mode::Offline));
            }
            let _lock = crate::daemon::lock(paths)?;
            let (store, _) = Store::open(&paths.state)?;
            Ok((store.state().beads().cloned().collect(), Mode::Offline))
        }
        Err(e) => Err(e.into()),
    }
}
