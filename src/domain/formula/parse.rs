//! TOML to [`Formula`], refusing by name every key catalyst does not support.
//!
//! The file is read into a plain TOML table and each known key is taken out of it; whatever is
//! left is reported, with a hint when it is a beads feature catalyst does not implement. That is
//! more code than a `#[derive(Deserialize)]`, but it lets one pass report every problem in the
//! file (serde stops at the first) with the step it is in.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use toml::{Table, Value};

use super::convoy;
use super::reader::Reader;
use super::vars::substitute;
use super::{Advice, Branch, Compose, ExpandRule, Formula, Kind, Pointcut, Problem, Step};
use crate::domain::model::{JsonMap, MergeStrategy, Role};

/// beads keys at the top of a formula that catalyst does not implement, with what to do instead.
const UNSUPPORTED_TOP: &[(&str, &str)] = &[
    (
        "template",
        "`[[template]]` belongs in a `type = \"expansion\"` formula",
    ),
    (
        "advice",
        "`[[advice]]` belongs in a `type = \"aspect\"` formula",
    ),
    (
        "pointcuts",
        "`[[pointcuts]]` belongs in a `type = \"aspect\"` formula",
    ),
    ("aspects", "`aspects` belongs in `[compose]`"),
    (
        "inputs",
        "`[inputs]` belongs in a `type = \"convoy\"` formula",
    ),
    (
        "legs",
        "`[[legs]]` belongs in a `type = \"convoy\"` formula",
    ),
    (
        "synthesis",
        "`[synthesis]` belongs in a `type = \"convoy\"` formula",
    ),
    (
        "prompts",
        "`[prompts]` belongs in a `type = \"convoy\"` formula",
    ),
    (
        "output",
        "`[output]` belongs in a `type = \"convoy\"` formula",
    ),
];

/// `[compose]` keys that bond formulas at run time in Gas Town: kept, with a warning.
const KEPT_COMPOSE: &[(&str, &str)] = &[
    (
        "bond_points",
        "formulas are bonded onto a running molecule by Gas Town; catalyst pours a fixed molecule",
    ),
    (
        "hooks",
        "Gas Town attaches formulas by label at run time; apply an aspect with a bead's `aspect:<name>` label",
    ),
    (
        "gate",
        "Gas Town's patrol evaluates these conditions at run time; use a step `gate` or a `role = \"gate\"` step",
    ),
];

/// Top-level keys of beads and Gas Town that only matter to their own runtime: kept, with a
/// warning, and not acted on.
const KEPT_TOP: &[(&str, &str)] = &[
    (
        "phase",
        "catalyst always pours the steps as beads; there are no wisps",
    ),
    ("pour", "catalyst always pours every step as a bead"),
    (
        "source",
        "the file a formula was read from is known to catalyst anyway",
    ),
    (
        "execution",
        "Gas Town's way to spread the work; catalyst schedules steps by `needs`",
    ),
    (
        "requires_skills",
        "agent skills are the agent profile's business",
    ),
    (
        "runbooks",
        "runbooks are not given to agents; put what they need in the steps",
    ),
    ("squash", "Gas Town's summary of a finished molecule"),
    (
        "requires",
        "Gas City's compiler requirements (formula v2); catalyst reads the formula itself",
    ),
    ("tags", "tags describe the formula; a step's `tags` become its labels"),
    ("presets", "Gas Town's leg presets for `gt formula run`"),
    (
        "rollback_steps",
        "Gas Town runs them when the molecule fails; catalyst blocks the bead and leaves its work on its branch",
    ),
    (
        "review_only",
        "a review-only formula changes no code: no merge step is added when it is poured (as with `merge = false`)",
    ),
];

/// Step keys of beads and Gas Town that catalyst keeps (on the step bead's metadata) with a
/// warning, and does not act on.
const KEPT_STEP: &[(&str, &str)] = &[
    ("assignee", "catalyst assigns steps to agents itself"),
    (
        "requires_skills",
        "agent skills are the agent profile's business",
    ),
    (
        "execution",
        "Gas Town's way to spread the work; catalyst schedules steps by `needs`",
    ),
    (
        "parallel",
        "steps whose `needs` are met run in parallel anyway, within `max_agents`",
    ),
    (
        "acceptance",
        "put acceptance criteria in the step's description for the agent to read",
    ),
    (
        "review_only",
        "the step's agent is told what to do by its role and description",
    ),
    (
        "drain",
        "Gas City drains a worker session after the step; catalyst starts an agent per attempt",
    ),
    (
        "description_file",
        "catalyst does not read step text from other files; put it in `description`",
    ),
    (
        "waits_for",
        "it waits for children bonded at run time, which catalyst does not bond; the step waits for its `needs`",
    ),
    (
        "on_complete",
        "bonding a formula for each item of a step's output happens at run time in Gas Town; catalyst pours a fixed molecule",
    ),
];

