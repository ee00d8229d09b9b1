//! Store tests: readiness rules as a table, the incremental index against a full recompute,
//! and the journal's durability contract (replay, torn tails, corruption, compaction).

use std::fs;

use super::*;
use crate::domain::event::BeadPatch;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, DepType, Dependency, Status};
use crate::domain::time::Timestamp;

fn id(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_utc(chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap())
}

fn bead(name: &str, deps: &[(&str, DepType)]) -> Bead {
    let mut b = Bead::new(id(name), name, at(0));
    for (target, t) in deps {
        b.dependencies
            .push(Dependency::new(id(name), id(target), t.clone(), at(0)));
    }
    b
}

fn created(b: Bead) -> EventBody {
    EventBody::BeadCreated { bead: Box::new(b) }
}

fn status(name: &str, s: Status) -> EventBody {
    EventBody::BeadStatus {
        id: id(name),
        status: s,
        reason: None,
    }
}

fn ready_ids(state: &State) -> Vec<String> {
    state
        .ready(at(1_000_000))
        .map(|b| b.id.to_string())
        .collect()
}

fn open_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    (dir, store)
}

#[test]
fn readiness_follows_bd_ready_rules() {
    use DepType::*;
    struct Case {
        name: &'static str,
        beads: Vec<Bead>,
        then: Vec<EventBody>,
        ready: &'static [&'static str],
    }
    let mut molecule = bead("mol", &[]);
    molecule.issue_type = "molecule".into();
    let mut deferred = bead("later", &[]);
    deferred.defer_until = Some(at(2_000_000));
    let mut past = bead("past", &[]);
    past.defer_until = Some(at(10));
    let cases = vec![
        Case {
            name: "an open blocker holds its dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![],
            ready: &["a"],
        },
        Case {
            name: "closing the blocker frees the dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![status("a", Status::Closed)],
            ready: &["b"],
        },
        Case {
            name: "conditional-blocks holds like blocks",
            beads: vec![bead("a", &[]), bead("b", &[("a", ConditionalBlocks)])],
            then: vec![],
            ready: &["a"],
        },
        Case {
            name: "related and discovered-from hold nothing",
            beads: vec![
                bead("a", &[]),
                bead("b", &[("a", Related)]),
                bead("c", &[("a", DiscoveredFrom)]),
            ],
            then: vec![],
            ready: &["a", "b", "c"],
        },
        Case {
            name: "a held parent holds its children and grandchildren",
            beads: vec![
                bead("x", &[]),
                bead("p", &[("x", Blocks)]),
                bead("c", &[("p", ParentChild)]),
                bead("g", &[("c", ParentChild)]),
            ],
            then: vec![],
            ready: &["x"],
        },
        Case {
            name: "closing the parent's blocker frees the whole family",
            beads: vec![
                bead("x", &[]),
                bead("p", &[("x", Blocks)]),
                bead("c", &[("p", ParentChild)]),
                bead("g", &[("c", ParentChild)]),
            ],
            then: vec![status("x", Status::Closed)],
            ready: &["c", "g", "p"],
        },
        Case {
            name: "a parent with status blocked holds its children",
            beads: vec![bead("p", &[]), bead("c", &[("p", ParentChild)])],
            then: vec![status("p", Status::Blocked)],
            ready: &[],
        },
        Case {
            name: "an in-progress parent does not hold its children",
            beads: vec![bead("p", &[]), bead("c", &[("p", ParentChild)])],
            then: vec![status("p", Status::InProgress)],
            ready: &["c"],
        },
        Case {
            name: "a blocker the store does not know holds nothing until it arrives",
            beads: vec![bead("b", &[("ghost", Blocks)])],
            then: vec![created(bead("ghost", &[]))],
            ready: &["ghost"],
        },
        Case {
            name: "molecule, gate and message types are never ready",
            beads: vec![
                molecule,
                {
                    let mut g = bead("g", &[]);
                    g.issue_type = "gate".into();
                    g
                },
                {
                    let mut m = bead("m", &[]);
                    m.issue_type = "message".into();
                    m
                },
            ],
            then: vec![],
            ready: &[],
        },
        Case {
            name: "defer_until in the future hides, in the past does not",
            beads: vec![deferred, past],
            then: vec![],
            ready: &["past"],
        },
        Case {
            name: "only open beads are ready",
            beads: vec![
                bead("a", &[]),
                bead("b", &[]),
                bead("c", &[]),
                bead("d", &[]),
            ],
            then: vec![
                status("a", Status::InProgress),
                status("b", Status::Deferred),
                status("c", Status::Other("pinned".into())),
            ],
            ready: &["d"],
        },
        Case {
            name: "an added dependency holds a ready bead",
            beads: vec![bead("a", &[]), bead("b", &[])],
            then: vec![EventBody::BeadUpdated {
                id: id("b"),
                patch: Box::new(BeadPatch {
                    add_dependencies: vec![Dependency::new(id("b"), id("a"), Blocks, at(0))],
                    ..Default::default()
                }),
            }],
            ready: &["a"],
        },
        Case {
            name: "reopening a closed blocker holds its dependent again",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![status("a", Status::Closed), status("a", Status::Open)],
            ready: &["a"],
        },
    ];
    for case in cases {
        let (_dir, mut store) = open_store();
        for b in case.beads {
            store.commit(vec![created(b)]).unwrap();
        }
        for e in case.then {
            store.commit(vec![e]).unwrap();
        }
        let mut got = ready_ids(store.state());
        got.sort();
        assert_eq!(got, case.ready, "{}", case.name);
        let incremental = store.state.graph_fingerprint();
        store.state.recompute_readiness();
        assert_eq!(
            store.state.graph_fingerprint(),
            incremental,
            "{}: incremental index differs from a recompute",
            case.name
        );
    }
}

