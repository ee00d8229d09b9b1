//! End-to-end tests of the `stub-claude` binary: each runs the built binary in a temp folder
//! with a scenario, the way catalyst's own tests and `catalyst demo` will.

mod actions;
mod conversation;
mod fixture;
mod formats;
mod hooks;
mod sequence;
