//! What the engine's blocking tasks report back (see [`super::Input`]): the inbox's file
//! reads, the merge of a bead into the target, and start-up recovery's look at the disk. The
//! modules that start those tasks and the engine's input both use these types; they use
//! nothing of either.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

use crate::daemon::runner::GitTaskError;
use crate::daemon::worktree::MergeOutcome;
use crate::domain::id::BeadId;
use crate::protocol::BeadInput;

/// The largest inbox file read: a file of many beads, each at most
/// [`crate::domain::model::MAX_BEAD_BYTES`].
pub const MAX_INBOX_FILE: u64 = 16 << 20;

/// An inbox file as the reading task found it.
#[derive(Debug)]
pub struct InboxFile {
    pub path: PathBuf,
    /// `None` for a file the inbox ignores (hidden, `.tmp`, gone or not a file).
    pub read: Option<FileRead>,
}

/// A bead file's name, identity (see `inbox_identity`) and beads.
#[derive(Debug)]
pub struct FileRead {
    pub name: OsString,
    pub identity: Option<String>,
    pub beads: Result<Vec<BeadInput>, FileError>,
}

/// Why a bead file is refused before its beads are looked at; the text goes in its `.why`.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("the file name is not UTF-8")]
    NotUtf8Name,
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    #[error("it is a symbolic link; an inbox file must be the file itself")]
    Link,
    #[error("it is not a regular file")]
    NotRegular,
    #[error("it is {0} bytes; an inbox file may be at most {max}", max = MAX_INBOX_FILE)]
    TooBig(u64),
    /// Where the error is, without the text there.
    #[error("not valid TOML: {0}")]
    Toml(String),
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The fields are not a bead's (the protocol's own message).
    #[error("{0}")]
    Fields(String),
    #[error("not a bead")]
    NotABead,
}

/// An inbox file is done with (removed, moved aside, or left for later).
#[derive(Debug)]
pub struct InboxSettled(pub PathBuf);

/// Why the daemon's fast-forward of the target failed.
#[derive(Debug)]
pub struct MergeFailure {
    pub error: GitTaskError,
    /// Trying again later may work (the target moved at that instant, a git lock is held):
    /// the bead waits instead of being blocked.
    pub transient: bool,
}

/// What a merge task reports.
#[derive(Debug)]
pub enum MergeReport {
    /// The merge's marker could not be written, so no merge started.
    NotStarted,
    /// The task died (a panic in git); which bead it picked is unknown.
    Failed(GitTaskError),
    /// The merge of a bead's branch ran.
    Ran(MergeRan),
}

/// A merge that ran, with what the engine needs to judge its outcome.
#[derive(Debug)]
pub struct MergeRan {
    pub work: BeadId,
    pub step: BeadId,
    pub result: Result<MergeOutcome, MergeFailure>,
    /// The target's tip when the merge step's attempt began (its run folder's `target`),
    /// read when the branch was not up to date.
    pub target_at_start: Option<String>,
    /// The branch's tip, read when it was already merged.
    pub head: Option<String>,
    /// The files that kept the daemon from merging the target into the branch itself.
    pub conflicts: Vec<String>,
    /// The daemon merged the target into the branch and the formula's `recheck` steps run
    /// again before the target moves.
    pub rechecking: bool,
}

/// What the recovery task found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The starting commit of each interrupted step's attempt, from its run folder.
    pub bases: HashMap<BeadId, String>,
    /// Closed beads whose worktree and branch can go.
    pub sweep: Vec<BeadId>,
}
