//! The formulas a daemon knows: the built-in ones, then those in a workspace's folders.

use std::collections::BTreeMap;

use super::{Formula, Problem};

/// The formulas compiled into catalyst, by file name.
pub const BUILTIN: [(&str, &str); 2] = [
    (
        "feature.formula.toml",
        include_str!("../../../formulas/feature.formula.toml"),
    ),
    (
        "gated.formula.toml",
        include_str!("../../../formulas/gated.formula.toml"),
    ),
];

/// How the folder of built-in formulas is named in messages.
pub const BUILTIN_DIR: &str = "<built-in>/formulas";

/// Formulas by name, each one checked.
#[derive(Clone, Debug, Default)]
pub struct FormulaSet {
    formulas: BTreeMap<String, Formula>,
}

impl FormulaSet {
    /// The built-in formulas, checked against `has_prompt` (see [`Formula::check`]). With the
    /// built-in prompts there are never problems; the tests make sure of it.
    pub fn builtin(has_prompt: &dyn Fn(&str) -> bool) -> (FormulaSet, Vec<Problem>) {
        let mut set = FormulaSet::default();
        let mut problems = Vec::new();
        for (name, text) in BUILTIN {
            set.add_file(
                text,
                &format!("{BUILTIN_DIR}/{name}"),
                has_prompt,
                &mut problems,
            );
        }
        (set, problems)
    }

    /// Checks the formula file `text` (named `file` in messages) and adds it, replacing one of
    /// the same name; a file with problems is left out and its problems pushed. Warnings are
    /// pushed too, for a formula that is added all the same.
    pub fn add_file(
        &mut self,
        text: &str,
        file: &str,
        has_prompt: &dyn Fn(&str) -> bool,
        problems: &mut Vec<Problem>,
    ) {
        match Formula::load(text, file, has_prompt) {
            Ok(formula) => {
                problems.extend(formula.warnings.iter().cloned());
                self.insert(formula);
            }
            Err(found) => problems.extend(found),
        }
    }

    /// Composes every workflow built from other formulas (`extends`, `[compose]`, a step's
    /// `expand`), now that all formulas are known, and checks the result. A workflow whose
    /// composition fails is left out and its problems returned; the others are kept composed,
    /// ready to pour. Each is composed from the formulas as read, so the order does not matter.
    pub fn compose(&mut self, has_prompt: &dyn Fn(&str) -> bool) -> Vec<Problem> {
        let mut problems = Vec::new();
        let read = self.formulas.clone();
        let find = |n: &str| read.get(n);
        for (name, workflow) in &read {
            if !super::compose::needs_composing(workflow) {
                continue;
            }
            let composed = super::compose::compose(workflow, &find).and_then(|mut f| {
                let found = f.check(has_prompt);
                if found.iter().any(|p| !p.warning) {
                    return Err(found.into_iter().filter(|p| !p.warning).collect());
                }
                // The workflow's own warnings were reported when it was read.
                let new: Vec<Problem> = found
                    .into_iter()
                    .chain(std::mem::take(&mut f.warnings))
                    .filter(|p| !workflow.warnings.contains(p))
                    .collect();
                f.warnings = workflow.warnings.clone();
                problems.extend(new);
                Ok(f)
            });
            match composed {
                Ok(f) => {
                    self.formulas.insert(name.clone(), f);
                }
                Err(found) => {
                    self.formulas.remove(name);
                    problems.extend(found);
                }
            }
        }
        problems
    }

    /// `formula` with the aspects `names` applied, in order; an unknown name or one that is not
    /// an aspect is an error.
    pub fn with_aspects(
        &self,
        formula: &Formula,
        names: &[String],
    ) -> Result<Formula, super::ComposeError> {
        let mut out = formula.clone();
        for name in names {
            let aspect = self
                .formulas
                .get(name)
                .ok_or_else(|| super::ComposeError::UnknownAspect(name.clone()))?;
            out = super::compose::apply_aspect(&out, aspect)?;
        }
        Ok(out)
    }

