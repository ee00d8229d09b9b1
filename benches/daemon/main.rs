//! Daemon benchmarks: the orchestrator's own cost against the floor and against pueue, the
//! daemon's CPU per attempt in the default sandbox,
//! dispatch latency, event fan-out, a 100,000-bead store's start-up, memory and idle CPU,
//! what the sandbox adds to an attempt's start, what a tool call's hook costs, what each
//! git step of a bead costs, how fast the web dashboard's board answers on a large store, and
//! how agents on a second worker machine scale a run.
//! Every row prints its figure, its target and its ratio to a baseline measured in this run.
//!
//! Run: `cargo bench --bench daemon` (all rows), `cargo bench --bench daemon -- ROW…` with
//! ROW one of `cpu overhead chain latency fanout scale sandbox hook git web cluster`, and
//! `--quick` for small sizes. Workspaces are made under `TMPDIR` (docs/benchmarks.md on why the file system
//! matters).
//! The `chain` row needs pueue 4.0.4, which `benches/pueue.sh` builds from crates.io into
//! `target/bench-cache/`; without it the row says so and is skipped.
//!
//! The daemon runs on a `catalyst_testkit` workspace, in-process or as `catalystd`, exactly
//! as in the tests.

mod chain;
mod cluster;
mod cpu;
mod fanout;
mod fs;
mod git;
mod hook;
mod latency;
mod overhead;
mod sandbox;
mod scale;
mod web;

use std::time::Duration;

use catalyst::protocol::BeadInput;
use catalyst_testkit::{Event, Events, TestDaemon, Workspace};

/// The same allocator as `catalystd` (the scale row compares its start-up with `Store::open`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long a whole row may wait for the daemon (the tests' timeout is for small workloads).
const WAIT: Duration = Duration::from_secs(600);

/// One agent step, then the daemon's merge: the agent runs, the daemon commits, fast-forwards
/// the target and removes the worktree, the same work the floor program does for a bead.
const ONE_STEP: &str = "formula = \"one\"
[[steps]]
id = \"work\"
title = \"Work\"
role = \"task\"
[[steps]]
id = \"merge\"
title = \"Merge\"
role = \"merge\"
needs = [\"work\"]
";

/// A row: its name, and what runs it (`quick` for small sizes).
type Row = (&'static str, fn(bool));

/// The rows in the order they run. `cpu` goes first: on ext4 without a journal every file
/// created in the minute after a mass deletion pays for it (docs/benchmarks.md), and each row
/// deletes its workspace when it ends ([`fs::settle`] runs between rows).
const ROWS: [Row; 11] = [
    ("cpu", cpu::cpu),
    ("overhead", overhead::overhead),
    ("chain", chain::chain),
    ("latency", latency::latency),
    ("fanout", fanout::fanout),
    ("scale", scale::scale),
    ("sandbox", sandbox::sandbox),
    ("hook", hook::hook),
    ("git", git::git),
    ("web", web::web),
    ("cluster", cluster::cluster),
];

/// The rows' names, as `--help` lists them.
fn row_names() -> String {
    ROWS.map(|(name, _)| name).join(" ")
}

/// A workspace whose beads run the `one` formula (one agent step, then the merge), with
/// `extra` config keys.
fn workspace(extra: &str) -> Workspace {
    workspace_with_default("one", extra)
}

/// `catalystd` as its own process on `ws`, as it is deployed (its allocator, without
/// transparent huge pages), once it answers: its clients share the machine with it, not its
/// threads or its allocator.
async fn deployed(ws: &Workspace) -> TestDaemon {
    let daemon = ws.spawn();
    daemon.call(catalyst::protocol::Method::Status).await;
    daemon
}

/// A workspace with the `one` formula installed, `default_formula` for beads without a
/// formula label, and `extra` config keys. Kept after the run when `BENCH_KEEP` is set, for a
/// look at the journal.
fn workspace_with_default(formula: &str, extra: &str) -> Workspace {
    with_one_formula(builder(formula, extra).build())
}

/// [`workspace`] with its repository (and so the daemon's state folder and the worktrees) in
/// `parent`, another file system than `TMPDIR`'s.
fn workspace_on(parent: &std::path::Path, extra: &str) -> Workspace {
    with_one_formula(builder("one", extra).repo_in(parent).build())
}

fn builder(formula: &str, extra: &str) -> catalyst_testkit::WorkspaceBuilder {
    Workspace::builder()
        .config(&format!("default_formula = \"{formula}\"\n{extra}"))
        .keep(std::env::var_os("BENCH_KEEP").is_some())
}

fn with_one_formula(ws: Workspace) -> Workspace {
    ws.write_formula("one", ONE_STEP);
    ws
}

/// Submits `n` beads and waits until each one's worktree is removed (its merge done): how
/// long that took.
async fn run_beads(
    client: &mut catalyst::cli::client::Client,
    done: &mut Events,
    n: usize,
) -> Duration {
    let start = std::time::Instant::now();
    client
        .call(&catalyst::protocol::Method::Submit(beads("bead ", n)))
        .await
        .expect("submit");
    count_events(done, "every worktree removed", n, |_| true).await;
    start.elapsed()
}

/// `n` beads titled `<prefix><i>`.
fn beads(prefix: &str, n: usize) -> Vec<BeadInput> {
    (0..n)
        .map(|i| BeadInput {
            title: format!("{prefix}{i}"),
            ..Default::default()
        })
        .collect()
}

/// Reads events until `n` have matched `pred`, within [`WAIT`].
async fn count_events(events: &mut Events, what: &str, n: usize, pred: impl Fn(&Event) -> bool) {
    events
        .follow_until(what, WAIT, |seen| {
            seen.iter().filter(|e| pred(e)).count() >= n
        })
        .await;
}

/// Stops an in-process daemon at the end of a row.
async fn stop(mut daemon: TestDaemon) {
    daemon.stop().await;
}

/// The middle of `runs` (of an odd number of runs, the median).
fn median<T: PartialOrd + Copy>(runs: &[T]) -> T {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("figures that compare"));
    sorted[sorted.len() / 2]
}

/// Runs `a` and `b` `rounds` times each, alternating which goes first (a b, b a, a b, …), so
/// that neither always runs on what the other left behind: on a file system that slows as
/// files are freed (see [`fs`]), the one that always ran second was always the slower.
fn alternated<T>(
    rounds: usize,
    mut a: impl FnMut() -> T,
    mut b: impl FnMut() -> T,
) -> (Vec<T>, Vec<T>) {
    let (mut of_a, mut of_b) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            of_a.push(a());
            of_b.push(b());
        } else {
            of_b.push(b());
            of_a.push(a());
        }
    }
    (of_a, of_b)
}

