//! The dashboard's board: the work beads sorted into lanes ([`Lane`]) in one pass over the
//! store, with only each lane's first cards built, so a store of thousands of beads costs one
//! walk and a few dozen summaries.

use crate::domain::model::{Bead, Status};
use crate::domain::state::Lane;
use crate::protocol::{Approval, BoardAnswer, Card, LaneCards};

use super::super::Engine;
use super::blocked_reason;

impl Engine {
    /// Each lane's count, and its first `cards` beads: the ready ones in dispatch order, the
    /// others most recently changed first.
    pub(in crate::daemon::engine) fn board(&self, cards: usize) -> BoardAnswer {
        let state = self.store.state();
        let now = crate::daemon::clock::now();
        let mut lanes: [Vec<&Bead>; Lane::ALL.len()] = Default::default();
        for bead in state.beads().filter(|b| !b.is_step()) {
            lanes[index(state.lane(bead, now))].push(bead);
        }
        let lanes = Lane::ALL
            .into_iter()
            .zip(lanes)
            .map(|(lane, beads)| {
                let total = beads.len() as u64;
                let shown = match lane {
                    Lane::Ready => state.ready(now).take(cards).collect(),
                    _ => newest(beads, cards),
                };
                LaneCards {
                    cards: shown.into_iter().map(|b| self.card(b)).collect(),
                    lane,
                    total,
                }
            })
            .collect();
        BoardAnswer { lanes }
    }

    fn card(&self, bead: &Bead) -> Card {
        let approvals = self
            .store
            .state()
            .waiting_approval(bead.id.as_str())
            .map(|(step, meta)| Approval {
                held_files: meta
                    .hold
                    .filter(|h| !h.approved)
                    .map(|h| h.files)
                    .unwrap_or_default(),
                name: meta.step,
                step: step.id.clone(),
            })
            .collect();
        Card {
            approvals,
            bead: self.summary(bead),
            blocked_reason: (bead.status == Status::Blocked)
                .then(|| blocked_reason(bead))
                .flatten(),
        }
    }
}

fn index(lane: Lane) -> usize {
    Lane::ALL
        .iter()
        .position(|l| *l == lane)
        .expect("every lane is in Lane::ALL")
}

/// The `n` of `beads` changed last, the latest first, without sorting them all.
fn newest(mut beads: Vec<&Bead>, n: usize) -> Vec<&Bead> {
    let latest_first = |a: &&Bead, b: &&Bead| (&b.updated_at, &b.id).cmp(&(&a.updated_at, &a.id));
    if beads.len() > n && n > 0 {
        beads.select_nth_unstable_by(n - 1, latest_first);
    }
    beads.truncate(n);
    beads.sort_unstable_by(latest_first);
    beads
}
