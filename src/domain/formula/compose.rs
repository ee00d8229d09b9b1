//! Composing formulas, decided by the pure core: an expansion replaces one step of a workflow
//! by its template's chain, and an aspect inserts its advice steps before and after every step
//! it matches. Both rewrite the workflow's steps; the result is checked like any workflow and
//! poured as usual.

use std::collections::{BTreeMap, BTreeSet};

use globset::Glob;

use super::vars::substitute;
use super::{ComposeError, Formula, Kind, Pointcut, Problem, Step};

/// A work bead label that applies an aspect when its formula is poured: `aspect:<name>`.
pub const ASPECT_LABEL: &str = "aspect:";

/// Replaces step `target` of `workflow` by the template of `expansion`.
///
/// In every template step, `{target}` (and `{target.id}`) becomes the target's id, and
/// `{target.title}` and `{target.description}` its title and description; a dot in an id
/// becomes a dash (in catalyst a dot separates a bead from its step), so `{target}.draft`
/// names `implement-draft`. `{{var}}` placeholders of the expansion's variables take the
/// step's `expand_vars`, else the expansion's defaults; others are left for the pour.
///
/// Wiring: the template's first steps (those needing no other template step) need what the
/// target needed; steps that needed the target need the template's last steps (those no
/// other template step needs).
pub fn expand_step(
    workflow: &Formula,
    target: &str,
    expansion: &Formula,
    vars: &BTreeMap<String, String>,
) -> Result<Formula, ComposeError> {
    if expansion.kind != Kind::Expansion {
        return Err(ComposeError::NotExpansion(expansion.name.clone()));
    }
    if expansion.template.is_empty() {
        return Err(ComposeError::NoTemplate(expansion.name.clone()));
    }
    let at = workflow
        .steps
        .iter()
        .position(|s| s.id == target)
        .ok_or_else(|| ComposeError::NoStep {
            target: target.to_owned(),
            expansion: expansion.name.clone(),
        })?;
    let old = &workflow.steps[at];
    let mut values: BTreeMap<String, String> = expansion
        .vars
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.default.clone()?)))
        .collect();
    values.extend(vars.clone());
    let place = |text: &str| {
        let text = text
            .replace("{target.id}", &old.id)
            .replace("{target.title}", &old.title)
            .replace("{target.description}", &old.description)
            .replace("{target}", &old.id);
        substitute(&text, &values)
    };
    let id_of = |text: &str| place(text).replace('.', "-");
    let chain: Vec<Step> = expansion
        .template
        .iter()
        .map(|t| {
            let mut step = t.clone();
            step.id = id_of(&t.id);
            step.title = place(&t.title);
            step.description = place(&t.description);
            step.notes = place(&t.notes);
            step.needs = t.needs.iter().map(|n| id_of(n)).collect();
            step.labels = t.labels.iter().map(|l| place(l)).collect();
            step.output = t.output.as_deref().map(place);
            // The chain stands for the step, so it is poured only when the step would be.
            if step.condition.is_none() {
                step.condition = old.condition.clone();
            }
            step
        })
        .collect();
    let mut steps = workflow.steps.clone();
    splice(&mut steps, at, chain);
    Ok(Formula {
        steps,
        ..workflow.clone()
    })
}

