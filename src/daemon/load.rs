//! Reading the workflow's files from disk: `config.toml`, the prompts file and the formula
//! folders. Parsing and checking them is the domain's; this is only where the bytes come from.
//!
//! No symbolic link is followed on the way: a bead's merge could otherwise bring a link
//! (`.beads -> ` a folder an agent writes) that turns an agent's files into the workflow, with
//! no approval asked for the files behind it. A link where a workflow file or folder should be
//! is an error that names it.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::domain::config::{Config, ConfigError};
use crate::domain::formula::{FormulaSet, Problem, FORMULA_EXT};
use crate::domain::prompt::{PromptError, PromptSet};

/// Loads `path`, or the defaults when it does not exist.
pub fn config(path: &Path) -> Result<Config, ConfigError> {
    match read_no_link(path) {
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
    let text = read_no_link(path).map_err(|source| PromptError::Read {
        path: path.to_owned(),
        source,
    })?;
    PromptSet::builtin().overlay(&text, &path.display().to_string())
}

/// Reads the file at `path` whole, refusing a symbolic link there.
fn read_no_link(path: &Path) -> io::Result<String> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => linked(path),
            _ => e,
        })?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// The error for a symbolic link where a workflow file or folder is read.
fn linked(path: &Path) -> io::Error {
    io::Error::other(format!(
        "`{}` is a symbolic link, and catalyst does not follow links when it reads formulas, prompts and config",
        path.display()
    ))
}

/// Fails when `dir`, or a folder between `root` and it, is a symbolic link.
fn no_link_below(root: &Path, dir: &Path) -> io::Result<()> {
    let Ok(below) = dir.strip_prefix(root) else {
        return Ok(());
    };
    let mut path = root.to_path_buf();
    for part in below.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(linked(&path)),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The built-in formulas, then every `*.formula.toml` in `dirs` (folders under `root`), in
/// order (each folder's files sorted by name). A formula replaces an earlier one of the same
/// name, so a workspace can override a built-in formula.
///
/// A file with problems is left out and its problems returned, so one broken file does not
/// stop the daemon from running the others. A folder that does not exist is skipped
/// silently (`.beads/formulas/` usually does not); one that cannot be read, or that is (or is
/// reached through) a symbolic link below `root`, is a problem, and so is a formula file that
/// is a link.
pub fn formulas(
    root: &Path,
    dirs: &[PathBuf],
    has_prompt: &dyn Fn(&str) -> bool,
) -> (FormulaSet, Vec<Problem>) {
    let (mut set, mut problems) = FormulaSet::builtin(has_prompt);
    for dir in dirs {
        let files = no_link_below(root, dir).and_then(|()| formula_files(dir));
        let files = match files {
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
            match read_no_link(&path) {
                Ok(text) => set.add_file(&text, &file, has_prompt, &mut problems),
                Err(e) => problems.push(Problem::formula(&file, format!("cannot read: {e}"))),
            }
        }
    }
    problems.extend(set.compose(has_prompt));
    (set, problems)
}

/// The formula files directly in `dir`, sorted by name.
pub(crate) fn formula_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let is_formula = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.ends_with(FORMULA_EXT) && !name.starts_with('.'));
        let kind = entry.file_type()?;
        if is_formula && (kind.is_file() || kind.is_symlink()) {
            // A link is read (and refused) so that it is reported, not skipped unseen.
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

        let (set, problems) = formulas(dir.path(), &[missing, dir.path().to_owned()], &|n| {
            prompts.has(n)
        });
        assert_eq!(set.names().collect::<Vec<_>>(), ["ci", "feature", "gated"]);
        assert_eq!(
            set.get("feature").expect("feature").steps.len(),
            1,
            "overridden"
        );
        // `broken` keeps `waits_for`: a warning, not an error (the overriding `feature` and
        // `ci` have no merge step, which pouring adds without a word).
        let errors: Vec<_> = problems.iter().filter(|p| !p.warning).collect();
        assert_eq!(errors.len(), 1, "{problems:#?}");
        assert!(
            problems
                .iter()
                .filter(|p| p.warning)
                .all(|p| p.message.starts_with("`waits_for` is kept")),
            "{problems:#?}"
        );
        let shown = errors[0].to_string();
        let file = dir.path().join("broken.formula.toml");
        assert!(
            shown.starts_with(&format!("{}: a: unknown key `modle`", file.display())),
            "{shown}"
        );
    }

    /// A merged `.beads -> <a folder an agent writes>` made the daemon load a formula from
    /// the agent's folder, and run its gate, with no approval asked for the files behind it.
    #[test]
    fn a_linked_formula_folder_or_file_is_a_problem_and_not_read() {
        use std::os::unix::fs::symlink;
        let prompts = PromptSet::builtin();
        let workspace = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(elsewhere.path().join("formulas")).expect("mkdir");
        let planted = "formula = \"planted\"\n[[steps]]\nid = \"g\"\ntitle = \"G\"\nrole = \"gate\"\nrun = [\"true\"]\n";
        std::fs::write(
            elsewhere.path().join("formulas/planted.formula.toml"),
            planted,
        )
        .expect("write");
        symlink(elsewhere.path(), workspace.path().join(".beads")).expect("link the folder");
        let own = workspace.path().join(".catalyst/formulas");
        std::fs::create_dir_all(&own).expect("mkdir");
        symlink(
            elsewhere.path().join("formulas/planted.formula.toml"),
            own.join("linked.formula.toml"),
        )
        .expect("link the file");
        let dirs = [workspace.path().join(".beads/formulas"), own.clone()];
        let (set, problems) = formulas(workspace.path(), &dirs, &|n| prompts.has(n));
        assert!(
            set.get("planted").is_none(),
            "{:?}",
            set.names().collect::<Vec<_>>()
        );
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        for name in [".beads`", "linked.formula.toml`"] {
            assert!(
                shown
                    .iter()
                    .any(|p| p.contains(name) && p.contains("symbolic link")),
                "{name} in {shown:#?}"
            );
        }
        let config = workspace.path().join(".catalyst/config.toml");
        symlink(
            elsewhere.path().join("formulas/planted.formula.toml"),
            &config,
        )
        .expect("link");
        let refused = super::config(&config).expect_err("a linked config");
        assert!(refused.to_string().contains("symbolic link"), "{refused}");
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