/// The step `type`s beads knows; a step bead keeps it as its issue type.
const STEP_TYPES: [&str; 5] = ["task", "bug", "feature", "epic", "chore"];

/// beads step keys catalyst does not implement, with what to do instead.
const UNSUPPORTED_STEP: &[(&str, &str)] = &[(
    "advice",
    "`[[advice]]` belongs in a `type = \"aspect\"` formula",
)];

/// Reads `text`. The formula is `None` only when the text is not TOML at all; otherwise it
/// holds everything that could be read, so the semantic checks can still run and report their
/// problems alongside the structural ones.
pub(super) fn parse(text: &str, file: &str) -> (Option<Formula>, Vec<Problem>) {
    let mut problems = Vec::new();
    let table: Table = match toml::from_str(text) {
        Ok(table) => table,
        Err(err) => {
            problems.push(Problem::formula(file, toml_error(text, &err)));
            return (None, problems);
        }
    };
    let mut r = Reader::new(file, None, table, &mut problems);
    let name = r.string("formula").unwrap_or_default();
    let description = r.string("description").unwrap_or_default();
    let version = r
        .integer("version", 1, u32::MAX.into())
        .map_or(1, |v| v as u32);
    let (kind, convoy) = match r.string("type").as_deref() {
        None | Some("workflow") => (Kind::Workflow, false),
        Some("expansion") => (Kind::Expansion, false),
        Some("aspect") => (Kind::Aspect, false),
        Some("convoy") => (Kind::Workflow, true),
        Some(t) => {
            r.problem(format!(
                "unknown `type = \"{t}\"` (expected \"workflow\", \"expansion\", \"aspect\" or \"convoy\")"
            ));
            (Kind::Workflow, false)
        }
    };
    let raw_vars = r.table("vars");
    let raw_steps = r.take("steps");
    let raw_template = (kind == Kind::Expansion)
        .then(|| r.take("template"))
        .flatten();
    let raw_advice = (kind == Kind::Aspect).then(|| r.take("advice")).flatten();
    let pointcuts = if kind == Kind::Aspect {
        parse_pointcuts(&mut r)
    } else {
        Vec::new()
    };
    let raw_convoy = convoy.then(|| convoy::take(&mut r));
    let extends = r.strings("extends").unwrap_or_default();
    let merge = r.bool("merge");
    let raw_compose = r.table("compose");
    let mut kept = table_to_json(r.finish(UNSUPPORTED_TOP, KEPT_TOP));
    let compose = raw_compose
        .map(|t| parse_compose(file, t, &mut kept, &mut problems))
        .unwrap_or_default();

    let mut vars = raw_vars
        .map(|t| super::vars::parse_vars(file, t, &[], &mut problems))
        .unwrap_or_default();
    let cx = Cx {
        file,
        defaults: vars
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.default.clone()?)))
            .collect(),
    };
    let mut steps = super::compose::flatten(parse_steps(&cx, "steps", raw_steps, &mut problems));
    let template = parse_steps(&cx, "template", raw_template, &mut problems);
    let advice = raw_advice
        .map(|a| parse_advice(&cx, a, &mut problems))
        .unwrap_or_default();
    if let Some(parts) = raw_convoy {
        let (inputs, mut legs) = convoy::pour_plan(file, parts, &mut problems);
        if merge == Some(false) {
            // A convoy's merge step is catalyst's, not the author's: `merge = false` drops it.
            legs.retain(|s| s.role != Role::Merge);
        }
        vars.extend(inputs);
        steps.extend(legs);
    }
    let mut formula = Formula {
        name,
        description,
        version,
        vars,
        steps,
        file: file.to_owned(),
        kept,
        warnings: Vec::new(),
        kind,
        template,
        advice,
        pointcuts,
        extends,
        compose,
        merge,
    };
    if !super::compose::needs_composing(&formula) {
        formula.steps = super::compose::gates(std::mem::take(&mut formula.steps));
    }
    (Some(formula), problems)
}

/// What reading a step needs to know of its formula.
struct Cx<'a> {
    file: &'a str,
    /// The defaults of the formula's vars, which a loop's `range` may use.
    defaults: BTreeMap<String, String>,
}

/// An array of step tables under `key` (`steps`, `template`), each read as a step.
fn parse_steps(
    cx: &Cx<'_>,
    key: &str,
    raw: Option<Value>,
    problems: &mut Vec<Problem>,
) -> Vec<Step> {
    let file = cx.file;
    match raw {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| parse_step(cx, i, item, problems))
            .collect(),
        Some(other) => {
            problems.push(Problem::formula(
                file,
                format!(
                    "`{key}` must be an array of tables (`[[{key}]]`), not {}",
                    other.type_str()
                ),
            ));
            Vec::new()
        }
    }
}

