//! Checks worth making before the first step: the target branch exists and the agent CLI runs.
//! `catalystd` logs them at start and `catalyst init` prints them, so a repository whose branch
//! is `master` or a machine without `claude` is named at once instead of at the first dispatch.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::domain::agent::profile::AgentProfile;

/// How long the agent CLI may take to print its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a check before the first step failed. Each says what it checked and, where there is
/// one, what to do; none stops the daemon, which logs it and goes on.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("`{path}` is not a git repository: {message}")]
    NotARepository { path: String, message: String },
    /// `hint` says which branch to name instead, or that there is no commit yet.
    #[error("target branch `{target}` does not exist; no step can start until it does: {hint}")]
    NoTargetBranch { target: String, hint: String },
    #[error("the agent profile has an empty `command`")]
    EmptyCommand,
    #[error("the agent CLI `{program}` is not installed or not on the daemon's PATH")]
    NotInstalled { program: String },
    #[error("cannot run the agent CLI `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot wait for `{program} --version`: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
    #[error("`{program} --version` did not answer within {}s", .timeout.as_secs_f32())]
    NoAnswer { program: String, timeout: Duration },
    #[error("`{program} --version` failed ({status}): {first_line}")]
    VersionFailed {
        program: String,
        status: std::process::ExitStatus,
        first_line: String,
    },
}

/// Whether branch `target` exists in the repository at `workspace`: `Ok` with its short tip,
/// or why not, with what to do.
pub fn target_branch(workspace: &Path, target: &str) -> Result<String, PreflightError> {
    let repo = git2::Repository::open(workspace).map_err(|e| PreflightError::NotARepository {
        path: workspace.display().to_string(),
        message: e.message().to_owned(),
    })?;
    let tip = repo
        .find_branch(target, git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().peel_to_commit().ok())
        .map(|c| c.id());
    match tip {
        Some(tip) => Ok(format!(
            "target branch `{target}` at {}",
            &tip.to_string()[..12]
        )),
        None => {
            let branches: Vec<String> = repo
                .branches(Some(git2::BranchType::Local))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|(b, _)| b.name().ok().flatten().map(str::to_owned))
                .filter(|n| !n.starts_with("catalyst/"))
                .collect();
            let hint = match branches.as_slice() {
                [] => "the repository has no commit yet: commit something first".to_owned(),
                [one] => format!("set `target_branch = \"{one}\"` in .catalyst/config.toml"),
                many => format!(
                    "set `target_branch` in .catalyst/config.toml to one of: {}",
                    many.join(", ")
                ),
            };
            Err(PreflightError::NoTargetBranch {
                target: target.to_owned(),
                hint,
            })
        }
    }
}

/// Whether the profile's program runs: `Ok` with the first line of `<program> --version`, or
/// why not. The profile's environment is applied, as for an attempt.
pub fn agent_cli(profile: &AgentProfile) -> Result<String, PreflightError> {
    agent_cli_within(profile, VERSION_TIMEOUT)
}

fn agent_cli_within(profile: &AgentProfile, timeout: Duration) -> Result<String, PreflightError> {
    let Some(program) = profile.command.first() else {
        return Err(PreflightError::EmptyCommand);
    };
    let child = Command::new(program)
        .arg("--version")
        .envs(&profile.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PreflightError::NotInstalled {
                program: program.clone(),
            })
        }
        Err(source) => {
            return Err(PreflightError::Spawn {
                program: program.clone(),
                source,
            })
        }
    };
    // Waited for on a thread of its own, so that one that hangs is killed at the deadline.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(timeout) {
        Ok(Ok(output)) => output,
        Ok(Err(source)) => {
            return Err(PreflightError::Wait {
                program: program.clone(),
                source,
            })
        }
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            return Err(PreflightError::NoAnswer {
                program: program.clone(),
                timeout,
            });
        }
    };
    let (status, out) = (output.status, String::from_utf8_lossy(&output.stdout));
    let first = out.lines().next().unwrap_or("").trim().to_owned();
    if status.success() {
        Ok(format!("agent CLI `{program}` runs: {first}"))
    } else {
        Err(PreflightError::VersionFailed {
            program: program.clone(),
            status,
            first_line: first,
        })
    }
}

/// Logs both checks; run off the start-up path (the CLI may take a second to answer).
pub fn log(workspace: &Path, target: &str, profile: Option<&AgentProfile>) {
    let results = [
        Some(target_branch(workspace, target)),
        profile.map(agent_cli),
    ];
    for result in results.into_iter().flatten() {
        match result {
            Ok(fine) => tracing::info!("{fine}"),
            Err(problem) => tracing::warn!("{problem}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_target_branch_names_the_branches_there_are() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let commit = repo.commit(None, &sig, &sig, "init", &tree, &[]).unwrap();
        let commit = repo.find_commit(commit).unwrap();
        repo.branch("master", &commit, true).unwrap();
        let err = target_branch(dir.path(), "main").unwrap_err().to_string();
        assert!(err.contains("`main` does not exist"), "{err}");
        assert!(err.contains("target_branch = \"master\""), "{err}");
        assert!(target_branch(dir.path(), "master")
            .unwrap()
            .contains("master"));
    }

    #[test]
    fn an_agent_cli_that_is_not_installed_is_named() {
        let mut profile = AgentProfile::claude();
        profile.command = vec!["catalyst-no-such-agent-cli".into()];
        let err = agent_cli(&profile).unwrap_err();
        assert!(matches!(err, PreflightError::NotInstalled { .. }), "{err}");
        let err = err.to_string();
        assert!(err.contains("not installed"), "{err}");
        profile.command = vec!["sh".into(), "-c".into()];
        // `sh --version` fails or prints something; either way it was run, not missing.
        let ran = agent_cli(&profile);
        assert!(
            !ran.as_ref()
                .err()
                .is_some_and(|e| matches!(e, PreflightError::NotInstalled { .. })),
            "{ran:?}"
        );
        // An agent CLI that never answers is killed at the deadline.
        let dir = tempfile::tempdir().unwrap();
        let hang = dir.path().join("hang");
        std::fs::write(&hang, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        profile.command = vec![hang.display().to_string()];
        let err = agent_cli_within(&profile, Duration::from_millis(200))
            .unwrap_err()
            .to_string();
        assert!(err.contains("did not answer within 0.2s"), "{err}");
    }
}
