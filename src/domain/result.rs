//! The `---STEP-RESULT---` block an agent ends its final message with (docs/routing.md#parsing-rules), parsed into a
//! [`StepResult`] or refused with a precise [`Malformed`] reason.
//!
//! The block is all the daemon reads from an agent to route a step, so the parser is tolerant
//! where a model's formatting drifts harmlessly (letter case, whitespace, CRLF, a code fence
//! around the block, keys it does not know, bullets written `*`) and strict where a guess could
//! route the step wrongly (an unknown `STATUS`, a review without a verdict, a key given twice).
//! A refusal is not a dead end: the router retries the step with the reason in its comment, and
//! the `Stop` hook shows the same reason to the agent before it exits.
//!
//! The parser runs on untrusted, possibly huge output: it makes one pass over the lines to find
//! the block and one over the block, never panics, and shortens what it quotes in a reason.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::model::Role;

/// The line that opens a result block.
pub const START_MARKER: &str = "---STEP-RESULT---";
/// The line that closes a result block.
pub const END_MARKER: &str = "---END-RESULT---";

/// What the agent says became of its step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Done,
    Blocked,
    Error,
}

impl ResultStatus {
    /// The spelling in a result block.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Done => "DONE",
            ResultStatus::Blocked => "BLOCKED",
            ResultStatus::Error => "ERROR",
        }
    }

    fn parse(s: &str) -> Option<ResultStatus> {
        [
            ResultStatus::Done,
            ResultStatus::Blocked,
            ResultStatus::Error,
        ]
        .into_iter()
        .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for ResultStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reviewer's judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approved,
    Rejected,
}

