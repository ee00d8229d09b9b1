//! Store tests: readiness rules as a table, the incremental index against a full recompute,
//! the journal's durability contract (replay, torn tails, corruption, compaction), and a
//! step's counters.

mod journal;
mod readiness;
mod steps;

use std::fs;

use super::*;
use crate::domain::event::BeadPatch;
use crate::domain::id::{BeadId, DepTarget};
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

/// A journal line as the daemon writes it (sealed with its checksum), from an event's JSON.
fn sealed(json: &str) -> Vec<u8> {
    let event: crate::domain::event::Event = serde_json::from_str(json).unwrap();
    let mut line = Vec::new();
    crate::daemon::store::journal::write_line(&mut line, &event).unwrap();
    line
}

fn created(b: Bead) -> EventBody {
    EventBody::BeadCreated {
        bead: Box::new(b),
        by_person: true,
    }
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
