//! catalyst: a daemon that drives coding agents through workflows without ever letting them
//! decide what comes next.
//!
//! Module map (what each one owns):
//! - [`id`]: validated bead and step ids (they become paths and branch names).
//! - [`time`]: RFC 3339 timestamps that are written back exactly as read.
//! - [`model`]: beads, statuses, dependencies, comments and step roles in the beads JSON shapes.
//! - [`event`]: the journal's event types; the state is their fold.
//! - [`store`]: the journal, snapshots and compaction, replay, and incremental readiness.
//! - [`fsutil`]: atomic whole-file writes.
//! - [`formula`]: `*.formula.toml` parsing, validation, variable substitution and pouring.
//! - [`prompt`]: agent prompt templates per role, rendered strictly.
//! - [`context`]: the `context.md` / `context.json` files an agent reads instead of its prompt.
//! - [`result`]: the `---STEP-RESULT---` parser.
//! - [`router`]: the pure routing table from a step's outcome to the daemon's decision.
//! - [`worktree`]: git (libgit2): one worktree and branch per bead, daemon commits, resets, fast-forward merges.
//! - [`agent`]: agent profiles; spawning, supervising and stopping an agent CLI; reading its output.
//! - [`policy`]: what each role's tools may do: the pure decision behind the `PreToolUse` hook.
//! - [`hook`]: `catalyst hook <event>`, Claude Code's hook handler, and the `--settings` it runs from.
//! - [`config`]: the daemon's `config.toml`, strict, with defaults.
//! - [`engine`]: the single owner of state: inputs in, events out, effects after durability.
//! - [`control`]: the control socket's protocol, server and client.
//! - [`daemon`]: lock, recover, serve and run the engine (what `catalystd` runs).
//! - [`watch`]: file-system notifications for the inbox, reloads and followed logs.
//! - [`ctl`]: `catalyst ctl`, the people's and scripts' client.
//! - [`audit`]: every attempt of a step from its run folder and the journal (`ctl show --runs`).
//! - [`demo`]: `catalyst demo`, one bead through the fix loop with stub agents.
//! - [`beads`]: beads export files: import, export, a followed file and status write-back.
//! - [`init`]: `catalyst init`, a repository's `.catalyst/` set-up.
//! - [`live`]: `catalyst ctl watch`, a live terminal view folded from the event stream.
//! - [`service`]: `catalyst service`, systemd units and launchd agents from `contrib/`.

pub mod agent;
pub mod audit;
pub mod beads;
pub mod config;
pub mod context;
pub mod control;
pub mod ctl;
pub mod daemon;
pub mod demo;
pub mod engine;
pub mod event;
pub mod formula;
pub mod fsutil;
pub mod hook;
pub mod id;
pub mod init;
pub mod live;
pub mod model;
pub mod policy;
pub mod prompt;
pub mod result;
pub mod router;
pub mod service;
pub mod store;
pub mod time;
pub mod watch;
pub mod worktree;
