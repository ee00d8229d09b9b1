//! stub-claude scenario rules that several tests share. Roles without a rule answer at once
//! with a valid result (a reviewer approves).

use std::path::Path;

/// The implementer writes `hello.txt` (`hello\n`).
pub const IMPLEMENT_WRITES_HELLO: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;

/// The implementer reports `STATUS: BLOCKED` ("the spec contradicts itself"), which blocks the
/// bead at once.
pub const IMPLEMENT_REPORTS_BLOCKED: &str = r#"
[[rule]]
role = "implement"
responses = [{ status = "BLOCKED", summary = "the spec contradicts itself" }]
"#;

/// Each bead's implementer writes `<bead>.txt` holding the bead's id, through the Bash tool.
pub const EACH_BEAD_WRITES_ITS_FILE: &str = r#"
[[rule]]
role = "implement"
responses = [{ tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > $CATALYST_BEAD.txt" } }], summary = "wrote a file" }]
"#;

/// The implementer waits until the file `go` exists (the test creates it to let the agent
/// finish), then writes `a.txt`.
pub fn implement_waits_for(go: &Path) -> String {
    format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ wait_for = {:?}, write = {{ \"a.txt\" = \"a\\n\" }}, summary = \"wrote a\" }}]\n",
        go.display().to_string()
    )
}
