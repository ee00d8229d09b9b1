//! stub-claude: a drop-in `claude` for catalyst's tests.
//!
//! This first version accepts any arguments, reads the prompt from stdin and answers as Claude
//! Code's `--output-format stream-json` does, with a final `result` event whose text ends in a
//! valid `STATUS: DONE` block (`VERDICT: APPROVED` when `CATALYST_ROLE` is `review`). Scenario
//! files (DESIGN §11a) come with the daemon.

use std::io::{self, Read, Write};

use serde_json::json;

fn main() {
    let mut prompt = String::new();
    // The prompt arrives on stdin; a closed or unreadable stdin is answered all the same.
    let _ = io::stdin().read_to_string(&mut prompt);
    let role = std::env::var("CATALYST_ROLE").unwrap_or_default();
    let verdict = if role == "review" {
        "VERDICT: APPROVED\n"
    } else {
        ""
    };
    let message = format!(
        "Done.\n\n---STEP-RESULT---\nSTATUS: DONE\n{verdict}SUMMARY: stub-claude answered\n---END-RESULT---\n"
    );
    let session = format!("stub-{}", std::process::id());
    let init = json!({"type": "system", "subtype": "init", "session_id": session});
    let result = json!({
        "type": "result",
        "subtype": "success",
        "is_error": false,
        "session_id": session,
        "result": message,
    });
    let mut out = io::stdout().lock();
    // A closed stdout means nobody is listening; there is nothing better to do than stop.
    let _ = writeln!(out, "{init}").and_then(|()| writeln!(out, "{result}"));
}
