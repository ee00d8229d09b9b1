//! The `cpu` row: what the daemon itself spends on each agent attempt, in the default sandbox,
//! against what the attempt's own processes (bubblewrap, the network forwarder, the stub
//! agent and the hooks it runs) spend. `catalystd` runs as its own process, so its figure is
//! its own user and system time, read from `/proc`, and the attempts' is what it reaped.
//!
//! The target row has its workspace under `TMPDIR`; an extra row puts the repository (and so
//! the state folder and the worktrees) on `/dev/shm`, to show what the file system adds.

use std::path::Path;
use std::time::Duration;

use catalyst_testkit::{procfs, Workspace};

use crate::{deployed, row, run_beads, runtime, stop, target, workspace, workspace_on};

/// The extra row's file system.
const TMPFS: &str = "/dev/shm";

pub fn cpu(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let (used, took) = measure(&workspace("max_agents = 2"), n);
    print(&used, took, n, "", true);
    let on_tmpfs = Path::new(TMPFS);
    let tmpdir = std::env::temp_dir();
    if on_tmpfs.is_dir() && !tmpdir.starts_with(on_tmpfs) {
        let parent = tempfile::tempdir_in(on_tmpfs).expect("a folder on tmpfs");
        let (used, took) = measure(&workspace_on(parent.path(), "max_agents = 2"), n);
        print(&used, took, n, ", repository on tmpfs", false);
    }
}

/// The daemon's CPU while `n` one-step beads run to their merge, and how long they took.
fn measure(ws: &Workspace, n: usize) -> (procfs::Cpu, Duration) {
    runtime().block_on(async {
        let daemon = deployed(ws).await;
        let mut client = daemon.client().await;
        let mut done = daemon.subscribe_types(0, &["worktree.removed"]).await;
        let before = procfs::cpu(daemon.pid()).expect("catalystd's /proc stat");
        let took = run_beads(&mut client, &mut done, n).await;
        let after = procfs::cpu(daemon.pid()).expect("catalystd's /proc stat");
        stop(daemon).await;
        (after.since(&before), took)
    })
}

fn print(used: &procfs::Cpu, took: Duration, n: usize, where_: &str, with_target: bool) {
    let per = |secs: f64| secs * 1e3 / n as f64;
    let own = per(used.own());
    let goal = if with_target {
        target("<= 10ms", own <= 10.0)
    } else {
        "-".to_owned()
    };
    row(
        &format!("cpu: catalystd's own CPU per attempt, default sandbox{where_}, {n} beads"),
        format!("{own:.2}ms"),
        &goal,
        &format!("the attempts' processes: {:.2}ms", per(used.children)),
        used.own() / used.children,
    );
    println!(
        "  user {:.2}ms, system {:.2}ms a bead; {n} beads in {took:.2?}",
        per(used.user),
        per(used.system)
    );
}
