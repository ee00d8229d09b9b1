//! What an import does to a store, decided from data: beads not in the store are created as
//! they are (ids, timestamps, dependencies, comments and unknown fields kept), beads already
//! there unchanged are left alone, and beads that differ are reported, never overwritten (the
//! store's copy may be in the middle of a run).

use std::collections::{HashMap, HashSet};

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
    /// What was refused, with why: a bead the store refuses by its id, a line that is not a
    /// bead as `file:line`. The rest of the file is imported all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<(String, String)>,
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
    // Earlier lines' ids in lower case: the store refuses ids that differ only in case, and
    // the check against the store does not see the lines before this one.
    let mut folded = HashMap::new();
    for bead in beads {
        if !seen.insert(bead.id.clone()) {
            report.conflicts.push(bead.id);
            continue;
        }
        let lower = bead.id.as_str().to_ascii_lowercase();
        if let Some(twin) = folded.get(&lower) {
            let why = format!("bead `{twin}` (an earlier line) has the same id but for case");
            report.invalid.push((bead.id.to_string(), why));
            continue;
        }
        folded.insert(lower, bead.id.clone());
        if let Some(ours) = state.get(bead.id.as_str()) {
            if *ours == bead {
                report.unchanged += 1;
            } else {
                report.conflicts.push(bead.id);
            }
            continue;
        }
        // An import is a file's word, not a person's: its vars never choose a gate's command.
        let event = EventBody::BeadCreated {
            bead: Box::new(bead),
            by_person: false,
        };
        match state.check_group(std::iter::once(&event)) {
            Ok(()) => {
                report.created += 1;
                events.push(event);
            }
            Err(e) => {
                if let EventBody::BeadCreated { bead, .. } = event {
                    report.invalid.push((bead.id.to_string(), e.to_string()));
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
        let upper = bead("BD-4", "an upper-case id, as beads allows");
        let (events, report) = plan(
            &state,
            vec![
                bead("bd-1", "one"),
                bead("bd-2", "two"),
                bead("bd-2", "two again"),
                bead("bd-1", "changed"),
                bad,
                upper,
                bead("bd-4", "the same id but for case"),
                bead("BD-1", "the same id as the store's but for case"),
            ],
        );
        assert_eq!(events.len(), 2);
        assert_eq!(report.created, 2);
        assert_eq!(report.unchanged, 1);
        assert_eq!(
            report.conflicts.len(),
            2,
            "a repeated id and a changed bead"
        );
        let invalid: Vec<&str> = report.invalid.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(invalid, ["bd-3", "bd-4", "BD-1"], "{report:?}");
        assert!(report.invalid[0].1.contains("priority"), "{report:?}");
        assert!(report.invalid[1].1.contains("`BD-4`"), "{report:?}");
        assert!(report.invalid[2].1.contains("`bd-1`"), "{report:?}");
    }
}