impl Verdict {
    /// The spelling in a result block.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "APPROVED",
            Verdict::Rejected => "REJECTED",
        }
    }

    fn parse(s: &str) -> Option<Verdict> {
        [Verdict::Approved, Verdict::Rejected]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed result block, plus the prose the agent wrote before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepResult {
    pub status: ResultStatus,
    /// Always set for a review that is `DONE`; on other steps, kept when it was one valid value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// One line, never empty.
    pub summary: String,
    /// The `INSTRUCTIONS` items, one per bullet, without the bullet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<String>,
    /// The final message's text before the block, trimmed, with line ends as `\n`. It is the
    /// step's output that later steps are offered (the refine step's plan, for one).
    #[serde(default)]
    pub message: String,
}

/// Why a final message has no usable result block. Its `Display` is one lowercase line, written
/// into a `[daemon] RETRY` comment and shown to the agent by the `Stop` hook.
///
/// Values quoted in a reason are escaped and shortened so the reason stays one short line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("no `---STEP-RESULT---` block")]
    NoBlock,
    #[error("the `---STEP-RESULT---` block has no `---END-RESULT---` line")]
    Unterminated,
    #[error("missing `STATUS`")]
    MissingStatus,
    #[error("missing `SUMMARY`")]
    MissingSummary,
    #[error("missing `VERDICT` (required for a review step)")]
    MissingVerdict,
    /// A key that must carry a value was given with none.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    #[error("`STATUS` value `{0}` is not DONE, BLOCKED or ERROR")]
    BadStatus(String),
    #[error("`VERDICT` value `{0}` is not APPROVED or REJECTED")]
    BadVerdict(String),
    /// The same key twice in one block: which one was meant cannot be known.
    #[error("`{0}` appears twice")]
    Duplicate(&'static str),
}

/// Parses the result block at the end of an agent's final message.
///
/// Contract:
/// - Only `final_message` is read. Marker lines match case-insensitively after trimming; the
///   block is the lines between a start marker and the next end marker. An end marker with no
///   start before it is ignored; of two start markers before one end, the later opens the block.
/// - The **last complete** block is taken. A start marker after it that is never closed (an
///   unfinished or quoted block) is ignored, as docs/routing.md#parsing-rules says; only when there is no complete
///   block at all is the reason [`Malformed::Unterminated`].
/// - Fence lines (```` ``` ````, ```` ```text ````, `~~~`) are skipped inside the block, and an
///   opening fence just before it is left out of `message`.
/// - Keys (`KEY: value`) and the values of `STATUS` and `VERDICT` match case-insensitively;
///   unknown keys and prose lines are ignored. `STATUS`, `SUMMARY` and `INSTRUCTIONS` may each
///   appear once.
/// - `INSTRUCTIONS` is followed by bullet lines (`- `, `* `, `• `, `1. `, `1) `) up to the end of
///   the block or the next known key; a non-bullet line continues the item before it. An inline
///   value is the first item, except `none`, `n/a` or `-`, which mean no item; a list that is
///   just `none` is empty.
/// - `VERDICT` matters only for a review (`role == Some(Role::Review)`) that is `DONE`: there
///   it is required, must be APPROVED or REJECTED and may appear once. Elsewhere it is ignored,
///   except that one valid value is kept in [`StepResult::verdict`]; a reviewer that is BLOCKED
///   has nothing to judge, so it is not made to invent a verdict.
pub fn parse(final_message: &str, role: Option<Role>) -> Result<StepResult, Malformed> {
    let span = find_block(final_message)?;
    let fields = Fields::read(&final_message[span.body.0..span.body.1])?;
    let status = match fields.status {
        None => return Err(Malformed::MissingStatus),
        Some("") => return Err(Malformed::Empty("STATUS")),
        Some(v) => ResultStatus::parse(v).ok_or_else(|| Malformed::BadStatus(shown(v)))?,
    };
    let verdict = if role == Some(Role::Review) && status == ResultStatus::Done {
        if fields.verdict_twice {
            return Err(Malformed::Duplicate("VERDICT"));
        }
        match fields.verdict {
            None => return Err(Malformed::MissingVerdict),
            Some("") => return Err(Malformed::Empty("VERDICT")),
            Some(v) => Some(Verdict::parse(v).ok_or_else(|| Malformed::BadVerdict(shown(v)))?),
        }
    } else if fields.verdict_twice {
        None
    } else {
        fields.verdict.and_then(Verdict::parse)
    };
    let summary = match fields.summary {
        None => return Err(Malformed::MissingSummary),
        Some("") => return Err(Malformed::Empty("SUMMARY")),
        Some(s) => s.to_owned(),
    };
    let mut instructions = fields.instructions;
    if let [only] = instructions.as_slice() {
        if means_none(only) {
            instructions.clear();
        }
    }
    Ok(StepResult {
        status,
        verdict,
        summary,
        instructions,
        message: final_message[..span.message_end]
            .trim()
            .replace("\r\n", "\n"),
    })
}

impl StepResult {
    /// Renders a final message that [`parse`] reads back as `self`: the message, a blank line,
    /// and the canonical block (upper-case keys and values, `- ` bullets, no `INSTRUCTIONS` when
    /// there are none). Line breaks inside the summary or an item are written as spaces, since
    /// the format has one line for each.
    pub fn to_block(&self) -> String {
        let one_line = |s: &str| s.replace(['\r', '\n'], " ");
        let mut out = String::new();
        if !self.message.is_empty() {
            out.push_str(&self.message);
            out.push_str("\n\n");
        }
        out.push_str(START_MARKER);
        out.push_str("\nSTATUS: ");
        out.push_str(self.status.as_str());
        if let Some(v) = self.verdict {
            out.push_str("\nVERDICT: ");
            out.push_str(v.as_str());
        }
        out.push_str("\nSUMMARY: ");
        out.push_str(&one_line(&self.summary));
        if !self.instructions.is_empty() {
            out.push_str("\nINSTRUCTIONS:");
            for item in &self.instructions {
                out.push_str("\n- ");
                out.push_str(&one_line(item));
            }
        }
        out.push('\n');
        out.push_str(END_MARKER);
        out.push('\n');
        out
    }
}

/// Where the chosen block lies in the final message, in bytes.
struct Span {
    /// From the line after the start marker to the start of the end marker line.
    body: (usize, usize),
    /// Where `message` ends: the start marker, or the opening fence just before it.
    message_end: usize,
}

/// Finds the last complete block in one pass over the lines.
fn find_block(text: &str) -> Result<Span, Malformed> {
    let mut fences = 0usize;
    let mut last_fence = 0usize;
    // The open start marker: where its body begins and where the message would end.
    let mut open: Option<(usize, usize)> = None;
    let mut seen_start = false;
    let mut found = None;
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let line_start = offset;
        offset += raw.len();
        let line = raw.trim();
        if line.eq_ignore_ascii_case(START_MARKER) {
            seen_start = true;
            // An odd number of fences before the marker means the block sits inside one.
            let message_end = if fences % 2 == 1 {
                last_fence
            } else {
                line_start
            };
            open = Some((offset, message_end));
        } else if line.eq_ignore_ascii_case(END_MARKER) {
            if let Some((body_start, message_end)) = open.take() {
                found = Some(Span {
                    body: (body_start, line_start),
                    message_end,
                });
            }
        } else if is_fence(line) {
            fences += 1;
            last_fence = line_start;
        }
    }
    match found {
        Some(span) => Ok(span),
        None if seen_start => Err(Malformed::Unterminated),
        None => Err(Malformed::NoBlock),
    }
}

