//! A molecule's steps drawn as a graph for the bead's page: the steps as boxes in columns
//! from left to right, each column one step further from the start than the last, and an
//! arrow for each step another runs after. Laid out here from the steps' `needs` (a petgraph
//! DAG, fix steps included); the page's template writes the SVG, so every label is escaped.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::protocol::StepView;

/// A box's size and the gaps between boxes, in SVG units (pixels at 100%).
const BOX_W: u32 = 150;
const BOX_H: u32 = 44;
const GAP_X: u32 = 50;
const GAP_Y: u32 = 16;
const MARGIN: u32 = 8;

/// What the template draws.
#[derive(Debug, Default, Serialize)]
pub struct Drawing {
    pub width: u32,
    pub height: u32,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

#[derive(Debug, Serialize)]
pub struct Node {
    pub id: String,
    /// The step's name in its formula (its id for a step outside one), cut to fit its box.
    pub label: String,
    /// Its status, and what it waits for when it waits: `waiting approval`, `running`, …
    pub state: String,
    /// A class for its colour: its status, or `waiting` for a person.
    pub class: &'static str,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// An arrow from the right side of one box to the left side of the next, as an SVG path.
#[derive(Debug, Serialize)]
pub struct Edge {
    pub d: String,
    /// `needs`, or `fix` from a rejected step to the fix step made for it.
    pub class: &'static str,
}

/// Lays out `steps`: a step's column is the longest chain of `needs` before it (a fix step
/// comes after the step it fixes); within a column, steps keep their order in `steps`. A need
/// outside the molecule draws nothing; if the needs ever went round in a circle, the steps
/// would be drawn in one row, in order.
pub fn layout(steps: &[StepView]) -> Drawing {
    if steps.is_empty() {
        return Drawing::default();
    }
    let mut graph = DiGraph::<usize, &'static str>::with_capacity(steps.len(), steps.len());
    let index: HashMap<&str, NodeIndex> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), graph.add_node(i)))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        let Some(detail) = &step.detail else { continue };
        let needs = detail.needs.iter().map(|n| (n, "needs"));
        for (from, class) in needs.chain(detail.fixes.iter().map(|f| (f, "fix"))) {
            if let Some(&from) = index.get(from.as_str()) {
                graph.add_edge(from, NodeIndex::new(i), class);
            }
        }
    }
    let mut column = vec![0u32; steps.len()];
    match petgraph::algo::toposort(&graph, None) {
        Ok(order) => {
            for n in order {
                for next in graph.neighbors(n) {
                    column[next.index()] = column[next.index()].max(column[n.index()] + 1);
                }
            }
        }
        Err(_) => column
            .iter_mut()
            .enumerate()
            .for_each(|(i, c)| *c = i as u32),
    }
    let mut rows: HashMap<u32, u32> = HashMap::new();
    let nodes: Vec<Node> = steps
        .iter()
        .zip(&column)
        .map(|(step, &col)| {
            let row = rows.entry(col).or_insert(0);
            let at = *row;
            *row += 1;
            let (state, class) = state_of(step);
            Node {
                id: step.id.to_string(),
                label: fit(step
                    .detail
                    .as_ref()
                    .map_or(step.id.as_str(), |d| d.step.as_str())),
                state,
                class,
                x: MARGIN + col * (BOX_W + GAP_X),
                y: MARGIN + at * (BOX_H + GAP_Y),
                w: BOX_W,
                h: BOX_H,
            }
        })
        .collect();
    let edges = graph
        .edge_indices()
        .filter_map(|e| Some((graph.edge_endpoints(e)?, graph[e])))
        .map(|((from, to), class)| {
            let (a, b) = (&nodes[from.index()], &nodes[to.index()]);
            let (x1, y1) = (a.x + a.w, a.y + a.h / 2);
            let (x2, y2) = (b.x, b.y + b.h / 2);
            let mid = (x1 + x2) / 2;
            Edge {
                d: format!("M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"),
                class,
            }
        })
        .collect();
    let columns = column.iter().max().map_or(1, |c| c + 1);
    let rows = rows.values().max().copied().unwrap_or(1);
    Drawing {
        width: 2 * MARGIN + columns * BOX_W + (columns - 1) * GAP_X,
        height: 2 * MARGIN + rows * BOX_H + (rows - 1) * GAP_Y,
        nodes,
        edges,
    }
}

/// The most characters of a name a box holds.
const LABEL_CHARS: usize = 20;

