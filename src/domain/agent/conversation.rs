//! An agent's conversation over stdin ([`super::profile::StdinMode::Conversation`]): Claude
//! Code reads user messages as `--input-format stream-json` lines, answers each with a turn
//! ending in a `result` event, and exits when its stdin closes.
//!
//! The prompt is the first message. Each `result` is judged as the `Stop` hook judges a stop
//! (docs/agents.md#hooks): a final message without a valid result block is sent back once,
//! with the result contract, so the agent fixes its output instead of costing a retry; any
//! other answer (a valid block, an error, a usage-limit notice, a second miss) closes stdin.
//! Judging here rather than in a hook saves the `sh` and the handler Claude Code starts for
//! every `Stop` hook.

use serde_json::json;

use super::attempt::{stop_reason, ToolRecord, STOP_TOOL};
use crate::domain::model::Role;

/// What the agent's final messages are judged against, and whether one was sent back.
#[derive(Clone, Debug)]
pub struct Conversation {
    role: Role,
    contract: String,
    sent_back: bool,
}

/// What to do after a `result`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Close stdin: the agent ends with this answer.
    Close,
    /// Write `line` (a user message) and wait for the next `result`; `record` is the
    /// `agent.tool` event that says so.
    SendBack { line: String, record: ToolRecord },
}

impl Conversation {
    /// A conversation with an agent of `role`, whose answers must follow `contract`.
    pub fn new(role: Role, contract: &str) -> Conversation {
        Conversation {
            role,
            contract: contract.to_owned(),
            sent_back: false,
        }
    }

    /// What follows a `result` whose final message is `message` (`None`: it had none).
    pub fn on_result(&mut self, message: Option<&str>, is_error: bool) -> Reply {
        let Some(message) = message.filter(|_| !is_error && !self.sent_back) else {
            return Reply::Close;
        };
        if super::limits::in_bare_notice(message).is_some() {
            return Reply::Close;
        }
        let Err(malformed) = crate::domain::result::parse(message, Some(self.role)) else {
            return Reply::Close;
        };
        self.sent_back = true;
        let malformed = malformed.to_string();
        Reply::SendBack {
            line: user_message(&stop_reason(&self.contract, &malformed)),
            record: ToolRecord {
                tool: STOP_TOOL.into(),
                allowed: false,
                reason: Some(format!("no valid result block: {malformed}")),
                target: None,
            },
        }
    }
}

/// `text` as one `--input-format stream-json` user message, newline included.
pub fn user_message(text: &str) -> String {
    let message = json!({
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": null,
        "session_id": "",
    });
    format!("{message}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT: &str = "End with ---STEP-RESULT--- …";

    fn valid() -> String {
        "Done.\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: did it\n---END-RESULT---\n".into()
    }

    #[test]
    fn a_message_without_a_block_is_sent_back_once_with_the_contract() {
        let mut c = Conversation::new(Role::Implement, CONTRACT);
        let Reply::SendBack { line, record } = c.on_result(Some("I wrote it."), false) else {
            panic!("sent back");
        };
        let sent: serde_json::Value = serde_json::from_str(line.trim_end()).expect("json");
        assert_eq!(sent["type"], "user");
        let text = sent["message"]["content"].as_str().expect("text");
        assert!(text.contains(CONTRACT), "{text}");
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        assert_eq!(record.tool, STOP_TOOL);
        assert!(!record.allowed);
        assert_eq!(c.on_result(Some("Still no block."), false), Reply::Close);
    }

    #[test]
    fn a_valid_block_an_error_or_a_limit_notice_closes() {
        let mut c = Conversation::new(Role::Implement, CONTRACT);
        assert_eq!(c.on_result(Some(&valid()), false), Reply::Close);
        assert_eq!(c.on_result(Some("API Error: 500"), true), Reply::Close);
        assert_eq!(c.on_result(None, false), Reply::Close);
        assert_eq!(
            c.on_result(Some("Claude AI usage limit reached|1767225600"), false),
            Reply::Close
        );
        // None of those used up the one send-back.
        assert!(matches!(
            c.on_result(Some("no block"), false),
            Reply::SendBack { .. }
        ));
    }

    #[test]
    fn a_review_without_a_verdict_is_sent_back() {
        let mut c = Conversation::new(Role::Review, CONTRACT);
        assert!(matches!(
            c.on_result(Some(&valid()), false),
            Reply::SendBack { .. }
        ));
    }
}
