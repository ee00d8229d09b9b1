//! Claude Code's command line, as far as catalyst's agent profiles use it.
//!
//! The parser is strict on purpose: an option Claude Code does not have is refused with Claude
//! Code's own wording and exit code 1, so a typo in a profile fails in the tests instead of in
//! front of a user. List-valued options (`--tools`, `--allowedTools`, `--disallowedTools`,
//! `--add-dir`, `--mcp-config`) take every following argument up to the next option, as the real
//! CLI's variadic options do; that includes a trailing prompt, exactly like the real thing.

use crate::error::Error;

/// The version line `--version` prints, in Claude Code's format.
pub const VERSION_LINE: &str = "2.1.197 (Claude Code)";

/// What `--output-format` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

/// What `--input-format` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    Text,
    StreamJson,
}

/// The options of one print-mode invocation.
#[derive(Clone, Debug)]
pub struct Args {
    pub print: bool,
    pub output_format: OutputFormat,
    pub input_format: InputFormat,
    pub verbose: bool,
    pub model: Option<String>,
    pub settings: Option<String>,
    /// `--tools`: `None` when not given (every tool), else the named tools (`default` = all).
    pub tools: Option<Vec<String>>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub permission_mode: Option<String>,
    pub skip_permissions: bool,
    pub session_id: Option<String>,
    pub max_turns: Option<u32>,
    pub include_partial_messages: bool,
    /// The prompt given as a positional argument; otherwise it is read from stdin.
    pub prompt: Option<String>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            print: false,
            output_format: OutputFormat::Text,
            input_format: InputFormat::Text,
            verbose: false,
            model: None,
            settings: None,
            tools: None,
            allowed_tools: Vec::new(),
            disallowed_tools: Vec::new(),
            permission_mode: None,
            skip_permissions: false,
            session_id: None,
            max_turns: None,
            include_partial_messages: false,
            prompt: None,
        }
    }
}

/// What the command line asks the stub to do.
#[derive(Clone, Debug)]
pub enum Command {
    Run(Box<Args>),
    Version,
    Help,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Switch,
    Value,
    List,
}

/// Every option the stub accepts: long name, short name, arity.
const OPTIONS: &[(&str, Option<char>, Arity)] = &[
    ("print", Some('p'), Arity::Switch),
    ("help", Some('h'), Arity::Switch),
    ("version", Some('v'), Arity::Switch),
    ("verbose", None, Arity::Switch),
    ("output-format", None, Arity::Value),
    ("input-format", None, Arity::Value),
    ("model", None, Arity::Value),
    ("fallback-model", None, Arity::Value),
    ("settings", None, Arity::Value),
    ("tools", None, Arity::List),
    ("allowedTools", None, Arity::List),
    ("allowed-tools", None, Arity::List),
    ("disallowedTools", None, Arity::List),
    ("disallowed-tools", None, Arity::List),
    ("permission-mode", None, Arity::Value),
    ("append-system-prompt", None, Arity::Value),
    ("system-prompt", None, Arity::Value),
    ("max-turns", None, Arity::Value),
    ("max-budget-usd", None, Arity::Value),
    ("session-id", None, Arity::Value),
    ("dangerously-skip-permissions", None, Arity::Switch),
    ("add-dir", None, Arity::List),
    ("mcp-config", None, Arity::List),
    ("strict-mcp-config", None, Arity::Switch),
    ("include-partial-messages", None, Arity::Switch),
    ("no-session-persistence", None, Arity::Switch),
];

fn usage(message: String) -> Error {
    Error::Usage(message)
}

