//! Stopping agents: timeouts, stalls, signals, cancellation, and the process group left behind.

use std::time::Duration;

use crate::domain::model::Role;
use crate::domain::router::Outcome;

use super::*;

#[tokio::test]
async fn timeout_stops_the_whole_group() {
    let fx = Fixture::new();
    let mut spec = fx.spec(
        OutputFormat::Text,
        "sleep 1000 & echo $! > \"$DIR/grandchild\"; echo started; sleep 1000",
    );
    spec.timeout = Duration::from_millis(500);
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::TimedOut { after_ms: 500 });
    let grandchild = read_pid(&fx.path("grandchild"));
    wait_for("the grandchild to die", || !is_alive(grandchild)).await;
    assert!(!is_alive(report.pid as i32));
    assert_eq!(
        outcome(&report, Role::Implement, true),
        Some(Outcome::Failed {
            reason: "timed out after 500ms".into()
        })
    );
}

#[tokio::test]
async fn an_agent_that_ignores_sigterm_is_killed_after_the_grace() {
    let fx = Fixture::new();
    let mut spec = fx.spec(OutputFormat::Text, "trap '' TERM; echo started; sleep 1000");
    spec.timeout = Duration::from_millis(300);
    spec.grace = Duration::from_millis(300);
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::TimedOut { after_ms: 300 });
    assert!(report.duration_ms >= 600, "{}", report.duration_ms);
}

#[tokio::test]
async fn what_the_leader_leaves_behind_is_killed_when_it_exits() {
    let fx = Fixture::new();
    let report = run_now(fx.spec(
        OutputFormat::Text,
        "sleep 1000 & echo $! > \"$DIR/grandchild\"; echo done",
    ))
    .await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_eq!(report.final_message.as_deref(), Some("done\n"));
    let grandchild = read_pid(&fx.path("grandchild"));
    wait_for("the grandchild to die", || !is_alive(grandchild)).await;
}

#[tokio::test]
async fn silence_longer_than_the_stall_timeout_stops_the_agent() {
    let fx = Fixture::new();
    let mut spec = fx.spec(OutputFormat::Text, "echo started; sleep 1000");
    spec.stall_timeout = Duration::from_millis(400);
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Stalled { after_ms: 400 });
    assert_eq!(report.final_message.as_deref(), Some("started\n"));
}

#[tokio::test]
async fn output_on_either_stream_keeps_the_stall_timer_from_firing() {
    let fx = Fixture::new();
    let mut spec = fx.spec(
        OutputFormat::Text,
        "for i in 1 2 3 4 5 6 7 8; do echo out; sleep 0.1; echo err >&2; sleep 0.1; done",
    );
    spec.stall_timeout = Duration::from_millis(1000);
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Code(0));
}

#[tokio::test]
async fn death_by_signal_is_reported_by_name() {
    let fx = Fixture::new();
    let report = run_now(fx.spec(OutputFormat::Text, "kill -SEGV $$")).await;
    assert_eq!(report.exit, Exit::Signal(11));
    assert_eq!(
        outcome(&report, Role::Fix, true),
        Some(Outcome::Failed {
            reason: "killed by SIGSEGV".into()
        })
    );
}

#[tokio::test]
async fn cancel_stops_the_agent_and_is_not_an_outcome() {
    let fx = Fixture::new();
    let spec = fx.spec(
        OutputFormat::Text,
        "sleep 1000 & echo $! > \"$DIR/grandchild\"; touch \"$DIR/started\"; sleep 1000",
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run(spec, cancel.clone()));
    let started = fx.path("started");
    wait_for("the agent to start", || started.exists()).await;
    cancel.cancel();
    let report = task.await.unwrap();
    assert_eq!(report.exit, Exit::Cancelled);
    assert_eq!(outcome(&report, Role::Implement, true), None);
    let grandchild = read_pid(&fx.path("grandchild"));
    wait_for("the grandchild to die", || !is_alive(grandchild)).await;
}

#[tokio::test]
async fn dropping_the_run_kills_the_group() {
    let fx = Fixture::new();
    let spec = fx.spec(
        OutputFormat::Text,
        "sleep 1000 & echo $! > \"$DIR/grandchild\"; sleep 1000",
    );
    let task = tokio::spawn(run(spec, CancellationToken::new()));
    let pid_file = fx.path("grandchild");
    wait_for("the agent to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let grandchild = read_pid(&pid_file);
    wait_for("the grandchild to die", || !is_alive(grandchild)).await;
}

#[tokio::test]
async fn a_run_cancelled_before_it_starts_spawns_nothing() {
    let fx = Fixture::new();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let report = run(fx.spec(OutputFormat::Text, "touch \"$DIR/ran\""), cancel).await;
    assert_eq!(report.exit, Exit::Cancelled);
    assert_eq!(report.pid, 0);
    assert!(!fx.path("ran").exists());
}

#[test]
fn agents_of_this_workspace_without_a_pid_file_are_found_by_their_environment() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let spawn = |context: std::path::PathBuf| {
        std::process::Command::new("sh")
            .args(["-c", "sleep 1000 & sleep 1000"])
            .env("CATALYST_CONTEXT", context)
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let mut ours = spawn(runs.join("cat-1/implement/1/context.md"));
    let mut other = spawn(dir.path().join("runs2/cat-1/implement/1/context.md"));
    assert_eq!(kill_orphans(&runs), 1);
    let status = ours.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // Another workspace's agent is left alone.
    assert!(other.try_wait().unwrap().is_none());
    let _ = kill_leftover_group(i32::try_from(other.id()).unwrap());
    other.wait().unwrap();
}

#[test]
fn leftover_groups_are_killed_and_gone_ones_are_fine() {
    use std::os::unix::process::CommandExt;

    let mut leftover = std::process::Command::new("sh")
        .args(["-c", "sleep 1000 & sleep 1000"])
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = i32::try_from(leftover.id()).unwrap();
    assert!(kill_leftover_group(pgid).unwrap());
    let status = leftover.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // Its background sleep died too, or is a zombie waiting for init; either way no error.
    kill_leftover_group(pgid).unwrap();

    // A group whose only member has exited and been reaped is gone: nothing to kill.
    let mut done = std::process::Command::new("true")
        .process_group(0)
        .spawn()
        .unwrap();
    let gone = i32::try_from(done.id()).unwrap();
    done.wait().unwrap();
    assert!(!kill_leftover_group(gone).unwrap());

    let own = nix::unistd::getpgrp().as_raw();
    for refused in [0, 1, -5, own] {
        assert!(
            matches!(kill_leftover_group(refused), Err(KillError::Refused(p)) if p == refused),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn a_process_that_left_the_group_does_not_hold_the_run_open() {
    let fx = Fixture::new();
    let mut spec = fx.spec(
        OutputFormat::Text,
        "setsid sleep 1000 & echo $! > \"$DIR/escaped\"; echo done",
    );
    spec.grace = Duration::from_millis(100);
    let report = run_now(spec).await;
    let escaped = read_pid(&fx.path("escaped"));
    // Out of the group, so out of catalyst's reach: the test cleans up after it.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(escaped),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(report.exit, Exit::Code(0));
    assert_eq!(report.final_message.as_deref(), Some("done\n"));
}
