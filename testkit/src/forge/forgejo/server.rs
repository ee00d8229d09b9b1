//! The Forgejo mock's HTTP side: the routes of Forgejo's API v1 the Forgejo client calls, on a
//! loopback port, over the shared state.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use serde_json::{json, Value};

use super::super::server::{body_of, record, reply};
use super::super::shapes::{IssueView, PullView};
use super::super::{fake_sha, MockGitHub, MockIssue, MockPull, Repo};
use super::{shapes, WEB};

/// The mock's state, and the base URL its answers' API URLs start with.
#[derive(Clone)]
struct Ctx {
    mock: MockGitHub,
    api: String,
}

/// A list's page size when the request names none, and the most it may name: Forgejo's
/// defaults (`DEFAULT_PAGING_NUM`, `MAX_RESPONSE_ITEMS`).
const DEFAULT_LIMIT: usize = 30;
const MAX_LIMIT: usize = 50;

/// Serves `mock` as a Forgejo on a loopback port from a task of the current runtime; gives
/// its base URL (what `/api/v1` is on a real Forgejo).
pub async fn serve(mock: MockGitHub) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port for the mock Forgejo");
    let addr = listener.local_addr().expect("the mock's address");
    let api = format!("http://{addr}");
    // Answers name a public-looking API URL, as a Forgejo names its `ROOT_URL`: the
    // description's `url` format refuses loopback addresses.
    let ctx = Ctx {
        mock,
        api: format!("{WEB}/api/v1"),
    };
    let repo = "/repos/{owner}/{repo}";
    let app = axum::Router::new()
        .route(&format!("{repo}/pulls"), get(list_pulls).post(create_pull))
        .route(
            &format!("{repo}/pulls/{{index}}"),
            get(get_pull).patch(update_pull),
        )
        .route(
            &format!("{repo}/pulls/{{index}}/reviews"),
            get(list_reviews),
        )
        .route(
            &format!("{repo}/pulls/{{index}}/reviews/{{id}}/comments"),
            get(list_review_comments),
        )
        .route(
            &format!("{repo}/commits/{{sha}}/status"),
            get(combined_status),
        )
        .route(&format!("{repo}/branches/{{branch}}"), get(get_branch))
        .route(&format!("{repo}/issues"), get(list_issues))
        .route(&format!("{repo}/issues/{{index}}"), patch(update_issue))
        .route(
            &format!("{repo}/issues/{{index}}/comments"),
            post(add_comment),
        )
        .route(&format!("{repo}/issues/{{index}}/labels"), post(add_labels))
        .route(
            &format!("{repo}/issues/{{index}}/labels/{{identifier}}"),
            delete(remove_label),
        )
        .layer(axum::middleware::from_fn_with_state(ctx.clone(), gate))
        .with_state(ctx);
    tokio::spawn(async move { axum::serve(listener, app).await });
    api
}

/// Forgejo's error body (`APIError`).
fn error(status: StatusCode, message: &str) -> Response {
    reply(
        status,
        &json!({ "message": message, "url": format!("{WEB}/api/swagger") }),
    )
}

fn not_found() -> Response {
    reply(
        StatusCode::NOT_FOUND,
        &json!({ "message": "The target couldn't be found.", "url": format!("{WEB}/api/swagger"), "errors": [] }),
    )
}

fn bad_json() -> Response {
    error(StatusCode::UNPROCESSABLE_ENTITY, "invalid JSON body")
}

