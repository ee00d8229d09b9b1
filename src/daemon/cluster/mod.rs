//! Agents on other machines (`[cluster]`, docs/cluster.md): the daemon hands agent attempts
//! to `catalyst worker` processes through NATS JetStream and stays the single owner of the
//! journal, routing, gates and merges; commits travel through a git remote both sides reach.
//!
//! - [`bus`]: the daemon's side of NATS: orders out, ends back, leases, cancels, workers;
//! - [`serve`]: `catalyst worker`: orders taken, run, ended, leases held;
//! - [`worker`]: a worker's side: an order run in the worker's own workspace, its commit
//!   pushed back.

pub mod bus;
pub mod serve;
pub mod worker;
