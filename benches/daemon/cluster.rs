//! The `cluster` row: agents on other machines. 200 one-step beads whose agent takes 200 ms,
//! run by one `catalyst worker`, then by two (each with the same slots, `max_agents` above
//! both): how much a second worker adds, timed from when every worker is there. NATS is one
//! `nats-server` (without it the row says so and is skipped); the workers, the daemon and the
//! agents share this machine's cores.

use std::time::Duration;

use catalyst::protocol::WorkersAnswer;
use catalyst_testkit::nats::{shared_remote, start_worker, NatsCluster};

use crate::{alternated, listed, median, row, run_beads, runtime, stop, target, workspace};

/// Agents each worker runs at once.
const SLOTS: usize = 4;

pub fn cluster(quick: bool) {
    let n = if quick { 40 } else { 200 };
    let rt = runtime();
    if !catalyst_testkit::nats::available() {
        println!(
            "cluster: skipped (nats-server is not installed; .ci/install-test-deps installs it)"
        );
        return;
    }
    // Three runs each way, alternated, and the median of each: two runs of the same code
    // on this machine differ by as much as a tenth.
    let started = |workers, slots| {
        rt.block_on(run(n, workers, slots))
            .expect("nats-server is installed")
    };
    let (ones, twos) = alternated(3, || started(1, SLOTS), || started(2, SLOTS));
    let ((one, one_cpu), (two, two_cpu)) = (median(&ones), median(&twos));
    let runs = |all: &[(Duration, Duration)]| listed(all.iter().map(|(wall, _)| *wall));
    row(
        &format!(
            "cluster: {n} one-step beads, 200 ms agent, 2 workers x {SLOTS} slots, median of 3"
        ),
        format!("{two:.2?}"),
        &target(">= 1.8x", one.as_secs_f64() >= two.as_secs_f64() * 1.8),
        &format!("1 worker: {one:.2?}"),
        one.as_secs_f64() / two.as_secs_f64(),
    );
    println!(
        "  runs: 1 worker {}; 2 workers {}",
        runs(&ones),
        runs(&twos)
    );
    // Both workers, the daemon, NATS and every agent share this machine's cores: how busy
    // they kept them says whether a second worker could have added anything here.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (workers, wall, cpu) in [(1, one, one_cpu), (2, two, two_cpu)] {
        println!(
            "  {workers} worker(s): {cpu:.2?} of CPU in {wall:.2?}: {:.2} of {cores} cores busy, {:.1} ms of CPU per bead",
            cpu.as_secs_f64() / wall.as_secs_f64(),
            cpu.as_secs_f64() * 1000.0 / n as f64,
        );
    }
    // The same agents at once as the two workers run, from one worker: on one machine a
    // second worker brings no cores, so what two workers cannot gain over this is the
    // machine's, not the cluster's.
    let (wide, _) = started(1, SLOTS * 2);
    println!(
        "  control: 1 worker x {} slots (as many agents at once as 2 workers): {wide:.2?}; 2 workers take {:.2}x its time",
        SLOTS * 2,
        two.as_secs_f64() / wide.as_secs_f64(),
    );
}

/// The CPU this process and its reaped children have used.
fn cpu_used() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let time = |who| {
        getrusage(who).map_or(Duration::ZERO, |u| {
            let (user, system) = (u.user_time(), u.system_time());
            let micros = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
            };
            micros(user) + micros(system)
        })
    };
    time(UsageWho::RUSAGE_SELF) + time(UsageWho::RUSAGE_CHILDREN)
}

/// `n` beads through `workers` workers of `slots` slots each: how long, and the CPU all of it
/// used (the daemon, NATS, the workers, the agents, git); `None` without `nats-server`.
async fn run(n: usize, workers: usize, slots: usize) -> Option<(Duration, Duration)> {
    let before = cpu_used();
    let nats = NatsCluster::start(1).await?;
    // Above the slots of both workers, as docs/cluster.md advises: orders wait in the queue
    // for a free slot, so no worker waits for the daemon's bookkeeping of the last attempt
    // (taking its commit, merging, preparing the next), with one worker as with two.
    let ws = workspace(&format!("max_agents = {}\n", SLOTS * 2 * 2));
    ws.set_scenario("[[rule]]\nrole = \"task\"\nresponses = [{ sleep_ms = 200 }]\n");
    let remote = shared_remote(&ws);
    ws.append_config(&nats.config_for(&remote, 30));
    let daemon = ws.start().await;
    let running: Vec<_> = (0..workers)
        .map(|i| start_worker(&ws, &nats, &remote, &format!("w{i}"), slots))
        .collect();
    let mut client = daemon.client().await;
    // Workers are long-running services: the clock starts once each has cloned the shared
    // remote and said it is there, as it would have long before a real run.
    catalyst_testkit::poll::eventually("every worker to say it is there", async || {
        let answer: WorkersAnswer = client.workers().await.ok()?;
        (answer.workers.len() == workers).then_some(())
    })
    .await;
    let mut done = daemon.subscribe_types(0, &["worktree.removed"]).await;
    let took = run_beads(&mut client, &mut done, n).await;
    stop(daemon).await;
    // Reaped, so their CPU counts.
    drop(running);
    drop(nats);
    Some((took, cpu_used() - before))
}
