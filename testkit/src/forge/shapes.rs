//! The mock's answers as GitHub shapes them: every field GitHub's OpenAPI description marks
//! required for the object (so the validator passes them), with made-up but well-formed
//! values where the mock keeps no state.

use serde_json::{json, Map, Value};

use super::{MockReview, MockReviewComment, MockRun};

/// When every object of the mock was made and last changed: state changes are what tests look
/// at, not times.
const TIME: &str = "2026-01-01T00:00:00Z";

/// The `*_url` fields of a user.
const USER_URLS: &[&str] = &[
    "avatar_url",
    "events_url",
    "followers_url",
    "following_url",
    "gists_url",
    "html_url",
    "organizations_url",
    "received_events_url",
    "repos_url",
    "starred_url",
    "subscriptions_url",
    "url",
];

/// The `*_url` fields a minimal repository has.
const REPO_URLS: &[&str] = &[
    "archive_url",
    "assignees_url",
    "blobs_url",
    "branches_url",
    "collaborators_url",
    "comments_url",
    "commits_url",
    "compare_url",
    "contents_url",
    "contributors_url",
    "deployments_url",
    "downloads_url",
    "events_url",
    "forks_url",
    "git_commits_url",
    "git_refs_url",
    "git_tags_url",
    "hooks_url",
    "html_url",
    "issue_comment_url",
    "issue_events_url",
    "issues_url",
    "keys_url",
    "labels_url",
    "languages_url",
    "merges_url",
    "milestones_url",
    "notifications_url",
    "pulls_url",
    "releases_url",
    "stargazers_url",
    "statuses_url",
    "subscribers_url",
    "subscription_url",
    "tags_url",
    "teams_url",
    "trees_url",
    "url",
];

/// The URL fields a full repository has besides a minimal one's.
const FULL_REPO_URLS: &[&str] = &["clone_url", "git_url", "ssh_url", "svn_url"];

/// A stable id for a name, so a user or repository has the same id in every answer.
fn id_of(name: &str) -> u64 {
    name.bytes()
        .fold(1_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % 1_000_000_000
        + 1
}

fn urls(base: &str, names: &[&str], into: &mut Map<String, Value>) {
    for name in names {
        let stem = name.trim_end_matches("_url");
        into.insert((*name).to_owned(), json!(format!("{base}/{stem}")));
    }
}

/// A user (`simple-user`).
pub fn user(api: &str, login: &str) -> Value {
    let mut user = Map::new();
    urls(&format!("{api}/users/{login}"), USER_URLS, &mut user);
    user.extend([
        ("login".into(), json!(login)),
        ("id".into(), json!(id_of(login))),
        ("node_id".into(), json!(format!("U_{login}"))),
        ("gravatar_id".into(), json!("")),
        ("site_admin".into(), json!(false)),
        ("type".into(), json!("User")),
    ]);
    Value::Object(user)
}

/// A minimal repository (`minimal-repository`), or a full one (`repository`).
pub fn repository(api: &str, full_name: &str, full: bool) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap_or((full_name, full_name));
    let mut repo = Map::new();
    urls(&format!("{api}/repos/{full_name}"), REPO_URLS, &mut repo);
    repo.extend([
        ("id".into(), json!(id_of(full_name))),
        ("node_id".into(), json!(format!("R_{full_name}"))),
        ("name".into(), json!(name)),
        ("full_name".into(), json!(full_name)),
        ("owner".into(), user(api, owner)),
        ("private".into(), json!(false)),
        ("description".into(), Value::Null),
        ("fork".into(), json!(false)),
    ]);
    if full {
        urls(
            &format!("{api}/repos/{full_name}"),
            FULL_REPO_URLS,
            &mut repo,
        );
        repo.extend([
            ("default_branch".into(), json!("main")),
            ("forks".into(), json!(0)),
            ("forks_count".into(), json!(0)),
            ("has_downloads".into(), json!(true)),
            ("has_issues".into(), json!(true)),
            ("has_projects".into(), json!(false)),
            ("has_wiki".into(), json!(false)),
            ("has_pages".into(), json!(false)),
            ("homepage".into(), Value::Null),
            ("language".into(), Value::Null),
            ("archived".into(), json!(false)),
            ("disabled".into(), json!(false)),
            ("mirror_url".into(), Value::Null),
            ("open_issues".into(), json!(0)),
            ("open_issues_count".into(), json!(0)),
            ("license".into(), Value::Null),
            ("pushed_at".into(), json!(TIME)),
            ("size".into(), json!(0)),
            ("stargazers_count".into(), json!(0)),
            ("watchers".into(), json!(0)),
            ("watchers_count".into(), json!(0)),
            ("created_at".into(), json!(TIME)),
            ("updated_at".into(), json!(TIME)),
        ]);
    }
    Value::Object(repo)
}