/// `[[pointcuts]]`: each a table with a `glob` on step ids, a step `type` or a `label`.
fn parse_pointcuts(r: &mut Reader<'_>) -> Vec<Pointcut> {
    let Some(raw) = r.take("pointcuts") else {
        return Vec::new();
    };
    let Value::Array(items) = raw else {
        r.problem("`pointcuts` must be an array of tables (`[[pointcuts]]`)");
        return Vec::new();
    };
    let mut pointcuts = Vec::new();
    for item in items {
        let Value::Table(mut t) = item else {
            r.problem("a pointcut must be a table with a `glob`, a `type` or a `label`");
            continue;
        };
        let mut take = |key: &str| match t.remove(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let pointcut = Pointcut {
            glob: take("glob"),
            issue_type: take("type"),
            label: take("label"),
        };
        if !t.is_empty() || pointcut == Pointcut::default() {
            r.problem("a pointcut is a table of strings: `glob` (on step ids), `type` or `label`");
            continue;
        }
        pointcuts.push(pointcut);
    }
    pointcuts
}

/// `[compose]`: `[[expand]]` (`target`, `with`, `vars`), `[[map]]` (`select`, `with`, `vars`),
/// `[[branch]]` (`from`, `steps`, `join`) and `aspects`; the run-time keys are put in `kept`
/// (as `compose.<key>`) with a warning.
fn parse_compose(
    file: &str,
    table: Table,
    kept: &mut JsonMap,
    problems: &mut Vec<Problem>,
) -> Compose {
    let mut r = Reader::new(file, None, table, problems);
    r.context = "compose: ".into();
    let aspects = r.strings("aspects").unwrap_or_default();
    let expand = r.take("expand");
    let map = r.take("map");
    let branch = r.take("branch");
    for (key, value) in r.finish(&[], KEPT_COMPOSE) {
        kept.insert(format!("compose.{key}"), to_json(value));
    }
    let mut compose = Compose {
        aspects,
        ..Compose::default()
    };
    for (key, raw, target, glob) in [
        ("expand", expand, "target", false),
        ("map", map, "select", true),
    ] {
        for (i, table) in rule_tables(file, key, raw, problems) {
            let mut r = Reader::new(file, None, table, problems);
            r.context = format!("compose.{key}[{i}]: ");
            let select = r.string(target);
            let with = r.string("with");
            let vars = r.table("vars").map(string_map).unwrap_or_default();
            match (select, with) {
                (Some(select), Some(with)) => compose.expand.push(ExpandRule {
                    select,
                    glob,
                    with,
                    vars,
                }),
                _ => r.problem(format!("needs `{target}` and `with`")),
            }
            r.finish(&[], &[]);
        }
    }
    for (i, table) in rule_tables(file, "branch", branch, problems) {
        let mut r = Reader::new(file, None, table, problems);
        r.context = format!("compose.branch[{i}]: ");
        let from = r.string("from");
        let steps = r.strings("steps").unwrap_or_default();
        let join = r.string("join");
        match (from, join) {
            (Some(from), Some(join)) if !steps.is_empty() => {
                compose.branch.push(Branch { from, steps, join })
            }
            _ => r.problem("needs `from`, `steps` and `join`"),
        }
        r.finish(&[], &[]);
    }
    compose
}

/// The tables of `[[compose.<key>]]`, numbered; anything else is a problem.
fn rule_tables(
    file: &str,
    key: &str,
    raw: Option<Value>,
    problems: &mut Vec<Problem>,
) -> Vec<(usize, Table)> {
    let items = match raw {
        None => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => vec![Value::Boolean(false)],
    };
    let mut tables = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::Table(t) => tables.push((i, t)),
            _ => problems.push(Problem::formula(
                file,
                format!("compose: `{key}` must be an array of tables (`[[compose.{key}]]`)"),
            )),
        }
    }
    tables
}

/// The string values of a TOML table (`vars = { k = "v" }`); others are dropped.
fn string_map(table: Table) -> BTreeMap<String, String> {
    table
        .into_iter()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect()
}

