//! What `ctl watch` shows, as a fold of the event stream over a first `status` and `list`:
//! work beads with their molecule's progress, running agents, waiting approvals and the
//! latest events. Pure: events in, lines out, so it is tested without a terminal.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use chrono::{DateTime, Utc};

use crate::domain::event::{Event, EventBody};
use crate::domain::id::BeadId;
use crate::domain::model::{is_cancel_reason, Status};
use crate::protocol::{BeadList, StatusAnswer};
use crate::render::{progress_bar, render_event};

/// Events kept for the bottom of the screen: as many as a tall terminal shows.
pub const HISTORY: usize = 200;

/// The fewest events shown, however short the terminal.
const MIN_EVENTS: usize = 3;

#[derive(Debug, Clone, PartialEq)]
struct Work {
    title: String,
    status: Status,
    /// Closed by `cancel`, not merged.
    cancelled: bool,
    /// Step id → status, for the progress bar.
    steps: BTreeMap<String, Status>,
    /// A molecule poured before we looked, whose steps we only know by count.
    known_done: u64,
    known_total: u64,
}

impl Work {
    fn new(title: String, status: Status) -> Work {
        Work {
            title,
            status,
            cancelled: false,
            steps: BTreeMap::new(),
            known_done: 0,
            known_total: 0,
        }
    }

    fn progress(&self) -> (u64, u64) {
        if self.steps.is_empty() {
            return (self.known_done, self.known_total);
        }
        let done = self
            .steps
            .values()
            .filter(|s| **s == Status::Closed)
            .count() as u64;
        (done, self.steps.len() as u64)
    }