#[test]
fn the_next_defer_is_the_earliest_future_one_among_ready_beads() {
    let (_dir, mut store) = open_store();
    let mut early = bead("early", &[]);
    early.defer_until = Some(at(100));
    let mut late = bead("late", &[]);
    late.defer_until = Some(at(200));
    let mut held = bead("held", &[("late", DepType::Blocks)]);
    held.defer_until = Some(at(50));
    store
        .commit(vec![created(early), created(late), created(held)])
        .unwrap();
    assert_eq!(
        store.state().next_defer(at(0)),
        Some(at(100)),
        "a held bead's defer does not count"
    );
    assert_eq!(store.state().next_defer(at(100)), Some(at(200)));
    assert_eq!(store.state().next_defer(at(200)), None);
    store.commit(vec![status("late", Status::Closed)]).unwrap();
    assert_eq!(store.state().next_defer(at(0)), Some(at(50)));
}

#[test]
fn ready_order_is_priority_then_age_then_id() {
    let (_dir, mut store) = open_store();
    let mut beads = Vec::new();
    for (name, prio, age) in [
        ("c", 2, 5),
        ("a", 2, 5),
        ("old", 2, 1),
        ("urgent", 0, 9),
        ("low", 4, 0),
    ] {
        let mut b = bead(name, &[]);
        b.priority = prio;
        b.created_at = at(age);
        beads.push(created(b));
    }
    store.commit(beads).unwrap();
    assert_eq!(ready_ids(store.state()), ["urgent", "old", "a", "c", "low"]);
}

/// A tiny deterministic generator, so the randomized test below replays the same way.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn incremental_readiness_matches_a_full_recompute_after_random_changes() {
    let (_dir, mut store) = open_store();
    let mut rng = Lcg(7);
    let n = 300;
    for i in 0..n {
        let mut deps = Vec::new();
        for _ in 0..rng.next(3) {
            let target = rng.next(n);
            if target < i {
                let t = match rng.next(3) {
                    0 => DepType::Blocks,
                    1 => DepType::ParentChild,
                    _ => DepType::ConditionalBlocks,
                };
                deps.push((format!("b{target}"), t));
            }
        }
        let deps: Vec<(&str, DepType)> =
            deps.iter().map(|(s, t)| (s.as_str(), t.clone())).collect();
        store
            .commit(vec![created(bead(&format!("b{i}"), &deps))])
            .unwrap();
    }
    let statuses = [
        Status::Open,
        Status::Closed,
        Status::Blocked,
        Status::InProgress,
    ];
    for round in 0..2000 {
        let target = format!("b{}", rng.next(n));
        let s = statuses[rng.next(statuses.len())].clone();
        store.commit(vec![status(&target, s)]).unwrap();
        if round % 250 == 0 {
            let incremental = store.state.graph_fingerprint();
            let ready = ready_ids(store.state());
            store.state.recompute_readiness();
            assert_eq!(
                store.state.graph_fingerprint(),
                incremental,
                "round {round}"
            );
            assert_eq!(ready_ids(store.state()), ready, "round {round}");
        }
    }
}

