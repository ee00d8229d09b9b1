//! The mock's answers as Forgejo shapes them. Forgejo's description (Swagger 2.0) marks no
//! field of these objects required and has no `null`, so an answer carries the fields
//! Forgejo fills for such an object, with made-up but well-formed values where the mock keeps
//! no state, and leaves out what would be `null` (no milestone, no assignee).

use serde_json::{json, Map, Value};

use super::super::shapes::{IssueView, PullView};
use super::super::{MockReview, MockReviewComment};

/// When every object of the mock was made and last changed: state changes are what tests look
/// at, not times.
const TIME: &str = "2026-01-01T00:00:00Z";

/// A stable id for a name, so a user, repository or label has the same id in every answer.
fn id_of(name: &str) -> u64 {
    name.bytes()
        .fold(1_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % 1_000_000_000
        + 1
}

/// A user (`User`).
pub fn user(web: &str, login: &str) -> Value {
    json!({
        "id": id_of(login),
        "login": login,
        "login_name": "",
        "source_id": 0,
        "full_name": "",
        "email": format!("{login}@noreply.forgejo.example"),
        "avatar_url": format!("{web}/avatars/{login}"),
        "html_url": format!("{web}/{login}"),
        "language": "",
        "is_admin": false,
        "last_login": TIME,
        "created": TIME,
        "restricted": false,
        "active": true,
        "prohibit_login": false,
        "location": "",
        "pronouns": "",
        "website": "",
        "description": "",
        "visibility": "public",
        "followers_count": 0,
        "following_count": 0,
        "starred_repos_count": 0,
    })
}

/// A repository (`Repository`).
pub fn repository(api: &str, web: &str, full_name: &str) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap_or((full_name, full_name));
    let mut value = json!({
        "id": id_of(full_name),
        "owner": user(web, owner),
        "name": name,
        "full_name": full_name,
        "description": "",
        "empty": false,
        "private": false,
        "fork": false,
        "template": false,
        "mirror": false,
        "size": 0,
        "language": "",
        "languages_url": format!("{api}/repos/{full_name}/languages"),
        "html_url": format!("{web}/{full_name}"),
        "url": format!("{api}/repos/{full_name}"),
        "link": "",
        "clone_url": format!("{web}/{full_name}.git"),
        "website": "",
        "stars_count": 0,
        "forks_count": 0,
        "watchers_count": 0,
        "open_issues_count": 0,
        "open_pr_counter": 0,
        "release_counter": 0,
        "default_branch": "main",
    });
    // In two parts, so `json!` stays within the macro recursion limit.
    let rest = json!({
        "archived": false,
        "created_at": TIME,
        "updated_at": TIME,
        "archived_at": "1970-01-01T00:00:00Z",
        "permissions": { "admin": true, "push": true, "pull": true },
        "has_issues": true,
        "has_wiki": false,
        "has_pull_requests": true,
        "has_projects": false,
        "has_releases": true,
        "has_packages": false,
        "has_actions": true,
        "ignore_whitespace_conflicts": false,
        "allow_merge_commits": true,
        "allow_rebase": true,
        "allow_rebase_explicit": true,
        "allow_squash_merge": true,
        "allow_fast_forward_only_merge": true,
        "allow_rebase_update": true,
        "default_delete_branch_after_merge": false,
        "default_merge_style": "merge",
        "default_allow_maintainer_edit": false,
        "internal": false,
        "mirror_interval": "",
        "object_format_name": "sha1",
        "topics": [],
    });
    if let (Some(value), Value::Object(rest)) = (value.as_object_mut(), rest) {
        value.extend(rest);
    }
    value
}

/// A label (`Label`).
pub fn label(api: &str, repo: &str, name: &str) -> Value {
    json!({
        "id": id_of(name),
        "name": name,
        "exclusive": false,
        "is_archived": false,
        "color": "ededed",
        "description": "",
        "url": format!("{api}/repos/{repo}/labels/{}", id_of(name)),
    })
}

