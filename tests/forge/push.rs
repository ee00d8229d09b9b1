//! A real `git push` of a bead's branch to a remote served by `git daemon` on loopback: the
//! first push creates the branch, a push of a rewritten branch with the right lease replaces
//! it, and one with a stale lease is refused, without the token in the error.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use catalyst::daemon::forge::{push, PushError, Token};
use catalyst_testkit::poll::eventually;

use crate::TOKEN;

/// `git daemon`, stopped (by its own pid) when the test ends.
struct GitDaemon(Child);

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.org",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn has_git_daemon() -> bool {
    Command::new("git")
        .args(["daemon", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        || Command::new("git")
            .arg("--exec-path")
            .output()
            .is_ok_and(|o| {
                Path::new(String::from_utf8_lossy(&o.stdout).trim())
                    .join("git-daemon")
                    .exists()
            })
}

#[tokio::test]
async fn a_branch_is_pushed_to_git_daemon_with_a_lease() {
    if !has_git_daemon() {
        eprintln!("skipping: `git daemon` is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let served = dir.path().join("served");
    std::fs::create_dir(&served).expect("mkdir");
    git(&served, &["init", "-q", "--bare", "widgets.git"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let _daemon = GitDaemon(
        Command::new("git")
            .arg("daemon")
            .arg("--enable=receive-pack")
            .arg("--export-all")
            .arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", served.display()))
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run git daemon"),
    );
    eventually("git daemon to listen", async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
    })
    .await;
    let remote = format!("git://127.0.0.1:{port}/widgets.git");
    let bare = served.join("widgets.git");

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
