//! Errors of the git layer, and the commit id recorded in journal events.

use std::fmt;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::domain::id::BeadId;

/// What went wrong in the git layer, saying what was being done to which bead, path or ref.
///
/// The variants other than [`GitError::Git`] and [`GitError::Io`] are conditions the daemon may
/// want to tell a person about by name (a missing target branch, a worktree a person moved);
/// the two generic ones carry a sentence built where the failure happened.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// A libgit2 call failed; `action` says what catalyst was doing, e.g.
    /// "creating branch `catalyst/cat-1` at `main`".
    #[error("{action}: {}", source.message())]
    Git { action: String, source: git2::Error },
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The workspace is a bare repository: there is no working directory to merge into.
    #[error("`{path}` is a bare git repository; catalyst needs a working directory")]
    Bare { path: PathBuf },
    /// The target branch (e.g. `main`) does not exist as a local branch.
    #[error("target branch `{target}` does not exist")]
    NoTarget { target: String },
    /// The bead's branch `catalyst/<bead>` does not exist (never created, or removed).
    #[error("bead `{bead}` has no branch `{branch}`")]
    NoBranch { bead: BeadId, branch: String },
    /// The bead's branch exists but this store did not make it: a store started over (the
    /// state folder removed or reset) numbers its beads from the start again, and building
    /// on the old branch would bring the old bead's work into the new one.
    #[error(
        "branch `{branch}` was not made by this store ({}): it may hold the work of a bead of an earlier store; rename it (`git branch -m {branch} old/{branch}`) or delete it, then `catalyst ctl resume`",
        store.as_deref().map_or_else(|| "it carries no store id".to_owned(), |s| format!("it was made by store {s}"))
    )]
    NotOurs {
        branch: String,
        store: Option<String>,
    },
    /// The agent left files larger than the daemon commits (`max_file_bytes`).
    #[error(
        "the agent left {} larger than `max_file_bytes` ({max} bytes), which the daemon does not commit: {}; delete them or keep them out of the repository (`.gitignore`)",
        if files.len() == 1 { "a file" } else { "files" },
        files.iter().map(|(p, n)| format!("`{}` ({n} bytes)", p.display())).collect::<Vec<_>>().join(", ")
    )]
    TooBig {
        files: Vec<(PathBuf, u64)>,
        max: u64,
    },
    /// The bead's worktree folder is missing or is not a git worktree.
    #[error("bead `{bead}` has no git worktree at `{path}`")]
    NoWorktree { bead: BeadId, path: PathBuf },
    /// A valid git worktree with the bead's name lives outside catalyst's worktrees folder;
    /// catalyst does not take over or delete a worktree it did not make.
    #[error("a git worktree named `{bead}` already exists at `{path}`, outside catalyst's worktrees folder")]
    WorktreeElsewhere { bead: BeadId, path: PathBuf },
    /// Someone switched the bead's worktree away from its branch (another branch or a detached
    /// HEAD); committing there would put the bead's work where the merge never looks.
    #[error("worktree `{path}` of bead `{bead}` is on `{head}`, not on branch `catalyst/{bead}`")]
    WrongHead {
        bead: BeadId,
        path: PathBuf,
        head: String,
    },
    /// The target branch moved between the ancestry check and the fast-forward (a person
    /// committed at that instant); nothing was rewritten, and a retry decides again. If the
    /// target was checked out, its files may already show the bead's changes (the person's
    /// commit is safe in history; the rare race is reported rather than papered over).
    #[error(
        "target branch `{target}` moved while bead `{bead}` was being merged into it; try again"
    )]
    TargetMoved { bead: BeadId, target: String },
    #[error("invalid commit id `{shown}`: expected 40 or 64 hexadecimal digits")]
    InvalidCommitId { shown: String },
}

/// Attaches what was being done to a libgit2 error.
pub(super) trait Context<T> {
    fn ctx(self, action: impl FnOnce() -> String) -> Result<T, GitError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn ctx(self, action: impl FnOnce() -> String) -> Result<T, GitError> {
        self.map_err(|source| GitError::Git {
            action: action(),
            source,
        })
    }
}

impl GitError {
    /// Whether trying again later may succeed without anyone changing anything: the target
    /// moved at the same instant, or a git lock file is held (by a git command running now,
    /// or left by one that was killed, which a person must remove).
    pub fn is_transient(&self) -> bool {
        match self {
            GitError::TargetMoved { .. } => true,
            GitError::Git { source, .. } => source.code() == git2::ErrorCode::Locked,
            _ => false,
        }
    }

    pub(super) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> GitError {
        let path = path.into();
        move |source| GitError::Io {
            action,
            path,
            source,
        }
    }
}

/// A commit id as lowercase hex, as it is written into journal events.
///
/// A newtype rather than [`git2::Oid`] so that events stay plain data (serde, no libgit2 types)
/// and a malformed id in a journal line is refused when it is read.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CommitId(String);

impl CommitId {
    /// Validates a full commit id (40 hex digits for SHA-1, 64 for SHA-256); abbreviated ids
    /// are refused because they can become ambiguous as the repository grows.
    pub fn parse(s: &str) -> Result<CommitId, GitError> {
        if matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(CommitId(s.to_ascii_lowercase()))
        } else {
            Err(GitError::InvalidCommitId {
                shown: s.chars().take(80).flat_map(char::escape_default).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(super) fn oid(&self) -> Result<git2::Oid, GitError> {
        git2::Oid::from_str(&self.0).ctx(|| format!("reading commit id `{}`", self.0))
    }
}

impl From<git2::Oid> for CommitId {
    fn from(oid: git2::Oid) -> CommitId {
        CommitId(oid.to_string())
    }
}

impl TryFrom<String> for CommitId {
    type Error = GitError;
    fn try_from(s: String) -> Result<CommitId, GitError> {
        CommitId::parse(&s)
    }
}

impl From<CommitId> for String {
    fn from(id: CommitId) -> String {
        id.0
    }
}

impl std::str::FromStr for CommitId {
    type Err = GitError;
    fn from_str(s: &str) -> Result<CommitId, GitError> {
        CommitId::parse(s)
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommitId({})", self.0)
    }
}