/// `[[advice]]`: `target` (a glob on step ids), `before` and `after` (a step table each, or an
/// array of them), and `around` with `before` and `after` arrays.
fn parse_advice(cx: &Cx<'_>, raw: Value, problems: &mut Vec<Problem>) -> Vec<Advice> {
    let file = cx.file;
    let Value::Array(items) = raw else {
        problems.push(Problem::formula(
            file,
            "`advice` must be an array of tables (`[[advice]]`)",
        ));
        return Vec::new();
    };
    let mut advice = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Table(table) = item else {
            problems.push(Problem::formula(
                file,
                format!("advice[{i}] must be a table"),
            ));
            continue;
        };
        let mut r = Reader::new(file, None, table, problems);
        r.context = format!("advice[{i}]: ");
        let target = r.string("target").unwrap_or_default();
        if target.is_empty() {
            r.problem("no `target`: the glob on step ids the advice applies to");
        }
        let mut before = r.take("before").map(steps_of).unwrap_or_default();
        let mut after = r.take("after").map(steps_of).unwrap_or_default();
        if let Some(mut around) = r.table("around") {
            before.extend(around.remove("before").map(steps_of).unwrap_or_default());
            after.extend(around.remove("after").map(steps_of).unwrap_or_default());
            if !around.is_empty() {
                r.problem("`around` takes only `before` and `after`");
            }
        }
        r.finish(&[], &[]);
        let mut parse = |items: Vec<Value>| -> Vec<Step> {
            items
                .into_iter()
                .enumerate()
                .filter_map(|(j, item)| parse_step(cx, j, item, problems))
                .collect()
        };
        let (before, after) = (parse(before), parse(after));
        if before.is_empty() && after.is_empty() {
            problems.push(Problem::formula(
                file,
                format!("advice[{i}]: no `before`, `after` or `around` steps"),
            ));
        }
        advice.push(Advice {
            target,
            before,
            after,
        });
    }
    advice
}

/// One step table or an array of them.
fn steps_of(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        one => vec![one],
    }
}