/// A label (`label`).
pub fn label(api: &str, repo: &str, name: &str) -> Value {
    json!({
        "id": id_of(name),
        "node_id": format!("LA_{name}"),
        "url": format!(
            "{api}/repos/{repo}/labels/{}",
            percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        ),
        "name": name,
        "description": null,
        "color": "ededed",
        "default": false,
    })
}

/// A branch of a pull request (`head` or `base`).
fn pr_ref(api: &str, repo: &str, branch: &str, sha: &str) -> Value {
    let owner = repo.split('/').next().unwrap_or(repo);
    json!({
        "label": format!("{owner}:{branch}"),
        "ref": branch,
        "sha": sha,
        "repo": repository(api, repo, true),
        "user": user(api, owner),
    })
}

/// What the mock keeps of a pull request, as it goes into an answer.
pub struct PullView<'a> {
    pub number: u64,
    pub title: &'a str,
    pub body: &'a str,
    pub head: &'a str,
    pub head_sha: &'a str,
    pub base: &'a str,
    pub draft: bool,
    pub open: bool,
    pub merged: bool,
    pub mergeable: Option<bool>,
    pub labels: &'a [String],
    pub comments: usize,
    pub review_comments: usize,
}

/// A pull request (`pull-request`).
pub fn pull(api: &str, web: &str, repo: &str, p: &PullView<'_>) -> Value {
    let n = p.number;
    let base = format!("{api}/repos/{repo}");
    let link = |href: String| json!({ "href": href });
    let closed_at = if p.open { Value::Null } else { json!(TIME) };
    let links = json!({
        "self": link(format!("{base}/pulls/{n}")),
        "html": link(format!("{web}/{repo}/pull/{n}")),
        "issue": link(format!("{base}/issues/{n}")),
        "comments": link(format!("{base}/issues/{n}/comments")),
        "review_comments": link(format!("{base}/pulls/{n}/comments")),
        "review_comment": link(format!("{base}/pulls/comments{{/number}}")),
        "commits": link(format!("{base}/pulls/{n}/commits")),
        "statuses": link(format!("{base}/statuses/{}", p.head_sha)),
    });
    let head = pr_ref(api, repo, p.head, p.head_sha);
    let base_ref = pr_ref(
        api,
        repo,
        p.base,
        "0000000000000000000000000000000000000000",
    );
    let labels: Vec<Value> = p.labels.iter().map(|l| label(api, repo, l)).collect();
    let mut value = json!({
        "url": format!("{base}/pulls/{n}"),
        "id": 10_000 + n,
        "node_id": format!("PR_{n}"),
        "html_url": format!("{web}/{repo}/pull/{n}"),
        "diff_url": format!("{web}/{repo}/pull/{n}.diff"),
        "patch_url": format!("{web}/{repo}/pull/{n}.patch"),
        "issue_url": format!("{base}/issues/{n}"),
        "commits_url": format!("{base}/pulls/{n}/commits"),
        "review_comments_url": format!("{base}/pulls/{n}/comments"),
        "review_comment_url": format!("{base}/pulls/comments{{/number}}"),
        "comments_url": format!("{base}/issues/{n}/comments"),
        "statuses_url": format!("{base}/statuses/{}", p.head_sha),
        "number": n,
        "state": if p.open { "open" } else { "closed" },
        "locked": false,
        "title": p.title,
        "user": user(api, "catalyst-bot"),
        "body": p.body,
        "labels": labels,
        "milestone": null,
        "active_lock_reason": null,
        "created_at": TIME,
        "updated_at": TIME,
        "closed_at": closed_at,
        "merged_at": if p.merged { json!(TIME) } else { Value::Null },
    });
    // In two parts, so `json!` stays within the macro recursion limit.
    let rest = json!({
        "merge_commit_sha": null,
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "_links": links,
        "head": head,
        "base": base_ref,
        "author_association": "OWNER",
        "auto_merge": null,
        "draft": p.draft,
        "merged": p.merged,
        "mergeable": p.mergeable,
        "rebaseable": p.mergeable,
        "mergeable_state": if p.mergeable == Some(false) { "dirty" } else { "clean" },
        "comments": p.comments,
        "review_comments": p.review_comments,
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 1,
        "deletions": 0,
        "changed_files": 1,
    });
    if let (Some(value), Value::Object(rest)) = (value.as_object_mut(), rest) {
        value.extend(rest);
    }
    value["merged_by"] = if p.merged {
        user(api, "reviewer")
    } else {
        Value::Null
    };
    value
}

