//! The semantic checks of a parsed formula, and the order its steps are poured in.
//!
//! Checks collect every problem rather than stopping at the first: a person fixing a formula
//! should see all that is wrong with it in one run of `catalyst formula check`.

use std::collections::{BTreeSet, HashMap, HashSet};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;

use super::vars::BUILTIN_VARS;
use super::{is_name, Formula, Kind, Problem, Step};
use crate::domain::model::{Role, STEP_META_KEY};

/// The longest step id accepted, so that `<bead>.<step>` stays within the 64-byte id limit for
/// any reasonable bead id.
pub const MAX_STEP_ID_LEN: usize = 32;

/// Step ids that start with this are made by the daemon at run time (`<bead>.fix-<n>`).
const FIX_PREFIX: &str = "fix-";

impl Formula {
    /// Every semantic problem of the formula, in file order (formula-level ones first, cycles
    /// last); empty when the formula can be poured.
    ///
    /// `has_prompt(name)` says whether the prompt set has a template of that name; every agent
    /// step needs one (its `prompt`, else its role's). Taking it as a function keeps formulas
    /// independent of where prompts are loaded from.
    pub fn check(&self, has_prompt: &dyn Fn(&str) -> bool) -> Vec<Problem> {
        let mut out = Vec::new();
        let file = self.file.as_str();
        if self.name.is_empty() {
            out.push(Problem::formula(
                file,
                "the formula has no name: add `formula = \"<name>\"`",
            ));
        } else if !is_name(&self.name) {
            out.push(Problem::formula(
                file,
                format!(
                    "formula name `{}` must match `[a-z0-9][a-z0-9_-]*`",
                    self.name
                ),
            ));
        }
        match self.kind {
            Kind::Expansion => {
                if self.template.is_empty() {
                    out.push(Problem::formula(
                        file,
                        "an expansion needs `[[template]]` steps",
                    ));
                }
                self.check_vars(&mut out);
                return out;
            }
            Kind::Aspect => {
                if self.advice.is_empty() {
                    out.push(Problem::formula(file, "an aspect needs `[[advice]]`"));
                }
                return out;
            }
            Kind::Workflow => {}
        }
        // What a composed workflow (`extends`, `[compose]`, `expand`) is made of is known only
        // once it is composed: the whole is checked again then, and only its own steps now.
        let composed = super::compose::needs_composing(self);
        if self.steps.is_empty() && self.extends.is_empty() {
            out.push(Problem::formula(file, "the formula has no steps"));
        } else if !composed {
            self.check_merge(has_prompt, &mut out);
        }
        self.check_vars(&mut out);
        let mut seen = HashSet::new();
        for step in &self.steps {
            let mut problem = |message: String| out.push(Problem::step(file, &step.id, message));
            check_id(step, &mut seen, &mut problem);
            if step.expand.is_some() {
                // Replaced by the expansion's steps, which are checked once it is applied.
                continue;
            }
            if step.title.trim().is_empty() {
                problem("the step has no `title`".into());
            }
            for need in &step.needs {
                if self.extends.is_empty() && self.step(need).is_none() {
                    problem(format!("`needs` names unknown step `{need}`"));
                }
            }
            check_role(step, has_prompt, &mut problem);
            check_output(step, &mut problem);
            if self.extends.is_empty() {
                // These name other steps and vars, which may be the parents'.
                self.check_recheck(step, &mut problem);
                self.check_condition(step, &mut problem);
            }
            if step.metadata.contains_key(STEP_META_KEY) {
                problem(format!(
                    "metadata key `{STEP_META_KEY}` is reserved for catalyst's own step metadata"
                ));
            }
            if self.extends.is_empty() {
                self.check_placeholders(step, &mut out);
            }
        }
        if self.extends.is_empty() {
            self.check_templates(&mut out);
        }
        if let Err(cycles) = self
            .order()
            .map_err(|c| if composed { Vec::new() } else { c })
        {
            for cycle in cycles {
                let names: Vec<_> = cycle.iter().map(|&i| self.steps[i].id.as_str()).collect();
                out.push(Problem::formula(
                    file,
                    format!("cycle in `needs`: {}", names.join(" -> ")),
                ));
            }
        }
        out
    }