fn parse_step(cx: &Cx<'_>, index: usize, item: Value, problems: &mut Vec<Problem>) -> Option<Step> {
    let file = cx.file;
    let label = format!("steps[{index}]");
    let Value::Table(table) = item else {
        problems.push(Problem::step(
            file,
            &label,
            format!("a step must be a table, not {}", item.type_str()),
        ));
        return None;
    };
    let id = match table.get("id") {
        Some(Value::String(id)) => Some(id.clone()),
        _ => None,
    };
    let mut r = Reader::new(file, Some(id.clone().unwrap_or(label)), table, problems);
    if r.string("id").is_none() {
        r.problem("the step has no `id`");
    }
    let title = r.string("title").unwrap_or_default();
    let description = r.string("description").unwrap_or_default();
    let notes = r.string("notes").unwrap_or_default();
    let priority = r.integer("priority", 0, 4).map(|p| p as u8);
    let mut needs = r.strings("needs").unwrap_or_default();
    for dep in r.strings("depends_on").unwrap_or_default() {
        if !needs.contains(&dep) {
            needs.push(dep);
        }
    }
    let mut labels = r.strings("labels").unwrap_or_default();
    // Gas City's `tags` are labels by another name.
    for tag in r.strings("tags").unwrap_or_default() {
        if !labels.contains(&tag) {
            labels.push(tag);
        }
    }
    let mut metadata = r.table("metadata").map(table_to_json).unwrap_or_default();
    // beads' `human` step waits for a person (an approval); Gas Town's `parallel` step groups
    // `children` that run side by side. Both are poured as `task` beads.
    let step_type = r.string("type");
    let issue_type = match step_type.as_deref() {
        None | Some("human" | "parallel") => "task".to_owned(),
        Some(t) if STEP_TYPES.contains(&t) => t.to_owned(),
        Some(t) => {
            r.problem(format!(
                "unknown step `type = \"{t}\"` (expected one of {}, `human` or `parallel`; `role` says what the step does)",
                STEP_TYPES.join(", ")
            ));
            "task".to_owned()
        }
    };
    let human = step_type.as_deref() == Some("human");
    let parallel = step_type.as_deref() == Some("parallel");
    let role = r.string("role").and_then(|name| {
        let role = Role::parse(&name);
        if role.is_none() {
            let known: Vec<_> = Role::ALL.iter().map(|r| r.as_str()).collect();
            r.problem(format!(
                "unknown role `{name}` (expected one of {})",
                known.join(", ")
            ));
        }
        role
    });
    // Gas Town also writes one command as a string.
    let run = match r.peek("run") {
        Some(Value::String(_)) => r.string("run").into_iter().collect(),
        _ => r.strings("run").unwrap_or_default(),
    };
    let approval = r.bool("approval");
    let role = match (role, approval.or(human.then_some(true))) {
        (Some(role), Some(true)) if role != Role::Approval => {
            r.problem(if approval == Some(true) {
                format!("`approval = true` conflicts with `role = \"{role}\"`")
            } else {
                format!("`type = \"human\"` (a person's step) conflicts with `role = \"{role}\"`")
            });
            role
        }
        (Some(role), _) => role,
        (None, Some(true)) => Role::Approval,
        // Gas Town's command step: the daemon runs its commands, as it runs a gate's.
        (None, _) if !run.is_empty() => Role::Gate,
        (None, _) => Role::Task,
    };
    // Gas City's per-step model option is the step's model unless it names one itself.
    let opt_model = r.string("opt_model");
    let model = r.string("model").or(opt_model);
    let prompt = r.string("prompt");
    let timeout = super::v2::timeout(&mut r);
    // `children-of(x)` waits for what `x` stands for: its children, which a step needing the
    // group `x` needs once they are lifted.
    if let Some(Value::String(w)) = r.peek("waits_for") {
        if let Some(step) = super::v2::children_of(w).map(str::to_owned) {
            r.take("waits_for");
            if !needs.contains(&step) {
                needs.push(step);
            }
        }
    }
    let sandbox = r.string("sandbox");
    let unconfined = match sandbox.as_deref() {
        None | Some("bwrap") => false,
        Some("none") => true,
        Some(other) => {
            r.problem(format!(
                "unknown `sandbox = \"{other}\"` (expected `bwrap` or `none`)"
            ));
            false
        }
    };
    let max_fix_iterations = r
        .integer("max_fix_iterations", 0, u32::MAX.into())
        .map(|n| n as u32);
    let max_attempts = super::v2::max_attempts(&mut r);
    let (check, timeout) = super::v2::check(&mut r, timeout);
    let tools = r.strings("tools");
    let recheck = r.strings("recheck").unwrap_or_default();
    let merge_strategy = r.string("merge_strategy").and_then(|name| {
        let parsed = MergeStrategy::parse(&name);
        if parsed.is_none() {
            r.problem(format!(
                "unknown `merge_strategy = \"{name}\"` (expected `merge`, `squash` or `rebase`)"
            ));
        }
        parsed
    });
    let output = r.string("output");
    let condition = r.string("condition");
    let raw_children = r.take("children");
    if parallel && raw_children.is_none() {
        r.warning("`type = \"parallel\"` without `children` is kept but not acted on: it is a plain step; steps whose `needs` are met run side by side anyway");
    }
    let raw_loop = r.table("loop");
    let gate = r.table("gate").and_then(|t| step_gate(&mut r, t));
    let id_for_loop = id.clone().unwrap_or_default();
    let expand = r.string("expand");
    let expand_vars = r.table("expand_vars").map(string_map).unwrap_or_default();
    // Kept keys go onto the step bead's metadata, where `ctl show --json` shows them.
    metadata.extend(table_to_json(r.finish(UNSUPPORTED_STEP, KEPT_STEP)));
    Some(Step {
        id: id?,
        title,
        description,
        notes,
        priority,
        needs,
        labels,
        metadata,
        role,
        model,
        prompt,
        run,
        timeout,
        unconfined,
        max_fix_iterations,
        tools,
        recheck,
        merge_strategy,
        output,
        issue_type,
        expand,
        expand_vars,
        condition,
        gate,
        max_attempts,
        check,
        children: match raw_loop {
            Some(table) => unroll(cx, &id_for_loop, table, problems),
            None => parse_steps(cx, "children", raw_children, problems),
        },
    })
}

/// beads' step `gate` table: what beads waits for before the step runs. A person's gate
/// (`type = "human"`) is an approval; a timer, a CI run (`gh:run`, `gh:pr`), mail or a
/// decision waits for the outside world, which catalyst does not watch: that gate becomes an
/// approval too, with a warning, so a person (or a script, with `ctl approve`) lets it through.
/// Returns what the gate waits for, in words.
fn step_gate(r: &mut Reader<'_>, mut table: Table) -> Option<String> {
    let mut text = |key: &str| match table.remove(key) {
        Some(Value::String(s)) => Some(s),
        Some(Value::Integer(n)) => Some(n.to_string()),
        _ => None,
    };
    let Some(kind) = text("type") else {
        r.problem("`gate` needs a `type`");
        return None;
    };
    // beads' `id`, `await_id`, `timeout` and `repo` say what its runtime watches and for how
    // long; they are named in the approval's description.
    let id = text("id").or_else(|| text("await_id"));
    let timeout = text("timeout");
    if kind == "human" {
        return Some(kind);
    }
    r.warning(format!(
        "`gate` of `type = \"{kind}\"` is not watched by catalyst: the step waits for a person's approval instead (`catalyst ctl approve`)"
    ));
    let mut what = format!("a `{kind}` gate");
    if let Some(id) = id {
        what.push_str(&format!(" on `{id}`"));
    }
    if let Some(timeout) = timeout {
        what.push_str(&format!(" (timeout {timeout})"));
    }
    Some(what)
}

