//! How the kernel schedules the daemon and its agents, and how many threads the daemon runs.
//!
//! **Batch work** (`SCHED_BATCH` on Linux). Everything the daemon runs is throughput work: no
//! thread of it, and no agent, needs the CPU the moment it wakes. Under the default policy a
//! thread that wakes takes the CPU from the one running there, and on a busy machine the kernel
//! stops looking for an idle CPU for it: a daemon thread woke onto the CPU of a running agent,
//! the agent waited behind it, and the other CPU sat idle (11% of the overhead benchmark's time
//! on 2 CPUs, with a task waiting each time; docs/benchmarks.md). A batch thread that wakes
//! waits for the running one's turn to end, or goes to an idle CPU; its share of the CPU and its
//! niceness are unchanged.
//!
//! Only the default policy is changed: a daemon started under another one (`chrt`, systemd's
//! `CPUSchedulingPolicy=`) keeps it, and so do its agents. Setting the policy needs no
//! privilege. Where it fails (a seccomp filter) the daemon warns once and runs as it would
//! have otherwise. Elsewhere than Linux there is no such policy.
//!
//! **Few threads** ([`Threads`]). The agents are the machine's work; the daemon's runtime only
//! moves their bytes and records what happens, and its git and file work runs on the blocking
//! threads. Each hand-off between two threads is a wake-up, and a thread that wakes after a
//! while finds its caches cold. So the runtime has one worker per two CPUs, and no more
//! blocking threads than CPUs: a blocking thread that finishes a task takes the next one queued
//! without sleeping, where an unbounded pool (tokio's default is 512) grew to 17 threads in
//! the overhead benchmark and woke a cold one for nearly every task (docs/benchmarks.md has the
//! overhead row's figures).
// `unsafe` here: `sched_getscheduler`/`sched_setscheduler` have no safe wrapper; each block
// says why it is sound.
#![allow(unsafe_code)]

use std::io;

/// How many threads the daemon's runtime has, from the machine's CPUs ([`Threads::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    /// The runtime's workers (its async tasks: the engine, sockets, agents' output).
    pub workers: usize,
    /// At most this many blocking threads at once (git, file writes, journal reads); more
    /// blocking tasks wait their turn.
    pub blocking: usize,
}

impl Threads {
    /// For a machine of `cpus` CPUs: a worker per two CPUs (one to four), and a blocking
    /// thread per CPU, at least two, so that one long git task (a merge, a large worktree's
    /// removal) never holds up all the others.
    pub fn of(cpus: usize) -> Threads {
        Threads {
            workers: (cpus / 2).clamp(1, 4),
            blocking: cpus.max(2),
        }
    }

    /// For this machine (the CPUs this process may run on).
    pub fn here() -> Threads {
        Threads::of(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// The daemon's runtime: [`Threads::here`] threads, each a batch thread. `catalystd` runs
/// the daemon on it, and so do `catalyst demo`, `catalyst worker` and the benchmarks.
/// `TOKIO_WORKER_THREADS`, where set, chooses the number of workers instead.
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    let threads = Threads::here();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(threads.workers);
    }
    builder
        .max_blocking_threads(threads.blocking)
        .enable_all()
        .on_thread_start(as_batch)
        .build()
}

/// Makes the calling thread a batch thread; threads and processes it starts inherit that. A
/// thread under another policy than the default one (`chrt`, systemd's `CPUSchedulingPolicy=`:
/// the operator's choice) keeps it.
pub fn as_batch() {
    #[cfg(target_os = "linux")]
    if policy().is_ok_and(|p| p == nix::libc::SCHED_OTHER) {
        if let Err(e) = set_policy(nix::libc::SCHED_BATCH) {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(error = %e, "cannot schedule the daemon's threads as batch work; they keep the default policy");
            });
        }
    }
}

/// The calling thread's scheduling policy, as `sched_getscheduler` gives it.
#[cfg(target_os = "linux")]
pub fn policy() -> io::Result<i32> {
    // SAFETY: no memory is involved; 0 is the calling thread.
    let policy = unsafe { nix::libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(policy)
}

#[cfg(target_os = "linux")]
fn set_policy(policy: i32) -> io::Result<()> {
    let param = nix::libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call; 0 is the calling thread.
    if unsafe { nix::libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_per_two_cpus_and_a_blocking_thread_per_cpu() {
        let of = |cpus| {
            let t = Threads::of(cpus);
            (t.workers, t.blocking)
        };
        assert_eq!(of(1), (1, 2));
        assert_eq!(of(2), (1, 2));
        assert_eq!(of(3), (1, 3));
        assert_eq!(of(8), (4, 8));
        assert_eq!(of(64), (4, 64));
    }

    #[test]
    fn the_runtime_has_those_threads() {
        let threads = Threads::here();
        let rt = runtime().expect("runtime");
        if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
            assert_eq!(rt.metrics().num_workers(), threads.workers);
        }
        // Blocking tasks beyond the limit wait for one to end: each started task says so,
        // then holds its thread until it is let go.
        let (started, starts) = std::sync::mpsc::channel();
        let mut releases = Vec::new();
        for _ in 0..=threads.blocking {
            let (release, held) = std::sync::mpsc::channel::<()>();
            releases.push(release);
            let started = started.clone();
            rt.spawn_blocking(move || {
                started.send(()).expect("the test listens");
                let _ = held.recv();
            });
        }
        let wait = std::time::Duration::from_secs(10);
        for _ in 0..threads.blocking {
            starts.recv_timeout(wait).expect("a blocking task started");
        }
        assert!(
            starts
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "a blocking task started beyond the limit of {}",
            threads.blocking
        );
        drop(releases.remove(0));
        starts
            .recv_timeout(wait)
            .expect("the waiting task started once a thread was free");
        drop(releases);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_runtimes_threads_are_batch_threads() {
        let rt = runtime().expect("runtime");
        let worker = rt.block_on(async { tokio::spawn(async { policy() }).await });
        assert_eq!(
            worker.expect("task").expect("policy"),
            nix::libc::SCHED_BATCH
        );
        let blocking = rt.block_on(async { tokio::task::spawn_blocking(policy).await });
        assert_eq!(
            blocking.expect("task").expect("policy"),
            nix::libc::SCHED_BATCH
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_policy_the_operator_chose_is_kept() {
        let policy = std::thread::spawn(|| {
            set_policy(nix::libc::SCHED_IDLE).expect("any thread may choose the idle policy");
            as_batch();
            policy()
        })
        .join()
        .expect("thread");
        assert_eq!(policy.expect("policy"), nix::libc::SCHED_IDLE);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_batch_thread_starts_batch_threads() {
        let policy = std::thread::spawn(|| {
            as_batch();
            std::thread::spawn(policy).join().expect("inner thread")
        })
        .join()
        .expect("thread");
        assert_eq!(policy.expect("policy"), nix::libc::SCHED_BATCH);
    }
}
