//! Pouring: a formula and a work bead become the step beads of a molecule.
//!
//! Pouring is a pure function from data to data; the engine records its result in the journal
//! and changes the work bead's status itself.

use std::collections::{BTreeMap, BTreeSet};

pub use super::error::PourError;
use super::template::render;
use super::vars::substitute_quoted;
use super::{Formula, Kind, Step};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, DepType, Dependency, JsonMap, Role, StepMeta, STEP_META_KEY};
use crate::domain::time::Timestamp;

/// Creates one open step bead per formula step for the work bead `work`, in pouring order
/// (every step after the steps it needs; otherwise file order).
///
/// Each step bead has the id `<work>.<step>`, its title, description and notes with `vars`
/// substituted (see [`Formula::resolve_vars`] for how values are found and when that fails),
/// the step's `type` as issue type (`task` unless given), the step's labels, the step's priority or else the work bead's, the
/// step's metadata plus `metadata.catalyst` ([`StepMeta`]), a `parent-child` dependency on the
/// work bead and a `blocks` dependency on each step it needs. Gate commands in `run` are
/// substituted too. The formula must have passed [`Formula::check`]; a cycle or an unknown
/// `needs` is refused rather than poured half-way.
pub fn pour(
    formula: &Formula,
    work: &Bead,
    vars: &BTreeMap<String, String>,
    at: Timestamp,
) -> Result<Vec<Bead>, PourError> {
    let invalid = |problem: String| PourError::Invalid {
        formula: formula.name.clone(),
        problem,
    };
    let values = formula.resolve_vars(vars, work)?;
    let plan = formula.merge_plan();
    // Steps whose `condition` does not hold are not poured; then the merge is added, after
    // what is left.
    let conditioned = with_merge(super::condition::apply(formula, &values), &plan);
    let formula = &conditioned;
    let order = formula.order().map_err(|cycles| {
        let cycle: Vec<_> = cycles
            .first()
            .into_iter()
            .flatten()
            .map(|&i| formula.steps[i].id.as_str())
            .collect();
        invalid(format!("cycle in `needs`: {}", cycle.join(" -> ")))
    })?;
    let ids = formula
        .steps
        .iter()
        .map(|step| {
            work.id.step(&step.id).map_err(|source| PourError::StepId {
                formula: formula.name.clone(),
                step: step.id.clone(),
                source,
            })
        })
        .collect::<Result<Vec<BeadId>, _>>()?;
    let id_of = |step: &str| {
        formula
            .steps
            .iter()
            .position(|s| s.id == step)
            .map(|i| ids[i].clone())
    };

    let mut beads = Vec::with_capacity(order.len());
    for i in order {
        let step = &formula.steps[i];
        let id = ids[i].clone();
        let mut dependencies = vec![Dependency::new(
            id.clone(),
            work.id.clone(),
            DepType::ParentChild,
            at,
        )];
        for need in &step.needs {
            let need_id = id_of(need).ok_or_else(|| {
                invalid(format!("step `{}` needs unknown step `{need}`", step.id))
            })?;
            dependencies.push(Dependency::new(id.clone(), need_id, DepType::Blocks, at));
        }
        let meta = step_meta(formula, step, &work.id, &values);
        let mut metadata: JsonMap = step.metadata.clone();
        let meta = serde_json::to_value(&meta).map_err(|e| invalid(e.to_string()))?;
        metadata.insert(STEP_META_KEY.into(), meta);

        let mut bead = Bead::new(id, render(&step.title, &values), at);
        bead.description = non_empty(render(&step.description, &values));
        bead.notes = non_empty(render(&step.notes, &values));
        bead.priority = step.priority.unwrap_or(work.priority);
        bead.labels = step.labels.clone();
        bead.issue_type = step.issue_type.clone();
        bead.metadata = Some(metadata);
        bead.dependencies = dependencies;
        beads.push(bead);
    }
    Ok(beads)
}

