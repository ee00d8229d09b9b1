//! The one error type of the stub, and the exit code each kind maps to.

use std::io;
use std::path::PathBuf;

/// Why an invocation could not do what its flags and scenario asked.
///
/// Every kind ends the invocation with exit code 1, as Claude Code does for a bad command line;
/// what differs is the message. Command-line mistakes are worded like Claude Code's own (`error: unknown option
/// '--foo'`) so a profile that would fail against the real CLI fails the same way here; the
/// others name the stub, since they are mistakes in a test's scenario, not in catalyst.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line mistake, already worded as Claude Code words it.
    #[error("{0}")]
    Usage(String),
    #[error("stub-claude: cannot read the scenario `{path}`: {source}")]
    ScenarioRead { path: PathBuf, source: io::Error },
    #[error("stub-claude: cannot parse the scenario `{path}`: {source}")]
    ScenarioParse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("stub-claude: the scenario `{path}` is invalid: {message}")]
    ScenarioInvalid { path: PathBuf, message: String },
    #[error("stub-claude: cannot update the state file `{path}`: {message}")]
    State { path: PathBuf, message: String },
    #[error("Error processing --settings: {0}")]
    Settings(String),
    /// A response asked for something the stub refuses or failed to do (a write outside the
    /// worktree, a file that never appeared).
    #[error("stub-claude: {0}")]
    Action(String),
}
