//! Starting an agent process so that it dies with the daemon.
//!
//! `PR_SET_PDEATHSIG` sends the child a signal when its parent dies, but on Linux "the parent"
//! is the *thread* that forked it: the signal fires when that thread exits, even if the daemon
//! lives on. Tokio forks on whichever thread polls the spawn, and its blocking-pool threads exit
//! after an idle spell, which would SIGKILL a healthy agent mid-step. So every agent is forked
//! by one dedicated thread that lives as long as the process, and the signal then means what it
//! should: the daemon is gone.
// `unsafe` here: the one `pre_exec` closure every agent's process runs ([`ChildSetup`]).
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io;
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::OnceLock;

use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::daemon::cgroup::AttemptGroup;

/// Work for the spawner thread.
type Job = Box<dyn FnOnce() + Send>;

/// The spawner thread's queue; `None` when the thread could not be started.
static SPAWNER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();

fn spawner() -> Option<&'static mpsc::Sender<Job>> {
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("catalyst-agent-spawner".into())
                .spawn(move || serve(rx));
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the agent spawner thread; agents will be spawned from runtime threads and may be killed when one exits");
                    None
                }
            }
        })
        .as_ref()
}

fn serve(jobs: mpsc::Receiver<Job>) {
    // Agents inherit it, and everything they start (see `daemon::sched`).
    crate::daemon::sched::as_batch();
    for job in jobs {
        job();
    }
}

/// Spawns `command` from the spawner thread (see the module documentation), or from this
/// thread when there is none. A child nobody waits for any more (the caller's future was
/// dropped) is killed with its group.
pub(crate) async fn spawn(mut command: Command) -> io::Result<Child> {
    let runtime = Handle::current();
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        // The child's pipes and exit notification are registered with the caller's runtime.
        let spawned = {
            let _context = runtime.enter();
            command.spawn()
        };
        if let Err(Ok(orphan)) = reply.send(spawned) {
            kill_group_of(&orphan);
        }
    });
    match spawner() {
        Some(spawner) => {
            if let Err(mpsc::SendError(job)) = spawner.send(job) {
                job();
            }
        }
        None => job(),
    }
    answer
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the agent spawner thread stopped")))
}

fn kill_group_of(child: &Child) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        let _ = super::group::signal_group(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// What an agent's process does between `fork` and `exec`, before it runs anything of its
/// own: die with the daemon, lower its priority, join its attempt's control group. Every
/// process it starts inherits all three.
#[derive(Debug, Default)]
pub(crate) struct ChildSetup {
    /// The daemon's pid: the child asks for `SIGKILL` when its parent dies, then checks that
    /// the parent is still this one (it may have died between `fork` and `prctl`).
    parent: Option<nix::unistd::Pid>,
    /// The absolute niceness to set ([`super::priority::niceness`]).
    niceness: Option<i32>,
    /// The control group's join file ([`AttemptGroup::join_path`]), opened by the daemon:
    /// the child writes [`crate::daemon::cgroup::JOIN_SELF`] to it.
    join: Option<std::fs::File>,
}

impl ChildSetup {
    /// Dies with the daemon (Linux's parent-death signal; see the module documentation).
    pub(crate) fn die_with_daemon(mut self) -> Self {
        self.parent = Some(nix::unistd::getpid());
        self
    }

    /// Runs `nice` above the daemon's niceness (0: at the daemon's).
    pub(crate) fn nice(mut self, nice: u32) -> Self {
        self.niceness = super::priority::niceness(nice);
        self
    }

    /// Joins `group` (its process limit).
    pub(crate) fn join(mut self, group: &AttemptGroup) -> io::Result<Self> {
        self.join = Some(group.joiner()?);
        Ok(self)
    }

    /// Makes `command`'s child do this before it executes its program.
    pub(crate) fn apply(self, command: &mut Command) {
        // SAFETY: the closure runs in the forked child before `exec`. `run` makes only
        // async-signal-safe system calls (`prctl`, `getppid`, `setpriority`, `write` of a
        // static buffer to a descriptor the closure owns), allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || self.run());
        }
    }

    fn run(&self) -> io::Result<()> {
        if let Some(parent) = self.parent {
            die_with(parent)?;
        }
        if let Some(target) = self.niceness {
            super::priority::set_niceness(target)?;
        }
        if let Some(join) = &self.join {
            use std::io::Write;
            (&*join).write_all(crate::daemon::cgroup::JOIN_SELF)?;
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn die_with(parent: nix::unistd::Pid) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    if nix::unistd::getppid() != parent {
        return Err(io::Error::from(nix::errno::Errno::ESRCH));
    }
    Ok(())
}

/// No parent-death signal outside Linux: agents outlive a daemon killed with SIGKILL there,
/// and are reaped by [`super::kill_leftover_group`] when it restarts.
#[cfg(not(target_os = "linux"))]
fn die_with(_parent: nix::unistd::Pid) -> io::Result<()> {
    Ok(())
}

/// A process as agents start: piped output, `stdin` piped or `/dev/null`, a process group of
/// its own, and `setup` done before it runs.
pub(super) fn process(program: &OsStr, setup: ChildSetup, stdin_piped: bool) -> Command {
    let mut command = Command::new(program);
    command
        .stdin(if stdin_piped {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    setup.apply(&mut command);
    command
}

/// A control group allowing `max` processes, where the machine has one.
pub(super) fn process_limit(max: u32) -> Option<AttemptGroup> {
    let root = crate::daemon::cgroup::pids().ok()?;
    root.create(max)
        .inspect_err(|e| {
            tracing::warn!(error = %e, "cannot make the attempt's control group; its processes are not limited");
        })
        .ok()
}
