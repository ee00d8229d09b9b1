//! What the forge clients share about HTTP: reading an error's causes, an error body's
//! message, and an answer into the client's small structs.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::ForgeError;

/// The `message` of a forge's error body (GitHub's and Forgejo's have one), or the body's
/// start.
pub(super) fn message_of(text: &str) -> String {
    #[derive(Deserialize)]
    struct Error {
        message: String,
    }
    match serde_json::from_str::<Error>(text) {
        Ok(e) => e.message,
        Err(_) => text.chars().take(200).collect(),
    }
}

/// A reqwest error with its causes, which say what actually went wrong (refused, timed out).
pub(super) fn error_chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// An answer read as `T`, or a [`ForgeError::Decode`] naming the operation.
pub(super) fn decode<T: DeserializeOwned>(
    operation: &'static str,
    value: Value,
) -> Result<T, ForgeError> {
    serde_json::from_value(value).map_err(|e| ForgeError::Decode {
        operation,
        reason: e.to_string(),
    })
}

/// `text` as one segment of a URL's path: a label's name may hold spaces, `:` or `/`.
pub(super) fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Whether `error` is the forge's "not found": for a removal, nothing left to remove.
pub(super) fn not_found(error: &ForgeError) -> bool {
    matches!(error, ForgeError::Refused { status: 404, .. })
}

/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client a forge client sends with: one call's timeout, and catalyst's user agent.
pub(super) fn client() -> Result<reqwest::Client, ForgeError> {
    reqwest::Client::builder()
        .timeout(CALL_TIMEOUT)
        .user_agent(concat!("catalyst/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ForgeError::Unavailable {
            reason: format!("cannot make the HTTP client: {e}"),
        })
}

/// Refuses a `repository` that is not `owner/name`: it goes into every URL's path.
pub(super) fn check_repository(repository: &str) -> Result<(), ForgeError> {
    match repository.split_once('/') {
        Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(())
        }
        _ => Err(ForgeError::Repository(repository.to_owned())),
    }
}
