//! beads' step `condition`: a step poured only when its condition holds for the bead's
//! variables. `"{{var}}"` holds when the value is set and not `false`, `0`, `no` or empty;
//! `"!{{var}}"` is its negation; `"{{var}} == text"` and `"{{var}} != text"` compare the value
//! (the text may be quoted).

use std::collections::BTreeMap;

use super::vars::placeholders;
use super::{Formula, Step};

/// A parsed condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Condition {
    Truthy {
        var: String,
        negated: bool,
    },
    Compare {
        var: String,
        equal: bool,
        text: String,
    },
}

impl Condition {
    /// Parses `text`, or says why it is not a condition.
    pub(super) fn parse(text: &str) -> Result<Condition, String> {
        let text = text.trim();
        let var_of = |part: &str| -> Result<String, String> {
            let part = part.trim();
            let names = placeholders(part);
            match names.as_slice() {
                [name] if part == format!("{{{{{name}}}}}") => Ok(name.to_string()),
                _ => Err(format!(
                    "condition `{text}`: expected `{{{{var}}}}`, `!{{{{var}}}}`, `{{{{var}}}} == value` or `{{{{var}}}} != value`"
                )),
            }
        };
        for (op, equal) in [("==", true), ("!=", false)] {
            if let Some((left, right)) = text.split_once(op) {
                let value = right.trim().trim_matches(|c| c == '"' || c == '\'');
                return Ok(Condition::Compare {
                    var: var_of(left)?,
                    equal,
                    text: value.to_owned(),
                });
            }
        }
        match text.strip_prefix('!') {
            Some(rest) => Ok(Condition::Truthy {
                var: var_of(rest)?,
                negated: true,
            }),
            None => Ok(Condition::Truthy {
                var: var_of(text)?,
                negated: false,
            }),
        }
    }

    pub(super) fn var(&self) -> &str {
        match self {
            Condition::Truthy { var, .. } | Condition::Compare { var, .. } => var,
        }
    }

    fn holds(&self, values: &BTreeMap<String, String>) -> bool {
        let value = values.get(self.var()).map(String::as_str).unwrap_or("");
        match self {
            Condition::Truthy { negated, .. } => {
                let truthy = !matches!(
                    value.trim().to_ascii_lowercase().as_str(),
                    "" | "false" | "0" | "no"
                );
                truthy != *negated
            }
            Condition::Compare { equal, text, .. } => (value == text) == *equal,
        }
    }
}

/// `formula` without the steps whose condition does not hold for `values`: a step that needed
/// a dropped step needs what the dropped step needed instead.
pub(super) fn apply(formula: &Formula, values: &BTreeMap<String, String>) -> Formula {
    let dropped: BTreeMap<String, Vec<String>> = formula
        .steps
        .iter()
        .filter(|s| {
            s.condition
                .as_deref()
                .and_then(|c| Condition::parse(c).ok())
                .is_some_and(|c| !c.holds(values))
        })
        .map(|s| (s.id.clone(), s.needs.clone()))
        .collect();
    if dropped.is_empty() {
        return formula.clone();
    }
    let resolve = |needs: &[String]| -> Vec<String> {
        let mut out = Vec::new();
        let mut todo: Vec<String> = needs.iter().rev().cloned().collect();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(need) = todo.pop() {
            if !seen.insert(need.clone()) {
                continue;
            }
            match dropped.get(&need) {
                Some(theirs) => todo.extend(theirs.iter().rev().cloned()),
                None if !out.contains(&need) => out.push(need),
                None => {}
            }
        }
        out
    };
    let steps: Vec<Step> = formula
        .steps
        .iter()
        .filter(|s| !dropped.contains_key(&s.id))
        .map(|s| Step {
            needs: resolve(&s.needs),
            ..s.clone()
        })
        .collect();
    Formula {
        steps,
        ..formula.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::formula::vars::tests::values;

    #[test]
    fn conditions_read_and_hold_as_beads_writes_them() {
        let v = values(&[("docs", "true"), ("lang", "rust"), ("off", "false")]);
        for (text, holds) in [
            ("{{docs}}", true),
            ("!{{docs}}", false),
            ("{{off}}", false),
            ("{{unset}}", false),
            ("!{{unset}}", true),
            ("{{lang}} == rust", true),
            ("{{lang}} == \"go\"", false),
            ("{{lang}} != go", true),
        ] {
            let c = Condition::parse(text).expect(text);
            assert_eq!(c.holds(&v), holds, "{text}");
        }
        for bad in ["docs", "{{a}} {{b}}", "{{a}} > 3"] {
            assert!(Condition::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_dropped_step_hands_its_needs_to_the_steps_after_it() {
        let formula = Formula::parse(
            r#"
            formula = "f"
            [vars]
            docs = "false"
            [[steps]]
            id = "a"
            title = "A"
            [[steps]]
            id = "docs"
            title = "Docs"
            needs = ["a"]
            condition = "{{docs}}"
            [[steps]]
            id = "b"
            title = "B"
            needs = ["docs"]
            "#,
            "t.formula.toml",
        )
        .expect("parses");
        let out = apply(&formula, &values(&[("docs", "false")]));
        let ids: Vec<(&str, Vec<String>)> = out
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.needs.clone()))
            .collect();
        assert_eq!(ids, [("a", vec![]), ("b", vec!["a".to_owned()])]);
        assert_eq!(apply(&formula, &values(&[("docs", "yes")])).steps.len(), 3);
    }
}