/// Inserts `aspect`'s advice around every step of `workflow` that an advice's `target` glob
/// matches (and, when the aspect has `[[pointcuts]]`, one of their globs too). Only the
/// workflow's own steps are matched, never inserted ones.
///
/// In an advice step, `{step.id}` and `{step.title}` become the matched step's id and title.
/// Wiring: the first step before takes what the matched step needed, the ones after it chain
/// on, and the matched step needs the last of them; the first step after needs the matched
/// step, the others chain on, and steps that needed the matched step need the last step after
/// it, so the workflow goes on only once the advice ran.
pub fn apply_aspect(workflow: &Formula, aspect: &Formula) -> Result<Formula, ComposeError> {
    if aspect.kind != Kind::Aspect {
        return Err(ComposeError::NotAspect(aspect.name.clone()));
    }
    let glob = |pattern: &str| -> Result<globset::GlobMatcher, ComposeError> {
        Glob::new(pattern)
            .map(|g| g.compile_matcher())
            .map_err(|e| ComposeError::BadGlob {
                aspect: aspect.name.clone(),
                pattern: pattern.to_owned(),
                message: e.to_string(),
            })
    };
    let pointcuts: Vec<Matcher> = aspect
        .pointcuts
        .iter()
        .map(|p| Matcher::new(p, &glob))
        .collect::<Result<_, _>>()?;
    let mut steps = workflow.steps.clone();
    let originals: Vec<Step> = workflow.steps.clone();
    for advice in &aspect.advice {
        let target = glob(&advice.target)?;
        for step in &originals {
            let matched = target.is_match(&step.id)
                && (pointcuts.is_empty() || pointcuts.iter().any(|p| p.matches(step)));
            if matched {
                wrap(&mut steps, &step.id, &advice.before, &advice.after);
            }
        }
    }
    Ok(Formula {
        steps: gates(steps),
        ..workflow.clone()
    })
}

/// A pointcut, its glob compiled.
struct Matcher<'a> {
    glob: Option<globset::GlobMatcher>,
    pointcut: &'a Pointcut,
}

impl<'a> Matcher<'a> {
    fn new<E>(
        pointcut: &'a Pointcut,
        glob: &dyn Fn(&str) -> Result<globset::GlobMatcher, E>,
    ) -> Result<Matcher<'a>, E> {
        Ok(Matcher {
            glob: pointcut.glob.as_deref().map(glob).transpose()?,
            pointcut,
        })
    }

    /// Whether `step` meets every criterion of the pointcut.
    fn matches(&self, step: &Step) -> bool {
        self.glob.as_ref().is_none_or(|g| g.is_match(&step.id))
            && self
                .pointcut
                .issue_type
                .as_ref()
                .is_none_or(|t| *t == step.issue_type)
            && self
                .pointcut
                .label
                .as_ref()
                .is_none_or(|l| step.labels.contains(l))
    }
}

/// `aspect`'s pointcuts that match none of `workflow`'s steps, described.
pub fn unmatched_pointcuts(workflow: &Formula, aspect: &Formula) -> Vec<String> {
    let glob = |p: &str| {
        Glob::new(p)
            .map(|g| g.compile_matcher())
            .map_err(|e| e.to_string())
    };
    aspect
        .pointcuts
        .iter()
        .filter(|p| {
            Matcher::new(p, &glob).is_ok_and(|m| !workflow.steps.iter().any(|s| m.matches(s)))
        })
        .map(describe_pointcut)
        .collect()
}

fn describe_pointcut(p: &Pointcut) -> String {
    let mut parts = Vec::new();
    if let Some(g) = &p.glob {
        parts.push(g.clone());
    }
    if let Some(t) = &p.issue_type {
        parts.push(format!("type {t}"));
    }
    if let Some(l) = &p.label {
        parts.push(format!("label {l}"));
    }
    parts.join(", ")
}

