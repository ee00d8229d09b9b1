//! Talking to a forge: the pull requests a bead's merge opens, their reviews and checks, and
//! the labelled issues that become beads (`[forge]`, `crate::domain::config::forge`).
//!
//! [`Forge`] is one client per workspace: GitHub ([`github`]) or Forgejo and Gitea
//! ([`forgejo`]); a config naming GitLab gets [`ForgeError::Unsupported`] when the client is
//! made, not at the first call. Every failure is a [`ForgeError`], and the two a caller pauses forge work
//! for rather than giving up are typed: [`ForgeError::RateLimited`] (with when to come back)
//! and [`ForgeError::Unavailable`]. No error's text holds the token.
//!
//! [`push`] sends a bead's branch to the forge's git remote with the system `git`.

pub mod forgejo;
pub mod github;
mod http;
pub mod push;
mod token;

use chrono::{DateTime, Utc};

use crate::domain::config::forge::{ForgeConfig, ForgeKind};

pub use crate::domain::forge::{
    CheckRun, Checks, CommitStatus, Issue, NewPullRequest, PrState, PullRequest, Review,
    ReviewComment, ReviewState,
};
pub use push::{fetch, push, PushError};
pub use token::Token;

/// Why a forge call failed.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The forge asks us to wait (its rate limit): forge work pauses until `until`.
    #[error("the forge's rate limit is used up until {until}")]
    RateLimited { until: DateTime<Utc> },
    /// The forge cannot be reached or fails (5xx): forge work pauses and tries again later.
    #[error("the forge is unavailable: {reason}")]
    Unavailable { reason: String },
    /// The forge refused the request (bad token, no such pull request, invalid fields).
    #[error("the forge refused `{operation}` ({status}): {message}")]
    Refused {
        operation: &'static str,
        status: u16,
        message: String,
    },
    /// The forge answered with something this client does not understand.
    #[error("the forge's answer to `{operation}` is not what was expected: {reason}")]
    Decode {
        operation: &'static str,
        reason: String,
    },
    /// The token file cannot be used.
    #[error("token file `{path}`: {reason}")]
    Token { path: String, reason: String },
    /// `[forge]`'s `repository` is not `owner/name`.
    #[error("forge `repository` `{0}` is not `owner/name`")]
    Repository(String),
    /// A forge this client does not speak yet.
    #[error("forge kind `{0}` is not supported yet: `github` and `forgejo` (also for Gitea) are")]
    Unsupported(&'static str),
}

impl ForgeError {
    /// Whether the caller should pause forge work and try again later, rather than treat the
    /// operation as failed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::RateLimited { .. } | Self::Unavailable { .. })
    }
}

/// A forge client for one repository.
#[derive(Clone, Debug)]
pub enum Forge {
    Github(github::GitHub),
    /// Forgejo, or Gitea, which speaks the same API.
    Forgejo(forgejo::Forgejo),
}

impl Forge {
    /// A client for `config`, with the token the daemon read from its `token_file`
    /// ([`Token::read`]).
    pub fn new(config: &ForgeConfig, token: Token) -> Result<Self, ForgeError> {
        match config.kind {
            ForgeKind::Github => Ok(Self::Github(github::GitHub::new(
                config.api_url(),
                &config.repository,
                token,
            )?)),
            ForgeKind::Gitlab => Err(ForgeError::Unsupported("gitlab")),
            ForgeKind::Forgejo => Ok(Self::Forgejo(forgejo::Forgejo::new(
                config.api_url(),
                &config.repository,
                token,
            )?)),
        }
    }

    /// Opens a pull request of `pr.head` into `pr.base`.
    pub async fn create_pull_request(
        &self,
        pr: &NewPullRequest,
    ) -> Result<PullRequest, ForgeError> {
        match self {
            Self::Github(gh) => gh.create_pull_request(pr).await,
            Self::Forgejo(fj) => fj.create_pull_request(pr).await,
        }
    }

    /// The open pull request from branch `head` of the repository, if there is one.
    pub async fn open_pull_request_from(
        &self,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        match self {
            Self::Github(gh) => gh.open_pull_request_from(head).await,
            Self::Forgejo(fj) => fj.open_pull_request_from(head).await,
        }
    }

