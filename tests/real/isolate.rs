//! Running a test inside a network namespace of its own, and finding the agent CLIs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set in the re-executed test process, which runs inside the namespace.
const INSIDE: &str = "CATALYST_REAL_NETNS";

/// The installed agent CLI `name` (`claude`, `codex`), if `.ci/install-agents` put it there.
pub fn agent_bin(name: &str) -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/agents-cache/bin")
        .join(name);
    bin.exists().then_some(bin)
}

/// Whether the caller should run test `name` (its path without the crate, e.g.
/// `claude::feature_end_to_end`) here and now: true inside the namespace. Outside, it runs the
/// test in a new namespace, fails if it failed there, and returns false; or it skips, saying
/// why, when `agent` is not installed or namespaces are unavailable.
pub fn in_netns(name: &str, agent: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        // The process's own namespace (sysfs would show the one it was mounted in).
        let dev = std::fs::read_to_string("/proc/self/net/dev").expect("read /proc/self/net/dev");
        let links: Vec<&str> = dev
            .lines()
            .skip(2)
            .filter_map(|l| Some(l.split(':').next()?.trim()))
            .collect();
        assert_eq!(links, ["lo"], "only loopback inside the namespace");
        return true;
    }
    if agent_bin(agent).is_none() {
        eprintln!(
            "skipped {name}: `{agent}` is not installed in target/agents-cache (run .ci/install-agents, which needs npm)"
        );
        return false;
    }
    let up = ["--", "sh", "-c", "ip link set lo up"];
    let unshare = if quiet("unshare", &[&["-n"][..], &up].concat()) {
        vec!["-n"]
    } else if quiet("unshare", &[&["-rn"][..], &up].concat()) {
        vec!["-rn"]
    } else {
        eprintln!(
            "skipped {name}: network namespaces are unavailable (`unshare -n` or `ip link set lo up` failed), and these tests never run with the network reachable"
        );
        return false;
    };
    let exe = std::env::current_exe().expect("test binary");
    let status = Command::new("unshare")
        .args(unshare)
        .args(["--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .status()
        .expect("run unshare");
    assert!(
        status.success(),
        "{name} failed in its network namespace ({status}); its output is above"
    );
    false
}

fn quiet(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A multi-threaded runtime for the test body.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
