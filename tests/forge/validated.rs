//! Every operation of the client against the mock, through Prism: a request or answer that
//! is not what GitHub's OpenAPI description says fails the call, so these tests pass only
//! while the client and the mock both speak GitHub's API.

use catalyst::daemon::forge::{ForgeError, NewPullRequest, PrState, ReviewState};
use catalyst_testkit::forge::prism::{validated, Validated};
use catalyst_testkit::forge::Failure;

use crate::{assert_open_from, assert_required_checks_read, client, TOKEN};

/// The shared mock behind Prism; `None`, saying which test skips, without Prism.
fn setup(test: &str) -> Option<&'static Validated> {
    let v = validated();
    if v.is_none() {
        eprintln!("skipping {test}: Prism is not available (see above)");
    }
    v
}

fn new_pr(head: &str) -> NewPullRequest {
    NewPullRequest {
        head: head.into(),
        base: "main".into(),
        title: format!("Bead {head}"),
        body: "What the bead did.".into(),
        draft: true,
    }
}

#[tokio::test]
async fn a_pull_request_is_opened_updated_read_and_seen_merged() {
    let Some(v) = setup("a_pull_request_is_opened_updated_read_and_seen_merged") else {
        return;
    };
    let repo = "acme/pulls";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-1"))
        .await
        .expect("create");
    assert_eq!(pr.state, PrState::Open);
    assert!(pr.draft);
    assert!(!pr.merged);
    assert_eq!(
        (pr.head_ref.as_str(), pr.base_ref.as_str()),
        ("bead-1", "main")
    );
    assert_eq!(pr.title, "Bead bead-1");
    assert_eq!(pr.head_sha.len(), 40);
    // Found again by its branch, as after a crash that lost its number.
    assert_open_from(&forge, "bead-1", Some(pr.number)).await;
    assert_open_from(&forge, "bead-9", None).await;

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

    v.mock.set_mergeable(repo, pr.number, None);
    let read = forge.pull_request(pr.number).await.expect("get");
    assert_eq!(read.mergeable, None, "not worked out yet");
    v.mock.set_mergeable(repo, pr.number, Some(false));
    assert_eq!(
        forge.pull_request(pr.number).await.expect("get").mergeable,
        Some(false)
    );

    v.mock.merge(repo, pr.number);
    assert_open_from(&forge, "bead-1", None).await;
    let merged = forge.pull_request(pr.number).await.expect("get");
    assert_eq!((merged.state, merged.merged), (PrState::Closed, true));

    let other = forge
        .create_pull_request(&new_pr("bead-2"))
        .await
        .expect("create");
    v.mock.close(repo, other.number);
    let closed = forge.pull_request(other.number).await.expect("get");
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
async fn reviews_and_their_comments_are_read() {
    let Some(v) = setup("reviews_and_their_comments_are_read") else {
        return;
    };
    let repo = "acme/reviews";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-7"))
        .await
        .expect("create");
    let (reviews, comments) = forge
        .reviews_and_comments(pr.number)
        .await
        .expect("no reviews yet");
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
    let approved = v.mock.approve(repo, pr.number);
    let (reviews, comments) = forge
        .reviews_and_comments(pr.number)
        .await
        .expect("reviews and comments");
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0].id, asked);
    assert_eq!(reviews[0].state, ReviewState::ChangesRequested);
    assert_eq!(reviews[0].body, "Please handle the empty case.");
    assert_eq!(reviews[0].author.as_deref(), Some("reviewer"));
    assert_eq!(
        (reviews[1].id, &reviews[1].state),
        (approved, &ReviewState::Approved)
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
        ]
    );
}

