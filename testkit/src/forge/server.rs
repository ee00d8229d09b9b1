//! The mock's HTTP side: the REST routes the forge client calls, on a loopback port.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use serde_json::{json, Value};

use super::shapes::{self, IssueView, PullView};
use super::{fake_sha, MockGitHub, MockPull, Recorded, State as Inner, WEB};

/// The mock's base URL, which its answers' `url`s start with.
#[derive(Clone)]
struct Ctx {
    mock: MockGitHub,
    api: String,
}

/// Serves `mock` on a loopback port from a task of the current runtime; gives its base URL.
pub async fn serve(mock: MockGitHub) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port for the mock GitHub");
    let addr = listener.local_addr().expect("the mock's address");
    let api = format!("http://{addr}");
    let ctx = Ctx {
        mock,
        api: api.clone(),
    };
    let repo = "/repos/{owner}/{repo}";
    let app = axum::Router::new()
        .route(&format!("{repo}/pulls"), get(list_pulls).post(create_pull))
        .route(
            &format!("{repo}/pulls/{{number}}"),
            get(get_pull).patch(update_pull),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/reviews"),
            get(list_reviews),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/comments"),
            get(list_review_comments),
        )
        .route(
            &format!("{repo}/commits/{{sha}}/status"),
            get(combined_status),
        )
        .route(
            &format!("{repo}/commits/{{sha}}/check-runs"),
            get(check_runs),
        )
        .route(&format!("{repo}/branches/{{branch}}"), get(get_branch))
        .route(&format!("{repo}/issues"), get(list_issues))
        .route(&format!("{repo}/issues/{{number}}"), patch(update_issue))
        .route(
            &format!("{repo}/issues/{{number}}/comments"),
            post(add_comment),
        )
        .route(
            &format!("{repo}/issues/{{number}}/labels"),
            post(add_labels),
        )
        .route(
            &format!("{repo}/issues/{{number}}/labels/{{name}}"),
            delete(remove_label),
        )
        .layer(axum::middleware::from_fn_with_state(ctx.clone(), gate))
        .with_state(ctx);
    tokio::spawn(async move { axum::serve(listener, app).await });
    api
}

/// An answer with a JSON body.
pub(crate) fn reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )],
        body.to_string(),
    )
        .into_response()
}

/// GitHub's error body.
fn error(status: StatusCode, message: &str) -> Response {
    reply(
        status,
        &json!({ "message": message, "documentation_url": "https://docs.github.com/rest" }),
    )
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not Found")
}

/// Records every request, refuses one without a bearer token, and gives a failure the test
/// asked for instead of the answer.
async fn gate(State(ctx): State<Ctx>, request: Request, next: Next) -> Response {
    let (repo, recorded) = record(&request);
    let authorization = recorded.authorization.clone();
    let failure = {
        let mut state = ctx.mock.lock();
        let r = state.repo(&repo);
        r.requests.push(recorded);
        r.failures.pop_front()
    };
    if !authorization.is_some_and(|a| a.starts_with("Bearer ") && a.len() > 7) {
        return error(StatusCode::UNAUTHORIZED, "Requires authentication");
    }
    if let Some(failure) = failure {
        let mut response = error(
            StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &failure.message,
        );
        for (name, value) in failure.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
        return response;
    }
    next.run(request).await
}

/// The repository a request is for (`owner/name`), and what the mock records of it.
pub(crate) fn record(request: &Request) -> (String, Recorded) {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let path = request.uri().path();
    let repo = path
        .strip_prefix("/repos/")
        .map(|rest| rest.split('/').take(2).collect::<Vec<_>>().join("/"))
        .unwrap_or_default();
    let recorded = Recorded {
        method: request.method().to_string(),
        path: request
            .uri()
            .path_and_query()
            .map_or(path.to_owned(), |p| p.to_string()),
        authorization: header("authorization"),
        accept: header("accept"),
        api_version: header("x-github-api-version"),
        user_agent: header("user-agent"),
    };
    (repo, recorded)
}

pub(crate) fn body_of(bytes: &Bytes) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

fn bad_json() -> Response {
    error(StatusCode::BAD_REQUEST, "Problems parsing JSON")
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

type RepoPath = Path<(String, String)>;
type NumberPath = Path<(String, String, u64)>;
type ShaPath = Path<(String, String, String)>;

async fn create_pull(State(ctx): State<Ctx>, Path((o, r)): RepoPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(title), Some(head), Some(base)) = (field("title"), field("head"), field("base"))
    else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
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
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("A pull request already exists for {o}:{head}."),
        );
    }
    rs.last_number += 1;
    let number = rs.last_number;
    let pull = MockPull {
        number,
        title,
        body: field("body").unwrap_or_default(),
        head,
        head_sha: fake_sha(number),
        base,
        draft: body.get("draft").and_then(Value::as_bool).unwrap_or(false),
        open: true,
        mergeable: Some(true),
        ..MockPull::default()
    };
    let answer = pull_json(&ctx, &repo, &pull);
    rs.pulls.insert(number, pull);
    reply(StatusCode::CREATED, &answer)
}

/// Pull requests, newest first, filtered by `state` (open when absent) and `head`
/// (`owner:branch`).
async fn list_pulls(
    State(ctx): State<Ctx>,
    Path((o, r)): RepoPath,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let repo = format!("{o}/{r}");
    let open_only = query.get("state").is_none_or(|s| s == "open");
    let head = query.get("head").map(|h| match h.split_once(':') {
        Some((owner, branch)) if owner == o => branch.to_owned(),
        Some(_) => String::new(),
        None => h.clone(),
    });
    let mut state = ctx.mock.lock();
    let mut list: Vec<&MockPull> = state
        .repo(&repo)
        .pulls
        .values()
        .filter(|p| p.open || !open_only)
        .filter(|p| head.as_ref().is_none_or(|h| &p.head == h))
        .collect();
    list.sort_by_key(|p| std::cmp::Reverse(p.number));
    let answer: Vec<Value> = list.iter().map(|p| pull_json(&ctx, &repo, p)).collect();
    reply(StatusCode::OK, &Value::Array(answer))
}

