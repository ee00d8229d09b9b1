//! Forgejo's API (v1, which Gitea speaks too): the calls [`super::Forge`] makes, and what
//! their answers mean.
//!
//! Where Forgejo differs from GitHub, catalyst's types are kept and the difference handled
//! here: reviews are named otherwise ([`review_state`]), comments on lines are listed per
//! review, checks are commit statuses only (Forgejo Actions report as statuses; there are no
//! check runs), lists are paged by number with the total in `X-Total-Count`, a label is added
//! by name but a name the repository does not have is dropped silently (so it is looked for in
//! the answer), and a draft is a pull request whose title starts with `WIP:`. The tests check
//! the requests and the mock's answers against Forgejo's published API description, so a field
//! read here that Forgejo does not send fails a test rather than the daemon.

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::http::{
    check_repository, client, decode, error_chain, message_of, not_found, path_segment,
};
use super::{ForgeError, Token};
use crate::domain::forge::{
    Checks, CommitStatus, Issue, NewPullRequest, PullRequest, Review, ReviewComment, ReviewState,
};
use wire::{
    WireCombined, WireId, WireIssue, WireLabel, WireProtectedBranch, WirePull, WireReview,
    WireReviewComment,
};

mod wire;

/// Items per page of a list: Forgejo's default most (`MAX_RESPONSE_ITEMS`).
const PAGE_LIMIT: usize = 50;
/// Pages of a list read at most: a list longer than this is cut rather than read forever.
const MAX_PAGES: usize = 20;
/// How long to wait after a rate limit that says nothing of when it ends.
const DEFAULT_LIMIT_WAIT: i64 = 60;
/// The title prefix that makes a pull request a draft ("work in progress"), the first of
/// Forgejo's default `WORK_IN_PROGRESS_PREFIXES`: Forgejo's API has no draft flag to set.
const DRAFT_PREFIX: &str = "WIP: ";

/// A client for one Forgejo (or Gitea) repository.
#[derive(Clone, Debug)]
pub struct Forgejo {
    client: reqwest::Client,
    /// The API's base URL (`https://host/api/v1`), without a trailing `/`.
    api: String,
    /// `owner/name`.
    repository: String,
    token: Token,
}

impl Forgejo {
    /// A client for `repository` (`owner/name`) on the API at `api`.
    pub fn new(api: &str, repository: &str, token: Token) -> Result<Self, ForgeError> {
        check_repository(repository)?;
        Ok(Self {
            client: client()?,
            api: api.trim_end_matches('/').to_owned(),
            repository: repository.to_owned(),
            token,
        })
    }

    /// `{api}/repos/{owner}/{name}{rest}`.
    fn url(&self, rest: &str) -> String {
        format!("{}/repos/{}{rest}", self.api, self.repository)
    }

    /// One call: sends it, tells rate limits and outages from refusals, and gives the body
    /// and the list's total (`X-Total-Count`), if Forgejo says.
    async fn send(
        &self,
        operation: &'static str,
        method: Method,
        rest: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(Value, Option<usize>), ForgeError> {
        let mut request = self
            .client
            .request(method, self.url(rest))
            .header(AUTHORIZATION, format!("token {}", self.token.secret()))
            .header(ACCEPT, "application/json")
            .query(query);
        if let Some(body) = body {
            request = request.json(body);
        }
        let unreachable = |e: reqwest::Error| ForgeError::Unavailable {
            reason: self
                .token
                .scrub(&format!("`{operation}`: {}", error_chain(&e))),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(unreachable)?;
        if !status.is_success() {
            let message = self.token.scrub(&message_of(&text));
            return Err(classify(operation, status, &headers, message, Utc::now()));
        }
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| ForgeError::Decode {
                operation,
                reason: e.to_string(),
            })?
        };
        let total = headers
            .get("x-total-count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        Ok((value, total))
    }

    /// One call whose answer is one object.
    async fn one<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        method: Method,
        rest: &str,
        body: Option<&Value>,
    ) -> Result<T, ForgeError> {
        let (value, _) = self.send(operation, method, rest, &[], body).await?;
        decode(operation, value)
    }

