//! Table-driven tests of [`super`].

use super::*;

const REVIEW: Option<Role> = Some(Role::Review);
const IMPLEMENT: Option<Role> = Some(Role::Implement);

fn result(
    status: ResultStatus,
    verdict: Option<Verdict>,
    summary: &str,
    instructions: &[&str],
    message: &str,
) -> StepResult {
    StepResult {
        status,
        verdict,
        summary: summary.into(),
        instructions: instructions.iter().map(|s| s.to_string()).collect(),
        message: message.into(),
    }
}

fn done(summary: &str) -> StepResult {
    result(ResultStatus::Done, None, summary, &[], "")
}

#[test]
fn well_formed_blocks_parse() {
    use ResultStatus::*;
    use Verdict::*;
    let cases: Vec<(&str, &str, Option<Role>, StepResult)> = vec![
        (
            "the block of the routing contract",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: REJECTED\nSUMMARY: needs a fix\n\
             INSTRUCTIONS:\n- Fix the nil pointer in auth.go:45\n---END-RESULT---",
            REVIEW,
            result(Done, Some(Rejected), "needs a fix", &["Fix the nil pointer in auth.go:45"], ""),
        ),
        (
            "text before the block becomes the message",
            "## Plan\n\n1. do a\n2. do b\n\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: planned\n---END-RESULT---\n",
            Some(Role::Refine),
            result(Done, None, "planned", &[], "## Plan\n\n1. do a\n2. do b"),
        ),
        (
            "lowercase keys, values and markers",
            "---step-result---\nstatus: done\nverdict: approved\nsummary: fine\n---end-result---",
            REVIEW,
            result(Done, Some(Approved), "fine", &[], ""),
        ),
        (
            "mixed case and surrounding whitespace",
            "  \n\t---Step-Result---  \n  Status :  Blocked \n   Summary:   no access to the db  \n ---END-RESULT--- \n\n",
            IMPLEMENT,
            result(Blocked, None, "no access to the db", &[], ""),
        ),
        (
            "CRLF line ends",
            "did it\r\nall\r\n---STEP-RESULT---\r\nSTATUS: ERROR\r\nSUMMARY: tool crashed\r\nINSTRUCTIONS:\r\n- retry later\r\n---END-RESULT---\r\n",
            IMPLEMENT,
            result(Error, None, "tool crashed", &["retry later"], "did it\nall"),
        ),
        (
            "unknown keys and prose lines are ignored",
            "---STEP-RESULT---\nSTATUS: DONE\nCONFIDENCE: high\nI am done.\nSUMMARY: ok\nFILES: a.rs\n---END-RESULT---",
            IMPLEMENT,
            done("ok"),
        ),
        (
            "a block inside a code fence; the opening fence is not part of the message",
            "Wrote the parser.\n\n```text\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: parser\n---END-RESULT---\n```\n",
            IMPLEMENT,
            result(Done, None, "parser", &[], "Wrote the parser."),
        ),
        (
            "a bare fence, and fence lines inside the block",
            "```\n---STEP-RESULT---\n```\nSTATUS: DONE\nSUMMARY: s\n```\n---END-RESULT---\n```",
            IMPLEMENT,
            done("s"),
        ),
        (
            "a closed code block in the prose stays in the message",
            "Example:\n```rust\nfn a() {}\n```\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "s", &[], "Example:\n```rust\nfn a() {}\n```"),
        ),
        (
            "two complete blocks: the later one counts",
            "---STEP-RESULT---\nSTATUS: ERROR\nSUMMARY: first\n---END-RESULT---\nthen fixed it\n\
             ---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: second\n---END-RESULT---",
            IMPLEMENT,
            result(
                Done,
                None,
                "second",
                &[],
                "---STEP-RESULT---\nSTATUS: ERROR\nSUMMARY: first\n---END-RESULT---\nthen fixed it",
            ),
        ),
        (
            "an incomplete block after a complete one is ignored",
            "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: complete\n---END-RESULT---\n---STEP-RESULT---\nSTATUS: ERR",
            IMPLEMENT,
            done("complete"),
        ),
        (
            "of two starts before one end, the later opens the block",
            "---STEP-RESULT---\nSTATUS: ERROR\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: inner\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "inner", &[], "---STEP-RESULT---\nSTATUS: ERROR"),
        ),
        (
            "an end marker with no start is ignored",
            "---END-RESULT---\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "s", &[], "---END-RESULT---"),
        ),
        (
            "bullets of every kind, continuation lines, a key after the list",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: REJECTED\nINSTRUCTIONS:\n- one\n* two\n  which wraps\n• three\n\
             1. four\n2) five\n- note: a colon inside an item\n-\nSUMMARY: list\n---END-RESULT---",
            REVIEW,
            result(
                Done,
                Some(Rejected),
                "list",
                &["one", "two which wraps", "three", "four", "five", "note: a colon inside an item"],
                "",
            ),
        ),
        (
            "an inline instruction is the first item",
            "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\nINSTRUCTIONS: - add a test\n- run it\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "s", &["add a test", "run it"], ""),
        ),
        (
            "`INSTRUCTIONS: none` is an empty list",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: APPROVED\nSUMMARY: s\nINSTRUCTIONS: None\n---END-RESULT---",
            REVIEW,
            result(Done, Some(Approved), "s", &[], ""),
        ),
        (
            "a list that is only `- n/a` is empty",
            "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\nINSTRUCTIONS:\n- N/A\n---END-RESULT---",
            IMPLEMENT,
            done("s"),
        ),
        (
            "an empty list",
            "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\nINSTRUCTIONS:\n---END-RESULT---",
            IMPLEMENT,
            done("s"),
        ),
        (
            "a text line before any bullet is an item",
            "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\nINSTRUCTIONS:\nadd a test\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "s", &["add a test"], ""),
        ),
        (
            "a valid verdict is kept on other roles",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: approved\nSUMMARY: s\n---END-RESULT---",
            IMPLEMENT,
            result(Done, Some(Approved), "s", &[], ""),
        ),
        (
            "an invalid verdict is ignored on other roles",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: LGTM\nSUMMARY: s\n---END-RESULT---",
            Some(Role::Merge),
            done("s"),
        ),
        (
            "two verdicts are ignored when the role is unknown",
            "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: APPROVED\nVERDICT: REJECTED\nSUMMARY: s\n---END-RESULT---",
            None,
            done("s"),
        ),
        (
            "a blocked reviewer needs no verdict",
            "---STEP-RESULT---\nSTATUS: BLOCKED\nSUMMARY: cannot build\n---END-RESULT---",
            REVIEW,
            result(Blocked, None, "cannot build", &[], ""),
        ),
        (
            "a reviewer's invalid verdict is ignored when it is not DONE",
            "---STEP-RESULT---\nSTATUS: ERROR\nVERDICT: n/a\nSUMMARY: crashed\n---END-RESULT---",
            REVIEW,
            result(Error, None, "crashed", &[], ""),
        ),
        (
            "replacement characters from lossy decoding are just text",
            "\u{fffd}\u{fffd}\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: caf\u{fffd}\n---END-RESULT---",
            IMPLEMENT,
            result(Done, None, "caf\u{fffd}", &[], "\u{fffd}\u{fffd}"),
        ),
    ];
    for (name, text, role, want) in cases {
        assert_eq!(parse(text, role), Ok(want), "{name}");
    }
}

