//! The formulas a daemon knows: the built-in ones, then those in a workspace's folders.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{Formula, Problem, FORMULA_EXT};

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
            set.add(
                text,
                &format!("{BUILTIN_DIR}/{name}"),
                has_prompt,
                &mut problems,
            );
        }
        (set, problems)
    }

    /// The built-in formulas, then every `*.formula.toml` in `dirs`, in order (each folder's
    /// files sorted by name). A formula replaces an earlier one of the same name, so a
    /// workspace can override a built-in formula.
    ///
    /// A file with problems is left out and its problems returned, so one broken file does not
    /// stop the daemon from running the others. A folder that does not exist is skipped
    /// silently (`.beads/formulas/` usually does not); one that cannot be read is a problem.
    pub fn load(dirs: &[PathBuf], has_prompt: &dyn Fn(&str) -> bool) -> (FormulaSet, Vec<Problem>) {
        let (mut set, mut problems) = FormulaSet::builtin(has_prompt);
        for dir in dirs {
            let files = match formula_files(dir) {
                Ok(files) => files,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    problems.push(Problem::formula(
                        &dir.display().to_string(),
                        format!("cannot read the folder: {e}"),
                    ));
                    continue;
                }
            };
            for path in files {
                let file = path.display().to_string();
                match std::fs::read_to_string(&path) {
                    Ok(text) => set.add(&text, &file, has_prompt, &mut problems),
                    Err(e) => problems.push(Problem::formula(&file, format!("cannot read: {e}"))),
                }
            }
        }
        (set, problems)
    }

    fn add(
        &mut self,
        text: &str,
        file: &str,
        has_prompt: &dyn Fn(&str) -> bool,
        problems: &mut Vec<Problem>,
    ) {
        match Formula::load(text, file, has_prompt) {
            Ok(formula) => {
                self.insert(formula);
            }
            Err(found) => problems.extend(found),
        }
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

/// The formula files directly in `dir`, sorted by name.
fn formula_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let is_formula = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.ends_with(FORMULA_EXT) && !name.starts_with('.'));
        if is_formula && entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
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
            ["make test"],
            "the var's default is substituted"
        );
        assert_eq!(steps[0].title, "Plan: Add a flag");
    }

    #[test]
    fn workspace_folders_add_and_override_and_report_broken_files() {
        let prompts = PromptSet::builtin();
        let dir = tempfile::tempdir().expect("tempdir");
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
        write(
            "feature.formula.toml",
            "formula = \"feature\"\n[[steps]]\nid = \"only\"\ntitle = \"Just do it\"\n",
        );
        write(
            "ci.formula.toml",
            "formula = \"ci\"\n[[steps]]\nid = \"test\"\ntitle = \"T\"\nrole = \"gate\"\nrun = [\"make test\"]\n",
        );
        write(
            "broken.formula.toml",
            "formula = \"broken\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nloop = { count = 2 }\n",
        );
        write("notes.toml", "not a formula");
        let missing = dir.path().join("missing");

        let (set, problems) =
            FormulaSet::load(&[missing, dir.path().to_owned()], &|n| prompts.has(n));
        assert_eq!(set.names().collect::<Vec<_>>(), ["ci", "feature", "gated"]);
        assert_eq!(
            set.get("feature").expect("feature").steps.len(),
            1,
            "overridden"
        );
        assert_eq!(problems.len(), 1, "{problems:#?}");
        let shown = problems[0].to_string();
        let file = dir.path().join("broken.formula.toml");
        assert!(
            shown.starts_with(&format!("{}: a: `loop` is not supported", file.display())),
            "{shown}"
        );
    }
}
