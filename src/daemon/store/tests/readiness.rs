//! Readiness: the rules as a table of cases, the order of ready beads, and the incremental
//! index against a full recompute.

use super::*;

/// Beads committed in order, then more events; the beads ready after them.
struct Case {
    name: &'static str,
    beads: Vec<Bead>,
    then: Vec<EventBody>,
    ready: &'static [&'static str],
}

/// Cases about dependencies: blocking types, parents and unknown blockers.
fn dependency_cases() -> Vec<Case> {
    use DepType::*;
    vec![
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
            name: "a blocker in another project (`external:…`) holds nothing",
            beads: vec![{
                let mut b = bead("b", &[]);
                let mut dep = Dependency::new(id("b"), id("x"), Blocks, at(0));
                dep.depends_on_id = DepTarget::parse("external:billing:BIL-7").unwrap();
                b.dependencies.push(dep);
                b
            }],
            then: vec![],
            ready: &["b"],
        },
        Case {
            name: "a blocker the store does not know holds nothing until it arrives",
            beads: vec![bead("b", &[("ghost", Blocks)])],
            then: vec![created(bead("ghost", &[]))],
            ready: &["ghost"],
        },
    ]
}

/// Cases about the beads themselves: types, deferral, status and changes after creation.
fn bead_cases() -> Vec<Case> {
    use DepType::*;
    let mut molecule = bead("mol", &[]);
    molecule.issue_type = "molecule".into();
    let mut deferred = bead("later", &[]);
    deferred.defer_until = Some(at(2_000_000));
    let mut past = bead("past", &[]);
    past.defer_until = Some(at(10));
    vec![
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
            name: "a cancelled blocker keeps its dependent waiting",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![closed("a", "cancelled: not needed")],
            ready: &[],
        },
        Case {
            name: "a blocker closed before it was poured frees its dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![closed("a", "done by hand")],
            ready: &["b"],
        },
        Case {
            name: "a blocker closed halfway through its molecule keeps its dependent waiting",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![
                poured("a", &["a.implement", "a.merge"]),
                closed("a.implement", "implemented"),
                closed("a", "closed by a person"),
            ],
            ready: &[],
        },
        Case {
            name: "a blocker whose molecule finished (merged) frees its dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![
                poured("a", &["a.implement", "a.merge"]),
                closed("a.implement", "implemented"),
                closed("a.merge", "merged into `main`"),
                closed("a", "merged into `main`"),
            ],
            ready: &["b"],
        },
        Case {
            name: "the last step of a closed blocker closing frees the dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![
                poured("a", &["a.merge"]),
                closed("a", "closed by a person"),
                closed("a.merge", "merged into `main`"),
            ],
            ready: &["b"],
        },
        Case {
            name: "dropping the dependency on a cancelled blocker frees the dependent",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks), ("a", Related)])],
            then: vec![
                closed("a", "cancelled"),
                EventBody::BeadUpdated {
                    id: id("b"),
                    patch: Box::new(BeadPatch {
                        drop_after: vec![id("a")],
                        ..Default::default()
                    }),
                },
            ],
            ready: &["b"],
        },
        Case {
            name: "reopening a closed blocker holds its dependent again",
            beads: vec![bead("a", &[]), bead("b", &[("a", Blocks)])],
            then: vec![status("a", Status::Closed), status("a", Status::Open)],
            ready: &["a"],
        },
    ]
}

fn closed(name: &str, reason: &str) -> EventBody {
    EventBody::BeadStatus {
        id: id(name),
        status: Status::Closed,
        reason: Some(reason.into()),
    }
}

/// A step bead of `work`'s molecule: a `parent-child` edge and catalyst's step metadata.
fn step_bead(work: &str, name: &str, needs: &[&str]) -> Bead {
    let mut deps: Vec<(&str, DepType)> = vec![(work, DepType::ParentChild)];
    deps.extend(needs.iter().map(|n| (*n, DepType::Blocks)));
    let mut b = bead(name, &deps);
    let mut meta = crate::domain::model::JsonMap::new();
    meta.insert(
        "catalyst".into(),
        serde_json::json!({"step": name, "role": "task", "bead": work}),
    );
    b.metadata = Some(meta);
    b
}

pub(super) fn poured(work: &str, steps: &[&str]) -> EventBody {
    EventBody::MoleculePoured {
        bead: id(work),
        formula: "f".into(),
        steps: steps.iter().map(|s| step_bead(work, s, &[])).collect(),
    }
}

