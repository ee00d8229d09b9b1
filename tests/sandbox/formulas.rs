//! What a bead carries cannot change what the daemon runs: a `formula_vars` value is checked
//! against its var's pattern and reaches a gate's shell quoted.

use catalyst::protocol::BeadInput;
use catalyst_testkit::{bead, TestDaemon};
use serde_json::json;

fn gated(id: &str, test_command: &str) -> BeadInput {
    let metadata = json!({"formula_vars": {"test_command": test_command}});
    BeadInput {
        id: Some(id.into()),
        formula: Some("gated".into()),
        metadata: metadata.as_object().cloned(),
        ..bead("Checked work")
    }
}

/// A formula whose gate echoes a var that any value may take.
const ECHO: &str = "formula = \"echo\"\n[vars.word]\npattern = \"(?s).*\"\n[[steps]]\nid = \"say\"\ntitle = \"Say\"\nrole = \"gate\"\nrun = [\"echo {{word}}\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_outside_its_pattern_is_refused_and_a_quoted_one_runs_as_one_word() {
    let scenario =
        "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("echo", ECHO).await;
    let planted = daemon.root.join("INJECTED");
    let attack = format!("true; touch {}", planted.display());
    daemon.submit(gated("cat-inject", &attack)).await;
    let blocked = daemon.wait_status("cat-inject", "blocked").await;
    assert!(
        blocked["reason"]
            .as_str()
            .is_some_and(|r| r.contains("does not match the pattern")),
        "{blocked}"
    );
    // A var whose pattern lets anything through still reaches the shell as one word.
    let metadata = json!({"formula_vars": {"word": attack}});
    daemon
        .submit(BeadInput {
            id: Some("cat-echo".into()),
            formula: Some("echo".into()),
            metadata: metadata.as_object().cloned(),
            ..bead("Echo")
        })
        .await;
    let passed = daemon
        .wait_for("the echo gate", |e| {
            e["type"] == "gate.passed" && e["step"] == "cat-echo.say"
        })
        .await;
    assert!(!planted.exists(), "the injected command ran: {passed}");
}