async fn get_pull(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    match state.repo(&repo).pulls.get(&n) {
        Some(p) => reply(StatusCode::OK, &pull_json(&ctx, &repo, p)),
        None => not_found(),
    }
}

async fn update_pull(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath, body: Bytes) -> Response {
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
    }
    if let Some(text) = body.get("body").and_then(Value::as_str) {
        p.body = text.into();
    }
    let p = p.clone();
    reply(StatusCode::OK, &pull_json(&ctx, &repo, &p))
}

async fn list_reviews(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(p) = state.repo(&repo).pulls.get(&n) else {
        return not_found();
    };
    let list: Vec<Value> = p
        .reviews
        .iter()
        .map(|v| shapes::review(&ctx.api, WEB, &repo, n, v))
        .collect();
    reply(StatusCode::OK, &Value::Array(list))
}

async fn list_review_comments(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let Some(p) = state.repo(&repo).pulls.get(&n) else {
        return not_found();
    };
    let list: Vec<Value> = p
        .review_comments
        .iter()
        .map(|c| shapes::review_comment(&ctx.api, WEB, &repo, n, c))
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
        .map(|s| shapes::status(&ctx.api, &repo, s.id, &s.context, &s.state))
        .collect();
    reply(
        StatusCode::OK,
        &shapes::combined(&ctx.api, &repo, &sha, statuses),
    )
}

async fn check_runs(State(ctx): State<Ctx>, Path((o, r, sha)): ShaPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let runs: Vec<Value> = state
        .repo(&repo)
        .runs
        .get(&sha)
        .into_iter()
        .flatten()
        .map(|c| shapes::check_run(&ctx.api, WEB, &repo, &sha, c))
        .collect();
    reply(
        StatusCode::OK,
        &json!({ "total_count": runs.len(), "check_runs": runs }),
    )
}

/// Open issues and pull requests (which GitHub lists as issues too), filtered by `labels`
/// (all of the comma-separated names) and `state`.
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
    let open_only = query.get("state").is_none_or(|s| s == "open");
    let has = |labels: &[String]| wanted.iter().all(|w| labels.iter().any(|l| l == w));
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    let mut list: Vec<(u64, Value)> = Vec::new();
    for i in rs
        .issues
        .values()
        .filter(|i| (i.open || !open_only) && has(&i.labels))
    {
        let view = IssueView {
            number: i.number,
            title: &i.title,
            body: &i.body,
            open: i.open,
            labels: &i.labels,
            comments: i.comments.len(),
            pull_request: false,
        };
        list.push((i.number, shapes::issue(&ctx.api, WEB, &repo, &view)));
    }
    for p in rs
        .pulls
        .values()
        .filter(|p| (p.open || !open_only) && has(&p.labels))
    {
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
    list.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    reply(
        StatusCode::OK,
        &Value::Array(list.into_iter().map(|(_, v)| v).collect()),
    )
}

/// Changes an issue's state (or a pull request's, through the issues API).
async fn update_issue(
    State(ctx): State<Ctx>,
    Path((o, r, n)): NumberPath,
    body: Bytes,
) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    let Some(i) = rs.issues.get_mut(&n) else {
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
    let view = IssueView {
        number: i.number,
        title: &i.title,
        body: &i.body,
        open: i.open,
        labels: &i.labels,
        comments: i.comments.len(),
        pull_request: false,
    };
    reply(StatusCode::OK, &shapes::issue(&ctx.api, WEB, &repo, &view))
}

async fn add_comment(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let Some(text) = body.get("body").and_then(Value::as_str).map(str::to_owned) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    };
    let repo = format!("{o}/{r}");
    let mut state: std::sync::MutexGuard<'_, Inner> = ctx.mock.lock();
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
        &shapes::issue_comment(&ctx.api, WEB, &repo, n, id, &text),
    )
}

async fn add_labels(State(ctx): State<Ctx>, Path((o, r, n)): NumberPath, body: Bytes) -> Response {
    let Some(body) = body_of(&body) else {
        return bad_json();
    };
    let names: Vec<String> = body
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str().map(str::to_owned))
        .collect();
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
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

/// Takes a label off an issue or a pull request: the labels left, or a 404 when it has not
/// that label.
async fn remove_label(
    State(ctx): State<Ctx>,
    Path((o, r, n, name)): Path<(String, String, u64, String)>,
) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let rs = state.repo(&repo);
    let Some(labels) = rs.labels_of(n) else {
        return not_found();
    };
    if !labels.contains(&name) {
        return error(StatusCode::NOT_FOUND, "Label does not exist");
    }
    labels.retain(|l| *l != name);
    let list: Vec<Value> = labels
        .iter()
        .map(|l| shapes::label(&ctx.api, &repo, l))
        .collect();
    reply(StatusCode::OK, &Value::Array(list))
}

/// A branch and its protection: protected with the checks a test required, else not.
async fn get_branch(State(ctx): State<Ctx>, Path((o, r, branch)): ShaPath) -> Response {
    let repo = format!("{o}/{r}");
    let mut state = ctx.mock.lock();
    let required = state.repo(&repo).required_checks.get(&branch).cloned();
    let answer = shapes::protected_branch(&ctx.api, WEB, &repo, &branch, required.as_deref());
    reply(StatusCode::OK, &answer)
}
