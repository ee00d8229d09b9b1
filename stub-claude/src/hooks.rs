//! Claude Code's hooks, read from `--settings` and run as Claude Code runs them.
//!
//! A hook is `sh -c <command>` in the session's cwd, with the session's environment plus
//! `CLAUDE_PROJECT_DIR`, the event as JSON on stdin, and a timeout (the entry's `timeout`
//! seconds, else 60). Its answer is read as Claude Code reads it: exit code 2 blocks with stderr
//! as the reason; exit code 0 may print JSON (`hookSpecificOutput.permissionDecision` for
//! `PreToolUse`, `decision: "block"` for `Stop`, `hookSpecificOutput.additionalContext` for
//! `SessionStart`); any other exit code is a non-blocking error.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::Error;

const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// How long to wait for a finished hook's output to be drained.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The part of a settings file the stub reads; everything else is accepted and ignored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Settings {
    #[serde(default)]
    hooks: BTreeMap<String, Vec<HookGroup>>,
}

#[derive(Clone, Debug, Deserialize)]
struct HookGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<HookCommand>,
}

#[derive(Clone, Debug, Deserialize)]
struct HookCommand {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    timeout: Option<f64>,
}

impl Settings {
    /// Reads `--settings`: inline JSON, or the path of a JSON file, as Claude Code accepts it.
    pub fn load(arg: Option<&str>) -> Result<Settings, Error> {
        let Some(arg) = arg else {
            return Ok(Settings::default());
        };
        let text = if arg.trim_start().starts_with('{') {
            arg.to_string()
        } else {
            std::fs::read_to_string(arg)
                .map_err(|e| Error::Settings(format!("cannot read `{arg}`: {e}")))?
        };
        serde_json::from_str(&text).map_err(|e| Error::Settings(format!("invalid JSON: {e}")))
    }

    /// The commands configured for `event` whose matcher accepts `target`; events without a
    /// target (`Stop`) ignore matchers, as Claude Code does.
    fn commands(&self, event: &str, target: Option<&str>) -> Vec<&HookCommand> {
        self.hooks
            .get(event)
            .into_iter()
            .flatten()
            .filter(|g| target.is_none_or(|t| matcher_accepts(g.matcher.as_deref(), t)))
            .flat_map(|g| g.hooks.iter())
            .filter(|h| h.kind == "command" && h.command.is_some())
            .collect()
    }

    pub fn has(&self, event: &str) -> bool {
        self.hooks
            .get(event)
            .is_some_and(|groups| !groups.is_empty())
    }
}

/// Claude Code's matcher, without a regex engine: empty or `*` matches everything, `A|B` is a
/// list of alternatives, and an alternative ending in `.*` matches by prefix (`mcp__.*`).
pub fn matcher_accepts(matcher: Option<&str>, target: &str) -> bool {
    let matcher = matcher.unwrap_or("").trim();
    if matcher.is_empty() || matcher == "*" {
        return true;
    }
    matcher
        .split('|')
        .map(str::trim)
        .any(|alt| match alt.strip_suffix(".*") {
            Some(prefix) => target.starts_with(prefix),
            None => alt == target,
        })
}

/// What the `PreToolUse` hooks decided about a tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    Allow,
    /// A hook asked for a person's confirmation, which print mode cannot get.
    Ask(String),
    Deny(String),
}

/// What one hook process did.
struct HookRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs a session's hooks with the fields every hook input carries.
pub struct Hooks {
    settings: Settings,
    cwd: PathBuf,
    session_id: String,
    transcript_path: String,
    permission_mode: String,
}

impl Hooks {
    pub fn new(
        settings: Settings,
        cwd: &Path,
        session_id: &str,
        transcript_path: &str,
        permission_mode: &str,
    ) -> Hooks {
        Hooks {
            settings,
            cwd: cwd.to_path_buf(),
            session_id: session_id.to_string(),
            transcript_path: transcript_path.to_string(),
            permission_mode: permission_mode.to_string(),
        }
    }