    /// `merge = false` and a merge step contradict each other; the merge step pouring adds
    /// needs the merge role's prompt like any other.
    fn check_merge(&self, has_prompt: &dyn Fn(&str) -> bool, out: &mut Vec<Problem>) {
        let file = self.file.as_str();
        match self.merge_plan() {
            super::MergePlan::Step(id) if self.merge == Some(false) => out.push(Problem::step(
                file,
                &id,
                "a merge step in a formula that says `merge = false`",
            )),
            super::MergePlan::Added(_) if !has_prompt(Role::Merge.as_str()) => {
                out.push(Problem::formula(
                    file,
                    "there is no prompt for role `merge` in the prompt set, which the merge step added to a formula without one needs (or say `merge = false`)",
                ))
            }
            _ => {}
        }
    }

    /// `recheck` is for merge steps, and names gate or review steps the merge comes after.
    fn check_recheck(&self, step: &Step, problem: &mut impl FnMut(String)) {
        if step.merge_strategy.is_some() && step.role != Role::Merge {
            problem(format!(
                "`merge_strategy` only applies to merge steps, not `{}`",
                step.role
            ));
        }
        if step.recheck.is_empty() {
            return;
        }
        if step.role != Role::Merge {
            problem(format!(
                "`recheck` only applies to merge steps, not `{}`",
                step.role
            ));
            return;
        }
        let before = self.needed_by(step);
        for name in &step.recheck {
            match self.step(name) {
                None => problem(format!("`recheck` names unknown step `{name}`")),
                Some(s) if !matches!(s.role, Role::Gate | Role::Review) => {
                    problem(format!(
                    "`recheck` names `{name}`, {} {} step: only gate and review steps run again",
                    if matches!(s.role, Role::Implement | Role::Approval) { "an" } else { "a" },
                    s.role
                ))
                }
                Some(_) if !before.contains(name.as_str()) => problem(format!(
                    "`recheck` names `{name}`, which the merge step does not come after"
                )),
                Some(_) => {}
            }
        }
    }

    /// `condition` reads as one, on a declared (or built-in) variable.
    fn check_condition(&self, step: &Step, problem: &mut impl FnMut(String)) {
        let Some(text) = &step.condition else {
            return;
        };
        match super::condition::Condition::parse(text) {
            Err(e) => problem(e),
            Ok(c) if !self.vars.contains_key(c.var()) && !BUILTIN_VARS.contains(&c.var()) => {
                problem(format!(
                    "condition `{text}` uses `{}`, which `[vars]` does not declare",
                    c.var()
                ))
            }
            Ok(_) => {}
        }
    }

    /// The ids of every step `step` needs, directly or through others.
    fn needed_by<'a>(&'a self, step: &'a Step) -> HashSet<&'a str> {
        let mut seen = HashSet::new();
        let mut todo: Vec<&str> = step.needs.iter().map(String::as_str).collect();
        while let Some(id) = todo.pop() {
            if seen.insert(id) {
                if let Some(s) = self.step(id) {
                    todo.extend(s.needs.iter().map(String::as_str));
                }
            }
        }
        seen
    }

