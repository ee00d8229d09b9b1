//! What the stream parsers ([`super::claude`], [`super::codex`]) make of an agent's stdout.

use serde_json::Value;

/// What an agent's stdout said about how its run went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    pub final_message: Option<String>,
    pub is_error: bool,
    /// The agent's own words about what failed, on one line.
    pub error: Option<String>,
    pub usage_limit: Option<String>,
    /// A failure retrying cannot fix (see [`super::unavailable`]).
    pub unavailable: Option<crate::domain::unavailable::Hindrance>,
    pub cost_usd: Option<f64>,
    pub usage: Option<Value>,
}
