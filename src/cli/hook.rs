//! `catalyst hook <event>`: Claude Code's hook handler. The `--settings` JSON that installs it
//! for an agent is [`crate::domain::agent::settings::settings`].
//!
//! Claude Code runs the handler with the hook's JSON on stdin and the agent's environment,
//! which carries `CATALYST_SOCKET`, `CATALYST_STEP` and `CATALYST_CONTEXT` (in the run folder).
//! While the attempt runs its run folder holds the attempt's policy
//! ([`crate::domain::agent::attempt::POLICY_FILE`]): the handler decides from it on its own
//! ([`run_local`], no async runtime, no waiting on the daemon) and sends what it decided to
//! be recorded without waiting for the answer. Without the file (the attempt is over: a
//! straggler's hook) it asks the daemon (`hook` method), which decides and records. Either
//! way it answers in Claude Code's terms:
//! - `PreToolUse`: `hookSpecificOutput.permissionDecision` `allow` or `deny` with its reason on
//!   stdout (exit 0). When the daemon cannot be asked, exit code 2 with the reason on stderr,
//!   which denies the call: a guardrail that fails open is none. The settings add
//!   `|| exit 2` to the command, so a handler that cannot even start denies too.
//! - `Stop`: exit code 2 with the reason on stderr sends the agent back to write a valid
//!   result block (once; the daemon allows the next stop). When the daemon cannot be asked,
//!   the stop is allowed: the daemon judges the final message anyway.
//! - `SessionStart`: `hookSpecificOutput.additionalContext` with the step, role, context file
//!   and tool policy; from the environment alone when the daemon cannot be asked.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::cli::client::{Client, ClientError};
use crate::daemon::resolver::RealFs;
use crate::domain::agent::attempt::{
    AttemptPolicy, ToolRecord, POLICY_FILE, STOP_BLOCKED_FILE, STOP_TOOL,
};
pub use crate::domain::agent::settings::HookEvent;
use crate::domain::id::BeadId;
use crate::domain::policy::{Permission, Scope};
use crate::protocol::{HookAnswer, HookDecision, HookParams, TOOL_USED_EVENT};

/// Why the daemon could not be asked about a hook call.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("`{0}` is not set: not running under catalyst")]
    NotUnderCatalyst(&'static str),
    #[error("the hook input is not JSON: {0}")]
    Input(#[source] serde_json::Error),
    #[error("catalystd did not answer within {}s", .0.as_secs())]
    Timeout(Duration),
    #[error(transparent)]
    Ask(#[from] ClientError),
}

impl clap::ValueEnum for HookEvent {
    fn value_variants<'a>() -> &'a [HookEvent] {
        &HookEvent::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.arg()))
    }
}

/// What the handler prints and exits with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookOutput {
    pub code: u8,
    pub stdout: String,
    pub stderr: String,
}

/// The agent's environment, as far as the handler reads it.
#[derive(Clone, Debug, Default)]
pub struct HookEnv {
    pub socket: Option<PathBuf>,
    pub step: Option<String>,
    pub role: Option<String>,
    pub context: Option<PathBuf>,
}

impl HookEnv {
    pub fn from_process() -> HookEnv {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        HookEnv {
            socket: var("CATALYST_SOCKET").map(PathBuf::from),
            step: var("CATALYST_STEP").map(|s| s.to_string_lossy().into_owned()),
            role: var("CATALYST_ROLE").map(|s| s.to_string_lossy().into_owned()),
            context: var("CATALYST_CONTEXT").map(PathBuf::from),
        }
    }
}

/// How long the daemon may take to answer; Claude Code's own timeout for the hook is longer
/// (see [`crate::domain::agent::settings::settings`]), so the handler always gets to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// The end of a final message sent to the daemon: the result block is at the end, and the
/// request must stay under the protocol's line limit.
const MESSAGE_TAIL: usize = 256 * 1024;

/// Tool input keys that carry file contents: the policy never reads them, and a large file
/// would not fit in a request line.
const CONTENT_KEYS: [&str; 5] = ["content", "old_string", "new_string", "new_source", "edits"];