/// beads' `loop`: its `body` steps, repeated as the loop step's children (ids
/// `<loop>-iter<N>-<body id>`), each iteration after the one before. `count` repeats it N
/// times; `range = "start..end"` (integers, the formula's vars as `{name}` with their defaults,
/// `+ - * / ^` and parentheses) once per value, both ends included. `var` names a variable set
/// to the iteration's number (or value) in the body's text, as `{var}` or `{{var}}`.
///
/// A loop that runs `until` a condition is decided while it runs, which a poured molecule
/// cannot be: its body is poured once, with a warning.
fn unroll(cx: &Cx<'_>, id: &str, table: Table, problems: &mut Vec<Problem>) -> Vec<Step> {
    let file = cx.file;
    let mut r = Reader::new(file, Some(id.to_owned()), table, problems);
    r.context = "loop: ".into();
    let count = r
        .integer("count", 1, MAX_ITERATIONS as i64)
        .map(|c| c as usize);
    let range = r.string("range");
    let until = r.string("until");
    let max = r.integer("max", 1, i64::MAX);
    let var = r.string("var");
    let body = r.take("body");
    let values: Option<Vec<i64>> = match (count, range.as_deref(), until.as_deref()) {
        (Some(count), None, None) => Some((1..=count as i64).collect()),
        (None, Some(range), None) => match super::range::evaluate(range, &cx.defaults) {
            Ok(values) if values.len() <= MAX_ITERATIONS => Some(values),
            Ok(values) => {
                r.problem(format!(
                    "`range = \"{range}\"` has {} values; a loop is poured whole, so at most {MAX_ITERATIONS}",
                    values.len()
                ));
                None
            }
            Err(e) => {
                r.problem(format!("`range = \"{range}\"`: {e}"));
                None
            }
        },
        (None, None, Some(_)) => {
            if max.is_none() {
                r.problem("`until` needs a `max`");
            }
            r.warning(
                "`until` is decided while the loop runs, which a poured molecule cannot be: the body is poured once",
            );
            Some(vec![1])
        }
        (None, None, None) => {
            r.problem("`loop` needs a `count`, a `range` or an `until`");
            None
        }
        _ => {
            r.problem("a loop has one of `count`, `range` and `until`");
            None
        }
    };
    r.finish(&[], &[]);
    let body = parse_steps(cx, "loop.body", body, problems);
    let Some(values) = values else {
        return Vec::new();
    };
    if body.is_empty() {
        problems.push(Problem::step(file, id, "`loop` needs `body` steps"));
        return Vec::new();
    }
    let (first, last) = super::compose::ends(&body);
    let inner: std::collections::BTreeSet<&str> = body.iter().map(|b| b.id.as_str()).collect();
    let name = |n: i64, body_id: &str| format!("{id}-iter{n}-{body_id}");
    let mut steps = Vec::new();
    let mut previous = None;
    for n in values {
        let fill = |text: &str| match &var {
            Some(v) => substitute(text, &BTreeMap::from([(v.clone(), n.to_string())]))
                .replace(&format!("{{{v}}}"), &n.to_string()),
            None => text.to_owned(),
        };
        for (i, b) in body.iter().enumerate() {
            let mut step = b.clone();
            step.id = name(n, &b.id);
            step.title = fill(&b.title);
            step.description = fill(&b.description);
            step.needs = b
                .needs
                .iter()
                .map(|need| {
                    if inner.contains(need.as_str()) {
                        name(n, need)
                    } else {
                        need.clone()
                    }
                })
                .collect();
            if let Some(p) = previous.filter(|_| first.contains(&i)) {
                let mut before: Vec<String> = last.iter().map(|l| name(p, l)).collect();
                before.append(&mut step.needs);
                step.needs = before;
            }
            steps.push(step);
        }
        previous = Some(n);
    }
    steps
}

/// The most iterations a loop may pour: each is a step bead per body step.
const MAX_ITERATIONS: usize = 100;

fn table_to_json(table: Table) -> JsonMap {
    table.into_iter().map(|(k, v)| (k, to_json(v))).collect()
}