/// The `metadata.catalyst` of a freshly poured step: the formula's settings, nothing run yet.
fn step_meta(
    formula: &Formula,
    step: &super::Step,
    work: &BeadId,
    values: &BTreeMap<String, String>,
) -> StepMeta {
    StepMeta {
        // Left empty unless the formula names a model, so that the daemon's config decides
        // the role's model at dispatch.
        model: step.model.clone(),
        formula: Some(formula.name.clone()),
        prompt: step.prompt.clone(),
        run: step
            .run
            .iter()
            .map(|c| substitute_quoted(c, values))
            .collect(),
        timeout: step.timeout,
        unconfined: step.unconfined,
        max_fix_iterations: step.max_fix_iterations,
        max_attempts: step.max_attempts,
        tools: step.tools.clone(),
        recheck: step.recheck.clone(),
        strategy: step.merge_strategy,
        output: step.output.as_ref().map(|o| render(o, values)),
        ..StepMeta::new(step.id.clone(), step.role, work.clone())
    }
}

/// The id of the merge step pouring adds to a workflow that has none (`merge-2`, `merge-3`, …
/// when a step of the formula already has it).
pub const ADDED_MERGE_ID: &str = "merge";

/// How a workflow's work reaches the target branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergePlan {
    /// The formula's own merge step (the first, by id).
    Step(String),
    /// The formula has none: pouring adds a merge step with this id after the steps nothing
    /// needs. The daemon merges without an agent, and runs the merge agent only on a conflict.
    Added(String),
    /// No merge: the work stays on the bead's branch `catalyst/<bead>`. Why, in words.
    Off(&'static str),
}

impl Formula {
    /// Whether and how the work of a bead poured from this workflow is merged: its own merge
    /// step, else one added when it is poured, unless it says `merge = false` (or, being a
    /// Gas Town review, `review_only = true`). Expansions and aspects are parts of a workflow
    /// and never get one.
    pub fn merge_plan(&self) -> MergePlan {
        if let Some(step) = self.steps.iter().find(|s| s.role == Role::Merge) {
            return MergePlan::Step(step.id.clone());
        }
        if self.kind != Kind::Workflow {
            return MergePlan::Off("a part of a workflow, never poured alone");
        }
        match self.merge {
            Some(false) => return MergePlan::Off("merge = false"),
            None if self.kept.get("review_only") == Some(&serde_json::Value::Bool(true)) => {
                return MergePlan::Off("review_only = true");
            }
            _ => {}
        }
        let mut id = ADDED_MERGE_ID.to_owned();
        let mut n = 1;
        while self.step(&id).is_some() {
            n += 1;
            id = format!("{ADDED_MERGE_ID}-{n}");
        }
        MergePlan::Added(id)
    }
}