#[test]
fn malformed_blocks_say_precisely_why() {
    let block = |body: &str| format!("---STEP-RESULT---\n{body}\n---END-RESULT---");
    let long = format!("STATUS: a\u{7}{}\nSUMMARY: s", "x".repeat(100));
    let long_reason = format!(
        "`STATUS` value `a\\u{{7}}{}…` is not DONE, BLOCKED or ERROR",
        "x".repeat(38)
    );
    let cases: Vec<(&str, String, Option<Role>, &str)> = vec![
        (
            "empty message",
            String::new(),
            IMPLEMENT,
            "no `---STEP-RESULT---` block",
        ),
        (
            "prose only",
            "I did it.\nSTATUS: DONE".into(),
            IMPLEMENT,
            "no `---STEP-RESULT---` block",
        ),
        (
            "only an end marker",
            "---END-RESULT---".into(),
            IMPLEMENT,
            "no `---STEP-RESULT---` block",
        ),
        (
            "a marker inside a line is not a marker",
            "ok ---STEP-RESULT--- STATUS: DONE ---END-RESULT---".into(),
            IMPLEMENT,
            "no `---STEP-RESULT---` block",
        ),
        (
            "an incomplete trailing block and no complete one",
            "work done\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: cut off".into(),
            IMPLEMENT,
            "the `---STEP-RESULT---` block has no `---END-RESULT---` line",
        ),
        ("an empty block", block(""), IMPLEMENT, "missing `STATUS`"),
        (
            "no status",
            block("SUMMARY: s"),
            IMPLEMENT,
            "missing `STATUS`",
        ),
        (
            "empty status",
            block("STATUS:\nSUMMARY: s"),
            IMPLEMENT,
            "`STATUS` is empty",
        ),
        (
            "unknown status",
            block("STATUS: MAYBE\nSUMMARY: s"),
            IMPLEMENT,
            "`STATUS` value `MAYBE` is not DONE, BLOCKED or ERROR",
        ),
        (
            "a decorated status is not guessed at",
            block("STATUS: DONE.\nSUMMARY: s"),
            IMPLEMENT,
            "`STATUS` value `DONE.` is not DONE, BLOCKED or ERROR",
        ),
        (
            "a long value is escaped and shortened",
            block(&long),
            IMPLEMENT,
            &long_reason,
        ),
        (
            "status twice",
            block("STATUS: DONE\nSTATUS: DONE\nSUMMARY: s"),
            IMPLEMENT,
            "`STATUS` appears twice",
        ),
        (
            "no summary",
            block("STATUS: DONE"),
            IMPLEMENT,
            "missing `SUMMARY`",
        ),
        (
            "empty summary",
            block("STATUS: DONE\nSUMMARY:  "),
            IMPLEMENT,
            "`SUMMARY` is empty",
        ),
        (
            "summary twice",
            block("STATUS: DONE\nSUMMARY: a\nSUMMARY: b"),
            IMPLEMENT,
            "`SUMMARY` appears twice",
        ),
        (
            "instructions twice",
            block("STATUS: DONE\nSUMMARY: s\nINSTRUCTIONS:\n- a\nINSTRUCTIONS:\n- b"),
            IMPLEMENT,
            "`INSTRUCTIONS` appears twice",
        ),
        (
            "a review without a verdict",
            block("STATUS: DONE\nSUMMARY: s"),
            REVIEW,
            "missing `VERDICT` (required for a review step)",
        ),
        (
            "a review with an empty verdict",
            block("STATUS: DONE\nVERDICT:\nSUMMARY: s"),
            REVIEW,
            "`VERDICT` is empty",
        ),
        (
            "a review with an unknown verdict",
            block("STATUS: DONE\nVERDICT: LGTM\nSUMMARY: s"),
            REVIEW,
            "`VERDICT` value `LGTM` is not APPROVED or REJECTED",
        ),
        (
            "a review with two verdicts",
            block("STATUS: DONE\nVERDICT: APPROVED\nVERDICT: REJECTED\nSUMMARY: s"),
            REVIEW,
            "`VERDICT` appears twice",
        ),
        (
            "the last complete block is judged, not an earlier good one",
            format!(
                "{}\n{}",
                block("STATUS: DONE\nSUMMARY: s"),
                block("STATUS: DONE")
            ),
            IMPLEMENT,
            "missing `SUMMARY`",
        ),
    ];
    for (name, text, role, want) in cases {
        let err = parse(&text, role).expect_err(name);
        assert_eq!(err.to_string(), want, "{name}");
    }
}

