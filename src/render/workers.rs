//! `ctl workers`: the workers on other machines, one per line.

use super::style::{Paint, BOLD, DIM};
use super::table::{Cell, Table};
use crate::protocol::WorkersAnswer;

/// `NAME  SLOTS  MODELS  RUNNING  SEEN`, or why there are none.
pub fn render_workers(answer: &WorkersAnswer, paint: Paint) -> String {
    if !answer.cluster {
        return "no workers: agents run on this machine (`[cluster]` is off)\n".into();
    }
    if answer.workers.is_empty() {
        return "no workers have said they are there in the last 30 s\n".into();
    }
    let mut table = Table::new();
    table.row(
        ["worker", "slots", "models", "running", "seen"]
            .into_iter()
            .map(|h| Cell::new(h, BOLD))
            .collect(),
    );
    for w in &answer.workers {
        let models = if w.models.is_empty() {
            "all".to_owned()
        } else {
            w.models.join(",")
        };
        let running: Vec<String> = w.running.iter().map(ToString::to_string).collect();
        table.row(vec![
            Cell::plain(&w.name),
            Cell::plain(format!("{}/{}", w.running.len(), w.slots)),
            Cell::plain(models),
            Cell::plain(running.join(" ")),
            Cell::new(format!("{:.1}s ago", w.seen_ms as f64 / 1000.0), DIM),
        ]);
    }
    let mut text = table.render(paint);
    for w in &answer.workers {
        if let Some(trouble) = &w.trouble {
            text.push_str(&format!("{}: takes no orders for now: {trouble}\n", w.name));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::BeadId;
    use crate::protocol::WorkerView;

    #[test]
    fn a_line_per_worker_with_its_load() {
        let answer = WorkersAnswer {
            cluster: true,
            workers: vec![WorkerView {
                name: "w1".into(),
                slots: 2,
                models: vec![],
                running: vec![BeadId::new("cat-1.implement").expect("id")],
                seen_ms: 1500,
                trouble: None,
            }],
        };
        let text = render_workers(&answer, Paint::OFF);
        assert!(!text.contains("no orders"), "{text}");
        assert!(text.contains("w1"), "{text}");
        assert!(text.contains("1/2") && text.contains("all"), "{text}");
        assert!(
            text.contains("cat-1.implement") && text.contains("1.5s ago"),
            "{text}"
        );
        let off = WorkersAnswer {
            cluster: false,
            workers: vec![],
        };
        assert!(render_workers(&off, Paint::OFF).contains("[cluster]"));
    }

    #[test]
    fn a_worker_that_cannot_prepare_attempts_says_why() {
        let answer = WorkersAnswer {
            cluster: true,
            workers: vec![WorkerView {
                name: "w2".into(),
                slots: 1,
                models: vec![],
                running: vec![],
                seen_ms: 200,
                trouble: Some("cannot prepare the worktree: disk full".into()),
            }],
        };
        let text = render_workers(&answer, Paint::OFF);
        assert!(
            text.contains("w2: takes no orders for now: cannot prepare the worktree: disk full"),
            "{text}"
        );
    }
}