/// Puts `before` and `after` around step `id` of `steps`, wired as [`apply_aspect`] says.
fn wrap(steps: &mut Vec<Step>, id: &str, before: &[Step], after: &[Step]) {
    let Some(at) = steps.iter().position(|s| s.id == id) else {
        return;
    };
    let title = steps[at].title.clone();
    let condition = steps[at].condition.clone();
    let place = |advice: &Step| {
        let fill = |text: &str| {
            text.replace("{step.id}", id)
                .replace("{step.title}", &title)
        };
        let mut step = advice.clone();
        step.id = fill(&advice.id);
        step.title = if advice.title.is_empty() {
            step.id.clone()
        } else {
            fill(&advice.title)
        };
        step.description = fill(&advice.description);
        step.needs = Vec::new();
        // Advice on a step is poured only when the step is.
        if step.condition.is_none() {
            step.condition = condition.clone();
        }
        step
    };
    let mut before: Vec<Step> = before.iter().map(place).collect();
    let mut after: Vec<Step> = after.iter().map(place).collect();
    let mut previous: Option<String> = None;
    for step in &mut before {
        step.needs = match &previous {
            Some(p) => vec![p.clone()],
            None => steps[at].needs.clone(),
        };
        previous = Some(step.id.clone());
    }
    if let Some(last) = previous {
        steps[at].needs = vec![last];
    }
    let mut previous = id.to_owned();
    for step in &mut after {
        step.needs = vec![previous.clone()];
        previous = step.id.clone();
    }
    if previous != id {
        for step in steps.iter_mut() {
            rewire(&mut step.needs, id, std::slice::from_ref(&previous));
        }
    }
    let n_before = before.len();
    steps.splice(at..at, before.drain(..));
    let after_at = at + n_before + 1;
    steps.splice(after_at..after_at, after.drain(..));
}

/// Lifts beads' nested steps (`children`) into the list: a step with children is a group, not a
/// step of its own. Its children that need no sibling need what it needed, and the steps that
/// needed it need its children that no sibling needs; nested groups are lifted the same way.
pub(super) fn flatten(steps: Vec<Step>) -> Vec<Step> {
    if steps.iter().all(|s| s.children.is_empty()) {
        return steps;
    }
    let mut steps = steps;
    let mut at = 0;
    while at < steps.len() {
        let children = flatten(std::mem::take(&mut steps[at].children));
        if children.is_empty() {
            at += 1;
        } else {
            at += children.len();
            splice(&mut steps, at - children.len(), children);
        }
    }
    steps
}

/// Puts an approval step `gate-<id>` before each step with a `gate`: it needs what the step
/// needed, and the step needs it. Puts a gate step `check-<id>` after each step with a
/// `check`: it needs the step, and the steps that needed the step need it. Done once a
/// workflow is composed, so that the approval comes right before its step, and the check
/// right after it, whatever composing wired around it.
pub(super) fn gates(steps: Vec<Step>) -> Vec<Step> {
    let checked: BTreeMap<String, String> = steps
        .iter()
        .filter(|s| s.check.is_some())
        .map(|s| (s.id.clone(), check_id(&s.id)))
        .collect();
    let mut out = Vec::with_capacity(steps.len());
    for mut step in steps {
        for need in &mut step.needs {
            if let Some(check) = checked.get(need) {
                need.clone_from(check);
            }
        }
        if let Some(waits) = step.gate.take() {
            let description = if waits == "human" {
                format!("A person approves before `{}` runs.", step.id)
            } else {
                format!(
                    "A person approves before `{}` runs, in place of {waits}, which catalyst does not watch.",
                    step.id
                )
            };
            let mut gate = Step::new(
                &format!("gate-{}", step.id),
                crate::domain::model::Role::Approval,
                &format!("Approve: {}", step.title),
                description,
            );
            gate.needs = std::mem::take(&mut step.needs);
            step.needs = vec![gate.id.clone()];
            out.push(gate);
        }
        let check = step.check.take().map(|c| check_step(&step, c));
        out.push(step);
        out.extend(check);
    }
    out
}

fn check_id(step: &str) -> String {
    format!("check-{step}")
}

/// The gate that runs `check`'s script after `step`. The check's attempts in all are the
/// gate's fix limit: its `max_attempts`th failure blocks the bead.
fn check_step(step: &Step, check: super::Check) -> Step {
    let limit = check
        .max_attempts
        .map(|n| format!(", at most {n} times in all"))
        .unwrap_or_default();
    let mut gate = Step::new(
        &check_id(&step.id),
        crate::domain::model::Role::Gate,
        &format!("Check: {}", step.title),
        format!(
            "Runs `{}` after `{}`: exit 0 passes; exit 75 says it could not run, and it runs again later; any other exit sends its output to a fix{limit}.",
            check.path, step.id
        ),
    );
    gate.run = vec![super::v2::check_command(&check.path)];
    gate.timeout = check.timeout;
    gate.max_fix_iterations = check.max_attempts;
    gate.needs = vec![step.id.clone()];
    gate
}

