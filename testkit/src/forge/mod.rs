//! A mock forge on loopback for the forge clients' tests: it keeps the pull requests, reviews,
//! review comments, statuses, check runs, issues, comments and labels of any number of
//! repositories, answers the REST calls the GitHub client makes the way GitHub shapes them
//! ([`serve`], [`shapes`]) and those the Forgejo client makes the way Forgejo does
//! ([`forgejo`]), and has helpers for a test to act as a person (review, approve, fail a
//! check, merge, open an issue). The state is the forge's, not GitHub's: [`MockGitHub`] keeps
//! it for either, and each router shapes it for its API.
//!
//! State is kept per repository (`owner/name`), so tests sharing one mock (and one validator
//! in front of it, [`prism`]) do not see each other's work when each uses its own repository.
//!
//! It also records each request's method, path and auth headers, and can be told to fail the
//! next calls for a repository (a rate limit, an outage) with the status and headers GitHub
//! sends.

pub mod forgejo;
pub mod prism;
mod server;
pub mod shapes;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

pub use server::serve;

/// Where the mock says its web pages are (`html_url`s).
pub const WEB: &str = "https://github.example";

/// A pull request as the mock keeps it.
#[derive(Clone, Debug, Default)]
pub struct MockPull {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub head_sha: String,
    pub base: String,
    pub draft: bool,
    pub open: bool,
    pub merged: bool,
    pub mergeable: Option<bool>,
    pub labels: Vec<String>,
    /// Comments on its conversation (made through the issues API).
    pub comments: Vec<String>,
    pub reviews: Vec<MockReview>,
    pub review_comments: Vec<MockReviewComment>,
}

/// A review as the mock keeps it.
#[derive(Clone, Debug)]
pub struct MockReview {
    pub id: u64,
    /// `APPROVED`, `CHANGES_REQUESTED` or `COMMENTED`.
    pub state: String,
    pub body: String,
    pub by: String,
    pub sha: String,
}

/// A comment on a line, part of a review.
#[derive(Clone, Debug)]
pub struct MockReviewComment {
    pub id: u64,
    pub review: u64,
    pub path: String,
    pub line: u64,
    pub body: String,
    pub by: String,
    pub sha: String,
}

/// An issue as the mock keeps it.
#[derive(Clone, Debug, Default)]
pub struct MockIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub comments: Vec<String>,
}

/// A commit status.
#[derive(Clone, Debug)]
pub struct MockStatus {
    pub id: u64,
    pub context: String,
    pub state: String,
}

/// A check run.
#[derive(Clone, Debug)]
pub struct MockRun {
    pub id: u64,
    pub name: String,
    pub status: String,
    pub conclusion: Option<String>,
}

/// One repository's state.
#[derive(Default)]
pub(crate) struct Repo {
    /// The last number given to a pull request or issue (they share numbers, as on GitHub).
    pub last_number: u64,
    pub pulls: BTreeMap<u64, MockPull>,
    pub issues: BTreeMap<u64, MockIssue>,
    /// Labels made in the repository ([`MockGitHub::create_label`]), besides those its issues
    /// and pull requests carry. GitHub makes a label when one is added; Forgejo adds only
    /// labels that exist.
    pub labels: BTreeSet<String>,
    /// By commit.
    pub statuses: BTreeMap<String, Vec<MockStatus>>,
    pub runs: BTreeMap<String, Vec<MockRun>>,
    /// Answers to give instead of the next calls.
    pub failures: VecDeque<Failure>,
    pub requests: Vec<Recorded>,
    /// The checks each protected branch requires.
    pub required_checks: BTreeMap<String, Vec<String>>,
}

impl Repo {
    /// The labels of issue or pull request `number`, if there is one.
    pub fn labels_of(&mut self, number: u64) -> Option<&mut Vec<String>> {
        match self.issues.get_mut(&number) {
            Some(issue) => Some(&mut issue.labels),
            None => self.pulls.get_mut(&number).map(|p| &mut p.labels),
        }
    }
}

