//! Whether the sandbox the config asks for (the agent profile's, and the gates') can run on
//! this machine, checked when the config is loaded, so that a missing bubblewrap stops the
//! daemon at start-up (or refuses a reload) with a sentence saying what to do, instead of
//! failing every attempt later. A sandbox turned off is logged; under a root daemon it is
//! refused unless the config's `allow_unconfined_root` accepts it.

use std::process::{Command, Stdio};

use crate::domain::agent::sandbox::{SandboxKind, BWRAP_NAMESPACES};

/// The bubblewrap program, looked up on the daemon's `PATH`.
pub const BWRAP: &str = "bwrap";

/// Why the configured sandbox cannot run. `who` names what it confines ("the agent profile
/// `claude`", "gates"), `off` the setting that turns it off.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{who} run in a bubblewrap sandbox, but `{BWRAP}` cannot be started ({source}); install bubblewrap (Debian and Ubuntu: `apt install bubblewrap`) or set {off} to run them unconfined")]
    Missing {
        who: String,
        off: &'static str,
        source: std::io::Error,
    },
    #[error("{who} run in a bubblewrap sandbox, but `{BWRAP}` fails on this machine: {stderr}; set {off} to run them unconfined")]
    Broken {
        who: String,
        off: &'static str,
        stderr: String,
    },
    #[error("{who} ask for a bubblewrap sandbox, which exists only on Linux; set {off}")]
    NotLinux { who: String, off: &'static str },
    #[error("{who} run unconfined ({off}) and the daemon runs as root, so they would hold every capability; use the bubblewrap sandbox, run the daemon as an unprivileged user, or set `allow_unconfined_root = true` in the config to accept it")]
    RootUnconfined { who: String, off: &'static str },
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

/// What a sandbox confines, for [`check`].
#[derive(Clone, Copy, Debug)]
pub enum Confined<'a> {
    /// The agents of the profile of this name.
    Agents(&'a str),
    /// The gates' commands (`gate_sandbox`).
    Gates,
}

impl Confined<'_> {
    fn who(self) -> String {
        match self {
            Confined::Agents(name) => format!("the agents of profile `{name}`"),
            Confined::Gates => "gates".to_owned(),
        }
    }

    fn off(self) -> &'static str {
        match self {
            Confined::Agents(_) => "`sandbox = \"none\"` in the profile",
            Confined::Gates => "`gate_sandbox = \"none\"`",
        }
    }
}

/// Checks that `what` can run as `kind` says: for a bubblewrap sandbox, one confined `true`
/// with the namespaces every attempt uses. No sandbox under a daemon running as root is
/// refused unless `allow_root` (the config's `allow_unconfined_root`) says otherwise: what
/// runs would hold every capability.
pub fn check(what: Confined<'_>, kind: SandboxKind, allow_root: bool) -> Result<(), SandboxError> {
    let (who, off) = (what.who(), what.off());
    if kind == SandboxKind::None {
        if nix::unistd::geteuid().is_root() {
            if !allow_root {
                return Err(SandboxError::RootUnconfined { who, off });
            }
            tracing::warn!("`allow_unconfined_root = true`: {who} run unconfined as root, with every capability");
        } else {
            tracing::warn!("the sandbox is off ({off}): {who} run unconfined");
        }
        return Ok(());
    }
    if !cfg!(target_os = "linux") {
        return Err(SandboxError::NotLinux { who, off });
    }
    let out = trial().map_err(|source| SandboxError::Missing {
        who: who.clone(),
        off,
        source,
    })?;
    if !out.status.success() {
        return Err(SandboxError::Broken {
            who,
            off,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}
