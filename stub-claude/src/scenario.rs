//! Scenario files: which response an invocation gives, chosen by role, step, bead and model.
//!
//! Scenarios are written by tests, so they are parsed strictly: an unknown key is an error, not
//! a silently ignored typo that would make a test pass for the wrong reason.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use nix::sys::signal::Signal;
use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;

/// A scenario file: rules tried in order, the first that matches answers.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub rule: Vec<Rule>,
}

/// One rule: matchers (all given ones must match) and the responses it gives in turn.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub role: Option<String>,
    pub step: Option<String>,
    pub bead: Option<String>,
    pub model: Option<String>,
    /// Count this rule's responses separately for each bead, so parallel beads each see the
    /// whole sequence (e.g. every bead's review rejects once, then approves).
    #[serde(default)]
    pub per_bead: bool,
    /// Matches only when this path (relative to the worktree) exists, or with
    /// `unless_exists` only when it does not: a rule that answers from the worktree's content
    /// instead of a count gives the same answer when an interrupted step runs again (a review
    /// that approves once the fix's file is there).
    pub if_exists: Option<String>,
    pub unless_exists: Option<String>,
    pub responses: Vec<Response>,
}

/// What one invocation does and answers. Every key is optional; the empty response is a
/// valid DONE (APPROVED for a review).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Response {
    pub status: Option<String>,
    pub verdict: Option<String>,
    pub summary: Option<String>,
    pub instructions: Vec<String>,
    pub text: Option<String>,
    pub raw: Option<String>,
    pub write: BTreeMap<String, String>,
    pub append: BTreeMap<String, String>,
    pub delete: Vec<String>,
    pub tools: Vec<ToolCall>,
    /// Commands run with `sh -c` in the agent's own process tree, past every hook: what an
    /// agent that slips a tool past the policy could do. Each is logged with its exit code.
    pub shell: Vec<String>,
    pub sleep_ms: Option<u64>,
    pub wait_for: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<SignalSpec>,
    pub flood_bytes: Option<u64>,
    pub usage_limit: Option<UsageLimit>,
    pub cost_usd: Option<f64>,
    pub is_error: bool,
    pub after_stop_block: Option<Box<Response>>,
    pub stderr: Option<String>,
    pub non_utf8: bool,
    pub fake_block_in_tool_result: bool,
    pub fake_block_in_earlier_turn: bool,
}

/// A tool call made through the `--settings` hooks, as the model would make it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A signal by number (`9`) or name (`"KILL"`, `"SIGKILL"`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum SignalSpec {
    Number(i32),
    Name(String),
}

impl SignalSpec {
    /// The signal named, if there is one by that name or number.
    pub fn signal(&self) -> Option<Signal> {
        match self {
            SignalSpec::Number(n) => Signal::try_from(*n).ok(),
            SignalSpec::Name(name) => {
                let name = name.trim();
                if let Ok(n) = name.parse::<i32>() {
                    return Signal::try_from(n).ok();
                }
                let upper = name.to_ascii_uppercase();
                let full = if upper.starts_with("SIG") {
                    upper
                } else {
                    format!("SIG{upper}")
                };
                full.parse().ok()
            }
        }
    }
}

/// `usage_limit = true` reports the limit in Claude Code's headless wording; a string is used
/// as the message itself (e.g. the newer "You've hit your limit · resets 3pm (UTC)").
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum UsageLimit {
    Flag(bool),
    Message(String),
}

/// What the invocation is, from catalyst's environment and the command line.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub role: String,
    pub step: String,
    pub bead: String,
    pub model: String,
    /// The working directory, for `if_exists` / `unless_exists`.
    pub cwd: PathBuf,
}

