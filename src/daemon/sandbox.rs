//! Whether the sandbox the configured profile asks for can run on this machine, checked when
//! the config is loaded, so that a missing bubblewrap stops the daemon at start-up (or refuses
//! a reload) with a sentence saying what to do, instead of failing every attempt later. A
//! profile with `sandbox = "none"` is logged as running its agents unconfined.

use std::process::{Command, Stdio};

use crate::domain::agent::profile::AgentProfile;
use crate::domain::agent::sandbox::{SandboxKind, BWRAP_NAMESPACES};

/// The bubblewrap program, looked up on the daemon's `PATH`.
pub const BWRAP: &str = "bwrap";

/// Why the configured sandbox cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the agent profile `{profile}` runs agents in a bubblewrap sandbox, but `{BWRAP}` cannot be started ({source}); install bubblewrap (Debian and Ubuntu: `apt install bubblewrap`) or set `sandbox = \"none\"` in the profile to run agents unconfined")]
    Missing {
        profile: String,
        source: std::io::Error,
    },
    #[error("the agent profile `{profile}` runs agents in a bubblewrap sandbox, but `{BWRAP}` fails on this machine: {stderr}; set `sandbox = \"none\"` in the profile to run agents unconfined")]
    Broken { profile: String, stderr: String },
    #[error("the agent profile `{profile}` asks for a bubblewrap sandbox, which exists only on Linux; set `sandbox = \"none\"` in the profile")]
    NotLinux { profile: String },
    #[error("the agent profile `{profile}` runs agents unconfined (`sandbox = \"none\"`) and the daemon runs as root, so every agent would hold every capability; use the bubblewrap sandbox, run the daemon as an unprivileged user, or set `allow_unconfined_root = true` in the config to accept it")]
    RootUnconfined { profile: String },
}

/// Whether a bubblewrap sandbox can run on this machine (the check [`check`] makes).
pub fn available() -> bool {
    cfg!(target_os = "linux") && trial().is_ok_and(|out| out.status.success())
}

/// One confined `true` with the namespaces every attempt uses.
fn trial() -> std::io::Result<std::process::Output> {
    Command::new(BWRAP)
        .args(BWRAP_NAMESPACES)
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--unshare-net", "--", "true"])
        .stdin(Stdio::null())
        .output()
}

/// Checks that `profile` (named `name`) can run its agents as it says: for a bubblewrap
/// sandbox, one confined `true` with the namespaces every attempt uses. An unconfined profile
/// under a daemon running as root is refused unless `allow_root` (the config's
/// `allow_unconfined_root`) says otherwise: its agents would hold every capability.
pub fn check(name: &str, profile: &AgentProfile, allow_root: bool) -> Result<(), SandboxError> {
    if profile.sandbox == SandboxKind::None {
        if nix::unistd::geteuid().is_root() {
            if !allow_root {
                return Err(SandboxError::RootUnconfined {
                    profile: name.to_owned(),
                });
            }
            tracing::warn!(profile = %name, "`allow_unconfined_root = true`: agents run unconfined as root, with every capability");
        }
        tracing::warn!(profile = %name, "the sandbox is off (`sandbox = \"none\"`): agents run unconfined, limited only by the hooks' tool policy");
        return Ok(());
    }
    if !cfg!(target_os = "linux") {
        return Err(SandboxError::NotLinux {
            profile: name.to_owned(),
        });
    }
    let out = trial().map_err(|source| SandboxError::Missing {
        profile: name.to_owned(),
        source,
    })?;
    if !out.status.success() {
        return Err(SandboxError::Broken {
            profile: name.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}