#[test]
fn readiness_follows_bd_ready_rules() {
    let cases = dependency_cases().into_iter().chain(bead_cases());
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
        assert_eq!(
            store.state().ready_count(at(1_000_000)),
            got.len(),
            "{}: the count `status` gives",
            case.name
        );
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
    assert_eq!(
        store.state().ready_count(at(0)),
        0,
        "both deferred, the third held"
    );
    assert_eq!(store.state().ready_count(at(100)), 1);
    assert_eq!(store.state().ready_count(at(200)), 2);
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

#[test]
fn a_bead_waits_for_its_open_blockers_only() {
    let (_dir, mut store) = open_store();
    store
        .commit(vec![
            created(bead("first", &[])),
            created(bead("second", &[])),
            created(bead("parent", &[])),
            created(bead(
                "after",
                &[
                    ("first", DepType::Blocks),
                    ("second", DepType::ConditionalBlocks),
                    ("parent", DepType::ParentChild),
                    ("unknown", DepType::Blocks),
                ],
            )),
        ])
        .unwrap();
    let waits = |store: &Store| -> Vec<String> {
        store
            .state()
            .open_blockers("after")
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(waits(&store), ["first", "second"]);
    store.commit(vec![status("first", Status::Closed)]).unwrap();
    assert_eq!(waits(&store), ["second"]);
    assert!(store.state().open_blockers("nope").next().is_none());
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
        let mut b = bead(&format!("b{i}"), &deps);
        // Some beads are steps of an earlier one, whose doneness then waits for them.
        if i > 0 && rng.next(4) == 0 {
            let work = format!("b{}", rng.next(i));
            b = step_bead(&work, &format!("b{i}"), &[]);
            b.dependencies.extend(deps.iter().map(|(target, t)| {
                Dependency::new(id(&format!("b{i}")), id(target), t.clone(), at(0))
            }));
        }
        store.commit(vec![created(b)]).unwrap();
    }
    for round in 0..2000 {
        let target = format!("b{}", rng.next(n));
        let event = match rng.next(5) {
            0 => status(&target, Status::Open),
            1 => status(&target, Status::Closed),
            2 => status(&target, Status::Blocked),
            3 => status(&target, Status::InProgress),
            _ => closed(&target, "cancelled: dropped"),
        };
        store.commit(vec![event]).unwrap();
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
    let step = |name: &str, needs: &[&str]| step_bead("w", name, needs);
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
fn each_work_bead_is_in_the_lane_of_what_moves_it_on() {
    use crate::domain::state::Lane;
    let (_dir, mut store) = open_store();
    let mut deferred = bead("deferred", &[]);
    deferred.defer_until = Some(at(2_000_000));
    let mut waiting = step_bead("approval", "approval.merge", &[]);
    let meta = waiting.metadata.as_mut().unwrap();
    meta["catalyst"]["phase"] = serde_json::json!({"phase": "waiting_approval"});
    store
        .commit(vec![
            created(bead("ready", &[])),
            created(bead("running", &[])),
            created(bead("approval", &[])),
            created(bead("blocked", &[])),
            created(bead("after", &[("running", DepType::Blocks)])),
            created(deferred),
            created(bead("done", &[])),
            created(bead("cancelled", &[])),
            poured("running", &["running.implement"]),
            EventBody::MoleculePoured {
                bead: id("approval"),
                formula: "f".into(),
                steps: vec![step_bead("approval", "approval.review", &[]), waiting],
            },
            status("approval.review", Status::Closed),
            status("blocked", Status::Blocked),
            status("done", Status::Closed),
            closed("cancelled", crate::domain::model::CANCELLED),
        ])
        .unwrap();
    let cases = [
        ("ready", Lane::Ready),
        ("running", Lane::Running),
        ("approval", Lane::NeedsPerson),
        ("blocked", Lane::Blocked),
        ("after", Lane::Blocked),
        ("deferred", Lane::Blocked),
        ("done", Lane::Done),
        ("cancelled", Lane::Done),
    ];
    let state = store.state();
    for (name, lane) in cases {
        assert_eq!(
            state.lane(state.get(name).unwrap(), at(1_000_000)),
            lane,
            "{name}"
        );
    }
    let waiting: Vec<String> = state
        .waiting_approval("approval")
        .map(|(step, _)| step.id.to_string())
        .collect();
    assert_eq!(waiting, ["approval.merge"]);
}