/// Records every request, refuses one without `Authorization: token …`, and gives a failure
/// the test asked for instead of the answer. A failure with a 2xx status is an answer no
/// operation gives: its message alone, as a JSON string.
async fn gate(State(ctx): State<Ctx>, request: Request, next: Next) -> Response {
    let (repo, recorded) = record(&request);
    let authorization = recorded.authorization.clone();
    let failure = {
        let mut state = ctx.mock.lock();
        let r = state.repo(&repo);
        r.requests.push(recorded);
        r.failures.pop_front()
    };
    if !authorization.is_some_and(|a| a.starts_with("token ") && a.len() > 6) {
        return error(StatusCode::UNAUTHORIZED, "token is required");
    }
    let Some(failure) = failure else {
        return next.run(request).await;
    };
    let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = if status.is_success() {
        reply(status, &json!(failure.message))
    } else {
        error(status, &failure.message)
    };
    for (name, value) in failure.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// One page of `items` as Forgejo pages a list (`page` from 1, `limit` at most
/// [`MAX_LIMIT`]), with the whole list's length in `X-Total-Count`.
fn page(items: Vec<Value>, query: &HashMap<String, String>) -> Response {
    let number = |key: &str| query.get(key).and_then(|v| v.parse::<usize>().ok());
    let limit = number("limit")
        .filter(|l| *l > 0)
        .unwrap_or(DEFAULT_LIMIT)
        .min(MAX_LIMIT);
    let page = number("page").unwrap_or(1).max(1);
    let total = items.len();
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * limit)
        .take(limit)
        .collect();
    let mut response = reply(StatusCode::OK, &Value::Array(shown));
    response
        .headers_mut()
        .insert("x-total-count", HeaderValue::from(total));
    response
}

fn pull_json(ctx: &Ctx, repo: &str, p: &MockPull) -> Value {
    shapes::pull(
        &ctx.api,
        WEB,
        repo,
        &PullView {
            number: p.number,
            title: &p.title,
            body: &p.body,
            head: &p.head,
            head_sha: &p.head_sha,
            base: &p.base,
            draft: p.draft,
            open: p.open,
            merged: p.merged,
            mergeable: p.mergeable,
            labels: &p.labels,
            comments: p.comments.len(),
            review_comments: p.review_comments.len(),
        },
    )
}

fn issue_json(ctx: &Ctx, repo: &str, i: &MockIssue) -> Value {
    let view = IssueView {
        number: i.number,
        title: &i.title,
        body: &i.body,
        open: i.open,
        labels: &i.labels,
        comments: i.comments.len(),
        pull_request: false,
    };
    shapes::issue(&ctx.api, WEB, repo, &view)
}

/// Whether `title` marks a draft: Forgejo's default work-in-progress prefixes.
fn is_draft(title: &str) -> bool {
    ["WIP:", "[WIP]"]
        .iter()
        .any(|prefix| title.to_ascii_uppercase().starts_with(prefix))
}

type RepoPath = Path<(String, String)>;
type IndexPath = Path<(String, String, u64)>;
type ReviewPath = Path<(String, String, u64, u64)>;
type ShaPath = Path<(String, String, String)>;

async fn create_pull(State(ctx): State<Ctx>, Path((o, r)): RepoPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(title), Some(head), Some(base)) = (field("title"), field("head"), field("base"))
    else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "title, head and base are required",
        );
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    if rs
        .pulls
        .values()
        .any(|p| p.open && p.head == head && p.base == base)
    {
        return error(
            StatusCode::CONFLICT,
            &format!("pull request already exists for these targets [head: {head}, base: {base}]"),
        );
    }
    rs.last_number += 1;
    let number = rs.last_number;
    let pull = MockPull {
        number,
        draft: is_draft(&title),
        title,
        body: field("body").unwrap_or_default(),
        head,
        head_sha: fake_sha(number),
        base,
        open: true,
        mergeable: Some(true),
        ..MockPull::default()
    };
    let answer = pull_json(&ctx, &repo, &pull);
    rs.pulls.insert(number, pull);
    reply(StatusCode::CREATED, &answer)
}

