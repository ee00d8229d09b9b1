//! End-to-end tests: the daemon in-process on a real temporary git repository, agents played
//! by stub-claude, everything observed through the control socket, the stub's invocation log
//! and git.

mod control;
mod guardrails;
#[path = "../common/repo.rs"]
mod repo;
mod scheduling;
mod support;
mod wire;
mod workflow;
