//! Error replies: a code a script can match on and a message for people.

use serde::{Deserialize, Serialize};

/// Error codes (docs/protocol.md#errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    UnknownMethod,
    NotFound,
    Conflict,
    TooLarge,
    Forbidden,
    ShuttingDown,
    Internal,
}

impl ErrorCode {
    /// The code as it is on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::Conflict, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::Internal, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_print_as_on_the_wire() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::UnknownMethod,
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::TooLarge,
            ErrorCode::Forbidden,
            ErrorCode::ShuttingDown,
            ErrorCode::Internal,
        ] {
            let wire = serde_json::to_string(&code).expect("a code");
            assert_eq!(wire, format!("\"{code}\""));
        }
    }
}
