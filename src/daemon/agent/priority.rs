//! Agents' scheduling priority: the niceness they run at, set in the child before it runs
//! anything.
// `unsafe` here: `getpriority`/`setpriority` have no safe wrapper; each block says why it is sound.
#![allow(unsafe_code)]

use std::io;

/// The absolute niceness `nice` above the daemon's own (as `nice -n`, at most 19); `None` for
/// 0, which leaves it as the daemon's.
pub(crate) fn niceness(nice: u32) -> Option<nix::libc::c_int> {
    let nice = nix::libc::c_int::try_from(nice).ok().filter(|n| *n > 0)?;
    // The cast: `PRIO_PROCESS`'s type differs between C libraries.
    #[allow(clippy::unnecessary_cast)]
    let which = nix::libc::PRIO_PROCESS as _;
    // Relative to the daemon's own niceness (-1 is also the error value, which then counts as
    // a niceness of -1: one step less nice than asked, never more).
    // SAFETY: `getpriority` reads the calling process's niceness; no memory is involved.
    let own = unsafe { nix::libc::getpriority(which, 0) };
    Some(own.saturating_add(nice).min(19))
}

/// Sets the calling process's niceness to `target`: one async-signal-safe system call, no
/// allocation, so it may run between `fork` and `exec`.
pub(crate) fn set_niceness(target: nix::libc::c_int) -> io::Result<()> {
    // The cast: `PRIO_PROCESS`'s type differs between C libraries.
    #[allow(clippy::unnecessary_cast)]
    let which = nix::libc::PRIO_PROCESS as _;
    // SAFETY: sets this process's niceness; no memory is involved.
    if unsafe { nix::libc::setpriority(which, 0, target) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
