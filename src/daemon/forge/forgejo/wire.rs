//! Forgejo's JSON, read: only the fields catalyst acts on, so what Forgejo adds or drops
//! elsewhere changes nothing. Forgejo is written in Go, which writes an empty list as `null`
//! and an absent object as `null` or not at all, so lists and objects are read as `Option`s.

use serde::Deserialize;

use crate::domain::forge::{PrState, PullRequest};

#[derive(Deserialize)]
pub(super) struct WireUser {
    pub(super) login: String,
}

#[derive(Deserialize)]
pub(super) struct WireBranch {
    #[serde(rename = "ref")]
    pub(super) name: String,
    pub(super) sha: String,
}

#[derive(Deserialize)]
pub(super) struct WirePull {
    pub(super) number: u64,
    pub(super) state: String,
    #[serde(default)]
    pub(super) merged: bool,
    #[serde(default)]
    pub(super) draft: bool,
    pub(super) title: String,
    pub(super) body: Option<String>,
    pub(super) head: WireBranch,
    pub(super) base: WireBranch,
    pub(super) mergeable: Option<bool>,
    pub(super) html_url: String,
}

impl From<WirePull> for PullRequest {
    fn from(w: WirePull) -> Self {
        Self {
            number: w.number,
            state: if w.state == "open" {
                PrState::Open
            } else {
                PrState::Closed
            },
            merged: w.merged,
            draft: w.draft,
            title: w.title,
            body: w.body.unwrap_or_default(),
            head_ref: w.head.name,
            head_sha: w.head.sha,
            base_ref: w.base.name,
            mergeable: w.mergeable,
            html_url: w.html_url,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct WireReview {
    pub(super) id: u64,
    pub(super) state: String,
    pub(super) body: Option<String>,
    pub(super) user: Option<WireUser>,
    #[serde(default)]
    pub(super) dismissed: bool,
    /// How many comments on lines it has; older servers may not say.
    pub(super) comments_count: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct WireReviewComment {
    pub(super) id: u64,
    pub(super) pull_request_review_id: Option<u64>,
    pub(super) path: String,
    /// The line in the new file; 0 when the comment is on a removed line.
    #[serde(default)]
    pub(super) position: u64,
    /// The line in the old file, for a comment on a removed line; else 0.
    #[serde(default)]
    pub(super) original_position: u64,
    pub(super) body: String,
}

#[derive(Deserialize)]
pub(super) struct WireStatus {
    pub(super) context: String,
    /// Forgejo calls a status's state `status`.
    pub(super) status: String,
}

#[derive(Deserialize)]
pub(super) struct WireCombined {
    pub(super) statuses: Option<Vec<WireStatus>>,
}

#[derive(Deserialize)]
pub(super) struct WireLabel {
    pub(super) name: String,
}

#[derive(Deserialize)]
pub(super) struct WireIssue {
    pub(super) number: u64,
    pub(super) title: String,
    pub(super) body: Option<String>,
    pub(super) labels: Option<Vec<WireLabel>>,
    pub(super) html_url: String,
    pub(super) assignee: Option<WireUser>,
    pub(super) assignees: Option<Vec<WireUser>>,
    /// Present when the issue is a pull request.
    pub(super) pull_request: Option<serde_json::Value>,
}

#[derive(Deserialize)]
pub(super) struct WireId {
    pub(super) id: u64,
}

/// A branch, for its protection's required status checks.
#[derive(Deserialize)]
pub(super) struct WireProtectedBranch {
    #[serde(default)]
    pub(super) enable_status_check: bool,
    pub(super) status_check_contexts: Option<Vec<String>>,
}
