//! GitHub's JSON, read: only the fields catalyst acts on, so what GitHub adds or drops
//! elsewhere changes nothing.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::forge::{PrState, PullRequest};

#[derive(Deserialize)]
pub(super) struct WireUser {
    pub(super) login: String,
}

#[derive(Deserialize)]
pub(super) struct WireRef {
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
    pub(super) head: WireRef,
    pub(super) base: WireRef,
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
}

#[derive(Deserialize)]
pub(super) struct WireReviewComment {
    pub(super) id: u64,
    pub(super) pull_request_review_id: Option<u64>,
    pub(super) path: String,
    pub(super) line: Option<u64>,
    pub(super) original_line: Option<u64>,
    pub(super) body: String,
}

#[derive(Deserialize)]
pub(super) struct WireStatus {
    pub(super) context: String,
    pub(super) state: String,
}

#[derive(Deserialize)]
pub(super) struct WireCombined {
    pub(super) statuses: Vec<WireStatus>,
}

#[derive(Deserialize)]
pub(super) struct WireCheckRun {
    pub(super) name: String,
    pub(super) status: String,
    pub(super) conclusion: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireCheckRuns {
    pub(super) check_runs: Vec<WireCheckRun>,
}

/// An issue's label: GitHub's schema allows a bare name or an object.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum WireLabel {
    Name(String),
    Object { name: Option<String> },
}

impl WireLabel {
    pub(super) fn name(self) -> Option<String> {
        match self {
            Self::Name(name) => Some(name),
            Self::Object { name } => name,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct WireIssue {
    pub(super) number: u64,
    pub(super) title: String,
    pub(super) body: Option<String>,
    #[serde(default)]
    pub(super) labels: Vec<WireLabel>,
    pub(super) html_url: String,
    #[serde(default)]
    pub(super) assignee: Option<WireUser>,
    /// Present when the issue is a pull request.
    pub(super) pull_request: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct WireId {
    pub(super) id: u64,
}

/// A branch, for its protection's required checks.
#[derive(Deserialize)]
pub(super) struct WireBranch {
    pub(super) protection: Option<WireProtection>,
}

#[derive(Deserialize)]
pub(super) struct WireProtection {
    pub(super) required_status_checks: Option<WireRequiredChecks>,
}

#[derive(Deserialize)]
pub(super) struct WireRequiredChecks {
    #[serde(default)]
    pub(super) contexts: Vec<String>,
    #[serde(default)]
    pub(super) checks: Vec<WireRequiredCheck>,
}

#[derive(Deserialize)]
pub(super) struct WireRequiredCheck {
    pub(super) context: String,
}
