//! Agents' scheduling priority: the niceness they run at, set in the child before it runs
//! anything.

use std::io;

/// The absolute niceness `nice` above the daemon's own (as `nice -n`, at most 19); `None` for
/// 0, which leaves it as the daemon's.
pub(crate) fn niceness(nice: u32) -> Option<i32> {
    let nice = i32::try_from(nice).ok().filter(|n| *n > 0)?;
    let own = rustix::process::getpriority_process(None).unwrap_or(0);
    Some(own.saturating_add(nice).min(19))
}

/// Sets the calling process's niceness to `target`: one async-signal-safe system call, no
/// allocation, so it may run between `fork` and `exec`.
pub(crate) fn set_niceness(target: i32) -> io::Result<()> {
    rustix::process::setpriority_process(None, target).map_err(io::Error::from)
}
