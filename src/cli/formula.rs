//! `catalyst formula check` and `catalyst formula show`: formulas as files, without a daemon.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::daemon::Paths;
use crate::domain::formula::{
    expand_step, pour, unmatched_pointcuts, ComposeError, FormulaSet, Kind, MergePlan, PourError,
    Problem,
};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, DepType};
use crate::domain::prompt::PromptSet;

/// Checks `files` together, on top of the built-in formulas and the formula search path (the
/// workspace's formula folders, found from the current folder, and each file's own folder), so
/// that a workflow may `extends` or `expand` a formula in a file beside it. Returns every
/// problem of `files`, warnings included; the other files of the search path are read only to
/// be found, and their own problems are theirs.
pub fn check(files: &[PathBuf], prompts: &PromptSet) -> Vec<Problem> {
    let has_prompt = |name: &str| prompts.has(name);
    let (mut set, mut problems) = FormulaSet::builtin(&has_prompt);
    let given: Vec<PathBuf> = files.iter().map(|f| canonical(f)).collect();
    let mut dirs: Vec<PathBuf> = std::env::current_dir()
        .ok()
        .and_then(|d| Paths::discover(&d))
        .map(|paths| Paths::new(&paths).formula_dirs())
        .unwrap_or_default();
    for file in files {
        let dir = canonical(file.parent().unwrap_or(Path::new(".")));
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let mut theirs = Vec::new();
    for dir in &dirs {
        let Ok(found) = crate::daemon::load::formula_files(dir) else {
            continue;
        };
        for path in found.into_iter().filter(|p| !given.contains(&canonical(p))) {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let name = path.display().to_string();
                set.add_file(&text, &name, &has_prompt, &mut theirs);
            }
        }
    }
    let mut names = Vec::new();
    for file in files {
        let name = file.display().to_string();
        match std::fs::read_to_string(file) {
            Ok(text) => set.add_file(&text, &name, &has_prompt, &mut problems),
            Err(e) => problems.push(Problem::formula(&name, format!("cannot read: {e}"))),
        }
        names.push(name);
    }
    problems.extend(
        set.compose(&has_prompt)
            .into_iter()
            .filter(|p| names.contains(&p.file)),
    );
    problems
}

