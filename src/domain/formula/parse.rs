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
use super::{Advice, Formula, Kind, Problem, Step, VarDef};
use crate::domain::model::{JsonMap, Role};

/// beads keys at the top of a formula that catalyst does not implement, with what to do instead.
const UNSUPPORTED_TOP: &[(&str, &str)] = &[
    (
        "extends",
        "formula inheritance is not supported; copy the parent's steps",
    ),
    ("template", "`[[template]]` belongs in a `type = \"expansion\"` formula"),
    (
        "compose",
        "`[compose]` is not supported: expand a step with `expand = \"<expansion>\"`, and apply aspects with the config's `aspects` or a bead's `aspect:<name>` label",
    ),
    ("advice", "`[[advice]]` belongs in a `type = \"aspect\"` formula"),
    ("pointcuts", "`[[pointcuts]]` belongs in a `type = \"aspect\"` formula"),
    ("aspects", "apply aspects with the config's `aspects` or a bead's `aspect:<name>` label"),
    ("inputs", "`[inputs]` belongs in a `type = \"convoy\"` formula"),
    ("legs", "`[[legs]]` belongs in a `type = \"convoy\"` formula"),
    ("synthesis", "`[synthesis]` belongs in a `type = \"convoy\"` formula"),
    ("prompts", "`[prompts]` belongs in a `type = \"convoy\"` formula"),
    ("output", "`[output]` belongs in a `type = \"convoy\"` formula"),
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
    ("presets", "Gas Town's leg presets for `gt formula run`"),
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
];

/// The step `type`s beads knows; a step bead keeps it as its issue type.
const STEP_TYPES: [&str; 5] = ["task", "bug", "feature", "epic", "chore"];

/// beads step keys catalyst does not implement, with what to do instead.
const UNSUPPORTED_STEP: &[(&str, &str)] = &[
    ("waits_for", "dynamic fan-out is not supported"),
    ("on_complete", "dynamic fan-out is not supported"),
    ("advice", "aspects and advice are not supported"),
];

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
    let kept = table_to_json(r.finish(UNSUPPORTED_TOP, KEPT_TOP));

    let mut vars = raw_vars
        .map(|t| parse_vars(file, t, &[], &mut problems))
        .unwrap_or_default();
    let mut steps = super::compose::flatten(parse_steps(file, "steps", raw_steps, &mut problems));
    let template = parse_steps(file, "template", raw_template, &mut problems);
    let advice = raw_advice
        .map(|a| parse_advice(file, a, &mut problems))
        .unwrap_or_default();
    if let Some(parts) = raw_convoy {
        let (inputs, legs) = convoy::pour_plan(file, parts, &mut problems);
        vars.extend(inputs);
        steps.extend(legs);
    }
    let formula = Formula {
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
    };
    (Some(formula), problems)
}