/// The ends of a group of steps: the indices of its first steps (those needing no step of the
/// group) and the ids of its last ones (those no step of the group needs).
pub(super) fn ends(group: &[Step]) -> (Vec<usize>, Vec<String>) {
    let ids: BTreeSet<&str> = group.iter().map(|s| s.id.as_str()).collect();
    let needed: BTreeSet<&str> = group
        .iter()
        .flat_map(|s| s.needs.iter().map(String::as_str))
        .collect();
    let first = (0..group.len())
        .filter(|&i| !group[i].needs.iter().any(|n| ids.contains(n.as_str())))
        .collect();
    let last = group
        .iter()
        .filter(|s| !needed.contains(s.id.as_str()))
        .map(|s| s.id.clone())
        .collect();
    (first, last)
}

/// Replaces `steps[at]` by `group`: the group's first steps need what the replaced step
/// needed, and the steps that needed it need the group's last steps (see [`ends`]).
fn splice(steps: &mut Vec<Step>, at: usize, mut group: Vec<Step>) {
    let old = steps.remove(at);
    let (first, last) = ends(&group);
    for i in first {
        let mut needs = old.needs.clone();
        needs.append(&mut group[i].needs);
        group[i].needs = needs;
    }
    for step in steps.iter_mut() {
        rewire(&mut step.needs, &old.id, &last);
    }
    steps.splice(at..at, group);
}

