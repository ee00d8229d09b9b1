//! The `--settings` JSON that wires Claude Code's hooks to `catalyst hook <event>`.

use std::path::Path;

use serde_json::{json, Value};

use super::profile::StdinMode;

/// Claude Code's timeout for each hook command, in seconds.
pub const HOOK_TIMEOUT_SECS: u64 = 60;

/// The hook events catalyst handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookEvent {
    PreToolUse,
    Stop,
    SessionStart,
}

impl HookEvent {
    pub const ALL: [HookEvent; 3] = [
        HookEvent::PreToolUse,
        HookEvent::Stop,
        HookEvent::SessionStart,
    ];

    /// Claude Code's name of the event, which is also the `hook` method's `event`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    /// The argument of `catalyst hook`.
    pub fn arg(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre-tool-use",
            HookEvent::Stop => "stop",
            HookEvent::SessionStart => "session-start",
        }
    }
}

/// The `--settings` JSON for an agent: `PreToolUse` and `Stop`, each running `hook <event>`
/// (the small `catalyst-hook` installed beside `catalyst`) or else `bin hook <event>`.
/// `PreToolUse` matches every tool and fails closed (`|| exit 2`). An agent holding a
/// conversation on stdin gets no `Stop` ([`for_stdin`]). No `SessionStart`: what it
/// would say (the step, its context file, its tool policy) ends the prompt, which saves a hook
/// process per attempt; the handler still answers it for settings written by hand.
pub fn settings(bin: &Path, hook: Option<&Path>) -> Value {
    let program = match hook {
        Some(hook) => crate::domain::shell::quote(&hook.to_string_lossy()),
        None => format!(
            "{} hook",
            crate::domain::shell::quote(&bin.to_string_lossy())
        ),
    };
    let command = |event: HookEvent, fail_closed: bool| {
        let mut c = format!("{program} {}", event.arg());
        if fail_closed {
            c.push_str(" || exit 2");
        }
        json!([{"type": "command", "command": c, "timeout": HOOK_TIMEOUT_SECS}])
    };
    json!({"hooks": {
        "PreToolUse": [{"matcher": "*", "hooks": command(HookEvent::PreToolUse, true)}],
        "Stop": [{"hooks": command(HookEvent::Stop, false)}],
    }})
}

/// `settings` as an agent whose stdin is `stdin` gets them: without the `Stop` hook when the
/// daemon judges its answers itself, in a conversation ([`super::conversation`]).
pub fn for_stdin(settings: &Value, stdin: StdinMode) -> Value {
    let mut settings = settings.clone();
    if stdin == StdinMode::Conversation {
        if let Some(hooks) = settings["hooks"].as_object_mut() {
            hooks.remove(HookEvent::Stop.name());
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_run_this_binary_for_each_hook() {
        let hook = settings(
            Path::new("/opt/catalyst"),
            Some(Path::new("/opt/catalyst-hook")),
        );
        assert_eq!(
            hook["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "'/opt/catalyst-hook' pre-tool-use || exit 2"
        );
        let s = settings(Path::new("/opt/it's/catalyst"), None);
        let pre = s["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(pre, r"'/opt/it'\''s/catalyst' hook pre-tool-use || exit 2");
        assert_eq!(s["hooks"]["PreToolUse"][0]["matcher"], "*");
        assert!(s["hooks"]["Stop"][0]["hooks"][0]["command"]
            .as_str()
            .is_some_and(|c| c.ends_with("hook stop")));
        assert_eq!(
            s["hooks"].as_object().map(|h| h.len()),
            Some(2),
            "PreToolUse and Stop only: {s}"
        );
    }

    #[test]
    fn a_conversation_gets_no_stop_hook_and_keeps_pre_tool_use() {
        let all = settings(Path::new("/opt/catalyst"), None);
        let talk = for_stdin(&all, StdinMode::Conversation);
        assert!(talk["hooks"].get("Stop").is_none(), "{talk}");
        assert_eq!(talk["hooks"]["PreToolUse"], all["hooks"]["PreToolUse"]);
        assert_eq!(for_stdin(&all, StdinMode::Prompt), all);
        assert_eq!(for_stdin(&all, StdinMode::Null), all);
    }
}
