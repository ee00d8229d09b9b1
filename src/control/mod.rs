//! The control socket (DESIGN §9): the protocol shared with `catalyst ctl`, the server the
//! daemon runs, and the client.

pub mod client;
pub mod protocol;
pub mod server;