    pub fn has(&self, event: &str) -> bool {
        self.settings.has(event)
    }

    fn input(&self, event: &str, extra: Value) -> Value {
        let mut input = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": self.cwd.display().to_string(),
            "permission_mode": self.permission_mode,
            "hook_event_name": event,
        });
        if let (Some(map), Value::Object(extra)) = (input.as_object_mut(), extra) {
            map.extend(extra);
        }
        input
    }

    fn run_all(&self, event: &str, target: Option<&str>, input: &Value) -> Vec<HookRun> {
        let stdin = input.to_string();
        self.settings
            .commands(event, target)
            .into_iter()
            .map(|hook| {
                let timeout = hook.timeout.unwrap_or(DEFAULT_TIMEOUT_S).max(0.0);
                run_command(
                    hook.command.as_deref().unwrap_or_default(),
                    &self.cwd,
                    &stdin,
                    Duration::from_secs_f64(timeout),
                )
            })
            .collect()
    }

    /// Runs `SessionStart` (source `startup`) and returns the context the hooks added.
    pub fn session_start(&self, model: &str) -> Vec<String> {
        let input = self.input("SessionStart", json!({"source": "startup", "model": model}));
        self.run_all("SessionStart", Some("startup"), &input)
            .into_iter()
            .filter(|run| run.code == Some(0))
            .filter_map(|run| {
                let context = match parse_json(&run.stdout) {
                    Some(v) => v["hookSpecificOutput"]["additionalContext"]
                        .as_str()
                        .map(str::to_string),
                    None => Some(run.stdout.trim().to_string()),
                };
                context.filter(|c| !c.is_empty())
            })
            .collect()
    }

    /// Runs `PreToolUse` for one tool call; a deny from any hook wins over an ask, an ask over
    /// an allow.
    pub fn pre_tool_use(
        &self,
        tool_name: &str,
        tool_input: &Value,
        tool_use_id: &str,
    ) -> Permission {
        let input = self.input(
            "PreToolUse",
            json!({"tool_name": tool_name, "tool_input": tool_input, "tool_use_id": tool_use_id}),
        );
        let mut verdict = Permission::Allow;
        for run in self.run_all("PreToolUse", Some(tool_name), &input) {
            let this = match run.code {
                Some(2) => Permission::Deny(reason_or(&run.stderr, "blocked by a PreToolUse hook")),
                Some(0) => permission_from_json(&run.stdout),
                _ => Permission::Allow,
            };
            verdict = match (verdict, this) {
                (deny @ Permission::Deny(_), _) | (_, deny @ Permission::Deny(_)) => deny,
                (ask @ Permission::Ask(_), _) | (_, ask @ Permission::Ask(_)) => ask,
                _ => Permission::Allow,
            };
        }
        verdict
    }

    /// Runs `Stop`; returns the reason when a hook blocks the stop.
    pub fn stop(&self, stop_hook_active: bool, last_assistant_message: &str) -> Option<String> {
        let input = self.input(
            "Stop",
            json!({
                "stop_hook_active": stop_hook_active,
                "last_assistant_message": last_assistant_message,
            }),
        );
        self.run_all("Stop", None, &input)
            .into_iter()
            .find_map(|run| match run.code {
                Some(2) => Some(reason_or(&run.stderr, "blocked by a Stop hook")),
                Some(0) => parse_json(&run.stdout)
                    .filter(|v| v["decision"] == "block")
                    .map(|v| {
                        v["reason"]
                            .as_str()
                            .unwrap_or("blocked by a Stop hook")
                            .to_string()
                    }),
                _ => None,
            })
    }
}

fn reason_or(text: &str, fallback: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        fallback.to_string()
    } else {
        text.to_string()
    }
}

fn parse_json(stdout: &str) -> Option<Value> {
    let trimmed = stdout.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    serde_json::from_str(trimmed).ok()
}

