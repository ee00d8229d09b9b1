//! Failures no retry of the step can fix: the agent CLI is not logged in or its key is refused,
//! its API cannot be reached, it cannot run as configured, or the daemon cannot prepare the
//! step. None is the bead's fault, so none spends an attempt: the router requeues the step and
//! the engine pauses dispatching (the agent's steps, or every step for a preparation failure)
//! with backoff until the pause ends or a person runs `ctl resume` (docs/routing.md). How an
//! agent's output is read for them is in [`crate::domain::agent::unavailable`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// What kind of failure stops every attempt alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// Not logged in, a missing or refused API key (HTTP 401/403).
    Auth,
    /// The API cannot be reached: connection refused, DNS, TLS, a proxy.
    Connection,
    /// The agent CLI cannot run as configured: not installed, a model the API does not know.
    Config,
    /// The daemon could not prepare the step: its worktree, run folder, settings or sandbox.
    Preparation,
}

/// Which steps a pause for an [`Unavailable`] holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseScope {
    /// The steps an agent runs; gates and the daemon's own merges go on.
    Agent,
    /// Every step.
    All,
}

impl Unavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::Auth => "auth",
            Unavailable::Connection => "connection",
            Unavailable::Config => "config",
            Unavailable::Preparation => "preparation",
        }
    }

    pub fn scope(self) -> PauseScope {
        match self {
            Unavailable::Preparation => PauseScope::All,
            _ => PauseScope::Agent,
        }
    }

    /// What a person can do about it, for `ctl status`, the pause event and the log.
    pub fn help(self) -> &'static str {
        match self {
            Unavailable::Auth => {
                "the agent CLI is not logged in or its API key is refused: give the daemon the \
                 key (e.g. ANTHROPIC_API_KEY) in its environment, in the service's \
                 EnvironmentFile (.catalyst/env) or in the profile's `env`, restart the service \
                 if you changed its environment, then `catalyst ctl resume`"
            }
            Unavailable::Connection => {
                "the agent cannot reach its API: check the network, a proxy or the base URL \
                 (e.g. ANTHROPIC_BASE_URL); dispatching tries again when the pause ends, or \
                 now with `catalyst ctl resume`"
            }
            Unavailable::Config => {
                "the agent CLI cannot run as configured: check that it is installed on the \
                 daemon's PATH and the profile's command and models in .catalyst/config.toml \
                 (the daemon reloads it), then `catalyst ctl resume`"
            }
            Unavailable::Preparation => {
                "the daemon cannot prepare steps (worktree, run folder, sockets, target branch): \
                 fix the cause named in the reason (a full disk, a folder it cannot write, a \
                 `target_branch` in .catalyst/config.toml that does not exist), then \
                 `catalyst ctl resume`"
            }
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for PauseScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PauseScope::Agent => "agent",
            PauseScope::All => "all",
        })
    }
}

/// A cause with the reason to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hindrance {
    pub cause: Unavailable,
    pub reason: String,
}

impl Hindrance {
    pub fn new(cause: Unavailable, reason: impl Into<String>) -> Hindrance {
        Hindrance {
            cause,
            reason: reason.into(),
        }
    }
}

/// Whether an error's text says a file system is full or over its quota (`ENOSPC`,
/// `EDQUOT`), as Rust's and libgit2's messages word it.
pub fn disk_full(text: &str) -> bool {
    [
        "No space left on device",
        "Disk quota exceeded",
        "(os error 28)",
        "(os error 122)",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_preparation_holds_back_every_step() {
        for cause in [
            Unavailable::Auth,
            Unavailable::Connection,
            Unavailable::Config,
        ] {
            assert_eq!(cause.scope(), PauseScope::Agent);
        }
        assert_eq!(Unavailable::Preparation.scope(), PauseScope::All);
    }

    #[test]
    fn a_full_disk_is_told_from_its_error_text() {
        for full in [
            "resetting the worktree of bead `cat-a` to `6dfd363b`: failed to write out file: No space left on device",
            "cannot append to `journal.jsonl`: No space left on device (os error 28)",
            "writing `runs/cat-a/1/prompt.md`: Disk quota exceeded (os error 122)",
        ] {
            assert!(disk_full(full), "{full}");
        }
        assert!(!disk_full(
            "cannot create run folder `runs/cat-a`: Permission denied (os error 13)"
        ));
    }
}
