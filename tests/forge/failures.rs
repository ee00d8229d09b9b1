//! Rate limits, outages and refusals come out as the typed errors callers pause or give up
//! on, and no error holds the token. The mock is called directly here: GitHub's description
//! does not list every failure for every operation, and these tests are about the client's
//! reading of status and headers, not the shapes.

use std::os::unix::fs::PermissionsExt;

use catalyst::daemon::forge::{ForgeError, Token};
use catalyst_testkit::forge::{serve, Failure, MockGitHub};

use crate::{client, TOKEN};

async fn mock() -> (MockGitHub, String) {
    let mock = MockGitHub::default();
    let url = serve(mock.clone()).await;
    (mock, url)
}

#[tokio::test]
async fn a_429_with_retry_after_is_a_rate_limit_until_then() {
    let (mock, url) = mock().await;
    let forge = client(&url, "acme/limits");
    mock.fail_next("acme/limits", Failure::rate_limit_429(90));
    let before = chrono::Utc::now();
    let err = forge.pull_request(1).await.expect_err("rate limited");
    eprintln!("429: {err}");
    assert!(err.is_transient());
    let ForgeError::RateLimited { until } = err else {
        panic!("not a rate limit: {err}")
    };
    let wait = (until - before).num_seconds();
    assert!((89..=91).contains(&wait), "waits {wait} s");
    // The limit was for that call only: the next goes through.
    forge.labelled_issues("x").await.expect("the next call");
}

#[tokio::test]
async fn a_403_with_no_requests_left_is_a_rate_limit_until_the_reset() {
    let (mock, url) = mock().await;
    let forge = client(&url, "acme/limits403");
    let reset = chrono::Utc::now().timestamp() + 600;
    mock.fail_next("acme/limits403", Failure::rate_limit_403(reset));
    let err = forge
        .labelled_issues("catalyst")
        .await
        .expect_err("rate limited");
    eprintln!("403: {err}");
    assert!(err.is_transient());
    let ForgeError::RateLimited { until } = err else {
        panic!("not a rate limit: {err}")
    };
    assert_eq!(until.timestamp(), reset);

    // A 403 that is not a rate limit (no permission) is a refusal.
    mock.fail_next(
        "acme/limits403",
        Failure {
            status: 403,
            headers: vec![("x-ratelimit-remaining".into(), "4999".into())],
            message: "Resource not accessible by integration".into(),
        },
    );
    let err = forge.close_issue(1).await.expect_err("refused");
    assert!(
        matches!(err, ForgeError::Refused { status: 403, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("Resource not accessible"), "{err}");
}

#[tokio::test]
async fn a_500_or_no_server_is_unavailable() {
    let (mock, url) = mock().await;
    let forge = client(&url, "acme/down");
    mock.fail_next("acme/down", Failure::server_error(500));
    let err = forge.pull_request(1).await.expect_err("unavailable");
    eprintln!("500: {err}");
    assert!(
        matches!(err, ForgeError::Unavailable { .. }) && err.is_transient(),
        "{err}"
    );
    mock.fail_next("acme/down", Failure::server_error(503));
    assert!(matches!(
        forge.reviews_and_comments(1).await,
        Err(ForgeError::Unavailable { .. })
    ));

    // Nothing listens on a port just let go of.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let nowhere = client(&format!("http://127.0.0.1:{port}"), "acme/down");
    let err = nowhere.pull_request(1).await.expect_err("no server");
    eprintln!("no server: {err}");
    assert!(matches!(err, ForgeError::Unavailable { .. }), "{err}");
}

#[tokio::test]
async fn no_error_holds_the_token() {
    let (mock, url) = mock().await;
    let forge = client(&url, "acme/secret");
    // A server that echoes the credentials it was sent.
    for status in [401, 403, 422, 429, 500] {
        mock.fail_next(
            "acme/secret",
            Failure {
                status,
                headers: Vec::new(),
                message: format!("bad credentials: Bearer {TOKEN}"),
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

#[test]
fn a_token_file_others_can_read_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("github-token");
    std::fs::write(&path, format!("{TOKEN}\n")).expect("write the token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = Token::read(&path).expect_err("group and others can read it");
    eprintln!("0644: {err}");
    assert!(
        err.to_string().contains("chmod 600") && !err.to_string().contains(TOKEN),
        "{err}"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let token = Token::read(&path).expect("only its owner can read it");
    assert!(!format!("{token:?}").contains(TOKEN));
}