/// Reads a `PreToolUse` hook's JSON answer, including the older top-level `decision` field.
fn permission_from_json(stdout: &str) -> Permission {
    let Some(v) = parse_json(stdout) else {
        return Permission::Allow;
    };
    let specific = &v["hookSpecificOutput"];
    let reason = specific["permissionDecisionReason"]
        .as_str()
        .or(v["reason"].as_str())
        .unwrap_or("")
        .to_string();
    match specific["permissionDecision"]
        .as_str()
        .or(v["decision"].as_str())
    {
        Some("deny") | Some("block") => {
            Permission::Deny(reason_or(&reason, "denied by a PreToolUse hook"))
        }
        Some("ask") => Permission::Ask(reason_or(
            &reason,
            "a PreToolUse hook asked for confirmation",
        )),
        _ => Permission::Allow,
    }
}

/// Runs one hook command, killing it when it outlives `timeout`.
fn run_command(command: &str, cwd: &Path, stdin: &str, timeout: Duration) -> HookRun {
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env("CLAUDE_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return HookRun {
                code: None,
                stdout: String::new(),
                stderr: format!("cannot run hook `{command}`: {e}"),
            }
        }
    };
    if let Some(mut pipe) = child.stdin.take() {
        let input = stdin.to_string();
        // A hook that never reads its input must not block the session, hence the thread;
        // a hook that exits without reading closes the pipe, which is not an error.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
        });
        rx
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(timeout) {
        Ok(status) => status.ok(),
        Err(_) => {
            // Hooks stay in the session's process group, as Claude Code's do, so that the
            // daemon's kill of an agent's group also ends them; here only the hook itself is
            // ended, and what it started is left to that.
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = rx.recv();
            None
        }
    };
    // A background process the hook left behind may hold its pipes open; its output is not
    // worth waiting for.
    let deadline = Instant::now() + PIPE_GRACE;
    let collect = |rx: mpsc::Receiver<String>| {
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_default()
    };
    HookRun {
        code: status.and_then(|s| s.code()),
        stdout: collect(stdout),
        stderr: collect(stderr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matcher_cases() {
        let cases = [
            (None, "Write", true),
            (Some(""), "Write", true),
            (Some("*"), "Bash", true),
            (Some("Write"), "Write", true),
            (Some("Write"), "WriteFile", false),
            (Some("Edit|Write"), "Write", true),
            (Some("Edit | Write"), "Write", true),
            (Some("Edit|MultiEdit"), "Write", false),
            (Some("mcp__.*"), "mcp__git__log", true),
            (Some("Notebook.*"), "Bash", false),
        ];
        for (matcher, target, expected) in cases {
            assert_eq!(
                matcher_accepts(matcher, target),
                expected,
                "{matcher:?} vs {target}"
            );
        }
    }

    #[test]
    fn pre_tool_use_json_answers() {
        let cases = [
            ("", Permission::Allow),
            ("not json", Permission::Allow),
            (
                r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#,
                Permission::Allow,
            ),
            (
                r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}"#,
                Permission::Deny("no".into()),
            ),
            (
                r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}"#,
                Permission::Ask("sure?".into()),
            ),
            (
                r#"{"decision":"block","reason":"old style"}"#,
                Permission::Deny("old style".into()),
            ),
        ];
        for (stdout, expected) in cases {
            assert_eq!(permission_from_json(stdout), expected, "{stdout}");
        }
    }

    #[test]
    fn settings_load_inline_and_from_a_file() {
        let inline =
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"true"}]}]},"model":"x"}"#;
        assert!(Settings::load(Some(inline)).expect("inline").has("Stop"));
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("settings.json");
        std::fs::write(&path, inline).expect("write");
        let from_file = Settings::load(path.to_str()).expect("file");
        assert!(from_file.has("Stop") && !from_file.has("PreToolUse"));
        assert!(matches!(
            Settings::load(Some("{nope")),
            Err(Error::Settings(_))
        ));
    }

    #[test]
    fn a_hook_that_hangs_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().expect("temp dir");
        let start = std::time::Instant::now();
        let run = run_command("sleep 30", dir.path(), "{}", Duration::from_millis(200));
        assert_eq!(run.code, None);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