/// A review (`pull-request-review`) of pull request `pr`.
pub fn review(api: &str, web: &str, repo: &str, pr: u64, r: &MockReview) -> Value {
    let id = r.id;
    json!({
        "id": id,
        "node_id": format!("PRR_{id}"),
        "user": user(api, &r.by),
        "body": r.body,
        "state": r.state,
        "html_url": format!("{web}/{repo}/pull/{pr}#pullrequestreview-{id}"),
        "pull_request_url": format!("{api}/repos/{repo}/pulls/{pr}"),
        "_links": {
            "html": { "href": format!("{web}/{repo}/pull/{pr}#pullrequestreview-{id}") },
            "pull_request": { "href": format!("{api}/repos/{repo}/pulls/{pr}") },
        },
        "submitted_at": TIME,
        "commit_id": r.sha,
        "author_association": "COLLABORATOR",
    })
}

/// A comment on a line of pull request `pr` (`pull-request-review-comment`).
pub fn review_comment(api: &str, web: &str, repo: &str, pr: u64, c: &MockReviewComment) -> Value {
    let id = c.id;
    let url = format!("{api}/repos/{repo}/pulls/comments/{id}");
    let html = format!("{web}/{repo}/pull/{pr}#discussion_r{id}");
    let pr_url = format!("{api}/repos/{repo}/pulls/{pr}");
    json!({
        "url": url,
        "id": id,
        "node_id": format!("PRRC_{id}"),
        "pull_request_review_id": c.review,
        "diff_hunk": "@@ -1 +1 @@",
        "path": c.path,
        "line": c.line,
        "original_line": c.line,
        "side": "RIGHT",
        "commit_id": c.sha,
        "original_commit_id": c.sha,
        "user": user(api, &c.by),
        "body": c.body,
        "created_at": TIME,
        "updated_at": TIME,
        "html_url": html,
        "pull_request_url": pr_url,
        "author_association": "COLLABORATOR",
        "_links": {
            "self": { "href": url },
            "html": { "href": html },
            "pull_request": { "href": pr_url },
        },
    })
}

/// A commit status (`simple-commit-status`).
pub fn status(api: &str, repo: &str, id: u64, context: &str, state: &str) -> Value {
    json!({
        "id": id,
        "node_id": format!("SC_{id}"),
        "state": state,
        "context": context,
        "description": null,
        "target_url": null,
        "avatar_url": null,
        "url": format!("{api}/repos/{repo}/statuses/{id}"),
        "created_at": TIME,
        "updated_at": TIME,
    })
}

/// The combined status of a commit (`combined-commit-status`): failing if one is, pending if
/// one is or there are none, else success, as GitHub combines them.
pub fn combined(api: &str, repo: &str, sha: &str, statuses: Vec<Value>) -> Value {
    let states: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s.get("state").and_then(Value::as_str))
        .collect();
    let state = if states.iter().any(|s| *s == "failure" || *s == "error") {
        "failure"
    } else if states.is_empty() || states.contains(&"pending") {
        "pending"
    } else {
        "success"
    };
    json!({
        "state": state,
        "sha": sha,
        "total_count": statuses.len(),
        "statuses": statuses,
        "repository": repository(api, repo, false),
        "commit_url": format!("{api}/repos/{repo}/commits/{sha}"),
        "url": format!("{api}/repos/{repo}/commits/{sha}/status"),
    })
}

/// A check run of commit `sha` (`check-run`).
pub fn check_run(api: &str, web: &str, repo: &str, sha: &str, c: &MockRun) -> Value {
    let id = c.id;
    let done = c.status == "completed";
    json!({
        "id": id,
        "node_id": format!("CR_{id}"),
        "head_sha": sha,
        "name": c.name,
        "url": format!("{api}/repos/{repo}/check-runs/{id}"),
        "html_url": format!("{web}/{repo}/runs/{id}"),
        "details_url": null,
        "status": c.status,
        "conclusion": c.conclusion,
        "started_at": TIME,
        "completed_at": if done { json!(TIME) } else { Value::Null },
        "external_id": null,
        "check_suite": null,
        "output": {
            "title": null,
            "summary": null,
            "text": null,
            "annotations_count": 0,
            "annotations_url": format!("{api}/repos/{repo}/check-runs/{id}/annotations"),
        },
        "app": null,
        "pull_requests": [],
    })
}