/// Handles one hook call from the attempt's policy file, without asking the daemon: the
/// decision is the same pure one the daemon makes ([`crate::domain::policy::decide`],
/// [`crate::domain::result::parse`]), and what the daemon records of it (a tool call, a stop
/// sent back) is sent over the attempt's socket without waiting for the journal. A stop is
/// sent back once per attempt (a marker file in the run folder). `None` when there is no
/// policy file to read: the caller asks the daemon with [`run`].
pub fn run_local(event: HookEvent, input: &[u8], env: &HookEnv) -> Option<HookOutput> {
    let run_dir = env.context.as_deref()?.parent()?;
    let text = std::fs::read(run_dir.join(POLICY_FILE)).ok()?;
    let policy: AttemptPolicy = serde_json::from_slice(&text).ok()?;
    let input: Value = match serde_json::from_slice(input) {
        Ok(value) => value,
        Err(e) => return Some(answer(event, Err(HookError::Input(e)), env)),
    };
    let decided = match event {
        HookEvent::PreToolUse => decide_tool(&policy, run_dir, &input, env),
        HookEvent::Stop => judge_stop(&policy, run_dir, payload(event, input), env),
        HookEvent::SessionStart => HookAnswer {
            additional_context: Some(policy.session_text()),
            ..Default::default()
        },
    };
    Some(answer(event, Ok(decided), env))
}

/// A tool call decided by the attempt's policy, and sent to be recorded.
fn decide_tool(policy: &AttemptPolicy, run_dir: &Path, input: &Value, env: &HookEnv) -> HookAnswer {
    let tool = input["tool_name"].as_str().unwrap_or_default();
    let tool_input = &input["tool_input"];
    let verdict = if tool.is_empty() {
        Permission::Deny("the hook input names no tool".into())
    } else {
        let scope = Scope {
            access: policy.access,
            tools: policy.tools.as_deref(),
            worktree: &policy.worktree,
            target_branch: &policy.target_branch,
            fs: &RealFs,
        };
        let cwd = input["cwd"].as_str().map(Path::new);
        crate::domain::policy::decide(&scope, tool, tool_input, cwd)
    };
    send_record(
        env,
        run_dir,
        &policy.step,
        ToolRecord {
            tool: tool.to_owned(),
            allowed: verdict.is_allowed(),
            reason: verdict.reason().map(str::to_owned),
            target: crate::domain::policy::target(tool, tool_input),
        },
    );
    HookAnswer::for_tool(&verdict, policy.role)
}

/// A stop whose final message has no valid result block is sent back, once per attempt.
fn judge_stop(policy: &AttemptPolicy, run_dir: &Path, payload: Value, env: &HookEnv) -> HookAnswer {
    let allow = HookAnswer {
        decision: Some(HookDecision::Allow),
        ..Default::default()
    };
    if payload["stop_hook_active"].as_bool() == Some(true) {
        return allow;
    }
    let Some(message) = payload["last_assistant_message"].as_str() else {
        return allow;
    };
    let Err(malformed) = crate::domain::result::parse(message, Some(policy.role)) else {
        return allow;
    };
    let first = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(run_dir.join(STOP_BLOCKED_FILE))
        .is_ok();
    if !first {
        return allow;
    }
    send_record(
        env,
        run_dir,
        &policy.step,
        ToolRecord {
            tool: STOP_TOOL.into(),
            allowed: false,
            reason: Some(format!("no valid result block: {malformed}")),
            target: None,
        },
    );
    HookAnswer {
        decision: Some(HookDecision::Block),
        reason: Some(policy.stop_reason(&malformed.to_string())),
        additional_context: None,
    }
}

/// Hands a decision to the daemon to be recorded as an `agent.tool` event, without waiting:
/// it is appended to the run folder's tool log (one line, in order with the attempt's other
/// decisions), and the attempt's socket is told there is something to read (one request line,
/// then the connection is closed; the daemon reads what was sent before the close). What is
/// still in the log when the agent ends is recorded with the attempt's end. A record the
/// daemon had not written when it was killed is lost; the decision stands either way.
fn send_record(env: &HookEnv, run_dir: &Path, step: &BeadId, record: ToolRecord) {
    use std::io::Write;
    if let Err(e) = crate::daemon::rundir::append_tool_record(run_dir, &record) {
        eprintln!("catalyst: the decision was made but cannot be recorded: {e}");
        return;
    }
    let Some(socket) = env.socket.as_deref() else {
        return;
    };
    let params = HookParams {
        step: step.to_string(),
        event: TOOL_USED_EVENT.into(),
        payload: Value::Null,
    };
    let request = json!({"id": 0, "method": "hook", "params": params}).to_string() + "\n";
    // Not told now, the daemon reads the log at the attempt's end.
    let _ = std::os::unix::net::UnixStream::connect(socket)
        .and_then(|mut stream| stream.write_all(request.as_bytes()));
}

