//! Atomic whole-file writes: a temporary file in the same folder, fsync, rename, fsync the
//! folder. A reader sees the old file or the new one, never a mix, even across a power cut.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes `path` atomically with `fill`, which writes the content to the temporary file.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = parent(path);
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    {
        let mut w = io::BufWriter::new(tmp.as_file());
        fill(&mut w)?;
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Writes `bytes` to `path` by a rename, without fsync: readers never see a partial file, but
/// after a power cut the file may be missing or empty. For run-folder records (prompts,
/// context, reports) that the journal does not depend on; never for the journal or snapshot.
pub fn write_replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, None)
}

/// Writes `bytes` to `path` in place: created, or truncated first; no temporary file, no
/// rename, no fsync. Only for a run folder's inputs (the prompt, the context files, the
/// settings and policy), which are all written before the agent starts, so nothing reads one
/// half-written; a daemon killed in the middle leaves a short file, which the attempt's
/// re-run writes again. Files read back after a crash ([`write_replace`]'s) never use it.
pub fn write_input(path: &Path, bytes: &[u8]) -> io::Result<()> {
    fs::write(path, bytes)
}

/// [`write_replace`] of a file whose permissions are `mode` exactly (the umask aside): a
/// program, say. A process still running the old file keeps it.
pub fn write_replace_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, Some(mode))
}

fn replace(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(parent(path))?;
    tmp.as_file().write_all(bytes)?;
    if let Some(mode) = mode {
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(mode))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Fsyncs a folder so that a rename or a new file in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates a folder and its parents, then fsyncs the parent so the new folder is durable.
pub fn create_dir_durable(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    sync_dir(parent(dir))
}

/// `program` as a command names it: a path as it is, a bare name looked up on `PATH`; `None`
/// when that is not an executable file.
pub fn find_program(program: &str) -> Option<std::path::PathBuf> {
    find_program_in(program.as_ref(), std::env::var_os("PATH").as_deref())
}

/// [`find_program`] with `path` as the `PATH` (a command's own environment may set one): where
/// `execvp` would run it from, `None` where it would fail.
pub fn find_program_in(
    program: &std::ffi::OsStr,
    path: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.as_bytes().contains(&b'/') {
        let path = std::path::PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    find_in(program, path?)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable file called `name` in a `PATH` folder.
pub fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    find_in(name, &std::env::var_os("PATH")?)
}

/// The first executable file called `name` in the folders of `path` (as `PATH` lists them).
fn find_in(name: impl AsRef<Path>, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(&name))
        .find(|p| is_executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temporary files left behind");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |_| Err(io::Error::other("disk full"))).unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(fs::read(&path).unwrap(), b"old");
    }

    #[test]
    fn a_program_is_found_on_the_path_given_or_at_its_own_path_if_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        let tool_name = std::ffi::OsStr::new("tool");
        // Not executable yet: not a program.
        assert_eq!(find_program_in(tool_name, Some(&path)), None);
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_program_in(tool_name, Some(&path)), Some(tool.clone()));
        assert_eq!(
            find_program_in(tool_name, Some("/nonexistent".as_ref())),
            None
        );
        assert_eq!(find_program_in("missing".as_ref(), Some(&path)), None);
        assert_eq!(find_program_in(tool_name, None), None, "no PATH");
        assert_eq!(
            find_program_in(tool.as_os_str(), None),
            Some(tool.clone()),
            "a path as it is"
        );
    }
}
