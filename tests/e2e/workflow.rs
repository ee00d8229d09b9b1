//! A bead's way through its formula: the happy path, the fix loop, its limit, retries and
//! escalation, dependencies between beads, and concurrency limits.

use catalyst::protocol::BeadInput;
use catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO;
use catalyst_testkit::{bead, bead_of, most_at_once, TestDaemon, Workspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_runs_three_agents_and_the_daemon_merges() {
    let daemon = TestDaemon::start(IMPLEMENT_WRITES_HELLO, "").await;
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "review"],
        "git merges without a merge agent"
    );
    assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
    let log = daemon.main_log();
    assert!(
        log.iter().any(
            |m| m.starts_with(&format!("{id} implement: wrote hello.txt"))
                && m.contains("Catalyst-Step: implement/1")
        ),
        "the daemon's commit message is on main: {log:?}"
    );
    daemon
        .wait_for("the worktree's removal", |e| {
            e["type"] == "worktree.removed" && e["bead"] == id.as_str()
        })
        .await;
    assert!(
        !daemon.worktree_exists(&id) && !daemon.branch_exists(&id),
        "worktree and branch are gone"
    );
    let shown = daemon.show(&id).await;
    assert_eq!(shown["bead"]["status"], "closed");
    assert!(shown["bead"]["closed_at"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_a_refiner_wrote_reaches_the_implementers_context() {
    let scenario = format!(
        "[[rule]]\nrole = \"refine\"\nresponses = [{{ text = \"Split parse() into lex() and read().\", summary = \"planned\" }}]\n{IMPLEMENT_WRITES_HELLO}"
    );
    let daemon = TestDaemon::start(&scenario, "").await;
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;
    let context = std::fs::read_to_string(daemon.run_dir(&id, "implement", 1).join("context.md"))
        .expect("the implementer's context");
    assert!(
        context.contains("The plan (final message)")
            && context.contains("Split parse() into lex() and read()."),
        "{context}"
    );
}

const REJECT_ONCE: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]

[[rule]]
role = "review"
responses = [
  { verdict = "REJECTED", summary = "no test", instructions = ["add a test for parse() in parse_test.txt"] },
  { verdict = "APPROVED", summary = "good" },
]

[[rule]]
role = "fix"
responses = [{ write = { "parse_test.txt" = "test\n" }, summary = "added the test" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_review_gets_one_fix_then_merges() {
    let daemon = TestDaemon::start(REJECT_ONCE, "").await;
    let id = daemon.submit(bead("Parse things")).await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "review", "fix", "review"]
    );
    let context = std::fs::read_to_string(daemon.run_dir(&id, "fix-1", 1).join("context.md"))
        .expect("fix context");
    assert!(
        context.contains("add a test for parse() in parse_test.txt"),
        "{context}"
    );
    let comments = daemon.comments(&id).await;
    assert!(
        comments
            .iter()
            .any(|c| c.starts_with("[daemon] FIX_ITERATION: 1")),
        "{comments:?}"
    );
    assert_eq!(
        daemon.file_on_main("parse_test.txt").as_deref(),
        Some("test\n")
    );
}

/// stub-claude kept its counts per scenario file, so a second workspace following the same
/// scenario went on from the first one's counts: its review approved at once, with no fix.
/// Counts are per workspace now; a restart of one workspace keeps its counts (the restart
/// tests below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workspaces_following_one_scenario_each_start_at_its_first_response() {
    let mut first = TestDaemon::start(REJECT_ONCE, "").await;
    let id = first.submit(bead("Parse things")).await;
    first.wait_status(&id, "closed").await;
    first.stop().await;
    let second = Workspace::builder()
        .scenario_file(&first.scenario)
        .build()
        .start()
        .await;
    let again = second.submit(bead("Parse things again")).await;
    second.wait_status(&again, "closed").await;
    let fix_loop = ["refine", "implement", "review", "fix", "review"];
    assert_eq!(first.roles_of(&id), fix_loop);
    assert_eq!(
        second.roles_of(&again),
        fix_loop,
        "the second run rejects once too"
    );
}