/// Handles one hook call: `input` is the hook's JSON from stdin.
pub async fn run(event: HookEvent, input: &[u8], env: &HookEnv) -> HookOutput {
    let asked = match serde_json::from_slice::<Value>(input) {
        Ok(value) => ask(event, payload(event, value), env).await,
        Err(e) => Err(HookError::Input(e)),
    };
    answer(event, asked, env)
}

/// Asks the daemon about one hook call.
async fn ask(event: HookEvent, payload: Value, env: &HookEnv) -> Result<HookAnswer, HookError> {
    let socket = env
        .socket
        .as_deref()
        .ok_or(HookError::NotUnderCatalyst("CATALYST_SOCKET"))?;
    let step = env
        .step
        .clone()
        .ok_or(HookError::NotUnderCatalyst("CATALYST_STEP"))?;
    let params = HookParams {
        step,
        event: event.name().into(),
        payload,
    };
    let call = async {
        let mut client = Client::connect(socket).await?;
        client.hook(params).await
    };
    let answer = tokio::time::timeout(ASK_TIMEOUT, call)
        .await
        .map_err(|_| HookError::Timeout(ASK_TIMEOUT))??;
    Ok(answer)
}

/// What a `Stop` hook's input says of the final message.
#[derive(Default, Deserialize)]
struct StopInput {
    #[serde(default)]
    last_assistant_message: Option<String>,
    #[serde(default)]
    transcript_path: Option<PathBuf>,
}

/// One line of a Claude Code transcript, as far as the final message goes.
#[derive(Deserialize)]
struct TranscriptEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<TranscriptMessage>,
}

#[derive(Deserialize)]
struct TranscriptMessage {
    #[serde(default)]
    content: Content,
}

/// A message's content: blocks, or a plain string (which the final message never is).
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Blocks(Vec<Block>),
    Other(serde::de::IgnoredAny),
}

impl Default for Content {
    fn default() -> Self {
        Content::Other(serde::de::IgnoredAny)
    }
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

/// Claude Code's hook output on stdout.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaudeHookOutput {
    pub hook_specific_output: HookSpecificOutput,
}

/// Its fields in alphabetical order, as they have always been printed.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookSpecificOutput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    pub hook_event_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_decision_reason: Option<String>,
}

impl ClaudeHookOutput {
    fn line(self) -> String {
        let json = serde_json::to_string(&self).unwrap_or_default();
        format!("{json}\n")
    }
}

/// What the daemon is sent of a hook's input: what it decides on, without file contents.
fn payload(event: HookEvent, input: Value) -> Value {
    let mut out = Map::new();
    let keep = |out: &mut Map<String, Value>, key: &str| {
        if let Some(v) = input.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    };
    keep(&mut out, "cwd");
    match event {
        HookEvent::PreToolUse => {
            keep(&mut out, "tool_name");
            keep(&mut out, "tool_use_id");
            let mut tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
            if let Some(map) = tool_input.as_object_mut() {
                map.retain(|k, _| !CONTENT_KEYS.iter().any(|c| *c == *k));
            }
            out.insert("tool_input".into(), tool_input);
        }
        HookEvent::Stop => {
            keep(&mut out, "stop_hook_active");
            let stop: StopInput = serde_json::from_value(input.clone()).unwrap_or_default();
            let message = stop.last_assistant_message.or_else(|| {
                let path = stop.transcript_path?;
                last_assistant_text(&path)
            });
            if let Some(message) = message {
                out.insert("last_assistant_message".into(), tail(&message).into());
            }
        }
        HookEvent::SessionStart => keep(&mut out, "source"),
    }
    Value::Object(out)
}