#[tokio::test]
async fn failing_checks_are_told_from_passing_and_pending_ones() {
    let Some(v) = setup("failing_checks_are_told_from_passing_and_pending_ones") else {
        return;
    };
    let repo = "acme/checks";
    let forge = client(&v.url, repo);
    let pr = forge
        .create_pull_request(&new_pr("bead-3"))
        .await
        .expect("create");
    let sha = pr.head_sha.as_str();

    assert_required_checks_read(&forge, v, repo).await;

    let none = forge.checks(sha).await.expect("checks");
    assert!(none.failing().is_empty() && none.pending().is_empty());

    v.mock.set_status(repo, sha, "ci/lint", "failure");
    v.mock.set_check(repo, sha, "test", Some("success"));
    v.mock.set_check(repo, sha, "build", None);
    let checks = forge.checks(sha).await.expect("checks");
    assert_eq!(checks.failing(), ["ci/lint"]);
    assert_eq!(checks.pending(), ["build"]);

    v.mock.set_status(repo, sha, "ci/lint", "success");
    v.mock.set_check(repo, sha, "build", Some("failure"));
    let checks = forge.checks(sha).await.expect("checks");
    assert_eq!(checks.failing(), ["build"]);

    v.mock.set_check(repo, sha, "build", Some("success"));
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
    let repo = "acme/issues";
    let forge = client(&v.url, repo);
    let wanted = v.mock.open_issue(
        repo,
        "Crash on start",
        "Steps: run it.",
        &["catalyst", "bug"],
    );
    v.mock.open_issue(repo, "Unrelated", "", &["bug"]);
    // A pull request with the label is listed by GitHub's issues API too, and left out.
    let pr = forge
        .create_pull_request(&new_pr("bead-9"))
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

    let comment = forge
        .comment(wanted, "Taken as bead `ws-12`.")
        .await
        .expect("comment");
    assert!(comment > 0);
    forge
        .add_label(wanted, "catalyst:taken")
        .await
        .expect("label");
    // A name with a space and a colon goes into the path as one segment; taking off one the
    // issue lacks is no error.
    forge
        .add_label(wanted, "catalyst: blocked")
        .await
        .expect("label");
    forge
        .remove_label(wanted, "catalyst: blocked")
        .await
        .expect("unlabel");
    forge
        .remove_label(wanted, "catalyst: blocked")
        .await
        .expect("a label not there is no error");
    forge.close_issue(wanted).await.expect("close");
    let issue = v.mock.issue(repo, wanted).expect("the issue");
    assert_eq!(issue.comments, ["Taken as bead `ws-12`."]);
    assert_eq!(issue.labels, ["catalyst", "bug", "catalyst:taken"]);
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
async fn every_request_carries_the_token_and_github_headers() {
    let Some(v) = setup("every_request_carries_the_token_and_github_headers") else {
        return;
    };
    let repo = "acme/headers";
    let forge = client(&v.url, repo);
    forge.labelled_issues("x").await.expect("issues");
    let requests = v.mock.requests(repo);
    assert!(!requests.is_empty());
    for r in requests {
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(r.accept.as_deref(), Some("application/vnd.github+json"));
        assert_eq!(r.api_version.as_deref(), Some("2022-11-28"));
        assert!(r.user_agent.is_some_and(|ua| ua.starts_with("catalyst/")));
        assert!(
            r.path.contains("labels=x") && r.path.contains("state=open"),
            "{}",
            r.path
        );
    }
}

/// The validator is live both ways: a request off the description is refused before the
/// mock sees it, and an answer off it fails the call.
#[tokio::test]
async fn prism_refuses_requests_and_answers_off_the_description() {
    let Some(v) = setup("prism_refuses_requests_and_answers_off_the_description") else {
        return;
    };
    let repo = "acme/prism";
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/repos/{repo}/pulls", v.url))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "application/vnd.github+json")
        .header("user-agent", "catalyst-test")
        .json(&serde_json::json!({ "title": 7, "head": "x", "base": "main", "draft": "yes" }))
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
        .create_pull_request(&new_pr("bead-4"))
        .await
        .expect("create");
    // The mock answers the next call with an error body and 200: not a pull request.
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
