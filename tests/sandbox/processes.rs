//! Processes and the network: what an agent starts must end with its attempt, and it reaches
//! no port but its model's.

use std::net::TcpListener;

use crate::{attempt, attempt_configured, attempt_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_leaves_the_group_still_ends_with_the_attempt() {
    if crate::skip() {
        return;
    }
    // The sleeper inherits the stub's environment, by which `agent_processes` finds it.
    let (daemon, shell) = attempt(&[
        "setsid sleep 600 > /dev/null 2>&1 < /dev/null &",
        "nohup sleep 600 > /dev/null 2>&1 < /dev/null &",
    ])
    .await;
    let left = daemon.agent_processes();
    for (pid, _) in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        left.is_empty(),
        "still running after the attempt: {left:?} ({shell:?})"
    );
}

/// Starts 300 sleepers, remembering them so the shell kills them when it ends; prints how
/// many it started only if every fork succeeded (`sh` gives up at the first that fails).
const FORK_BOMB: &str = "trap 'kill $pids' EXIT; n=0; while [ $n -lt 300 ]; do sleep 60 & pids=\"$pids $!\"; n=$((n+1)); done; echo started $n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stops_at_the_process_limit() {
    if let Err(why) = catalyst::daemon::cgroup::pids() {
        println!("SKIPPED: no control group for process limits here: {why}");
        return;
    }
    let (_daemon, shell) = attempt_configured(&[FORK_BOMB], "max_processes = 64\n", |_| {}).await;
    assert!(
        !shell[0].output.contains("started 300"),
        "300 processes started under a limit of 64: {shell:?}"
    );
    assert_ne!(shell[0].exit_code, Some(0), "{shell:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_port_other_than_the_model_is_out_of_reach() {
    if crate::skip() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("address").port();
    let (_daemon, shell) =
        attempt(&[&format!("bash -c 'echo leak > /dev/tcp/127.0.0.1/{port}'")]).await;
    // A connection made while the attempt ran would be waiting in the backlog by now.
    let accepted = listener.accept();
    assert!(
        accepted.is_err(),
        "the agent reached port {port}: {shell:?}"
    );
    assert_ne!(shell[0].exit_code, Some(0), "{shell:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_other_than_the_model_is_refused_and_recorded() {
    if crate::skip() {
        return;
    }
    // Through the proxy the sandbox's network offers (`HTTPS_PROXY`), as any HTTP client would.
    let ask = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && printf \"CONNECT example.com:443 HTTP/1.1\\r\\n\\r\\n\" >&3 && head -c 12 <&3'";
    let (daemon, shell) = attempt(&[ask]).await;
    assert!(shell[0].output.contains("403"), "{shell:?}");
    let refused = daemon
        .wait_for("the refusal recorded", |e| {
            e["type"] == "agent.tool" && e["tool"] == "Network"
        })
        .await;
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["target"], "example.com:443", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_reaches_no_remote() {
    if crate::skip() {
        return;
    }
    // A remote the daemon's user can write, outside the attempt.
    let (daemon, shell) = attempt_with(&["git push -q origin HEAD:refs/heads/pushed"], |ws| {
        let remote = ws.root.join("remote.git");
        git2::Repository::init_bare(&remote).expect("a bare remote");
        let repo = git2::Repository::open(&ws.repo).expect("the repository");
        repo.remote("origin", &remote.display().to_string())
            .expect("origin");
    })
    .await;
    assert_ne!(shell[0].exit_code, Some(0), "{shell:?}");
    let remote = git2::Repository::open_bare(daemon.root.join("remote.git")).expect("remote");
    assert!(
        remote.find_reference("refs/heads/pushed").is_err(),
        "{shell:?}"
    );
}

/// An agent CLI that is not installed is the profile's trouble, not the bead's: inside the
/// sandbox its program was looked up by bubblewrap's child, which exited 127, and six attempts
/// went by in 50 ms, the last on a stronger model. Now it is looked up before the sandbox
/// starts, and dispatching pauses with its name and no attempt counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cli_that_is_not_installed_pauses_the_profile_and_costs_no_attempt() {
    if crate::skip() {
        return;
    }
    let daemon = catalyst_testkit::TestDaemon::start_with(|_| {
        "agent = \"ghost\"\nprofiles = { ghost = { command = [\"ghost-claude\", \"-p\"], format = \"claude-stream-json\" } }\n"
            .to_owned()
    })
    .await;
    let mut events = daemon.subscribe(0).await;
    let id = daemon
        .submit(catalyst_testkit::bead("Nobody to run it"))
        .await;
    let paused = events
        .wait_for("dispatching paused", |e| e["type"] == "dispatch.paused")
        .await;
    let reason = paused["reason"].as_str().expect("reason");
    assert!(reason.contains("cannot run `ghost-claude`"), "{reason}");
    let journal = daemon.journal();
    let failed: Vec<_> = journal
        .iter()
        .filter(|e| e["type"] == "step.result" && e["outcome"] != "unavailable")
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let shown = daemon.show(&id).await;
    assert_ne!(shown["bead"]["status"], "blocked", "{shown}");
}