/// The last [`MESSAGE_TAIL`] bytes of `text`, cut at a character boundary.
fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(MESSAGE_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The text of the last assistant message in a Claude Code transcript (JSONL), for CLIs older
/// than the `last_assistant_message` field. Lines it cannot read are skipped.
pub fn last_assistant_text(transcript: &Path) -> Option<String> {
    let file = std::fs::File::open(transcript).ok()?;
    let mut last = None;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let Ok(entry) = serde_json::from_str::<TranscriptEntry>(&line) else {
            continue;
        };
        if entry.kind != "assistant" {
            continue;
        }
        let Some(TranscriptMessage {
            content: Content::Blocks(blocks),
        }) = entry.message
        else {
            continue;
        };
        let text: Vec<String> = blocks
            .into_iter()
            .filter(|b| b.kind.as_deref() == Some("text"))
            .filter_map(|b| b.text)
            .collect();
        if !text.is_empty() {
            last = Some(text.join("\n"));
        }
    }
    last
}

/// Turns the daemon's answer (or the failure to get one) into Claude Code's hook output.
pub fn answer(event: HookEvent, asked: Result<HookAnswer, HookError>, env: &HookEnv) -> HookOutput {
    match (event, asked) {
        (HookEvent::PreToolUse, Ok(a)) => {
            let decision = match a.decision {
                Some(HookDecision::Allow) => "allow",
                _ => "deny",
            };
            let reason = a.reason.unwrap_or_else(|| match decision {
                "allow" => "allowed by catalyst".into(),
                _ => "denied by catalyst".into(),
            });
            let out = ClaudeHookOutput {
                hook_specific_output: HookSpecificOutput {
                    additional_context: None,
                    hook_event_name: "PreToolUse".into(),
                    permission_decision: Some(decision.into()),
                    permission_decision_reason: Some(reason),
                },
            };
            HookOutput {
                code: 0,
                stdout: out.line(),
                stderr: String::new(),
            }
        }
        (HookEvent::PreToolUse, Err(why)) => HookOutput {
            code: 2,
            stdout: String::new(),
            stderr: format!("catalyst denied this tool call: it cannot ask catalystd ({why})\n"),
        },
        (HookEvent::Stop, Ok(a)) if a.decision == Some(HookDecision::Block) => HookOutput {
            code: 2,
            stdout: String::new(),
            stderr: format!(
                "{}\n",
                a.reason
                    .unwrap_or_else(|| "end your final message with a result block".into())
            ),
        },
        (HookEvent::Stop, Ok(_)) => HookOutput::default(),
        (HookEvent::Stop, Err(why)) => HookOutput {
            code: 0,
            stdout: String::new(),
            stderr: format!("catalyst: cannot ask catalystd about the result ({why})\n"),
        },
        (HookEvent::SessionStart, asked) => {
            let context = match asked {
                Ok(a) => a.additional_context.unwrap_or_default(),
                Err(_) => fallback_context(env),
            };
            if context.is_empty() {
                return HookOutput::default();
            }
            let out = ClaudeHookOutput {
                hook_specific_output: HookSpecificOutput {
                    additional_context: Some(context),
                    hook_event_name: "SessionStart".into(),
                    permission_decision: None,
                    permission_decision_reason: None,
                },
            };
            HookOutput {
                code: 0,
                stdout: out.line(),
                stderr: String::new(),
            }
        }
    }
}

