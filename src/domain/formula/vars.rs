//! `{{var}}` placeholders, with beads' exact syntax: `{{` a name `}}`, the name being
//! `[a-zA-Z_][a-zA-Z0-9_]*`, no spaces inside the braces. Text that does not match (such as
//! `{{ name }}` or `{{a.b}}`) is left alone, as beads leaves it.
//!
//! `{{else}}`, `{{end}}`, `{{break}}` and `{{continue}}` are Go-template actions, never
//! placeholders ([`super::template`]).
//!
//! Substitution is a single pass: a value that itself contains `{{x}}` is not expanded again,
//! so a variable's value can never pull in another variable.
//!
//! The `[vars]` table that declares them is read here too ([`parse_vars`]).

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::reader::Reader;
use super::{Problem, VarDef};
use std::ops::Range;

use super::error::PourError;
use super::Formula;
use crate::domain::model::Bead;

/// The words that are Go-template actions when written alone (`{{else}}`, `{{end}}`), never
/// placeholders ([`super::template`]).
pub(crate) const BARE_WORDS: [&str; 4] = ["else", "end", "break", "continue"];

/// Variables every formula has without declaring them: the work bead's id and title.
pub const BUILTIN_VARS: [&str; 2] = ["bead", "title"];

/// Whether `name` can be written as a placeholder: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub(crate) fn is_var_name(name: &str) -> bool {
    name_len(name.as_bytes()) == name.len() && !name.is_empty()
}

/// The length of the var name at the start of `bytes`.
fn name_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .enumerate()
        .take_while(|&(k, &b)| {
            b == b'_' || b.is_ascii_alphabetic() || (k > 0 && b.is_ascii_digit())
        })
        .count()
}

/// The placeholders in `text`, with their byte ranges, left to right.
fn scan(text: &str) -> Vec<(Range<usize>, &str)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(offset) = text[i..].find("{{") {
        let start = i + offset;
        let name_start = start + 2;
        let name_len = name_len(&bytes[name_start..]);
        let name_end = name_start + name_len;
        let word = &text[name_start..name_end];
        if name_len > 0 && text[name_end..].starts_with("}}") && !BARE_WORDS.contains(&word) {
            found.push((start..name_end + 2, &text[name_start..name_end]));
            i = name_end + 2;
        } else {
            // Not a placeholder here; `{{{a}}}` still has one starting at the next brace.
            i = start + 1;
        }
    }
    found
}

/// The placeholders of a shell command line that stand inside the author's own quotes (`'…'`,
/// `"…"` or backticks), left to right. A value is substituted single-quoted, which makes it one
/// word only outside quotes: inside `'…'` its quotes end the author's, and inside `"…"` or
/// backticks its `$(…)` runs.
pub fn quoted_placeholders(command: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let bytes = command.as_bytes();
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    let placeholders = scan(command);
    let mut next = placeholders.iter().peekable();
    for (i, &b) in bytes.iter().enumerate() {
        while let Some((range, name)) = next.peek() {
            if range.start > i {
                break;
            }
            if range.start == i && quote.is_some() {
                found.push(*name);
            }
            next.next();
        }
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, b) {
            (Some(b'\''), b'\'') => quote = None,
            (Some(b'\''), _) => {}
            (_, b'\\') => escaped = true,
            (Some(q), b) if b == q => quote = None,
            (None, b'\'' | b'"' | b'`') => quote = Some(b),
            _ => {}
        }
    }
    found
}

/// The names of the `{{name}}` placeholders in `text`, left to right (repeats included).
pub fn placeholders(text: &str) -> Vec<&str> {
    scan(text).into_iter().map(|(_, name)| name).collect()
}