/// Replaces `old` in `needs` by `new`, keeping the order and no duplicates.
fn rewire(needs: &mut Vec<String>, old: &str, new: &[String]) {
    if !needs.iter().any(|n| n == old) {
        return;
    }
    let mut out = Vec::with_capacity(needs.len() + new.len());
    for need in needs.drain(..) {
        let replaced = if need == old {
            new.to_vec()
        } else {
            vec![need]
        };
        for n in replaced {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    *needs = out;
}

/// Whether `formula` is composed from others: it extends a formula, has `[compose]` rules or
/// a step that names an expansion.
pub(super) fn needs_composing(formula: &Formula) -> bool {
    formula.kind == Kind::Workflow
        && (!formula.extends.is_empty()
            || !formula.compose.is_empty()
            || formula.steps.iter().any(|s| s.expand.is_some()))
}

/// `workflow` as it is poured, in beads' order: the formulas it `extends` merged under it,
/// then `[compose] branch` wiring, its steps' `expand`, `[compose] expand` and `map`, and
/// `[compose] aspects` last. `find` looks formulas up by name. Problems name the workflow's
/// file, and its step where there is one.
pub(super) fn compose<'a>(
    workflow: &Formula,
    find: &dyn Fn(&str) -> Option<&'a Formula>,
) -> Result<Formula, Vec<Problem>> {
    let file = workflow.file.as_str();
    let whole = |e: String| vec![Problem::formula(file, e)];
    let mut formula = inherit(workflow, find, &mut vec![workflow.name.clone()]).map_err(whole)?;
    let rules = std::mem::take(&mut formula.compose);
    for branch in &rules.branch {
        fork_join(&mut formula.steps, branch).map_err(whole)?;
    }
    let mut problems = Vec::new();
    let targets: Vec<(String, String, BTreeMap<String, String>)> = formula
        .steps
        .iter()
        .filter_map(|s| Some((s.id.clone(), s.expand.clone()?, s.expand_vars.clone())))
        .collect();
    for (target, name, vars) in targets {
        let expanded = match find(&name) {
            None => Err(format!("`expand` names unknown formula `{name}`")),
            Some(expansion) => {
                expand_step(&formula, &target, expansion, &vars).map_err(|e| e.to_string())
            }
        };
        match expanded {
            Ok(next) => formula = next,
            Err(e) => problems.push(Problem::step(file, &target, e)),
        }
    }
    for rule in &rules.expand {
        let Some(expansion) = find(&rule.with) else {
            problems.push(Problem::formula(
                file,
                format!("compose: `with` names unknown formula `{}`", rule.with),
            ));
            continue;
        };
        let targets: Vec<String> = if rule.glob {
            match Glob::new(&rule.select) {
                Ok(g) => {
                    let m = g.compile_matcher();
                    let ids: Vec<String> = formula
                        .steps
                        .iter()
                        .filter(|s| m.is_match(&s.id))
                        .map(|s| s.id.clone())
                        .collect();
                    if ids.is_empty() {
                        problems.push(
                            Problem::formula(
                                file,
                                format!("compose: map `{}` matches no step", rule.select),
                            )
                            .warn(),
                        );
                    }
                    ids
                }
                Err(e) => {
                    problems.push(Problem::formula(
                        file,
                        format!("compose: bad glob `{}`: {e}", rule.select),
                    ));
                    Vec::new()
                }
            }
        } else {
            vec![rule.select.clone()]
        };
        for target in targets {
            match expand_step(&formula, &target, expansion, &rule.vars) {
                Ok(next) => formula = next,
                Err(e) => problems.push(Problem::formula(file, format!("compose: {e}"))),
            }
        }
    }
    for name in &rules.aspects {
        let applied = match find(name) {
            None => Err(format!("compose: `aspects` names unknown formula `{name}`")),
            Some(aspect) => {
                for pointcut in unmatched_pointcuts(&formula, aspect) {
                    problems.push(
                        Problem::formula(
                            file,
                            format!(
                                "compose: aspect `{name}`: pointcut `{pointcut}` matches no step"
                            ),
                        )
                        .warn(),
                    );
                }
                apply_aspect(&formula, aspect).map_err(|e| format!("compose: {e}"))
            }
        };
        match applied {
            Ok(next) => formula = next,
            Err(e) => problems.push(Problem::formula(file, e)),
        }
    }
    if problems.iter().any(|p| !p.warning) {
        Err(problems)
    } else {
        formula.steps = gates(std::mem::take(&mut formula.steps));
        formula.warnings.extend(problems);
        Ok(formula)
    }
}

/// `formula` with the formulas it `extends` under it, each merged in the order given (their
/// own parents first): vars, steps and `[compose]` rules are inherited, and the child's step or
/// var of the same name replaces the parent's, in the parent's place. `chain` holds the
/// formulas being inherited through, to refuse a cycle.
fn inherit<'a>(
    formula: &Formula,
    find: &dyn Fn(&str) -> Option<&'a Formula>,
    chain: &mut Vec<String>,
) -> Result<Formula, String> {
    let mut base: Option<Formula> = None;
    for name in &formula.extends {
        if chain.contains(name) {
            chain.push(name.clone());
            return Err(format!(
                "`extends` goes round in a circle: {}",
                chain.join(" -> ")
            ));
        }
        let parent =
            find(name).ok_or_else(|| format!("`extends` names unknown formula `{name}`"))?;
        if parent.kind != Kind::Workflow {
            return Err(format!("`extends` names `{name}`, which is not a workflow"));
        }
        chain.push(name.clone());
        let parent = inherit(parent, find, chain)?;
        chain.pop();
        base = Some(match base {
            None => parent,
            Some(base) => merge(base, parent),
        });
    }
    Ok(match base {
        None => formula.clone(),
        Some(base) => merge(base, formula.clone()),
    })
}