/// Each run's time, as a row's detail line lists them: `1.20s, 1.31s, 1.25s`.
fn listed(runs: impl IntoIterator<Item = Duration>) -> String {
    runs.into_iter()
        .map(|d| format!("{d:.2?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// A target and whether this run met it, as a row prints it: `<= 25ms (met)`.
fn target(text: &str, met: bool) -> String {
    format!("{text} ({})", if met { "met" } else { "MISSED" })
}

fn row(name: &str, value: String, target: &str, baseline: &str, ratio: f64) {
    println!("{name:<48} {value:>14}  target {target:<16} {ratio:>7.2}x  baseline: {baseline}");
}

/// The runtime `catalystd` runs the daemon on (batch threads, as many as it has on this
/// machine: `daemon::sched::Threads`); the rows' clients share it.
fn runtime() -> tokio::runtime::Runtime {
    catalyst::daemon::sched::runtime().expect("runtime")
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: cargo bench --bench daemon -- [--quick] [ROW…]");
        println!("rows: {} (all when none is named)", row_names());
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    // The daemon in-process runs as `catalystd` runs.
    catalyst::daemon::without_transparent_huge_pages();
    let rows: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let Some(unknown) = rows
        .iter()
        .find(|r| !ROWS.iter().any(|(name, _)| name == *r))
    {
        eprintln!("unknown row `{unknown}`; rows: {}", row_names());
        std::process::exit(2);
    }
    let all = rows.is_empty();
    let want = |r: &str| all || rows.contains(&r);
    println!(
        "catalyst daemon benchmarks{}",
        if quick { " (quick)" } else { "" }
    );
    println!("{}", fs::header());
    let mut first = true;
    for (name, run) in ROWS {
        if !want(name) {
            continue;
        }
        if !first {
            fs::settle();
        }
        first = false;
        run(quick);
    }
}