    /// Step indices in pouring order: each step after the steps it needs, ties in file order, so
    /// the same formula always pours the same way. Unknown `needs` are ignored here (`check`
    /// reports them). Fails with every cycle, each as the steps along it, first step repeated
    /// at the end, following `needs`.
    pub(crate) fn order(&self) -> Result<Vec<usize>, Vec<Vec<usize>>> {
        let index = self.index();
        let mut graph = DiGraph::<usize, ()>::new();
        let nodes: Vec<_> = (0..self.steps.len()).map(|i| graph.add_node(i)).collect();
        for (i, step) in self.steps.iter().enumerate() {
            for j in step.needs.iter().filter_map(|n| index.get(n.as_str())) {
                graph.add_edge(nodes[*j], nodes[i], ());
            }
        }
        // Kahn's algorithm with the lowest ready index first, for a stable order.
        let mut waiting: Vec<usize> = nodes
            .iter()
            .map(|&n| graph.neighbors_directed(n, petgraph::Incoming).count())
            .collect();
        let mut ready: BTreeSet<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
        let mut order = Vec::with_capacity(nodes.len());
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for next in graph.neighbors_directed(nodes[i], petgraph::Outgoing) {
                let j = graph[next];
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.insert(j);
                }
            }
        }
        if order.len() == nodes.len() {
            return Ok(order);
        }
        let mut cycles: Vec<Vec<usize>> = tarjan_scc(&graph)
            .into_iter()
            .map(|scc| scc.into_iter().map(|n| graph[n]).collect::<BTreeSet<_>>())
            .filter(|scc| {
                scc.len() > 1
                    || scc
                        .iter()
                        .any(|&i| index_needs(self, &index, i).any(|j| j == i))
            })
            .map(|scc| self.cycle_in(&index, &scc))
            .collect();
        cycles.sort();
        Err(cycles)
    }

    /// One cycle through a strongly connected set of steps, walking `needs` from its first step.
    fn cycle_in(&self, index: &HashMap<&str, usize>, scc: &BTreeSet<usize>) -> Vec<usize> {
        let mut path: Vec<usize> = scc.first().copied().into_iter().collect();
        while let Some(&at) = path.last() {
            let Some(next) = index_needs(self, index, at).find(|j| scc.contains(j)) else {
                break;
            };
            if let Some(pos) = path.iter().position(|&p| p == next) {
                let mut cycle = path.split_off(pos);
                cycle.push(next);
                return cycle;
            }
            path.push(next);
        }
        // Unreachable for a strongly connected set; return the walk rather than panic.
        path
    }

    /// Step index by id (the first step with that id, when ids repeat).
    fn index(&self) -> HashMap<&str, usize> {
        let mut index = HashMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            index.entry(step.id.as_str()).or_insert(i);
        }
        index
    }
}

fn index_needs<'a>(
    formula: &'a Formula,
    index: &'a HashMap<&str, usize>,
    i: usize,
) -> impl Iterator<Item = usize> + 'a {
    formula.steps[i]
        .needs
        .iter()
        .filter_map(|n| index.get(n.as_str()).copied())
}

fn check_id<'a>(step: &'a Step, seen: &mut HashSet<&'a str>, problem: &mut impl FnMut(String)) {
    let id = step.id.as_str();
    if !is_name(id) {
        problem(format!(
            "step id `{id}` must match `[a-z0-9][a-z0-9_-]*` (it becomes part of the step bead's id `<bead>.{id}`)"
        ));
    } else if id.starts_with(FIX_PREFIX) {
        problem(format!(
            "step id `{id}` starts with `{FIX_PREFIX}`, which is reserved for the fix steps catalyst creates"
        ));
    } else if id.len() > MAX_STEP_ID_LEN {
        problem(format!(
            "step id `{id}` is longer than {MAX_STEP_ID_LEN} bytes"
        ));
    }
    if !seen.insert(id) {
        problem(format!("step id `{id}` is used by more than one step"));
    }
}

/// `output` names a file inside the worktree.
fn check_output(step: &Step, problem: &mut impl FnMut(String)) {
    let Some(output) = &step.output else {
        return;
    };
    let path = std::path::Path::new(output);
    let inside = !output.trim().is_empty()
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
    if !inside {
        problem(format!(
            "`output = \"{output}\"` must be a path inside the worktree (relative, without `..`)"
        ));
    } else if !step.role.is_agent() {
        problem(format!(
            "`output` is for agent steps; a {} step runs no agent",
            step.role
        ));
    }
}

