//! How `catalyst ctl` and the commands it runs (`diff`, `logs`) fail, and with which exit code.

use std::path::PathBuf;

use crate::cli::client::ClientError;
use crate::cli::live::WatchError;

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot read `{}`: {source}", path.display())]
    ReadInput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Watch(WatchError),
    /// The request cannot be done, for a reason about what it names (a bead without a branch):
    /// exit 1, as when the daemon refuses one.
    #[error("{0}")]
    Refused(String),
    /// Something failed on this side (reading the repository or the config): exit 2.
    #[error("{0}")]
    Failed(String),
    /// The command line asks for something that cannot be meant: exit 2, as clap's errors.
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<WatchError> for CtlError {
    fn from(e: WatchError) -> CtlError {
        match e {
            WatchError::Client(c) => CtlError::Client(c),
            other => CtlError::Watch(other),
        }
    }
}