const ALWAYS_REJECT: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]

[[rule]]
role = "review"
responses = [{ verdict = "REJECTED", summary = "still wrong", instructions = ["do it differently"] }]

[[rule]]
role = "fix"
responses = [{ append = { "hello.txt" = "again\n" }, summary = "tried again" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_third_rejection_blocks_and_keeps_the_branch() {
    let daemon = TestDaemon::start(ALWAYS_REJECT, "").await;
    let id = daemon.submit(bead("Never good enough")).await;
    daemon.wait_status(&id, "blocked").await;
    assert_eq!(
        daemon.roles_of(&id),
        [
            "refine",
            "implement",
            "review",
            "fix",
            "review",
            "fix",
            "review"
        ]
    );
    let comments = daemon.comments(&id).await;
    assert!(
        comments.iter().any(|c| c.starts_with("[daemon] BLOCKED")
            && c.contains("rejected")
            && c.contains("3 times")),
        "a comment says why: {comments:?}"
    );
    assert!(
        daemon.branch_exists(&id) && daemon.worktree_exists(&id),
        "kept for a person to look at"
    );
    assert_eq!(daemon.file_on_main("hello.txt"), None, "nothing merged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_output_is_retried_then_escalated_then_blocked() {
    // Each answer differs: the same answer again would not be escalated.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { raw = "I did it, trust me." }, { raw = "Really, I did it." }, { raw = "It is done." },
  { raw = "Done, honestly." }, { raw = "All finished." }, { raw = "Finished, I promise." },
]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    let id = daemon.submit(bead("Unparseable")).await;
    daemon.wait_status(&id, "blocked").await;
    let models: Vec<String> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.role() == "implement")
        .map(|i| i.model.unwrap_or_default())
        .collect();
    assert_eq!(
        models,
        ["sonnet", "sonnet", "sonnet", "sonnet", "sonnet", "opus"]
    );
    let retries = daemon
        .comments(&id)
        .await
        .into_iter()
        .filter(|c| c.starts_with("[daemon] RETRY"))
        .count();
    assert_eq!(retries, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalated_attempt_that_succeeds_completes_the_bead() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { raw = "no block 1" }, { raw = "no block 2" }, { raw = "no block 3" }, { raw = "no block 4" }, { raw = "no block 5" },
  { write = { "done.txt" = "done\n" }, summary = "finally" },
]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    let id = daemon.submit(bead("Eventually")).await;
    daemon.wait_status(&id, "closed").await;
    let implement: Vec<_> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.role() == "implement")
        .collect();
    assert_eq!(implement.len(), 6);
    assert_eq!(implement[5].model.as_deref(), Some("opus"));
    assert_eq!(daemon.file_on_main("done.txt").as_deref(), Some("done\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_after_another_starts_after_its_merge_and_contains_its_change() {
    let scenario = r#"
[[rule]]
role = "implement"
bead = "cat-a"
responses = [{ write = { "a.txt" = "from a\n" }, summary = "wrote a" }]

[[rule]]
role = "implement"
bead = "cat-b"
responses = [{ write = { "b.txt" = "from b\n" }, summary = "wrote b" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    daemon
        .submit(BeadInput {
            id: Some("cat-a".into()),
            ..bead("A")
        })
        .await;
    daemon
        .submit(BeadInput {
            id: Some("cat-b".into()),
            after: vec!["cat-a".into()],
            ..bead("B")
        })
        .await;
    daemon.wait_status("cat-b", "closed").await;
    let runs = daemon.invocations();
    let a_last_end = runs
        .iter()
        .filter(|i| i.bead.as_deref() == Some("cat-a"))
        .filter_map(|i| i.ended_ms)
        .max()
        .expect("a's agents ran");
    let b_first = runs
        .iter()
        .find(|i| i.bead.as_deref() == Some("cat-b"))
        .expect("b ran");
    assert!(
        b_first.started_ms >= a_last_end,
        "b started before a was done"
    );
    // b's branch was cut from main after a merged: its fast-forward kept a's file.
    assert_eq!(daemon.file_on_main("a.txt").as_deref(), Some("from a\n"));
    assert_eq!(daemon.file_on_main("b.txt").as_deref(), Some("from b\n"));
    let events = daemon.events().await;
    let merged_a = events
        .iter()
        .position(|e| e["type"] == "merge.completed" && e["bead"] == "cat-a");
    let poured_b = events
        .iter()
        .position(|e| e["type"] == "molecule.poured" && e["bead"] == "cat-b");
    assert!(merged_a < poured_b, "b is poured only after a merged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_beads_never_run_more_than_two_agents_at_once() {
    // Each bead writes its own file; other beads' merges move `main` meanwhile, and the daemon
    // merges `main` into each branch itself, since git can.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 150, tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > $CATALYST_BEAD.txt" } }], summary = "wrote a file" }]
[[rule]]
role = "refine"
responses = [{ sleep_ms = 50, summary = "planned" }]
[[rule]]
role = "merge"
responses = [{ summary = "a merge agent ran though git could merge" }]
"#;
    let daemon = TestDaemon::start(scenario, "max_agents = 2").await;
    let mut ids = Vec::new();
    for n in 0..8 {
        ids.push(daemon.submit(bead(&format!("bead {n}"))).await);
    }
    for id in &ids {
        daemon.wait_status(id, "closed").await;
    }
    let peak = most_at_once(&daemon.invocations());
    assert!(peak <= 2, "{peak} agents alive at once");
    // No merge agent runs: every bead's own files merge cleanly.
    for id in &ids {
        let roles = daemon.roles_of(id);
        assert_eq!(roles, ["refine", "implement", "review"], "{id}: {roles:?}");
    }
    let merges = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "merge.completed")
        .count();
    assert_eq!(merges, 8);
    for id in &ids {
        assert_eq!(
            daemon.file_on_main(&format!("{id}.txt")),
            Some(format!("{id}\n")),
            "{id} is on main"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_stopped_by_shutdown_runs_again_after_restart_without_counting() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { wait_for = "/nonexistent/never", summary = "never" },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]
"#;
    let mut daemon = TestDaemon::start(scenario, "shutdown_grace_secs = 1").await;
    let id = daemon.submit(bead("Interrupted")).await;
    daemon
        .wait_for("implement to start", |e| {
            e["type"] == "step.dispatched" && e["step"] == format!("{id}.implement")
        })
        .await;
    daemon.stop().await;
    daemon.restart();
    daemon.wait_status(&id, "closed").await;
    let events = daemon.events().await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "step.interrupted" && e["step"] == format!("{id}.implement")),
        "the stopped attempt is recorded as interrupted"
    );
    assert!(events.iter().any(|e| e["type"] == "daemon.stopping"));
    let retries = daemon
        .comments(&id)
        .await
        .into_iter()
        .filter(|c| c.contains("RETRY"))
        .count();
    assert_eq!(retries, 0, "an interruption is not a failed attempt");
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "implement", "review"]
    );
    assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_another_beads_merge_calls_the_merge_agent_once() {
    // Both beads write the same file; whichever merges second conflicts. Its merge agent merges
    // `main` keeping the bead's side, as a real one would after resolving.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 100, tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > shared.txt" } }], summary = "wrote shared.txt" }]
[[rule]]
role = "merge"
responses = [{ tools = [{ name = "Bash", input = { command = "git -c user.name=stub -c user.email=stub@localhost merge -X ours --no-edit main" } }], summary = "merged main, keeping ours" }]
"#;
    let daemon = TestDaemon::start(scenario, "max_agents = 2").await;
    let a = daemon.submit(bead("first")).await;
    let b = daemon.submit(bead("second")).await;
    daemon.wait_status(&a, "closed").await;
    daemon.wait_status(&b, "closed").await;
    let events = daemon.events().await;
    let conflicts: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "merge.conflict")
        .collect();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    let conflict = conflicts[0];
    let second = conflict["bead"].as_str().expect("a bead").to_owned();
    let first = if second == a { &b } else { &a };
    assert_eq!(
        conflict["files"],
        serde_json::json!(["shared.txt"]),
        "{conflict}"
    );
    assert_eq!(conflict["step"], format!("{second}.merge"), "{conflict}");
    assert_eq!(daemon.roles_of(first), ["refine", "implement", "review"]);
    assert_eq!(
        daemon.roles_of(&second),
        ["refine", "implement", "review", "merge"],
        "the merge agent ran once, for the conflict"
    );
    assert_eq!(
        daemon.file_on_main("shared.txt"),
        Some(format!("{second}\n")),
        "the merge agent's resolution is on main"
    );
    let retries = events
        .iter()
        .filter(|e| e["type"] == "step.retry" && e["counted"] == true)
        .count();
    assert_eq!(
        retries, 0,
        "handing the merge to the agent spends no attempt"
    );
    let context = std::fs::read_to_string(daemon.run_dir(&second, "merge", 1).join("context.md"))
        .expect("the merge agent's context");
    assert!(
        context.contains(&format!(
            "## The change (`git diff main...catalyst/{second}`)"
        )),
        "the merge agent gets the change: {context}"
    );
    let comments = daemon.comments(&second).await;
    assert!(
        comments
            .iter()
            .any(|c| c.contains("MERGE CONFLICT") && c.contains("shared.txt")),
        "the merge agent's context says why it runs: {comments:?}"
    );
}

/// A formula whose merge step asks for its checks on the merged code.
const RECHECKED: &str = r#"
formula = "rechecked"

[[steps]]
id = "implement"
title = "Implement: {{title}}"
role = "implement"

[[steps]]
id = "checks"
title = "Checks: {{title}}"
role = "gate"
needs = ["implement"]
run = ["test -f README.md"]

[[steps]]
id = "merge"
title = "Merge: {{title}}"
role = "merge"
needs = ["checks"]
recheck = ["checks"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_step_with_recheck_runs_its_checks_again_on_the_merged_code() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 150, tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > $CATALYST_BEAD.txt" } }], summary = "wrote a file" }]
"#;
    let daemon = TestDaemon::start(scenario, "max_agents = 2").await;
    daemon.add_formula("rechecked", RECHECKED).await;
    let a = daemon.submit(bead_of("rechecked", "first")).await;
    let b = daemon.submit(bead_of("rechecked", "second")).await;
    daemon.wait_status(&a, "closed").await;
    daemon.wait_status(&b, "closed").await;
    let events = daemon.events().await;
    let passes = |id: &str| {
        events
            .iter()
            .filter(|e| e["type"] == "gate.passed" && e["step"] == format!("{id}.checks"))
            .count()
    };
    // Both branched from the same `main`; whichever merged second had `main` merged in by
    // the daemon, and its checks ran again on that before `main` moved.
    let (mut once, mut twice) = (Vec::new(), Vec::new());
    for id in [&a, &b] {
        match passes(id) {
            1 => once.push(id.clone()),
            2 => twice.push(id.clone()),
            n => panic!("{id}: checks passed {n} times"),
        }
    }
    assert_eq!((once.len(), twice.len()), (1, 1), "{once:?} {twice:?}");
    let comments = daemon.comments(&twice[0]).await;
    assert!(
        comments.iter().any(
            |c| c.starts_with("[daemon] MERGED `main` into the branch") && c.contains("checks")
        ),
        "{comments:?}"
    );
    for id in [&a, &b] {
        assert_eq!(
            daemon.roles_of(id),
            ["implement"],
            "no merge agent for {id}"
        );
        assert_eq!(
            daemon.file_on_main(&format!("{id}.txt")),
            Some(format!("{id}\n"))
        );
    }
}

/// A step whose formula names its `output`: the agent is told in its context, and a `DONE`
/// that leaves no such file is retried like a malformed result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_output_is_in_its_context_and_a_done_without_it_is_not_believed() {
    let formula = r#"
formula = "designed"

[[steps]]
id = "design"
title = "Design: {{title}}"
output = "design.md"

[[steps]]
id = "merge"
title = "Merge: {{title}}"
role = "merge"
needs = ["design"]
"#;
    let scenario = r#"
[[rule]]
role = "task"
responses = [
  { write = { "notes.txt" = "thinking\n" }, summary = "designed, in my head" },
  { write = { "design.md" = "the design\n" }, summary = "wrote design.md" },
]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("designed", formula).await;
    let id = daemon.submit(bead_of("designed", "Design it")).await;
    daemon.wait_status(&id, "closed").await;
    let context = std::fs::read_to_string(daemon.run_dir(&id, "design", 1).join("context.md"))
        .expect("context.md");
    assert!(
        context.contains("- Output: write it to `design.md` in the worktree"),
        "{context}"
    );
    let events = daemon.events().await;
    let results: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "step.result" && e["step"] == format!("{id}.design"))
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["outcome"], "malformed", "{}", results[0]);
    assert!(
        results[0]["decision"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("the step's output `design.md` is not in the worktree")),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["outcome"], "finished", "{}", results[1]);
    assert_eq!(
        daemon.file_on_main("design.md").as_deref(),
        Some("the design\n")
    );
}