/// Pull requests, newest first, filtered by `state` (open when absent), a page at a time.
async fn list_pulls(
    State(ctx): State<Ctx>,
    Path((o, r)): RepoPath,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let repo = format!("{o}/{r}");
    let state_wanted = query.get("state").map_or("open", String::as_str);
    let mut state = ctx.mock.lock();
    let mut list: Vec<&MockPull> = state
        .repo(&repo)
        .pulls
        .values()
        .filter(|p| match state_wanted {
            "all" => true,
            "closed" => !p.open,
            _ => p.open,
        })
        .collect();
    list.sort_by_key(|p| std::cmp::Reverse(p.number));
    let answer: Vec<Value> = list.iter().map(|p| pull_json(&ctx, &repo, p)).collect();
    page(answer, &query)
}

async fn get_pull(State(ctx): State<Ctx>, Path((o, r, n)): IndexPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    match state.repo(&repo).pulls.get(&n) {
        Some(p) => reply(StatusCode::OK, &pull_json(&ctx, &repo, p)),
        None => not_found(),
    }
}

/// Edits a pull request; Forgejo answers 201.
async fn update_pull(State(ctx): State<Ctx>, Path((o, r, n)): IndexPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(p) = state.repo(&repo).pulls.get_mut(&n) else {
        return not_found();
    };
    if let Some(title) = body.get("title").and_then(Value::as_str) {
        p.title = title.into();
        p.draft = is_draft(title);
    }
    if let Some(text) = body.get("body").and_then(Value::as_str) {
        p.body = text.into();
    }
    let p = p.clone();
    reply(StatusCode::CREATED, &pull_json(&ctx, &repo, &p))
}

async fn list_reviews(
    State(ctx): State<Ctx>,
    Path((o, r, n)): IndexPath,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(p) = state.repo(&repo).pulls.get(&n) else {
        return not_found();
    };
    let list: Vec<Value> = p
        .reviews
        .iter()
        .map(|v| {
            let comments = p
                .review_comments
                .iter()
                .filter(|c| c.review == v.id)
                .count();
            shapes::review(WEB, &repo, n, v, comments)
        })
        .collect();
    page(list, &query)
}

async fn list_review_comments(State(ctx): State<Ctx>, Path((o, r, n, id)): ReviewPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(p) = state.repo(&repo).pulls.get(&n) else {
        return not_found();
    };
    if !p.reviews.iter().any(|v| v.id == id) {
        return not_found();
    }
    let list: Vec<Value> = p
        .review_comments
        .iter()
        .filter(|c| c.review == id)
        .map(|c| shapes::review_comment(WEB, &repo, n, c))
        .collect();
    reply(StatusCode::OK, &Value::Array(list))
}

async fn combined_status(State(ctx): State<Ctx>, Path((o, r, sha)): ShaPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let statuses: Vec<Value> = state
        .repo(&repo)
        .statuses
        .get(&sha)
        .into_iter()
        .flatten()
        .map(|s| shapes::status(&ctx.api, WEB, &repo, s.id, &s.context, &s.state))
        .collect();
    let mut response = reply(
        StatusCode::OK,
        &shapes::combined(&ctx.api, WEB, &repo, &sha, statuses),
    );
    let total = state.repo(&repo).statuses.get(&sha).map_or(0, Vec::len);
    response
        .headers_mut()
        .insert("x-total-count", HeaderValue::from(total));
    response
}

