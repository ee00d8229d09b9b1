//! Agent prompt templates, one per role, and the result contract they all end with.
//!
//! The built-in set is `agent_prompts.toml` at the repository root, compiled in; a workspace
//! may override some or all of it with `.catalyst/agent_prompts.toml`. See that file's header
//! for its shape and the variables a template sees.
//!
//! Templates see metadata and paths only ([`PromptVars`]), never the bead's text: the text is
//! untrusted and lives in the context file the prompt points to. So that a typo in a template is
//! found when the file is loaded (at start-up or on SIGHUP) rather than when some step first
//! renders it, every template is compiled and its variables are checked against
//! [`PromptVars::NAMES`] on load; rendering is strict as well.
//!
//! A render is bounded: it has [`FUEL`] to spend (MiniJinja charges each instruction and each
//! 64 bytes it creates) and at most [`MAX_PROMPT_BYTES`] of output. Each template is rendered
//! once on load with sample values, so a template that cannot finish within those bounds is
//! refused there, by name, rather than at its first dispatch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use serde::{Deserialize, Serialize};

use crate::domain::formula::{is_name, toml_error};
use crate::domain::id::BeadId;
use crate::domain::model::Role;

/// The work one render may do: about this many MiniJinja instructions, or 64 times as many
/// bytes created. The built-in templates use under 1% of it.
pub const FUEL: u64 = 50_000;

/// The most a rendered prompt may hold.
pub const MAX_PROMPT_BYTES: usize = 1 << 20;

/// The built-in prompt file.
pub const BUILTIN: &str = include_str!("../../agent_prompts.toml");

/// How the built-in prompt file is named in messages.
pub const BUILTIN_SOURCE: &str = "<built-in>/agent_prompts.toml";

/// Everything a prompt template can use. Serialized field names are the template variables.
#[derive(Clone, Debug, Serialize)]
pub struct PromptVars {
    /// The work bead.
    pub bead_id: BeadId,
    /// The step bead (`<bead>.<step>`).
    pub step_id: BeadId,
    /// The step's id within its formula (`review`, `fix-2`).
    pub step: String,
    pub role: Role,
    pub model: String,
    /// 1 for the first try of this step, counting retries.
    pub attempt: u32,
    /// The fix round the step belongs to, 0 when none.
    pub iteration: u32,
    pub worktree: PathBuf,
    pub branch: String,
    pub target_branch: String,
    pub context_md: PathBuf,
    pub context_json: PathBuf,
    pub run_dir: PathBuf,
    /// The result contract; callers set it to [`PromptSet::contract`].
    pub result_contract: String,
}

impl PromptVars {
    /// Values of the shape a real step's have, for the render each template gets on load.
    fn sample(contract: &str) -> PromptVars {
        let bead = BeadId::new("cat-1").expect("a valid id");
        let step = BeadId::new("cat-1.implement").expect("a valid id");
        let run_dir = PathBuf::from("/workspace/.catalyst/runs/cat-1/implement/1");
        PromptVars {
            bead_id: bead,
            step_id: step,
            step: "implement".into(),
            role: Role::Implement,
            model: "sonnet".into(),
            attempt: 1,
            iteration: 0,
            worktree: "/workspace/.catalyst/worktrees/cat-1".into(),
            branch: "catalyst/cat-1".into(),
            target_branch: "main".into(),
            context_md: run_dir.join("context.md"),
            context_json: run_dir.join("context.json"),
            run_dir,
            result_contract: contract.into(),
        }
    }