/// Parses the arguments after the program name.
pub fn parse(argv: &[String]) -> Result<Command, Error> {
    let mut args = Args::default();
    let mut positionals: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        if arg == "--" {
            positionals.extend(argv[i..].iter().cloned());
            break;
        }
        let (name, inline) = if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => (name.to_string(), Some(value.to_string())),
                None => (long.to_string(), None),
            }
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            let c = short.chars().next().unwrap_or_default();
            match OPTIONS.iter().find(|(_, s, _)| *s == Some(c)) {
                Some((long, _, _)) => (long.to_string(), None),
                None => return Err(usage(format!("error: unknown option '{arg}'"))),
            }
        } else if arg.starts_with('-') && arg.len() > 1 {
            return Err(usage(format!("error: unknown option '{arg}'")));
        } else {
            positionals.push(arg.clone());
            continue;
        };
        let Some(&(_, _, arity)) = OPTIONS.iter().find(|(long, _, _)| *long == name) else {
            return Err(usage(format!("error: unknown option '--{name}'")));
        };
        let values = match (arity, inline) {
            (Arity::Switch, None) => Vec::new(),
            (Arity::Switch, Some(_)) => {
                return Err(usage(format!(
                    "error: option '--{name}' does not take a value"
                )))
            }
            (_, Some(value)) => vec![value],
            // Like the real CLI, a required value is the next argument whatever it looks like.
            (Arity::Value, None) => match argv.get(i) {
                Some(value) => {
                    i += 1;
                    vec![value.clone()]
                }
                None => return Err(usage(format!("error: option '--{name}' argument missing"))),
            },
            (Arity::List, None) => {
                let start = i;
                while i < argv.len() && !(argv[i].starts_with('-') && argv[i].len() > 1) {
                    i += 1;
                }
                if i == start {
                    return Err(usage(format!("error: option '--{name}' argument missing")));
                }
                argv[start..i].to_vec()
            }
        };
        match apply(&mut args, &name, values)? {
            Some(command) => return Ok(command),
            None => continue,
        }
    }
    match positionals.len() {
        0 => {}
        1 => args.prompt = positionals.pop(),
        _ => {
            return Err(usage(format!(
                "error: too many arguments. Expected 1 argument but got {}.",
                positionals.len()
            )))
        }
    }
    Ok(Command::Run(Box::new(args)))
}

/// Records one option; returns a command when the option ends parsing (`--help`, `--version`).
fn apply(args: &mut Args, name: &str, values: Vec<String>) -> Result<Option<Command>, Error> {
    let single = || values.first().cloned().unwrap_or_default();
    match name {
        "help" => return Ok(Some(Command::Help)),
        "version" => return Ok(Some(Command::Version)),
        "print" => args.print = true,
        "verbose" => args.verbose = true,
        "dangerously-skip-permissions" => args.skip_permissions = true,
        "include-partial-messages" => args.include_partial_messages = true,
        "output-format" => {
            args.output_format = match single().as_str() {
                "text" => OutputFormat::Text,
                "json" => OutputFormat::Json,
                "stream-json" => OutputFormat::StreamJson,
                other => return Err(invalid_choice(name, other, "text, json, stream-json")),
            }
        }
        "input-format" => {
            args.input_format = match single().as_str() {
                "text" => InputFormat::Text,
                "stream-json" => InputFormat::StreamJson,
                other => return Err(invalid_choice(name, other, "text, stream-json")),
            }
        }
        "model" => args.model = Some(single()),
        "settings" => args.settings = Some(single()),
        "permission-mode" => args.permission_mode = Some(single()),
        "session-id" => args.session_id = Some(single()),
        "max-turns" => {
            let value = single();
            args.max_turns = Some(value.parse().map_err(|_| {
                usage(format!(
                    "error: option '--max-turns <turns>' argument '{value}' is invalid"
                ))
            })?);
        }
        "tools" => args.tools = Some(split_tool_list(&values)),
        "allowedTools" | "allowed-tools" => args.allowed_tools.extend(split_tool_list(&values)),
        "disallowedTools" | "disallowed-tools" => {
            args.disallowed_tools.extend(split_tool_list(&values))
        }
        // Accepted for compatibility; the stub has nothing to do with them.
        _ => {}
    }
    Ok(None)
}

fn invalid_choice(name: &str, value: &str, choices: &str) -> Error {
    usage(format!(
        "error: option '--{name} <format>' argument '{value}' is invalid. Allowed choices are {choices}."
    ))
}