/// A merge agent that says DONE without resolving the conflict has failed an attempt, and the
/// reason names what still conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_agent_that_leaves_the_conflict_fails_an_attempt_naming_the_files() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 100, tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > shared.txt" } }], summary = "wrote shared.txt" }]
[[rule]]
role = "merge"
responses = [{ summary = "merged, honestly" }]
"#;
    let daemon = TestDaemon::start(scenario, "max_agents = 2").await;
    daemon.submit(bead("first")).await;
    daemon.submit(bead("second")).await;
    let retry = daemon
        .wait_for("the merge step's counted retry", |e| {
            e["type"] == "step.retry"
                && e["counted"] == true
                && e["step"].as_str().is_some_and(|s| s.ends_with(".merge"))
        })
        .await;
    let reason = retry["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("the merge agent finished, but `main` (")
            && reason.contains("still conflicts with the bead's branch")
            && reason.ends_with("in shared.txt"),
        "{retry}"
    );
}

/// `git` run in the workspace's repository; its output.
fn git(ws: &Workspace, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&ws.repo)
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_keeps_its_first_parents_and_the_repository_user_authors() {
    let ws = Workspace::new(IMPLEMENT_WRITES_HELLO, "");
    git(&ws, &["config", "user.name", "Ada Lovelace"]);
    git(&ws, &["config", "user.email", "ada@example.com"]);
    let daemon = ws.start().await;
    let ws = daemon.workspace();
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;

    let first_parents = git(
        ws,
        &["log", "--first-parent", "--format=%s|%an|%cn", "main"],
    );
    let newest = first_parents.lines().next().unwrap_or_default();
    assert_eq!(
        newest,
        format!("Merge catalyst/{id}: Say hello|Ada Lovelace|catalyst"),
        "{first_parents}"
    );
    assert!(
        !first_parents.contains(&format!("{id} implement:")),
        "the bead's own commits are off the first-parent line: {first_parents}"
    );
    let all = git(ws, &["log", "--format=%s|%an|%cn", "main"]);
    assert!(
        all.lines().any(
            |l| l.starts_with(&format!("{id} implement: wrote hello.txt"))
                && l.ends_with("|Ada Lovelace|catalyst")
        ),
        "the step's commit is the repository user's, committed by catalyst: {all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squash_strategy_lands_one_commit_named_after_the_bead() {
    let daemon = TestDaemon::start(
        IMPLEMENT_WRITES_HELLO,
        "[merge]\nstrategy = \"squash\"\nauthor = \"Grace Hopper <grace@example.com>\"\n",
    )
    .await;
    let ws = daemon.workspace();
    let before = git(ws, &["rev-parse", "main"]);
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;

    let parents = git(ws, &["log", "-1", "--format=%P", "main"]);
    assert_eq!(parents.trim(), before.trim(), "one commit on the old tip");
    let message = git(ws, &["log", "-1", "--format=%B%n--%n%an|%cn", "main"]);
    assert!(message.starts_with("Say hello\n"), "{message}");
    assert!(
        message.contains(&format!("Catalyst-Bead: {id}")),
        "{message}"
    );
    assert!(message.ends_with("Grace Hopper|catalyst\n"), "{message}");
    assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
    daemon
        .wait_for("the worktree's removal", |e| {
            e["type"] == "worktree.removed" && e["bead"] == id.as_str()
        })
        .await;
    assert!(!daemon.branch_exists(&id), "the squashed branch is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_back_off_and_the_same_answer_is_not_escalated() {
    // A DONE that changes nothing, the same every time: no model would answer differently.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ summary = "nothing to change" }]
"#;
    let daemon = TestDaemon::start(
        scenario,
        "[router]\nmax_attempts = 3\nretry_delay_secs = 1\n",
    )
    .await;
    let id = daemon.submit(bead("Already done")).await;
    daemon.wait_status(&id, "blocked").await;
    let implement: Vec<_> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.role() == "implement")
        .collect();
    let models: Vec<_> = implement.iter().map(|i| i.model.clone()).collect();
    assert_eq!(
        models,
        [
            Some("sonnet".into()),
            Some("sonnet".into()),
            Some("sonnet".into())
        ],
        "no attempt with the stronger model"
    );
    // The second attempt waited a second after the first ended, the third two more.
    for (n, wait) in [(1, 1000), (2, 2000)] {
        let ended = implement[n - 1].ended_ms.expect("ended");
        assert!(
            implement[n].started_ms >= ended + wait,
            "attempt {} started {} ms after the one before ended",
            n + 1,
            implement[n].started_ms - ended
        );
    }
    let comments = daemon.comments(&id).await;
    assert!(
        comments
            .iter()
            .any(|c| c.starts_with("[daemon] RETRY implement attempt 2/3 in 1s")),
        "{comments:?}"
    );
    let blocked = comments
        .iter()
        .find(|c| c.starts_with("[daemon] BLOCKED:"))
        .expect("a comment says why the bead blocked");
    assert!(
        blocked.contains("the same answer") && blocked.contains("`opus` was not tried"),
        "{blocked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_says_what_a_fix_was_asked_and_counts_only_counted_attempts() {
    // The implementer first hits a usage limit (no attempt spent), then works.
    let scenario = REJECT_ONCE.replace(
        r#"responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]"#,
        r#"responses = [{ usage_limit = true }, { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]"#,
    );
    let daemon = TestDaemon::start(&scenario, "pause_secs = 1\n").await;
    let id = daemon.submit(bead("Parse things")).await;
    daemon.wait_status(&id, "closed").await;
    let (code, text, err) = daemon.ctl(&["show", &id], "").await;
    assert_eq!(code, 0, "{err}");
    let implement = text
        .lines()
        .find(|l| l.starts_with(&format!("{id}.implement ")))
        .expect("the implement row");
    assert!(implement.contains(" 1 (+1 not counted) "), "{text}");
    assert!(
        text.contains("to fix (review):\n      - add a test for parse() in parse_test.txt"),
        "{text}"
    );
    let (_, json, _) = daemon.ctl(&["show", &id, "--json"], "").await;
    let json: serde_json::Value = serde_json::from_str(&json).expect("show JSON");
    let steps = json["steps"].as_array().expect("steps");
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("{name} in {json}"))
    };
    assert_eq!(step("implement")["attempts"], 2);
    assert_eq!(step("implement")["uncounted"], 1);
    assert_eq!(
        step("fix-1")["instructions"],
        "- add a test for parse() in parse_test.txt"
    );
}

/// At the fix limit the last rejection makes no fix step, so `ctl show` had nowhere to print
/// that review's INSTRUCTIONS: the bead blocked with its summary only. The block reason now
/// carries them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_gives_the_instructions_of_the_rejection_that_reached_the_fix_limit() {
    let daemon = TestDaemon::start(ALWAYS_REJECT, "").await;
    let id = daemon.submit(bead("Parse things")).await;
    daemon.wait_status(&id, "blocked").await;
    let (code, text, err) = daemon.ctl(&["show", &id], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(
            "the review rejected the work 3 times (the limit is 3); last: still wrong\n    \
             - do it differently"
        ),
        "{text}"
    );
}
