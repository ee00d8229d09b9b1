//! Real-agent tests: the daemon drives the real Claude Code and Codex CLIs (installed by
//! `.ci/install-agents` into `target/agents-cache/`) against mock model APIs on loopback.
//!
//! Each test re-executes this binary for itself inside a fresh network namespace with only
//! loopback up (`unshare -n`), so nothing an agent CLI tries can leave the machine. Where the
//! CLIs are not installed or namespaces are unavailable the tests skip, saying why.

mod anthropic;
mod claude;
mod codex;
mod failures;
mod http;
mod isolate;
mod openai;
