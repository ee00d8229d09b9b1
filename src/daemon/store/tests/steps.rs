//! A step's own counters as its events leave them.

use super::readiness::poured;
use super::*;

/// `ctl show` counted every run of a step as an attempt, also those that counted none: a
/// requeue after a usage limit (`step.retry` not counted) or an interruption. A step's
/// `uncounted` is how many of its `attempts` were those; counted and manual retries are not.
#[test]
fn a_step_counts_the_attempts_that_counted_none() {
    let (_dir, mut store) = open_store();
    store
        .commit(vec![created(bead("w", &[])), poured("w", &["w.a"])])
        .unwrap();
    let dispatched = |attempt| EventBody::StepDispatched {
        bead: id("w"),
        step: id("w.a"),
        attempt,
        model: None,
    };
    let retry = |counted, manual| EventBody::StepRetry {
        bead: id("w"),
        step: id("w.a"),
        reason: "again".into(),
        counted,
        manual,
        not_before: None,
    };
    let interrupted = EventBody::StepInterrupted {
        bead: id("w"),
        step: id("w.a"),
        attempt: 2,
        reset_to: None,
    };
    let meta = |s: &Store| {
        let m = s.state().get("w.a").unwrap().step_meta().unwrap();
        (m.attempts, m.uncounted)
    };
    for (event, want) in [
        (dispatched(1), (1, 0)),
        (retry(false, false), (1, 1)),
        (dispatched(2), (2, 1)),
        (interrupted, (2, 2)),
        (dispatched(3), (3, 2)),
        (retry(true, false), (3, 2)),
        (retry(false, true), (3, 2)),
    ] {
        let what = event.kind();
        store.commit(vec![event]).unwrap();
        assert_eq!(meta(&store), want, "after {what}");
    }
}
