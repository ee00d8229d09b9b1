//! `ctl list` and `ctl ready`: one aligned row per bead.

use std::collections::BTreeMap;

use super::progress_bar;
use super::style::{self, Paint, BOLD, DIM};
use super::table::{Cell, Table};
use crate::domain::id::BeadId;
use crate::domain::model::{is_cancel_reason, Status};
use crate::domain::state::Stuck;
use crate::protocol::BeadSummary;

/// The status people read: `cancelled` for a bead `cancel` closed, else the bead's own.
pub fn status_label(status: &Status, close_reason: Option<&str>) -> String {
    if status.is_closed() && close_reason.is_some_and(is_cancel_reason) {
        crate::domain::model::CANCELLED.to_owned()
    } else {
        status.to_string()
    }
}

/// `waiting for cat-2 (cancelled), cat-3`, or nothing.
pub fn waiting_for(ids: &[BeadId], stuck: &BTreeMap<BeadId, Stuck>) -> Option<String> {
    if ids.is_empty() {
        return None;
    }
    let ids: Vec<String> = ids
        .iter()
        .map(|id| match stuck.get(id) {
            Some(why) => format!("{id} ({})", stuck_word(*why)),
            None => id.to_string(),
        })
        .collect();
    Some(format!("waiting for {}", ids.join(", ")))
}

/// Why a bead another waits for is stuck, in a few words.
pub fn stuck_word(why: Stuck) -> &'static str {
    match why {
        Stuck::Blocked => "blocked",
        Stuck::Cancelled => "cancelled",
        Stuck::Unmerged => "closed without merging",
    }
}

pub fn render_beads(beads: &[BeadSummary], paint: Paint) -> String {
    if beads.is_empty() {
        return "no beads\n".into();
    }
    let mut table = Table::new();
    table.row(
        ["ID", "STATUS", "PRI", "PROGRESS", "STEP", "TITLE"]
            .into_iter()
            .map(|h| Cell::new(h, BOLD))
            .collect(),
    );
    for b in beads {
        let status = status_label(&b.status, b.close_reason.as_deref());
        let step = b
            .running
            .as_ref()
            .and_then(|r| {
                let step = r.step.to_string();
                step.rsplit_once('.').map(|(_, name)| name.to_owned())
            })
            .or_else(|| b.current.clone());
        let step = match (step, waiting_for(&b.waiting_for, &b.stuck_on)) {
            (Some(step), _) => Cell::plain(step),
            (None, Some(waiting)) => Cell::new(waiting, DIM),
            (None, None) => Cell::plain(""),
        };
        table.row(vec![
            Cell::plain(b.id.to_string()),
            Cell::new(status.clone(), style::status(&status)),
            Cell::plain(b.priority.to_string()),
            Cell::plain(progress_bar(b.done, b.total, 10)),
            step,
            Cell::plain(b.title.clone()),
        ]);
    }
    table.render(paint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::time::Timestamp;

    fn summary(id: &str, status: Status, title: &str) -> BeadSummary {
        BeadSummary {
            close_reason: None,
            closed_at: None,
            cost_usd: None,
            created_at: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            current: None,
            done: 0,
            formula: None,
            id: BeadId::new(id).unwrap(),
            priority: 2,
            running: None,
            status,
            stuck_on: BTreeMap::new(),
            title: title.into(),
            total: 0,
            waiting_for: vec![],
        }
    }

    #[test]
    fn cancelled_and_waiting_beads_say_so_in_aligned_columns() {
        let cancelled = BeadSummary {
            close_reason: Some("cancelled: dropped".into()),
            ..summary("cat-1", Status::Closed, "Dropped")
        };
        let merged = BeadSummary {
            close_reason: Some("merged into `main`".into()),
            done: 4,
            total: 4,
            ..summary("cat-2", Status::Closed, "Merged")
        };
        let cat_1 = BeadId::new("cat-1").unwrap();
        let waiting = BeadSummary {
            waiting_for: vec![cat_1.clone(), BeadId::new("cat-x").unwrap()],
            stuck_on: BTreeMap::from([(cat_1, Stuck::Cancelled)]),
            ..summary("cat-long-name", Status::Open, "After")
        };
        let text = render_beads(&[cancelled, merged, waiting], Paint::OFF);
        assert_eq!(
            text,
            "ID             STATUS     PRI  PROGRESS          STEP                                  TITLE\n\
             cat-1          cancelled  2    [----------] 0/0                                        Dropped\n\
             cat-2          closed     2    [##########] 4/4                                        Merged\n\
             cat-long-name  open       2    [----------] 0/0  waiting for cat-1 (cancelled), cat-x  After\n"
        );
    }
}
