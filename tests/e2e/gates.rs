//! Gate steps: checks that fail into a fix and pass after it, commands that outlive their
//! timeout, and a person's approval (or rejection) that survives a restart, with the audit
//! trail of every attempt.

use std::collections::BTreeSet;
use std::path::Path;

use catalyst::protocol::{BeadInput, Method, ShowParams};
use catalyst_testkit::{bead, TestDaemon};
use serde_json::{json, Value};

/// Runs `catalyst ctl --workspace REPO args…` and returns its exit code and stdout; anything
/// on stderr fails the test unless it succeeded.
async fn ctl(daemon: &TestDaemon, args: &[&str]) -> (i32, String) {
    let (code, stdout, stderr) = daemon.ctl(args, "").await;
    assert!(stderr.is_empty() || code == 0, "ctl {args:?}: {stderr}");
    (code, stdout)
}

/// A gated bead whose checks are `command`.
fn gated(title: &str, command: &str) -> BeadInput {
    let metadata = json!({"formula_vars": {"test_command": command}});
    BeadInput {
        formula: Some("gated".into()),
        metadata: metadata.as_object().cloned(),
        ..bead(title)
    }
}

pub(crate) const GATED: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "impl.txt" = "impl\n" }, summary = "implemented" }]

[[rule]]
role = "fix"
responses = [{ write = { "fixed.txt" = "fixed\n" }, summary = "made the checks pass" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gated_formula_fixes_its_checks_and_waits_for_a_person_across_a_restart() {
    let mut daemon = TestDaemon::start(GATED, "").await;
    let id = daemon
        .submit(gated("Checked work", "test -f fixed.txt"))
        .await;
    let checks = format!("{id}.checks");
    let approve = format!("{id}.approve");
    let failed = daemon
        .wait_for("the checks to fail", |e| {
            e["type"] == "gate.failed" && e["step"] == checks.as_str()
        })
        .await;
    assert!(
        failed["output"]
            .as_str()
            .is_some_and(|o| o.contains("$ sh -c 'test -f fixed.txt'") && o.contains("exit code 1")),
        "{failed}"
    );
    daemon
        .wait_for("the checks to pass after the fix", |e| {
            e["type"] == "gate.passed" && e["step"] == checks.as_str()
        })
        .await;
    let fix_context = std::fs::read_to_string(daemon.run_dir(&id, "fix-1", 1).join("context.md"))
        .expect("the fix's context");
    assert!(
        fix_context.contains("test -f fixed.txt"),
        "the fix sees the failing command: {fix_context}"
    );
    let first_checks = daemon.run_dir(&id, "checks", 1);
    assert!(first_checks.join("command-1").join("stdout").exists());
    assert!(first_checks.join("command-1").join("report.json").exists());
    daemon
        .wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == approve.as_str()
        })
        .await;

    daemon.stop().await;
    daemon.restart();
    let status = daemon.call(Method::Status).await;
    assert_eq!(
        status["waiting_approval"],
        json!([approve]),
        "the pending approval survived the restart"
    );
    let (code, _) = ctl(&daemon, &["approve", &id, "--comment", "ship it"]).await;
    assert_eq!(code, 0);
    daemon.wait_status(&id, "closed").await;

    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "fix", "review"]
    );
    assert_eq!(daemon.file_on_main("fixed.txt").as_deref(), Some("fixed\n"));
    let events = daemon.events().await;
    let waits = events
        .iter()
        .filter(|e| e["type"] == "gate.waiting" && e["step"] == approve.as_str())
        .count();
    assert_eq!(waits, 1, "asked once, not again after the restart");
    assert!(events.iter().any(|e| e["type"] == "gate.passed"
        && e["step"] == approve.as_str()
        && e["by"] == "human"));
    let comments = daemon.comments(&id).await;
    assert!(
        comments.iter().any(|c| c == "[approved] ship it"),
        "{comments:?}"
    );
    assert!(
        comments
            .iter()
            .any(|c| c.starts_with("[daemon] FIX_ITERATION: 1 (checks failed at checks")),
        "{comments:?}"
    );

    assert_the_audit_shows_every_attempt(&daemon, &id).await;
}

