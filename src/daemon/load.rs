//! Reading the workflow's files from disk: `config.toml`, the prompts file and the formula
//! folders. Parsing and checking them is the domain's; this is only where the bytes come from.

use std::io;
use std::path::{Path, PathBuf};

use crate::domain::config::{Config, ConfigError};
use crate::domain::formula::{FormulaSet, Problem, FORMULA_EXT};
use crate::domain::prompt::{PromptError, PromptSet};

/// Loads `path`, or the defaults when it does not exist.
pub fn config(path: &Path) -> Result<Config, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Config::parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Config::default()),
        Err(source) => Err(ConfigError::Read {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The built-in prompts overridden by the file at `path`: its templates replace built-in ones
/// of the same name or add new ones, and its `contract`, if any, replaces the built-in
/// contract. Templates the file leaves out stay built in.
pub fn prompts(path: &Path) -> Result<PromptSet, PromptError> {
    let text = std::fs::read_to_string(path).map_err(|source| PromptError::Read {
        path: path.to_owned(),
        source,
    })?;
    PromptSet::builtin().overlay(&text, &path.display().to_string())
}

/// The built-in formulas, then every `*.formula.toml` in `dirs`, in order (each folder's
/// files sorted by name). A formula replaces an earlier one of the same name, so a
/// workspace can override a built-in formula.
///
/// A file with problems is left out and its problems returned, so one broken file does not
/// stop the daemon from running the others. A folder that does not exist is skipped
/// silently (`.beads/formulas/` usually does not); one that cannot be read is a problem.
pub fn formulas(dirs: &[PathBuf], has_prompt: &dyn Fn(&str) -> bool) -> (FormulaSet, Vec<Problem>) {
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
                Ok(text) => set.add_file(&text, &file, has_prompt, &mut problems),
                Err(e) => problems.push(Problem::formula(&file, format!("cannot read: {e}"))),
            }
        }
    }
    problems.extend(set.compose(has_prompt));
    (set, problems)
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

/// `catalyst-hook` beside the `catalyst` binary `catalyst`, when it is there: the hooks run it
/// (it starts in about half the time).
pub fn hook_bin(catalyst: &Path) -> Option<PathBuf> {
    Some(catalyst.parent()?.join("catalyst-hook")).filter(|p| p.is_file())
}

/// The program whose `__sandbox-net` is the first process of a `model-only` network:
/// `catalyst-hook` beside `catalyst` when it is there, else `catalyst` itself.
pub fn forwarder(catalyst: &Path) -> PathBuf {
    hook_bin(catalyst).unwrap_or_else(|| catalyst.to_owned())
}

/// The `catalyst` binary for hook commands: `catalyst_bin`, else a `catalyst` next to the
/// running executable (`catalystd` and `catalyst` are installed together; the demo runs
/// inside `catalyst` itself), else the first `catalyst` on `PATH`, else the bare name.
pub fn catalyst_bin(config: &Config) -> PathBuf {
    if let Some(bin) = &config.catalyst_bin {
        return bin.clone();
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("catalyst")))
        .filter(|p| p.is_file());
    let on_path = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("catalyst"))
                .find(|p| p.is_file())
        })
    };
    sibling
        .or_else(on_path)
        .unwrap_or_else(|| PathBuf::from("catalyst"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::prompt::PromptSet;

    #[test]
    fn the_forwarder_is_catalyst_hook_beside_catalyst_else_catalyst() {
        let dir = tempfile::tempdir().expect("temp dir");
        let catalyst = dir.path().join("catalyst");
        std::fs::write(&catalyst, "").expect("catalyst");
        assert_eq!(forwarder(&catalyst), catalyst, "no catalyst-hook installed");
        let hook = dir.path().join("catalyst-hook");
        std::fs::write(&hook, "").expect("catalyst-hook");
        assert_eq!(forwarder(&catalyst), hook);
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
            "formula = \"broken\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nwaits_for = \"all-children\"\nmodle = \"opus\"\n",
        );
        write("notes.toml", "not a formula");
        let missing = dir.path().join("missing");

        let (set, problems) = formulas(&[missing, dir.path().to_owned()], &|n| prompts.has(n));
        assert_eq!(set.names().collect::<Vec<_>>(), ["ci", "feature", "gated"]);
        assert_eq!(
            set.get("feature").expect("feature").steps.len(),
            1,
            "overridden"
        );
        // The overriding `feature` and `ci` have no merge step and `broken` keeps `waits_for`:
        // a warning each, not an error.
        let errors: Vec<_> = problems.iter().filter(|p| !p.warning).collect();
        assert_eq!(errors.len(), 1, "{problems:#?}");
        assert!(
            problems
                .iter()
                .filter(|p| p.warning)
                .all(|p| p.message.starts_with("no merge step")
                    || p.message.starts_with("`waits_for` is kept")),
            "{problems:#?}"
        );
        let shown = errors[0].to_string();
        let file = dir.path().join("broken.formula.toml");
        assert!(
            shown.starts_with(&format!("{}: a: unknown key `modle`", file.display())),
            "{shown}"
        );
    }

    #[test]
    fn a_missing_prompts_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = prompts(&dir.path().join("missing.toml")).expect_err("missing");
        assert!(
            err.to_string().starts_with("cannot read prompts `"),
            "{err}"
        );
    }
}