    /// Changes a pull request's title and/or body; `None` leaves it as it is.
    pub async fn update_pull_request(
        &self,
        number: u64,
        title: Option<&str>,
        body: Option<&str>,
    ) -> Result<PullRequest, ForgeError> {
        match self {
            Self::Github(gh) => gh.update_pull_request(number, title, body).await,
            Self::Forgejo(fj) => fj.update_pull_request(number, title, body).await,
        }
    }

    /// A pull request as it is now: open, merged, its head and whether it merges cleanly.
    pub async fn pull_request(&self, number: u64) -> Result<PullRequest, ForgeError> {
        match self {
            Self::Github(gh) => gh.pull_request(number).await,
            Self::Forgejo(fj) => fj.pull_request(number).await,
        }
    }

    /// A pull request's reviews and the comments on lines of its diff, oldest first. A
    /// comment may belong to a review newer than the reviews read (GitHub lists them apart);
    /// [`forge::judge`](crate::domain::forge::judge) leaves such a comment to the next read.
    pub async fn reviews_and_comments(
        &self,
        number: u64,
    ) -> Result<(Vec<Review>, Vec<ReviewComment>), ForgeError> {
        match self {
            Self::Github(gh) => Ok((gh.reviews(number).await?, gh.review_comments(number).await?)),
            Self::Forgejo(fj) => fj.reviews_and_comments(number).await,
        }
    }

    /// The statuses and check runs of commit `sha` (a pull request's head); a Forgejo has
    /// statuses only.
    pub async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        match self {
            Self::Github(gh) => gh.checks(sha).await,
            Self::Forgejo(fj) => fj.checks(sha).await,
        }
    }

    /// The open issues with `label`, pull requests left out.
    pub async fn labelled_issues(&self, label: &str) -> Result<Vec<Issue>, ForgeError> {
        match self {
            Self::Github(gh) => gh.labelled_issues(label).await,
            Self::Forgejo(fj) => fj.labelled_issues(label).await,
        }
    }

    /// Comments on an issue or a pull request; gives the comment's id.
    pub async fn comment(&self, number: u64, body: &str) -> Result<u64, ForgeError> {
        match self {
            Self::Github(gh) => gh.comment(number, body).await,
            Self::Forgejo(fj) => fj.comment(number, body).await,
        }
    }

    /// The checks branch `branch`'s protection requires, or `None` when it names none.
    pub async fn required_checks(&self, branch: &str) -> Result<Option<Vec<String>>, ForgeError> {
        match self {
            Self::Github(gh) => gh.required_checks(branch).await,
            Self::Forgejo(fj) => fj.required_checks(branch).await,
        }
    }

    /// Takes `label` off an issue or a pull request; one it does not have is no error.
    pub async fn remove_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        match self {
            Self::Github(gh) => gh.remove_label(number, label).await,
            Self::Forgejo(fj) => fj.remove_label(number, label).await,
        }
    }

    /// Adds `label` to an issue or a pull request.
    pub async fn add_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        match self {
            Self::Github(gh) => gh.add_label(number, label).await,
            Self::Forgejo(fj) => fj.add_label(number, label).await,
        }
    }

    /// Closes an issue.
    pub async fn close_issue(&self, number: u64) -> Result<(), ForgeError> {
        match self {
            Self::Github(gh) => gh.close_issue(number).await,
            Self::Forgejo(fj) => fj.close_issue(number).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: ForgeKind) -> ForgeConfig {
        ForgeConfig {
            kind,
            api_url: None,
            repository: "acme/widgets".into(),
            token_file: "token".into(),
            remote: None,
            issue_label: None,
            pull_requests: true,
            poll_secs: 30,
            blocked_label: "catalyst: blocked".into(),
        }
    }

    #[test]
    fn each_spoken_kind_builds_its_client_and_gitlab_is_refused() {
        let github = Forge::new(&config(ForgeKind::Github), Token::new("t"));
        assert!(matches!(github, Ok(Forge::Github(_))), "{github:?}");
        let forgejo = Forge::new(&config(ForgeKind::Forgejo), Token::new("t"));
        assert!(matches!(forgejo, Ok(Forge::Forgejo(_))), "{forgejo:?}");
        let gitlab = Forge::new(&config(ForgeKind::Gitlab), Token::new("t"))
            .expect_err("GitLab is not spoken yet");
        assert_eq!(
            gitlab.to_string(),
            "forge kind `gitlab` is not supported yet: `github` and `forgejo` (also for Gitea) are"
        );
    }
}
