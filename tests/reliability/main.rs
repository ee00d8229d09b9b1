//! Reliability tests: what a daemon left running unattended for days must survive.
//! Each module tries to break one promise: nothing recorded is lost or done twice, and nothing
//! the daemon reads can take it over.
//!
//! Every test runs `catalystd` as a real subprocess (`Workspace::spawn`): it is killed, flooded,
//! starved of disk and raced, as it would be on a machine left alone for days.

mod agents;
mod branches;
mod config;
mod connections;
mod disk;
mod ids;
mod inputs;
mod journal;
mod kill_storm;
mod limits;
mod lock;
mod prompts;
mod socket;