/// The session context from the environment alone, when the daemon cannot be asked.
fn fallback_context(env: &HookEnv) -> String {
    let Some(step) = &env.step else {
        return String::new();
    };
    let mut text = format!(
        "catalyst step `{step}` (role `{}`).",
        env.role.as_deref().unwrap_or("?")
    );
    if let Some(context) = &env.context {
        text.push_str(&format!(
            " Read the context file first: {}.",
            context.display()
        ));
    }
    text.push_str(" Your final message must end with a ---STEP-RESULT--- block.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::agent::attempt::TOOL_LOG_FILE;
    use serde_json::json;

    fn env() -> HookEnv {
        HookEnv {
            socket: Some("/nonexistent/catalystd.sock".into()),
            step: Some("cat-1.review".into()),
            role: Some("review".into()),
            context: Some("/ws/.catalyst/runs/cat-1/review/1/context.md".into()),
        }
    }

    fn json_of(out: &HookOutput) -> HookSpecificOutput {
        serde_json::from_str::<ClaudeHookOutput>(&out.stdout)
            .expect("Claude Code's hook output on stdout")
            .hook_specific_output
    }

    fn gone() -> HookError {
        HookError::Ask(ClientError::Closed)
    }

    #[test]
    fn answers_speak_claude_codes_hook_format() {
        let deny = HookAnswer {
            decision: Some(HookDecision::Deny),
            reason: Some("read-only".into()),
            ..Default::default()
        };
        let out = answer(HookEvent::PreToolUse, Ok(deny), &env());
        assert_eq!(out.code, 0);
        let v = json_of(&out);
        assert_eq!(v.permission_decision.as_deref(), Some("deny"));
        assert_eq!(v.permission_decision_reason.as_deref(), Some("read-only"));
        assert_eq!(
            out.stdout,
            "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"read-only\"}}\n",
            "the keys in the order they have always had"
        );

        let allow = HookAnswer {
            decision: Some(HookDecision::Allow),
            ..Default::default()
        };
        let v = json_of(&answer(HookEvent::PreToolUse, Ok(allow), &env()));
        assert_eq!(v.permission_decision.as_deref(), Some("allow"));

        let unreachable = answer(HookEvent::PreToolUse, Err(gone()), &env());
        assert_eq!(unreachable.code, 2, "no daemon: denied");
        assert!(unreachable.stderr.contains("closed the connection"));

        let block = HookAnswer {
            decision: Some(HookDecision::Block),
            reason: Some("missing `STATUS`".into()),
            ..Default::default()
        };
        let out = answer(HookEvent::Stop, Ok(block), &env());
        assert_eq!((out.code, out.stderr.trim()), (2, "missing `STATUS`"));
        assert_eq!(answer(HookEvent::Stop, Err(gone()), &env()).code, 0);

        let context = HookAnswer {
            additional_context: Some("step cat-1.review".into()),
            ..Default::default()
        };
        let v = json_of(&answer(HookEvent::SessionStart, Ok(context), &env()));
        assert_eq!(v.additional_context.as_deref(), Some("step cat-1.review"));
        let v = json_of(&answer(HookEvent::SessionStart, Err(gone()), &env()));
        let text = v.additional_context.unwrap_or_default();
        assert!(
            text.contains("cat-1.review") && text.contains("context.md"),
            "{text}"
        );
    }

    #[test]
    fn payloads_leave_file_contents_out() {
        let input = json!({
            "session_id": "s", "transcript_path": "/t", "cwd": "/wt", "hook_event_name": "PreToolUse",
            "tool_name": "MultiEdit", "tool_use_id": "t1",
            "tool_input": {"file_path": "a.rs", "edits": [{"old_string": "x", "new_string": "y"}]},
        });
        let sent = payload(HookEvent::PreToolUse, input);
        assert_eq!(
            sent,
            json!({"cwd": "/wt", "tool_name": "MultiEdit", "tool_use_id": "t1", "tool_input": {"file_path": "a.rs"}})
        );
    }

    #[test]
    fn the_final_message_comes_from_the_transcript_when_the_input_lacks_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let transcript = dir.path().join("t.jsonl");
        let lines = [
            json!({"type": "user", "message": {"role": "user", "content": "do it"}}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "first"}]}}),
            json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Read"}]}}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "the end"}]}}),
        ];
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&transcript, text.join("\n") + "\nnot json\n").expect("write");
        let input = json!({"stop_hook_active": false, "transcript_path": transcript});
        let sent = payload(HookEvent::Stop, input);
        assert_eq!(
            sent,
            json!({"stop_hook_active": false, "last_assistant_message": "the end"})
        );
        let given = json!({"last_assistant_message": "given", "transcript_path": transcript});
        assert_eq!(
            payload(HookEvent::Stop, given).get("last_assistant_message"),
            Some(&json!("given"))
        );
    }

    #[tokio::test]
    async fn without_a_daemon_a_tool_call_is_denied() {
        let input = json!({"tool_name": "Write", "tool_input": {"file_path": "a", "content": "x"}});
        let out = run(HookEvent::PreToolUse, input.to_string().as_bytes(), &env()).await;
        assert_eq!(out.code, 2);
        assert!(out.stderr.contains("not running"), "{}", out.stderr);
        let outside = HookEnv::default();
        let out = run(
            HookEvent::PreToolUse,
            input.to_string().as_bytes(),
            &outside,
        )
        .await;
        assert_eq!(out.code, 2);
        assert!(out.stderr.contains("CATALYST_SOCKET"), "{}", out.stderr);
    }

    /// A run folder with an implementer's policy in it, and the environment of its agent.
    fn attempt() -> (tempfile::TempDir, HookEnv, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let worktree = dir.path().join("wt");
        let run_dir = dir.path().join("run");
        std::fs::create_dir_all(&worktree).expect("worktree");
        std::fs::create_dir_all(&run_dir).expect("run folder");
        let policy = AttemptPolicy {
            bead: BeadId::new("cat-1").expect("id"),
            step: BeadId::new("cat-1.implement").expect("id"),
            role: crate::domain::model::Role::Implement,
            attempt: 1,
            access: crate::domain::policy::Access::Worktree,
            tools: None,
            worktree: worktree.clone(),
            target_branch: "main".into(),
            context: run_dir.join("context.md"),
            contract: "---STEP-RESULT--- …".into(),
        };
        std::fs::write(
            run_dir.join(POLICY_FILE),
            serde_json::to_vec(&policy).expect("json"),
        )
        .expect("policy");
        let env = HookEnv {
            socket: Some(dir.path().join("no-daemon.sock")),
            step: Some("cat-1.implement".into()),
            role: Some("implement".into()),
            context: Some(run_dir.join("context.md")),
        };
        (dir, env, run_dir)
    }

    fn logged(run_dir: &Path) -> Vec<ToolRecord> {
        std::fs::read_to_string(run_dir.join(TOOL_LOG_FILE))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a record"))
            .collect()
    }

    #[test]
    fn with_the_attempts_policy_the_hook_decides_and_logs_without_the_daemon() {
        let (_dir, env, run_dir) = attempt();
        let call = |tool: &str, input: Value| {
            let hook = json!({"tool_name": tool, "tool_input": input}).to_string();
            run_local(HookEvent::PreToolUse, hook.as_bytes(), &env).expect("decided locally")
        };
        let inside = json_of(&call(
            "Write",
            json!({"file_path": "a.txt", "content": "a"}),
        ));
        assert_eq!(inside.permission_decision.as_deref(), Some("allow"));
        let outside = json_of(&call("Write", json!({"file_path": "/etc/passwd"})));
        assert_eq!(outside.permission_decision.as_deref(), Some("deny"));
        let push = json_of(&call("Bash", json!({"command": "git push origin main"})));
        assert_eq!(push.permission_decision.as_deref(), Some("deny"));
        let records = logged(&run_dir);
        let seen: Vec<(&str, bool)> = records
            .iter()
            .map(|r| (r.tool.as_str(), r.allowed))
            .collect();
        assert_eq!(seen, [("Write", true), ("Write", false), ("Bash", false)]);
        assert_eq!(records[1].target.as_deref(), Some("/etc/passwd"));

        let session = run_local(HookEvent::SessionStart, b"{}", &env).expect("local");
        let text = json_of(&session).additional_context.unwrap_or_default();
        assert!(
            text.contains("cat-1.implement") && text.contains("context.md"),
            "{text}"
        );

        // A final message without a block is sent back once, and recorded.
        let stop = json!({"last_assistant_message": "done, no block"}).to_string();
        let first = run_local(HookEvent::Stop, stop.as_bytes(), &env).expect("local");
        assert_eq!(first.code, 2, "sent back: {first:?}");
        assert!(
            first.stderr.contains("---STEP-RESULT--- …"),
            "{}",
            first.stderr
        );
        let second = run_local(HookEvent::Stop, stop.as_bytes(), &env).expect("local");
        assert_eq!(second.code, 0, "once per attempt");
        assert_eq!(
            logged(&run_dir).last().map(|r| r.tool.as_str()),
            Some(STOP_TOOL)
        );

        // The attempt is over: no policy, so the daemon is asked (here: denied, unreachable).
        std::fs::remove_file(run_dir.join(POLICY_FILE)).expect("remove");
        let hook = json!({"tool_name": "Read", "tool_input": {"file_path": "a.txt"}}).to_string();
        assert!(run_local(HookEvent::PreToolUse, hook.as_bytes(), &env).is_none());
    }
}
