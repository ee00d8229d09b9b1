//! Operations tests: `catalystd` as a service (sd_notify, signals, logs), service files,
//! `catalyst init`, completions and man page, beads interchange, and `ctl watch`. Most run
//! the real binaries as subprocesses.

mod beads;
mod journal;
mod notify;
mod setup;
mod signals;
mod watch;
mod webhooks;