/// A branch of a pull request (`PRBranchInfo`).
fn branch(api: &str, web: &str, repo: &str, name: &str, sha: &str) -> Value {
    let repository = repository(api, web, repo);
    json!({
        "label": name,
        "ref": name,
        "sha": sha,
        "repo_id": repository["id"],
        "repo": repository,
    })
}

/// A pull request (`PullRequest`).
pub fn pull(api: &str, web: &str, repo: &str, p: &PullView<'_>) -> Value {
    let n = p.number;
    let html = format!("{web}/{repo}/pulls/{n}");
    let mut value = json!({
        "id": 10_000 + n,
        "url": html,
        "number": n,
        "user": user(web, "catalyst-bot"),
        "title": p.title,
        "body": p.body,
        "labels": p.labels.iter().map(|l| label(api, repo, l)).collect::<Vec<_>>(),
        "assignees": [],
        "requested_reviewers": [],
        "requested_reviewers_teams": [],
        "state": if p.open { "open" } else { "closed" },
        "draft": p.draft,
        "is_locked": false,
        "comments": p.comments,
        "review_comments": p.review_comments,
        "additions": 1,
        "deletions": 0,
        "changed_files": 1,
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "mergeable": p.mergeable.unwrap_or(false),
        "merged": p.merged,
        "allow_maintainer_edit": false,
        "base": branch(api, web, repo, p.base, "0000000000000000000000000000000000000000"),
        "head": branch(api, web, repo, p.head, p.head_sha),
        "merge_base": "0000000000000000000000000000000000000000",
        "created_at": TIME,
        "updated_at": TIME,
        "pin_order": 0,
        "flow": 0,
    });
    let extra = Map::from_iter(
        [
            (!p.open).then(|| ("closed_at", json!(TIME))),
            p.merged.then(|| ("merged_at", json!(TIME))),
            p.merged.then(|| ("merged_by", user(web, "reviewer"))),
            p.merged
                .then(|| ("merge_commit_sha", json!(super::super::fake_sha(n + 1)))),
        ]
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.to_owned(), v)),
    );
    if let Some(object) = value.as_object_mut() {
        object.extend(extra);
    }
    value
}

/// Forgejo's name for a review's state, from the mock's (GitHub's) name.
fn review_state(state: &str) -> &str {
    match state {
        "CHANGES_REQUESTED" => "REQUEST_CHANGES",
        "COMMENTED" => "COMMENT",
        other => other,
    }
}

/// A review (`PullReview`) of pull request `pr`, with `comments` comments on lines.
pub fn review(web: &str, repo: &str, pr: u64, r: &MockReview, comments: usize) -> Value {
    json!({
        "id": r.id,
        "user": user(web, &r.by),
        "state": review_state(&r.state),
        "body": r.body,
        "commit_id": r.sha,
        "stale": false,
        "official": true,
        "dismissed": false,
        "comments_count": comments,
        "submitted_at": TIME,
        "updated_at": TIME,
        "html_url": format!("{web}/{repo}/pulls/{pr}#issuecomment-{}", r.id),
        "pull_request_url": format!("{web}/{repo}/pulls/{pr}"),
    })
}

/// A comment on a line of pull request `pr` (`PullReviewComment`).
pub fn review_comment(web: &str, repo: &str, pr: u64, c: &MockReviewComment) -> Value {
    json!({
        "id": c.id,
        "body": c.body,
        "user": user(web, &c.by),
        "created_at": TIME,
        "updated_at": TIME,
        "path": c.path,
        "commit_id": c.sha,
        "original_commit_id": c.sha,
        "diff_hunk": "@@ -1 +1 @@",
        "position": c.line,
        "original_position": 0,
        "extra_lines_count": 0,
        "html_url": format!("{web}/{repo}/pulls/{pr}/files#issuecomment-{}", c.id),
        "pull_request_url": format!("{web}/{repo}/pulls/{pr}"),
        "pull_request_review_id": c.review,
    })
}

