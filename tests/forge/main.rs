//! The forge clients: against the mock GitHub through Prism, which checks every request and
//! answer against GitHub's published OpenAPI description (`validated`); how rate limits,
//! outages and refusals come out, without the token (`failures`); the Forgejo client the same
//! two ways, against the mock Forgejo and Forgejo's description (`forgejo`); and a real `git
//! push` to `git daemon` on loopback (`push`).

mod failures;
mod flow;
mod forgejo;
mod push;
mod validated;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use catalyst::daemon::forge::{Forge, Token};
use catalyst::domain::config::forge::{ForgeConfig, ForgeKind};
use catalyst_testkit::forge::prism::Validated;
use catalyst_testkit::poll::eventually;

/// The token every test's client uses: tests look for it in errors.
pub const TOKEN: &str = "ghp_catalystTestToken0123456789";

/// A GitHub client for `repository` on the API at `api`, made from a config as the daemon
/// will make it.
pub fn client(api: &str, repository: &str) -> Forge {
    client_of(ForgeKind::Github, api, repository)
}

/// A client of forge `kind` for `repository` on the API at `api`, made from a config as the
/// daemon will make it.
pub fn client_of(kind: ForgeKind, api: &str, repository: &str) -> Forge {
    let config = ForgeConfig {
        kind,
        api_url: Some(api.to_owned()),
        repository: repository.to_owned(),
        token_file: "unused".into(),
        remote: None,
        issue_label: None,
        pull_requests: true,
        poll_secs: 30,
        blocked_label: "catalyst: blocked".into(),
    };
    catalyst::domain::config::forge::check(&config).expect("a valid forge config");
    Forge::new(&config, Token::new(TOKEN)).expect("a forge client")
}

/// Asserts which open pull request comes from `branch`, by its number.
pub async fn assert_open_from(forge: &Forge, branch: &str, number: Option<u64>) {
    let found = forge
        .open_pull_request_from(branch)
        .await
        .expect("list pull requests");
    assert_eq!(found.map(|p| p.number), number, "from `{branch}`");
}

/// Asserts that the target's protection says which checks are required, when it says any.
pub async fn assert_required_checks_read(forge: &Forge, v: &Validated, repo: &str) {
    assert_eq!(forge.required_checks("main").await.expect("a branch"), None);
    v.mock
        .require_checks(repo, "main", &["ci/build", "ci/test"]);
    assert_eq!(
        forge.required_checks("main").await.expect("a branch"),
        Some(vec!["ci/build".to_owned(), "ci/test".to_owned()])
    );
}

/// Runs git in `dir` with a fixed identity; gives its output, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
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

/// A bare repository served by `git daemon` on loopback, which takes pushes; stopped (by its
/// own pid) when dropped.
pub struct GitRemote {
    child: Child,
    /// `git://127.0.0.1:<port>/<name>`.
    pub url: String,
    /// The bare repository, to look at what was pushed.
    pub bare: PathBuf,
}

impl Drop for GitRemote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GitRemote {
    /// Someone else commits `text` as `file` to the remote's `main` from a clone of their
    /// own, and pushes; gives the commit.
    pub fn someone_commits(&self, file: &str, text: &str) -> String {
        let dir = tempfile::tempdir().expect("a folder for someone's clone");
        git(dir.path(), &["clone", "-q", &self.url, "someone"]);
        let clone = dir.path().join("someone");
        std::fs::write(clone.join(file), text).expect("write");
        git(&clone, &["add", file]);
        git(
            &clone,
            &["commit", "-q", "-m", &format!("someone's {file}")],
        );
        git(&clone, &["push", "-q", "origin", "HEAD:main"]);
        git(&clone, &["rev-parse", "HEAD"])
    }

    /// Serves a new bare repository `name` from a folder in `dir`; `None`, saying so, when
    /// `git daemon` is not installed.
    pub async fn serve(dir: &Path, name: &str) -> Option<GitRemote> {
        if !has_git_daemon() {
            eprintln!("skipping: `git daemon` is not installed");
            return None;
        }
        let served = dir.join("served");
        std::fs::create_dir_all(&served).expect("mkdir");
        git(&served, &["init", "-q", "--bare", name]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a port")
            .port();
        let child = Command::new("git")
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
            .expect("run git daemon");
        let remote = GitRemote {
            child,
            url: format!("git://127.0.0.1:{port}/{name}"),
            bare: served.join(name),
        };
        eventually("git daemon to listen", async || {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
        })
        .await;
        Some(remote)
    }
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
