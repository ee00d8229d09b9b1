//! How the engine's handlers fail. A failing step is not a failing engine: what goes wrong in
//! a step is recorded as its outcome; these are the engine's own failures.

use crate::daemon::store::{ApplyError, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The journal could not be written (a full disk, an I/O error): nothing was recorded,
    /// so the input may be handled again once it can be.
    #[error("cannot write the journal: {0}")]
    Unwritten(#[source] StoreError),
    /// The engine built events the state refuses: a bug, logged where it happened.
    #[error("the engine built events that do not apply: {0}")]
    Refused(#[source] ApplyError),
}

/// Config, prompts or formulas that cannot be loaded; the old ones stay in force.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Config(#[from] crate::domain::config::ConfigError),
    #[error(transparent)]
    Prompts(#[from] crate::domain::prompt::PromptError),
    #[error(transparent)]
    Sandbox(#[from] crate::daemon::sandbox::SandboxError),
    /// Every formula that does not load, `; `-separated.
    #[error("{0}")]
    Formulas(String),
    /// The task reading them died.
    #[error("the reload task failed: {0}")]
    Task(String),
}
