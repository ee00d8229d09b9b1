//! A gate runs the project's own checks, which the implementer wrote: they once ran with the
//! daemon's rights, outside any sandbox. Now they run in the agents' sandbox (the worktree
//! writable, no network, no capability), unless the formula's gate opts out for itself.

use std::net::TcpListener;

use catalyst_testkit::TestDaemon;

/// A `check.sh` that tries what a hostile test suite would, printing `<what>: <exit code>`.
fn check_script(name: &str, port: u16) -> String {
    let attempts = [
        ("home", format!("touch \"$HOME/{name}\"")),
        ("etc", format!("touch /etc/{name}")),
        ("journal", "cat ../../journal.jsonl".to_owned()),
        (
            "git-config",
            "git config core.hooksPath /tmp/planted".to_owned(),
        ),
        (
            "network",
            format!(
                "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
            ),
        ),
        ("mount", "mount -o remount,rw /".to_owned()),
        ("worktree", "echo built > built.txt".to_owned()),
    ];
    let mut script = String::new();
    for (what, command) in attempts {
        script.push_str(&format!("{command} >/dev/null 2>&1; echo \"{what}: $?\"\n"));
    }
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_runs_the_implementers_tests_in_the_sandbox() {
    if crate::skip() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("port").port();
    let name = format!("catalyst-gate-escape-{}", std::process::id());
    let script = toml::Value::String(check_script(&name, port)).to_string();
    let scenario = format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ write = {{ \"check.sh\" = {script} }} }}]\n"
    );
    let daemon = TestDaemon::start(&scenario, "").await;
    daemon
        .submit_gated_waiting("cat-tests", "sh check.sh")
        .await;
    let home = std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(&name);
    let etc = std::path::PathBuf::from("/etc").join(&name);
    let escaped = [home.exists(), etc.exists()];
    for path in [&home, &etc] {
        let _ = std::fs::remove_file(path);
    }
    let out = std::fs::read_to_string(
        daemon
            .run_dir("cat-tests", "checks", 1)
            .join("command-1/stdout"),
    )
    .expect("the gate's output");
    assert_eq!(escaped, [false, false], "{out}");
    for line in out.lines() {
        let (what, code) = line.split_once(": ").expect("what: code");
        match what {
            "worktree" => assert_eq!(code, "0", "the worktree is the gate's to write: {out}"),
            _ => assert_ne!(code, "0", "{what} got through: {out}"),
        }
    }
    assert_eq!(out.lines().count(), 7, "{out}");
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(
        listener.accept().is_err(),
        "the gate reached the host's loopback"
    );
}

/// The opt-out is the formula's, per gate, and said in the log: that gate runs as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_whose_formula_says_sandbox_none_runs_unconfined() {
    if crate::skip() {
        return;
    }
    let marker = std::env::temp_dir().join(format!("catalyst-gate-out-{}", std::process::id()));
    let formula = format!(
        "formula = \"loose\"\n[[steps]]\nid = \"check\"\ntitle = \"Check\"\nrole = \"gate\"\nsandbox = \"none\"\nrun = [\"touch {}\"]\n",
        marker.display()
    );
    let config = if nix::unistd::geteuid().is_root() {
        "allow_unconfined_root = true\n"
    } else {
        ""
    };
    let daemon = TestDaemon::start("", config).await;
    daemon.add_formula("loose", &formula).await;
    let id = daemon
        .submit(catalyst::protocol::BeadInput {
            formula: Some("loose".into()),
            ..catalyst_testkit::bead("Loose")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(ran, "the unconfined gate wrote outside its worktree");
}
