//! GitHub's REST API (version `2022-11-28`): the calls [`super::Forge`] makes, and what their
//! answers mean.
//!
//! The answers are read into small structs holding only what catalyst acts on, so a field
//! GitHub adds or drops elsewhere changes nothing here; the tests check the requests and the
//! mock's answers against GitHub's published OpenAPI description, so a field read here that
//! GitHub does not send fails a test rather than the daemon.

use chrono::{DateTime, TimeZone, Utc};
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::http::{
    check_repository, client, decode, error_chain, message_of, not_found, path_segment,
};
use super::{ForgeError, Token};
use crate::domain::forge::{
    CheckRun, Checks, CommitStatus, Issue, NewPullRequest, PullRequest, Review, ReviewComment,
    ReviewState,
};
use wire::{
    WireBranch, WireCheckRuns, WireCombined, WireId, WireIssue, WireLabel, WirePull, WireReview,
    WireReviewComment,
};

mod wire;

/// The API version the client is written against.
const API_VERSION: &str = "2022-11-28";
/// Items per page of a list; the most GitHub gives.
const PER_PAGE: &str = "100";
/// Pages of a list read at most: a list longer than this is cut rather than read forever.
const MAX_PAGES: usize = 20;
/// How long to wait after a rate limit that says nothing of when it ends.
const DEFAULT_LIMIT_WAIT: i64 = 60;

/// A client for one GitHub repository.
#[derive(Clone, Debug)]
pub struct GitHub {
    client: reqwest::Client,
    /// The API's base URL, without a trailing `/`.
    api: String,
    /// `owner/name`.
    repository: String,
    token: Token,
}

