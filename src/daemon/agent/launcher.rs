//! Agents' processes started ahead of their attempts (see [`super::shim`] for why): each
//! waits, in a control group of its own, for the command line of the attempt that takes it.

use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

use std::process::Stdio;
use tokio::io::AsyncWriteExt;

use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::spawn::{self, process_limit};
use super::{shim, RunSpec};
use crate::daemon::cgroup::AttemptGroup;

/// How many processes wait for the next attempts: one per agent that can start at the same
/// moment in the benchmarks' two-agent runs; a burst beyond it starts the rest on demand.
const AHEAD: usize = 2;

/// Starts agents' processes ahead of their attempts and hands them out ([`Launcher::take`]).
/// Dropped, it kills the processes still waiting.
#[derive(Debug)]
pub struct Launcher {
    /// The program whose `__exec` waits for the command line: `catalyst-hook`, else `catalyst`.
    shim: PathBuf,
    ready: Mutex<Vec<Launch>>,
}

/// An agent's process started ahead of its command line; dropped unused, it is killed and its
/// control group removed.
#[derive(Debug)]
pub struct Launch {
    nice: u32,
    max_processes: Option<u32>,
    handle: JoinHandle<io::Result<Launched>>,
}

/// A started shim, waiting on its stdin.
#[derive(Debug)]
pub(super) struct Launched {
    pub(super) child: Child,
    pub(super) limit: Option<AttemptGroup>,
}

impl Launcher {
    pub fn new(shim: PathBuf) -> Launcher {
        Launcher {
            shim,
            ready: Mutex::new(Vec::new()),
        }
    }

    /// A process for the attempt `spec` describes: one started ahead with its niceness and
    /// process limit when there is one, else one started now; either way another starts for
    /// the next attempt. Must be called within the daemon's runtime.
    pub fn take(&self, spec: &RunSpec) -> Launch {
        let fits = |l: &Launch| l.nice == spec.nice && l.max_processes == spec.max_processes;
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        // Started under a config since changed: no attempt will fit them.
        ready.retain(fits);
        let taken = ready.pop();
        while ready.len() < AHEAD {
            ready.push(self.start(spec.nice, spec.max_processes));
        }
        drop(ready);
        taken.unwrap_or_else(|| self.start(spec.nice, spec.max_processes))
    }

    /// Starts a shim with `posix_spawn` (no `pre_exec`, so the daemon's page tables are not
    /// copied): it sets its own niceness, parent-death signal and control group
    /// ([`shim::Setup`]).
    fn start(&self, nice: u32, max_processes: Option<u32>) -> Launch {
        let limit = max_processes.and_then(process_limit);
        let setup = shim::Setup {
            parent: Some(std::process::id()),
            niceness: spawn::niceness(nice),
            cgroup: limit.as_ref().map(AttemptGroup::procs_path),
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
            Ok(Launched { child, limit })
        });
        Launch {
            nice,
            max_processes,
            handle,
        }
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
    /// Turns the waiting shim into the agent.
    pub(super) async fn exec(&mut self, exec: &shim::Exec) -> io::Result<()> {
        let pipe = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("the shim has no stdin"))?;
        pipe.write_all(&shim::encode(exec)).await
    }
}
