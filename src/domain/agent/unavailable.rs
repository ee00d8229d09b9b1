//! Failures no retry of the step can fix: the agent CLI is not logged in or its key is refused,
//! its API cannot be reached, it cannot run as configured, or the daemon cannot prepare the
//! step. None is the bead's fault, so none spends an attempt: the router requeues the step and
//! the engine pauses dispatching (the agent's steps, or every step for a preparation failure)
//! with backoff until the pause ends or a person runs `ctl resume` (docs/routing.md).
//!
//! Like [`super::limits`], text is only looked at where the CLI itself reports an error (an
//! `is_error` result, a failed Codex turn, stderr of a failed run), never in what the model
//! wrote.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::limits::one_line;

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
                "the daemon cannot prepare steps (worktree, run folder, target branch): fix the \
                 cause named in the reason (e.g. `target_branch` in .catalyst/config.toml), then \
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

/// Phrases, lower-case, of authentication failures: Claude Code's `Not logged in · Please run
/// /login` and `Invalid API key · Please run /login`, the Anthropic API's
/// `authentication_error`/`permission_error`, OpenAI's `invalid_api_key` and `401 Unauthorized`.
const AUTH: [&str; 10] = [
    "not logged in",
    "please run /login",
    "invalid api key",
    "invalid x-api-key",
    "authentication_error",
    "authentication_failed",
    "invalid_api_key",
    "incorrect api key",
    "401 unauthorized",
    "missing bearer",
];

/// Phrases of an API that could not be reached.
const CONNECTION: [&str; 10] = [
    "unable to connect",
    "connection error",
    "connection refused",
    "econnrefused",
    "enotfound",
    "eai_again",
    "fetch failed",
    "error sending request",
    "failed to connect",
    "network is unreachable",
];

/// Phrases of an agent that cannot run as configured: a program the sandbox's `execvp` cannot
/// find, a model the API does not know.
const CONFIG: [&str; 4] = [
    "execvp",
    "model_not_found",
    "not_found_error",
    "does not exist or you do not have access",
];

/// How much of an error text is searched.
const SCAN_BYTES: usize = 4096;

/// The cause an error text the agent CLI reported names, if it is one retrying cannot fix.
pub fn in_error_text(text: &str) -> Option<Hindrance> {
    let end = (0..=text.len().min(SCAN_BYTES))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let head = text[..end].to_lowercase();
    let cause = [
        (Unavailable::Auth, &AUTH[..]),
        (Unavailable::Connection, &CONNECTION[..]),
        (Unavailable::Config, &CONFIG[..]),
    ]
    .into_iter()
    .find(|(_, phrases)| phrases.iter().any(|p| head.contains(p)))?
    .0;
    Some(Hindrance::new(cause, one_line(text)))
}

/// The cause an API error's HTTP status names: 401 and 403 are authentication, 404 a model or
/// URL the API does not know.
pub fn by_status(status: u64) -> Option<Unavailable> {
    match status {
        401 | 403 => Some(Unavailable::Auth),
        404 => Some(Unavailable::Config),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_are_classified_by_what_they_name() {
        let cases = [
            ("Not logged in · Please run /login", Some(Unavailable::Auth)),
            (
                "Invalid API key · Please run /login",
                Some(Unavailable::Auth),
            ),
            (
                r#"API Error: 401 {"type":"error","error":{"type":"authentication_error"}}"#,
                Some(Unavailable::Auth),
            ),
            (
                "API Error: Unable to connect to API (ECONNREFUSED)",
                Some(Unavailable::Connection),
            ),
            (
                "stream error: error sending request for url (http://127.0.0.1:9/v1/responses)",
                Some(Unavailable::Connection),
            ),
            (
                "bwrap: execvp claude: No such file or directory",
                Some(Unavailable::Config),
            ),
            (
                r#"API Error: 404 {"error":{"type":"not_found_error","message":"model: claude-x"}}"#,
                Some(Unavailable::Config),
            ),
            ("exit code 3", None),
            ("the tests failed", None),
        ];
        for (text, cause) in cases {
            assert_eq!(in_error_text(text).map(|h| h.cause), cause, "{text}");
        }
    }

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
    fn statuses_name_auth_and_config() {
        assert_eq!(by_status(401), Some(Unavailable::Auth));
        assert_eq!(by_status(403), Some(Unavailable::Auth));
        assert_eq!(by_status(404), Some(Unavailable::Config));
        assert_eq!(by_status(500), None);
        assert_eq!(by_status(429), None);
    }
}