/// The audit of the gated bead: every attempt, with its files, model and result, through
/// `show --runs` as JSON and as text.
async fn assert_the_audit_shows_every_attempt(daemon: &TestDaemon, id: &str) {
    let shown = daemon
        .call(Method::Show(ShowParams {
            id: id.to_owned(),
            runs: true,
        }))
        .await;
    let step = |name: &str| -> Value {
        shown["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["step"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let implement = &step("implement")["runs"][0];
    assert_eq!(implement["model"], "sonnet");
    assert_eq!(implement["exit"], "exit code 0");
    assert_eq!(implement["outcome"], "finished");
    assert_eq!(implement["summary"], "implemented");
    assert!(implement["duration_ms"].is_u64());
    for file in ["prompt", "context", "stdout", "stderr", "result"] {
        let path = implement["files"][file].as_str().unwrap_or_default();
        assert!(Path::new(path).is_file(), "{file}: {implement}");
    }
    assert_eq!(step("review")["runs"][0]["model"], "haiku");
    let gate_runs = step("checks")["runs"].clone();
    assert_eq!(gate_runs[0]["outcome"], "gate_failed");
    assert_eq!(gate_runs[1]["outcome"], "gate_passed");
    assert!(gate_runs[0]["commands"][0]["files"]["stdout"].is_string());
    let (code, text) = ctl(daemon, &["show", id, "--runs"]).await;
    assert_eq!(code, 0);
    assert!(
        text.contains("model sonnet") && text.contains("prompt ") && text.contains("context "),
        "{text}"
    );
    assert!(text.contains("$ sh -c 'test -f fixed.txt'"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_approval_starts_a_fix_with_the_reason_then_asks_again() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "impl.txt" = "impl\n" }, summary = "implemented" }]

[[rule]]
role = "fix"
responses = [{ write = { "renamed.txt" = "renamed\n" }, summary = "renamed the flag" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    let id = daemon.submit(gated("Needs a person", "true")).await;
    let approve = format!("{id}.approve");
    daemon
        .wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == approve.as_str()
        })
        .await;
    let reason = "Rename the flag to --fast before this ships";
    let (code, _) = ctl(&daemon, &["reject", &id, "--reason", reason]).await;
    assert_eq!(code, 0);
    let fix = daemon
        .wait_for("the fix for the rejection", |e| {
            e["type"] == "fix.created" && e["fixes"] == approve.as_str()
        })
        .await;
    let fix_step = fix["step"]["metadata"]["catalyst"]["step"]
        .as_str()
        .expect("the fix's step name")
        .to_owned();
    let after = fix["seq"].as_u64().unwrap_or_default();
    daemon
        .wait_for("the approval to wait again", |e| {
            e["type"] == "gate.waiting"
                && e["step"] == approve.as_str()
                && e["seq"].as_u64() > Some(after)
        })
        .await;
    let context = std::fs::read_to_string(daemon.run_dir(&id, &fix_step, 1).join("context.md"))
        .expect("the fix's context");
    assert!(context.contains(reason), "{context}");
    let comments = daemon.comments(&id).await;
    assert!(
        comments
            .iter()
            .any(|c| c == &format!("[rejected] {reason}")),
        "{comments:?}"
    );
    let shown = daemon.show(&id).await;
    let ids: BTreeSet<String> = shown["bead"]["comments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["id"].to_string())
        .collect();
    assert_eq!(ids.len(), comments.len(), "comment ids are unique");
    // The fixed code passed the checks and the review again before the person was asked
    // again: a rejection's fix once went straight back to the approval, unchecked.
    let checks = format!("{id}.checks");
    let events = daemon.events().await;
    let checked_again = events.iter().any(|e| {
        e["type"] == "gate.passed"
            && e["step"] == checks.as_str()
            && e["seq"].as_u64() > Some(after)
    });
    assert!(checked_again, "the checks ran again after the fix");
    let (code, _) = ctl(&daemon, &["approve", &id]).await;
    assert_eq!(code, 0);
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "review", "fix", "review"]
    );
    assert_eq!(
        daemon.file_on_main("renamed.txt").as_deref(),
        Some("renamed\n")
    );
}

const SLOW_CHECKS: &str = r#"
formula = "slowchecks"
version = 1
type = "workflow"

[[steps]]
id = "implement"
title = "Implement: {{title}}"
role = "implement"