/// The keys of the block as written, before their values are checked.
#[derive(Default)]
struct Fields<'a> {
    status: Option<&'a str>,
    verdict: Option<&'a str>,
    verdict_twice: bool,
    summary: Option<&'a str>,
    instructions_seen: bool,
    instructions: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Status,
    Verdict,
    Summary,
    Instructions,
}

impl<'a> Fields<'a> {
    fn read(body: &'a str) -> Result<Fields<'a>, Malformed> {
        let mut fields = Fields::default();
        let mut in_list = false;
        for line in body.lines().map(str::trim) {
            if line.is_empty() || is_fence(line) {
                continue;
            }
            if in_list {
                if let Some(item) = strip_bullet(line) {
                    if !item.is_empty() {
                        fields.instructions.push(item.to_owned());
                    }
                    continue;
                }
            }
            if let Some((key, value)) = known_key(line) {
                in_list = key == Key::Instructions;
                fields.set(key, value)?;
            } else if in_list {
                match fields.instructions.last_mut() {
                    Some(item) => {
                        item.push(' ');
                        item.push_str(line);
                    }
                    None => fields.instructions.push(line.to_owned()),
                }
            }
        }
        Ok(fields)
    }

    fn set(&mut self, key: Key, value: &'a str) -> Result<(), Malformed> {
        let once = |slot: &mut Option<&'a str>, name| match slot.replace(value) {
            Some(_) => Err(Malformed::Duplicate(name)),
            None => Ok(()),
        };
        match key {
            Key::Status => once(&mut self.status, "STATUS"),
            Key::Summary => once(&mut self.summary, "SUMMARY"),
            Key::Verdict => {
                // Whether a second verdict is an error depends on the role and the status,
                // which are known only after the whole block is read.
                self.verdict_twice |= self.verdict.replace(value).is_some();
                Ok(())
            }
            Key::Instructions => {
                if std::mem::replace(&mut self.instructions_seen, true) {
                    return Err(Malformed::Duplicate("INSTRUCTIONS"));
                }
                let item = strip_bullet(value).unwrap_or(value);
                if !item.is_empty() && !means_none(item) {
                    self.instructions.push(item.to_owned());
                }
                Ok(())
            }
        }
    }
}

/// Splits a trimmed `KEY: value` line whose key is one catalyst knows.
fn known_key(line: &str) -> Option<(Key, &str)> {
    let (key, value) = line.split_once(':')?;
    let key = key.trim();
    [
        ("STATUS", Key::Status),
        ("VERDICT", Key::Verdict),
        ("SUMMARY", Key::Summary),
        ("INSTRUCTIONS", Key::Instructions),
    ]
    .into_iter()
    .find(|(name, _)| name.eq_ignore_ascii_case(key))
    .map(|(_, k)| (k, value.trim()))
}

/// The text of a list item without its bullet (`- `, `* `, `• `, `1. `, `1) `), trimmed.
fn strip_bullet(line: &str) -> Option<&str> {
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '•']) {
        rest
    } else {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 3 {
            return None;
        }
        line[digits..].strip_prefix(['.', ')'])?
    };
    // `-x`, `**bold**` and `1.5` are text, not bullets.
    if rest.is_empty() || rest.starts_with(char::is_whitespace) {
        Some(rest.trim())
    } else {
        None
    }
}

fn is_fence(line: &str) -> bool {
    line.starts_with("```") || line.starts_with("~~~")
}

fn means_none(s: &str) -> bool {
    ["none", "n/a", "-"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(s))
}

/// Escapes control characters and cuts long values so a reason stays one short line.
fn shown(s: &str) -> String {
    const MAX: usize = 40;
    let mut out: String = s.chars().take(MAX).flat_map(char::escape_debug).collect();
    if s.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests;
