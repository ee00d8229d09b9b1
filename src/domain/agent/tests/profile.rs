//! Profiles: the built-in ones, placeholder expansion and the checks made at config load.

use std::ffi::OsString;
use std::path::Path;

use crate::domain::agent::profile::*;

fn vars<'a>(settings: Option<&'a Path>) -> Vars<'a> {
    Vars {
        model: "claude-sonnet-4-5",
        settings,
        worktree: Path::new("/ws/worktrees/cat-1"),
        run_dir: Path::new("/ws/runs/cat-1/implement/1"),
        prompt_file: Path::new("/ws/runs/cat-1/implement/1/prompt.md"),
        prompt: "Do it.",
    }
}

fn strings(argv: Vec<OsString>) -> Vec<String> {
    argv.into_iter()
        .map(|a| a.into_string().expect("utf-8"))
        .collect()
}

fn profile(command: &[&str]) -> AgentProfile {
    AgentProfile {
        command: command.iter().map(|s| s.to_string()).collect(),
        stdin: StdinMode::Prompt,
        ..AgentProfile::claude()
    }
}

#[test]
fn claude_profile_streams_json_both_ways_with_settings_in_a_conversation() {
    let p = AgentProfile::claude();
    p.validate().unwrap();
    assert_eq!(p.format, OutputFormat::ClaudeStreamJson);
    assert_eq!(p.stdin, StdinMode::Conversation);
    let argv = strings(p.argv(&vars(Some(Path::new("/ws/settings.json")))).unwrap());
    assert_eq!(
        argv,
        [
            "claude",
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "claude-sonnet-4-5",
            "--settings",
            "/ws/settings.json"
        ]
    );
}

