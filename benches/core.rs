//! Core benchmarks: journal replay, incremental readiness, full readiness recompute and the
//! STEP-RESULT parser, each printed with its target and its ratio to a baseline measured in
//! the same run.
//!
//! Run: `cargo bench --bench core` (add `-- --quick` for a smaller store while iterating).

use std::fs::File;
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use catalyst::event::{Event, EventBody};
use catalyst::id::BeadId;
use catalyst::model::{Bead, DepType, Dependency, Role, Status};
use catalyst::store::{State, Store, JOURNAL_FILE};
use catalyst::time::Timestamp;

/// A deterministic generator so every run builds the same store.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn id(i: u64) -> BeadId {
    BeadId::new(&format!("cat-{i:x}")).expect("generated ids are valid")
}

/// `n` beads with `2n` dependencies: each bead after the first few depends on two earlier ones,
/// one in five of them as a child of its parent, the rest as `blocks`. A third are closed.
fn workload(n: u64) -> Vec<Event> {
    let mut rng = Lcg(42);
    let base = Timestamp::parse("2026-01-01T00:00:00Z").expect("valid");
    let mut events = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut bead = Bead::new(id(i), format!("Bead number {i}"), base);
        bead.description = Some("Something to do, described in a sentence or two.".into());
        bead.priority = rng.below(5) as u8;
        bead.labels = vec!["bench".into()];
        if i >= 10 {
            for k in 0..2 {
                let target = rng.below(i);
                let t = if k == 0 && rng.below(5) == 0 {
                    DepType::ParentChild
                } else {
                    DepType::Blocks
                };
                if bead
                    .dependencies
                    .iter()
                    .any(|d| d.depends_on_id == id(target))
                {
                    continue;
                }
                bead.dependencies
                    .push(Dependency::new(id(i), id(target), t, base));
            }
        }
        if rng.below(3) == 0 {
            bead.status = Status::Closed;
            bead.closed_at = Some(base);
        }
        events.push(Event {
            seq: i + 1,
            ts: base,
            more: false,
            body: EventBody::BeadCreated {
                bead: Box::new(bead),
            },
        });
    }
    events
}

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
    {
        let mut w = BufWriter::new(File::create(&path).expect("create journal"));
        for e in &events {
            serde_json::to_writer(&mut w, e).expect("serialize");
            w.write_all(b"\n").expect("write");
        }
        w.flush().expect("flush");
    }
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

    // Readiness: one status change and the new head of the ready list, against a full recompute.
    let mut state = State::default();
    for e in events {
        state.apply(e).expect("apply");
    }
    let full = median(5, || timed(|| state.recompute_readiness()));
    let now = Timestamp::now();
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
                black_box(catalyst::result::parse(m, Some(Role::Review)).expect("valid"));
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