    /// The variable names a template may use: the fields above.
    pub const NAMES: [&'static str; 14] = [
        "bead_id",
        "step_id",
        "step",
        "role",
        "model",
        "attempt",
        "iteration",
        "worktree",
        "branch",
        "target_branch",
        "context_md",
        "context_json",
        "run_dir",
        "result_contract",
    ];
}

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("cannot read prompts `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Toml { file: String, message: String },
    #[error("{file}: no `contract` (the result contract every prompt ends with)")]
    MissingContract { file: String },
    #[error("{file}: prompt name `{name}` must match `[a-z0-9][a-z0-9_-]*`")]
    BadName { file: String, name: String },
    #[error("{file}: template `{template}`: {message}")]
    Syntax {
        file: String,
        template: String,
        message: String,
    },
    #[error(
        "{file}: template `{template}` uses unknown variable {} (known: {})",
        backticked(.variables), PromptVars::NAMES.join(", ")
    )]
    UnknownVariables {
        file: String,
        template: String,
        variables: Vec<String>,
    },
    #[error(
        "{file}: template `{template}` does not finish within the bounds of a render \
         ({FUEL} fuel, {MAX_PROMPT_BYTES} bytes of output): {message}"
    )]
    Unbounded {
        file: String,
        template: String,
        message: String,
    },
    #[error("no prompt template `{0}`")]
    UnknownTemplate(String),
    #[error("rendering template `{template}` from {file}: {message}")]
    Render {
        file: String,
        template: String,
        message: String,
    },
}

fn backticked(names: &[String]) -> String {
    let names: Vec<_> = names.iter().map(|n| format!("`{n}`")).collect();
    names.join(", ")
}

/// The TOML shape of a prompt file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    contract: Option<String>,
    #[serde(default)]
    prompts: BTreeMap<String, PromptEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptEntry {
    template: String,
    #[allow(dead_code)] // for people reading the file
    #[serde(default)]
    description: Option<String>,
}

/// A loaded, checked set of prompt templates and the result contract.
#[derive(Clone, Debug)]
pub struct PromptSet {
    env: Environment<'static>,
    contract: String,
    /// The file each template came from, for messages.
    sources: BTreeMap<String, String>,
}

impl PromptSet {
    /// The built-in prompts. Cannot fail: the file is compiled in and checked by the tests.
    pub fn builtin() -> PromptSet {
        PromptSet::from_toml(BUILTIN, BUILTIN_SOURCE)
            .expect("the built-in agent_prompts.toml is checked by the tests")
    }

    /// A complete prompt set from the text of a prompt file named `file` in messages. The file
    /// must have a `contract`; every template must compile and use only [`PromptVars::NAMES`].
    pub fn from_toml(text: &str, file: &str) -> Result<PromptSet, PromptError> {
        let parsed = parse_file(text, file)?;
        let contract = parsed
            .contract
            .clone()
            .ok_or_else(|| PromptError::MissingContract { file: file.into() })?;
        let empty = PromptSet {
            env: new_env(),
            contract,
            sources: BTreeMap::new(),
        };
        empty.with(parsed, file)
    }

    /// This set overridden by the prompt file text `text` (named `file` in messages); see
    /// `crate::daemon::load::prompts`.
    pub fn overlay(&self, text: &str, file: &str) -> Result<PromptSet, PromptError> {
        let parsed = parse_file(text, file)?;
        self.clone().with(parsed, file)
    }

    fn with(mut self, parsed: PromptFile, file: &str) -> Result<PromptSet, PromptError> {
        if let Some(contract) = parsed.contract {
            self.contract = contract;
        }
        let known: BTreeSet<String> = PromptVars::NAMES
            .iter()
            .map(|n| n.to_string())
            .chain(self.env.globals().map(|(name, _)| name.to_owned()))
            .collect();
        for (name, entry) in parsed.prompts {
            if !is_name(&name) {
                return Err(PromptError::BadName {
                    file: file.into(),
                    name,
                });
            }
            let syntax = |e: minijinja::Error| PromptError::Syntax {
                file: file.into(),
                template: name.clone(),
                message: describe(&e),
            };
            self.env
                .add_template_owned(name.clone(), entry.template)
                .map_err(syntax)?;
            let template = self.env.get_template(&name).map_err(syntax)?;
            let unknown: BTreeSet<String> = template
                .undeclared_variables(false)
                .into_iter()
                .filter(|v| !known.contains(v))
                .collect();
            if !unknown.is_empty() {
                return Err(PromptError::UnknownVariables {
                    file: file.into(),
                    template: name,
                    variables: unknown.into_iter().collect(),
                });
            }
            self.sources.insert(name.clone(), file.into());
        }
        let sample = PromptVars::sample(&self.contract);
        for name in self.sources.keys() {
            if let Err(Bounded::Exceeded(message)) = self.bounded_render(name, &sample) {
                return Err(PromptError::Unbounded {
                    file: self.sources[name].clone(),
                    template: name.clone(),
                    message,
                });
            }
        }
        Ok(self)
    }

