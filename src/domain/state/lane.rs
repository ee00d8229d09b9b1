//! Where a work bead stands for the people watching it: the board's columns. Every work bead is
//! in exactly one lane, decided by what would move it on (the dispatcher, its agents, a person,
//! another bead or time), from the same facts `status` and `ready` answer with.

use crate::domain::model::{Bead, Phase, Status, StepMeta};
use crate::domain::time::Timestamp;

use super::State;

/// A column of the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// In the ready list: the dispatcher starts it when a slot is free.
    Ready,
    /// Its molecule runs, and no step of it waits for a person.
    Running,
    /// A step of its molecule waits for a person's approval (a merge held because the change
    /// touches workflow files among them).
    NeedsPerson,
    /// It cannot start or go on by itself: its status is `blocked`, it waits for another bead,
    /// or it is deferred.
    Blocked,
    /// Closed: merged, cancelled or closed by hand.
    Done,
}

impl Lane {
    /// The lanes in the board's order.
    pub const ALL: [Lane; 5] = [
        Lane::Ready,
        Lane::Running,
        Lane::NeedsPerson,
        Lane::Blocked,
        Lane::Done,
    ];
}

impl State {
    /// The lane of work bead `bead` at `now`.
    pub fn lane(&self, bead: &Bead, now: Timestamp) -> Lane {
        match bead.status {
            Status::Closed => Lane::Done,
            Status::InProgress
                if self.waiting_approval(bead.id.as_str()).next().is_some()
                    || self.waiting_pull_request(bead.id.as_str()) =>
            {
                Lane::NeedsPerson
            }
            Status::InProgress => Lane::Running,
            _ if self.is_ready(bead.id.as_str(), now) => Lane::Ready,
            _ => Lane::Blocked,
        }
    }

    /// The steps of `work`'s molecule that wait for a person's approval, with their metadata.
    pub fn waiting_approval<'a>(
        &'a self,
        work: &str,
    ) -> impl Iterator<Item = (&'a Bead, StepMeta)> + 'a {
        self.steps(work)
            .filter(|s| s.status != Status::Closed)
            .filter_map(|s| Some((s, s.step_meta()?)))
            .filter(|(_, m)| m.phase == Some(Phase::WaitingApproval))
    }

    /// Whether `work`'s merge waits for people to review and merge its pull request.
    pub fn waiting_pull_request(&self, work: &str) -> bool {
        self.steps(work)
            .filter(|s| s.status != Status::Closed)
            .filter_map(|s| s.step_meta())
            .any(|m| matches!(m.phase, Some(Phase::PullRequest { .. })))
    }
}
