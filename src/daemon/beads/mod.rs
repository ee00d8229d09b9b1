//! The daemon's side of beads interchange: a followed beads export file, and status write-back
//! through `bd`.
//!
//! - [`follow`]: the `[beads] watch` file, followed with notify.
//! - [`writeback`]: running the write-back commands, retried until they succeed.

pub mod follow;
pub mod writeback;