#[test]
fn a_conversation_needs_claude_stream_json_both_ways() {
    let claude = AgentProfile::claude();
    let without_input = AgentProfile {
        command: [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
        ]
        .map(String::from)
        .into(),
        ..claude.clone()
    };
    assert_eq!(
        without_input.validate(),
        Err(ProfileError::ConversationNeedsStreamJson)
    );
    let text = AgentProfile {
        format: OutputFormat::Text,
        ..claude.clone()
    };
    assert_eq!(
        text.validate(),
        Err(ProfileError::ConversationNeedsStreamJson)
    );
    let joined = AgentProfile {
        command: ["claude", "-p", "--input-format=stream-json"]
            .map(String::from)
            .into(),
        ..claude
    };
    joined.validate().unwrap();
    let err = load(
        "claude",
        r#"command = ["claude", "-p", "--output-format", "stream-json"]"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("stdin = \"prompt\""), "{err}");
    load(
        "claude",
        "command = [\"claude\", \"-p\", \"--output-format\", \"stream-json\"]\nstdin = \"prompt\"",
    )
    .unwrap();
}

#[test]
fn codex_profile_takes_the_prompt_as_its_last_argument_with_stdin_closed() {
    let p = AgentProfile::codex();
    p.validate().unwrap();
    assert_eq!(p.format, OutputFormat::CodexJson);
    assert_eq!(p.stdin, StdinMode::Null);
    let argv = strings(p.argv(&vars(None)).unwrap());
    assert_eq!(
        argv,
        [
            "codex",
            "exec",
            "--json",
            "-s",
            // Codex's own sandbox cannot nest inside catalyst's.
            if cfg!(target_os = "linux") {
                "danger-full-access"
            } else {
                "workspace-write"
            },
            "-C",
            "/ws/worktrees/cat-1",
            "-m",
            "claude-sonnet-4-5",
            "Do it."
        ]
    );
}

#[test]
fn placeholders_expand_inside_arguments_and_double_braces_are_literal() {
    let p = profile(&[
        "agent",
        "--ctx={run_dir}/context.md",
        "--file",
        "{prompt_file}",
        "--json={{\"model\":\"{model}\"}}",
    ]);
    let argv = strings(p.argv(&vars(None)).unwrap());
    assert_eq!(
        argv,
        [
            "agent",
            "--ctx=/ws/runs/cat-1/implement/1/context.md",
            "--file",
            "/ws/runs/cat-1/implement/1/prompt.md",
            "--json={\"model\":\"claude-sonnet-4-5\"}",
        ]
    );
}

#[test]
fn template_errors_are_refused_with_the_argument_named() {
    let cases: &[(&[&str], ProfileError)] = &[
        (&[], ProfileError::EmptyCommand),
        (&["  "], ProfileError::EmptyCommand),
        (
            &["claude", "--model", "{modle}"],
            ProfileError::UnknownPlaceholder {
                name: "modle".into(),
                arg: "{modle}".into(),
            },
        ),
        (
            &["claude", "{}"],
            ProfileError::UnknownPlaceholder {
                name: String::new(),
                arg: "{}".into(),
            },
        ),
        (
            &["claude", "{model"],
            ProfileError::UnbalancedBrace {
                arg: "{model".into(),
            },
        ),
        (
            &["claude", "model}"],
            ProfileError::UnbalancedBrace {
                arg: "model}".into(),
            },
        ),
        (
            &["claude", "{mo{del}"],
            ProfileError::UnbalancedBrace {
                arg: "{mo{del}".into(),
            },
        ),
    ];
    for (command, want) in cases {
        assert_eq!(
            profile(command).validate(),
            Err(want.clone()),
            "{command:?}"
        );
    }
    let message = profile(&["claude", "{modle}"])
        .validate()
        .unwrap_err()
        .to_string();
    assert!(message.contains("`{modle}`"), "{message}");
    assert!(
        message.contains("`{model}`"),
        "lists the known ones: {message}"
    );
}

#[test]
fn flags_that_skip_hooks_are_refused_in_any_spelling() {
    for flag in ["--bare", "--safe-mode", "--bare=true"] {
        let err = profile(&["claude", "-p", flag]).validate().unwrap_err();
        assert_eq!(
            err,
            ProfileError::ForbiddenFlag {
                flag: flag.to_string()
            }
        );
        assert!(err.to_string().contains("hooks"), "{err}");
    }
    // Not even when a placeholder expands to it.
    let p = profile(&["claude", "--model", "{model}"]);
    let err = p
        .argv(&Vars {
            model: "--bare",
            ..vars(None)
        })
        .unwrap_err();
    assert_eq!(
        err,
        ProfileError::ForbiddenFlag {
            flag: "--bare".into()
        }
    );
    // A flag that merely starts the same way is someone else's.
    profile(&["claude", "--barely"]).validate().unwrap();
}

#[test]
fn settings_placeholder_needs_a_settings_file() {
    let err = AgentProfile::claude().argv(&vars(None)).unwrap_err();
    assert_eq!(err, ProfileError::NoSettings);
}

/// The profile `name` as the config's `[profiles.<name>]` table `toml` makes it.
fn load(name: &str, toml: &str) -> Result<AgentProfile, String> {
    let written: ProfileConfig = toml::from_str(toml).map_err(|e| e.to_string())?;
    written.resolve(name).map_err(|e| e.to_string())
}

#[test]
fn profiles_load_from_toml_and_are_checked_there() {
    let p = load(
        "mine",
        r#"
command = ["codex", "exec", "--json", "{prompt}"]
format = "codex-json"
stdin = "null"
env = { CODEX_HOME = "/tmp/codex" }
"#,
    )
    .unwrap();
    assert_eq!(p.format, OutputFormat::CodexJson);
    assert_eq!(p.stdin, StdinMode::Null);
    assert_eq!(p.env["CODEX_HOME"], "/tmp/codex");

    let defaults = load("mine", r#"command = ["claude", "-p"]"#).unwrap();
    assert_eq!(defaults.format, OutputFormat::ClaudeStreamJson);
    assert_eq!(defaults.stdin, StdinMode::Prompt);
    assert!(defaults.env.is_empty());
    assert!(defaults.writable.is_empty() && defaults.model_hosts.is_empty());

    let text = load("mine", "command = [\"my-agent\"]\nformat = \"text\"").unwrap();
    assert_eq!(text.format, OutputFormat::Text);

    for (bad, needle) in [
        (r#"command = ["claude", "--bare"]"#, "--bare"),
        (r#"command = ["claude", "{worktre}"]"#, "{worktre}"),
        (
            r#"command = ["claude"]
format = "json""#,
            "json",
        ),
        (r#"comand = ["claude"]"#, "comand"),
        // A built-in's command is checked the same way when a profile replaces it.
        (r#"format = "text""#, "no `command`"),
    ] {
        let err = load("mine", bad).unwrap_err();
        assert!(err.contains(needle), "{bad}: {err}");
    }
    let err = load("claude", r#"command = ["claude", "--safe-mode"]"#).unwrap_err();
    assert!(err.contains("--safe-mode"), "{err}");
}

#[test]
fn a_profile_named_after_a_builtin_keeps_what_it_does_not_set() {
    let claude = load("claude", r#"env = { ANTHROPIC_API_KEY = "k" }"#).unwrap();
    assert_eq!(
        claude,
        AgentProfile {
            env: [("ANTHROPIC_API_KEY".to_string(), "k".to_string())].into(),
            ..AgentProfile::claude()
        }
    );
    // A key it sets replaces the built-in's value whole.
    let codex = load("codex", "writable = [\"/srv/codex\"]\nnetwork = \"open\"").unwrap();
    assert_eq!(
        codex,
        AgentProfile {
            writable: vec!["/srv/codex".into()],
            network: crate::domain::agent::sandbox::Network::Open,
            ..AgentProfile::codex()
        }
    );
    assert_eq!(load("claude", "").unwrap(), AgentProfile::claude());
    for name in BUILTIN_PROFILES {
        assert!(AgentProfile::builtin(name).is_some(), "{name}");
    }
}

#[test]
fn a_new_profile_without_a_command_is_refused_naming_it() {
    let err = load("mine", r#"env = { A = "b" }"#).unwrap_err();
    assert_eq!(
        err,
        "no `command`: `mine` is not a built-in profile (`claude`, `codex`) whose command it could keep"
    );
}

#[test]
fn tool_lists_are_appended_for_claude_profiles_only() {
    let tools = ["Read".to_string(), "Grep".into(), "Glob".into()];
    let settings = Some(Path::new("/ws/settings.json"));
    let argv = strings(
        AgentProfile::claude()
            .with_tools(&tools)
            .argv(&vars(settings))
            .unwrap(),
    );
    assert_eq!(argv[argv.len() - 4..], ["--tools", "Read", "Grep", "Glob"]);
    let none = strings(
        AgentProfile::claude()
            .with_tools(&[])
            .argv(&vars(settings))
            .unwrap(),
    );
    assert_eq!(
        none[none.len() - 2..],
        ["--tools", ""],
        "an empty list means no tools"
    );
    let braces = strings(
        AgentProfile::claude()
            .with_tools(&["Bash(echo {x})".to_string()])
            .argv(&vars(settings))
            .unwrap(),
    );
    assert_eq!(braces.last().map(String::as_str), Some("Bash(echo {x})"));
    assert_eq!(
        AgentProfile::codex().with_tools(&tools),
        AgentProfile::codex(),
        "codex takes no Claude flags"
    );
}
