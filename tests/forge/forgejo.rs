//! The Forgejo client: every operation against the mock Forgejo through Prism, which checks
//! each request and answer against Forgejo's published API description (Swagger 2.0, from
//! the `forgejo-api` crate), so these pass only while the client and the mock both speak
//! Forgejo's API; then rate limits, outages and refusals against the mock directly, without
//! the token in any error.

use catalyst::daemon::forge::{Forge, ForgeError, NewPullRequest, PrState, ReviewState};
use catalyst::domain::config::forge::ForgeKind;
use catalyst_testkit::forge::prism::{validated_forgejo, Validated};
use catalyst_testkit::forge::{forgejo, Failure, MockGitHub};

use crate::{assert_open_from, assert_required_checks_read, client_of, TOKEN};

/// The shared mock Forgejo behind Prism; `None`, saying which test skips, without Prism.
fn setup(test: &str) -> Option<&'static Validated> {
    let v = validated_forgejo();
    if v.is_none() {
        eprintln!("skipping {test}: Prism or Forgejo's description is not available (see above)");
    }
    v
}

fn client(api: &str, repository: &str) -> Forge {
    client_of(ForgeKind::Forgejo, api, repository)
}

fn new_pr(head: &str, draft: bool) -> NewPullRequest {
    NewPullRequest {
        head: head.into(),
        base: "main".into(),
        title: format!("Bead {head}"),
        body: "What the bead did.".into(),
        draft,
    }
}

#[tokio::test]
async fn a_pull_request_is_opened_updated_read_and_seen_merged() {
    let Some(v) = setup("a_pull_request_is_opened_updated_read_and_seen_merged") else {
        return;
    };
    let repo = "acme/fj-pulls";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-1", false))
        .await
        .expect("create");
    assert_eq!(pr.state, PrState::Open);
    assert!(!pr.draft && !pr.merged);
    assert_eq!(
        (pr.head_ref.as_str(), pr.base_ref.as_str()),
        ("bead-1", "main")
    );
    assert_eq!(pr.title, "Bead bead-1");
    assert_eq!(pr.head_sha.len(), 40);
    // Found again by its branch, as after a crash that lost its number.
    assert_open_from(&forge, "bead-1", Some(pr.number)).await;
    assert_open_from(&forge, "bead-9", None).await;
    assert_eq!(pr.mergeable, Some(true));

    let updated = forge
        .update_pull_request(pr.number, Some("Bead 1: done"), Some("New body."))
        .await
        .expect("update");
    assert_eq!(
        (updated.title.as_str(), updated.body.as_str()),
        ("Bead 1: done", "New body.")
    );
    let kept = forge
        .update_pull_request(pr.number, None, Some("Only the body."))
        .await
        .expect("update the body");
    assert_eq!(
        (kept.title.as_str(), kept.body.as_str()),
        ("Bead 1: done", "Only the body.")
    );

    v.mock.set_mergeable(repo, pr.number, Some(false));
    assert_eq!(
        forge.pull_request(pr.number).await.expect("get").mergeable,
        Some(false)
    );
    v.mock.merge(repo, pr.number);
    assert_open_from(&forge, "bead-1", None).await;
    let merged = forge.pull_request(pr.number).await.expect("get");
    assert_eq!((merged.state, merged.merged), (PrState::Closed, true));

    // Forgejo has no draft flag to set: a draft is a pull request whose title says WIP.
    let draft = forge
        .create_pull_request(&new_pr("bead-2", true))
        .await
        .expect("create a draft");
    assert!(draft.draft);
    assert_eq!(draft.title, "WIP: Bead bead-2");
    v.mock.close(repo, draft.number);
    let closed = forge.pull_request(draft.number).await.expect("get");
    assert_eq!((closed.state, closed.merged), (PrState::Closed, false));

    let missing = forge
        .pull_request(999)
        .await
        .expect_err("no such pull request");
    assert!(
        matches!(missing, ForgeError::Refused { status: 404, .. }),
        "{missing}"
    );
}

