//! What the forge client gives back: the few fields of the forge's objects that catalyst acts
//! on, independent of the forge's own shapes.

/// A pull request to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPullRequest {
    /// The branch with the changes (on the same repository).
    pub head: String,
    /// The branch it merges into.
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
}

/// Whether a pull request is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrState {
    Open,
    Closed,
}

/// A pull request as the forge has it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub state: PrState,
    /// Closed by a merge (`state` is then `Closed`).
    pub merged: bool,
    pub draft: bool,
    pub title: String,
    pub body: String,
    pub head_ref: String,
    /// The commit the pull request's branch is at: what checks run on, and the lease of the
    /// next push.
    pub head_sha: String,
    pub base_ref: String,
    /// Whether it merges cleanly; `None` while the forge has not worked it out yet.
    pub mergeable: Option<bool>,
    pub html_url: String,
}

/// What a review says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
    Dismissed,
    Pending,
    /// A state this client does not know, as the forge wrote it.
    Other(String),
}

impl ReviewState {
    pub fn parse(state: &str) -> Self {
        match state {
            "APPROVED" => Self::Approved,
            "CHANGES_REQUESTED" => Self::ChangesRequested,
            "COMMENTED" => Self::Commented,
            "DISMISSED" => Self::Dismissed,
            "PENDING" => Self::Pending,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// A review of a pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    pub state: ReviewState,
    pub body: String,
    /// Who wrote it, when the forge says.
    pub author: Option<String>,
}

/// A comment on a line of a pull request's diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    /// The review it belongs to.
    pub review_id: Option<u64>,
    pub path: String,
    /// The line of the file it is on; `None` when the line is no longer in the diff.
    pub line: Option<u64>,
    pub body: String,
}

/// A commit status (the older API, set by external CI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitStatus {
    pub context: String,
    /// `success`, `pending`, `failure` or `error`.
    pub state: String,
}

/// A check run (the newer API, set by apps such as Actions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    pub name: String,
    /// `queued`, `in_progress`, `completed`, ...
    pub status: String,
    /// Once completed: `success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`,
    /// `action_required`.
    pub conclusion: Option<String>,
}

/// Everything that reports on a commit: statuses and check runs together, since a repository
/// may require either.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Checks {
    pub statuses: Vec<CommitStatus>,
    pub runs: Vec<CheckRun>,
}

impl Checks {
    /// The names of the statuses and check runs that failed.
    pub fn failing(&self) -> Vec<String> {
        let statuses = self
            .statuses
            .iter()
            .filter(|s| s.state == "failure" || s.state == "error")
            .map(|s| s.context.clone());
        let runs = self
            .runs
            .iter()
            .filter(|r| {
                matches!(
                    r.conclusion.as_deref(),
                    Some("failure" | "timed_out" | "cancelled" | "action_required")
                )
            })
            .map(|r| r.name.clone());
        statuses.chain(runs).collect()
    }

    /// The names of those still running or waiting to.
    pub fn pending(&self) -> Vec<String> {
        let statuses = self
            .statuses
            .iter()
            .filter(|s| s.state == "pending")
            .map(|s| s.context.clone());
        let runs = self
            .runs
            .iter()
            .filter(|r| r.status != "completed")
            .map(|r| r.name.clone());
        statuses.chain(runs).collect()
    }
}

/// An open issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    /// Who it is assigned to (the first assignee), if anyone.
    pub assignee: Option<String>,
    pub html_url: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_and_pending_cover_statuses_and_runs() {
        let checks = Checks {
            statuses: vec![
                CommitStatus {
                    context: "ci/lint".into(),
                    state: "failure".into(),
                },
                CommitStatus {
                    context: "ci/docs".into(),
                    state: "pending".into(),
                },
                CommitStatus {
                    context: "ci/ok".into(),
                    state: "success".into(),
                },
            ],
            runs: vec![
                CheckRun {
                    name: "test".into(),
                    status: "completed".into(),
                    conclusion: Some("timed_out".into()),
                },
                CheckRun {
                    name: "build".into(),
                    status: "in_progress".into(),
                    conclusion: None,
                },
                CheckRun {
                    name: "skip".into(),
                    status: "completed".into(),
                    conclusion: Some("skipped".into()),
                },
            ],
        };
        assert_eq!(checks.failing(), ["ci/lint", "test"]);
        assert_eq!(checks.pending(), ["ci/docs", "build"]);
    }

    #[test]
    fn review_states_parse_as_github_writes_them() {
        assert_eq!(ReviewState::parse("APPROVED"), ReviewState::Approved);
        assert_eq!(
            ReviewState::parse("CHANGES_REQUESTED"),
            ReviewState::ChangesRequested
        );
        assert_eq!(ReviewState::parse("new"), ReviewState::Other("new".into()));
    }
}
