//! `catalyst-shim`, the agents' process shim without a C library (`shim/main.rs`), which the
//! daemon's binaries carry and write out into the state folder for the [`super::Launcher`] to
//! start. It starts in tens of microseconds where `catalyst-hook __exec` takes about half a
//! millisecond of CPU, once per attempt (docs/agents.md#the-process-shim). Builds for other
//! machines than x86-64 Linux carry none, and the daemon starts `catalyst-hook __exec` instead.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The shim's executable, compiled by `build.rs`.
#[cfg(embedded_shim)]
const SHIM: Option<&[u8]> = Some(include_bytes!(env!("CATALYST_SHIM_BIN")));
#[cfg(not(embedded_shim))]
const SHIM: Option<&[u8]> = None;

/// The file name it is written as.
pub const FILE: &str = "catalyst-shim";

/// The program the launcher starts agents' processes with: the carried shim, written into
/// `dir` (unless it is there already, unchanged), else `fallback` (`catalyst-hook` or
/// `catalyst`, whose `__exec` does the same). Falls back, with a warning, when `dir` cannot
/// hold it or does not allow running programs (`noexec`).
pub fn program(dir: &Path, fallback: PathBuf) -> PathBuf {
    let Some(shim) = SHIM else {
        return fallback;
    };
    match write_out(dir, shim) {
        Ok(path) => path,
        Err(e) => {
            tracing::warn!(folder = %dir.display(), error = %e, "cannot write out the agents' process shim; using the slower `{}` instead", fallback.display());
            fallback
        }
    }
}

fn write_out(dir: &Path, shim: &[u8]) -> io::Result<PathBuf> {
    let path = dir.join(FILE);
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 == 0o111)
    };
    if std::fs::read(&path).is_ok_and(|have| have == shim) && runnable(&path) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir)?;
    let noexec = nix::sys::statvfs::statvfs(dir)
        .map_err(io::Error::from)?
        .flags()
        .contains(nix::sys::statvfs::FsFlags::ST_NOEXEC);
    if noexec {
        return Err(io::Error::other(
            "its file system does not allow running programs (noexec)",
        ));
    }
    crate::daemon::fsutil::write_replace_mode(&path, shim, 0o755)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(embedded_shim)]
    fn the_shim_is_written_once_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        let path = program(&bin, "/fallback".into());
        assert_eq!(path, bin.join(FILE));
        let written = std::fs::metadata(&path)
            .expect("written")
            .modified()
            .expect("mtime");
        assert_eq!(program(&bin, "/fallback".into()), path);
        let again = std::fs::metadata(&path)
            .expect("kept")
            .modified()
            .expect("mtime");
        assert_eq!(written, again, "an unchanged shim is not written again");
        let run = std::process::Command::new(&path)
            .args(["--bogus", "1"])
            .output()
            .expect("the shim runs");
        assert_eq!(run.status.code(), Some(126));
        assert_eq!(
            String::from_utf8_lossy(&run.stderr),
            "catalyst: unknown argument `--bogus`\n"
        );
    }

    #[test]
    #[cfg(embedded_shim)]
    fn a_changed_or_unrunnable_shim_is_written_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE);
        std::fs::write(&path, "old").expect("old shim");
        assert_eq!(program(dir.path(), "/fallback".into()), path);
        assert_eq!(std::fs::read(&path).expect("shim"), SHIM.expect("carried"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        program(dir.path(), "/fallback".into());
        let mode = std::fs::metadata(&path).expect("shim").permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn a_folder_that_cannot_hold_it_falls_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").expect("file");
        let fallback = PathBuf::from("/usr/bin/catalyst-hook");
        assert_eq!(program(&file.join("bin"), fallback.clone()), fallback);
    }
}