[[steps]]
id = "checks"
title = "Checks: {{title}}"
role = "gate"
run = ["test -f fixed.txt || sleep 30"]
needs = ["implement"]
timeout = 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_commands_that_outlive_their_timeout_fail_the_gate() {
    let daemon = TestDaemon::start(GATED, "").await;
    daemon.add_formula("slowchecks", SLOW_CHECKS).await;
    let id = daemon
        .submit(BeadInput {
            formula: Some("slowchecks".into()),
            ..bead("Slow checks")
        })
        .await;
    let checks = format!("{id}.checks");
    let failed = daemon
        .wait_for("the checks to time out", |e| {
            e["type"] == "gate.failed" && e["step"] == checks.as_str()
        })
        .await;
    assert!(
        failed["output"]
            .as_str()
            .is_some_and(|o| o.contains("timed out after 1s")),
        "{failed}"
    );
    daemon.wait_status(&id, "closed").await;
    let context = std::fs::read_to_string(daemon.run_dir(&id, "fix-1", 1).join("context.md"))
        .expect("the fix's context");
    assert!(context.contains("timed out"), "{context}");
    assert_eq!(daemon.roles_of(&id), ["implement", "fix"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_submit_var_gives_the_formula_its_variables_without_an_inbox_file() {
    let daemon = TestDaemon::start(GATED, "").await;
    for (var, why) in [
        ("test_command", "expected KEY=VALUE"),
        ("=make test", "name is empty"),
    ] {
        let (code, _, err) = daemon
            .ctl(&["submit", "x", "--formula", "gated", "--var", var], "")
            .await;
        assert_eq!(code, 2, "a command line that is wrong: {err}");
        assert!(err.contains(why), "{err}");
    }
    let twice = ["--var", "test_command=true", "--var", "test_command=false"];
    let (code, _, err) = daemon
        .ctl(
            &[&["submit", "x", "--formula", "gated"][..], &twice].concat(),
            "",
        )
        .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`--var test_command=…` is given twice"),
        "{err}"
    );

    // The formula checks the value when the bead is poured, as for an inbox file's.
    let shell = "test_command=true; rm -rf .";
    let (code, _, err) = daemon
        .ctl(
            &[
                "submit",
                "Bad",
                "--id",
                "cat-bad",
                "--formula",
                "gated",
                "--var",
                shell,
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let blocked = daemon.wait_status("cat-bad", "blocked").await;
    assert!(
        blocked["reason"]
            .as_str()
            .is_some_and(|r| r.contains("does not match the pattern")),
        "{blocked}"
    );

    let (code, _, err) = daemon
        .ctl(
            &[
                "submit",
                "Checked work",
                "--id",
                "cat-var",
                "--formula",
                "gated",
                "--var",
                "test_command=test -f fixed.txt",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let shown = daemon
        .call(Method::Show(ShowParams {
            id: "cat-var".into(),
            runs: false,
        }))
        .await;
    assert_eq!(
        shown["bead"]["metadata"]["formula_vars"],
        json!({"test_command": "test -f fixed.txt"})
    );
    let failed = daemon
        .wait_for("the checks to run the submitted command", |e| {
            e["type"] == "gate.failed" && e["step"] == "cat-var.checks"
        })
        .await;
    assert!(
        failed["output"]
            .as_str()
            .is_some_and(|o| o.contains("$ sh -c 'test -f fixed.txt'")),
        "{failed}"
    );
}

/// A failing gate was hard to read: `ctl logs` of the gate step printed no output, and the
/// reason the bead blocked with did not say what failed. Both show the command's output now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_gate_shows_its_output_in_the_logs_and_the_block_reason() {
    let daemon = TestDaemon::start("", "").await;
    daemon
        .add_formula(
            "strict",
            "formula = \"strict\"\n[[steps]]\nid = \"checks\"\ntitle = \"Checks\"\nrole = \"gate\"\nmax_fix_iterations = 1\nrun = [\"echo checking the build && echo 'boom: test x failed' >&2 && exit 3\"]\n",
        )
        .await;
    let id = daemon
        .submit(BeadInput {
            formula: Some("strict".into()),
            ..bead("Strict")
        })
        .await;
    let blocked = daemon.wait_status(&id, "blocked").await;
    let reason = blocked["reason"].as_str().expect("a reason");
    assert!(reason.contains("boom: test x failed"), "{reason}");
    let step = format!("{id}.checks");
    let (code, out) = ctl(&daemon, &["logs", &step]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("$ echo checking the build"), "{out}");
    assert!(out.contains("checking the build\n"), "{out}");
    assert!(out.contains("exit code 3"), "{out}");
    let (code, err) = ctl(&daemon, &["logs", &step, "--stderr"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("boom: test x failed"), "{err}");
}

/// A gate command that exits 75 says it could not run (a service it needs was down), which
/// is no verdict on the code: the gate runs again after the retry delay, with no fix and no
/// fix iteration spent, and passes once the command can run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_command_that_could_not_run_is_run_again_without_a_fix() {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a folder");
    let marker = outside.path().join("tried");
    let daemon = TestDaemon::start(
        "",
        &format!(
            "gate_writable = [{:?}]\n[router]\nretry_delay_secs = 1\n",
            outside.path()
        ),
    )
    .await;
    daemon
        .add_formula(
            "flaky",
            &format!(
                "formula = \"flaky\"\n[[steps]]\nid = \"checks\"\ntitle = \"Checks\"\nrole = \"gate\"\nmax_fix_iterations = 1\nrun = [\"test -e {m} || {{ touch {m}; echo 'database is down' >&2; exit 75; }}\"]\n",
                m = marker.display()
            ),
        )
        .await;
    let id = daemon
        .submit(BeadInput {
            formula: Some("flaky".into()),
            ..bead("Flaky service")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    let step = format!("{id}.checks");
    let events = daemon.events().await;
    let retries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.retry" && e["step"] == step.as_str())
        .collect();
    assert_eq!(retries.len(), 1, "one retry: {retries:#?}");
    let reason = retries[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("could not run (exit 75)") && reason.contains("database is down"),
        "{reason}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "gate.failed" || e["type"] == "fix.created"),
        "no rejection, no fix"
    );
    assert!(marker.exists(), "the first run left its mark");
}