/// Replaces each `{{name}}` that has a value; placeholders without one are kept verbatim, as
/// beads keeps them.
pub fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (range, name) in scan(text) {
        if let Some(value) = values.get(name) {
            out.push_str(&text[last..range.start]);
            out.push_str(value);
            last = range.end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// Whether `value` matches `pattern` whole (no pattern: any value). A pattern that does not
/// compile matches nothing (formula check reports it).
fn matches_whole(pattern: Option<&str>, value: &str) -> bool {
    let Some(pattern) = pattern else {
        return true;
    };
    regex::Regex::new(&format!("^(?:{pattern})$")).is_ok_and(|re| re.is_match(value))
}

/// [`substitute`] for a shell command line: every value is single-quoted, so that the shell
/// reads it as one word whatever it holds.
pub fn substitute_quoted(text: &str, values: &BTreeMap<String, String>) -> String {
    let quoted = values
        .iter()
        .map(|(k, v)| (k.clone(), crate::domain::shell::quote(v)))
        .collect();
    substitute(text, &quoted)
}

impl Formula {
    /// The vars whose values reach a gate's command (placeholders in any step's `run`).
    pub fn command_vars(&self) -> std::collections::BTreeSet<&str> {
        self.steps
            .iter()
            .flat_map(|s| s.run.iter())
            .flat_map(|c| placeholders(c))
            .collect()
    }

    /// `given` with the workspace's values (the config's `[vars]`) for the vars this formula
    /// declares and `given` leaves out: a bead's own value wins, then the workspace's, then
    /// the formula's default.
    pub fn with_workspace_vars(
        &self,
        mut given: BTreeMap<String, String>,
        workspace: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        for (name, value) in workspace {
            if self.vars.contains_key(name) && !given.contains_key(name) {
                given.insert(name.clone(), value.clone());
            }
        }
        given
    }

    /// Refuses values given for [`Formula::command_vars`] unless `by_person`: a command chosen
    /// per bead comes from the formula's default or a person's submission, never from a file
    /// anyone who can write an inbox file or file an issue controls.
    pub fn check_command_vars(
        &self,
        given: &BTreeMap<String, String>,
        by_person: bool,
    ) -> Result<(), PourError> {
        if by_person {
            return Ok(());
        }
        match self
            .command_vars()
            .into_iter()
            .find(|v| given.contains_key(*v))
        {
            Some(name) => Err(PourError::CommandVarNotByPerson {
                formula: self.name.clone(),
                name: name.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// The values a pour substitutes: the given values, then declared defaults, then the
    /// built-ins `bead` and `title` from `work`.
    ///
    /// Fails when a value is given for a var the formula does not declare (a typo would
    /// otherwise be silently ignored) or for a built-in, when a value is not one of the var's
    /// `enum`, and when declared vars have neither a value nor a default, naming them all. A
    /// declared var without a default is needed even when not marked `required`: leaving its
    /// placeholder in a step's text would hand an agent a half-written task.
    pub fn resolve_vars(
        &self,
        given: &BTreeMap<String, String>,
        work: &Bead,
    ) -> Result<BTreeMap<String, String>, PourError> {
        let formula = self.name.clone();
        if let Some(name) = given.keys().find(|k| BUILTIN_VARS.contains(&k.as_str())) {
            return Err(PourError::BuiltinVar {
                formula,
                name: name.clone(),
            });
        }
        if let Some(name) = given.keys().find(|k| !self.vars.contains_key(*k)) {
            return Err(PourError::UnknownVar {
                formula,
                name: name.clone(),
            });
        }
        let mut values = BTreeMap::new();
        let mut missing = Vec::new();
        for (name, def) in &self.vars {
            match given.get(name).or(def.default.as_ref()) {
                Some(value) if !def.allowed.is_empty() && !def.allowed.contains(value) => {
                    return Err(PourError::NotAllowed {
                        formula,
                        name: name.clone(),
                        value: value.clone(),
                        allowed: def.allowed.clone(),
                    });
                }
                Some(value) if !matches_whole(def.pattern.as_deref(), value) => {
                    return Err(PourError::NoMatch {
                        formula,
                        name: name.clone(),
                        value: value.clone(),
                        pattern: def.pattern.clone().unwrap_or_default(),
                    });
                }
                Some(value) => {
                    values.insert(name.clone(), value.clone());
                }
                None => missing.push(name.clone()),
            }
        }
        if !missing.is_empty() {
            return Err(PourError::MissingVars {
                formula,
                names: missing,
            });
        }
        values.insert("bead".into(), work.id.to_string());
        values.insert("title".into(), work.title.clone());
        Ok(values)
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
        if BUILTIN_VARS.contains(&name.as_str()) {
            // Gas Town declares `title` for its own `--var title=…`; in catalyst it is always the
            // work bead's: the declaration goes, and `{{title}}` keeps its meaning.
            problems.push(
                Problem::formula(
                    file,
                    format!(
                        "var `{name}` is built in (the work bead's {}): its declaration is ignored, and `{{{{{name}}}}}` is the bead's",
                        if name == "bead" { "id" } else { "title" }
                    ),
                )
                .warn(),
            );
            continue;
        }
        let def = match value {
            Value::String(default) => VarDef {
                default: Some(default),
                ..VarDef::default()
            },
            Value::Table(t) => {
                let mut r = Reader::new(file, None, t, problems);
                r.context = format!("var `{name}`: ");
                let mut def = VarDef {
                    description: r.string("description").unwrap_or_default(),
                    default: r.string("default"),
                    required: r.bool("required").unwrap_or(false),
                    allowed: r.strings("enum").unwrap_or_default(),
                    pattern: r.string("pattern"),
                };
                if let Some(Err(e)) = def.pattern.as_deref().map(regex::Regex::new) {
                    r.problem(format!("`pattern` is not a regular expression: {e}"));
                }
                // A value is always text; an `int` or `bool` var checks its values look like one
                // (unless it has a pattern of its own).
                let typed = match r.string("type").as_deref() {
                    None | Some("string") => None,
                    Some("int") => Some("-?[0-9]+"),
                    Some("number") => Some("-?[0-9]+(\\.[0-9]+)?"),
                    Some("bool") => Some("true|false"),
                    Some(t) => {
                        r.problem(format!(
                            "unknown `type = \"{t}\"` (expected \"string\", \"int\", \"number\" or \"bool\")"
                        ));
                        None
                    }
                };
                if def.pattern.is_none() {
                    def.pattern = typed.map(str::to_owned);
                }
                if def.required && def.default.is_some() {
                    r.warning(
                        "`required = true` with a `default`: the default makes it not required",
                    );
                    def.required = false;
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A map of variable values, for tests.
    pub(crate) fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn substitutes_like_beads() {
        let v = values(&[("a", "1"), ("b_2", "two"), ("x", "{{a}}")]);
        let cases = [
            ("{{a}}", "1"),
            ("pre {{a}} mid {{b_2}} post", "pre 1 mid two post"),
            ("{{a}}{{a}}", "11"),
            // No spaces, no dots, no leading digit: beads leaves these alone.
            ("{{ a }}", "{{ a }}"),
            ("{{a.b}}", "{{a.b}}"),
            ("{{1a}}", "{{1a}}"),
            // Placeholders without a value are kept verbatim.
            ("{{nope}}", "{{nope}}"),
            ("{{{a}}}", "{1}"),
            ("{{a}", "{{a}"),
            // Values are not expanded again.
            ("{{x}}", "{{a}}"),
            ("ünï {{a}} cödé", "ünï 1 cödé"),
        ];
        for (text, want) in cases {
            assert_eq!(substitute(text, &v), want, "{text}");
        }
    }

    #[test]
    fn finds_placeholders_in_order() {
        assert_eq!(
            placeholders("{{b}} {{a}} {{ c }} {{b}}"),
            vec!["b", "a", "b"]
        );
        assert!(placeholders("no braces {here}").is_empty());
    }

    #[test]
    fn a_value_must_match_its_pattern_whole_and_reaches_the_shell_as_one_word() {
        let text = "formula = \"f\"\n[vars.cmd]\npattern = \"[a-z ]+\"\n[[steps]]\nid = \"g\"\ntitle = \"G\"\nrole = \"gate\"\nrun = [\"sh -c {{cmd}}\"]\n";
        let formula = Formula::parse(text, "f.formula.toml").expect("parses");
        let work = crate::domain::model::Bead::new(
            crate::domain::id::BeadId::new("cat-1").unwrap(),
            "t",
            crate::domain::time::Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
        );
        let given = |v: &str| values(&[("cmd", v)]);
        for bad in ["make test; touch x", "make test\n", "", "a$b"] {
            let err = formula.resolve_vars(&given(bad), &work).expect_err(bad);
            assert!(
                err.to_string().contains("does not match the pattern"),
                "{bad}: {err}"
            );
        }
        let ok = formula
            .resolve_vars(&given("make test"), &work)
            .expect("matches");
        assert_eq!(substitute_quoted("sh -c {{cmd}}", &ok), "sh -c 'make test'");
        let quoted = values(&[("v", "it's; rm -rf x")]);
        assert_eq!(
            substitute_quoted("echo {{v}}", &quoted),
            "echo 'it'\\''s; rm -rf x'"
        );
    }
}
