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
