//! Recognising an agent CLI's report that it hit a rate or usage limit, or found the API
//! overloaded.
//!
//! Such a run is not the step's fault: the router requeues it without counting an attempt and
//! the engine pauses the model (docs/routing.md#usage-limits). Misreading an ordinary failure as a limit would
//! requeue it forever, so text is only looked at where the CLI itself reports an error (an
//! `is_error` result, a Codex `error` event, stderr of a failed run), never in what the model
//! wrote, with one exception: a final message that is nothing but a one-line limit notice.

/// Phrases, lower-case, of the limit reports seen from Claude Code, the Anthropic API and Codex:
/// `Claude AI usage limit reached|<epoch>`, `You've hit your limit · resets 7pm`,
/// `Session limit reached`, `API Error: 429 {…"rate_limit_error"…}`, `overloaded_error` (529),
/// `usage_limit_reached`, `429 Too Many Requests`, `Quota exceeded`. A low credit balance is
/// counted too: like a limit, no retry helps until a person acts, and the bead is not to blame.
const PHRASES: [&str; 14] = [
    "usage limit",
    "usage_limit",
    "hit your limit",
    "session limit reached",
    "weekly limit reached",
    "5-hour limit reached",
    "rate limit",
    "rate_limit",
    "too many requests",
    "overloaded",
    "quota exceeded",
    "insufficient_quota",
    "credit balance is too low",
    "billing_error",
];

/// How much of an error text is searched; limit notices are short and come first.
const SCAN_BYTES: usize = 4096;

/// The longest reason kept, in characters.
const REASON_CHARS: usize = 300;

/// The start of an error text, lower-cased: where a CLI's error names its cause.
pub(crate) fn error_head(text: &str) -> String {
    prefix(text, SCAN_BYTES).to_lowercase()
}

/// The limit reason in an error text the agent CLI reported, if it is one.
pub(crate) fn in_error_text(text: &str) -> Option<String> {
    let head = error_head(text);
    PHRASES
        .iter()
        .any(|p| head.contains(p))
        .then(|| reason(text))
}

/// The limit reason when a final message not flagged as an error is nothing but a one-line limit
/// notice (Claude Code has ended runs with `Claude AI usage limit reached|<epoch>` as the
/// result). A real final message ends with a multi-line result block, so it never qualifies.
pub(crate) fn in_bare_notice(text: &str) -> Option<String> {
    let text = text.trim();
    if text.contains('\n') || text.chars().count() > REASON_CHARS {
        return None;
    }
    in_error_text(text)
}

/// A one-line, shortened version of an error text, for reasons and comments.
pub(crate) fn one_line(text: &str) -> String {
    shorten(text, REASON_CHARS)
}

/// `text` on one line of at most `max` characters, `…` marking a cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        if out.len() > max * 4 {
            break;
        }
    }
    if out.chars().count() > max {
        out = out.chars().take(max).collect();
        out.push('…');
    }
    out
}

/// The reason to record: the text on one line, with Claude's `…|<epoch>` form spelt out.
fn reason(text: &str) -> String {
    let line = one_line(text);
    if let Some((notice, epoch)) = line.rsplit_once('|') {
        if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) {
            return format!("{notice} (resets at unix time {epoch})");
        }
    }
    line
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
