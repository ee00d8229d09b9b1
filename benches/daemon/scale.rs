//! The `scale` row: `catalystd` on a 100,000-bead store: the first start on its journal (which
//! compacts it) and a later start on the snapshot, against replaying the journal with
//! `Store::open` alone; resident memory, and CPU while idle.

use std::time::{Duration, Instant};

use catalyst::protocol::Method;
use catalyst_testkit::procfs::{cpu, vm_kb};
use catalyst_testkit::workload;

use crate::{median, row, runtime, target, workspace_with_default};

/// Starts on the snapshot, of which the row takes the median.
const STARTS: usize = 5;

pub fn scale(quick: bool) {
    let n: u64 = if quick { 10_000 } else { 100_000 };
    let idle_secs = if quick { 5 } else { 60 };
    // Beads without a formula label, and no default formula: a store to load, not work to do.
    let ws = workspace_with_default("", "");
    workload::write_journal(&ws.paths.state.join("journal.jsonl"), n);
    let replay = {
        let t = Instant::now();
        let (store, _) = catalyst::daemon::store::Store::open(&ws.paths.state).expect("open");
        assert_eq!(store.state().len() as u64, n);
        t.elapsed()
    };
    let rt = runtime();
    let _context = rt.enter();
    // The first start replays the journal and compacts it into a snapshot before serving.
    let start = Instant::now();
    let mut first = ws.catalystd().args(&["--log-level", "warn"]).spawn();
    rt.block_on(first.call(Method::Status));
    let first_startup = start.elapsed();
    let first_rss = vm_kb(first.pid(), "VmRSS").unwrap_or(0);
    rt.block_on(first.stop());
    // Every later start loads the snapshot: five of them, and the median (one start on this
    // machine varies by half its time with how fast the host hands out memory).
    let mut starts = Vec::new();
    for _ in 0..STARTS - 1 {
        let start = Instant::now();
        let mut daemon = ws.catalystd().args(&["--log-level", "warn"]).spawn();
        rt.block_on(daemon.call(Method::Status));
        starts.push(start.elapsed());
        rt.block_on(daemon.stop());
    }
    let start = Instant::now();
    let mut daemon = ws.catalystd().args(&["--log-level", "warn"]).spawn();
    rt.block_on(daemon.call(Method::Status));
    starts.push(start.elapsed());
    let listed = starts
        .iter()
        .map(|t| format!("{t:.2?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let startup = median(&starts);
    let rss = vm_kb(daemon.pid(), "VmRSS").unwrap_or(0);
    let own = |pid| cpu(pid).map_or(0.0, |c| c.own());
    let before = own(daemon.pid());
    std::thread::sleep(Duration::from_secs(idle_secs));
    let idle_cpu = own(daemon.pid()) - before;
    rt.block_on(daemon.kill());
    row(
        &format!("scale: first start on a {n}-bead journal"),
        format!("{first_startup:.2?}"),
        "-",
        &format!("replaying it with Store::open alone: {replay:.2?}"),
        first_startup.as_secs_f64() / replay.as_secs_f64(),
    );
    row(
        &format!("scale: catalystd start-up, {n} beads (snapshot), median of {STARTS}"),
        format!("{startup:.2?}"),
        &target("<= 0.5s", startup <= Duration::from_millis(500)),
        &format!("replaying the journal with Store::open alone: {replay:.2?}"),
        startup.as_secs_f64() / replay.as_secs_f64(),
    );
    println!("  starts: {listed}");
    for (when, kb) in [
        ("after the first start", first_rss),
        ("on the snapshot", rss),
    ] {
        row(
            &format!("scale: resident memory {when}, {n} beads"),
            format!("{:.1} MB", kb as f64 / 1024.0),
            &target("<= 200 MB", kb <= 200 * 1024),
            "200 MB",
            kb as f64 / 1024.0 / 200.0,
        );
    }
    row(
        &format!("scale: CPU while idle for {idle_secs}s"),
        format!("{:.3}s", idle_cpu),
        "~ 0",
        &format!("{idle_secs}s of wall time"),
        idle_cpu / idle_secs as f64,
    );
}
