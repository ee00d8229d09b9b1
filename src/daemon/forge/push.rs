//! Pushing a bead's branch to the forge's git remote with the system `git`, which knows every
//! transport (https, ssh, git) and the repository's own settings.
//!
//! The token never goes on the command line (where `ps` shows it) or into a URL (which git
//! may print): for an `https` remote git asks for it through `GIT_ASKPASS`, a script that
//! prints it from an environment variable only that one `git` process has. Credential helpers
//! and terminal prompts are turned off, so a missing or wrong token fails at once instead of
//! hanging on a prompt or reaching for someone's stored credentials.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::Token;
use crate::daemon::worktree::transport;

/// The environment variable the askpass script reads the token from.
const TOKEN_VAR: &str = "CATALYST_FORGE_TOKEN";

/// What git is given as the user name over https: GitHub takes any with a token; this one is
/// what its docs use for app tokens.
const HTTPS_USER: &str = "x-access-token";

/// Why a push or a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("cannot run git against the remote: {0}")]
    Spawn(String),
    /// The remote has moved since `lease`: someone else pushed to the branch.
    #[error("`git push` of `{branch}` was refused: the remote branch is not where it was expected (someone else pushed?): {stderr}")]
    Stale { branch: String, stderr: String },
    /// `stderr` is what git said (its exit status first).
    #[error("`git push` of `{branch}` failed: {stderr}")]
    Failed { branch: String, stderr: String },
    #[error("`git fetch` of `{branch}` failed: {stderr}")]
    Fetch { branch: String, stderr: String },
}

/// Pushes `local` (a branch of the repository at `repo`) to `remote` as branch `remote_branch`,
/// through the one way the daemon runs `git` against another repository
/// ([`transport::git_with`](crate::daemon::worktree::transport::git_with)).
///
/// `lease` is the commit the remote branch is expected at (the pull request's head), or
/// `None` when it should not exist yet: the push replaces the branch (a bead's branch is
/// rebased between pushes) but only if nobody else has pushed to it since, which
/// `--force-with-lease` with an explicit expectation checks even for a remote given as a URL.
pub async fn push(
    repo: &Path,
    remote: &str,
    local: &str,
    remote_branch: &str,
    lease: Option<&str>,
    token: Option<&Token>,
) -> Result<(), PushError> {
    let dst = format!("refs/heads/{remote_branch}");
    let lease_arg = format!("--force-with-lease={dst}:{}", lease.unwrap_or(""));
    let refspec = format!("refs/heads/{local}:{dst}");
    let args = ["push", "--porcelain", &lease_arg, "--", remote, &refspec];
    let branch = remote_branch.to_owned();
    let said = match with_remote(repo, remote, &args, token).await? {
        Ok(()) => return Ok(()),
        Err(said) => said,
    };
    if said.contains("stale info") || said.contains("fetch first") {
        return Err(PushError::Stale {
            branch,
            stderr: said,
        });
    }
    Err(PushError::Failed {
        branch,
        stderr: said,
    })
}

/// Fetches branch `branch` of `remote` into `into` (a ref of the repository at `repo`),
/// whatever `into` held before.
pub async fn fetch(
    repo: &Path,
    remote: &str,
    branch: &str,
    into: &str,
    token: Option<&Token>,
) -> Result<(), PushError> {
    let refspec = format!("+refs/heads/{branch}:{into}");
    let args = ["fetch", "--quiet", "--no-tags", "--", remote, &refspec];
    match with_remote(repo, remote, &args, token).await? {
        Ok(()) => Ok(()),
        Err(said) => Err(PushError::Fetch {
            branch: branch.to_owned(),
            stderr: said,
        }),
    }
}

/// Runs `git args…` (which name `remote`) in `repo` through the one way the daemon runs git
/// against another repository, with the token for an http(s) remote and no other way to ask
/// for credentials. The outer error: git could not be run with them; the inner one: what git
/// said when it failed, scrubbed of the token.
async fn with_remote(
    repo: &Path,
    remote: &str,
    args: &[&str],
    token: Option<&Token>,
) -> Result<Result<(), String>, PushError> {
    let mut all = vec!["-c", "credential.helper=", "-c", "core.askPass="];
    all.extend_from_slice(args);
    // The askpass script lives in a private folder as long as git runs. Without a token, an
    // empty `GIT_ASKPASS` keeps git from asking whatever the daemon's environment names.
    let https = remote.starts_with("https://") || remote.starts_with("http://");
    let askpass_dir = match token {
        Some(_) if https => Some(askpass_script()?),
        _ => None,
    };
    let script = askpass_dir.as_ref().map(|dir| dir.path().join("askpass"));
    let secret = token.filter(|_| https).map(|t| OsStr::new(t.secret()));
    let mut env: Vec<(&str, &OsStr)> = vec![
        (
            "GIT_ASKPASS",
            script.as_deref().map_or(OsStr::new(""), Path::as_os_str),
        ),
        ("SSH_ASKPASS", OsStr::new("")),
    ];
    if let Some(secret) = secret {
        env.push((TOKEN_VAR, secret));
    }
    let result = transport::git_with(repo, &all, &env).await;
    drop(askpass_dir);
    Ok(result.map(drop).map_err(|e| match token {
        Some(token) => token.scrub(&e.detail),
        None => e.detail,
    }))
}

/// A private folder holding the askpass script: `x-access-token` for the user name, the
/// token from [`TOKEN_VAR`] for the password.
fn askpass_script() -> Result<tempfile::TempDir, PushError> {
    let failed =
        |e: std::io::Error| PushError::Spawn(format!("cannot make the askpass script: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("catalyst-askpass")
        .tempdir()
        .map_err(failed)?;
    let script = dir.path().join("askpass");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  Username*) echo {HTTPS_USER} ;;\n  *) printf '%s\\n' \"${TOKEN_VAR}\" ;;\nesac\n"
        ),
    )
    .and_then(|()| std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)))
    .map_err(failed)?;
    Ok(dir)
}
