//! Signalling an agent's whole process group.
//!
//! An agent runs in a group of its own (its pid is the group id), so that stopping it reaches
//! every process it started: the shells, test runners and servers of its tool calls. Stopping
//! only the leader would leave them running in the worktree.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getpgrp, Pid};

/// Why a leftover group was not killed.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    /// Group ids 0 and 1 and the daemon's own group are never an agent's: `killpg` on them
    /// would hit the daemon or the whole system.
    #[error("refusing to kill process group {0}: it cannot be an agent's")]
    Refused(i32),
    #[error("cannot kill process group {pgid}: {source}")]
    Kill { pgid: i32, source: Errno },
}

/// Sends `signal` to the group; a group that is already gone is not an error.
pub(crate) fn signal_group(pgid: Pid, signal: Signal) -> Result<(), Errno> {
    match killpg(pgid, signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Kills a process group left by a previous daemon: the agent of a step that was running when
/// the daemon died (docs/journal.md#recovery-at-start-up). The agent itself died with the daemon (`PR_SET_PDEATHSIG`), but
/// that signal is not inherited, so its children may still be running in the worktree.
///
/// Returns whether a group was there to kill (`ESRCH` means it was already gone). The caller
/// passes the pgid recorded when the step was dispatched; a group id is only reused once every
/// member of the old group has exited, and then only by a new group leader, so the window for
/// killing a stranger is the one in which the old group has died *and* its id was taken by a
/// new group before recovery ran.
pub fn kill_leftover_group(pgid: i32) -> Result<bool, KillError> {
    if pgid <= 1 || Pid::from_raw(pgid) == getpgrp() {
        return Err(KillError::Refused(pgid));
    }
    match killpg(Pid::from_raw(pgid), Signal::SIGKILL) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(source) => Err(KillError::Kill { pgid, source }),
    }
}

/// SIGKILLs the process group of every process whose `CATALYST_CONTEXT` lies under `runs`
/// (an agent of this workspace, or anything it started, sandbox included), and returns how
/// many groups it killed. For start-up, before any agent runs: it finds the agents a killed
/// daemon left running that no pid file names (it died between starting them and recording
/// them).
pub fn kill_orphans(runs: &std::path::Path) -> usize {
    let mut needle = b"CATALYST_CONTEXT=".to_vec();
    needle.extend_from_slice(runs.as_os_str().as_encoded_bytes());
    needle.push(b'/');
    let own = getpgrp();
    let mut killed = std::collections::BTreeSet::new();
    for pid in pids_with_env(|var| var.starts_with(&needle)) {
        let Ok(pgid) = nix::unistd::getpgid(Some(Pid::from_raw(pid))) else {
            continue;
        };
        if pgid != own && pgid.as_raw() > 1 && killed.insert(pgid.as_raw()) {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
    killed.len()
}

/// The processes (from `/proc`) with an environment entry (`NAME=value`) that `wanted` accepts;
/// those whose environment cannot be read (another user's, or gone) are left out.
pub fn pids_with_env(wanted: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ.split(|b| *b == 0).any(&wanted).then_some(pid)
        })
        .collect()
}

/// SIGKILLs the group when dropped while armed, so an agent's group dies even when the future
/// running it is dropped half-way (`kill_on_drop` only reaches the leader).
pub(crate) struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    pub(crate) fn new(pgid: Pid) -> GroupGuard {
        GroupGuard { pgid: Some(pgid) }
    }

    /// Kills the group now and disarms the guard.
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            if let Err(e) = signal_group(pgid, Signal::SIGKILL) {
                tracing::warn!(pgid = pgid.as_raw(), error = %e, "cannot kill the agent's process group");
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
