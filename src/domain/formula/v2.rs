//! Gas City's formula v2 keys that map onto catalyst's own: a step's `timeout` written as a
//! duration (`"90s"`, `"30m"`, `"1h30m"`), and `waits_for = "children-of(<step>)"`. The v2 keys
//! whose behaviour lives in Gas City's runtime (`[requires]`, a step's `check`, `retry`,
//! `drain`, `opt_model`, `description_file`) are kept with a warning by [`super::parse`].

use toml::Value;

use super::reader::Reader;

/// A step's `timeout`: seconds as an integer, or a duration string of whole numbers with `h`,
/// `m` and `s` units (`"1h30m"`, `"45s"`).
pub(super) fn timeout(r: &mut Reader<'_>) -> Option<u64> {
    match r.take("timeout")? {
        Value::Integer(n) if n >= 1 => Some(n as u64),
        Value::Integer(n) => {
            r.problem(format!("`timeout` must be at least 1, not {n}"));
            None
        }
        Value::String(text) => match duration(&text) {
            Some(secs) if secs >= 1 => Some(secs),
            _ => {
                r.problem(format!(
                    "`timeout = \"{text}\"` is not a duration (seconds, or whole numbers with `h`, `m` and `s`, such as `\"1h30m\"`)"
                ));
                None
            }
        },
        other => {
            r.problem(format!(
                "`timeout` must be seconds or a duration string, not {}",
                other.type_str()
            ));
            None
        }
    }
}

/// Seconds in `"1h30m"`, `"90s"`, `"2m"`; `None` for anything else.
fn duration(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        let n: u64 = number.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        number.clear();
        any = true;
    }
    (any && number.is_empty()).then_some(total)
}

/// The step `waits_for = "children-of(<step>)"` names, if that is its shape.
pub(super) fn children_of(waits_for: &str) -> Option<&str> {
    let inner = waits_for
        .trim()
        .strip_prefix("children-of(")?
        .strip_suffix(')')?
        .trim();
    super::is_name(inner).then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_seconds() {
        for (text, want) in [
            ("90s", Some(90)),
            ("30m", Some(1800)),
            ("1h30m", Some(5400)),
            ("2h", Some(7200)),
            ("", None),
            ("10", None),
            ("1d", None),
            ("m", None),
            ("1.5h", None),
        ] {
            assert_eq!(duration(text), want, "{text}");
        }
        assert_eq!(children_of("children-of(survey)"), Some("survey"));
        assert_eq!(children_of("all-children"), None);
    }
}
