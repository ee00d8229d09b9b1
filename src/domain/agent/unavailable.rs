//! Recognising, in what an agent CLI reports, a failure no retry of the step can fix (see
//! [`crate::domain::unavailable`]): a refused key, an unreachable API, a program or model that
//! does not exist.
//!
//! Like [`super::limits`], text is only looked at where the CLI itself reports an error (an
//! `is_error` result, a failed Codex turn, stderr of a failed run), never in what the model
//! wrote.

use super::limits::{error_head, one_line};
use crate::domain::unavailable::{Hindrance, Unavailable};

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
const CONFIG: [&str; 5] = [
    "execvp",
    // What catalyst's own launcher says (the sandbox's network forwarder) when the
    // agent's program cannot be executed.
    "cannot run `",
    "model_not_found",
    "not_found_error",
    "does not exist or you do not have access",
];

/// The cause an error text the agent CLI reported names, if it is one retrying cannot fix.
pub fn in_error_text(text: &str) -> Option<Hindrance> {
    let head = error_head(text);
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

/// The API an agent of `profile` talks to: the base URL its CLI reads (`ANTHROPIC_BASE_URL`
/// for Claude Code, `OPENAI_BASE_URL` for Codex) from the profile's `env`, else from the
/// daemon's environment (`daemon_env`), else the CLI's default. None for a plain-text agent,
/// whose API catalyst does not know.
pub fn api_url(
    profile: &crate::domain::agent::profile::AgentProfile,
    daemon_env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    use crate::domain::agent::profile::OutputFormat;
    let (key, default) = match profile.format {
        OutputFormat::ClaudeStreamJson => ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        OutputFormat::CodexJson => ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        OutputFormat::Text => return None,
    };
    let set = profile.env.get(key).cloned().or_else(|| daemon_env(key));
    Some(
        set.filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| default.to_owned()),
    )
}

/// The reason of an unreachable API, naming the API (see [`api_url`]) when it is known.
pub fn naming_the_api(reason: &str, url: Option<&str>) -> String {
    match url {
        Some(url) if !reason.contains(url) => format!("{reason} (the API: {url})"),
        _ => reason.to_owned(),
    }
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
                "catalyst: cannot run `ghost-claude`: No such file or directory (os error 2)",
                Some(Unavailable::Config),
            ),
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
    fn an_unreachable_api_is_named_by_the_url_the_agent_reads() {
        use crate::domain::agent::profile::AgentProfile;
        let claude = AgentProfile::builtin("claude").expect("claude");
        let none = |_: &str| None;
        assert_eq!(
            api_url(&claude, &none).as_deref(),
            Some("https://api.anthropic.com")
        );
        let daemon =
            |key: &str| (key == "ANTHROPIC_BASE_URL").then(|| "http://10.0.0.9:8080".into());
        assert_eq!(
            api_url(&claude, &daemon).as_deref(),
            Some("http://10.0.0.9:8080")
        );
        let mut own = claude.clone();
        own.env
            .insert("ANTHROPIC_BASE_URL".into(), "http://proxy.local".into());
        assert_eq!(
            api_url(&own, &daemon).as_deref(),
            Some("http://proxy.local")
        );
        let codex = AgentProfile::builtin("codex").expect("codex");
        assert_eq!(
            api_url(&codex, &none).as_deref(),
            Some("https://api.openai.com/v1")
        );
        assert_eq!(
            naming_the_api("Unable to connect to API (ECONNREFUSED)", Some("http://x")),
            "Unable to connect to API (ECONNREFUSED) (the API: http://x)"
        );
        assert_eq!(
            naming_the_api(
                "error sending request for url (http://x/v1)",
                Some("http://x")
            ),
            "error sending request for url (http://x/v1)",
            "named already"
        );
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
