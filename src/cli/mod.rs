//! The interfaces people and scripts use: the client, `catalyst ctl` and its live view, the
//! hook handler agents run, and the one-shot commands (init, demo, service, import/export).

pub mod app;
pub mod beads;
pub mod catalystd;
pub mod client;
pub mod ctl;
pub mod demo;
pub mod diff;
pub mod error;
pub mod formula;
pub mod hook;
pub mod init;
pub mod live;
pub mod logs;
pub mod man;
pub mod sandbox_net;
pub mod service;
