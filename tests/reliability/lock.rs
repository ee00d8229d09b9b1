//! One daemon per workspace: a second `catalystd` on the same workspace
//! refuses to start and names the daemon in the way; a daemon killed without cleaning up
//! leaves a socket file that does not stop the next one.

use std::process::Command;

use catalyst::cli::client::Client;
use catalyst::protocol::Method;

use catalyst_testkit::Workspace;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_exits_naming_the_pid_that_holds_the_lock() {
    let ws = Workspace::new("", "");
    let first = ws.spawn();
    let status = first.call(Method::Status).await;
    assert_eq!(status["pid"], first.pid());

    let second = Command::new(env!("CARGO_BIN_EXE_catalystd"))
        .arg("--workspace")
        .arg(&ws.repo)
        .output()
        .expect("run a second catalystd");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(
        second.status.code(),
        Some(1),
        "the second daemon must not run, and exits as its man page says"
    );
    assert!(
        stderr.contains(&format!(
            "another catalystd (pid {}) is running",
            first.pid()
        )),
        "{stderr}"
    );
    // The first one is untouched: same socket, same daemon answering.
    let again = first.call(Method::Status).await;
    assert_eq!(again["pid"], first.pid());
    println!("second daemon: {}", stderr.trim());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_left_by_a_killed_daemon_does_not_stop_a_restart() {
    let ws = Workspace::new("", "");
    let mut first = ws.spawn();
    first.call(Method::Status).await;
    let socket = ws.paths.socket();
    first.kill().await;
    assert!(socket.exists(), "SIGKILL leaves the socket file behind");
    assert!(
        Client::connect(&socket).await.is_err(),
        "nobody answers on it"
    );

    let mut second = ws.spawn();
    let status = second.call(Method::Status).await;
    assert_eq!(status["pid"], second.pid(), "the new daemon answers");
    let lock = std::fs::read_to_string(ws.paths.lock()).expect("lock file");
    assert_eq!(lock.trim(), second.pid().to_string(), "and holds the lock");
    let stopped = second.terminate().await;
    assert!(stopped.success(), "{stopped}");
    assert!(!socket.exists(), "a clean stop removes the socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_still_held_for_a_dead_daemon_is_waited_for() {
    // A daemon killed while it was starting an agent leaves the lock held by the child for
    // the moment between its fork and its exec (found by the kill storm: the restart failed).
    // Simulated here: the test holds the lock with the pid of a process that has exited.
    use std::io::Write;
    let ws = Workspace::new("", "");
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let dead_pid = gone.id();
    gone.wait().expect("wait");
    let mut held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(ws.paths.lock())
        .expect("lock file");
    held.try_lock().expect("take the lock");
    writeln!(held, "{dead_pid}").expect("write the pid");

    let daemon = ws.spawn();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(daemon.exited().is_none(), "the daemon waits for the lock");
    drop(held);
    let status = daemon.call(Method::Status).await;
    assert_eq!(status["pid"], daemon.pid());
}
