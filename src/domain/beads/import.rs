//! What an import does to a store, decided from data: beads not in the store are created as
//! they are (ids, timestamps, dependencies, comments and unknown fields kept), beads already
//! there unchanged are left alone, and beads that differ are reported, never overwritten (the
//! store's copy may be in the middle of a run).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::Bead;
use crate::domain::state::State;

/// The outcome of an import, for people and scripts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    pub created: usize,
    pub unchanged: usize,
    /// Beads whose id the store (or an earlier line) holds with other content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<BeadId>,
    /// Beads the store refuses, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<(BeadId, String)>,
}

impl ImportReport {
    pub fn add(&mut self, other: ImportReport) {
        self.created += other.created;
        self.unchanged += other.unchanged;
        self.conflicts.extend(other.conflicts);
        self.invalid.extend(other.invalid);
    }

    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty() && self.invalid.is_empty()
    }
}

/// The events that import `beads` into `state`, and the report.
pub fn plan(state: &State, beads: Vec<Bead>) -> (Vec<EventBody>, ImportReport) {
    let mut report = ImportReport::default();
    let mut events = Vec::new();
    let mut seen = HashSet::new();
    for bead in beads {
        if !seen.insert(bead.id.clone()) {
            report.conflicts.push(bead.id);
            continue;
        }
        if let Some(ours) = state.get(bead.id.as_str()) {
            if *ours == bead {
                report.unchanged += 1;
            } else {
                report.conflicts.push(bead.id);
            }
            continue;
        }
        let event = EventBody::BeadCreated {
            bead: Box::new(bead),
        };
        match state.check_group(std::iter::once(&event)) {
            Ok(()) => {
                report.created += 1;
                events.push(event);
            }
            Err(e) => {
                if let EventBody::BeadCreated { bead } = event {
                    report.invalid.push((bead.id, e.to_string()));
                }
            }
        }
    }
    (events, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::Event;
    use crate::domain::time::Timestamp;

    fn bead(id: &str, title: &str) -> Bead {
        let at = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        Bead::new(BeadId::new(id).unwrap(), title, at)
    }

    #[test]
    fn new_beads_are_created_existing_ones_compared() {
        let mut state = State::default();
        let (events, report) = plan(&state, vec![bead("bd-1", "one")]);
        assert_eq!(report.created, 1);
        for (seq, body) in (1..).zip(events) {
            let ts = Timestamp::parse("2026-01-01T00:00:01Z").unwrap();
            state
                .apply(Event {
                    seq,
                    ts,
                    more: false,
                    body,
                })
                .unwrap();
        }
        let mut bad = bead("bd-3", "bad");
        bad.priority = 9;
        let (events, report) = plan(
            &state,
            vec![
                bead("bd-1", "one"),
                bead("bd-2", "two"),
                bead("bd-2", "two again"),
                bead("bd-1", "changed"),
                bad,
            ],
        );
        assert_eq!(events.len(), 1);
        assert_eq!(report.created, 1);
        assert_eq!(report.unchanged, 1);
        assert_eq!(
            report.conflicts.len(),
            2,
            "a repeated id and a changed bead"
        );
        assert_eq!(report.invalid.len(), 1);
        assert!(report.invalid[0].1.contains("priority"), "{report:?}");
    }
}
