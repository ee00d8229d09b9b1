//! The pure core: data in, data out. Nothing here touches the file system, a process, a socket
//! or the clock (the caller passes `now`); the build refuses it (see `clippy.toml`).

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod agent;
pub mod beads;
pub mod budget;
pub mod cluster;
pub mod config;
pub mod context;
pub mod event;
pub mod forge;
pub mod formula;
pub mod id;
pub mod model;
pub mod notify;
pub mod policy;
pub mod prompt;
pub mod result;
pub mod router;
pub mod shell;
pub mod state;
pub mod time;
pub mod unavailable;
pub mod workflow;
