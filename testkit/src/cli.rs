//! Running the `catalyst` command line as a user does, and the tools some tests need.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `catalyst args…` in `cwd` and returns its exit code (-1 if a signal ended it), stdout
/// and stderr.
pub fn catalyst(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    catalyst_with_stdin(cwd, args, "")
}

/// [`catalyst`] with `stdin` as its standard input.
pub fn catalyst_with_stdin(cwd: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    program_with_stdin(&crate::catalyst_bin(), cwd, args, stdin)
}

/// Runs `program args…` in `cwd` with `stdin`, as [`catalyst_with_stdin`] runs `catalyst`.
pub fn program_with_stdin(
    program: &Path,
    cwd: &Path,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run `{}`: {e}", program.display()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write catalyst's stdin");
    outcome(&child.wait_with_output().expect("catalyst's output"))
}

/// Runs `catalyst args…` in `cwd` with `env` and its stdout on a pseudo-terminal, as in a
/// person's terminal, and returns its exit code and what it printed there, escape codes
/// included (the terminal's `\r\n` read back as `\n`). `NO_COLOR` is removed unless `env`
/// sets it.
pub fn catalyst_in_terminal(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let mut command = Command::new(crate::catalyst_bin());
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::from(pty.slave)))
        .stderr(Stdio::inherit());
    let mut child = command.spawn().expect("run catalyst");
    // The command holds the terminal's other end; once it and the child are gone, reading
    // the master ends (with EIO, on Linux).
    drop(command);
    let mut master = std::fs::File::from(pty.master);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.raw_os_error() == Some(nix::libc::EIO) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let status = child.wait().expect("catalyst's exit");
    let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
    (status.code().unwrap_or(-1), text)
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
