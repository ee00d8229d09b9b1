//! Following the `[beads] watch` file: whenever it changes (notify, no polling) it is read
//! whole and its beads are handed to the engine, which takes the new labelled ones as work
//! (see `Engine::ingest_watched`). A line caught mid-write is skipped with a warning; the
//! write's own notification brings the complete file.

use std::path::{Path, PathBuf};

use tokio::sync::{mpsc, watch};

use crate::domain::model::Bead;

/// The followed file's beads, as read after a change.
#[derive(Debug)]
pub struct BeadsFileRead(pub Vec<Bead>);

/// Starts following `file`. Returns the watcher to keep alive, or `None` (logged) when the
/// file's folder cannot be watched.
pub fn start<T: From<BeadsFileRead> + Send + 'static>(
    file: PathBuf,
    engine: mpsc::Sender<T>,
) -> Option<crate::daemon::fswatch::Watching> {
    let (tx, mut changed) = watch::channel(());
    let watcher = crate::daemon::fswatch::file_changes(&file, tx);
    if watcher.is_none() {
        tracing::error!(file = %file.display(), "cannot watch the beads file (does its folder exist?); restart the daemon once it does");
        return None;
    }
    tokio::spawn(async move {
        loop {
            if let Some(beads) = read(&file) {
                if engine.send(BeadsFileRead(beads).into()).await.is_err() {
                    return;
                }
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    });
    watcher
}

/// The beads in `file`; `None` when it cannot be read (not there yet is not an error).
fn read(file: &Path) -> Option<Vec<Bead>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read the beads file");
            return None;
        }
    };
    let (parsed, errors) = crate::domain::beads::jsonl::parse(&text, &file.display().to_string());
    for e in errors {
        tracing::warn!(error = %e, "skipped a line of the beads file");
    }
    Some(parsed.beads)
}