#[test]
fn ready_steps_of_a_molecule_follow_needs() {
    let (_dir, mut store) = open_store();
    store.commit(vec![created(bead("w", &[]))]).unwrap();
    let step = |name: &str, needs: &[&str]| {
        let mut deps: Vec<(&str, DepType)> = vec![("w", DepType::ParentChild)];
        deps.extend(needs.iter().map(|n| (*n, DepType::Blocks)));
        let mut b = bead(name, &deps);
        let mut meta = crate::domain::model::JsonMap::new();
        meta.insert(
            "catalyst".into(),
            serde_json::json!({"step": name, "role": "task", "bead": "w"}),
        );
        b.metadata = Some(meta);
        b
    };
    store
        .commit(vec![EventBody::MoleculePoured {
            bead: id("w"),
            formula: "f".into(),
            steps: vec![
                step("w.a", &[]),
                step("w.b", &["w.a"]),
                step("w.c", &["w.a"]),
                step("w.d", &["w.b", "w.c"]),
            ],
        }])
        .unwrap();
    let ready = |s: &Store| {
        s.state()
            .ready_steps("w")
            .map(|b| b.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(store.state().get("w").unwrap().status, Status::InProgress);
    assert!(
        ready_ids(store.state()).is_empty(),
        "steps are not work beads"
    );
    assert_eq!(ready(&store), ["w.a"]);
    store.commit(vec![status("w.a", Status::Closed)]).unwrap();
    assert_eq!(ready(&store), ["w.b", "w.c"]);
    store.commit(vec![status("w.b", Status::Closed)]).unwrap();
    assert_eq!(ready(&store), ["w.c"]);
    store.commit(vec![status("w", Status::Blocked)]).unwrap();
    assert!(ready(&store).is_empty(), "a blocked bead's steps wait");
    store
        .commit(vec![
            status("w", Status::InProgress),
            status("w.c", Status::Closed),
        ])
        .unwrap();
    assert_eq!(ready(&store), ["w.d"]);
    assert_eq!(store.state().steps("w").count(), 4);
}

#[test]
fn status_timestamps_follow_beads() {
    let (_dir, mut store) = open_store();
    store.commit(vec![created(bead("a", &[]))]).unwrap();
    store.commit(vec![status("a", Status::InProgress)]).unwrap();
    let started = store.state().get("a").unwrap().started_at.unwrap();
    let closed = store
        .commit(vec![EventBody::BeadStatus {
            id: id("a"),
            status: Status::Closed,
            reason: Some("done".into()),
        }])
        .unwrap();
    let a = store.state().get("a").unwrap();
    assert_eq!(a.closed_at, Some(closed[0].ts));
    assert_eq!(a.close_reason.as_deref(), Some("done"));
    store.commit(vec![status("a", Status::Open)]).unwrap();
    let a = store.state().get("a").unwrap();
    assert_eq!(
        (a.closed_at, a.close_reason.as_deref()),
        (None, None),
        "closed_at is set exactly when closed"
    );
    assert_eq!(a.started_at, Some(started));
}

#[test]
fn a_refused_group_writes_nothing() {
    let (dir, mut store) = open_store();
    store.commit(vec![created(bead("a", &[]))]).unwrap();
    let before = fs::read(dir.path().join(JOURNAL_FILE)).unwrap();
    let err = store
        .commit(vec![
            status("a", Status::Closed),
            status("nope", Status::Closed),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("`nope` does not exist"), "{err}");
    let err = store.commit(vec![created(bead("a", &[]))]).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(fs::read(dir.path().join(JOURNAL_FILE)).unwrap(), before);
    assert_eq!(store.state().get("a").unwrap().status, Status::Open);
}

#[test]
fn a_group_may_create_then_change_a_bead() {
    let (_dir, mut store) = open_store();
    let events = store
        .commit(vec![
            created(bead("a", &[])),
            status("a", Status::InProgress),
        ])
        .unwrap();
    assert_eq!(
        events.iter().map(|e| (e.seq, e.more)).collect::<Vec<_>>(),
        [(1, true), (2, false)]
    );
}

fn populated(dir: &Path) -> Store {
    let (mut store, _) = Store::open(dir).unwrap();
    store
        .commit(vec![
            created(bead("a", &[])),
            created(bead("b", &[("a", DepType::Blocks)])),
        ])
        .unwrap();
    store.commit(vec![status("a", Status::Closed)]).unwrap();
    store
}

fn export(state: &State) -> Vec<serde_json::Value> {
    state
        .beads()
        .map(|b| serde_json::to_value(b).unwrap())
        .collect()
}

#[test]
fn reopening_replays_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    let expected = export(store.state());
    drop(store);
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.replayed, 3);
    assert_eq!(export(store.state()), expected);
    assert_eq!(ready_ids(store.state()), ["b"]);
    let next = store.commit(vec![status("b", Status::InProgress)]).unwrap();
    assert_eq!(next[0].seq, 4, "numbering continues after replay");
}

#[test]
fn a_torn_last_line_is_dropped_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    drop(store);
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = fs::read(&path).unwrap();
    let good = bytes.len();
    bytes.extend_from_slice(br#"{"seq":4,"ts":"2026-01-01T00:00:00Z","type":"bead.sta"#);
    fs::write(&path, &bytes).unwrap();
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.torn, Some((4, (bytes.len() - good) as u64)));
    assert_eq!(
        fs::read(&path).unwrap().len(),
        good,
        "the torn tail is cut off"
    );
    let next = store.commit(vec![status("b", Status::InProgress)]).unwrap();
    assert_eq!(next[0].seq, 4);
    drop(store);
    assert!(
        Store::open(dir.path()).is_ok(),
        "the journal is whole again"
    );
}