impl GitHub {
    /// A client for `repository` (`owner/name`) on the API at `api`.
    pub fn new(api: &str, repository: &str, token: Token) -> Result<Self, ForgeError> {
        check_repository(repository)?;
        let client = client()?;
        Ok(Self {
            client,
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
    /// and the next page's URL, if any.
    async fn send(
        &self,
        operation: &'static str,
        method: Method,
        url: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(Value, Option<String>), ForgeError> {
        let mut request = self
            .client
            .request(method, url)
            .header(AUTHORIZATION, format!("Bearer {}", self.token.secret()))
            .header(ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .query(query);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| ForgeError::Unavailable {
            reason: self
                .token
                .scrub(&format!("`{operation}`: {}", error_chain(&e))),
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|e| ForgeError::Unavailable {
            reason: self
                .token
                .scrub(&format!("`{operation}`: {}", error_chain(&e))),
        })?;
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
        Ok((value, next_page(&headers)))
    }

    /// One call whose answer is one object.
    async fn one<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        method: Method,
        rest: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<T, ForgeError> {
        let (value, _) = self
            .send(operation, method, &self.url(rest), query, body)
            .await?;
        decode(operation, value)
    }

    /// A list, page after page.
    async fn list<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        rest: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<T>, ForgeError> {
        let mut query = query.to_vec();
        query.push(("per_page", PER_PAGE));
        let mut items = Vec::new();
        let (value, mut next) = self
            .send(operation, Method::GET, &self.url(rest), &query, None)
            .await?;
        items.extend(decode::<Vec<T>>(operation, value)?);
        let mut pages = 1;
        while let Some(url) = next.take() {
            if pages >= MAX_PAGES {
                tracing::warn!(
                    operation,
                    pages,
                    "a forge list is longer than read; the rest is left"
                );
                break;
            }
            let (value, more) = self.send(operation, Method::GET, &url, &[], None).await?;
            items.extend(decode::<Vec<T>>(operation, value)?);
            next = more;
            pages += 1;
        }
        Ok(items)
    }

    pub async fn create_pull_request(
        &self,
        pr: &NewPullRequest,
    ) -> Result<PullRequest, ForgeError> {
        let body = json!({
            "title": pr.title,
            "head": pr.head,
            "base": pr.base,
            "body": pr.body,
            "draft": pr.draft,
        });
        let wire: WirePull = self
            .one(
                "create a pull request",
                Method::POST,
                "/pulls",
                &[],
                Some(&body),
            )
            .await?;
        Ok(wire.into())
    }

    /// The open pull request from this repository's branch `head`, if there is one.
    pub async fn open_pull_request_from(
        &self,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let owner = self.repository.split('/').next().unwrap_or_default();
        let wire: Vec<WirePull> = self
            .list(
                "list pull requests",
                "/pulls",
                &[("state", "open"), ("head", &format!("{owner}:{head}"))],
            )
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
                &[],
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
                &[],
                None,
            )
            .await?;
        Ok(wire.into())
    }

    pub async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
        let wire: Vec<WireReview> = self
            .list("list reviews", &format!("/pulls/{number}/reviews"), &[])
            .await?;
        Ok(wire
            .into_iter()
            .map(|r| Review {
                id: r.id,
                state: ReviewState::parse(&r.state),
                body: r.body.unwrap_or_default(),
                author: r.user.map(|u| u.login),
            })
            .collect())
    }

    pub async fn review_comments(&self, number: u64) -> Result<Vec<ReviewComment>, ForgeError> {
        let wire: Vec<WireReviewComment> = self
            .list(
                "list review comments",
                &format!("/pulls/{number}/comments"),
                &[],
            )
            .await?;
        Ok(wire
            .into_iter()
            .map(|c| ReviewComment {
                id: c.id,
                review_id: c.pull_request_review_id,
                path: c.path,
                line: c.line.or(c.original_line),
                body: c.body,
            })
            .collect())
    }

    /// The combined status and the check runs of commit `sha`.
    pub async fn checks(&self, sha: &str) -> Result<Checks, ForgeError> {
        let status: WireCombined = self
            .one(
                "get the combined status",
                Method::GET,
                &format!("/commits/{sha}/status"),
                &[("per_page", PER_PAGE)],
                None,
            )
            .await?;
        let runs: WireCheckRuns = self
            .one(
                "list check runs",
                Method::GET,
                &format!("/commits/{sha}/check-runs"),
                &[("per_page", PER_PAGE)],
                None,
            )
            .await?;
        Ok(Checks {
            statuses: status
                .statuses
                .into_iter()
                .map(|s| CommitStatus {
                    context: s.context,
                    state: s.state,
                })
                .collect(),
            runs: runs
                .check_runs
                .into_iter()
                .map(|r| CheckRun {
                    name: r.name,
                    status: r.status,
                    conclusion: r.conclusion,
                })
                .collect(),
        })
    }

    /// The open issues with `label`. GitHub lists pull requests as issues too; they are left
    /// out.
    pub async fn labelled_issues(&self, label: &str) -> Result<Vec<Issue>, ForgeError> {
        let wire: Vec<WireIssue> = self
            .list(
                "list issues",
                "/issues",
                &[("state", "open"), ("labels", label)],
            )
            .await?;
        Ok(wire
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .map(|i| Issue {
                number: i.number,
                title: i.title,
                body: i.body.unwrap_or_default(),
                labels: i.labels.into_iter().filter_map(WireLabel::name).collect(),
                assignee: i.assignee.map(|u| u.login),
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
                &[],
                Some(&json!({ "body": body })),
            )
            .await?;
        Ok(wire.id)
    }

    pub async fn add_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        let _: Vec<WireLabel> = self
            .one(
                "add a label",
                Method::POST,
                &format!("/issues/{number}/labels"),
                &[],
                Some(&json!({ "labels": [label] })),
            )
            .await?;
        Ok(())
    }

    /// The checks branch `branch`'s protection requires (its required status checks'
    /// contexts), or `None` when it requires none, is not protected, or is not there.
    pub async fn required_checks(&self, branch: &str) -> Result<Option<Vec<String>>, ForgeError> {
        let read: Result<WireBranch, ForgeError> = self
            .one(
                "get a branch",
                Method::GET,
                &format!("/branches/{}", path_segment(branch)),
                &[],
                None,
            )
            .await;
        let branch = match read {
            Err(e) if not_found(&e) => return Ok(None),
            read => read?,
        };
        let required = branch
            .protection
            .and_then(|p| p.required_status_checks)
            .map(|r| {
                let mut names = r.contexts;
                names.extend(r.checks.into_iter().map(|c| c.context));
                names.sort();
                names.dedup();
                names
            });
        Ok(required.filter(|names| !names.is_empty()))
    }

    /// Takes label `label` off; one the issue does not have (a 404) is no error.
    pub async fn remove_label(&self, number: u64, label: &str) -> Result<(), ForgeError> {
        let removed: Result<Vec<WireLabel>, ForgeError> = self
            .one(
                "remove a label",
                Method::DELETE,
                &format!("/issues/{number}/labels/{}", path_segment(label)),
                &[],
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
                &[],
                Some(&json!({ "state": "closed" })),
            )
            .await?;
        Ok(())
    }
}

/// What a failed call means. 403 and 429 are a rate limit when GitHub says so (no requests
/// left, or a `retry-after`); a 403 without either is a refusal (no permission).
fn classify(
    operation: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
    message: String,
    now: DateTime<Utc>,
) -> ForgeError {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let retry_after = header("retry-after").and_then(|v| v.parse::<i64>().ok());
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    if status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN && (exhausted || retry_after.is_some()))
    {
        let reset = header("x-ratelimit-reset")
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|secs| Utc.timestamp_opt(secs, 0).single());
        let until = match (retry_after, reset) {
            (Some(secs), _) => now + chrono::Duration::seconds(secs.max(0)),
            (None, Some(reset)) if exhausted && reset > now => reset,
            _ => now + chrono::Duration::seconds(DEFAULT_LIMIT_WAIT),
        };
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

/// The `rel="next"` URL of a `Link` header.
fn next_page(headers: &HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_owned()
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        map
    }

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0)
            .single()
            .expect("a time")
    }

    #[test]
    fn rate_limits_say_until_when() {
        let limited = |status: u16, pairs: &[(&'static str, &str)]| match classify(
            "op",
            StatusCode::from_u16(status).expect("status"),
            &headers(pairs),
            "m".into(),
            now(),
        ) {
            ForgeError::RateLimited { until } => Some(until.timestamp() - now().timestamp()),
            _ => None,
        };
        assert_eq!(limited(429, &[("retry-after", "30")]), Some(30));
        assert_eq!(
            limited(
                403,
                &[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "1700000100")
                ]
            ),
            Some(100)
        );
        assert_eq!(limited(403, &[("retry-after", "5")]), Some(5));
        assert_eq!(limited(429, &[]), Some(DEFAULT_LIMIT_WAIT));
        assert_eq!(limited(403, &[("x-ratelimit-remaining", "12")]), None);
        assert_eq!(limited(403, &[]), None);
    }

    #[test]
    fn server_errors_are_outages_and_others_refusals() {
        let err = classify(
            "get",
            StatusCode::BAD_GATEWAY,
            &HeaderMap::new(),
            "down".into(),
            now(),
        );
        assert!(matches!(err, ForgeError::Unavailable { .. }), "{err}");
        assert!(err.is_transient());
        let err = classify(
            "get",
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            "Not Found".into(),
            now(),
        );
        assert!(
            matches!(err, ForgeError::Refused { status: 404, .. }),
            "{err}"
        );
        assert!(!err.is_transient());
    }

    #[test]
    fn the_next_page_comes_from_the_link_header() {
        let h = headers(&[(
            "link",
            "<https://api.github.com/x?page=2>; rel=\"next\", <https://api.github.com/x?page=5>; rel=\"last\"",
        )]);
        assert_eq!(
            next_page(&h).as_deref(),
            Some("https://api.github.com/x?page=2")
        );
        assert_eq!(next_page(&HeaderMap::new()), None);
    }

    #[test]
    fn a_repository_must_be_owner_slash_name() {
        for bad in ["x", "a/b/c", "/b", "a/"] {
            assert!(
                GitHub::new("https://api.github.com", bad, Token::new("t")).is_err(),
                "{bad}"
            );
        }
    }
}