/// `child` on top of `base` (see [`inherit`]).
fn merge(base: Formula, child: Formula) -> Formula {
    let mut steps = base.steps;
    for step in child.steps {
        match steps.iter_mut().find(|s| s.id == step.id) {
            Some(old) => *old = step,
            None => steps.push(step),
        }
    }
    let mut vars = base.vars;
    vars.extend(child.vars);
    let mut kept = base.kept;
    kept.extend(child.kept);
    let mut compose = base.compose;
    compose.expand.extend(child.compose.expand);
    compose.branch.extend(child.compose.branch);
    for aspect in child.compose.aspects {
        if !compose.aspects.contains(&aspect) {
            compose.aspects.push(aspect);
        }
    }
    Formula {
        steps,
        vars,
        kept,
        compose,
        extends: Vec::new(),
        merge: child.merge.or(base.merge),
        ..child
    }
}

/// `[[compose.branch]]`: each of the branch's steps needs `from`, and `join` needs them all.
fn fork_join(steps: &mut [Step], branch: &super::Branch) -> Result<(), String> {
    for id in branch.steps.iter().chain([&branch.from, &branch.join]) {
        if !steps.iter().any(|s| &s.id == id) {
            return Err(format!("compose: branch names unknown step `{id}`"));
        }
    }
    for step in steps.iter_mut() {
        let add: Vec<&String> = if branch.steps.contains(&step.id) {
            vec![&branch.from]
        } else if step.id == branch.join {
            branch.steps.iter().collect()
        } else {
            continue;
        };
        for need in add {
            if !step.needs.contains(need) {
                step.needs.push(need.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Formula {
        Formula::parse(text, "t.formula.toml").expect("parses")
    }

    fn needs(f: &Formula) -> Vec<(String, Vec<String>)> {
        f.steps
            .iter()
            .map(|s| (s.id.clone(), s.needs.clone()))
            .collect()
    }

    fn pairs(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(id, needs)| {
                (
                    id.to_string(),
                    needs.iter().map(|n| n.to_string()).collect(),
                )
            })
            .collect()
    }

    const WORKFLOW: &str = r#"
        formula = "w"
        [[steps]]
        id = "plan"
        title = "Plan"
        [[steps]]
        id = "implement"
        title = "Implement it"
        description = "the change"
        needs = ["plan"]
        [[steps]]
        id = "review"
        title = "Review"
        role = "review"
        needs = ["implement"]
        [[steps]]
        id = "merge"
        title = "Merge"
        role = "merge"
        needs = ["review", "implement"]
    "#;

    #[test]
    fn an_expansion_replaces_its_target_by_the_template_chain() {
        let expansion = load(
            r#"
            formula = "twice"
            type = "expansion"
            [vars]
            passes = "2"
            [[template]]
            id = "{target}.draft"
            title = "Draft: {target.title}"
            description = "{target.description}, {{passes}} passes"
            [[template]]
            id = "{target}.refine"
            title = "Refine: {target.title}"
            needs = ["{target}.draft"]
            "#,
        );
        let out = expand_step(&load(WORKFLOW), "implement", &expansion, &BTreeMap::new())
            .expect("expands");
        assert_eq!(
            needs(&out),
            pairs(&[
                ("plan", &[]),
                ("implement-draft", &["plan"]),
                ("implement-refine", &["implement-draft"]),
                ("review", &["implement-refine"]),
                ("merge", &["review", "implement-refine"]),
            ])
        );
        assert_eq!(out.steps[1].title, "Draft: Implement it");
        assert_eq!(out.steps[1].description, "the change, 2 passes");
        let vars = BTreeMap::from([("passes".to_owned(), "5".to_owned())]);
        let out = expand_step(&load(WORKFLOW), "implement", &expansion, &vars).expect("expands");
        assert_eq!(
            out.steps[1].description, "the change, 5 passes",
            "expand_vars win"
        );
        let err = expand_step(&load(WORKFLOW), "deploy", &expansion, &BTreeMap::new())
            .expect_err("no such step");
        assert!(err.to_string().contains("no step `deploy`"), "{err}");
        let err = expand_step(&load(WORKFLOW), "plan", &load(WORKFLOW), &BTreeMap::new())
            .expect_err("not an expansion");
        assert!(matches!(err, ComposeError::NotExpansion(_)), "{err}");
    }

    #[test]
    fn an_aspect_wraps_every_matching_step_and_the_workflow_waits_for_it() {
        let aspect = load(
            r#"
            formula = "guard"
            type = "aspect"
            [[advice]]
            target = "*"
            [advice.around]
            [[advice.around.before]]
            id = "{step.id}-pre"
            title = "Before {step.title}"
            [[advice.around.after]]
            id = "{step.id}-post"
            [[pointcuts]]
            glob = "implement"
            [[pointcuts]]
            glob = "deploy"
            "#,
        );
        let workflow = load(WORKFLOW);
        let out = apply_aspect(&workflow, &aspect).expect("applies");
        assert_eq!(
            needs(&out),
            pairs(&[
                ("plan", &[]),
                ("implement-pre", &["plan"]),
                ("implement", &["implement-pre"]),
                ("implement-post", &["implement"]),
                ("review", &["implement-post"]),
                ("merge", &["review", "implement-post"]),
            ])
        );
        assert_eq!(out.steps[1].title, "Before Implement it");
        assert_eq!(
            out.steps[3].title, "implement-post",
            "an untitled step takes its id"
        );
        assert_eq!(unmatched_pointcuts(&workflow, &aspect), ["deploy"]);
        assert!(out.check(&|_| true).iter().all(|p| p.warning));
    }

    #[test]
    fn nested_steps_are_lifted_and_their_group_stands_for_them() {
        let formula = load(
            r#"
            formula = "nested"
            [[steps]]
            id = "plan"
            title = "Plan"
            [[steps]]
            id = "build"
            title = "Build"
            needs = ["plan"]
            [[steps.children]]
            id = "backend"
            title = "Backend"
            [[steps.children]]
            id = "frontend"
            title = "Frontend"
            [[steps]]
            id = "ship"
            title = "Ship"
            role = "merge"
            needs = ["build"]
            "#,
        );
        assert_eq!(
            needs(&formula),
            pairs(&[
                ("plan", &[]),
                ("backend", &["plan"]),
                ("frontend", &["plan"]),
                ("ship", &["backend", "frontend"]),
            ])
        );
        assert!(formula.check(&|_| true).is_empty());
    }

    #[test]
    fn a_counted_loop_is_unrolled_one_iteration_after_the_other() {
        let formula = load(
            r#"
            formula = "looped"
            [[steps]]
            id = "plan"
            title = "Plan"
            [[steps]]
            id = "polish"
            title = "Polish"
            needs = ["plan"]
            [steps.loop]
            count = 2
            var = "round"
            [[steps.loop.body]]
            id = "edit"
            title = "Edit, round {{round}}"
            [[steps.loop.body]]
            id = "check"
            title = "Check"
            needs = ["edit"]
            [[steps]]
            id = "ship"
            title = "Ship"
            role = "merge"
            needs = ["polish"]
            "#,
        );
        assert_eq!(
            needs(&formula),
            pairs(&[
                ("plan", &[]),
                ("polish-iter1-edit", &["plan"]),
                ("polish-iter1-check", &["polish-iter1-edit"]),
                ("polish-iter2-edit", &["polish-iter1-check"]),
                ("polish-iter2-check", &["polish-iter2-edit"]),
                ("ship", &["polish-iter2-check"]),
            ])
        );
        assert_eq!(formula.steps[3].title, "Edit, round 2");
        assert!(formula.check(&|_| true).is_empty());
        let problems = |text: &str| -> Vec<String> {
            match Formula::parse(text, "t.formula.toml") {
                Ok(f) => f.warnings.iter().map(ToString::to_string).collect(),
                Err(p) => p.iter().map(ToString::to_string).collect(),
            }
        };
        let until = problems("formula = \"f\"\n[[steps]]\nid = \"l\"\ntitle = \"L\"\n[steps.loop]\nuntil = \"done\"\n[[steps.loop.body]]\nid = \"x\"\ntitle = \"X\"\n");
        assert_eq!(
            until,
            [
                "t.formula.toml: l: loop: `until` needs a `max`",
                "t.formula.toml: l: warning: loop: `until` is decided while the loop runs, which a poured molecule cannot be: the body is poured once"
            ]
        );
        let both = problems("formula = \"f\"\n[[steps]]\nid = \"l\"\ntitle = \"L\"\n[steps.loop]\ncount = 2\nrange = \"1..2\"\n[[steps.loop.body]]\nid = \"x\"\ntitle = \"X\"\n");
        assert_eq!(
            both,
            ["t.formula.toml: l: loop: a loop has one of `count`, `range` and `until`"]
        );
    }

    #[test]
    fn a_range_loop_pours_once_per_value_with_the_var_in_the_text() {
        let formula = load(
            r#"
            formula = "hanoi"
            [vars]
            disks = "2"
            [[steps]]
            id = "moves"
            title = "Moves"
            [steps.loop]
            range = "1..2^{disks}-1"
            var = "move"
            [[steps.loop.body]]
            id = "do"
            title = "Move {move} of {{disks}}"
            "#,
        );
        assert_eq!(
            needs(&formula),
            pairs(&[
                ("moves-iter1-do", &[]),
                ("moves-iter2-do", &["moves-iter1-do"]),
                ("moves-iter3-do", &["moves-iter2-do"]),
            ])
        );
        assert_eq!(formula.steps[2].title, "Move 3 of {{disks}}");
        let until = load("formula = \"f\"\n[[steps]]\nid = \"l\"\ntitle = \"L\"\n[steps.loop]\nuntil = \"done\"\nmax = 5\n[[steps.loop.body]]\nid = \"x\"\ntitle = \"X\"\n");
        assert_eq!(needs(&until), pairs(&[("l-iter1-x", &[])]));
    }

    #[test]
    fn a_human_gate_is_an_approval_step_before_its_step() {
        let formula = load(
            r#"
            formula = "gated"
            [[steps]]
            id = "build"
            title = "Build"
            [[steps]]
            id = "deploy"
            title = "Deploy"
            needs = ["build"]
            gate = { type = "human", timeout = "24h" }
            "#,
        );
        assert_eq!(
            needs(&formula),
            pairs(&[
                ("build", &[]),
                ("gate-deploy", &["build"]),
                ("deploy", &["gate-deploy"])
            ])
        );
        assert_eq!(formula.steps[1].role, crate::domain::model::Role::Approval);
        assert_eq!(formula.steps[1].title, "Approve: Deploy");
    }

    #[test]
    fn a_convoy_pours_parallel_legs_a_synthesis_and_a_merge() {
        let convoy = load(
            r#"
            formula = "survey"
            type = "convoy"
            [inputs.problem]
            description = "what"
            required = true
            [prompts]
            base = "About {{problem}}."
            [output]
            directory = "out"
            leg_pattern = "{{leg.id}}.md"
            synthesis = "all.md"
            [[legs]]
            id = "a"
            title = "A"
            focus = "one side"
            [[legs]]
            id = "b"
            title = "B"
            [synthesis]
            title = "Both"
            "#,
        );
        assert_eq!(
            needs(&convoy),
            pairs(&[
                ("a", &[]),
                ("b", &[]),
                ("synthesis", &["a", "b"]),
                ("merge", &["synthesis"]),
            ])
        );
        assert!(convoy.vars["problem"].required);
        assert_eq!(
            convoy.steps[0].description,
            "Focus: one side\n\nAbout {{problem}}."
        );
        assert_eq!(convoy.steps[0].output.as_deref(), Some("out/a.md"));
        assert_eq!(convoy.steps[2].output.as_deref(), Some("out/all.md"));
        assert_eq!(
            convoy
                .check(&|_| true)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["t.formula.toml: warning: var `problem` has no default: pouring needs a value for it (`ctl submit --var problem=…`, or the config's `[vars]`)"],
            "{:?}",
            convoy.check(&|_| true)
        );
    }
}
