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

    /// Applies every workflow's inline expansions (`expand`), now that all formulas are known,
    /// and checks the result. A workflow whose expansion fails is left out and its problems
    /// returned; the others are kept expanded, ready to pour.
    pub fn compose(&mut self, has_prompt: &dyn Fn(&str) -> bool) -> Vec<Problem> {
        let mut problems = Vec::new();
        let names: Vec<String> = self
            .formulas
            .values()
            .filter(|f| f.steps.iter().any(|s| s.expand.is_some()))
            .map(|f| f.name.clone())
            .collect();
        for name in names {
            let Some(workflow) = self.formulas.get(&name) else {
                continue;
            };
            let find = |n: &str| self.formulas.get(n);
            let composed = super::compose::expand_all(workflow, &find).and_then(|f| {
                let errors: Vec<Problem> = f
                    .check(has_prompt)
                    .into_iter()
                    .filter(|p| !p.warning)
                    .collect();
                if errors.is_empty() {
                    Ok(f)
                } else {
                    Err(errors)
                }
            });
            match composed {
                Ok(f) => {
                    self.formulas.insert(name, f);
                }
                Err(found) => {
                    self.formulas.remove(&name);
                    problems.extend(found);
                }
            }
        }
        problems
    }

    /// `formula` with the aspects `names` applied, in order; an unknown name or one that is not
    /// an aspect is an error.
    pub fn with_aspects(&self, formula: &Formula, names: &[String]) -> Result<Formula, String> {
        let mut out = formula.clone();
        for name in names {
            let aspect = self
                .formulas
                .get(name)
                .ok_or_else(|| format!("unknown aspect `{name}`"))?;
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
}