#[test]
fn a_partly_written_group_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = fs::read(&path).unwrap();
    // The first line of a two-event group made it to disk, the second did not.
    bytes.extend_from_slice(b"{\"seq\":4,\"ts\":\"2026-01-01T00:00:00Z\",\"more\":true,\"type\":\"bead.status\",\"id\":\"b\",\"status\":\"closed\"}\n");
    fs::write(&path, &bytes).unwrap();
    let (store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.torn.map(|t| t.0), Some(4));
    assert_eq!(store.state().get("b").unwrap().status, Status::Open);
}

#[test]
fn a_corrupt_line_in_the_middle_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{this is not json";
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains(JOURNAL_FILE), "{err}");
}

#[test]
fn an_event_that_does_not_apply_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("{\"seq\":4,\"ts\":\"2026-01-01T00:00:00Z\",\"type\":\"bead.status\",\"id\":\"zzz\",\"status\":\"closed\"}\n");
    fs::write(&path, text).unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("line 4") && err.contains("`zzz` does not exist"),
        "{err}"
    );
}

#[test]
fn compaction_keeps_the_state_and_starts_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    store.compact().unwrap();
    assert_eq!(
        fs::metadata(dir.path().join(JOURNAL_FILE)).unwrap().len(),
        0
    );
    assert!(dir.path().join("journal.000000000001.jsonl").exists());
    store.commit(vec![status("b", Status::InProgress)]).unwrap();
    let expected = export(store.state());
    drop(store);
    let (store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.snapshot_seq, Some(3));
    assert_eq!(report.replayed, 1);
    assert_eq!(export(store.state()), expected);
    assert_eq!(store.state().seq(), 4);
    assert!(ready_ids(store.state()).is_empty());
}

#[test]
fn a_crash_between_snapshot_and_rotation_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    let expected = export(store.state());
    // The snapshot is written, the journal not yet rotated: its events are all in the snapshot.
    snapshot::write(&dir.path().join(SNAPSHOT_FILE), store.state()).unwrap();
    drop(store);
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.replayed, 0);
    assert_eq!(export(store.state()), expected);
    assert_eq!(
        store.commit(vec![status("b", Status::Closed)]).unwrap()[0].seq,
        4
    );
}

#[test]
fn snapshot_lines_are_beads_export_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    store.compact().unwrap();
    let text = fs::read_to_string(dir.path().join(SNAPSHOT_FILE)).unwrap();
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["seq"], 3);
    assert_eq!(header["beads"], 2);
    let b: Bead = serde_json::from_str(lines.nth(1).unwrap()).unwrap();
    assert_eq!(b.dependencies[0].depends_on_id.as_str(), "a");
}
