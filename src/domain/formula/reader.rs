//! Reading typed values out of a TOML table, one problem per wrong value, and reporting the
//! keys nobody asked for.

use toml::{Table, Value};

use super::Problem;

/// Takes typed values out of a TOML table, recording a problem for each wrong one.
pub(super) struct Reader<'a> {
    file: &'a str,
    step: Option<String>,
    /// Prefix for messages, e.g. "var `x`: ".
    pub(super) context: String,
    table: Table,
    problems: &'a mut Vec<Problem>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(
        file: &'a str,
        step: Option<String>,
        table: Table,
        problems: &'a mut Vec<Problem>,
    ) -> Self {
        Reader {
            file,
            step,
            context: String::new(),
            table,
            problems,
        }
    }

    pub(super) fn problem(&mut self, message: impl AsRef<str>) {
        self.problems.push(Problem {
            file: self.file.to_owned(),
            step: self.step.clone(),
            message: format!("{}{}", self.context, message.as_ref()),
            warning: false,
        });
    }

    /// A problem that does not stop the formula from loading.
    pub(super) fn warning(&mut self, message: impl AsRef<str>) {
        self.problem(message);
        if let Some(last) = self.problems.last_mut() {
            last.warning = true;
        }
    }

    /// The value of `key`, left in place.
    pub(super) fn peek(&self, key: &str) -> Option<&Value> {
        self.table.get(key)
    }

    pub(super) fn take(&mut self, key: &str) -> Option<Value> {
        self.table.remove(key)
    }

    fn wrong_type(&mut self, key: &str, want: &str, got: &Value) {
        self.problem(format!("`{key}` must be {want}, not {}", got.type_str()));
    }

    pub(super) fn string(&mut self, key: &str) -> Option<String> {
        match self.take(key)? {
            Value::String(s) => Some(s),
            other => {
                self.wrong_type(key, "a string", &other);
                None
            }
        }
    }

    pub(super) fn bool(&mut self, key: &str) -> Option<bool> {
        match self.take(key)? {
            Value::Boolean(b) => Some(b),
            other => {
                self.wrong_type(key, "a boolean", &other);
                None
            }
        }
    }

    pub(super) fn integer(&mut self, key: &str, min: i64, max: i64) -> Option<i64> {
        match self.take(key)? {
            Value::Integer(n) if (min..=max).contains(&n) => Some(n),
            Value::Integer(n) => {
                let range = if max == i64::MAX {
                    format!("at least {min}")
                } else {
                    format!("{min} to {max}")
                };
                self.problem(format!("`{key}` must be {range}, not {n}"));
                None
            }
            other => {
                self.wrong_type(key, "an integer", &other);
                None
            }
        }
    }

    pub(super) fn strings(&mut self, key: &str) -> Option<Vec<String>> {
        let value = self.take(key)?;
        let Value::Array(items) = &value else {
            self.wrong_type(key, "an array of strings", &value);
            return None;
        };
        let strings: Option<Vec<String>> = items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect();
        if strings.is_none() {
            self.problem(format!("`{key}` must be an array of strings"));
        }
        strings
    }

    pub(super) fn table(&mut self, key: &str) -> Option<Table> {
        match self.take(key)? {
            Value::Table(t) => Some(t),
            other => {
                self.wrong_type(key, "a table", &other);
                None
            }
        }
    }

    /// Reports every key nobody took: by name, with a hint for known beads features. Keys of
    /// `kept` (beads or Gas Town keys that only matter to their own runtime) are a warning
    /// each, and returned, so that they are recorded, not lost.
    pub(super) fn finish(mut self, unsupported: &[(&str, &str)], kept: &[(&str, &str)]) -> Table {
        let mut recorded = Table::new();
        for (key, value) in std::mem::take(&mut self.table) {
            if let Some((_, why)) = kept.iter().find(|(k, _)| *k == key) {
                self.warning(format!("`{key}` is kept but not acted on: {why}"));
                recorded.insert(key, value);
                continue;
            }
            match unsupported.iter().find(|(k, _)| *k == key) {
                Some((_, hint)) => {
                    self.problem(format!("`{key}` is not supported by catalyst: {hint}"))
                }
                None => self.problem(format!("unknown key `{key}`")),
            }
        }
        recorded
    }
}
