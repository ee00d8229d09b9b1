//! Formulas in the shapes Gas Town publishes, run end to end with the stub: a workflow without
//! a merge step is poured with one, so its work lands on `main`; one that says `merge = false`
//! closes with its work left on its branch, and says so; a person's step (`type = "human"`)
//! waits for approval, and a Go-template `if` in a description is rendered.

use catalyst_testkit::{bead_of, TestDaemon};

/// Plain Gas Town steps: no `role` (the generic `task` agent) and no merge step. `{{HEAD}}` is
/// replaced by extra top-level keys.
const NOTE: &str = r#"
formula = "patrol"
description = "Write a note."
{{HEAD}}
[vars]
strict = ""

[[steps]]
id = "note"
title = "Write the note"
description = "{{if .strict}}Be strict.{{else}}Be brief.{{end}}"
"#;

/// A person looks after the note is written.
const LOOK: &str = r#"
[[steps]]
id = "look"
title = "A person looks"
type = "human"
needs = ["note"]
"#;

/// Each task step writes `shape.txt`.
const TASK_WRITES: &str = r#"
[[rule]]
role = "task"
responses = [{ write = { "shape.txt" = "shaped\n" }, summary = "wrote shape.txt" }]
"#;

/// The ids of the steps poured for `id`.
async fn step_ids(daemon: &TestDaemon, id: &str) -> Vec<String> {
    let shown = daemon.show(id).await;
    shown["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_without_a_merge_step_is_merged_onto_main() {
    let daemon = TestDaemon::start(TASK_WRITES, "").await;
    daemon
        .add_formula("patrol", &NOTE.replace("{{HEAD}}", ""))
        .await;
    let id = daemon.submit(bead_of("patrol", "Patrol once")).await;
    let closed = daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.file_on_main("shape.txt").as_deref(),
        Some("shaped\n"),
        "the added merge step landed the work: {closed}"
    );
    assert_eq!(
        step_ids(&daemon, &id).await,
        [format!("{id}.note"), format!("{id}.merge")]
    );
    let roles = daemon.roles_of(&id);
    assert!(
        !roles.iter().any(|r| r == "merge"),
        "no merge agent without a conflict: {roles:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_false_closes_with_the_work_on_the_beads_branch() {
    let daemon = TestDaemon::start(TASK_WRITES, "").await;
    daemon
        .add_formula("patrol", &NOTE.replace("{{HEAD}}", "merge = false"))
        .await;
    let id = daemon.submit(bead_of("patrol", "Patrol, unmerged")).await;
    let closed = daemon.wait_status(&id, "closed").await;
    let reason = closed["reason"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        reason,
        format!("wrote shape.txt (not merged: the work is on branch `catalyst/{id}`)")
    );
    assert_eq!(step_ids(&daemon, &id).await, [format!("{id}.note")]);
    assert_eq!(daemon.file_on_main("shape.txt"), None, "nothing merged");
    assert!(daemon.branch_exists(&id), "the branch stays");
    let shown = daemon.show(&id).await;
    assert_eq!(
        shown["bead"]["close_reason"].as_str(),
        Some(reason.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_step_waits_for_approval_and_the_template_is_rendered() {
    let daemon = TestDaemon::start(TASK_WRITES, "").await;
    let text = format!("{}{LOOK}", NOTE.replace("{{HEAD}}", ""));
    daemon.add_formula("patrol", &text).await;
    let id = daemon.submit(bead_of("patrol", "Patrol, looked at")).await;
    let look = format!("{id}.look");
    daemon
        .wait_for("the person's step to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == look.as_str()
        })
        .await;
    let note = daemon.show(&format!("{id}.note")).await;
    assert_eq!(note["bead"]["description"], "Be brief.", "{note}");
    let (code, _, err) = daemon.ctl(&["approve", &id], "").await;
    assert_eq!(code, 0, "{err}");
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.file_on_main("shape.txt").as_deref(),
        Some("shaped\n")
    );
}

/// A Gas City v2 check runs after its step as a gate. Its script exits 75 the first time (it
/// could not reach what it checks), which costs the check none of its two attempts: it runs
/// again without a fix. Then it fails (exit 1) once, which sends its output to a fix, and
/// passes on the fixed work. Had the 75 counted, the second failure would have blocked the
/// bead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_check_that_could_not_run_costs_no_attempt() {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a folder");
    let marker = outside.path().join("reached");
    let script = format!(
        "#!/bin/sh\nif [ ! -e {m} ]; then touch {m}; echo 'cannot reach the test database' >&2; exit 75; fi\ntest -f fixed.txt || {{ echo 'fixed.txt is missing'; exit 1; }}\n",
        m = marker.display()
    );
    let scenario = format!(
        r#"
[[rule]]
role = "implement"
responses = [{{ write = {{ "verify.sh" = {script:?} }}, shell = ["chmod +x verify.sh"], summary = "implemented, with its check" }}]

[[rule]]
role = "fix"
responses = [{{ write = {{ "fixed.txt" = "fixed\n" }}, summary = "fixed" }}]
"#
    );
    let daemon = TestDaemon::start(
        &scenario,
        &format!(
            "gate_writable = [{:?}]\n[router]\nretry_delay_secs = 1\n",
            outside.path()
        ),
    )
    .await;
    daemon
        .add_formula(
            "checked",
            r#"
formula = "checked"
version = 2
[requires]
formula_compiler = ">=2.0.0"
[[steps]]
id = "implement"
title = "Implement"
role = "implement"
[steps.check]
max_attempts = 2
[steps.check.check]
mode = "exec"
path = "verify.sh"
timeout = "1m"
"#,
        )
        .await;
    let id = daemon.submit(bead_of("checked", "Checked")).await;
    daemon.wait_status(&id, "closed").await;
    let check = format!("{id}.check-implement");
    let events = daemon.events().await;
    let of_check = |kind: &str| {
        events
            .iter()
            .filter(|e| e["type"] == kind && e["step"] == check.as_str())
            .cloned()
            .collect::<Vec<_>>()
    };
    let retries = of_check("step.retry");
    assert_eq!(retries.len(), 1, "the 75 was tried again: {retries:#?}");
    assert!(retries[0]["reason"]
        .as_str()
        .is_some_and(|r| r.contains("exit 75") && r.contains("cannot reach the test database")));
    let failed = of_check("gate.failed");
    assert_eq!(failed.len(), 1, "one real failure: {failed:#?}");
    assert!(failed[0]["output"]
        .as_str()
        .is_some_and(|o| o.contains("fixed.txt is missing")));
    assert_eq!(of_check("gate.passed").len(), 1);
    assert_eq!(daemon.roles_of(&id), ["implement", "fix"]);
    assert_eq!(daemon.file_on_main("fixed.txt").as_deref(), Some("fixed\n"));
}

/// A step's own attempts (Gas City's `[steps.retry] max_attempts`, or `max_attempts`) replace
/// the config's five: an agent that never gives a result block is given up after two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_own_max_attempts_replaces_the_configs() {
    let daemon = TestDaemon::start(
        "[[rule]]\nrole = \"task\"\nresponses = [{ raw = \"no block here\" }]\n",
        "[router]\nretry_delay_secs = 0\nescalation_model = \"\"\n",
    )
    .await;
    daemon
        .add_formula(
            "fetch",
            "formula = \"fetch\"\nversion = 2\nmerge = false\n[[steps]]\nid = \"fetch\"\ntitle = \"Fetch\"\n[steps.retry]\nmax_attempts = 2\n",
        )
        .await;
    let id = daemon.submit(bead_of("fetch", "Fetch")).await;
    let blocked = daemon.wait_status(&id, "blocked").await;
    let reason = blocked["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("gave up after 2 failed attempts"),
        "{reason}"
    );
    let dispatched = daemon
        .events()
        .await
        .iter()
        .filter(|e| e["type"] == "step.dispatched")
        .count();
    assert_eq!(dispatched, 2);
}