    /// Whether there is a template of this name.
    pub fn has(&self, name: &str) -> bool {
        self.sources.contains_key(name)
    }

    /// The template names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(String::as_str)
    }

    /// The result contract: what an agent's final message must end with. It is sent back to an
    /// agent that forgot it (in its conversation, or by the `Stop` hook).
    pub fn contract(&self) -> &str {
        &self.contract
    }

    /// Renders template `name` with `vars`.
    pub fn render(&self, name: &str, vars: &PromptVars) -> Result<String, PromptError> {
        let file = self
            .sources
            .get(name)
            .ok_or_else(|| PromptError::UnknownTemplate(name.into()))?;
        self.bounded_render(name, vars).map_err(|e| match e {
            Bounded::Failed(message) => PromptError::Render {
                file: file.clone(),
                template: name.into(),
                message,
            },
            Bounded::Exceeded(message) => PromptError::Unbounded {
                file: file.clone(),
                template: name.into(),
                message,
            },
        })
    }

    /// Renders template `name` within [`FUEL`] and [`MAX_PROMPT_BYTES`].
    fn bounded_render(&self, name: &str, vars: &PromptVars) -> Result<String, Bounded> {
        let failed = |e: &minijinja::Error| Bounded::Failed(describe(e));
        let template = self.env.get_template(name).map_err(|e| failed(&e))?;
        let json = serde_json::to_value(vars).map_err(|e| Bounded::Failed(e.to_string()))?;
        let mut out = Capped::default();
        match template.render_captured_to(to_value(json), &mut out) {
            Ok(_) => String::from_utf8(out.bytes).map_err(|e| Bounded::Failed(e.to_string())),
            Err(_) if out.over => Err(Bounded::Exceeded(format!(
                "its output passed {MAX_PROMPT_BYTES} bytes"
            ))),
            Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => {
                Err(Bounded::Exceeded(describe(&e)))
            }
            Err(e) => Err(failed(&e)),
        }
    }
}

/// Why a bounded render did not give a prompt.
enum Bounded {
    /// The template went past a bound.
    Exceeded(String),
    /// Any other error.
    Failed(String),
}