/// An answer to give instead of a call's: a rate limit, an outage, or (status 200) an answer
/// that is not what the operation returns, to show the validator catches it (the mock GitHub
/// gives an error body, the mock Forgejo the message alone, as a JSON string).
#[derive(Clone, Debug)]
pub struct Failure {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub message: String,
}

impl Failure {
    /// GitHub's primary rate limit: 403 with no requests left until `reset_epoch` (seconds).
    pub fn rate_limit_403(reset_epoch: i64) -> Self {
        Self {
            status: 403,
            headers: vec![
                ("x-ratelimit-limit".into(), "5000".into()),
                ("x-ratelimit-remaining".into(), "0".into()),
                ("x-ratelimit-reset".into(), reset_epoch.to_string()),
            ],
            message: "API rate limit exceeded".into(),
        }
    }

    /// A secondary rate limit: 429 with `retry-after`.
    pub fn rate_limit_429(retry_after: u64) -> Self {
        Self {
            status: 429,
            headers: vec![("retry-after".into(), retry_after.to_string())],
            message: "You have exceeded a secondary rate limit".into(),
        }
    }

    /// An outage.
    pub fn server_error(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            message: "Server Error".into(),
        }
    }
}

/// A request the mock took.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub authorization: Option<String>,
    pub accept: Option<String>,
    pub api_version: Option<String>,
    pub user_agent: Option<String>,
}

#[derive(Default)]
pub(crate) struct State {
    pub repos: HashMap<String, Repo>,
    /// The last id given to a review, comment, status or check run.
    pub last_id: u64,
}

impl State {
    pub fn repo(&mut self, name: &str) -> &mut Repo {
        self.repos.entry(name.to_owned()).or_default()
    }

    pub fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }
}

/// The mock's state, shared by its server and the test; cloning shares it.
#[derive(Clone, Default)]
pub struct MockGitHub {
    pub(crate) state: Arc<Mutex<State>>,
}

/// A fake commit id, 40 hex digits, from a number.
pub fn fake_sha(n: u64) -> String {
    format!("{n:040x}")
}

impl MockGitHub {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pull request of `repo`, if it has one numbered `number`.
    pub fn pull(&self, repo: &str, number: u64) -> Option<MockPull> {
        self.lock().repo(repo).pulls.get(&number).cloned()
    }

    /// An issue of `repo`.
    pub fn issue(&self, repo: &str, number: u64) -> Option<MockIssue> {
        self.lock().repo(repo).issues.get(&number).cloned()
    }

    /// The requests `repo` was sent.
    pub fn requests(&self, repo: &str) -> Vec<Recorded> {
        self.lock().repo(repo).requests.clone()
    }

    /// Answers the next call for `repo` with `failure`.
    pub fn fail_next(&self, repo: &str, failure: Failure) {
        self.lock().repo(repo).failures.push_back(failure);
    }

    /// A person makes label `name` in `repo`.
    pub fn create_label(&self, repo: &str, name: &str) {
        self.lock().repo(repo).labels.insert(name.to_owned());
    }

    /// A person opens an issue with `labels`; gives its number.
    pub fn open_issue(&self, repo: &str, title: &str, body: &str, labels: &[&str]) -> u64 {
        let mut state = self.lock();
        let repo = state.repo(repo);
        repo.last_number += 1;
        let number = repo.last_number;
        repo.issues.insert(
            number,
            MockIssue {
                number,
                title: title.into(),
                body: body.into(),
                open: true,
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                comments: Vec::new(),
            },
        );
        number
    }

    /// A person reviews pull request `pr`: `state` is `APPROVED`, `CHANGES_REQUESTED` or
    /// `COMMENTED`, `comments` its comments on lines (`path`, `line`, `body`). Gives the
    /// review's id.
    pub fn review(
        &self,
        repo: &str,
        pr: u64,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        let mut s = self.lock();
        let id = s.next_id();
        let comment_ids: Vec<u64> = comments.iter().map(|_| s.next_id()).collect();
        let pull = s
            .repo(repo)
            .pulls
            .get_mut(&pr)
            .unwrap_or_else(|| panic!("the mock has no pull request {pr} in {repo}"));
        let sha = pull.head_sha.clone();
        pull.reviews.push(MockReview {
            id,
            state: state.into(),
            body: body.into(),
            by: "reviewer".into(),
            sha: sha.clone(),
        });
        for ((path, line, text), cid) in comments.iter().zip(comment_ids) {
            pull.review_comments.push(MockReviewComment {
                id: cid,
                review: id,
                path: (*path).into(),
                line: *line,
                body: (*text).into(),
                by: "reviewer".into(),
                sha: sha.clone(),
            });
        }
        id
    }

