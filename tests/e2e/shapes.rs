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
