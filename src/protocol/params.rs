//! The parameters of each method, as a client sends them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::event::BeadPatch;
use crate::domain::model::JsonMap;
use crate::domain::state::Lane;

/// A bead as submitted by a person or a script. The daemon assigns the id unless one is given,
/// and the timestamps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeadInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_criteria: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Shorthand for the label `formula:<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// Beads this one waits for (`blocks` dependencies): it starts after they are merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only beads with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Include step beads too.
    #[serde(default)]
    pub steps: bool,
    /// Only beads whose id or title contains this, in any case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// Skip this many of the beads that match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// At most this many rows. With `offset` or `limit` the answer says how many matched
    /// (`total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Only work beads in this column of the dashboard's board.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<Lane>,
}

/// What `list`'s `search` matches: an id or title that contains it, in any case.
#[derive(Clone, Debug)]
pub struct Search(String);

impl Search {
    pub fn new(text: &str) -> Search {
        Search(text.to_lowercase())
    }

    pub fn matches(&self, id: &str, title: &str) -> bool {
        contains_folded(id, &self.0) || contains_folded(title, &self.0)
    }
}

/// Whether `text` contains `needle` (already lower case) in any case; ASCII text is compared
/// in place, without a lower-case copy per bead (a search runs over every bead of the store).
fn contains_folded(text: &str, needle: &str) -> bool {
    if !text.is_ascii() || !needle.is_ascii() {
        return text.to_lowercase().contains(needle);
    }
    let (text, needle) = (text.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || text.windows(needle.len()).any(|w| {
            w.iter()
                .zip(needle)
                .all(|(a, b)| a.to_ascii_lowercase() == *b)
        })
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowParams {
    pub id: String,
    /// Include every attempt's run record.
    #[serde(default)]
    pub runs: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateParams {
    pub id: String,
    pub set: BeadPatch,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentParams {
    pub id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdParams {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectParams {
    pub id: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseParams {
    /// Pause or resume one model; without it, all dispatching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    /// Replay events with a seq greater than this (0: from the start); without it, only new
    /// events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Only events about this bead (its steps included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bead: Option<String>,
    /// Only these event types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Keep following after the replay (the default). Without it the daemon sends
    /// `{"type":"end","seq":N}` after the last event it has and closes the connection.
    #[serde(default = "yes")]
    pub follow: bool,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    pub step: String,
    /// Which attempt (the latest by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `stdout` (default) or `stderr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Keep the connection open and send what is appended.
    #[serde(default)]
    pub follow: bool,
}

/// Beads export lines to add to the store (see `beads::import`). A client sends a large file
/// in several requests, each under [`MAX_LINE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportParams {
    pub beads: Vec<crate::domain::model::Bead>,
}

/// The `hook` event by which an attempt's hook sends a decision it made itself, to be
/// recorded: `payload` holds `tool`, `allowed`, `reason` and `target` (an `agent.tool` event's
/// fields). The hook does not wait for the answer.
pub const TOOL_USED_EVENT: &str = "ToolUsed";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookParams {
    /// The step the agent runs (`CATALYST_STEP`).
    pub step: String,
    /// `PreToolUse`, `Stop` or `SessionStart`.
    pub event: String,
    /// The hook's JSON from Claude Code, with what the daemon does not need left out (file
    /// contents) and, for `Stop`, the final message filled in from the transcript when the
    /// agent CLI did not send it.
    pub payload: Value,
}
