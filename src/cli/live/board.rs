//! What `ctl watch` shows, as a fold of the event stream over a first `status` and `list`:
//! work beads with their molecule's progress, running agents, waiting approvals and the
//! latest events. Pure: events in, lines out, so it is tested without a terminal.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cli::render::{progress_bar, render_event};

/// Events kept for the bottom of the screen.
const RECENT: usize = 8;

#[derive(Debug, Default, Clone, PartialEq)]
struct Work {
    title: String,
    status: String,
    /// Step id → status, for the progress bar.
    steps: BTreeMap<String, String>,
    /// A molecule poured before we looked, whose steps we only know by count.
    known_done: u64,
    known_total: u64,
}

impl Work {
    fn progress(&self) -> (u64, u64) {
        if self.steps.is_empty() {
            return (self.known_done, self.known_total);
        }
        let done = self.steps.values().filter(|s| *s == "closed").count() as u64;
        (done, self.steps.len() as u64)
    }

    /// The step in progress (or blocked): what the bead is at.
    fn current(&self) -> Option<&str> {
        self.steps
            .iter()
            .find(|(_, s)| *s == "in_progress" || *s == "blocked")
            .map(|(id, _)| id.rsplit_once('.').map_or(id.as_str(), |(_, n)| n))
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Run {
    step: String,
    attempt: u64,
    model: Option<String>,
    since: DateTime<Utc>,
}

/// The state on screen.
#[derive(Debug, Default)]
pub struct Board {
    pub seq: u64,
    header: String,
    work: BTreeMap<String, Work>,
    owner: HashMap<String, String>,
    running: BTreeMap<String, Run>,
    approvals: BTreeSet<String>,
    recent: VecDeque<String>,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_owned()
}

impl Board {
    /// The starting point: `status`, `list` of work beads and `list --steps` (everything).
    pub fn new(status: &Value, work: &Value, all: &Value, now: DateTime<Utc>) -> Board {
        let mut board = Board {
            seq: status["seq"].as_u64().unwrap_or(0),
            header: format!(
                "catalystd {} (pid {}) on {}",
                text(&status["version"]),
                status["pid"],
                text(&status["workspace"])
            ),
            ..Board::default()
        };
        for b in work["beads"].as_array().into_iter().flatten() {
            board.work.insert(
                text(&b["id"]),
                Work {
                    title: text(&b["title"]),
                    status: text(&b["status"]),
                    known_done: b["done"].as_u64().unwrap_or(0),
                    known_total: b["total"].as_u64().unwrap_or(0),
                    ..Work::default()
                },
            );
        }
        for s in all["beads"].as_array().into_iter().flatten() {
            let id = text(&s["id"]);
            if board.work.contains_key(&id) {
                continue;
            }
            if let Some(owner) = board.owner_of(&id) {
                board.add_step(&owner, &id, &text(&s["status"]));
            }
        }
        for r in status["running"].as_array().into_iter().flatten() {
            let elapsed = chrono::Duration::milliseconds(r["elapsed_ms"].as_i64().unwrap_or(0));
            board.running.insert(
                text(&r["bead"]),
                Run {
                    step: text(&r["step"]),
                    attempt: r["attempt"].as_u64().unwrap_or(0),
                    model: r["model"].as_str().map(str::to_owned),
                    since: now - elapsed,
                },
            );
        }
        for w in status["waiting_approval"].as_array().into_iter().flatten() {
            board.approvals.insert(text(w));
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

    fn add_step(&mut self, work: &str, step: &str, status: &str) {
        self.owner.insert(step.to_owned(), work.to_owned());
        if let Some(w) = self.work.get_mut(work) {
            w.steps.insert(step.to_owned(), status.to_owned());
        }
    }

    /// Folds one event.
    pub fn apply(&mut self, e: &Value) {
        if let Some(seq) = e["seq"].as_u64() {
            if seq <= self.seq {
                return;
            }
            self.seq = seq;
        }
        let bead = text(&e["bead"]);
        match e["type"].as_str().unwrap_or("") {
            "bead.created" => {
                let b = &e["bead"];
                if b["metadata"]["catalyst"].is_null() {
                    self.work.insert(
                        text(&b["id"]),
                        Work {
                            title: text(&b["title"]),
                            status: text(&b["status"]),
                            ..Work::default()
                        },
                    );
                }
            }
            "molecule.poured" => {
                if let Some(w) = self.work.get_mut(&bead) {
                    w.status = "in_progress".into();
                    w.steps.clear();
                }
                for s in e["steps"].as_array().into_iter().flatten() {
                    self.add_step(&bead, &text(&s["id"]), &text(&s["status"]));
                }
            }
            "fix.created" => {
                let s = &e["step"];
                self.add_step(&bead, &text(&s["id"]), &text(&s["status"]));
            }
            "bead.status" => {
                let id = text(&e["id"]);
                let status = text(&e["status"]);
                if status != "in_progress" {
                    self.approvals.remove(&id);
                }
                if let Some(owner) = self.owner.get(&id).cloned() {
                    self.add_step(&owner, &id, &status);
                } else if let Some(w) = self.work.get_mut(&id) {
                    w.status = status;
                }
            }
            "step.dispatched" => {
                // The fold marks the step in progress without a `bead.status` of its own.
                let step = text(&e["step"]);
                if let Some(owner) = self.owner_of(&step) {
                    self.add_step(&owner, &step, "in_progress");
                }
                let since = e["ts"]
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
                self.running.insert(
                    bead,
                    Run {
                        step: text(&e["step"]),
                        attempt: e["attempt"].as_u64().unwrap_or(0),
                        model: e["model"].as_str().map(str::to_owned),
                        since,
                    },
                );
            }
            "step.finished" | "step.interrupted"
                if self
                    .running
                    .get(&bead)
                    .is_some_and(|r| r.step == text(&e["step"])) =>
            {
                self.running.remove(&bead);
            }
            "gate.waiting" => {
                self.approvals.insert(text(&e["step"]));
            }
            "gate.passed" => {
                self.approvals.remove(&text(&e["step"]));
            }
            _ => {}
        }
        self.recent.push_back(render_event(e));
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    /// The screen, at most `height` lines of at most `width` characters.
    pub fn render(&self, now: DateTime<Utc>, width: usize, height: usize) -> Vec<String> {
        let mut lines = vec![
            format!("{}  seq {}", self.header, self.seq),
            "q or Ctrl-C to quit".to_owned(),
            String::new(),
        ];
        let order = |s: &str| match s {
            "in_progress" => 0,
            "blocked" => 1,
            "open" => 2,
            "closed" => 4,
            _ => 3,
        };
        let mut work: Vec<(&String, &Work)> = self.work.iter().collect();
        work.sort_by_key(|(id, w)| (order(&w.status), (*id).clone()));
        let budget = height.saturating_sub(lines.len() + 6 + self.running.len() + RECENT);
        lines.push(format!("BEADS ({})", self.work.len()));
        for (id, w) in work.iter().take(budget.max(3)) {
            let (done, total) = w.progress();
            lines.push(format!(
                "  {id:<14} {:<12} {:<20} {:<10} {}",
                w.status,
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
        for e in &self.recent {
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
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:01:05Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn events_move_the_progress_bar_and_the_running_list() {
        let status = json!({"seq": 1, "pid": 7, "version": "0.1.0", "workspace": "/w", "running": [], "waiting_approval": []});
        let mut board = Board::new(&status, &json!({"beads": []}), &json!({"beads": []}), now());
        let step =
            |id: &str| json!({"id": id, "status": "open", "metadata": {"catalyst": {"step": "x"}}});
        for e in [
            json!({"seq": 2, "type": "bead.created", "bead": {"id": "cat-1", "title": "Hello", "status": "open"}}),
            json!({"seq": 3, "type": "molecule.poured", "bead": "cat-1", "formula": "feature",
                   "steps": [step("cat-1.refine"), step("cat-1.implement")]}),
            json!({"seq": 4, "type": "bead.status", "id": "cat-1.refine", "status": "closed"}),
            json!({"seq": 5, "type": "step.dispatched", "ts": "2026-01-01T00:00:00Z", "bead": "cat-1",
                   "step": "cat-1.implement", "attempt": 1, "model": "sonnet"}),
            json!({"seq": 5, "type": "bead.status", "id": "cat-1", "status": "blocked"}),
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
        board.apply(&json!({"seq": 6, "type": "step.finished", "bead": "cat-1", "step": "cat-1.implement", "attempt": 1}));
        board.apply(
            &json!({"seq": 7, "type": "bead.status", "id": "cat-1.implement", "status": "closed"}),
        );
        let screen = board.render(now(), 100, 40).join("\n");
        assert!(
            screen.contains("[##########] 2/2") && screen.contains("RUNNING (0)"),
            "{screen}"
        );
    }

    #[test]
    fn the_first_screen_comes_from_status_and_list() {
        let status = json!({"seq": 9, "running": [{"bead": "bd-1.2", "step": "bd-1.2.review", "attempt": 2, "model": "haiku", "elapsed_ms": 3000}],
                            "waiting_approval": ["bd-1.2.approve"]});
        let work = json!({"beads": [{"id": "bd-1.2", "title": "T", "status": "in_progress", "done": 1, "total": 3}]});
        let all = json!({"beads": [
            {"id": "bd-1.2", "status": "in_progress"},
            {"id": "bd-1.2.plan", "status": "closed"},
            {"id": "bd-1.2.review", "status": "in_progress"},
            {"id": "bd-1.2.approve", "status": "open"},
        ]});
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
