//! The `sandbox` row: what confining an attempt costs, from spawn to the agent's first output
//! (an agent that prints one line and exits), unconfined against bubblewrap with the host's
//! network and with the `model-only` network (its forwarder and proxy included).

use std::path::Path;
use std::time::{Duration, Instant};

use catalyst::daemon::agent::{self, NetPlan, RunSpec, SandboxSpec};
use catalyst::domain::agent::profile::AgentProfile;
use catalyst::domain::agent::sandbox::Network;
use tokio_util::sync::CancellationToken;

use crate::{percentile, row, runtime};

fn spec(dir: &Path, sandbox: Option<SandboxSpec>) -> RunSpec {
    RunSpec {
        profile: AgentProfile::shell(),
        model: String::new(),
        prompt: "echo ready".into(),
        worktree: dir.join("worktree"),
        run_dir: dir.join("run"),
        env: Vec::new(),
        settings_path: None,
        timeout: Duration::from_secs(60),
        stall_timeout: Duration::from_secs(60),
        grace: Duration::from_secs(1),
        output_cap: 1 << 20,
        max_processes: None,
        nice: 0,
        sandbox,
        conversation: None,
    }
}

fn confined(dir: &Path, network: Network) -> SandboxSpec {
    SandboxSpec {
        bwrap: catalyst::daemon::sandbox::BWRAP.into(),
        state: dir.join("state"),
        socket: Some(dir.join("run/hook.sock")),
        git: None,
        writable: Vec::new(),
        readable: Vec::new(),
        hidden: Vec::new(),
        network,
        net: (network == Network::ModelOnly).then(|| NetPlan {
            forwarder: catalyst::daemon::load::forwarder(&catalyst_testkit::catalyst_bin()),
            forwards: Vec::new(),
            hosts: vec!["api.anthropic.com:443".into()],
            refused: None,
        }),
    }
}

/// Runs the agent `n` times and returns the sorted durations.
async fn runs(n: usize, make: impl Fn() -> RunSpec) -> Vec<Duration> {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let report = agent::run(make(), CancellationToken::new()).await;
        took.push(t.elapsed());
        assert_eq!(report.exit.to_string(), "exit code 0", "{report:?}");
    }
    took.sort();
    took
}

pub fn sandbox(quick: bool) {
    let n = if quick { 10 } else { 100 };
    let dir = tempfile::tempdir().expect("temp dir");
    for sub in ["worktree", "run", "state"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("folder");
    }
    // The attempt's socket, bound into the sandbox; no one answers it here.
    std::fs::write(dir.path().join("run/hook.sock"), "").expect("socket placeholder");
    let root = dir.path();
    runtime().block_on(async {
        let bare = runs(n, || spec(root, None)).await;
        let open = runs(n, || spec(root, Some(confined(root, Network::Open)))).await;
        let model = runs(n, || spec(root, Some(confined(root, Network::ModelOnly)))).await;
        let base = percentile(&bare, 50);
        row(
            "sandbox: spawn -> first output, unconfined p50",
            format!("{base:.2?}"),
            "-",
            "itself",
            1.0,
        );
        for (what, v) in [
            ("bubblewrap", &open),
            ("bubblewrap + model-only net", &model),
        ] {
            let p50 = percentile(v, 50);
            row(
                &format!("sandbox: spawn -> first output, {what} p50"),
                format!("{p50:.2?}"),
                "-",
                &format!(
                    "unconfined p50 {base:.2?}; adds {:.2?}",
                    p50.saturating_sub(base)
                ),
                p50.as_secs_f64() / base.as_secs_f64(),
            );
        }
    });
}