    /// A list, page after page (`page`, `limit`), until it is empty, holds the total Forgejo
    /// gave, or (without a total) comes short.
    async fn list<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        rest: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<T>, ForgeError> {
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut paged: Vec<(&str, String)> =
                query.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
            paged.push(("page", page.to_string()));
            paged.push(("limit", PAGE_LIMIT.to_string()));
            let (value, total) = self
                .send(operation, Method::GET, rest, &paged, None)
                .await?;
            let got = decode::<Option<Vec<T>>>(operation, value)?.unwrap_or_default();
            let short = got.len() < PAGE_LIMIT;
            let empty = got.is_empty();
            items.extend(got);
            let done = match total {
                Some(total) => empty || items.len() >= total,
                None => short,
            };
            if done {
                return Ok(items);
            }
        }
        tracing::warn!(
            operation,
            pages = MAX_PAGES,
            "a forge list is longer than read; the rest is left"
        );
        Ok(items)
    }

    /// Opens a pull request; a draft's title gets Forgejo's work-in-progress prefix.
    pub async fn create_pull_request(
        &self,
        pr: &NewPullRequest,
    ) -> Result<PullRequest, ForgeError> {
        let title = if pr.draft {
            format!("{DRAFT_PREFIX}{}", pr.title)
        } else {
            pr.title.clone()
        };
        let body = json!({
            "title": title,
            "head": pr.head,
            "base": pr.base,
            "body": pr.body,
        });
        let wire: WirePull = self
            .one("create a pull request", Method::POST, "/pulls", Some(&body))
            .await?;
        Ok(wire.into())
    }

    /// The open pull request from this repository's branch `head`, if there is one: the
    /// open pull requests are read and the one with that head kept.
    pub async fn open_pull_request_from(
        &self,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let wire: Vec<WirePull> = self
            .list("list pull requests", "/pulls", &[("state", "open")])
            .await?;
        Ok(wire
            .into_iter()
            .map(PullRequest::from)
            .find(|p| p.head_ref == head))
    }

    /// Changes the title and/or the body; `None` leaves it.
    pub async fn update_pull_request(
        &self,
        number: u64,
        title: Option<&str>,
        body: Option<&str>,
    ) -> Result<PullRequest, ForgeError> {
        let mut fields = serde_json::Map::new();
        if let Some(title) = title {
            fields.insert("title".into(), title.into());
        }
        if let Some(body) = body {
            fields.insert("body".into(), body.into());
        }
        let wire: WirePull = self
            .one(
                "update a pull request",
                Method::PATCH,
                &format!("/pulls/{number}"),
                Some(&Value::Object(fields)),
            )
            .await?;
        Ok(wire.into())
    }

    pub async fn pull_request(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let wire: WirePull = self
            .one(
                "get a pull request",
                Method::GET,
                &format!("/pulls/{number}"),
                None,
            )
            .await?;
        Ok(wire.into())
    }

    async fn wire_reviews(&self, number: u64) -> Result<Vec<WireReview>, ForgeError> {
        self.list("list reviews", &format!("/pulls/{number}/reviews"), &[])
            .await
    }

    /// A pull request's reviews and the comments on lines of each, oldest first. Forgejo
    /// lists comments per review, so the reviews are read once and the comments of each
    /// that has some follow: every comment given belongs to a review given.
    pub async fn reviews_and_comments(
        &self,
        number: u64,
    ) -> Result<(Vec<Review>, Vec<ReviewComment>), ForgeError> {
        let wire = self.wire_reviews(number).await?;
        let mut comments = Vec::new();
        for review in wire.iter().filter(|r| r.comments_count != Some(0)) {
            let listed: Option<Vec<WireReviewComment>> = self
                .one(
                    "list review comments",
                    Method::GET,
                    &format!("/pulls/{number}/reviews/{}/comments", review.id),
                    None,
                )
                .await?;
            comments.extend(
                listed
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| ReviewComment {
                        id: c.id,
                        review_id: c.pull_request_review_id.or(Some(review.id)),
                        path: c.path,
                        line: line_of(c.position, c.original_position),
                        body: c.body,
                    }),
            );
        }
        comments.sort_by_key(|c| c.id);
        let reviews = wire
            .into_iter()
            .map(|r| Review {
                id: r.id,
                state: review_state(&r.state, r.dismissed),
                body: r.body.unwrap_or_default(),
                author: r.user.map(|u| u.login),
            })
            .collect();
        Ok((reviews, comments))
    }

    /// The statuses of commit `sha` (Forgejo Actions report as statuses): Forgejo has no
    /// check runs, so [`Checks::runs`] is empty. One page: Forgejo gives the newest status of
    /// each context, which a page holds.
    pub async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        let (value, _) = self
            .send(
                "get the combined status",
                Method::GET,
                &format!("/commits/{sha}/status"),
                &[("limit", PAGE_LIMIT.to_string())],
                None,
            )
            .await?;
        let status: WireCombined = decode("get the combined status", value)?;
        Ok(Checks {
            statuses: status
                .statuses
                .unwrap_or_default()
                .into_iter()
                .map(|s| CommitStatus {
                    context: s.context,
                    state: s.status,
                })
                .collect(),
            runs: Vec::new(),
        })
    }

    /// The open issues with `label`, pull requests left out (by `type=issues`, and again by
    /// their `pull_request` field).
    pub async fn labelled_issues(&self, label: &str) -> Result<Vec<Issue>, ForgeError> {
        let wire: Vec<WireIssue> = self
            .list(
                "list issues",
                "/issues",
                &[("state", "open"), ("type", "issues"), ("labels", label)],
            )
            .await?;
        Ok(wire
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .map(|i| Issue {
                number: i.number,
                title: i.title,
                body: i.body.unwrap_or_default(),
                labels: i
                    .labels
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| l.name)
                    .collect(),
                assignee: i
                    .assignee
                    .or_else(|| i.assignees.and_then(|a| a.into_iter().next()))
                    .map(|u| u.login),
                html_url: i.html_url,
            })
            .collect())
    }

    /// Comments on issue or pull request `number`; gives the comment's id.
    pub async fn comment(&self, number: u64, body: &str) -> Result<u64, ForgeError> {
        let wire: WireId = self
            .one(
                "comment on an issue",
                Method::POST,
                &format!("/issues/{number}/comments"),
                Some(&json!({ "body": body })),
            )
            .await?;
        Ok(wire.id)
    }

    /// Adds label `label` by name. Forgejo drops a name the repository has no label of and
    /// answers with the labels the issue has; a label missing from them is refused here, as a
    /// 404, since Forgejo does not make labels on the way.
    pub async fn add_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        let operation = "add a label";
        let labels: Option<Vec<WireLabel>> = self
            .one(
                operation,
                Method::POST,
                &format!("/issues/{number}/labels"),
                Some(&json!({ "labels": [label] })),
            )
            .await?;
        if labels.unwrap_or_default().iter().any(|l| l.name == label) {
            return Ok(());
        }
        Err(ForgeError::Refused {
            operation,
            status: StatusCode::NOT_FOUND.as_u16(),
            message: format!(
                "the repository has no label `{label}`: create it on the forge (Forgejo adds only labels that exist)"
            ),
        })
    }

    /// The status checks branch `branch`'s protection requires, or `None` when it requires
    /// none, is not protected, or is not there.
    pub async fn required_checks(&self, branch: &str) -> Result<Option<Vec<String>>, ForgeError> {
        let read: Result<WireProtectedBranch, ForgeError> = self
            .one(
                "get a branch",
                Method::GET,
                &format!("/branches/{}", path_segment(branch)),
                None,
            )
            .await;
        let branch = match read {
            Err(e) if not_found(&e) => return Ok(None),
            read => read?,
        };
        Ok(branch
            .enable_status_check
            .then_some(branch.status_check_contexts.unwrap_or_default())
            .filter(|names| !names.is_empty()))
    }

    /// Takes label `label` off, by name; one the issue does not have (a 404) is no error.
    pub async fn remove_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        let removed: Result<Option<Value>, ForgeError> = self
            .one(
                "remove a label",
                Method::DELETE,
                &format!("/issues/{number}/labels/{}", path_segment(label)),
                None,
            )
            .await;
        match removed {
            Err(e) if !not_found(&e) => Err(e),
            _ => Ok(()),
        }
    }

    pub async fn close_issue(&self, number: u64) -> Result<(), ForgeError> {
        let _: WireId = self
            .one(
                "close an issue",
                Method::PATCH,
                &format!("/issues/{number}"),
                Some(&json!({ "state": "closed" })),
            )
            .await?;
        Ok(())
    }
}