    /// Adds a formula, replacing and returning one of the same name. The caller is expected to
    /// have checked it.
    pub fn insert(&mut self, formula: Formula) -> Option<Formula> {
        self.formulas.insert(formula.name.clone(), formula)
    }

    pub fn get(&self, name: &str) -> Option<&Formula> {
        self.formulas.get(name)
    }

    /// Formula names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.formulas.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Formula> {
        self.formulas.values()
    }

    pub fn len(&self) -> usize {
        self.formulas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.formulas.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::formula::pour;
    use crate::domain::id::BeadId;
    use crate::domain::model::{Bead, Role};
    use crate::domain::prompt::PromptSet;
    use crate::domain::time::Timestamp;

    fn roles(formula: &Formula) -> Vec<(&str, Role)> {
        formula
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.role))
            .collect()
    }

    #[test]
    fn the_shipped_formulas_pass_the_check_against_the_shipped_prompts() {
        let prompts = PromptSet::builtin();
        let (set, problems) = FormulaSet::builtin(&|n| prompts.has(n));
        assert!(problems.is_empty(), "{problems:#?}");
        assert_eq!(set.names().collect::<Vec<_>>(), ["feature", "gated"]);

        let feature = set.get("feature").expect("feature");
        assert_eq!(
            roles(feature),
            [
                ("refine", Role::Refine),
                ("implement", Role::Implement),
                ("review", Role::Review),
                ("merge", Role::Merge)
            ]
        );
        let gated = set.get("gated").expect("gated");
        assert_eq!(
            roles(gated),
            [
                ("refine", Role::Refine),
                ("implement", Role::Implement),
                ("checks", Role::Gate),
                ("review", Role::Review),
                ("approve", Role::Approval),
                ("merge", Role::Merge)
            ]
        );

        let at = Timestamp::parse("2026-01-01T00:00:00Z").expect("valid");
        let work = Bead::new(BeadId::new("cat-7").expect("valid"), "Add a flag", at);
        let steps = pour(gated, &work, &Default::default(), at).expect("pours");
        let checks = steps[2].step_meta().expect("meta");
        assert_eq!(
            checks.run,
            ["sh -c 'make test'"],
            "the var's default is substituted"
        );
        assert_eq!(steps[0].title, "Plan: Add a flag");
    }

    /// A set of the built-in formulas and `files`, composed; panics on an error.
    fn composed(files: &[&str]) -> (FormulaSet, Vec<String>) {
        let prompts = PromptSet::builtin();
        let has = |n: &str| prompts.has(n);
        let (mut set, mut problems) = FormulaSet::builtin(&has);
        for (i, text) in files.iter().enumerate() {
            set.add_file(text, &format!("f{i}.formula.toml"), &has, &mut problems);
        }
        problems.extend(set.compose(&has));
        let errors: Vec<_> = problems.iter().filter(|p| !p.warning).collect();
        assert!(errors.is_empty(), "{errors:#?}");
        (set, problems.iter().map(ToString::to_string).collect())
    }

    fn needs(f: &Formula) -> Vec<String> {
        f.steps
            .iter()
            .map(|s| format!("{} <- {}", s.id, s.needs.join(",")))
            .collect()
    }

    #[test]
    fn a_child_inherits_its_parents_steps_vars_and_rules_and_replaces_its_own() {
        let base = "formula = \"base\"\n[vars]\nlang = \"rust\"\n[[steps]]\nid = \"plan\"\ntitle = \"Plan\"\n[[steps]]\nid = \"build\"\ntitle = \"Build in {{lang}}\"\nneeds = [\"plan\"]\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\nneeds = [\"build\"]\n";
        let child = "formula = \"child\"\nextends = [\"base\"]\n[vars]\nlang = \"go\"\n[[steps]]\nid = \"build\"\ntitle = \"Build carefully in {{lang}}\"\nneeds = [\"plan\"]\n[[steps]]\nid = \"docs\"\ntitle = \"Docs\"\nneeds = [\"plan\"]\n";
        let (set, _) = composed(&[base, child]);
        let child = set.get("child").expect("child");
        assert_eq!(
            needs(child),
            [
                "plan <- ",
                "build <- plan",
                "merge <- build",
                "docs <- plan"
            ],
            "the parent's steps in its order, its own replacing the parent's in place"
        );
        assert_eq!(child.steps[1].title, "Build carefully in {{lang}}");
        assert_eq!(child.vars["lang"].default.as_deref(), Some("go"));
        assert!(child.extends.is_empty());

        let looped = "formula = \"a\"\nextends = [\"b\"]\n";
        let back = "formula = \"b\"\nextends = [\"a\"]\n";
        let prompts = PromptSet::builtin();
        let has = |n: &str| prompts.has(n);
        let (mut set, mut problems) = FormulaSet::builtin(&has);
        set.add_file(looped, "a.formula.toml", &has, &mut problems);
        set.add_file(back, "b.formula.toml", &has, &mut problems);
        set.add_file(
            "formula = \"c\"\nextends = [\"nope\"]\n",
            "c.formula.toml",
            &has,
            &mut problems,
        );
        let found: Vec<String> = set.compose(&has).iter().map(ToString::to_string).collect();
        assert!(
            found.contains(
                &"a.formula.toml: `extends` goes round in a circle: a -> b -> a".to_string()
            ),
            "{found:?}"
        );
        assert!(
            found.contains(&"c.formula.toml: `extends` names unknown formula `nope`".to_string()),
            "{found:?}"
        );
        assert!(set.get("a").is_none() && set.get("c").is_none(), "left out");
    }

    #[test]
    fn compose_rules_branch_expand_map_and_apply_aspects_in_order() {
        let polish = "formula = \"polish\"\ntype = \"expansion\"\n[[template]]\nid = \"{target}.draft\"\ntitle = \"Draft {target.title}\"\n[[template]]\nid = \"{target}.refine\"\ntitle = \"Refine\"\nneeds = [\"{target}.draft\"]\n";
        let audit = "formula = \"audit\"\ntype = \"aspect\"\n[[advice]]\ntarget = \"*\"\n[advice.after]\nid = \"{step.id}-audit\"\ntitle = \"Audit\"\n[[pointcuts]]\nlabel = \"risky\"\n[[pointcuts]]\ntype = \"bug\"\n[[pointcuts]]\nglob = \"deploy\"\n";
        let workflow = r#"
            formula = "w"
            [[steps]]
            id = "plan"
            title = "Plan"
            [[steps]]
            id = "api"
            title = "API"
            labels = ["risky"]
            [[steps]]
            id = "ui"
            title = "UI"
            [[steps]]
            id = "db"
            title = "Fix the DB"
            type = "bug"
            [[steps]]
            id = "join"
            title = "Join"
            [[steps]]
            id = "merge"
            title = "Merge"
            role = "merge"
            needs = ["join"]
            [[compose.branch]]
            from = "plan"
            steps = ["api", "ui", "db"]
            join = "join"
            [[compose.map]]
            select = "u*"
            with = "polish"
            [compose]
            aspects = ["audit"]
            bond_points = [{ id = "end", after_step = "join" }]
        "#;
        let (set, warnings) = composed(&[polish, audit, workflow]);
        assert_eq!(
            needs(set.get("w").expect("w")),
            [
                "plan <- ",
                "api <- plan",
                "api-audit <- api",
                "ui-draft <- plan",
                "ui-refine <- ui-draft",
                "db <- plan",
                "db-audit <- db",
                "join <- api-audit,ui-refine,db-audit",
                "merge <- join",
            ]
        );
        assert_eq!(
            warnings,
            [
                "f2.formula.toml: warning: compose: `bond_points` is kept but not acted on: formulas are bonded onto a running molecule by Gas Town; catalyst pours a fixed molecule",
                "f2.formula.toml: warning: compose: aspect `audit`: pointcut `deploy` matches no step",
            ]
        );
    }
}