#[tokio::test]
async fn reviews_and_their_comments_are_read_review_by_review() {
    let Some(v) = setup("reviews_and_their_comments_are_read_review_by_review") else {
        return;
    };
    let repo = "acme/fj-reviews";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-7", false))
        .await
        .expect("create");
    let (reviews, comments) = forge
        .reviews_and_comments(pr.number)
        .await
        .expect("none yet");
    assert!(reviews.is_empty() && comments.is_empty());

    let asked = v.mock.request_changes(
        repo,
        pr.number,
        "Please handle the empty case.",
        &[
            ("src/lib.rs", 12, "This panics on empty input."),
            ("README.md", 3, "Typo."),
        ],
    );
    let remarked = v
        .mock
        .review(repo, pr.number, "COMMENTED", "Why not a constant?", &[]);
    let later = v.mock.review(
        repo,
        pr.number,
        "COMMENTED",
        "",
        &[("src/main.rs", 4, "Name this.")],
    );
    let approved = v.mock.approve(repo, pr.number);
    let (reviews, comments) = forge
        .reviews_and_comments(pr.number)
        .await
        .expect("reviews and their comments");
    let got: Vec<(u64, &ReviewState, &str, Option<&str>)> = reviews
        .iter()
        .map(|r| (r.id, &r.state, r.body.as_str(), r.author.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                asked,
                &ReviewState::ChangesRequested,
                "Please handle the empty case.",
                Some("reviewer")
            ),
            (
                remarked,
                &ReviewState::Commented,
                "Why not a constant?",
                Some("reviewer")
            ),
            (later, &ReviewState::Commented, "", Some("reviewer")),
            (approved, &ReviewState::Approved, "", Some("reviewer")),
        ]
    );

    let got: Vec<(&str, Option<u64>, &str, Option<u64>)> = comments
        .iter()
        .map(|c| (c.path.as_str(), c.line, c.body.as_str(), c.review_id))
        .collect();
    assert_eq!(
        got,
        [
            (
                "src/lib.rs",
                Some(12),
                "This panics on empty input.",
                Some(asked)
            ),
            ("README.md", Some(3), "Typo.", Some(asked)),
            ("src/main.rs", Some(4), "Name this.", Some(later)),
        ]
    );
    // Only the reviews with comments on lines were asked for theirs.
    let asked_for: Vec<String> = v
        .mock
        .requests(repo)
        .into_iter()
        .filter(|r| r.path.contains("/comments"))
        .map(|r| r.path)
        .collect();
    assert_eq!(asked_for.len(), 2, "{asked_for:?}");
}

#[tokio::test]
async fn statuses_are_the_checks_and_there_are_no_check_runs() {
    let Some(v) = setup("statuses_are_the_checks_and_there_are_no_check_runs") else {
        return;
    };
    let repo = "acme/fj-checks";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-3", false))
        .await
        .expect("create");
    let sha = pr.head_sha.as_str();

    assert_required_checks_read(&forge, v, repo).await;

    let none = forge.checks(sha).await.expect("checks");
    assert!(none.statuses.is_empty() && none.runs.is_empty());

    v.mock.set_status(repo, sha, "ci/lint", "failure");
    v.mock.set_status(repo, sha, "test (push)", "pending");
    v.mock.set_status(repo, sha, "docs", "success");
    let checks = forge.checks(sha).await.expect("checks");
    assert_eq!(checks.failing(), ["ci/lint"]);
    assert_eq!(checks.pending(), ["test (push)"]);
    assert!(checks.runs.is_empty());

    v.mock.set_status(repo, sha, "ci/lint", "success");
    v.mock.set_status(repo, sha, "test (push)", "error");
    let checks = forge.checks(sha).await.expect("checks");
    assert_eq!(checks.failing(), ["test (push)"]);

    v.mock.set_status(repo, sha, "test (push)", "success");
    let checks = forge.checks(sha).await.expect("checks");
    assert!(
        checks.failing().is_empty() && checks.pending().is_empty(),
        "{checks:?}"
    );
}