    /// Someone opens a pull request from `head` into `base` (as the daemon would, had it not
    /// crashed before recording it). Gives its number.
    pub fn open_pull(&self, repo: &str, head: &str, base: &str, title: &str) -> u64 {
        let mut s = self.lock();
        let rs = s.repo(repo);
        rs.last_number += 1;
        let number = rs.last_number;
        rs.pulls.insert(
            number,
            MockPull {
                number,
                title: title.into(),
                head: head.into(),
                head_sha: fake_sha(number),
                base: base.into(),
                open: true,
                mergeable: Some(true),
                ..MockPull::default()
            },
        );
        number
    }

    /// A person protects `branch`, requiring the checks `names` to pass before a merge.
    pub fn require_checks(&self, repo: &str, branch: &str, names: &[&str]) {
        let names = names.iter().map(|n| (*n).to_owned()).collect();
        self.lock()
            .repo(repo)
            .required_checks
            .insert(branch.into(), names);
    }

    /// A person asks for changes, with comments on lines.
    pub fn request_changes(
        &self,
        repo: &str,
        pr: u64,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        self.review(repo, pr, "CHANGES_REQUESTED", body, comments)
    }

    /// A person approves.
    pub fn approve(&self, repo: &str, pr: u64) -> u64 {
        self.review(repo, pr, "APPROVED", "", &[])
    }

    /// CI sets commit status `context` of `sha` to `state` (`success`, `failure`, `pending`,
    /// `error`), replacing an earlier one of that context.
    pub fn set_status(&self, repo: &str, sha: &str, context: &str, state: &str) {
        let mut s = self.lock();
        let id = s.next_id();
        let statuses = s.repo(repo).statuses.entry(sha.into()).or_default();
        statuses.retain(|st| st.context != context);
        statuses.push(MockStatus {
            id,
            context: context.into(),
            state: state.into(),
        });
    }

    /// An app sets check run `name` of `sha`: `conclusion` `None` is in progress, else
    /// completed with it (`success`, `failure`, ...).
    pub fn set_check(&self, repo: &str, sha: &str, name: &str, conclusion: Option<&str>) {
        let mut s = self.lock();
        let id = s.next_id();
        let runs = s.repo(repo).runs.entry(sha.into()).or_default();
        runs.retain(|r| r.name != name);
        runs.push(MockRun {
            id,
            name: name.into(),
            status: if conclusion.is_some() {
                "completed"
            } else {
                "in_progress"
            }
            .into(),
            conclusion: conclusion.map(str::to_owned),
        });
    }

    /// Someone pushes `sha` to pull request `pr`'s branch.
    pub fn set_head(&self, repo: &str, pr: u64, sha: &str) {
        if let Some(pull) = self.lock().repo(repo).pulls.get_mut(&pr) {
            pull.head_sha = sha.into();
        }
    }

    /// Whether `pr` merges cleanly (`None`: GitHub has not worked it out yet).
    pub fn set_mergeable(&self, repo: &str, pr: u64, mergeable: Option<bool>) {
        if let Some(pull) = self.lock().repo(repo).pulls.get_mut(&pr) {
            pull.mergeable = mergeable;
        }
    }

    /// A person merges `pr`.
    pub fn merge(&self, repo: &str, pr: u64) {
        if let Some(pull) = self.lock().repo(repo).pulls.get_mut(&pr) {
            pull.open = false;
            pull.merged = true;
        }
    }

    /// A person closes `pr` without merging it.
    pub fn close(&self, repo: &str, pr: u64) {
        if let Some(pull) = self.lock().repo(repo).pulls.get_mut(&pr) {
            pull.open = false;
        }
    }
}