#[test]
fn a_missing_verdict_is_named_and_only_a_review_needs_one() {
    let text = "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\n---END-RESULT---";
    let err = parse(text, REVIEW).expect_err("a review without a verdict");
    assert!(err.to_string().contains("VERDICT"), "{err}");
    for role in Role::ALL.into_iter().filter(|r| *r != Role::Review) {
        assert!(parse(text, Some(role)).is_ok(), "{role}");
    }
    assert!(parse(text, None).is_ok());
}

#[test]
fn to_block_round_trips() {
    use ResultStatus::*;
    let cases = [
        done("did it"),
        result(Blocked, None, "need credentials", &[], "I tried.\n\nTwice."),
        result(Error, Some(Verdict::Approved), "s", &["a"], ""),
        result(
            Done,
            Some(Verdict::Rejected),
            "needs work",
            &["fix auth.go:45", "- a dash in the item", "1. numbered"],
            "Review notes:\n```rust\nlet x = 1;\n```",
        ),
    ];
    for want in cases {
        let text = want.to_block();
        for role in [REVIEW, IMPLEMENT] {
            let role = role.filter(|_| want.verdict.is_some());
            assert_eq!(parse(&text, role), Ok(want.clone()), "{text}");
        }
    }
}

#[test]
fn to_block_renders_the_canonical_block() {
    let r = result(
        ResultStatus::Done,
        Some(Verdict::Rejected),
        "two\nlines",
        &["x"],
        "",
    );
    assert_eq!(
        r.to_block(),
        "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: REJECTED\nSUMMARY: two lines\n\
         INSTRUCTIONS:\n- x\n---END-RESULT---\n"
    );
}

