//! A deterministic bead store for the benchmarks: the same beads and dependencies every run.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use catalyst::domain::event::{Event, EventBody};
use catalyst::domain::id::BeadId;
use catalyst::domain::model::{Bead, DepType, Dependency, Status};
use catalyst::domain::time::Timestamp;

use crate::Lcg;

pub fn id(i: u64) -> BeadId {
    BeadId::new(&format!("cat-{i:x}")).expect("generated ids are valid")
}

/// `n` beads with `2n` dependencies: each bead after the first few depends on two earlier ones,
/// one in five of them as a child of its parent, the rest as `blocks`. A third are closed.
pub fn workload(n: u64) -> Vec<Event> {
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
                by_person: true,
            },
        });
    }
    events
}

/// Writes `events` as a journal file, each line sealed with its checksum as the daemon writes
/// it.
pub fn write_events(path: &Path, events: &[Event]) {
    let mut w = BufWriter::new(File::create(path).expect("create journal"));
    let mut line = Vec::new();
    for e in events {
        line.clear();
        catalyst::daemon::store::journal::write_line(&mut line, e).expect("serialize");
        w.write_all(&line).expect("write");
    }
    w.flush().expect("flush");
}

/// Writes `events` as a journal of a daemon from before checksums: plain JSON lines.
pub fn write_events_unsealed(path: &Path, events: &[Event]) {
    let mut w = BufWriter::new(File::create(path).expect("create journal"));
    for e in events {
        serde_json::to_writer(&mut w, e).expect("serialize");
        w.write_all(b"\n").expect("write");
    }
    w.flush().expect("flush");
}

/// Writes a journal describing `n` beads (see [`workload`]).
pub fn write_journal(path: &Path, n: u64) {
    write_events(path, &workload(n));
}
