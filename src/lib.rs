//! catalyst: a daemon that drives coding agents through workflows without ever letting them
//! decide what comes next.
//!
//! Layers, each depending only on the ones below it:
//!
//! ```text
//!   cli       catalyst ctl, live view, hook, init, demo, service, import/export
//!    │
//!   daemon    store, engine, agent processes, worktrees, watchers, control server, web
//!    │
//!   render    how answers, events and agent output read for people (ctl and the dashboard)
//!    │
//!   protocol  the control socket's requests, answers and events
//!    │
//!   domain    pure: ids, beads, events and their fold, readiness, formulas, prompts,
//!             results, routing, tool policy, config
//! ```
//!
//! - [`domain`]: the pure core; no file system, processes, sockets or clock.
//! - [`protocol`]: the control socket's wire types, shared by the server and every client.
//! - [`daemon`]: everything `catalystd` runs: the journal-backed store, the engine that owns
//!   state, agent processes, git worktrees, file watchers, the control server and the web
//!   dashboard.
//! - [`render`]: answers, events, diffs and agent transcripts as text for people, in colour
//!   on a terminal; `ctl` prints them and the dashboard shows the transcripts.
//! - [`cli`]: the client and the commands people and scripts use.

pub mod cli;
pub mod daemon;
pub mod domain;
pub mod protocol;
pub mod render;