/// What a review says, from Forgejo's names for its states. A dismissed review is dismissed
/// whatever its state; `REQUEST_REVIEW` (someone was asked to review) is not a review yet.
pub fn review_state(state: &str, dismissed: bool) -> ReviewState {
    if dismissed {
        return ReviewState::Dismissed;
    }
    match state {
        "APPROVED" => ReviewState::Approved,
        "REQUEST_CHANGES" => ReviewState::ChangesRequested,
        "COMMENT" => ReviewState::Commented,
        "PENDING" => ReviewState::Pending,
        other => ReviewState::Other(other.to_owned()),
    }
}

/// The line a comment is on: the new file's, else the old file's; none when Forgejo gives
/// neither (0).
fn line_of(position: u64, original_position: u64) -> Option<u64> {
    [position, original_position].into_iter().find(|l| *l > 0)
}

/// What a failed call means. Forgejo itself limits no rate, but what runs in front of it
/// (a reverse proxy, say) answers 429, with `retry-after` in seconds or as a date, or
/// without it; a 403 is always a refusal (a missing permission). 5xx is an outage.
fn classify(
    operation: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
    message: String,
    now: DateTime<Utc>,
) -> ForgeError {
    if status == StatusCode::TOO_MANY_REQUESTS {
        let until = headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v.trim(), now))
            .unwrap_or(now + chrono::Duration::seconds(DEFAULT_LIMIT_WAIT));
        return ForgeError::RateLimited { until };
    }
    if status.is_server_error() {
        return ForgeError::Unavailable {
            reason: format!("`{operation}`: {status}: {message}"),
        };
    }
    ForgeError::Refused {
        operation,
        status: status.as_u16(),
        message,
    }
}