/// An array of step tables under `key` (`steps`, `template`), each read as a step.
fn parse_steps(
    file: &str,
    key: &str,
    raw: Option<Value>,
    problems: &mut Vec<Problem>,
) -> Vec<Step> {
    match raw {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| parse_step(file, i, item, problems))
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

/// `[[pointcuts]]`: each a table with a `glob` (beads' `type` and `label` criteria are not
/// supported: catalyst matches step ids).
fn parse_pointcuts(r: &mut Reader<'_>) -> Vec<String> {
    let Some(raw) = r.take("pointcuts") else {
        return Vec::new();
    };
    let Value::Array(items) = raw else {
        r.problem("`pointcuts` must be an array of tables (`[[pointcuts]]`)");
        return Vec::new();
    };
    let mut globs = Vec::new();
    for item in items {
        match item {
            Value::Table(mut t) => match (t.remove("glob"), t.is_empty()) {
                (Some(Value::String(glob)), true) => globs.push(glob),
                _ => r.problem(
                    "a pointcut is a table with a `glob` on step ids (`type` and `label` pointcuts are not supported)",
                ),
            },
            _ => r.problem("a pointcut must be a table with a `glob`"),
        }
    }
    globs
}

/// `[[advice]]`: `target` (a glob on step ids), `before` and `after` (a step table each, or an
/// array of them), and `around` with `before` and `after` arrays.
fn parse_advice(file: &str, raw: Value, problems: &mut Vec<Problem>) -> Vec<Advice> {
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
                .filter_map(|(j, item)| parse_step(file, j, item, problems))
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

/// `[vars]` (or a convoy's `[inputs]`): `name = "default"` or a table; `kept` are keys read
/// with a warning and not acted on.
pub(super) fn parse_vars(
    file: &str,
    table: Table,
    kept: &[(&str, &str)],
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, VarDef> {
    let mut vars = BTreeMap::new();
    for (name, value) in table {
        let def = match value {
            Value::String(default) => VarDef {
                default: Some(default),
                ..VarDef::default()
            },
            Value::Table(t) => {
                let mut r = Reader::new(file, None, t, problems);
                r.context = format!("var `{name}`: ");
                let def = VarDef {
                    description: r.string("description").unwrap_or_default(),
                    default: r.string("default"),
                    required: r.bool("required").unwrap_or(false),
                    allowed: r.strings("enum").unwrap_or_default(),
                    pattern: r.string("pattern"),
                };
                if let Some(Err(e)) = def.pattern.as_deref().map(regex::Regex::new) {
                    r.problem(format!("`pattern` is not a regular expression: {e}"));
                }
                match r.string("type").as_deref() {
                    None | Some("string") => {}
                    Some(t) => r.problem(format!(
                        "`type = \"{t}\"` is not supported: vars are strings"
                    )),
                }
                r.finish(&[], kept);
                def
            }
            other => {
                problems.push(Problem::formula(
                    file,
                    format!(
                        "var `{name}` must be a string (its default) or a table, not {}",
                        other.type_str()
                    ),
                ));
                continue;
            }
        };
        vars.insert(name, def);
    }
    vars
}

fn parse_step(file: &str, index: usize, item: Value, problems: &mut Vec<Problem>) -> Option<Step> {
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
    let labels = r.strings("labels").unwrap_or_default();
    let mut metadata = r.table("metadata").map(table_to_json).unwrap_or_default();
    let issue_type = match r.string("type") {
        None => "task".to_owned(),
        Some(t) if STEP_TYPES.contains(&t.as_str()) => t,
        Some(t) => {
            r.problem(format!(
                "unknown step `type = \"{t}\"` (expected one of {}; `role` says what the step does)",
                STEP_TYPES.join(", ")
            ));
            "task".to_owned()
        }
    };
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
    let role = match (role, r.bool("approval")) {
        (Some(role), Some(true)) if role != Role::Approval => {
            r.problem(format!(
                "`approval = true` conflicts with `role = \"{role}\"`"
            ));
            role
        }
        (Some(role), _) => role,
        (None, Some(true)) => Role::Approval,
        (None, _) => Role::Task,
    };
    let model = r.string("model");
    let prompt = r.string("prompt");
    let run = r.strings("run").unwrap_or_default();
    let timeout = r.integer("timeout", 1, i64::MAX).map(|t| t as u64);
    let max_fix_iterations = r
        .integer("max_fix_iterations", 0, u32::MAX.into())
        .map(|n| n as u32);
    let tools = r.strings("tools");
    let recheck = r.strings("recheck").unwrap_or_default();
    let output = r.string("output");
    let condition = r.string("condition");
    let raw_children = r.take("children");
    let raw_loop = r.table("loop");
    let human_gate = r.table("gate").and_then(|t| human_gate(&mut r, t));
    let id_for_loop = id.clone().unwrap_or_default();
    let expand = r.string("expand");
    let expand_vars = r
        .table("expand_vars")
        .map(|t| {
            t.into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k, s)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
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
        max_fix_iterations,
        tools,
        recheck,
        output,
        issue_type,
        expand,
        expand_vars,
        condition,
        gate: human_gate,
        children: match raw_loop {
            Some(table) => unroll(file, &id_for_loop, table, problems),
            None => parse_steps(file, "children", raw_children, problems),
        },
    })
}

/// beads' step `gate` table: only a person's (`type = "human"`) can be poured, as an approval
/// step before the step; timers, CI and mail gates wait for the outside world.
fn human_gate(r: &mut Reader<'_>, mut table: Table) -> Option<String> {
    let kind = match table.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => {
            r.problem("`gate` needs a `type`");
            return None;
        }
    };
    if kind != "human" {
        r.problem(format!(
            "`gate` of `type = \"{kind}\"` is not supported: only `human` gates are (use `role = \"gate\"` with `run` for commands)"
        ));
        return None;
    }
    // beads' `id`, `timeout`, `await_id` and `repo` say how its runtime waits; a person's
    // approval waits for the person.
    Some(kind)
}

/// beads' `loop` with a `count`: its `body` steps, repeated `count` times as the loop step's
/// children (ids `<loop>-iter<N>-<body id>`), each iteration after the one before; `var` names
/// a variable set to the iteration's number in the body's text. A loop that runs until a
/// condition (`until`, `range`) is decided while it runs, which a poured molecule cannot be:
/// refused.
fn unroll(file: &str, id: &str, table: Table, problems: &mut Vec<Problem>) -> Vec<Step> {
    let mut r = Reader::new(file, Some(id.to_owned()), table, problems);
    r.context = "loop: ".into();
    let count = r.integer("count", 1, 100).map(|c| c as usize);
    let var = r.string("var");
    let body = r.take("body");
    r.finish(
        &[
            (
                "until",
                "a loop must have a fixed `count`: a poured molecule is a fixed graph",
            ),
            (
                "max",
                "a loop must have a fixed `count`: a poured molecule is a fixed graph",
            ),
            (
                "range",
                "a loop must have a fixed `count`: a poured molecule is a fixed graph",
            ),
        ],
        &[],
    );
    let body = parse_steps(file, "loop.body", body, problems);
    let Some(count) = count else {
        problems.push(Problem::step(file, id, "`loop` needs a `count`"));
        return Vec::new();
    };
    if body.is_empty() {
        problems.push(Problem::step(file, id, "`loop` needs `body` steps"));
        return Vec::new();
    }
    let (first, last) = super::compose::ends(&body);
    let inner: std::collections::BTreeSet<&str> = body.iter().map(|b| b.id.as_str()).collect();
    let name = |n: usize, body_id: &str| format!("{id}-iter{n}-{body_id}");
    let mut steps = Vec::new();
    for n in 1..=count {
        let values: BTreeMap<String, String> =
            var.iter().map(|v| (v.clone(), n.to_string())).collect();
        for (i, b) in body.iter().enumerate() {
            let mut step = b.clone();
            step.id = name(n, &b.id);
            step.title = substitute(&b.title, &values);
            step.description = substitute(&b.description, &values);
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
            if n > 1 && first.contains(&i) {
                let mut before: Vec<String> = last.iter().map(|l| name(n - 1, l)).collect();
                before.append(&mut step.needs);
                step.needs = before;
            }
            steps.push(step);
        }
    }
    steps
}

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
                "formula = \"f\"\n[compose]\naspects = [\"x\"]\n",
                "t.formula.toml: `compose` is not supported by catalyst",
            ),
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\non_complete = { for_each = \"output.x\" }\n",
                "t.formula.toml: a: `on_complete` is not supported",
            ),
            (
                "formula = \"f\"\n[[steps]]\nid = \"a\"\ngate = { type = \"timer\" }\n",
                "t.formula.toml: a: `gate` of `type = \"timer\"` is not supported: only `human` gates are",
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
                "formula = \"f\"\n[[steps]]\ntitle = \"no id\"\nwaits_for = \"all-children\"\n",
                "t.formula.toml: steps[0]: `waits_for` is not supported",
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
                "a: unknown step `type = \"bugfix\"` (expected one of task, bug, feature, epic, chore",
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
