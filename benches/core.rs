//! Core benchmarks: journal replay, incremental readiness, full readiness recompute and the
//! STEP-RESULT parser, each printed with its target and its ratio to a baseline measured in
//! the same run.
//!
//! Run: `cargo bench --bench core` (add `-- --quick` for a smaller store while iterating).

use std::hint::black_box;
use std::time::{Duration, Instant};

use catalyst::daemon::store::{State, Store, JOURNAL_FILE};
use catalyst::domain::event::{Event, EventBody};
use catalyst::domain::model::{Role, Status};

/// Median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
    times.sort();
    times[times.len() / 2]
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn row(name: &str, value: Duration, target: Option<Duration>, baseline: (&str, Duration)) {
    let target = target.map_or(String::from("-"), |t| {
        let verdict = if value <= t { "met" } else { "MISSED" };
        format!("<= {t:?} ({verdict})")
    });
    let ratio = value.as_secs_f64() / baseline.1.as_secs_f64();
    let ratio = if ratio < 0.01 {
        format!("1/{:.0}", 1.0 / ratio)
    } else {
        format!("{ratio:.2}x")
    };
    println!(
        "{name:<42} {:>10} target {target:<20} {ratio:>8} of {} ({:.2?})",
        format!("{value:.2?}"),
        baseline.0,
        baseline.1
    );
}

/// The same allocator as `catalystd`, so replay is measured as the daemon does it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use catalyst_testkit::workload::{self, id, workload};
use catalyst_testkit::Lcg;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: u64 = if quick { 10_000 } else { 100_000 };
    println!(
        "catalyst core benchmarks: {n} beads, {} dependencies",
        2 * n
    );
    let events = workload(n);

    // Replay: Store::open on a journal describing n beads, against reading and parsing the same
    // lines into untyped JSON (the floor any replay pays).
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(JOURNAL_FILE);
    workload::write_events(&path, &events);
    let bytes = std::fs::metadata(&path).expect("journal").len();
    let floor = median(3, || {
        timed(|| {
            let text = std::fs::read_to_string(&path).expect("read");
            for line in text.lines() {
                black_box(serde_json::from_str::<serde_json::Value>(line).expect("json"));
            }
        })
    });
    let replay = median(3, || {
        timed(|| {
            let (store, _) = Store::open(dir.path()).expect("open");
            assert_eq!(store.state().len() as u64, n);
            black_box(store);
        })
    });
    println!("journal: {:.1} MB", bytes as f64 / 1e6);
    row(
        "replay journal (Store::open)",
        replay,
        (n == 100_000).then(|| Duration::from_secs(1)),
        ("parse the lines as untyped JSON", floor),
    );
    // The same journal as a daemon from before checksums wrote it: what verifying them costs.
    let older = tempfile::tempdir().expect("temp dir");
    workload::write_events_unsealed(&older.path().join(JOURNAL_FILE), &events);
    let unsealed = median(3, || {
        timed(|| {
            let (store, _) = Store::open(older.path()).expect("open");
            black_box(store);
        })
    });
    row(
        "replay journal without checksums",
        unsealed,
        None,
        ("replay with checksums", replay),
    );

    // Readiness: one status change and the new head of the ready list, against a full recompute.
    let mut state = State::default();
    for e in events {
        state.apply(e).expect("apply");
    }
    let full = median(5, || timed(|| state.recompute_readiness()));
    let now = catalyst::daemon::clock::now();
    let mut rng = Lcg(9);
    let mut one_change = Vec::new();
    for seq in n + 1..=n + 1001 {
        let target = id(rng.below(n));
        let status = if rng.below(2) == 0 {
            Status::Closed
        } else {
            Status::Open
        };
        let event = Event {
            seq,
            ts: now,
            more: false,
            body: EventBody::BeadStatus {
                id: target,
                status,
                reason: None,
            },
        };
        one_change.push(timed(|| {
            state.apply(event).expect("apply");
            black_box(state.ready(now).take(10).count());
        }));
    }
    one_change.sort();
    let p50 = one_change[one_change.len() / 2];
    let p99 = one_change[one_change.len() * 99 / 100];
    row(
        "ready set after one status change (p50)",
        p50,
        None,
        ("full recompute", full),
    );
    row(
        "ready set after one status change (p99)",
        p99,
        (n == 100_000).then(|| Duration::from_millis(1)),
        ("full recompute", full),
    );
    let scan = median(5, || {
        timed(|| {
            black_box(state.beads().filter(|b| b.status == Status::Open).count());
        })
    });
    row(
        "full readiness recompute",
        full,
        (n == 100_000).then(|| Duration::from_millis(50)),
        ("one pass counting open beads", scan),
    );

    // The STEP-RESULT parser on 10,000 final messages, against finding the block's start marker.
    let messages: Vec<String> = (0..10_000)
        .map(|i| {
            format!(
                "I reviewed the change in detail. {}\n\n```\n---STEP-RESULT---\nSTATUS: DONE\nVERDICT: {}\nSUMMARY: message {i}\nINSTRUCTIONS:\n- fix the thing in file{i}.rs:45\n- add a test\n---END-RESULT---\n```\n",
                "Everything reads well. ".repeat(20),
                if i % 2 == 0 { "APPROVED" } else { "REJECTED" }
            )
        })
        .collect();
    let find = median(5, || {
        timed(|| {
            for m in &messages {
                black_box(m.rfind("---STEP-RESULT---"));
            }
        })
    });
    let parse = median(5, || {
        timed(|| {
            for m in &messages {
                black_box(catalyst::domain::result::parse(m, Some(Role::Review)).expect("valid"));
            }
        })
    });
    row(
        "parse 10,000 final messages",
        parse,
        None,
        ("rfind the start marker in each", find),
    );
}