/// `path` made absolute and without links where it can be, to compare paths.
fn canonical(path: &Path) -> PathBuf {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// What `formula show` pours.
pub struct Show {
    pub name: String,
    pub vars: Vec<(String, String)>,
    /// `(step, expansion)`: steps to replace by an expansion's chain, before the aspects.
    pub expand: Vec<(String, String)>,
    pub aspects: Vec<String>,
    /// The workspace whose formulas (and prompts) count; the built-in ones only without one.
    pub workspace: Option<PathBuf>,
}

/// Why `formula show` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    #[error(transparent)]
    Prompts(#[from] crate::domain::prompt::PromptError),
    /// The workspace's formulas that do not load, one a line.
    #[error("{}", .0.join("\n"))]
    Formulas(Vec<String>),
    #[error("unknown formula `{0}`")]
    UnknownFormula(String),
    #[error("`{name}` is an {kind} formula: it is applied to a workflow, not poured (`--aspect`, or a step's `expand`)")]
    NotWorkflow { name: String, kind: &'static str },
    #[error("unknown expansion `{0}`")]
    UnknownExpansion(String),
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error(transparent)]
    Pour(#[from] PourError),
}

/// `name` poured for an example bead, as a tree of steps: each under the step it needs (a
/// step needing several is shown under the last of them, with the others named), with its
/// role and title. Warnings (an aspect's pointcut that matches no step) come first.
///
/// Another formula file of the workspace that is refused does not keep `name` from being
/// shown (the daemon runs the others too): a warning counts them. When `name` or an expansion
/// it asks for is missing, the refusals are the error, since one of them may be it.
pub fn show(req: &Show) -> Result<String, ShowError> {
    let (set, refused) = load(req.workspace.as_deref())?;
    let missing = |unknown: ShowError| {
        if refused.is_empty() {
            unknown
        } else {
            ShowError::Formulas(refused.clone())
        }
    };
    let formula = set
        .get(&req.name)
        .ok_or_else(|| missing(ShowError::UnknownFormula(req.name.clone())))?;
    if formula.kind != Kind::Workflow {
        return Err(ShowError::NotWorkflow {
            name: req.name.clone(),
            kind: if formula.kind == Kind::Aspect {
                "aspect"
            } else {
                "expansion"
            },
        });
    }
    let mut expanded = formula.clone();
    for (step, name) in &req.expand {
        let expansion = set
            .get(name)
            .ok_or_else(|| missing(ShowError::UnknownExpansion(name.clone())))?;
        expanded = expand_step(&expanded, step, expansion, &BTreeMap::new())?;
    }
    let formula = &expanded;
    let mut out = String::new();
    if !refused.is_empty() {
        let _ = writeln!(
            out,
            "warning: {} problem(s) in other formula files of the workspace (`catalyst formula check` says which)",
            refused.len()
        );
    }
    for aspect in &req.aspects {
        if let Some(a) = set.get(aspect) {
            for glob in unmatched_pointcuts(formula, a) {
                let _ = writeln!(
                    out,
                    "warning: aspect `{aspect}`: pointcut `{glob}` matches no step of `{}`",
                    req.name
                );
            }
        }
    }
    let cooked = set.with_aspects(formula, &req.aspects)?;
    let work = Bead::new(
        BeadId::new("cat-example").expect("a valid id"),
        "Example",
        crate::domain::time::Timestamp::parse("2026-01-01T00:00:00Z").expect("a valid time"),
    );
    let vars: BTreeMap<String, String> = req.vars.iter().cloned().collect();
    let steps = pour(&cooked, &work, &vars, work.created_at)?;
    let _ = writeln!(out, "{} ({} steps)", req.name, steps.len());
    // What beads' or Gas Town's runtime would act on (`execution`, `phase`, …): recorded.
    for (key, value) in &cooked.kept {
        let _ = writeln!(out, "  kept, not acted on: {key} = {value}");
    }
    // The values pouring used, and where each came from.
    for (name, def) in &cooked.vars {
        let value = vars.get(name).or(def.default.as_ref());
        let from = if vars.contains_key(name) {
            "given"
        } else {
            "default"
        };
        let _ = writeln!(
            out,
            "  var {name} = {:?} ({from})",
            value.map_or("", String::as_str)
        );
    }
    let _ = writeln!(
        out,
        "  merge: {}",
        match cooked.merge_plan() {
            MergePlan::Step(id) => format!("step `{id}`"),
            MergePlan::Added(id) => format!("step `{id}` (added: the formula has none)"),
            MergePlan::Off(why) => {
                format!("none ({why}): the work stays on its branch `catalyst/<bead>`")
            }
        }
    );
    let short = |id: &BeadId| {
        id.as_str()
            .rsplit_once('.')
            .map_or(id.to_string(), |(_, s)| s.to_owned())
    };
    let mut depth: BTreeMap<String, usize> = BTreeMap::new();
    for step in &steps {
        let needs: Vec<String> = step
            .dependencies
            .iter()
            .filter(|d| d.dep_type == DepType::Blocks)
            .filter_map(|d| d.depends_on_id.bead().map(short))
            .collect();
        let level = needs
            .iter()
            .filter_map(|n| depth.get(n))
            .max()
            .map_or(0, |d| d + 1);
        let id = short(&step.id);
        depth.insert(id.clone(), level);
        let role = step
            .step_meta()
            .map(|m| m.role.to_string())
            .unwrap_or_default();
        let after = if needs.len() > 1 {
            format!("  (after {})", needs.join(", "))
        } else {
            String::new()
        };
        let output = step
            .step_meta()
            .and_then(|m| m.output)
            .map(|o| format!("  (output: {o})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}└ {id} [{role}] {}{after}{output}",
            "  ".repeat(level),
            step.title
        );
    }
    Ok(out)
}

/// The formulas of `workspace` (its folders over the built-in ones, checked against its
/// prompts), or the built-in ones.
/// The errors that refused some of them come beside the set.
fn load(workspace: Option<&Path>) -> Result<(FormulaSet, Vec<String>), ShowError> {
    let Some(workspace) = workspace else {
        let prompts = PromptSet::builtin();
        return Ok((FormulaSet::builtin(&|n| prompts.has(n)).0, Vec::new()));
    };
    let paths = Paths::new(workspace);
    let prompts = if paths.prompts().exists() {
        crate::daemon::load::prompts(&paths.prompts())?
    } else {
        PromptSet::builtin()
    };
    let (set, problems) =
        crate::daemon::load::formulas(&paths.workspace, &paths.formula_dirs(), &|n| prompts.has(n));
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| !p.warning)
        .map(ToString::to_string)
        .collect();
    Ok((set, errors))
}
