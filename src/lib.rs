//! catalyst: a daemon that drives coding agents through workflows without ever letting them
//! decide what comes next.
//!
//! Three layers, each depending only on the ones before it:
//!
//! ```text
//!   cli       catalyst ctl, live view, hook, init, demo, service, import/export
//!    │
//!   daemon    store, engine, agent processes, worktrees, watchers, control server, web
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
//! - [`cli`]: the client and the commands people and scripts use.

pub mod cli;
pub mod daemon;
pub mod domain;
pub mod protocol;