#[tokio::test]
async fn labelled_issues_are_listed_commented_labelled_and_closed() {
    let Some(v) = setup("labelled_issues_are_listed_commented_labelled_and_closed") else {
        return;
    };
    let repo = "acme/fj-issues";
    let forge = client(&v.url, repo);
    let wanted = v.mock.open_issue(
        repo,
        "Crash on start",
        "Steps: run it.",
        &["catalyst", "bug"],
    );
    v.mock.open_issue(repo, "Unrelated", "", &["bug"]);
    // A pull request with the label is not an issue to take.
    let pr = forge
        .create_pull_request(&new_pr("bead-9", false))
        .await
        .expect("create");
    forge
        .add_label(pr.number, "catalyst")
        .await
        .expect("label the pull request");

    let issues = forge.labelled_issues("catalyst").await.expect("issues");
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].number, wanted);
    assert_eq!(issues[0].title, "Crash on start");
    assert_eq!(issues[0].body, "Steps: run it.");
    assert_eq!(issues[0].labels, ["catalyst", "bug"]);
    assert_eq!(
        issues[0].html_url,
        format!("{}/{repo}/issues/{wanted}", forgejo::WEB)
    );

    let comment = forge
        .comment(wanted, "Taken as bead `ws-12`.")
        .await
        .expect("comment");
    assert!(comment > 0);

    // Forgejo adds only a label the repository has: one it lacks is refused, saying so.
    let err = forge
        .add_label(wanted, "catalyst: blocked")
        .await
        .expect_err("no such label");
    eprintln!("a missing label: {err}");
    assert!(
        matches!(err, ForgeError::Refused { status: 404, .. })
            && err.to_string().contains("no label `catalyst: blocked`"),
        "{err}"
    );
    assert!(
        forge
            .remove_label(wanted, "catalyst: blocked")
            .await
            .is_ok(),
        "a label the repository lacks is not on the issue: no error"
    );
    v.mock.create_label(repo, "catalyst: blocked");
    v.mock.create_label(repo, "catalyst: gone");
    forge
        .add_label(wanted, "catalyst: gone")
        .await
        .expect("label");
    forge
        .remove_label(wanted, "catalyst: gone")
        .await
        .expect("unlabel, by name");
    forge
        .add_label(wanted, "catalyst: blocked")
        .await
        .expect("label");
    forge.close_issue(wanted).await.expect("close");
    let issue = v.mock.issue(repo, wanted).expect("the issue");
    assert_eq!(issue.comments, ["Taken as bead `ws-12`."]);
    assert_eq!(issue.labels, ["catalyst", "bug", "catalyst: blocked"]);
    assert!(!issue.open);
    assert!(forge
        .labelled_issues("catalyst")
        .await
        .expect("issues")
        .is_empty());

    forge
        .comment(pr.number, "Merged by catalyst.")
        .await
        .expect("comment on the pull request");
    assert_eq!(
        v.mock
            .pull(repo, pr.number)
            .expect("the pull request")
            .comments,
        ["Merged by catalyst."]
    );
}

#[tokio::test]
async fn a_long_list_is_read_page_after_page() {
    let Some(v) = setup("a_long_list_is_read_page_after_page") else {
        return;
    };
    let repo = "acme/fj-pages";
    let forge = client(&v.url, repo);
    for n in 0..120 {
        v.mock
            .open_issue(repo, &format!("Issue {n}"), "", &["catalyst"]);
    }
    let issues = forge.labelled_issues("catalyst").await.expect("issues");
    assert_eq!(issues.len(), 120);
    let pages = v
        .mock
        .requests(repo)
        .iter()
        .filter(|r| r.path.contains("/issues?"))
        .count();
    assert_eq!(pages, 3, "50 a page");
}

#[tokio::test]
async fn every_request_carries_the_token_as_forgejo_takes_it() {
    let Some(v) = setup("every_request_carries_the_token_as_forgejo_takes_it") else {
        return;
    };
    let repo = "acme/fj-headers";
    let forge = client(&v.url, repo);
    forge.labelled_issues("x").await.expect("issues");
    let requests = v.mock.requests(repo);
    assert!(!requests.is_empty());
    for r in requests {
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("token {TOKEN}").as_str())
        );
        assert_eq!(r.accept.as_deref(), Some("application/json"));
        assert!(r.user_agent.is_some_and(|ua| ua.starts_with("catalyst/")));
        for part in [
            "state=open",
            "type=issues",
            "labels=x",
            "page=1",
            "limit=50",
        ] {
            assert!(r.path.contains(part), "{part} in {}", r.path);
        }
    }
}

/// The validator is live both ways: a request off the description is refused before the
/// mock sees it, and an answer off it fails the call.
#[tokio::test]
async fn prism_refuses_requests_and_answers_off_forgejos_description() {
    let Some(v) = setup("prism_refuses_requests_and_answers_off_forgejos_description") else {
        return;
    };
    let repo = "acme/fj-prism";
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/repos/{repo}/pulls", v.url))
        .header("authorization", format!("token {TOKEN}"))
        .json(&serde_json::json!({ "title": 7, "head": "x", "base": "main", "labels": ["bug"] }))
        .send()
        .await
        .expect("prism answers");
    let status = response.status();
    let body = response.text().await.expect("a body");
    eprintln!("prism on a bad request: {status} {body}");
    assert!(status.is_client_error(), "{status} {body}");
    assert!(v.mock.requests(repo).is_empty(), "the mock never saw it");

    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-4", false))
        .await
        .expect("create");
    // The mock answers the next call with a bare string and 200: not a pull request.
    v.mock.fail_next(
        repo,
        Failure {
            status: 200,
            headers: Vec::new(),
            message: "not a pull request".into(),
        },
    );
    let err = forge
        .pull_request(pr.number)
        .await
        .expect_err("prism refuses the answer");
    eprintln!("prism on a bad answer: {err}");
    assert!(err.to_string().contains("not valid"), "{err}");
}

