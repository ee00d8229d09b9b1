//! The `cpu` row: what the daemon itself spends on each agent attempt, in the default sandbox,
//! against what the attempt's own processes (bubblewrap, the network forwarder, the stub
//! agent and the hooks it runs) spend. `catalystd` runs as its own process, so its figure is
//! its own user and system time, read from `/proc`, and the attempts' is what it reaped.

use catalyst_testkit::procfs;

use crate::{deployed, row, run_beads, runtime, stop, target, workspace};

pub fn cpu(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let ws = workspace("max_agents = 2");
    let (used, took) = runtime().block_on(async {
        let daemon = deployed(&ws).await;
        let mut client = daemon.client().await;
        let mut done = daemon.subscribe_types(0, &["worktree.removed"]).await;
        let before = procfs::cpu(daemon.pid()).expect("catalystd's /proc stat");
        let took = run_beads(&mut client, &mut done, n).await;
        let after = procfs::cpu(daemon.pid()).expect("catalystd's /proc stat");
        stop(daemon).await;
        (after.since(&before), took)
    });
    let per = |secs: f64| secs * 1e3 / n as f64;
    row(
        &format!("cpu: catalystd's own CPU per attempt, default sandbox, {n} beads"),
        format!("{:.2}ms", per(used.own())),
        &target("<= 10ms", per(used.own()) <= 10.0),
        &format!("the attempts' processes: {:.2}ms", per(used.children)),
        used.own() / used.children,
    );
    println!(
        "  user {:.2}ms, system {:.2}ms a bead; {n} beads in {took:.2?}",
        per(used.user),
        per(used.system)
    );
}
