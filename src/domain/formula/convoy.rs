//! Gas Town's `convoy` formulas, read as the workflow they pour into: `[inputs]` become
//! variables, each of `[[legs]]` a step (the legs need nothing of each other, so they run side
//! by side), `[synthesis]` a step that needs the
//! legs it names (all of them when it names none), and a merge step after it. `[prompts] base` is added to every leg's
//! description; `[output]` gives the legs and the synthesis the file each must leave behind.

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::reader::Reader;
use super::{Problem, Step, VarDef};
use crate::domain::model::Role;

/// The convoy's own tables, taken out of the formula's.
pub(super) struct Parts {
    inputs: Option<Table>,
    legs: Option<Value>,
    synthesis: Option<Table>,
    prompts: Option<Table>,
    output: Option<Table>,
}

/// Input keys Gas Town's runtime reads and catalyst does not.
const KEPT_INPUT: &[(&str, &str)] = &[(
    "required_unless",
    "an input is required or not; give it a default instead",
)];

/// The id of the synthesis step and of the merge step after it.
pub(super) const SYNTHESIS: &str = "synthesis";
const MERGE: &str = "merge";

pub(super) fn take(r: &mut Reader<'_>) -> Parts {
    Parts {
        inputs: r.table("inputs"),
        legs: r.take("legs"),
        synthesis: r.table("synthesis"),
        prompts: r.table("prompts"),
        output: r.table("output"),
    }
}

/// The variables and steps a convoy pours as.
pub(super) fn pour_plan(
    file: &str,
    parts: Parts,
    problems: &mut Vec<Problem>,
) -> (BTreeMap<String, VarDef>, Vec<Step>) {
    let vars = parts
        .inputs
        .map(|t| super::vars::parse_vars(file, t, KEPT_INPUT, problems))
        .unwrap_or_default();
    let base = parts
        .prompts
        .and_then(|mut p| match p.remove("base") {
            Some(Value::String(base)) => Some(base),
            _ => None,
        })
        .unwrap_or_default();
    let output = parts.output.map(|t| Output::read(file, t, problems));
    let mut steps = Vec::new();
    for (i, leg) in array(file, "legs", parts.legs, problems)
        .into_iter()
        .enumerate()
    {
        let mut r = Reader::new(file, None, leg, problems);
        r.context = format!("legs[{i}]: ");
        let id = r.string("id").unwrap_or_default();
        if id.is_empty() {
            r.problem("a leg needs an `id`");
        }
        let title = r.string("title").unwrap_or_else(|| id.clone());
        let mut description = r.string("description").unwrap_or_default();
        if let Some(focus) = r.string("focus") {
            description = format!("{description}\n\nFocus: {focus}");
        }
        r.finish(&[], &[]);
        if !base.is_empty() {
            description = format!("{description}\n\n{base}");
        }
        let mut step = Step::new(&id, Role::Task, &title, description.trim().to_owned());
        step.output = output.as_ref().and_then(|o| o.leg(&id));
        steps.push(step);
    }
    if steps.is_empty() {
        problems.push(Problem::formula(
            file,
            "a convoy needs at least one of `[[legs]]`",
        ));
    }
    let legs: Vec<String> = steps.iter().map(|s| s.id.clone()).collect();
    let mut r = Reader::new(file, None, parts.synthesis.unwrap_or_default(), problems);
    r.context = "synthesis: ".into();
    let title = r
        .string("title")
        .unwrap_or_else(|| "Synthesis: {{title}}".to_owned());
    let description = r.string("description").unwrap_or_default();
    let depends_on = r.strings("depends_on").unwrap_or_default();
    r.finish(&[], &[]);
    let mut synthesis = Step::new(SYNTHESIS, Role::Task, &title, description);
    synthesis.needs = if depends_on.is_empty() {
        legs
    } else {
        depends_on
    };
    synthesis.output = output.as_ref().and_then(|o| o.synthesis.clone());
    steps.push(synthesis);
    let mut merge = Step::new(
        MERGE,
        Role::Merge,
        "Merge: {{title}}",
        "Merge the convoy's work into the target branch.".into(),
    );
    merge.needs = vec![SYNTHESIS.to_owned()];
    steps.push(merge);
    (vars, steps)
}

fn array(file: &str, key: &str, raw: Option<Value>, problems: &mut Vec<Problem>) -> Vec<Table> {
    let items = match raw {
        None => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            problems.push(Problem::formula(
                file,
                format!("`{key}` must be an array of tables (`[[{key}]]`)"),
            ));
            return Vec::new();
        }
    };
    items
        .into_iter()
        .filter_map(|item| match item {
            Value::Table(t) => Some(t),
            _ => {
                problems.push(Problem::formula(
                    file,
                    format!("each of `{key}` must be a table"),
                ));
                None
            }
        })
        .collect()
}

/// `[output]`: `directory`, `leg_pattern` (with `{{leg.id}}`) and `synthesis`.
struct Output {
    directory: String,
    leg_pattern: Option<String>,
    synthesis: Option<String>,
}

impl Output {
    fn read(file: &str, table: Table, problems: &mut Vec<Problem>) -> Output {
        let mut r = Reader::new(file, None, table, problems);
        r.context = "output: ".into();
        let directory = r.string("directory").unwrap_or_default();
        let leg_pattern = r.string("leg_pattern");
        let synthesis = r.string("synthesis");
        r.finish(&[], &[]);
        let synthesis = synthesis.map(|s| join(&directory, &s));
        Output {
            directory,
            leg_pattern,
            synthesis,
        }
    }

    fn leg(&self, id: &str) -> Option<String> {
        let pattern = self.leg_pattern.as_ref()?;
        let name = pattern.replace("{{leg.id}}", id);
        Some(join(&self.directory, &name))
    }
}

fn join(directory: &str, name: &str) -> String {
    let directory = directory.trim_end_matches('/');
    if directory.is_empty() {
        name.to_owned()
    } else {
        format!("{directory}/{name}")
    }
}