/// Splits tool lists the way Claude Code accepts them: separate arguments, commas or spaces,
/// except inside a rule's parentheses (`Bash(git log:*)`).
pub fn split_tool_list(values: &[String]) -> Vec<String> {
    let mut items = Vec::new();
    for value in values {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in value.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 && (c == ',' || c.is_whitespace()) {
                if !current.is_empty() {
                    items.push(std::mem::take(&mut current));
                }
            } else {
                current.push(c);
            }
        }
        if !current.is_empty() {
            items.push(current);
        }
    }
    items
}

/// The `--help` text: what the stub accepts, so a reader of a failing test can check a profile.
pub fn help_text() -> String {
    let mut text = String::from(
        "Usage: claude [options] [prompt]\n\n\
         stub-claude: a drop-in `claude` for catalyst's tests, driven by STUB_CLAUDE_SCENARIO.\n\n\
         Options:\n",
    );
    for (long, short, arity) in OPTIONS {
        let short = short.map(|c| format!("-{c}, ")).unwrap_or_default();
        let value = match arity {
            Arity::Switch => "",
            Arity::Value => " <value>",
            Arity::List => " <values...>",
        };
        text.push_str(&format!("  {short}--{long}{value}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, Error> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn run_args(args: &[&str]) -> Args {
        match parse_strs(args) {
            Ok(Command::Run(a)) => *a,
            other => panic!("expected a run for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn catalysts_default_profile_parses() {
        let a = run_args(&[
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "sonnet",
            "--settings",
            "{\"hooks\":{}}",
            "--disallowedTools",
            "Write",
            "Edit",
            "--permission-mode",
            "acceptEdits",
        ]);
        assert!(a.print && a.verbose);
        assert_eq!(a.output_format, OutputFormat::StreamJson);
        assert_eq!(a.model.as_deref(), Some("sonnet"));
        assert_eq!(a.disallowed_tools, ["Write", "Edit"]);
        assert_eq!(a.permission_mode.as_deref(), Some("acceptEdits"));
        assert_eq!(a.prompt, None);
    }

    #[test]
    fn inline_values_and_a_trailing_prompt() {
        let a = run_args(&["--print", "--model=opus", "--max-turns", "3", "do it"]);
        assert_eq!(a.model.as_deref(), Some("opus"));
        assert_eq!(a.max_turns, Some(3));
        assert_eq!(a.prompt.as_deref(), Some("do it"));
    }

    #[test]
    fn tool_lists_split_on_commas_and_spaces_but_not_inside_rules() {
        let a = run_args(&[
            "-p",
            "--tools",
            "Read,Grep Glob",
            "--allowedTools",
            "Bash(git log:*),Read",
        ]);
        assert_eq!(
            a.tools,
            Some(vec!["Read".into(), "Grep".into(), "Glob".into()])
        );
        assert_eq!(a.allowed_tools, ["Bash(git log:*)", "Read"]);
        let none = run_args(&["-p", "--tools", ""]);
        assert_eq!(none.tools, Some(vec![]));
    }

    #[test]
    fn mistakes_are_refused_in_claudes_words() {
        let cases: &[(&[&str], &str)] = &[
            (&["-p", "--bogus"], "error: unknown option '--bogus'"),
            (&["-p", "-x"], "error: unknown option '-x'"),
            (
                &["-p", "--model"],
                "error: option '--model' argument missing",
            ),
            (
                &["-p", "--output-format", "yaml"],
                "argument 'yaml' is invalid",
            ),
            (&["-p", "a", "b"], "too many arguments"),
            (&["-p", "--verbose=yes"], "does not take a value"),
        ];
        for (args, expected) in cases {
            match parse_strs(args) {
                Err(Error::Usage(message)) => {
                    assert!(message.contains(expected), "{args:?}: {message}")
                }
                other => panic!("{args:?}: expected a usage error, got {other:?}"),
            }
        }
    }

    #[test]
    fn version_and_help_stop_parsing() {
        assert!(matches!(parse_strs(&["--version"]), Ok(Command::Version)));
        assert!(matches!(parse_strs(&["-p", "-h"]), Ok(Command::Help)));
    }
}