/// What the mock keeps of an issue (or of a pull request, listed as an issue).
pub struct IssueView<'a> {
    pub number: u64,
    pub title: &'a str,
    pub body: &'a str,
    pub open: bool,
    pub labels: &'a [String],
    pub comments: usize,
    pub pull_request: bool,
}

/// An issue (`issue`).
pub fn issue(api: &str, web: &str, repo: &str, i: &IssueView<'_>) -> Value {
    let n = i.number;
    let base = format!("{api}/repos/{repo}/issues/{n}");
    let mut value = json!({
        "id": 20_000 + n,
        "node_id": format!("I_{n}"),
        "url": base,
        "repository_url": format!("{api}/repos/{repo}"),
        "labels_url": format!("{base}/labels{{/name}}"),
        "comments_url": format!("{base}/comments"),
        "events_url": format!("{base}/events"),
        "html_url": format!("{web}/{repo}/issues/{n}"),
        "number": n,
        "state": if i.open { "open" } else { "closed" },
        "title": i.title,
        "body": i.body,
        "user": user(api, "reporter"),
        "labels": i.labels.iter().map(|l| label(api, repo, l)).collect::<Vec<_>>(),
        "assignee": null,
        "milestone": null,
        "locked": false,
        "comments": i.comments,
        "closed_at": if i.open { Value::Null } else { json!(TIME) },
        "created_at": TIME,
        "updated_at": TIME,
        "author_association": "NONE",
    });
    if i.pull_request {
        value["pull_request"] = json!({
            "url": format!("{api}/repos/{repo}/pulls/{n}"),
            "html_url": format!("{web}/{repo}/pull/{n}"),
            "diff_url": format!("{web}/{repo}/pull/{n}.diff"),
            "patch_url": format!("{web}/{repo}/pull/{n}.patch"),
        });
    }
    value
}

/// A comment on an issue (`issue-comment`).
pub fn issue_comment(api: &str, web: &str, repo: &str, issue: u64, id: u64, body: &str) -> Value {
    json!({
        "id": id,
        "node_id": format!("IC_{id}"),
        "url": format!("{api}/repos/{repo}/issues/comments/{id}"),
        "html_url": format!("{web}/{repo}/issues/{issue}#issuecomment-{id}"),
        "issue_url": format!("{api}/repos/{repo}/issues/{issue}"),
        "body": body,
        "user": user(api, "catalyst-bot"),
        "created_at": TIME,
        "updated_at": TIME,
        "author_association": "OWNER",
    })
}

/// A branch with its protection (`branch-with-protection`); `required`: the status checks its
/// protection requires, when it is protected.
pub fn protected_branch(
    api: &str,
    web: &str,
    repo: &str,
    name: &str,
    required: Option<&[String]>,
) -> Value {
    let sha = "0".repeat(40);
    let commit_url = format!("{api}/repos/{repo}/commits/{sha}");
    let protection = match required {
        Some(names) => json!({
            "enabled": true,
            "required_status_checks": {
                "enforcement_level": "non_admins",
                "contexts": names,
                "checks": names.iter().map(|n| json!({ "context": n, "app_id": null })).collect::<Vec<_>>(),
            },
        }),
        None => json!({ "enabled": false }),
    };
    json!({
        "name": name,
        "commit": {
            "url": commit_url,
            "sha": sha,
            "node_id": format!("C_{sha}"),
            "html_url": format!("{web}/{repo}/commit/{sha}"),
            "comments_url": format!("{commit_url}/comments"),
            "commit": {
                "url": format!("{api}/repos/{repo}/git/commits/{sha}"),
                "author": null,
                "committer": null,
                "message": "the branch's tip",
                "comment_count": 0,
                "tree": { "sha": sha, "url": format!("{api}/repos/{repo}/git/trees/{sha}") },
            },
            "author": null,
            "committer": null,
            "parents": [],
        },
        "_links": {
            "html": format!("{web}/{repo}/tree/{name}"),
            "self": format!("{api}/repos/{repo}/branches/{name}"),
        },
        "protected": required.is_some(),
        "protection": protection,
        "protection_url": format!("{api}/repos/{repo}/branches/{name}/protection"),
    })
}
