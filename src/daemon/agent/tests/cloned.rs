//! The processes started ahead as clones of the daemon (x86-64 Linux).

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::cloned::{self, Setup};
use super::super::process::Process;
use super::super::shim::Exec;

fn started() -> Process {
    let setup = Setup {
        niceness: None,
        cgroup: None,
    };
    Process::Cloned(cloned::start(&setup).expect("a clone"))
}

fn command(cwd: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Exec {
    Exec {
        cwd: cwd.to_owned(),
        stdin_null: false,
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
    }
}

fn exec(process: &mut Process, exec: &Exec) {
    match process {
        Process::Cloned(child) => child.exec(exec).expect("the command line sent"),
        Process::Spawned(_) => unreachable!("started as a clone"),
    }
}

/// Its stdout and stderr, read to their ends, and its exit code.
async fn finished(mut process: Process) -> (String, String, Option<i32>) {
    let (mut out, mut err) = process.take_output().expect("pipes").expect("pipes");
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let (a, b) = tokio::join!(
        out.read_to_string(&mut stdout),
        err.read_to_string(&mut stderr)
    );
    a.and(b).expect("output");
    let status = tokio::time::timeout(Duration::from_secs(10), process.wait())
        .await
        .expect("it exits")
        .expect("its status");
    (stdout, stderr, status.code())
}

/// Waits up to ten seconds for `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::yield_now();
    }
}

#[tokio::test]
async fn a_clone_runs_its_command_line_in_its_folder_with_the_daemons_environment_and_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut process = started();
    let script = r#"pwd; echo "$ADDED"; echo "$HOME"; cat"#;
    exec(
        &mut process,
        &command(
            dir.path(),
            "/bin/sh",
            &["-c", script],
            &[("ADDED", "first"), ("ADDED", "later wins")],
        ),
    );
    let mut stdin = process.take_stdin().expect("a pipe").expect("a pipe");
    stdin.write_all(b"from stdin\n").await.expect("written");
    drop(stdin);
    let (stdout, stderr, code) = finished(process).await;
    let home = std::env::var("HOME").unwrap_or_default();
    let cwd = dir.path().canonicalize().expect("canonical");
    assert_eq!(
        stdout,
        format!("{}\nlater wins\n{home}\nfrom stdin\n", cwd.display()),
        "{stderr}"
    );
    assert_eq!(code, Some(0));
}

/// A signal mask of `/proc/<pid>/status` (`SigBlk:`, `SigIgn:`, `SigCgt:`).
fn mask(status: &str, field: &str) -> u64 {
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in {status}"));
    u64::from_str_radix(line[field.len()..].trim(), 16).expect("a mask")
}

#[tokio::test]
async fn an_agent_starts_with_no_signal_blocked_or_caught_and_sigpipe_not_ignored() {
    // The test process ignores SIGPIPE (as every Rust program does), handles signals of its
    // own, and blocks every signal on the thread that clones.
    let mut process = started();
    exec(
        &mut process,
        &command(Path::new("/"), "/bin/cat", &["/proc/self/status"], &[]),
    );
    let (stdout, stderr, code) = finished(process).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(mask(&stdout, "SigBlk:"), 0, "{stdout}");
    assert_eq!(mask(&stdout, "SigCgt:"), 0, "{stdout}");
    // What the daemon ignores stays ignored (as `posix_spawn` leaves it), but SIGPIPE.
    let own = std::fs::read_to_string("/proc/self/status").expect("own status");
    const SIGPIPE: u64 = 1 << (13 - 1);
    assert_ne!(mask(&own, "SigIgn:") & SIGPIPE, 0, "{own}");
    assert_eq!(mask(&stdout, "SigIgn:"), mask(&own, "SigIgn:") & !SIGPIPE);
}

#[tokio::test]
async fn a_waiting_clone_holds_none_of_the_daemons_descriptors() {
    // A pipe the daemon opened before the clone: its copy in the clone would keep the write
    // end open, and the reader would never see the end.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let mut process = started();
    let pid = process.id().expect("a pid");
    eventually("the clone closed what it copied", || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| fds.count() == 4)
            .unwrap_or(false)
    });
    drop(write);
    // Non-blocking: with a writer left (the clone's copy), the read would say "try again".
    nix::fcntl::fcntl(
        &read,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .expect("non-blocking");
    let mut byte = [0u8];
    // Another test's process may hold a copy for a moment (between its fork and its exec);
    // the clone under test would hold one for as long as it waits.
    eventually("the end of the pipe seen while the clone waits", || {
        nix::unistd::read(&read, &mut byte) == Ok(0)
    });
    assert!(
        process.try_wait().expect("its state").is_none(),
        "the clone still waits"
    );
}

#[tokio::test]
async fn a_clone_dropped_before_its_command_line_is_killed_and_reaped() {
    let process = started();
    let pid = process.id().expect("a pid");
    assert_eq!(
        nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32)))
            .expect("its group")
            .as_raw(),
        pid as i32,
        "it leads a process group of its own"
    );
    drop(process);
    eventually("the clone is gone, zombie included", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
}

#[tokio::test]
async fn a_program_that_cannot_run_is_said_on_stderr_with_exit_127() {
    let mut process = started();
    exec(
        &mut process,
        &command(Path::new("/"), "/nonexistent/agent", &[], &[]),
    );
    let (_, stderr, code) = finished(process).await;
    assert_eq!(code, Some(127));
    assert!(
        stderr.contains("cannot run `/nonexistent/agent`: No such file or directory (os error 2)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_clone_whose_command_line_never_comes_exits_when_the_daemon_lets_go() {
    let mut process = started();
    if let Process::Cloned(child) = &mut process {
        child.close_go();
    }
    let (_, stderr, code) = finished(process).await;
    assert_eq!((code, stderr.as_str()), (Some(1), ""));
}
