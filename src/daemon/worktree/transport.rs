//! Moving commits to and from another repository (the cluster's shared remote) with the `git`
//! command: it speaks every transport (a path, ssh, https) with the user's own credentials and
//! configuration, which a library built without TLS or ssh does not. Local work (worktrees,
//! commits, diffs) stays with git2.

use std::ffi::OsStr;
use std::path::Path;

use tokio::process::Command;

/// A `git` command that failed, with what it said.
#[derive(Debug, thiserror::Error)]
#[error("`git {args}` in `{dir}` failed: {detail}")]
pub struct GitCommandError {
    pub args: String,
    pub dir: String,
    pub detail: String,
}

/// Runs `git -C dir args…` without prompting for credentials; its stdout, trimmed.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, GitCommandError> {
    git_with(dir, args, &[]).await
}

/// [`git`] with `env` set for that one process (an askpass script and what it reads). On a
/// failure the detail holds what git printed on stdout too: `push --porcelain` says why a ref
/// was refused there.
pub async fn git_with(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
) -> Result<String, GitCommandError> {
    let failed = |detail: String| GitCommandError {
        args: args.join(" "),
        dir: dir.display().to_string(),
        detail,
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| failed(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = [stdout.trim(), stderr.trim()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        return Err(failed(format!("{}: {said}", out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Fetches `refspecs` from `remote` into the repository at `dir`.
pub async fn fetch(dir: &Path, remote: &str, refspecs: &[String]) -> Result<(), GitCommandError> {
    let mut args = vec!["fetch", "--quiet", "--no-tags", remote];
    args.extend(refspecs.iter().map(String::as_str));
    git(dir, &args).await.map(drop)
}

/// Pushes `commit` to `reference` in `remote`, replacing what it held.
pub async fn push(
    dir: &Path,
    remote: &str,
    commit: &str,
    reference: &str,
) -> Result<(), GitCommandError> {
    let refspec = format!("+{commit}:{reference}");
    git(dir, &["push", "--quiet", remote, &refspec])
        .await
        .map(drop)
}

/// The refs of `remote` whose names start with `prefix`.
pub async fn remote_refs(
    dir: &Path,
    remote: &str,
    prefix: &str,
) -> Result<Vec<String>, GitCommandError> {
    let pattern = format!("{prefix}*");
    let listed = git(dir, &["ls-remote", "--refs", remote, &pattern]).await?;
    Ok(listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(_, name)| name.to_owned())
        .filter(|name| name.starts_with(prefix))
        .collect())
}

/// Deletes `refs` from `remote`, a few hundred to a push.
pub async fn delete_refs(dir: &Path, remote: &str, refs: &[String]) -> Result<(), GitCommandError> {
    for some in refs.chunks(256) {
        let mut args = vec!["push", "--quiet", remote, "--delete"];
        args.extend(some.iter().map(String::as_str));
        git(dir, &args).await?;
    }
    Ok(())
}
