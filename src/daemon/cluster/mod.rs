//! Agents on other machines (`[cluster]`, docs/cluster.md): the daemon hands agent attempts
//! to `catalyst worker` processes through NATS JetStream and stays the single owner of the
//! journal, routing, gates and merges; commits travel through a git remote both sides reach.
//!
//! - [`bus`]: the daemon's side of NATS: orders out, ends back, leases, cancels, workers;
//! - [`admit`]: what the daemon takes from workers: listed ones, under their keys;
//! - [`held`]: the attempts the daemon waits for: leases and ends, from their holders only;
//! - [`link`]: reaching NATS: URLs, logging in, TLS;
//! - [`trust`]: keys, and messages signed and checked with them;
//! - [`serve`]: `catalyst worker`: orders taken, run, ended, leases held;
//! - [`speak`]: what a worker sends: leases, ends, presence, signed, on its own subjects;
//! - [`worker`]: a worker's side: an order run in the worker's own workspace, its commit
//!   pushed back;
//! - [`trouble`]: a worker that cannot prepare attempts takes no orders for a while.

pub mod admit;
pub mod bus;
pub mod held;
pub mod link;
pub mod serve;
pub mod speak;
pub mod trouble;
pub mod trust;
pub mod worker;