    /// The step in progress (or blocked): what the bead is at.
    fn current(&self) -> Option<&str> {
        self.steps
            .iter()
            .find(|(_, s)| **s == Status::InProgress || **s == Status::Blocked)
            .map(|(id, _)| id.rsplit_once('.').map_or(id.as_str(), |(_, n)| n))
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Run {
    step: BeadId,
    attempt: u32,
    model: Option<String>,
    since: DateTime<Utc>,
}

/// The state on screen.
#[derive(Debug, Default)]
pub struct Board {
    pub seq: u64,
    /// Said under the header while there is something to say (the daemon went away).
    pub note: Option<String>,
    header: String,
    work: BTreeMap<String, Work>,
    owner: HashMap<String, String>,
    running: BTreeMap<String, Run>,
    approvals: BTreeSet<String>,
    recent: VecDeque<String>,
    /// The seq of the last event listed.
    listed: Option<u64>,
}

impl Board {
    /// The starting point: `status`, `list` of work beads and `list --steps` (everything).
    pub fn new(
        status: &StatusAnswer,
        work: &BeadList,
        all: &BeadList,
        now: DateTime<Utc>,
    ) -> Board {
        let mut board = Board {
            seq: status.seq,
            note: None,
            header: format!(
                "catalystd {} (pid {}) on {}",
                status.version,
                status.pid,
                status.workspace.display()
            ),
            ..Board::default()
        };
        for b in &work.beads {
            let w = Work {
                known_done: b.done,
                known_total: b.total,
                cancelled: b.close_reason.as_deref().is_some_and(is_cancel_reason),
                ..Work::new(b.title.clone(), b.status.clone())
            };
            board.work.insert(b.id.to_string(), w);
        }
        for s in &all.beads {
            let id = s.id.to_string();
            if board.work.contains_key(&id) {
                continue;
            }
            if let Some(owner) = board.owner_of(&id) {
                board.add_step(&owner, &id, s.status.clone());
            }
        }
        for r in &status.running {
            let elapsed = chrono::Duration::milliseconds(i64::try_from(r.elapsed_ms).unwrap_or(0));
            let run = Run {
                step: r.step.clone(),
                attempt: r.attempt,
                model: r.model.clone(),
                since: now - elapsed,
            };
            let bead = r.bead.as_ref().map(ToString::to_string).unwrap_or_default();
            board.running.insert(bead, run);
        }
        for w in &status.waiting_approval {
            board.approvals.insert(w.to_string());
        }
        board
    }

    /// The work bead a step id belongs to: the longest known work id followed by a `.`.
    fn owner_of(&self, step: &str) -> Option<String> {
        if let Some(owner) = self.owner.get(step) {
            return Some(owner.clone());
        }
        step.match_indices('.')
            .rev()
            .map(|(i, _)| &step[..i])
            .find(|w| self.work.contains_key(*w))
            .map(str::to_owned)
    }

    fn add_step(&mut self, work: &str, step: &str, status: Status) {
        self.owner.insert(step.to_owned(), work.to_owned());
        if let Some(w) = self.work.get_mut(work) {
            w.steps.insert(step.to_owned(), status);
        }
    }

    /// Folds one event. An event the starting point already covers is only listed: the view
    /// opens with the history before it.
    pub fn apply(&mut self, e: &Event) {
        if e.seq > self.seq {
            self.seq = e.seq;
            self.fold(e);
        } else if self.listed.is_some_and(|last| e.seq <= last) {
            return;
        }
        self.listed = Some(e.seq);
        self.recent.push_back(render_event(e));
        while self.recent.len() > HISTORY {
            self.recent.pop_front();
        }
    }

    fn fold(&mut self, e: &Event) {
        match &e.body {
            EventBody::BeadCreated { bead, .. } if !bead.is_step() => {
                let work = Work::new(bead.title.clone(), bead.status.clone());
                self.work.insert(bead.id.to_string(), work);
            }
            EventBody::MoleculePoured { bead, steps, .. } => {
                let bead = bead.to_string();
                if let Some(w) = self.work.get_mut(&bead) {
                    w.status = Status::InProgress;
                    w.steps.clear();
                }
                for s in steps {
                    self.add_step(&bead, s.id.as_str(), s.status.clone());
                }
            }
            EventBody::FixCreated { bead, step, .. } => {
                self.add_step(bead.as_str(), step.id.as_str(), step.status.clone());
            }
            EventBody::BeadStatus { id, status, reason } => {
                let id = id.to_string();
                if *status != Status::InProgress {
                    self.approvals.remove(&id);
                }
                if let Some(owner) = self.owner.get(&id).cloned() {
                    self.add_step(&owner, &id, status.clone());
                } else if let Some(w) = self.work.get_mut(&id) {
                    w.status = status.clone();
                    w.cancelled = reason.as_deref().is_some_and(is_cancel_reason);
                }
            }
            EventBody::StepDispatched {
                bead,
                step,
                attempt,
                model,
            } => self.dispatched(e, bead, step, *attempt, model.clone()),
            EventBody::StepFinished { bead, step, .. }
            | EventBody::StepInterrupted { bead, step, .. }
                if self
                    .running
                    .get(bead.as_str())
                    .is_some_and(|r| r.step == *step) =>
            {
                self.running.remove(bead.as_str());
            }
            EventBody::GateWaiting { step, .. } => {
                self.approvals.insert(step.to_string());
            }
            EventBody::GatePassed { step, .. } => {
                self.approvals.remove(step.as_str());
            }
            _ => {}
        }
    }

    fn dispatched(
        &mut self,
        e: &Event,
        bead: &BeadId,
        step: &BeadId,
        attempt: u32,
        model: Option<String>,
    ) {
        // The fold marks the step in progress without a `bead.status` of its own.
        if let Some(owner) = self.owner_of(step.as_str()) {
            self.add_step(&owner, step.as_str(), Status::InProgress);
        }
        let since = DateTime::parse_from_rfc3339(&e.ts.to_string())
            .map_or_else(|_| Utc::now(), |t| t.with_timezone(&Utc));
        let run = Run {
            step: step.clone(),
            attempt,
            model,
            since,
        };
        self.running.insert(bead.to_string(), run);
    }

    /// The screen, at most `height` lines of at most `width` characters.
    pub fn render(&self, now: DateTime<Utc>, width: usize, height: usize) -> Vec<String> {
        let mut lines = vec![
            format!("{}  seq {}", self.header, self.seq),
            match &self.note {
                Some(note) => format!("{note} · q or Ctrl-C to quit"),
                None => "q or Ctrl-C to quit".to_owned(),
            },
            String::new(),
        ];
        let order = |s: &Status| match s {
            Status::InProgress => 0,
            Status::Blocked => 1,
            Status::Open => 2,
            Status::Closed => 4,
            _ => 3,
        };
        let mut work: Vec<(&String, &Work)> = self.work.iter().collect();
        work.sort_by_key(|(id, w)| (order(&w.status), (*id).clone()));
        // Beads take up to half the lines the fixed parts leave; the events fill the rest.
        let approvals = if self.approvals.is_empty() {
            0
        } else {
            self.approvals.len() + 2
        };
        let free = height.saturating_sub(lines.len() + 5 + self.running.len() + approvals);
        let shown = work.len().min((free / 2).max(3));
        lines.push(format!("BEADS ({})", self.work.len()));
        for (id, w) in work.iter().take(shown) {
            let (done, total) = w.progress();
            let status = if w.status.is_closed() && w.cancelled {
                crate::domain::model::CANCELLED.to_owned()
            } else {
                w.status.to_string()
            };
            lines.push(format!(
                "  {id:<14} {:<12} {:<20} {:<10} {}",
                status,
                progress_bar(done, total, 10),
                w.current().unwrap_or(""),
                w.title
            ));
        }
        lines.push(String::new());
        lines.push(format!("RUNNING ({})", self.running.len()));
        for r in self.running.values() {
            let secs = (now - r.since).num_seconds().max(0);
            lines.push(format!(
                "  {:<28} attempt {:<3} {:<8} {}:{:02}",
                r.step,
                r.attempt,
                r.model.as_deref().unwrap_or("gate"),
                secs / 60,
                secs % 60
            ));
        }
        if !self.approvals.is_empty() {
            lines.push(String::new());
            lines.push(format!("WAITING FOR APPROVAL ({})", self.approvals.len()));
            for a in &self.approvals {
                lines.push(format!("  {a}   (ctl approve / ctl reject)"));
            }
        }
        lines.push(String::new());
        lines.push("EVENTS".to_owned());
        let room = height.saturating_sub(lines.len()).max(MIN_EVENTS);
        let skip = self.recent.len().saturating_sub(room);
        for e in self.recent.iter().skip(skip) {
            lines.push(format!("  {}", e.trim_start()));
        }
        lines.truncate(height);
        for line in &mut lines {
            if line.chars().count() > width {
                *line = line.chars().take(width).collect();
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::Bead;
    use crate::domain::time::Timestamp;
    use crate::protocol::BeadSummary;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:01:05Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn ts() -> Timestamp {
        Timestamp::parse("2026-01-01T00:00:00Z").unwrap()
    }

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
    }

    fn event(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            ts: ts(),
            more: false,
            body,
        }
    }

    fn status(seq: u64) -> StatusAnswer {
        StatusAnswer {
            active: vec![],
            beads: BTreeMap::new(),
            blocked: vec![],
            holds: vec![],
            model_pauses: vec![],
            paused: false,
            paused_models: vec![],
            pid: 7,
            ready: 0,
            running: vec![],
            seq,
            journal_syncs: 0,
            steps: 0,
            stopping: false,
            refused_reload: None,
            cluster_warning: None,
            budget_stop: None,
            spent_today_usd: 0.0,
            spent_total_usd: 0.0,
            storage_error: None,
            version: "0.1.0".into(),
            waiting_approval: vec![],
            held_merges: vec![],
            pull_requests: vec![],
            forge_paused: None,
            workspace: "/w".into(),
        }
    }

    fn summary(bead: &str, status: Status, done: u64, total: u64) -> BeadSummary {
        BeadSummary {
            close_reason: None,
            closed_at: None,
            cost_usd: None,
            created_at: ts(),
            current: None,
            done,
            formula: None,
            id: id(bead),
            priority: 2,
            running: None,
            status,
            stuck_on: Default::default(),
            title: "T".into(),
            total,
            waiting_for: vec![],
        }
    }

    fn list(beads: Vec<BeadSummary>) -> BeadList {
        BeadList { beads, total: None }
    }

    fn bead_status(seq: u64, bead: &str, status: Status) -> Event {
        event(
            seq,
            EventBody::BeadStatus {
                id: id(bead),
                status,
                reason: None,
            },
        )
    }

    #[test]
    fn events_move_the_progress_bar_and_the_running_list() {
        let mut board = Board::new(&status(1), &list(vec![]), &list(vec![]), now());
        let step = |s: &str| Bead::new(id(s), "x", ts());
        for e in [
            event(
                2,
                EventBody::BeadCreated {
                    bead: Box::new(Bead::new(id("cat-1"), "Hello", ts())),
                    by_person: true,
                },
            ),
            event(
                3,
                EventBody::MoleculePoured {
                    bead: id("cat-1"),
                    formula: "feature".into(),
                    steps: vec![step("cat-1.refine"), step("cat-1.implement")],
                },
            ),
            bead_status(4, "cat-1.refine", Status::Closed),
            event(
                5,
                EventBody::StepDispatched {
                    bead: id("cat-1"),
                    step: id("cat-1.implement"),
                    attempt: 1,
                    model: Some("sonnet".into()),
                },
            ),
            bead_status(5, "cat-1", Status::Blocked),
        ] {
            board.apply(&e);
        }
        let screen = board.render(now(), 100, 40).join("\n");
        assert!(screen.contains("[#####-----] 1/2"), "{screen}");
        let line = screen.lines().find(|l| l.starts_with("  cat-1 ")).unwrap();
        assert!(line.contains(" implement "), "the current step: {line}");
        assert!(
            screen.contains("in_progress"),
            "a replayed seq is ignored: {screen}"
        );
        assert!(
            screen.contains("cat-1.implement")
                && screen.contains("sonnet")
                && screen.contains("1:05"),
            "{screen}"
        );
        board.apply(&event(
            6,
            EventBody::StepFinished {
                bead: id("cat-1"),
                step: id("cat-1.implement"),
                attempt: 1,
                exit: "exit code 0".into(),
                duration_ms: 5,
                cost_usd: None,
                commit: None,
            },
        ));
        board.apply(&bead_status(7, "cat-1.implement", Status::Closed));
        let screen = board.render(now(), 100, 40).join("\n");
        assert!(
            screen.contains("[##########] 2/2") && screen.contains("RUNNING (0)"),
            "{screen}"
        );
    }

    #[test]
    fn a_cancelled_bead_reads_cancelled_not_closed() {
        let cancelled = BeadSummary {
            close_reason: Some("cancelled".into()),
            ..summary("cat-1", Status::Closed, 0, 0)
        };
        let mut board = Board::new(&status(1), &list(vec![cancelled]), &list(vec![]), now());
        let line = |board: &Board| {
            let screen = board.render(now(), 100, 40);
            screen
                .into_iter()
                .find(|l| l.starts_with("  cat-"))
                .unwrap()
        };
        assert!(line(&board).contains(" cancelled "), "{}", line(&board));
        board.apply(&bead_status(2, "cat-1", Status::Open));
        board.apply(&event(
            3,
            EventBody::BeadStatus {
                id: id("cat-1"),
                status: Status::Closed,
                reason: Some("merged into `main`".into()),
            },
        ));
        assert!(line(&board).contains(" closed "), "{}", line(&board));
        board.apply(&event(
            4,
            EventBody::BeadStatus {
                id: id("cat-1"),
                status: Status::Closed,
                reason: Some("cancelled: dropped".into()),
            },
        ));
        assert!(line(&board).contains(" cancelled "), "{}", line(&board));
    }

    #[test]
    fn the_first_screen_comes_from_status_and_list() {
        let status = StatusAnswer {
            running: vec![crate::protocol::RunningStep {
                attempt: 2,
                bead: Some(id("bd-1.2")),
                elapsed_ms: 3000,
                model: Some("haiku".into()),
                step: id("bd-1.2.review"),
                worker: None,
                waiting_for_slot: false,
                waiting_for_worker: false,
            }],
            waiting_approval: vec![id("bd-1.2.approve")],
            held_merges: vec![],
            ..status(9)
        };
        let work = list(vec![summary("bd-1.2", Status::InProgress, 1, 3)]);
        let all = list(vec![
            summary("bd-1.2", Status::InProgress, 1, 3),
            summary("bd-1.2.plan", Status::Closed, 0, 0),
            summary("bd-1.2.review", Status::InProgress, 0, 0),
            summary("bd-1.2.approve", Status::Open, 0, 0),
        ]);
        let board = Board::new(&status, &work, &all, now());
        let screen = board.render(now(), 100, 40).join("\n");
        assert!(
            screen.contains("[####------] 1/3") && screen.contains("review"),
            "{screen}"
        );
        assert!(
            screen.contains("attempt 2") && screen.contains("0:03"),
            "{screen}"
        );
        assert!(screen.contains("WAITING FOR APPROVAL (1)"), "{screen}");
        let small = board.render(now(), 20, 5);
        assert!(small.len() <= 5 && small.iter().all(|l| l.chars().count() <= 20));
    }
}
