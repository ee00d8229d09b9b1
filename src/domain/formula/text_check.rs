//! The checks of a formula's text: its vars, the `{{var}}` placeholders that use them, and the
//! Go-template actions of its step text ([`super::template`]).

use std::collections::HashSet;

use super::vars::{is_var_name, placeholders, BUILTIN_VARS};
use super::{Formula, Kind, Problem, Step};

impl Formula {
    pub(super) fn check_vars(&self, out: &mut Vec<Problem>) {
        let file = self.file.as_str();
        for (name, def) in &self.vars {
            if !is_var_name(name) {
                out.push(Problem::formula(file, format!(
                    "var name `{name}` must match `[a-zA-Z_][a-zA-Z0-9_]*` to be usable as `{{{{{name}}}}}`"
                )));
            }
            if def.default.is_none() && self.kind == Kind::Workflow {
                // What pouring demands, said when the formula is checked rather than when a
                // bead is blocked for it.
                out.push(
                    Problem::formula(
                        file,
                        format!(
                            "var `{name}` has no default: pouring needs a value for it (`ctl submit --var {name}=…`, or the config's `[vars]`)"
                        ),
                    )
                    .warn(),
                );
            }
            if let Some(default) = &def.default {
                if !def.allowed.is_empty() && !def.allowed.contains(default) {
                    out.push(Problem::formula(
                        file,
                        format!("the default `{default}` of var `{name}` is not in its `enum`"),
                    ));
                }
            }
        }
    }

    /// Placeholders in `run` must name declared vars: a typo would reach the shell as text. In
    /// a title, description or notes an undeclared one is kept verbatim, as beads and Gas Town
    /// keep it (published formulas name vars their runtime fills, such as `{{polecat}}`), with
    /// a warning: the agent reads it as written, and declaring the var gives it a value.
    pub(super) fn check_placeholders(&self, step: &Step, out: &mut Vec<Problem>) {
        let file = self.file.as_str();
        let mut problem = |message: String| out.push(Problem::step(file, &step.id, message));
        let mut undeclared: Vec<(&str, &str)> = Vec::new();
        let run = step.run.iter().map(|c| ("run", c.as_str()));
        let fields = [
            ("title", step.title.as_str()),
            ("description", step.description.as_str()),
            ("notes", step.notes.as_str()),
        ];
        let mut reported = HashSet::new();
        for command in &step.run {
            for name in super::vars::quoted_placeholders(command) {
                if reported.insert(("quoted", name)) {
                    problem(format!(
                        "`{{{{{name}}}}}` stands inside quotes in `run` (`{command}`): catalyst quotes each value itself, and inside the author's quotes a value could end them or run `$(…)`; take the quotes away around it"
                    ));
                }
            }
        }
        for (field, text) in fields.into_iter().chain(run) {
            for name in placeholders(text) {
                if field == "run" && name == "title" {
                    problem(
                        "`{{title}}` cannot be used in `run`: the bead's title is untrusted text and the shell would run it"
                            .into(),
                    );
                } else if field == "run"
                    && self
                        .vars
                        .get(name)
                        .is_some_and(|v| v.pattern.is_none() && v.allowed.is_empty())
                    && reported.insert((field, name))
                {
                    problem(format!(
                        "var `{name}` is used in `run`, so it needs a `pattern` (or an `enum`) its values are checked against: a bead's submitter gives the value, and the daemon runs the command"
                    ));
                } else if !self.vars.contains_key(name)
                    && !BUILTIN_VARS.contains(&name)
                    && reported.insert((field, name))
                {
                    if field == "run" {
                        problem(format!(
                            "`{{{{{name}}}}}` in `run` is not a declared var (declare it under `[vars]`; built in: {})",
                            BUILTIN_VARS.join(", ")
                        ));
                    } else {
                        undeclared.push((field, name));
                    }
                }
            }
        }
        for (field, name) in undeclared {
            out.push(
                Problem::step(
                    file,
                    &step.id,
                    format!(
                        "`{{{{{name}}}}}` in `{field}` is not a declared var: it is kept as written (declare it under `[vars]` to give it a value; built in: {})",
                        BUILTIN_VARS.join(", ")
                    ),
                )
                .warn(),
            );
        }
    }

    /// Go-template actions ([`super::template`]): in `run` any action is an error, since a
    /// gate's command is never a template; in text a broken `{{if}}…{{end}}` is kept as
    /// written with a warning, and what is passed through verbatim and vars the actions read
    /// that are not declared are one warning each for the formula.
    pub(super) fn check_templates(&self, out: &mut Vec<Problem>) {
        let file = self.file.as_str();
        let mut passed: Vec<String> = Vec::new();
        let mut undeclared: Vec<String> = Vec::new();
        for step in self.steps.iter().filter(|s| s.expand.is_none()) {
            for command in &step.run {
                // A command is never rendered: control would choose what the shell runs, and
                // `{{.var}}` would reach it unsubstituted. Other braces (`docker inspect
                // --format '{{.State.Status}}'`) are the command's own text.
                let scan = super::template::scan(command);
                let var = scan
                    .vars
                    .iter()
                    .any(|v| self.vars.contains_key(v) || BUILTIN_VARS.contains(&v.as_str()));
                if scan.control || var {
                    out.push(Problem::step(
                        file,
                        &step.id,
                        format!("`run` holds a Go-template action (`{command}`): a gate's command is not a template, so that the shell runs exactly what is written; use `{{{{var}}}}` placeholders"),
                    ));
                }
            }
            for (field, text) in [
                ("title", &step.title),
                ("description", &step.description),
                ("notes", &step.notes),
            ] {
                let scan = super::template::scan(text);
                // Text goes to an agent: actions that do not read as a Go template (Handlebars'
                // `{{#if}}…{{else}}…{{/if}}` in some published formulas) are kept as written.
                for error in scan.errors {
                    out.push(
                        Problem::step(
                            file,
                            &step.id,
                            format!("`{field}`: {error}: its template actions are kept as written"),
                        )
                        .warn(),
                    );
                }
                for name in scan.vars {
                    if !self.vars.contains_key(&name)
                        && !BUILTIN_VARS.contains(&name.as_str())
                        && !undeclared.contains(&name)
                    {
                        undeclared.push(name);
                    }
                }
                for action in scan.passed {
                    if !passed.contains(&action) {
                        passed.push(action);
                    }
                }
            }
        }
        if !passed.is_empty() {
            out.push(
                Problem::formula(
                    file,
                    format!(
                        "template actions catalyst does not render are passed through verbatim to the agent: {}",
                        backticked(&passed)
                    ),
                )
                .warn(),
            );
        }
        if !undeclared.is_empty() {
            out.push(
                Problem::formula(
                    file,
                    format!(
                        "template actions read vars `[vars]` does not declare, which are always empty (false in `{{{{if}}}}`): {}",
                        backticked(&undeclared.iter().map(|n| format!(".{n}")).collect::<Vec<_>>())
                    ),
                )
                .warn(),
            );
        }
    }
}

/// `a`, `b` as "`a`, `b`".
fn backticked(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    items.join(", ")
}