/// Issues and pull requests, newest first, filtered by `state` (open when absent), `type`
/// and `labels` (any of the comma-separated names).
async fn list_issues(
    State(ctx): State<Ctx>,
    Path((o, r)): RepoPath,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let repo = format!("{o}/{r}");
    let wanted: Vec<&str> = query
        .get("labels")
        .map(|l| l.split(',').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let state_wanted = query.get("state").map_or("open", String::as_str);
    let kind = query.get("type").map(String::as_str);
    let shown = |open: bool, labels: &[String]| {
        let state_ok = match state_wanted {
            "all" => true,
            "closed" => !open,
            _ => open,
        };
        state_ok && (wanted.is_empty() || wanted.iter().any(|w| labels.iter().any(|l| l == w)))
    };
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    let mut list: Vec<(u64, Value)> = Vec::new();
    if kind != Some("pulls") {
        for i in rs.issues.values().filter(|i| shown(i.open, &i.labels)) {
            list.push((i.number, issue_json(&ctx, &repo, i)));
        }
    }
    if kind != Some("issues") {
        for p in rs.pulls.values().filter(|p| shown(p.open, &p.labels)) {
            let view = IssueView {
                number: p.number,
                title: &p.title,
                body: &p.body,
                open: p.open,
                labels: &p.labels,
                comments: p.comments.len(),
                pull_request: true,
            };
            list.push((p.number, shapes::issue(&ctx.api, WEB, &repo, &view)));
        }
    }
    list.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    page(list.into_iter().map(|(_, v)| v).collect(), &query)
}

/// Edits an issue; Forgejo answers 201.
async fn update_issue(State(ctx): State<Ctx>, Path((o, r, n)): IndexPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(i) = state.repo(&repo).issues.get_mut(&n) else {
        return not_found();
    };
    match body.get("state").and_then(Value::as_str) {
        Some("closed") => i.open = false,
        Some("open") => i.open = true,
        _ => {}
    }
    if let Some(title) = body.get("title").and_then(Value::as_str) {
        i.title = title.into();
    }
    let i = i.clone();
    reply(StatusCode::CREATED, &issue_json(&ctx, &repo, &i))
}

async fn add_comment(State(ctx): State<Ctx>, Path((o, r, n)): IndexPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let Some(text) = body.get("body").and_then(Value::as_str).map(str::to_owned) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "body is required");
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let id = state.next_id();
    let rs = state.repo(&repo);
    if let Some(i) = rs.issues.get_mut(&n) {
        i.comments.push(text.clone());
    } else if let Some(p) = rs.pulls.get_mut(&n) {
        p.comments.push(text.clone());
    } else {
        return not_found();
    }
    reply(
        StatusCode::CREATED,
        &shapes::comment(&ctx.api, WEB, &repo, n, id, &text),
    )
}

/// The labels that exist in a repository: those made in it and those its issues and pull
/// requests carry.
fn existing_labels(rs: &Repo) -> Vec<String> {
    let carried = rs
        .issues
        .values()
        .flat_map(|i| i.labels.iter())
        .chain(rs.pulls.values().flat_map(|p| p.labels.iter()));
    let mut all: Vec<String> = rs.labels.iter().chain(carried).cloned().collect();
    all.sort();
    all.dedup();
    all
}

/// Adds labels by name (or id) to an issue or pull request; names the repository has no
/// label of are dropped, as Forgejo does. Answers with the labels it has now.
async fn add_labels(State(ctx): State<Ctx>, Path((o, r, n)): IndexPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    let existing = existing_labels(rs);
    let names: Vec<String> = body
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| existing.iter().any(|e| e == name))
        .map(str::to_owned)
        .collect();
    let Some(labels) = rs.labels_of(n) else {
        return not_found();
    };
    for name in names {
        if !labels.contains(&name) {
            labels.push(name);
        }
    }
    let list: Vec<Value> = labels
        .iter()
        .map(|l| shapes::label(&ctx.api, &repo, l))
        .collect();
    reply(StatusCode::OK, &Value::Array(list))
}

/// Takes a label off an issue or a pull request, by name; Forgejo answers 204, or 404 when
/// the repository has no such label.
async fn remove_label(
    State(ctx): State<Ctx>,
    Path((o, r, n, name)): Path<(String, String, u64, String)>,
) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    if !existing_labels(rs).contains(&name) {
        return not_found();
    }
    let Some(labels) = rs.labels_of(n) else {
        return not_found();
    };
    labels.retain(|l| *l != name);
    StatusCode::NO_CONTENT.into_response()
}

/// A branch: protected with the status checks a test required, else not.
async fn get_branch(State(ctx): State<Ctx>, Path((o, r, branch)): ShaPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let required = state.repo(&repo).required_checks.get(&branch).cloned();
    reply(
        StatusCode::OK,
        &shapes::protected_branch(WEB, &repo, &branch, required.as_deref()),
    )
}