/// `name`, cut with `…` when its box cannot hold it.
fn fit(name: &str) -> String {
    if name.chars().count() <= LABEL_CHARS {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(LABEL_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// What a step's box says under its name, and its colour's class.
fn state_of(step: &StepView) -> (String, &'static str) {
    use crate::domain::model::{Phase, Status};
    let phase = step.detail.as_ref().and_then(|d| d.phase.as_ref());
    match (&step.status, phase) {
        (_, Some(Phase::WaitingApproval)) => ("waiting approval".into(), "waiting"),
        (_, Some(Phase::Running { attempt, .. })) => (format!("running #{attempt}"), "running"),
        (_, Some(Phase::Merging)) => ("merging".into(), "running"),
        (_, Some(Phase::PullRequest { number })) => (format!("pull request #{number}"), "waiting"),
        (_, Some(Phase::WaitingFix { .. })) => ("waiting for its fix".into(), "open"),
        (Status::Closed, _) => ("closed".into(), "closed"),
        (Status::Blocked, _) => ("blocked".into(), "blocked"),
        (Status::InProgress, _) => ("in progress".into(), "running"),
        (status, _) => (status.to_string().replace('_', " "), "open"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::BeadId;
    use crate::domain::model::{Role, Status};
    use crate::protocol::StepDetail;

    fn step(id: &str, name: &str, status: Status, needs: &[&str]) -> StepView {
        step_fixing(id, name, status, needs, None)
    }

    fn step_fixing(
        id: &str,
        name: &str,
        status: Status,
        needs: &[&str],
        fixes: Option<&str>,
    ) -> StepView {
        StepView {
            id: BeadId::new(id).expect("id"),
            status,
            title: name.into(),
            detail: Some(StepDetail {
                step: name.into(),
                role: Role::Implement,
                attempts: 0,
                uncounted: 0,
                summary: None,
                instructions: None,
                phase: None,
                model: None,
                needs: needs.iter().map(|n| BeadId::new(n).expect("id")).collect(),
                fixes: fixes.map(|f| BeadId::new(f).expect("id")),
                runs: None,
            }),
        }
    }

    #[test]
    fn each_step_stands_one_column_after_the_longest_chain_before_it() {
        // implement → review → merge, and a fix step after the review that rejected; the
        // merge needs implement and review, so it stands after the review.
        let steps = [
            step("cat-1.implement", "implement", Status::Closed, &[]),
            step(
                "cat-1.merge",
                "merge",
                Status::Open,
                &["cat-1.implement", "cat-1.review"],
            ),
            step("cat-1.review", "review", Status::Open, &["cat-1.implement"]),
            step_fixing(
                "cat-1.fix-1",
                "fix-1",
                Status::InProgress,
                &[],
                Some("cat-1.review"),
            ),
            step("cat-1.docs", "docs", Status::Open, &[]),
        ];
        let d = layout(&steps);
        let x = |id: &str| d.nodes.iter().find(|n| n.id == id).map(|n| n.x);
        let col = |n: u32| Some(MARGIN + n * (BOX_W + GAP_X));
        assert_eq!(x("cat-1.implement"), col(0));
        assert_eq!(x("cat-1.review"), col(1));
        assert_eq!(x("cat-1.merge"), col(2));
        assert_eq!(x("cat-1.fix-1"), col(2), "after the step it fixes");
        assert_eq!(x("cat-1.docs"), col(0), "a step that needs nothing starts");
        let classes: Vec<_> = d.edges.iter().map(|e| e.class).collect();
        assert_eq!(classes, ["needs", "needs", "needs", "fix"]);
        assert_eq!(d.width, 2 * MARGIN + 3 * BOX_W + 2 * GAP_X);
        assert_eq!(
            d.height,
            2 * MARGIN + 2 * BOX_H + GAP_Y,
            "two rows in columns 0 and 2"
        );
        let classes: Vec<_> = d.nodes.iter().map(|n| n.class).collect();
        assert_eq!(classes, ["closed", "open", "open", "running", "open"]);
    }

    #[test]
    fn needs_in_a_circle_draw_one_row() {
        let steps = [
            step("cat-1.a", "a", Status::Open, &["cat-1.b"]),
            step("cat-1.b", "b", Status::Open, &["cat-1.a"]),
        ];
        let d = layout(&steps);
        assert_eq!(d.nodes.len(), 2);
        assert!(d.nodes[0].x < d.nodes[1].x);
        assert!(layout(&[]).nodes.is_empty());
    }
}
