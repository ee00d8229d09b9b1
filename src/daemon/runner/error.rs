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

/// An attempt's prompt could not be rendered: the attempt fails before its agent starts.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The blocking task that renders it died.
    #[error("the prompt's render failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// An attempt's order could not be handed out to the workers of its model (see
/// [`super::Remote::send`]). The source is the bus's own error, whichever transport it has.
#[derive(Debug, thiserror::Error)]
#[error("order `{dispatch}` to the workers of model `{model}`: {source}")]
pub struct HandOutError {
    pub dispatch: String,
    pub model: String,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The work of a step that ran in a worktree of its own beside others could not be merged
/// into its bead's branch: the attempt fails with this as its reason.
#[derive(Debug, thiserror::Error)]
pub enum MergeBackError {
    #[error("its work conflicts with work of steps that ran beside it, in {}; it runs again on top of theirs", .files.join(", "))]
    Conflict { files: Vec<String> },
    #[error("cannot merge its work into the bead's branch: {0}")]
    Git(#[source] GitTaskError),
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
