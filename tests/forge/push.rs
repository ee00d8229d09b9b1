//! A real `git push` of a bead's branch to a remote served by `git daemon` on loopback: the
//! first push creates the branch, a push of a rewritten branch with the right lease replaces
//! it, and one with a stale lease is refused, without the token in the error.

use catalyst::daemon::forge::{push, PushError, Token};

use crate::{git, GitRemote, TOKEN};

#[tokio::test]
async fn a_branch_is_pushed_to_git_daemon_with_a_lease() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let Some(served) = GitRemote::serve(dir.path(), "widgets.git").await else {
        return;
    };
    let (remote, bare) = (served.url.clone(), served.bare.clone());

    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("a.txt"), "one\n").expect("write");
    git(&work, &["add", "a.txt"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(&work, &["checkout", "-q", "-b", "bead-1"]);
    std::fs::write(work.join("a.txt"), "two\n").expect("write");
    git(&work, &["commit", "-q", "-am", "two"]);
    let first = git(&work, &["rev-parse", "HEAD"]);
    let token = Token::new(TOKEN);

    push(
        &work,
        &remote,
        "bead-1",
        "catalyst/bead-1",
        None,
        Some(&token),
    )
    .await
    .expect("the first push");
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/catalyst/bead-1"]),
        first
    );

    // The bead's branch is rewritten (a rebase, a fix-up); the push replaces it, given where
    // the remote branch was.
    std::fs::write(work.join("a.txt"), "two, fixed\n").expect("write");
    git(
        &work,
        &["commit", "-q", "-a", "--amend", "-m", "two, fixed"],
    );
    let second = git(&work, &["rev-parse", "HEAD"]);
    push(
        &work,
        &remote,
        "bead-1",
        "catalyst/bead-1",
        Some(&first),
        Some(&token),
    )
    .await
    .expect("the forced push");
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/catalyst/bead-1"]),
        second
    );

    // The remote moved on from `first` (someone else pushed `second`): a push of a newer
    // rewrite expecting `first` is refused, as is one expecting no branch.
    std::fs::write(work.join("a.txt"), "two, fixed again\n").expect("write");
    git(
        &work,
        &["commit", "-q", "-a", "--amend", "-m", "two, fixed again"],
    );
    for lease in [Some(first.as_str()), None] {
        let err = push(
            &work,
            &remote,
            "bead-1",
            "catalyst/bead-1",
            lease,
            Some(&token),
        )
        .await
        .expect_err("a stale lease");
        eprintln!("stale lease {lease:?}: {err}");
        assert!(matches!(err, PushError::Stale { .. }), "{err}");
        assert!(!format!("{err} {err:?}").contains(TOKEN));
    }
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/catalyst/bead-1"]),
        second
    );

    let err = push(&work, &remote, "no-such-branch", "x", None, Some(&token))
        .await
        .expect_err("no such local branch");
    assert!(matches!(err, PushError::Failed { .. }), "{err}");
}

/// Over http(s) git gets the token from the askpass script, not from its command line: a
/// server that asks for credentials is sent `x-access-token` and the token, and its refusal
/// comes back without the token.
#[tokio::test]
async fn an_https_style_remote_gets_the_token_through_askpass() {
    use std::sync::{Arc, Mutex};

    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    use base64::Engine as _;

    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    // Asks for credentials, then refuses whoever comes: what git sent is what matters.
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let record = record.clone();
        async move {
            match headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
            {
                Some(auth) => {
                    record.lock().expect("seen").push(auth.to_owned());
                    (StatusCode::FORBIDDEN, "denied").into_response()
                }
                None => (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
                    "who are you",
                )
                    .into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().expect("a temporary folder");
    let work = dir.path();
    git(work, &["init", "-q"]);
    std::fs::write(work.join("a.txt"), "one\n").expect("write");
    git(work, &["add", "a.txt"]);
    git(work, &["commit", "-q", "-m", "one"]);

    let remote = format!("http://{addr}/acme/widgets.git");
    let err = push(
        work,
        &remote,
        "main",
        "catalyst/x",
        None,
        Some(&Token::new(TOKEN)),
    )
    .await
    .expect_err("the server refuses");
    eprintln!("refused over http: {err}");
    assert!(!format!("{err} {err:?}").contains(TOKEN), "{err}");
    let seen = seen.lock().expect("seen").clone();
    let expected =
        base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{TOKEN}"));
    assert_eq!(
        seen.first().map(String::as_str),
        Some(format!("Basic {expected}").as_str()),
        "{seen:?}"
    );
}
