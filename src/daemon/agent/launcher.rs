//! Agents' processes started ahead of their attempts (see [`super::shim`] for why): each
//! waits, in a control group of its own, for the command line of the attempt that takes it.
//! On x86-64 Linux each is a clone of the daemon ([`super::cloned`]), elsewhere a shim.

use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

use std::process::Stdio;
use tokio::io::AsyncWriteExt;

use tokio::process::Command;
use tokio::task::JoinHandle;

use super::process::Process;
use super::shim;
use super::spawn::{self, process_limit};
use crate::daemon::cgroup::AttemptGroup;

/// How many processes wait for the next attempts: one per agent that can start at the same
/// moment in the benchmarks' two-agent runs; a burst beyond it starts the rest on demand.
const AHEAD: usize = 2;

/// Starts agents' processes ahead of their attempts and hands them out ([`Launcher::take`]).
/// One serves one loaded config (a reload makes a new one), so every process it starts has
/// the niceness and process limit its attempts run with. Dropped, it kills the processes
/// still waiting.
#[derive(Debug)]
pub struct Launcher {
    /// The program that waits for the command line: `catalyst-shim` ([`super::shim_bin`]), else
    /// `catalyst-hook` or `catalyst`, whose `__exec` is the same shim.
    shim: PathBuf,
    /// Added to the daemon's niceness (`agent_nice`).
    nice: u32,
    /// Each process's control group allows this many (`max_processes`); `None`: no group.
    max_processes: Option<u32>,
    ready: Mutex<Vec<Launch>>,
}

/// An agent's process started ahead of its command line; dropped unused, it is killed and its
/// control group removed.
#[derive(Debug)]
pub struct Launch {
    handle: JoinHandle<io::Result<Launched>>,
}

/// A started process, waiting for its command line.
pub(super) struct Launched {
    pub(super) child: Process,
    pub(super) limit: Option<AttemptGroup>,
}

impl std::fmt::Debug for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launched")
            .field("pid", &self.child.id())
            .finish()
    }
}

impl Launcher {
    /// Starts `shim`'s processes `nice` above the daemon's niceness, each in a control group
    /// allowing `max_processes` (none for `None`).
    pub fn new(shim: PathBuf, nice: u32, max_processes: Option<u32>) -> Launcher {
        Launcher {
            shim,
            nice,
            max_processes,
            ready: Mutex::new(Vec::new()),
        }
    }

    /// A process for the next attempt: one started ahead when there is one, else one started
    /// now; either way another starts for the attempt after. Must be called within the
    /// daemon's runtime.
    pub fn take(&self) -> Launch {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        let taken = ready.pop();
        while ready.len() < AHEAD {
            ready.push(self.start());
        }
        drop(ready);
        taken.unwrap_or_else(|| self.start())
    }

    /// Starts a process that waits for its command line: on x86-64 Linux a clone of the
    /// daemon ([`super::cloned`]), elsewhere a shim started with `posix_spawn` (no `pre_exec`,
    /// so the daemon's page tables are not copied), which sets its own niceness,
    /// parent-death signal and control group ([`shim::Setup`]).
    fn start(&self) -> Launch {
        let limit = self.max_processes.and_then(process_limit);
        let niceness = super::priority::niceness(self.nice);
        let cgroup = limit.as_ref().map(AttemptGroup::join_path);
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if super::cloned::supported() {
            let handle = tokio::spawn(async move {
                let child = spawn::clone_ahead(niceness, cgroup).await?;
                Ok(Launched {
                    child: Process::Cloned(child),
                    limit,
                })
            });
            return Launch { handle };
        }
        let setup = shim::Setup {
            parent: Some(std::process::id()),
            niceness,
            cgroup,
        };
        let mut command = Command::new(&self.shim);
        command
            .arg(shim::EXEC_COMMAND)
            .args(setup.args())
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let handle = tokio::spawn(async move {
            let child = spawn::spawn(command).await?;
            Ok(Launched {
                child: Process::Spawned(child),
                limit,
            })
        });
        Launch { handle }
    }
}

impl Launch {
    /// The started process; `None`, logged, when it could not start (the caller spawns the
    /// agent itself then).
    pub(super) async fn ready(self) -> Option<Launched> {
        let started = self
            .handle
            .await
            .map_err(io::Error::other)
            .and_then(|started| started)
            .and_then(|mut launched| match launched.child.try_wait() {
                // Its setup failed (the reason is on its stderr, which nobody reads yet).
                Ok(Some(status)) => Err(io::Error::other(format!("the shim exited: {status}"))),
                _ => Ok(launched),
            });
        started
            .inspect_err(|e| {
                tracing::warn!(error = %e, "cannot start the agent's process ahead; starting it now")
            })
            .ok()
    }
}

impl Launched {
    /// Turns the waiting process into the agent.
    pub(super) async fn exec(&mut self, exec: &shim::Exec) -> io::Result<()> {
        match &mut self.child {
            Process::Spawned(child) => {
                let pipe = child
                    .stdin
                    .as_mut()
                    .ok_or_else(|| io::Error::other("the shim has no stdin"))?;
                pipe.write_all(&shim::encode(exec)).await
            }
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => child.exec(exec),
        }
    }
}