/// TOML to JSON for step metadata; dates become their RFC 3339 text.
fn to_json(value: Value) -> Json {
    match value {
        Value::String(s) => Json::String(s),
        Value::Integer(n) => Json::from(n),
        Value::Float(f) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
        Value::Boolean(b) => Json::Bool(b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(items) => Json::Array(items.into_iter().map(to_json).collect()),
        Value::Table(t) => Json::Object(table_to_json(t)),
    }
}

/// A TOML error on one line, with where it is: "invalid TOML at line 3, column 7: …".
pub(crate) fn toml_error(text: &str, err: &toml::de::Error) -> String {
    let at = err
        .span()
        .map(|span| {
            let (line, col) = line_col(text, span.start);
            format!(" at line {line}, column {col}")
        })
        .unwrap_or_default();
    format!("invalid TOML{at}: {}", err.message().trim())
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Formula {
        match parse(text, "t.formula.toml") {
            (Some(f), problems) if problems.is_empty() => f,
            (_, problems) => panic!("unexpected problems: {problems:?}"),
        }
    }

    #[test]
    fn runtime_keys_are_kept_with_a_warning_and_output_and_type_are_read() {
        let text = r#"
            formula = "f"
            execution = "distributed"
            pour = true
            [[steps]]
            id = "design"
            title = "Design"
            output = "docs/{{bead}}.md"
            assignee = "someone"
            type = "feature"
        "#;
        let (formula, problems) = parse(text, "t.formula.toml");
        let formula = formula.expect("read");
        let warnings: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(problems.iter().all(|p| p.warning), "{warnings:?}");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert_eq!(
            formula.kept.get("execution"),
            Some(&Json::from("distributed"))
        );
        assert_eq!(formula.kept.get("pour"), Some(&Json::from(true)));
        let step = &formula.steps[0];
        assert_eq!(step.output.as_deref(), Some("docs/{{bead}}.md"));
        assert_eq!(step.issue_type, "feature");
        assert_eq!(step.metadata.get("assignee"), Some(&Json::from("someone")));
    }

    #[test]
    fn run_time_fan_out_and_outside_gates_are_kept_and_an_outside_gate_waits_for_a_person() {
        let text = r#"
            formula = "f"
            [vars.n]
            type = "int"
            default = "3"
            [[steps]]
            id = "survey"
            title = "Survey"
            on_complete = { for_each = "output.items", bond = "mol-item", parallel = true }
            [[steps]]
            id = "collect"
            title = "Collect"
            needs = ["survey"]
            waits_for = "all-children"
            gate = { type = "gh:run", id = "ci.yml", timeout = "1h" }
        "#;
        let (formula, problems) = parse(text, "t.formula.toml");
        let formula = formula.expect("read");
        let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(problems.iter().all(|p| p.warning), "{got:?}");
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with(
            "t.formula.toml: survey: warning: `on_complete` is kept but not acted on"
        ));
        assert_eq!(got[1], "t.formula.toml: collect: warning: `gate` of `type = \"gh:run\"` is not watched by catalyst: the step waits for a person's approval instead (`catalyst ctl approve`)");
        assert!(got[2]
            .starts_with("t.formula.toml: collect: warning: `waits_for` is kept but not acted on"));
        let gate = formula
            .step("gate-collect")
            .expect("the gate's approval step");
        assert_eq!(gate.role, Role::Approval);
        assert_eq!(gate.needs, ["survey"]);
        assert!(
            gate.description
                .contains("a `gh:run` gate on `ci.yml` (timeout 1h)"),
            "{}",
            gate.description
        );
        assert_eq!(
            formula.step("collect").expect("collect").needs,
            ["gate-collect"]
        );
        assert_eq!(
            formula.step("survey").expect("survey").metadata["on_complete"]["bond"],
            "mol-item"
        );
        assert_eq!(
            formula.vars["n"].pattern.as_deref(),
            Some("-?[0-9]+"),
            "an int var checks its values"
        );
    }

    fn problems(text: &str) -> Vec<String> {
        parse(text, "t.formula.toml")
            .1
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn reads_beads_keys_and_catalyst_keys() {
        let f = parse_ok(
            r#"
            formula = "mol-x"
            description = "d"
            version = 1
            type = "workflow"
            [vars]
            simple = "dflt"
            [vars.component]
            description = "which part"
            required = true
            enum = ["api", "ui"]
            [[steps]]
            id = "a"
            title = "A {{component}}"
            labels = ["x"]
            priority = 1
            metadata = { k = [1, "two"], when = 2026-01-01 }
            [[steps]]
            id = "b"
            title = "B"
            needs = ["a"]
            depends_on = ["a", "c"]
            role = "Review"
            model = "opus"
            prompt = "strict-review"
            timeout = 600
            max_fix_iterations = 2
            tools = ["Read", "Grep"]
            [[steps]]
            id = "c"
            title = "C"
            approval = true
            "#,
        );
        assert_eq!(f.name, "mol-x");
        assert_eq!(f.vars["simple"].default.as_deref(), Some("dflt"));
        assert!(f.vars["component"].required);
        assert_eq!(f.vars["component"].allowed, ["api", "ui"]);
        let [a, b, c] = &f.steps[..] else {
            panic!("three steps")
        };
        assert_eq!(a.role, Role::Task, "no role means the generic task role");
        assert_eq!(a.priority, Some(1));
        assert_eq!(a.metadata["k"], serde_json::json!([1, "two"]));
        assert_eq!(a.metadata["when"], "2026-01-01");
        assert_eq!(
            b.needs,
            ["a", "c"],
            "needs and depends_on merge without repeats"
        );
        assert_eq!(b.role, Role::Review);
        assert_eq!(b.timeout, Some(600));
        assert_eq!(b.tools, Some(vec!["Read".to_string(), "Grep".to_string()]));
        assert_eq!(c.role, Role::Approval);
    }

    #[test]
    fn refuses_by_name_with_file_and_step() {
        let cases: &[(&str, &str)] = &[
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nloop = { count = 3, body = [] }\n",
                "t.formula.toml: a: `loop` needs `body` steps",
            ),
            (
                "formula = \"f\"\n[compose]\naspects = [\"x\"]\nfrob = 1\n",
                "t.formula.toml: compose: unknown key `frob`",
            ),
            (
                "formula = \"f\"\naspects = [\"x\"]\n",
                "t.formula.toml: `aspects` is not supported by catalyst: `aspects` belongs in `[compose]`",
            ),
            (
                "formula = \"f\"\n[[compose.branch]]\nfrom = \"a\"\n",
                "t.formula.toml: compose.branch[0]: needs `from`, `steps` and `join`",
            ),
            (
                "formula = \"f\"\n[[compose.map]]\nwith = \"x\"\n",
                "t.formula.toml: compose.map[0]: needs `select` and `with`",
            ),
            (
                "formula = \"f\"\n[vars.v]\ntype = \"float\"\n",
                "t.formula.toml: var `v`: unknown `type = \"float\"` (expected \"string\", \"int\", \"number\" or \"bool\")",
            ),
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\ngate = { id = \"x\" }\n",
                "t.formula.toml: a: `gate` needs a `type`",
            ),
            (
                "formula = \"f\"\nfrobnicate = 1\n",
                "t.formula.toml: unknown key `frobnicate`",
            ),
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\nmodle = \"x\"\n",
                "t.formula.toml: a: unknown key `modle`",
            ),
            (
                "formula = \"f\"\ntype = \"molecule\"\n",
                "unknown `type = \"molecule\"` (expected \"workflow\", \"expansion\", \"aspect\" or \"convoy\")",
            ),
            (
                "formula = \"f\"\n[[template]]\nid = \"x\"\n",
                "`template` is not supported by catalyst: `[[template]]` belongs in a `type = \"expansion\"` formula",
            ),
            (
                "formula = \"f\"\n[vars.v]\npattern = \"(\"\n",
                "t.formula.toml: var `v`: `pattern` is not a regular expression",
            ),
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\ntype = \"bugfix\"\n",
                "a: unknown step `type = \"bugfix\"` (expected one of task, bug, feature, epic, chore, `human` or `parallel`",
            ),

        ];
        for (text, want) in cases {
            let got = problems(text);
            assert!(
                got.iter().any(|p| p.contains(want)),
                "want {want:?} in {got:?}"
            );
        }
    }

    #[test]
    fn reports_wrong_types_and_values_all_at_once() {
        let got = problems(
            r#"
            formula = 3
            version = 0
            [vars]
            n = 5
            [[steps]]
            id = "a"
            needs = "b"
            priority = 9
            role = "deploy"
            timeout = 0
            [[steps]]
            id = "b"
            approval = true
            role = "review"
            run = ["ok", 1]
            "#,
        );
        let want = [
            "t.formula.toml: `formula` must be a string, not integer",
            "t.formula.toml: `version` must be 1 to 4294967295, not 0",
            "t.formula.toml: var `n` must be a string (its default) or a table, not integer",
            "t.formula.toml: a: `needs` must be an array of strings, not string",
            "t.formula.toml: a: `priority` must be 0 to 4, not 9",
            "t.formula.toml: a: unknown role `deploy` (expected one of refine, implement, review, fix, merge, task, gate, approval)",
            "t.formula.toml: a: `timeout` must be at least 1, not 0",
            "t.formula.toml: b: `approval = true` conflicts with `role = \"review\"`",
            "t.formula.toml: b: `run` must be an array of strings",
        ];
        for w in want {
            assert!(got.iter().any(|p| p == w), "want {w:?} in {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
    }

    #[test]
    fn toml_syntax_errors_say_where() {
        let (formula, got) = parse("formula = \"f\"\n[[steps]\n", "t.formula.toml");
        assert!(formula.is_none());
        assert_eq!(got.len(), 1);
        assert!(
            got[0]
                .to_string()
                .starts_with("t.formula.toml: invalid TOML at line 2"),
            "{}",
            got[0]
        );
    }
}
