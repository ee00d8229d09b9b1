//! beads interchange: reading and writing beads export files (`bd export`'s JSONL), importing
//! them into the store and exporting the store, and following a beads export file so that
//! issues a person files in beads become catalyst's work, with their final status written back
//! through `bd`.
//!
//! - [`jsonl`]: export lines to beads and back; `_type` lines other than issues are skipped.
//! - [`import`]: the pure plan of an import (which beads are new, unchanged, in conflict).
//! - [`interchange`]: `catalyst import` / `catalyst export`, through the daemon when it runs
//!   (it holds the store's lock), on the store directly when it does not.
//! - [`follow`]: the `[beads] watch` file, followed with notify.
//! - [`writeback`]: running the write-back commands, retried until they succeed.

pub mod import;
pub mod jsonl;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The key under a bead's `metadata` that marks it as taken from the followed beads file, and
/// remembers which final status was written back (`{"source": …, "written": …}`).
pub const SYNC_KEY: &str = "catalyst_beads";

/// `[beads]` in `config.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BeadsConfig {
    /// A beads export file to follow (relative paths are from the workspace). Changing it
    /// needs a restart of the daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<PathBuf>,
    /// Issues with this label are taken as work.
    pub label: String,
    /// Writes back a `closed` status; `{id}`, `{status}` and `{reason}` are filled in.
    pub close_command: Vec<String>,
    /// Writes back any other final status (`blocked`).
    pub update_command: Vec<String>,
    /// Seconds before a failed write-back runs again (doubling, up to ten minutes).
    pub retry_secs: u64,
}

impl Default for BeadsConfig {
    fn default() -> Self {
        BeadsConfig {
            watch: None,
            label: "catalyst".into(),
            close_command: ["bd", "close", "{id}", "--reason", "{reason}"]
                .map(str::to_owned)
                .to_vec(),
            update_command: ["bd", "update", "{id}", "--status", "{status}"]
                .map(str::to_owned)
                .to_vec(),
            retry_secs: 10,
        }
    }
}

impl BeadsConfig {
    /// Refuses what cannot work, at load time rather than when a bead closes.
    pub fn check(&self) -> Result<(), BeadsConfigError> {
        if self.label.trim().is_empty() {
            return Err(BeadsConfigError::EmptyLabel);
        }
        for (name, cmd) in [
            ("close_command", &self.close_command),
            ("update_command", &self.update_command),
        ] {
            if cmd.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(BeadsConfigError::NoProgram(name));
            }
        }
        if self.retry_secs == 0 {
            return Err(BeadsConfigError::RetrySecs);
        }
        Ok(())
    }
}

/// Why a `[beads]` table is refused: each names its key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BeadsConfigError {
    #[error("`beads.label` must not be empty")]
    EmptyLabel,
    /// A command (`close_command`, `update_command`) with no program to run.
    #[error("`beads.{0}` needs a program")]
    NoProgram(&'static str),
    #[error("`beads.retry_secs` must be at least 1")]
    RetrySecs,
}
