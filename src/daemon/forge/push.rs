//! Pushing a bead's branch to the forge's git remote with the system `git`, which knows every
//! transport (https, ssh, git) and the repository's own settings.
//!
//! The token never goes on the command line (where `ps` shows it) or into a URL (which git
//! may print): for an `https` remote git asks for it through `GIT_ASKPASS`, a script that
//! prints it from an environment variable only that one `git` process has. Credential helpers
//! and terminal prompts are turned off, so a missing or wrong token fails at once instead of
//! hanging on a prompt or reaching for someone's stored credentials.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use super::Token;

/// The environment variable the askpass script reads the token from.
const TOKEN_VAR: &str = "CATALYST_FORGE_TOKEN";

/// What git is given as the user name over https: GitHub takes any with a token; this one is
/// what its docs use for app tokens.
const HTTPS_USER: &str = "x-access-token";

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("cannot run `git push`: {0}")]
    Spawn(String),
    /// The remote has moved since `lease`: someone else pushed to the branch.
    #[error("`git push` of `{branch}` was refused: the remote branch is not where it was expected (someone else pushed?): {stderr}")]
    Stale { branch: String, stderr: String },
    #[error("`git push` of `{branch}` failed ({status}): {stderr}")]
    Failed {
        branch: String,
        status: String,
        stderr: String,
    },
}

/// Pushes `local` (a branch of the repository at `repo`) to `remote` as branch `remote_branch`.
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
    let mut cmd = tokio::process::Command::new("git");
    cmd.current_dir(repo)
        .args(["-c", "credential.helper=", "-c", "core.askPass="])
        .arg("push")
        .arg("--porcelain")
        .arg(format!("--force-with-lease={dst}:{}", lease.unwrap_or("")))
        .arg("--")
        .arg(remote)
        .arg(format!("refs/heads/{local}:{dst}"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // The askpass script lives in a private folder as long as the push runs.
    let askpass_dir = match token {
        Some(token) if remote.starts_with("https://") || remote.starts_with("http://") => {
            let dir = tempfile::Builder::new()
                .prefix("catalyst-askpass")
                .tempdir()
                .map_err(|e| PushError::Spawn(format!("cannot make the askpass script: {e}")))?;
            let script = dir.path().join("askpass");
            std::fs::write(
                &script,
                format!(
                    "#!/bin/sh\ncase \"$1\" in\n  Username*) echo {HTTPS_USER} ;;\n  *) printf '%s\\n' \"${TOKEN_VAR}\" ;;\nesac\n"
                ),
            )
            .and_then(|()| std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| PushError::Spawn(format!("cannot make the askpass script: {e}")))?;
            cmd.env("GIT_ASKPASS", &script)
                .env(TOKEN_VAR, token.secret());
            Some(dir)
        }
        _ => None,
    };
    let output = cmd
        .output()
        .await
        .map_err(|e| PushError::Spawn(e.to_string()))?;
    drop(askpass_dir);
    if output.status.success() {
        return Ok(());
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let said = match token {
        Some(token) => token.scrub(said.trim()),
        None => said.trim().to_owned(),
    };
    let branch = remote_branch.to_owned();
    if said.contains("stale info") || said.contains("fetch first") {
        return Err(PushError::Stale {
            branch,
            stderr: said,
        });
    }
    Err(PushError::Failed {
        branch,
        status: output.status.to_string(),
        stderr: said,
    })
}
