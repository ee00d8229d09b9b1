//! Gas City's formula v2 keys that map onto catalyst's own: a step's `timeout` written as a
//! duration (`"90s"`, `"30m"`, `"1h30m"`), `waits_for = "children-of(<step>)"`, `[steps.retry]
//! max_attempts` (the step's attempts), and `[steps.check]` (a gate after the step). The v2
//! keys whose behaviour lives in Gas City's runtime (`[requires]`, `drain`,
//! `description_file`, `on_complete`) are kept with a warning by [`super::parse`].

use toml::Value;

use super::reader::Reader;
use super::Check;

/// A step's `timeout`: seconds as an integer, or a duration string of whole numbers with `h`,
/// `m` and `s` units (`"1h30m"`, `"45s"`).
pub(super) fn timeout(r: &mut Reader<'_>) -> Option<u64> {
    let value = r.take("timeout")?;
    seconds(r, "timeout", value)
}

/// `value` of `key` as seconds (see [`timeout`]), or a problem.
fn seconds(r: &mut Reader<'_>, key: &str, value: Value) -> Option<u64> {
    match value {
        Value::Integer(n) if n >= 1 => Some(n as u64),
        Value::Integer(n) => {
            r.problem(format!("`{key}` must be at least 1, not {n}"));
            None
        }
        Value::String(text) => match duration(&text) {
            Some(secs) if secs >= 1 => Some(secs),
            _ => {
                r.problem(format!(
                    "`{key} = \"{text}\"` is not a duration (seconds, or whole numbers with `h`, `m` and `s`, such as `\"1h30m\"`)"
                ));
                None
            }
        },
        other => {
            r.problem(format!(
                "`{key}` must be seconds or a duration string, not {}",
                other.type_str()
            ));
            None
        }
    }
}

/// The most attempts a formula may give a step.
const MAX_ATTEMPTS: i64 = 100;

/// A step's failed attempts before the escalated one: catalyst's `max_attempts`, or Gas City's
/// `[steps.retry] max_attempts` (its attempts in all). Gas City's `on_exhausted = "soft_fail"`,
/// which would let the workflow go on past a failed step, is kept with a warning: a step whose
/// attempts are spent blocks its bead.
pub(super) fn max_attempts(r: &mut Reader<'_>) -> Option<u32> {
    let own = r.integer("max_attempts", 1, MAX_ATTEMPTS).map(|n| n as u32);
    let mut retry = r.table("retry")?;
    let from_retry = match retry.remove("max_attempts") {
        None => None,
        Some(Value::Integer(n)) if (1..=MAX_ATTEMPTS).contains(&n) => Some(n as u32),
        Some(other) => {
            r.problem(format!(
                "`retry.max_attempts` must be 1 to {MAX_ATTEMPTS}, not {other}"
            ));
            None
        }
    };
    match retry.remove("on_exhausted") {
        None => {}
        Some(Value::String(s)) if s == "hard_fail" => {}
        Some(Value::String(s)) if s == "soft_fail" => r.warning(
            "`retry.on_exhausted = \"soft_fail\"` is kept but not acted on: a step whose attempts are spent blocks its bead, as with `hard_fail`",
        ),
        Some(other) => r.problem(format!(
            "`retry.on_exhausted` is `\"hard_fail\"` or `\"soft_fail\"`, not {other}"
        )),
    }
    for key in retry.keys() {
        r.warning(format!("`retry.{key}` is kept but not acted on"));
    }
    if own.is_some() && from_retry.is_some() {
        r.problem("`max_attempts` and `retry.max_attempts` say the same: give one");
    }
    own.or(from_retry)
}

/// Gas City's `[steps.check]`: `max_attempts`, and the script in `[steps.check.check]` (`mode =
/// "exec"`, `path`, `timeout`). The step's own `timeout`, which in Gas City bounds its check,
/// becomes the check's unless the check has one: the second value returned is what is left
/// of the step's `timeout` for its agent.
pub(super) fn check(r: &mut Reader<'_>, timeout: Option<u64>) -> (Option<Check>, Option<u64>) {
    let Some(mut outer) = r.table("check") else {
        return (None, timeout);
    };
    let max_attempts = match outer.remove("max_attempts") {
        None => None,
        Some(Value::Integer(n)) if (1..=MAX_ATTEMPTS).contains(&n) => Some(n as u32),
        Some(other) => {
            r.problem(format!(
                "`check.max_attempts` must be 1 to {MAX_ATTEMPTS}, not {other}"
            ));
            None
        }
    };
    let Some(Value::Table(mut script)) = outer.remove("check") else {
        r.problem("`check` needs its script: `[steps.check.check]` with `path = \"…\"`");
        return (None, timeout);
    };
    match script.remove("mode") {
        None => {}
        Some(Value::String(mode)) if mode == "exec" => {}
        Some(other) => r.problem(format!(
            "`check.check.mode = {other}` is not supported: a check is a script (`\"exec\"`)"
        )),
    }
    let path = match script.remove("path") {
        Some(Value::String(path)) if !path.trim().is_empty() => path,
        _ => {
            r.problem("`check.check.path` must name the script to run");
            return (None, timeout);
        }
    };
    let own = script
        .remove("timeout")
        .and_then(|value| seconds(r, "check.check.timeout", value));
    for key in outer
        .keys()
        .map(|k| format!("check.{k}"))
        .chain(script.keys().map(|k| format!("check.check.{k}")))
    {
        r.warning(format!("`{key}` is kept but not acted on"));
    }
    let check = Check {
        path,
        max_attempts,
        timeout: own.or(timeout),
    };
    (Some(check), None)
}

/// The command a check's gate runs: the script's path, quoted for the shell, and named as a
/// path (`./verify.sh`) when it has no folder, so the shell does not look it up on `PATH`.
pub(super) fn check_command(path: &str) -> String {
    let path = if path.contains('/') {
        path.to_owned()
    } else {
        format!("./{path}")
    };
    crate::domain::shell::quote(&path)
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