impl Facts {
    /// The step id without its bead: `review` for `cat-1.review`.
    pub fn short_step(&self) -> &str {
        if !self.bead.is_empty() {
            if let Some(rest) = self
                .step
                .strip_prefix(self.bead.as_str())
                .and_then(|r| r.strip_prefix('.'))
            {
                return rest;
            }
        }
        self.step.rsplit('.').next().unwrap_or(&self.step)
    }
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ScenarioRead {
            path: path.to_path_buf(),
            source,
        })?;
        let scenario: Scenario = toml::from_str(&text).map_err(|source| Error::ScenarioParse {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
        scenario.check().map_err(|message| Error::ScenarioInvalid {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(scenario)
    }

    fn check(&self) -> Result<(), String> {
        for (i, rule) in self.rule.iter().enumerate() {
            if rule.responses.is_empty() {
                return Err(format!("rule {i} has no responses"));
            }
            for path in rule.if_exists.iter().chain(&rule.unless_exists) {
                relative_path(path).map_err(|m| format!("rule {i}: {m}"))?;
            }
            for (j, response) in rule.responses.iter().enumerate() {
                response
                    .check()
                    .map_err(|m| format!("rule {i}, response {j}: {m}"))?;
            }
        }
        Ok(())
    }

    /// The first rule that matches, with its index.
    pub fn matching_rule(&self, facts: &Facts) -> Option<(usize, &Rule)> {
        self.rule.iter().enumerate().find(|(_, r)| r.matches(facts))
    }
}

impl Rule {
    fn matches(&self, facts: &Facts) -> bool {
        let role = self.role.as_deref().is_none_or(|p| glob(p, &facts.role));
        let bead = self.bead.as_deref().is_none_or(|p| glob(p, &facts.bead));
        let model = self.model.as_deref().is_none_or(|p| glob(p, &facts.model));
        let step = self
            .step
            .as_deref()
            .is_none_or(|p| glob(p, &facts.step) || glob(p, facts.short_step()));
        let exists = |p: &str| facts.cwd.join(p).exists();
        let present = self.if_exists.as_deref().is_none_or(exists);
        let absent = self.unless_exists.as_deref().is_none_or(|p| !exists(p));
        role && bead && model && step && present && absent
    }
}

impl Response {
    /// Refuses file changes that would leave the worktree; `tools` are exempt, since there the
    /// hooks are the guard under test.
    fn check(&self) -> Result<(), String> {
        let paths = self
            .write
            .keys()
            .chain(self.append.keys())
            .chain(self.delete.iter());
        for path in paths {
            relative_path(path)?;
        }
        if let Some(spec) = &self.signal {
            if spec.signal().is_none() {
                return Err(format!("unknown signal {spec:?}"));
            }
        }
        if let Some(next) = &self.after_stop_block {
            next.check().map_err(|m| format!("after_stop_block: {m}"))?;
        }
        Ok(())
    }
}

/// A path inside the worktree: relative, and without `..`.
pub fn relative_path(path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() {
        return Err(format!(
            "`{path}` must be a path relative to the worktree (use `tools` to write elsewhere)"
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "`{path}` leaves the worktree (use `tools` to write elsewhere)"
        ));
    }
    Ok(p.to_path_buf())
}

/// Matches `text` against `pattern`, where `*` stands for any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            backtrack = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((star, matched)) = backtrack {
            pi = star + 1;
            ti = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(role: &str, step: &str, bead: &str, model: &str) -> Facts {
        Facts {
            role: role.into(),
            step: step.into(),
            bead: bead.into(),
            model: model.into(),
            cwd: PathBuf::new(),
        }
    }

    #[test]
    fn glob_cases() {
        let cases = [
            ("review", "review", true),
            ("review", "reviews", false),
            ("fix-*", "fix-12", true),
            ("*", "", true),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("*.review", "cat-1.review", true),
            ("", "", true),
            ("", "x", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob(pattern, text), expected, "{pattern:?} vs {text:?}");
        }
    }

    #[test]
    fn step_matches_full_id_or_the_part_after_the_bead() {
        let scenario: Scenario = toml::from_str(
            r#"
            [[rule]]
            step = "cat-2.review"
            responses = [{ summary = "full" }]
            [[rule]]
            step = "review"
            responses = [{ summary = "short" }]
            [[rule]]
            step = "fix-*"
            model = "opus"
            responses = [{ summary = "fix on opus" }]
            "#,
        )
        .expect("valid scenario");
        let pick = |f: &Facts| scenario.matching_rule(f).map(|(i, _)| i);
        assert_eq!(pick(&facts("review", "cat-2.review", "cat-2", "")), Some(0));
        assert_eq!(pick(&facts("review", "cat-1.review", "cat-1", "")), Some(1));
        assert_eq!(
            pick(&facts("review", "bd-5.1.review", "bd-5.1", "")),
            Some(1)
        );
        assert_eq!(pick(&facts("fix", "cat-1.fix-2", "cat-1", "opus")), Some(2));
        assert_eq!(pick(&facts("fix", "cat-1.fix-2", "cat-1", "sonnet")), None);
    }

    #[test]
    fn rules_can_follow_the_worktree_content() {
        let dir = tempfile::tempdir().expect("temp dir");
        let scenario: Scenario = toml::from_str(
            r#"
            [[rule]]
            role = "review"
            unless_exists = "FIXED"
            responses = [{ verdict = "REJECTED", summary = "not yet" }]
            [[rule]]
            role = "review"
            if_exists = "FIXED"
            responses = [{ summary = "fixed" }]
            "#,
        )
        .expect("scenario");
        scenario.check().expect("valid");
        let mut f = facts("review", "cat-1.review", "cat-1", "haiku");
        f.cwd = dir.path().to_path_buf();
        assert_eq!(scenario.matching_rule(&f).map(|(i, _)| i), Some(0));
        std::fs::write(dir.path().join("FIXED"), "").expect("write");
        assert_eq!(scenario.matching_rule(&f).map(|(i, _)| i), Some(1));
        let escaping: Scenario =
            toml::from_str("[[rule]]\nif_exists = \"../x\"\nresponses = [{}]").expect("parse");
        assert!(escaping.check().is_err());
    }

    #[test]
    fn unknown_keys_and_escaping_paths_are_refused() {
        assert!(toml::from_str::<Scenario>("[[rule]]\nresponses = [{ sumary = \"x\" }]").is_err());
        for bad in ["/etc/passwd", "../x", "a/../../x", ""] {
            let s = Scenario {
                rule: vec![Rule {
                    role: None,
                    step: None,
                    bead: None,
                    model: None,
                    per_bead: false,
                    if_exists: None,
                    unless_exists: None,
                    responses: vec![Response {
                        delete: vec![bad.into()],
                        ..Response::default()
                    }],
                }],
            };
            assert!(s.check().is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn every_key_parses() {
        let scenario: Scenario = toml::from_str(
            r#"
            [[rule]]
            role = "implement"
            per_bead = true
            responses = [{ status = "BLOCKED", verdict = "REJECTED", summary = "s",
              instructions = ["a"], text = "t", write = { "a.txt" = "x" },
              append = { "b.txt" = "y" }, delete = ["c.txt"],
              tools = [{ name = "Write", input = { file_path = "/tmp/x", content = "y" } }],
              sleep_ms = 1, wait_for = "go", exit_code = 3, signal = "KILL", flood_bytes = 10,
              usage_limit = true, cost_usd = 0.5, is_error = true, stderr = "e",
              non_utf8 = true, fake_block_in_tool_result = true,
              after_stop_block = { summary = "fixed" } },
              { raw = "garbage", signal = 9, usage_limit = "You've hit your limit" }]
            "#,
        )
        .expect("every key parses");
        scenario.check().expect("valid");
        let first = &scenario.rule[0].responses[0];
        assert_eq!(first.tools[0].input["file_path"], "/tmp/x");
        assert!(matches!(first.signal, Some(SignalSpec::Name(_))));
        assert!(matches!(
            scenario.rule[0].responses[1].signal,
            Some(SignalSpec::Number(9))
        ));
    }

    #[test]
    fn signals_by_name_or_number() {
        let cases = [
            (SignalSpec::Name("SIGKILL".into()), Signal::SIGKILL),
            (SignalSpec::Name("kill".into()), Signal::SIGKILL),
            (SignalSpec::Name("TERM".into()), Signal::SIGTERM),
            (SignalSpec::Name("9".into()), Signal::SIGKILL),
            (SignalSpec::Number(15), Signal::SIGTERM),
        ];
        for (spec, expected) in cases {
            assert_eq!(spec.signal(), Some(expected));
        }
        assert_eq!(SignalSpec::Name("NOPE".into()).signal(), None);
        assert_eq!(SignalSpec::Number(999).signal(), None);
    }
}