#[test]
fn serde_uses_lowercase_values() {
    let r = result(
        ResultStatus::Blocked,
        Some(Verdict::Approved),
        "s",
        &[],
        "m",
    );
    let json = serde_json::to_value(&r).expect("serializes");
    let want = serde_json::json!({"status": "blocked", "verdict": "approved", "summary": "s", "message": "m"});
    assert_eq!(json, want);
    assert_eq!(
        serde_json::from_value::<StepResult>(json).expect("deserializes"),
        r
    );
}

/// Untrusted output can be huge and odd: many markers, no line ends, lossy bytes.
#[test]
fn huge_and_odd_input_neither_panics_nor_takes_quadratic_time() {
    let many_starts = "---STEP-RESULT---\n".repeat(200_000);
    assert_eq!(parse(&many_starts, IMPLEMENT), Err(Malformed::Unterminated));
    let many_blocks =
        "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\n---END-RESULT---\n".repeat(50_000);
    assert!(parse(&many_blocks, IMPLEMENT).is_ok());
    let one_line = "x".repeat(5_000_000);
    assert_eq!(parse(&one_line, IMPLEMENT), Err(Malformed::NoBlock));
    let long_list = format!(
        "---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: s\nINSTRUCTIONS:\n{}---END-RESULT---",
        "- item\n  more\n".repeat(100_000)
    );
    assert_eq!(
        parse(&long_list, IMPLEMENT).map(|r| r.instructions.len()),
        Ok(100_000)
    );

    // A xorshift stream of bytes biased toward the characters the parser looks at.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let alphabet = b"-\n\r:*1. `~STEPRSULTDONVICA\t\xff\xc3\xa9";
    for _ in 0..300 {
        let bytes: Vec<u8> = (0..2_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                alphabet[(state % alphabet.len() as u64) as usize]
            })
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        for role in [None, REVIEW, IMPLEMENT] {
            let _ = parse(&text, role);
        }
    }
}
