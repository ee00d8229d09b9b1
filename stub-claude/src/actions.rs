//! A response's direct effects: file changes in the worktree, waiting, and dying by a signal.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{raise, Signal};

use crate::error::Error;
use crate::log::ShellEntry;
use crate::scenario::{relative_path, Response};

/// How long `wait_for` waits before giving up, so a test that forgets to release a stub fails
/// instead of hanging.
pub const WAIT_CAP: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(10);

/// Applies `write`, then `append`, then `delete`, all relative to `cwd`. The paths were checked
/// when the scenario was loaded; they are checked again here because that is where they are
/// used.
pub fn change_files(response: &Response, cwd: &Path) -> Result<(), Error> {
    for (path, content) in &response.write {
        let path = cwd.join(relative_path(path).map_err(Error::Action)?);
        make_parent(&path)?;
        std::fs::write(&path, content)
            .map_err(|e| Error::Action(format!("cannot write `{}`: {e}", path.display())))?;
    }
    for (path, content) in &response.append {
        let path = cwd.join(relative_path(path).map_err(Error::Action)?);
        make_parent(&path)?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| Error::Action(format!("cannot open `{}`: {e}", path.display())))?;
        std::io::Write::write_all(&mut file, content.as_bytes())
            .map_err(|e| Error::Action(format!("cannot append to `{}`: {e}", path.display())))?;
    }
    for path in &response.delete {
        let path = cwd.join(relative_path(path).map_err(Error::Action)?);
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            // Deleting what is not there leaves the worktree as the test wants it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::Action(format!(
                    "cannot delete `{}`: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(())
}

fn make_parent(path: &Path) -> Result<(), Error> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent)
            .map_err(|e| Error::Action(format!("cannot create `{}`: {e}", parent.display()))),
        None => Ok(()),
    }
}

/// Runs `command` with `sh -c` in `cwd`, as the agent's own child, and says how it went.
pub fn shell(command: &str, cwd: &Path) -> ShellEntry {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output();
    match output {
        Ok(out) => ShellEntry {
            command: command.to_owned(),
            exit_code: out.status.code(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        },
        Err(e) => ShellEntry {
            command: command.to_owned(),
            exit_code: None,
            output: format!("cannot run sh: {e}"),
        },
    }
}

/// Blocks until `path` (relative to `cwd`, or absolute) exists, or fails after `cap`.
pub fn wait_for(path: &str, cwd: &Path, cap: Duration) -> Result<(), Error> {
    let path = cwd.join(path);
    let deadline = Instant::now() + cap;
    while !path.exists() {
        if Instant::now() >= deadline {
            return Err(Error::Action(format!(
                "gave up after {} s waiting for `{}`",
                cap.as_secs(),
                path.display()
            )));
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// Dies by `signal`. Returns only if the signal did not end the process (it is ignored or
/// handled, e.g. when embedded), with the exit code a shell reports for that signal.
// nix has no safe call that sets a signal's disposition back to its default.
#[allow(unsafe_code)]
pub fn die_by(signal: Signal) -> i32 {
    // The Rust runtime handles SIGSEGV and SIGBUS itself (to report stack overflows); a
    // crash must die by the signal as a C program would, so the default action comes back.
    // SAFETY: restoring the default disposition installs no handler and runs no code.
    let _ = unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigDfl) };
    let _ = raise(signal);
    // Give an asynchronous delivery the moment it needs before falling back.
    std::thread::sleep(Duration::from_millis(100));
    128 + signal as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_appended_and_deleted() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("old.txt"), "x").expect("seed");
        std::fs::write(dir.path().join("log.txt"), "a\n").expect("seed");
        let response: Response = toml::from_str(
            r#"
            write = { "src/new.txt" = "hello\n" }
            append = { "log.txt" = "b\n" }
            delete = ["old.txt", "never-there.txt"]
            "#,
        )
        .expect("response");
        change_files(&response, dir.path()).expect("changes");
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).expect("read");
        assert_eq!(read("src/new.txt"), "hello\n");
        assert_eq!(read("log.txt"), "a\nb\n");
        assert!(!dir.path().join("old.txt").exists());
    }

    #[test]
    fn waiting_gives_up_at_the_cap() {
        let dir = tempfile::tempdir().expect("temp dir");
        let err = wait_for("never", dir.path(), Duration::from_millis(50));
        assert!(err.is_err());
        std::fs::write(dir.path().join("go"), "").expect("release");
        wait_for("go", dir.path(), Duration::from_millis(50)).expect("released");
    }
}
