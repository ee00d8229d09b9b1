//! Starting an agent process so that it dies with the daemon.
//!
//! `PR_SET_PDEATHSIG` sends the child a signal when its parent dies, but on Linux "the parent"
//! is the *thread* that forked it: the signal fires when that thread exits, even if the daemon
//! lives on. Tokio forks on whichever thread polls the spawn, and its blocking-pool threads exit
//! after an idle spell, which would SIGKILL a healthy agent mid-step. So every agent is forked
//! by one dedicated thread that lives as long as the process, and the signal then means what it
//! should: the daemon is gone.
// `unsafe` here: `pre_exec` closures and the parent-death signal; each block says why it is sound.
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

/// Runs `make` on the spawner thread (here when there is none) and hands back what it made;
/// what nobody waits for any more (the caller's future was dropped) goes to `orphan`.
async fn on_spawner<T: Send + 'static>(
    make: impl FnOnce() -> io::Result<T> + Send + 'static,
    orphan: fn(T),
) -> io::Result<T> {
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        if let Err(Ok(made)) = reply.send(make()) {
            orphan(made);
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

fn orphaned(child: Child) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        let _ = super::group::signal_group(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Spawns `command` from the spawner thread (see the module documentation).
pub(crate) async fn spawn(mut command: Command) -> io::Result<Child> {
    let runtime = Handle::current();
    on_spawner(
        move || {
            // The child's pipes and exit notification are registered with the caller's runtime.
            let _context = runtime.enter();
            command.spawn()
        },
        orphaned,
    )
    .await
}

/// Starts a clone that waits for its command line ([`super::cloned`]) from the spawner
/// thread, with `niceness` and in the control group joined by `cgroup`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) async fn clone_ahead(
    niceness: Option<nix::libc::c_int>,
    cgroup: Option<std::path::PathBuf>,
) -> io::Result<super::cloned::Child> {
    on_spawner(
        move || {
            super::cloned::start(&super::cloned::Setup {
                niceness,
                cgroup: cgroup.as_deref(),
            })
        },
        drop,
    )
    .await
}

/// Makes the child die with the daemon, from between `fork` and `exec`.
///
/// Only async-signal-safe calls are allowed here (no allocation): `prctl`, `getppid`, and
/// errors built from an errno.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(command: &mut Command) {
    use nix::errno::Errno;
    use nix::sys::prctl::set_pdeathsig;
    use nix::sys::signal::Signal;
    use nix::unistd::{getpid, getppid};

    let parent = getpid();
    // SAFETY: the closure runs in the forked child before exec and makes only async-signal-safe
    // system calls; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The daemon may have died between fork and prctl; then the signal never comes.
            if getppid() != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// Lowers the child's scheduling priority by `nice` (see [`super::priority::niceness`]) before it executes
/// anything, so every process it starts inherits it.
pub(crate) fn nice(command: &mut Command, nice: u32) {
    let Some(target) = super::priority::niceness(nice) else {
        return;
    };
    // SAFETY: the closure runs in the forked child before exec; `set_niceness` makes one
    // async-signal-safe system call and allocates nothing.
    unsafe {
        command.pre_exec(move || super::priority::set_niceness(target));
    }
}

/// No parent-death signal outside Linux: agents outlive a daemon killed with SIGKILL there,
/// and are reaped by [`super::kill_leftover_group`] when it restarts.
#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut Command) {}

/// A process as agents start: piped output, `stdin` piped or `/dev/null`, a process group of
/// its own, death with the daemon, and `niceness`.
pub(super) fn process(program: &OsStr, niceness: u32, stdin_piped: bool) -> Command {
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
    die_with_parent(&mut command);
    nice(&mut command, niceness);
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