fn check_role(step: &Step, has_prompt: &dyn Fn(&str) -> bool, problem: &mut impl FnMut(String)) {
    let role = step.role;
    if let Some(name) = step.prompt_name() {
        if !has_prompt(name) {
            problem(match &step.prompt {
                Some(_) => format!("prompt `{name}` is not in the prompt set"),
                None => format!("there is no prompt for role `{role}` in the prompt set"),
            });
        }
    }
    if role == Role::Gate {
        if step.run.is_empty() {
            problem("a gate step needs `run`: the commands the daemon runs".into());
        }
        if step.run.iter().any(|c| c.trim().is_empty()) {
            problem("`run` holds an empty command".into());
        }
    } else if !step.run.is_empty() {
        problem(format!(
            "`run` is only for gate steps (`role = \"gate\"`), and this step's role is `{role}`"
        ));
    }
    if role != Role::Gate && step.unconfined {
        problem(format!(
            "`sandbox` is only for gate steps (an agent's sandbox is its profile's), and this step's role is `{role}`"
        ));
    }
    if !role.is_agent() {
        let set = [
            ("model", step.model.is_some()),
            ("prompt", step.prompt.is_some()),
            ("tools", step.tools.is_some()),
        ];
        for (key, _) in set.iter().filter(|(_, present)| *present) {
            problem(format!(
                "`{key}` is only for agent steps; a {role} step runs no agent"
            ));
        }
    }
    if step.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        problem("`model` is empty".into());
    }
    if step.tools.iter().flatten().any(|t| t.trim().is_empty()) {
        problem("`tools` holds an empty name".into());
    }
    if role == Role::Approval && step.timeout.is_some() {
        problem("`timeout` does not apply to approval steps: they wait for a person".into());
    }
    if step.max_fix_iterations.is_some()
        && !matches!(role, Role::Review | Role::Gate | Role::Approval)
    {
        problem(format!(
            "`max_fix_iterations` only applies to steps that can reject (review, gate, approval), not `{role}`"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPTS: [&str; 6] = ["refine", "implement", "review", "fix", "merge", "task"];

    fn has_prompt(name: &str) -> bool {
        PROMPTS.contains(&name)
    }

    /// The errors `check` finds; warnings are tested on their own.
    fn check(text: &str) -> Vec<String> {
        let formula = Formula::parse(text, "t.formula.toml").expect("parses");
        errors(&formula.check(&has_prompt))
    }

    #[test]
    fn a_merge_strategy_is_one_catalyst_knows() {
        let text = "[[steps]]\nid = \"m\"\ntitle = \"M\"\nrole = \"merge\"\nmerge_strategy = \"octopus\"\n";
        let problems = Formula::parse(text, "t.formula.toml").expect_err("refused");
        assert!(
            problems.iter().any(|p| p.step.as_deref() == Some("m")
                && p.message.contains("unknown `merge_strategy = \"octopus\"`")),
            "{problems:?}"
        );
        let text = text.replace("octopus", "squash");
        let formula = Formula::parse(&text, "t.formula.toml").expect("parses");
        assert_eq!(
            formula.steps[0].merge_strategy,
            Some(crate::domain::model::MergeStrategy::Squash)
        );
    }

    fn errors(problems: &[Problem]) -> Vec<String> {
        problems
            .iter()
            .filter(|p| !p.warning)
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_formula_without_a_merge_step_loads_without_a_warning_and_merge_false_refuses_one() {
        let text = "formula = \"f\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n";
        let no_merge = Formula::load(text, "t.formula.toml", &has_prompt).expect("loads");
        assert!(no_merge.warnings.is_empty(), "{:?}", no_merge.warnings);
        assert_eq!(
            no_merge.merge_plan(),
            crate::domain::formula::MergePlan::Added("merge".into())
        );
        let contradiction = "formula = \"f\"\nmerge = false\n[[steps]]\nid = \"m\"\ntitle = \"M\"\nrole = \"merge\"\n";
        assert_eq!(
            check(contradiction),
            ["t.formula.toml: m: a merge step in a formula that says `merge = false`"]
        );
        let no_prompt = Formula::parse(text, "t.formula.toml").expect("parses");
        let got = errors(&no_prompt.check(&|n| n != "merge"));
        assert_eq!(got, ["t.formula.toml: there is no prompt for role `merge` in the prompt set, which the merge step added to a formula without one needs (or say `merge = false`)"]);
    }

    /// A formula header; each case adds steps.
    const HEAD: &str = "formula = \"f\"\n[vars]\nknown = \"x\"\n";

    #[test]
    fn a_plain_beads_formula_loads_with_the_task_role() {
        let text = r#"
            formula = "mol-ci"
            description = "lint, test and build, then report"
            version = 1
            [[steps]]
            id = "lint"
            title = "Lint"
            [[steps]]
            id = "test"
            title = "Test"
            [[steps]]
            id = "build"
            title = "Build"
            [[steps]]
            id = "report"
            title = "Report"
            depends_on = ["lint", "test", "build"]
        "#;
        let formula = Formula::load(text, "ci.formula.toml", &has_prompt).expect("loads");
        assert!(formula.steps.iter().all(|s| s.role == Role::Task));
        let order: Vec<_> = formula.order().expect("acyclic");
        assert_eq!(order, [0, 1, 2, 3]);
    }

    #[test]
    fn every_check_names_its_step() {
        let cases: &[(&str, &str)] = &[
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\n[[steps]]\nid = \"a\"\ntitle = \"B\"\n",
             "t.formula.toml: a: step id `a` is used by more than one step"),
            ("[[steps]]\nid = \"A.b\"\ntitle = \"A\"\n",
             "t.formula.toml: A.b: step id `A.b` must match `[a-z0-9][a-z0-9_-]*`"),
            ("[[steps]]\nid = \"a.b\"\ntitle = \"A\"\n",
             "t.formula.toml: a.b: step id `a.b` must match"),
            ("[[steps]]\nid = \"fix-1\"\ntitle = \"A\"\n",
             "t.formula.toml: fix-1: step id `fix-1` starts with `fix-`, which is reserved"),
            (&format!("[[steps]]\nid = \"{}\"\ntitle = \"A\"\n", "a".repeat(33)),
             "is longer than 32 bytes"),
            ("[[steps]]\nid = \"a\"\n",
             "t.formula.toml: a: the step has no `title`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"ghost\"]\n",
             "t.formula.toml: a: `needs` names unknown step `ghost`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\n",
             "t.formula.toml: a: a gate step needs `run`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\" \"]\n",
             "t.formula.toml: a: `run` holds an empty command"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"review\"\nrun = [\"make\"]\n",
             "t.formula.toml: a: `run` is only for gate steps (`role = \"gate\"`), and this step's role is `review`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"nope\"\n",
             "t.formula.toml: a: prompt `nope` is not in the prompt set"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\napproval = true\nmodel = \"opus\"\n",
             "t.formula.toml: a: `model` is only for agent steps; a approval step runs no agent"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\napproval = true\ntimeout = 5\n",
             "`timeout` does not apply to approval steps"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"implement\"\nmax_fix_iterations = 2\n",
             "`max_fix_iterations` only applies to steps that can reject"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"implement\"\nrecheck = [\"a\"]\n",
             "a: `recheck` only applies to merge steps"),
            ("[[steps]]\nid = \"m\"\ntitle = \"M\"\nrole = \"merge\"\nrecheck = [\"ghost\"]\n",
             "m: `recheck` names unknown step `ghost`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"implement\"\nmerge_strategy = \"squash\"\n",
             "a: `merge_strategy` only applies to merge steps, not `implement`"),

            ("[[steps]]\nid = \"i\"\ntitle = \"I\"\nrole = \"implement\"\n[[steps]]\nid = \"m\"\ntitle = \"M\"\nrole = \"merge\"\nneeds = [\"i\"]\nrecheck = [\"i\"]\n",
             "m: `recheck` names `i`, an implement step: only gate and review steps run again"),
            ("[[steps]]\nid = \"g\"\ntitle = \"G\"\nrole = \"gate\"\nrun = [\"true\"]\n[[steps]]\nid = \"m\"\ntitle = \"M\"\nrole = \"merge\"\nrecheck = [\"g\"]\n",
             "m: `recheck` names `g`, which the merge step does not come after"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\"echo {{nope}}\"]\n",
             "t.formula.toml: a: `{{nope}}` in `run` is not a declared var"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\"echo {{title}}\"]\n",
             "a: `{{title}}` cannot be used in `run`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\"echo {{known}}\"]\n",
             "a: var `known` is used in `run`, so it needs a `pattern` (or an `enum`)"),
            ("[vars.lang]\npattern = \".*\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\"echo 'lint {{lang}}'\"]\n",
             "a: `{{lang}}` stands inside quotes in `run` (`echo 'lint {{lang}}'`)"),
            ("[vars.lang]\npattern = \".*\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nrole = \"gate\"\nrun = [\"echo \\\"lint {{lang}}\\\"\"]\n",
             "a: `{{lang}}` stands inside quotes in `run`"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nmetadata = { catalyst = 1 }\n",
             "a: metadata key `catalyst` is reserved"),
            ("[vars.e]\nenum = [\"a\"]\ndefault = \"b\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n",
             "the default `b` of var `e` is not in its `enum`"),
            ("[vars.\"bad-name\"]\ndefault = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n",
             "var name `bad-name` must match"),
            ("", "t.formula.toml: the formula has no steps"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"c\"]\n[[steps]]\nid = \"b\"\ntitle = \"B\"\nneeds = [\"a\"]\n[[steps]]\nid = \"c\"\ntitle = \"C\"\nneeds = [\"b\"]\n",
             "t.formula.toml: cycle in `needs`: a -> c -> b -> a"),
            ("[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"a\"]\n",
             "t.formula.toml: cycle in `needs`: a -> a"),
        ];
        for (steps, want) in cases {
            let got = check(&format!("{HEAD}{steps}"));
            assert!(
                got.iter().any(|p| p.contains(want)),
                "want {want:?} in {got:#?}"
            );
        }
    }

    #[test]
    fn formula_names_are_checked() {
        let steps = "[[steps]]\nid = \"a\"\ntitle = \"A\"\n";
        let got = check(steps);
        assert_eq!(
            got,
            ["t.formula.toml: the formula has no name: add `formula = \"<name>\"`"]
        );
        let got = check(&format!("formula = \"Big.Name\"\n{steps}"));
        assert_eq!(
            got,
            ["t.formula.toml: formula name `Big.Name` must match `[a-z0-9][a-z0-9_-]*`"]
        );
    }

    #[test]
    fn a_role_without_its_prompt_is_reported() {
        let formula = Formula::parse(
            "formula = \"f\"\n[[steps]]\nid = \"r\"\ntitle = \"R\"\nrole = \"review\"\n",
            "t.formula.toml",
        )
        .expect("parses");
        let got = errors(&formula.check(&|n| n != "review"));
        assert_eq!(
            got,
            ["t.formula.toml: r: there is no prompt for role `review` in the prompt set"]
        );
    }

    #[test]
    fn all_problems_come_at_once_across_parse_and_check() {
        let text = "formula = \"f\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nmodle = \"opus\"\nneeds = [\"b\"]\n[[steps]]\nid = \"b\"\ntitle = \"B\"\nneeds = [\"a\"]\n";
        let got = errors(&Formula::load(text, "t.formula.toml", &has_prompt).expect_err("refused"));
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(got[0], "t.formula.toml: a: unknown key `modle`");
        assert_eq!(got[1], "t.formula.toml: cycle in `needs`: a -> b -> a");
    }

    #[test]
    fn order_puts_needs_first_and_keeps_file_order_otherwise() {
        let text = r#"
            formula = "f"
            [[steps]]
            id = "report"
            title = "R"
            needs = ["build", "lint"]
            [[steps]]
            id = "lint"
            title = "L"
            [[steps]]
            id = "build"
            title = "B"
            needs = ["lint"]
            [[steps]]
            id = "docs"
            title = "D"
        "#;
        let formula = Formula::parse(text, "t").expect("parses");
        let ids: Vec<_> = formula
            .order()
            .expect("acyclic")
            .into_iter()
            .map(|i| formula.steps[i].id.as_str())
            .collect();
        assert_eq!(ids, ["lint", "build", "report", "docs"]);
    }
}