/// The output of one render, refusing to grow past [`MAX_PROMPT_BYTES`].
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
    over: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_PROMPT_BYTES {
            self.over = true;
            return Err(std::io::Error::other("the prompt is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn parse_file(text: &str, file: &str) -> Result<PromptFile, PromptError> {
    toml::from_str(text).map_err(|e| PromptError::Toml {
        file: file.into(),
        message: toml_error(text, &e),
    })
}

fn new_env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Prompts are plain text; nothing may be HTML-escaped whatever a template is called.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
        // Only custom delimiters can make the build fail.
        .expect("the default delimiters are valid");
    env.set_syntax(syntax);
    env
}

/// A MiniJinja error on one line: what went wrong and where.
fn describe(e: &minijinja::Error) -> String {
    let what = e
        .detail()
        .map_or_else(|| e.kind().to_string(), |d| format!("{}: {d}", e.kind()));
    match e.line() {
        Some(line) => format!("{what} (line {line})"),
        None => what,
    }
}

/// JSON as a template value (MiniJinja is built without its serde feature here): the prompt
/// variables, the web dashboard's page data.
pub fn to_value(json: serde_json::Value) -> Value {
    use serde_json::Value as Json;
    match json {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(u)) => Value::from(u),
            (None, None) => Value::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::from(s),
        Json::Array(items) => Value::from(items.into_iter().map(to_value).collect::<Vec<_>>()),
        Json::Object(map) => Value::from(
            map.into_iter()
                .map(|(k, v)| (k, to_value(v)))
                .collect::<BTreeMap<String, Value>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(set: &PromptSet, role: Role) -> PromptVars {
        PromptVars {
            bead_id: BeadId::new("cat-1x9").expect("valid"),
            step_id: BeadId::new("cat-1x9.review").expect("valid"),
            step: role.as_str().into(),
            role,
            model: "sonnet".into(),
            attempt: 2,
            iteration: 1,
            worktree: "/ws/.catalyst/worktrees/cat-1x9".into(),
            branch: "catalyst/cat-1x9".into(),
            target_branch: "main".into(),
            context_md: "/ws/.catalyst/runs/cat-1x9/review/2/context.md".into(),
            context_json: "/ws/.catalyst/runs/cat-1x9/review/2/context.json".into(),
            run_dir: "/ws/.catalyst/runs/cat-1x9/review/2".into(),
            result_contract: set.contract().into(),
        }
    }

    #[test]
    fn the_builtin_prompts_load_and_every_role_renders() {
        let set = PromptSet::builtin();
        assert!(set.contract().contains("---STEP-RESULT---"));
        assert!(set.contract().contains("---END-RESULT---"));
        for role in Role::ALL.into_iter().filter(|r| r.is_agent()) {
            assert!(set.has(role.as_str()), "no template for {role}");
            let text = set
                .render(role.as_str(), &vars(&set, role))
                .expect("renders");
            assert!(
                text.contains("/ws/.catalyst/runs/cat-1x9/review/2/context.md"),
                "{role}"
            );
            assert!(text.contains("cat-1x9"), "{role}");
            assert!(
                text.ends_with(&format!("{}\n", set.contract())) || text.contains(set.contract()),
                "{role}"
            );
            assert!(
                !text.contains("{{") && !text.contains("{%"),
                "{role}: unrendered tag"
            );
        }
        let names: Vec<_> = set.names().collect();
        assert_eq!(
            names,
            ["fix", "implement", "merge", "refine", "review", "task"]
        );
    }

    #[test]
    fn prompt_vars_names_are_the_serialized_fields() {
        let set = PromptSet::builtin();
        let json = serde_json::to_value(vars(&set, Role::Review)).expect("serializes");
        let fields: BTreeSet<_> = json.as_object().expect("object").keys().cloned().collect();
        let names: BTreeSet<_> = PromptVars::NAMES.iter().map(|n| n.to_string()).collect();
        assert_eq!(fields, names);
    }

    #[test]
    fn load_errors_name_the_file_the_template_and_the_problem() {
        let cases: &[(&str, &str)] = &[
            (
                "contract = 'c'\n[prompts.review]\ntemplate = 'Review {{ bead_title }} and {{ bead_id }} {{ zzz }}'\n",
                "p.toml: template `review` uses unknown variable `bead_title`, `zzz` (known: bead_id,",
            ),
            (
                "contract = 'c'\n[prompts.review]\ntemplate = 'Review {% if bead_id %}'\n",
                "p.toml: template `review`: syntax error: unexpected end of input",
            ),
            (
                "contract = 'c'\n[prompts.review]\ntemplate = '{{ bead_id }'\n",
                "p.toml: template `review`: syntax error",
            ),
            ("[prompts.review]\ntemplate = 'x'\n", "p.toml: no `contract`"),
            (
                "contract = 'c'\n[prompts.review]\ntemplat = 'x'\n",
                "p.toml: invalid TOML at line 3, column 1: unknown field `templat`, expected `template` or `description`",
            ),
            ("contract = 'c'\n[prompts.\"Re.view\"]\ntemplate = 'x'\n", "p.toml: prompt name `Re.view` must match"),
            ("contract = 'c'\nprompt = 1\n", "unknown field `prompt`"),
        ];
        for (text, want) in cases {
            let err = PromptSet::from_toml(text, "p.toml").expect_err(want);
            assert!(err.to_string().contains(want), "want {want:?} in {err}");
        }
    }

    #[test]
    fn loops_and_globals_are_not_unknown_variables() {
        let text = "contract = 'c'\n[prompts.x]\ntemplate = '''{% for i in range(attempt) %}{{ loop.index }}{% endfor %}{% set n = step %}{{ n }}'''\n";
        let set = PromptSet::from_toml(text, "p.toml").expect("loads");
        let out = set.render("x", &vars(&set, Role::Task)).expect("renders");
        assert_eq!(out, "12task");
    }

    #[test]
    fn an_override_replaces_some_templates_and_keeps_the_rest() {
        let builtin = PromptSet::builtin();
        let set = builtin
            .overlay(
                "[prompts.review]\ntemplate = 'Strict review of {{ bead_id }}.'\n[prompts.security]\ntemplate = 'Audit {{ branch }}.'\n",
                "agent_prompts.toml",
            )
            .expect("loads");
        assert_eq!(set.contract(), builtin.contract(), "contract falls back");
        let review = set
            .render("review", &vars(&set, Role::Review))
            .expect("renders");
        assert_eq!(review, "Strict review of cat-1x9.");
        assert_eq!(
            set.render("security", &vars(&set, Role::Review))
                .expect("renders"),
            "Audit catalyst/cat-1x9."
        );
        let implement = set
            .render("implement", &vars(&set, Role::Implement))
            .expect("renders");
        assert_eq!(
            implement,
            builtin
                .render("implement", &vars(&builtin, Role::Implement))
                .expect("renders")
        );

        let bad = builtin.overlay("[prompts.fix]\ntemplate = '{{ nope }}'\n", "o.toml");
        let err = bad.expect_err("unknown var");
        assert!(
            err.to_string()
                .starts_with("o.toml: template `fix` uses unknown variable `nope`"),
            "{err}"
        );
    }

    #[test]
    fn a_template_that_cannot_finish_within_its_bounds_is_refused_on_load_by_name() {
        let nested = "contract = 'c'\n[prompts.review]\ntemplate = '''{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}'''\n";
        let err = PromptSet::builtin()
            .overlay(nested, "o.toml")
            .expect_err("out of fuel");
        let text = err.to_string();
        assert!(
            text.starts_with("o.toml: template `review` does not finish within the bounds")
                && text.contains("out of fuel"),
            "{text}"
        );
        // Cheap to make, too long to send: the output cap.
        let long = "contract = 'c'\n[prompts.review]\ntemplate = '''{{ \"x\" * 1500000 }}'''\n";
        let err = PromptSet::builtin()
            .overlay(long, "o.toml")
            .expect_err("too long");
        assert!(
            err.to_string().contains("its output passed 1048576 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_render_that_passes_its_bounds_only_with_real_values_fails_there_by_name() {
        let text = "contract = 'c'\n[prompts.review]\ntemplate = '''{% if attempt > 1 %}{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}{% endif %}ok'''\n";
        let set = PromptSet::builtin().overlay(text, "o.toml").expect("loads");
        let mut second = vars(&set, Role::Review);
        second.attempt = 1;
        assert_eq!(set.render("review", &second).expect("renders"), "ok");
        second.attempt = 2;
        let err = set.render("review", &second).expect_err("bounded");
        assert!(
            matches!(err, PromptError::Unbounded { ref template, .. } if template == "review"),
            "{err}"
        );
    }

    #[test]
    fn rendering_an_unknown_template_is_an_error() {
        let set = PromptSet::builtin();
        let err = set
            .render("deploy", &vars(&set, Role::Task))
            .expect_err("unknown");
        assert_eq!(err.to_string(), "no prompt template `deploy`");
    }
}
