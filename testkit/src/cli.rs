//! Running the `catalyst` command line as a user does, and the tools some tests need.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `catalyst args…` in `cwd` and returns its exit code (-1 if a signal ended it), stdout
/// and stderr.
pub fn catalyst(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    catalyst_with_stdin(cwd, args, "")
}

/// [`catalyst`] with `stdin` as its standard input.
pub fn catalyst_with_stdin(cwd: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(crate::catalyst_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run catalyst");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write catalyst's stdin");
    outcome(&child.wait_with_output().expect("catalyst's output"))
}

pub(crate) fn outcome(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether `tool` is on PATH; tests that need it skip with a message when it is not
/// (`.ci/install-test-deps` installs it for CI).
pub fn have(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    if !found {
        eprintln!("SKIPPED: `{tool}` is not installed (`.ci/install-test-deps` installs it)");
    }
    found
}
