//! `catalyst service install|uninstall`: the service files in `contrib/`, with the paths of
//! this machine filled in, written where the platform's service manager looks for them.
//!
//! Nothing here runs `systemctl` or `launchctl`: enabling a service is the user's decision
//! (and needs their session or root), so install prints the command and uninstall refuses to
//! remove a unit that is still enabled.

mod launchd;
mod systemd;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use systemd::escape_path;

/// The service manager to write for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Platform {
    Systemd,
    Launchd,
}

impl Platform {
    /// launchd on macOS, systemd elsewhere.
    pub fn native() -> Platform {
        if cfg!(target_os = "macos") {
            Platform::Launchd
        } else {
            Platform::Systemd
        }
    }
}

/// What to install, with everything resolved to absolute paths.
#[derive(Clone, Debug)]
pub struct Spec {
    pub platform: Platform,
    /// A per-user service (systemd `--user`; launchd agents always are).
    pub user: bool,
    pub workspace: PathBuf,
    pub catalystd: PathBuf,
    /// Where the file goes instead of the platform's folder (packaging, tests).
    pub unit_dir: Option<PathBuf>,
    /// The user a system service runs as.
    pub run_as: String,
    /// The PATH the service gets, so that the agent CLIs found now are found by it.
    pub path_env: String,
    pub home: PathBuf,
}

/// A service file ready to write, and the commands around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub file: PathBuf,
    pub text: String,
    /// What the user runs to start it now and at every boot or login.
    pub enable: String,
    /// What the user runs to stop it for good before uninstalling.
    pub disable: String,
    /// Links the service manager made when the unit was enabled (uninstall refuses while any
    /// exists).
    pub enabled_links: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Input(String),
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Spec {
    /// Fills in what the caller left open: the workspace made absolute, `catalystd` next to
    /// this binary (or on PATH), the user and PATH of this session.
    pub fn resolve(
        platform: Option<Platform>,
        user: bool,
        workspace: Option<&Path>,
        catalystd: Option<&Path>,
        unit_dir: Option<&Path>,
        run_as: Option<&str>,
    ) -> Result<Spec, ServiceError> {
        let platform = platform.unwrap_or_else(Platform::native);
        let workspace = absolute_workspace(workspace)?;
        let catalystd = match catalystd {
            Some(p) => p.to_owned(),
            None => find_catalystd().ok_or_else(|| {
                ServiceError::Input(
                    "cannot find `catalystd` next to `catalyst` or on PATH; pass `--catalystd PATH`"
                        .into(),
                )
            })?,
        };
        let catalystd = catalystd.canonicalize().map_err(|e| ServiceError::Io {
            action: "cannot find",
            path: catalystd.clone(),
            source: e,
        })?;
        Ok(Spec::with_binary(
            platform, user, workspace, catalystd, unit_dir, run_as,
        ))
    }

    /// [`Spec::resolve`] for uninstalling: the binary may be gone already, and only the
    /// file's name and place matter.
    pub fn resolve_for_removal(
        platform: Option<Platform>,
        user: bool,
        workspace: Option<&Path>,
        unit_dir: Option<&Path>,
    ) -> Result<Spec, ServiceError> {
        let platform = platform.unwrap_or_else(Platform::native);
        let workspace = absolute_workspace(workspace)?;
        let catalystd = find_catalystd().unwrap_or_else(|| PathBuf::from("catalystd"));
        Ok(Spec::with_binary(
            platform, user, workspace, catalystd, unit_dir, None,
        ))
    }

    fn with_binary(
        platform: Platform,
        user: bool,
        workspace: PathBuf,
        catalystd: PathBuf,
        unit_dir: Option<&Path>,
        run_as: Option<&str>,
    ) -> Spec {
        let this_user = std::env::var("SUDO_USER")
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| {
                nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|u| u.name)
            })
            .unwrap_or_else(|| "root".into());
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        Spec {
            platform,
            user: user || platform == Platform::Launchd,
            workspace,
            catalystd,
            unit_dir: unit_dir.map(Path::to_owned),
            run_as: run_as.map(str::to_owned).unwrap_or(this_user),
            path_env: std::env::var("PATH")
                .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            home,
        }
    }

    /// `<folder name>-<hash of the path>`: readable, and unique per workspace.
    pub fn slug(&self) -> String {
        let name: String = self
            .workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let hash = crate::daemon::paths::fnv1a(self.workspace.as_os_str().as_encoded_bytes());
        let name = if name.is_empty() { "root".into() } else { name };
        format!("{name}-{:08x}", hash as u32)
    }

    pub fn render(&self) -> Result<Rendered, ServiceError> {
        match self.platform {
            Platform::Systemd => systemd::render(self),
            Platform::Launchd => Ok(launchd::render(self)),
        }
    }
}

/// The workspace as an absolute, canonical path (the current folder by default).
fn absolute_workspace(workspace: Option<&Path>) -> Result<PathBuf, ServiceError> {
    let workspace = match workspace {
        Some(w) => w.to_owned(),
        None => std::env::current_dir().map_err(|e| ServiceError::Io {
            action: "cannot read",
            path: PathBuf::from("."),
            source: e,
        })?,
    };
    workspace.canonicalize().map_err(|e| ServiceError::Io {
        action: "cannot open the workspace",
        path: workspace.clone(),
        source: e,
    })
}

fn find_catalystd() -> Option<PathBuf> {
    let sibling = std::env::current_exe()
        .ok()?
        .parent()
        .map(|d| d.join("catalystd"));
    sibling
        .filter(|p| p.is_file())
        .or_else(|| crate::daemon::fsutil::find_on_path("catalystd"))
}

/// Writes the service file and says how to enable it.
pub fn install(spec: &Spec, out: &mut impl Write) -> Result<(), ServiceError> {
    let r = spec.render()?;
    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| ServiceError::Io {
            action,
            path,
            source,
        }
    };
    if let Some(dir) = r.file.parent() {
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    }
    let existed = r.file.exists();
    crate::daemon::fsutil::write_atomic(&r.file, r.text.as_bytes())
        .map_err(io("cannot write", &r.file))?;
    // A service file is read by the service manager and by people, as those in /etc are.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&r.file, std::fs::Permissions::from_mode(0o644))
            .map_err(io("cannot make readable", &r.file))?;
    }
    let said = writeln!(
        out,
        "{} {}\nenable and start it with:\n  {}",
        if existed { "rewrote" } else { "wrote" },
        r.file.display(),
        r.enable
    );
    said.map_err(io("cannot write to", Path::new("stdout")))
}

/// Removes the service file, unless the service is still enabled.
pub fn uninstall(spec: &Spec, out: &mut impl Write) -> Result<(), ServiceError> {
    let r = spec.render()?;
    if let Some(link) = r
        .enabled_links
        .iter()
        .find(|l| l.symlink_metadata().is_ok())
    {
        return Err(ServiceError::Input(format!(
            "the service is still enabled (`{}`); run `{}` first",
            link.display(),
            r.disable
        )));
    }
    let said = match std::fs::remove_file(&r.file) {
        Ok(()) => writeln!(
            out,
            "removed {}\nif it still runs, stop it with:\n  {}",
            r.file.display(),
            r.disable
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            writeln!(out, "{} is not installed", r.file.display())
        }
        Err(source) => {
            return Err(ServiceError::Io {
                action: "cannot remove",
                path: r.file,
                source,
            })
        }
    };
    said.map_err(|source| ServiceError::Io {
        action: "cannot write to",
        path: PathBuf::from("stdout"),
        source,
    })
}

/// Quotes a word for a shell command line people copy.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./@:=%+,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