/// The mock Forgejo on its own, for the failures Forgejo's description does not list for
/// every operation.
async fn mock() -> (MockGitHub, String) {
    let mock = MockGitHub::default();
    let url = forgejo::serve(mock.clone()).await;
    (mock, url)
}

#[tokio::test]
async fn a_429_is_a_rate_limit_until_its_retry_after_or_a_minute() {
    let (mock, url) = mock().await;
    let repo = "acme/fj-limits";
    let forge = client(&url, repo);
    mock.fail_next(repo, Failure::rate_limit_429(90));
    let before = chrono::Utc::now();
    let err = forge.pull_request(1).await.expect_err("rate limited");
    eprintln!("429: {err}");
    assert!(err.is_transient());
    let ForgeError::RateLimited { until } = err else {
        panic!("not a rate limit: {err}")
    };
    let wait = (until - before).num_seconds();
    assert!((89..=91).contains(&wait), "waits {wait} s");

    // A proxy in front of Forgejo may say nothing of when to come back.
    mock.fail_next(
        repo,
        Failure {
            status: 429,
            headers: Vec::new(),
            message: "Too Many Requests".into(),
        },
    );
    let err = forge.labelled_issues("x").await.expect_err("rate limited");
    let ForgeError::RateLimited { until } = err else {
        panic!("not a rate limit: {err}")
    };
    let wait = (until - chrono::Utc::now()).num_seconds();
    assert!((55..=60).contains(&wait), "waits {wait} s");
    // The limit was for those calls only: the next goes through.
    forge.labelled_issues("x").await.expect("the next call");
}

#[tokio::test]
async fn a_403_is_a_refusal_even_with_github_s_rate_limit_headers() {
    let (mock, url) = mock().await;
    let repo = "acme/fj-forbidden";
    let forge = client(&url, repo);
    // Forgejo limits no rate with 403: a 403 is a missing permission, whatever the headers.
    let reset = chrono::Utc::now().timestamp() + 600;
    mock.fail_next(repo, Failure::rate_limit_403(reset));
    let err = forge.close_issue(1).await.expect_err("refused");
    eprintln!("403: {err}");
    assert!(
        matches!(err, ForgeError::Refused { status: 403, .. }) && !err.is_transient(),
        "{err}"
    );
}

#[tokio::test]
async fn a_500_or_no_server_is_unavailable() {
    let (mock, url) = mock().await;
    let repo = "acme/fj-down";
    let forge = client(&url, repo);
    mock.fail_next(repo, Failure::server_error(500));
    let err = forge.pull_request(1).await.expect_err("unavailable");
    eprintln!("500: {err}");
    assert!(
        matches!(err, ForgeError::Unavailable { .. }) && err.is_transient(),
        "{err}"
    );
    mock.fail_next(repo, Failure::server_error(503));
    assert!(matches!(
        forge.reviews_and_comments(1).await,
        Err(ForgeError::Unavailable { .. })
    ));

    // Nothing listens on a port just let go of.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let nowhere = client(&format!("http://127.0.0.1:{port}/api/v1"), repo);
    let err = nowhere.pull_request(1).await.expect_err("no server");
    eprintln!("no server: {err}");
    assert!(matches!(err, ForgeError::Unavailable { .. }), "{err}");
}

#[tokio::test]
async fn no_error_holds_the_token() {
    let (mock, url) = mock().await;
    let repo = "acme/fj-secret";
    let forge = client(&url, repo);
    // A server that echoes the credentials it was sent.
    for status in [401, 403, 422, 429, 500] {
        mock.fail_next(
            repo,
            Failure {
                status,
                headers: Vec::new(),
                message: format!("bad credentials: token {TOKEN}"),
            },
        );
        let err = forge.comment(1, "hello").await.expect_err("fails");
        let text = format!("{err} {err:?}");
        assert!(!text.contains(TOKEN), "{status}: {text}");
    }
    let err = forge
        .comment(404, "hello")
        .await
        .expect_err("no such issue");
    assert!(
        matches!(err, ForgeError::Refused { status: 404, .. }),
        "{err}"
    );
    assert!(!format!("{err} {err:?} {forge:?}").contains(TOKEN));
}
