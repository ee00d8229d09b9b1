//! What can go wrong before or around an attempt. The texts end up in the journal (a failed
//! attempt's `exit` and reason), so they say what was being done and to what.

use crate::daemon::worktree::GitError;
use crate::domain::id::BeadId;
use crate::domain::prompt::PromptError;
use crate::domain::unavailable::Unavailable;

/// A job could not be built from the state: the attempt fails before anything runs.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("bead `{0}` is gone")]
    BeadGone(BeadId),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The configured agent profile is unusable.
    #[error(transparent)]
    Profile(#[from] crate::domain::config::UnknownProfile),
}

impl JobError {
    /// When the failure is not the bead's: a profile the config names but does not define.
    pub fn unavailable(&self) -> Option<Unavailable> {
        match self {
            JobError::Profile(_) => Some(Unavailable::Config),
            JobError::BeadGone(_) | JobError::Prompt(_) => None,
        }
    }
}

/// A git operation run on a blocking thread failed, or its thread did.
#[derive(Debug, thiserror::Error)]
pub enum GitTaskError {
    #[error("git task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("git task panicked: {0}")]
    Panicked(String),
    #[error(transparent)]
    Git(#[from] GitError),
}