/// A `retry-after` value: seconds from `now`, or an HTTP date.
fn retry_after(value: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(secs) = value.parse::<i64>() {
        return Some(now + chrono::Duration::seconds(secs.max(0)));
    }
    DateTime::parse_from_rfc2822(value)
        .ok()
        .map(|date| date.to_utc().max(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use reqwest::header::HeaderValue;

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0)
            .single()
            .expect("a time")
    }

    fn classified(status: u16, retry: Option<&str>) -> ForgeError {
        let mut headers = HeaderMap::new();
        if let Some(retry) = retry {
            headers.insert("retry-after", HeaderValue::from_str(retry).expect("value"));
        }
        classify(
            "op",
            StatusCode::from_u16(status).expect("status"),
            &headers,
            "m".into(),
            now(),
        )
    }

    fn waits(err: ForgeError) -> Option<i64> {
        match err {
            ForgeError::RateLimited { until } => Some(until.timestamp() - now().timestamp()),
            _ => None,
        }
    }

    #[test]
    fn a_429_is_a_rate_limit_until_its_retry_after() {
        assert_eq!(waits(classified(429, Some("30"))), Some(30));
        assert_eq!(
            waits(classified(429, Some("Tue, 14 Nov 2023 22:15:20 GMT"))),
            Some(120)
        );
        assert_eq!(waits(classified(429, None)), Some(DEFAULT_LIMIT_WAIT));
        assert_eq!(
            waits(classified(429, Some("soon"))),
            Some(DEFAULT_LIMIT_WAIT)
        );
    }

    #[test]
    fn a_403_is_a_refusal_and_a_5xx_an_outage() {
        let err = classified(403, Some("30"));
        assert!(
            matches!(err, ForgeError::Refused { status: 403, .. }),
            "{err}"
        );
        let err = classified(502, None);
        assert!(matches!(err, ForgeError::Unavailable { .. }), "{err}");
        let err = classified(404, None);
        assert!(
            matches!(err, ForgeError::Refused { status: 404, .. }),
            "{err}"
        );
    }

    #[test]
    fn review_states_read_as_forgejo_names_them() {
        let cases = [
            ("APPROVED", false, ReviewState::Approved),
            ("REQUEST_CHANGES", false, ReviewState::ChangesRequested),
            ("COMMENT", false, ReviewState::Commented),
            ("PENDING", false, ReviewState::Pending),
            (
                "REQUEST_REVIEW",
                false,
                ReviewState::Other("REQUEST_REVIEW".into()),
            ),
            ("REQUEST_CHANGES", true, ReviewState::Dismissed),
        ];
        for (state, dismissed, want) in cases {
            assert_eq!(review_state(state, dismissed), want, "{state} {dismissed}");
        }
    }

    #[test]
    fn a_comment_is_on_the_new_line_else_the_old_one() {
        assert_eq!(line_of(12, 0), Some(12));
        assert_eq!(line_of(0, 7), Some(7));
        assert_eq!(line_of(0, 0), None);
    }

    #[test]
    fn a_repository_must_be_owner_slash_name() {
        for bad in ["x", "a/b/c", "/b", "a/"] {
            assert!(
                Forgejo::new("https://codeberg.org/api/v1", bad, Token::new("t")).is_err(),
                "{bad}"
            );
        }
    }
}