/// A commit status (`CommitStatus`): Forgejo calls its state `status`.
pub fn status(api: &str, web: &str, repo: &str, id: u64, context: &str, state: &str) -> Value {
    json!({
        "id": id,
        "status": state,
        "target_url": format!("{web}/{repo}/actions/runs/{id}"),
        "description": "",
        "url": format!("{api}/repos/{repo}/statuses/{id}"),
        "context": context,
        "creator": user(web, "forgejo-actions"),
        "created_at": TIME,
        "updated_at": TIME,
    })
}

/// The combined status of a commit (`CombinedStatus`): failing if one is, pending if one is
/// or there are none, else success.
pub fn combined(api: &str, web: &str, repo: &str, sha: &str, statuses: Vec<Value>) -> Value {
    let states: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s.get("status").and_then(Value::as_str))
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
        "repository": repository(api, web, repo),
        "commit_url": format!("{api}/repos/{repo}/git/commits/{sha}"),
        "url": format!("{api}/repos/{repo}/commits/{sha}/status"),
    })
}

/// An issue (`Issue`), or a pull request listed as one.
pub fn issue(api: &str, web: &str, repo: &str, i: &IssueView<'_>) -> Value {
    let n = i.number;
    let (owner, name) = repo.split_once('/').unwrap_or((repo, repo));
    let kind = if i.pull_request { "pulls" } else { "issues" };
    let html = format!("{web}/{repo}/{kind}/{n}");
    let mut value = json!({
        "id": 20_000 + n,
        "url": format!("{api}/repos/{repo}/issues/{n}"),
        "html_url": html,
        "number": n,
        "user": user(web, "reporter"),
        "original_author": "",
        "original_author_id": 0,
        "title": i.title,
        "body": i.body,
        "ref": "",
        "assets": [],
        "labels": i.labels.iter().map(|l| label(api, repo, l)).collect::<Vec<_>>(),
        "assignees": [],
        "state": if i.open { "open" } else { "closed" },
        "is_locked": false,
        "comments": i.comments,
        "created_at": TIME,
        "updated_at": TIME,
        "pin_order": 0,
        "repository": { "id": id_of(repo), "name": name, "owner": owner, "full_name": repo },
    });
    if !i.open {
        value["closed_at"] = json!(TIME);
    }
    if i.pull_request {
        value["pull_request"] = json!({ "merged": false, "draft": false, "html_url": html });
    }
    value
}

/// A comment on an issue or a pull request (`Comment`).
pub fn comment(api: &str, web: &str, repo: &str, issue: u64, id: u64, body: &str) -> Value {
    json!({
        "id": id,
        "html_url": format!("{web}/{repo}/issues/{issue}#issuecomment-{id}"),
        "issue_url": format!("{api}/repos/{repo}/issues/{issue}"),
        "user": user(web, "catalyst-bot"),
        "original_author": "",
        "original_author_id": 0,
        "body": body,
        "assets": [],
        "created_at": TIME,
        "updated_at": TIME,
    })
}

/// A branch (`Branch`): protected with status checks `required`, when a test required some.
pub fn protected_branch(web: &str, repo: &str, name: &str, required: Option<&[String]>) -> Value {
    let sha = "0".repeat(40);
    json!({
        "name": name,
        "commit": {
            "id": sha,
            "message": "the branch's tip",
            "url": format!("{web}/{repo}/commit/{sha}"),
            "timestamp": TIME,
        },
        "protected": required.is_some(),
        "effective_branch_protection_name": if required.is_some() { name } else { "" },
        "enable_status_check": required.is_some(),
        "status_check_contexts": required.unwrap_or_default(),
        "required_approvals": 0,
        "user_can_push": true,
        "user_can_merge": true,
    })
}
