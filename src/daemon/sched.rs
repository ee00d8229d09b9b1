//! How the kernel schedules the daemon and its agents: as batch work (`SCHED_BATCH` on Linux).
//!
//! Everything the daemon runs is throughput work: no thread of it, and no agent, needs the CPU
//! the moment it wakes. Under the default policy a thread that wakes takes the CPU from the one
//! running there, and on a busy machine the kernel stops looking for an idle CPU for it: a
//! daemon thread woke onto the CPU of a running agent, the agent waited behind it, and the
//! other CPU sat idle (11% of the overhead benchmark's time on 2 CPUs, with a task waiting
//! each time; README "Benchmarks"). A batch thread that wakes waits for the running one's turn
//! to end, or goes to an idle CPU; its share of the CPU and its niceness are unchanged.
//!
//! Only the default policy is changed: a daemon started under another one (`chrt`, systemd's
//! `CPUSchedulingPolicy=`) keeps it, and so do its agents. Setting the policy needs no
//! privilege. Where it fails (a seccomp filter) the daemon warns once and runs as it would
//! have otherwise. Elsewhere than Linux there is no such policy.

use std::io;

/// A runtime whose threads (its workers and its blocking pool: git, file writes) are batch
/// threads: the one `catalystd` runs the daemon on, and `catalyst demo` and the benchmarks
/// too. `workers` is the number of worker threads (`None`: one per CPU).
pub fn runtime(workers: Option<usize>) -> io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers {
        builder.worker_threads(workers);
    }
    builder.enable_all().on_thread_start(as_batch).build()
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_threads_are_batch_threads() {
        let rt = runtime(Some(1)).expect("runtime");
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
