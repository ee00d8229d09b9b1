//! End-to-end tests: the daemon in-process on a real temporary git repository, agents played
//! by stub-claude, everything observed through the control socket, the stub's invocation log
//! and git.

mod composition;
mod control;
mod gates;
mod guardrails;
mod logs;
mod scheduling;
mod shapes;
mod web;
mod wire;
mod workflow;