/// `formula` with the merge step `plan` adds, needing every step nothing else needs.
fn with_merge(mut formula: Formula, plan: &MergePlan) -> Formula {
    let MergePlan::Added(id) = plan else {
        return formula;
    };
    let needed: BTreeSet<&str> = formula
        .steps
        .iter()
        .flat_map(|s| s.needs.iter().map(String::as_str))
        .collect();
    let sinks: Vec<String> = formula
        .steps
        .iter()
        .filter(|s| !needed.contains(s.id.as_str()))
        .map(|s| s.id.clone())
        .collect();
    let mut merge = Step::new(
        id,
        Role::Merge,
        "Merge: {{title}}",
        "Merge the target branch into the bead's branch, resolving conflicts, so it can be fast-forwarded. (catalyst added this step: the formula has no merge step.)".into(),
    );
    merge.needs = sinks;
    formula.steps.push(merge);
    formula
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::{Role, Status};

    const FORMULA: &str = r#"
        formula = "feat"
        [vars]
        component = { description = "part", required = true }
        lang = { default = "rust", enum = ["rust", "go"] }
        [[steps]]
        id = "implement"
        title = "Implement {{title}} in {{component}}"
        description = "Work on {{bead}} ({{lang}})"
        role = "implement"
        needs = ["refine"]
        labels = ["code"]
        metadata = { size = "m" }
        [[steps]]
        id = "refine"
        title = "Plan"
        role = "refine"
        model = "opus"
        [[steps]]
        id = "checks"
        title = "Checks"
        role = "gate"
        run = ["make {{lang}}-test", "true"]
        needs = ["implement"]
        timeout = 900
        max_fix_iterations = 2
        priority = 0
    "#;

    fn at() -> Timestamp {
        Timestamp::parse("2026-01-02T03:04:05Z").expect("valid")
    }

    fn work(id: &str) -> Bead {
        let mut bead = Bead::new(BeadId::new(id).expect("valid"), "Add login", at());
        bead.priority = 1;
        bead
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn formula() -> Formula {
        Formula::parse(FORMULA, "feat.formula.toml").expect("parses")
    }

    #[test]
    fn pours_steps_in_order_with_edges_and_metadata() {
        let beads = pour(
            &formula(),
            &work("cat-1"),
            &vars(&[("component", "auth")]),
            at(),
        )
        .expect("pours");
        let ids: Vec<_> = beads.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "cat-1.refine",
                "cat-1.implement",
                "cat-1.checks",
                "cat-1.merge"
            ],
            "a formula without a merge step gets one at the end"
        );

        let implement = &beads[1];
        assert_eq!(implement.title, "Implement Add login in auth");
        assert_eq!(
            implement.description.as_deref(),
            Some("Work on cat-1 (rust)")
        );
        assert_eq!(implement.status, Status::Open);
        assert_eq!(implement.issue_type, "task");
        assert_eq!(implement.priority, 1, "inherits the work bead's priority");
        assert_eq!(implement.labels, ["code"]);
        let edges: Vec<_> = implement
            .dependencies
            .iter()
            .map(|d| (d.depends_on_id.as_str(), d.dep_type.as_str()))
            .collect();
        assert_eq!(
            edges,
            [("cat-1", "parent-child"), ("cat-1.refine", "blocks")]
        );
        assert!(implement
            .dependencies
            .iter()
            .all(|d| d.issue_id == implement.id));
        let metadata = implement.metadata.as_ref().expect("metadata");
        assert_eq!(metadata["size"], "m", "formula metadata is kept");
        let meta = implement.step_meta().expect("step meta");
        assert_eq!(meta.step, "implement");
        assert_eq!(meta.role, Role::Implement);
        assert_eq!(
            meta.model, None,
            "no model named: the daemon's config picks the role's model at dispatch"
        );
        assert_eq!(meta.bead.as_str(), "cat-1");
        assert_eq!(meta.formula.as_deref(), Some("feat"));

        assert_eq!(
            beads[0].step_meta().expect("meta").model.as_deref(),
            Some("opus")
        );
        assert_eq!(beads[0].description, None);

        let checks = beads[2].step_meta().expect("meta");
        assert_eq!(checks.role, Role::Gate);
        assert_eq!(checks.model, None);
        // Values reach the shell quoted, one word each.
        assert_eq!(checks.run, ["make 'rust'-test", "true"]);
        assert_eq!(checks.timeout, Some(900));
        assert_eq!(checks.max_fix_iterations, Some(2));
        assert_eq!(beads[2].priority, 0);
    }

    #[test]
    fn var_problems_are_refused_by_name() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "formula `feat` needs a value for `component` (no default)"),
            (&[("component", "a"), ("colour", "red")], "formula `feat` has no var `colour`"),
            (
                &[("component", "a"), ("title", "x")],
                "formula `feat`: var `title` is built in and cannot be given a value",
            ),
            (
                &[("component", "a"), ("lang", "cobol")],
                "formula `feat`: `cobol` is not an allowed value of var `lang` (allowed: `rust`, `go`)",
            ),
        ];
        for (given, want) in cases {
            let err = pour(&formula(), &work("cat-1"), &vars(given), at()).expect_err(want);
            assert_eq!(err.to_string(), *want);
        }
    }

    #[test]
    fn an_id_too_long_for_its_steps_is_refused() {
        let long = format!("cat-{}", "x".repeat(54));
        let err = pour(&formula(), &work(&long), &vars(&[("component", "a")]), at())
            .expect_err("too long");
        assert!(
            matches!(err, PourError::StepId { ref step, .. } if step == "implement"),
            "{err}"
        );
    }

    #[test]
    fn a_cycle_is_refused_not_poured_half_way() {
        let text = "formula = \"c\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"b\"]\n[[steps]]\nid = \"b\"\ntitle = \"B\"\nneeds = [\"a\"]\n";
        let formula = Formula::parse(text, "c").expect("parses");
        let err = pour(&formula, &work("cat-1"), &BTreeMap::new(), at()).expect_err("cycle");
        assert_eq!(
            err.to_string(),
            "formula `c` cannot be poured: cycle in `needs`: a -> b -> a"
        );
    }
}
