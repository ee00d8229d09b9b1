//! Choosing responses: rule matching, sequences counted across processes, the log.

use std::collections::BTreeSet;

use crate::fixture::{Stub, STREAM};

const REVIEW_TWICE: &str = r#"
[[rule]]
role = "review"
responses = [
  { verdict = "REJECTED", summary = "needs a test", instructions = ["add a test for parse()"] },
  { verdict = "APPROVED", summary = "looks good" },
]
"#;

#[test]
fn responses_are_used_in_order_and_the_last_one_repeats() {
    let stub = Stub::new(REVIEW_TWICE);
    let verdicts: Vec<String> = (0..3)
        .map(|_| {
            let run = stub.run("review", STREAM);
            assert_eq!(run.code(), Some(0), "{}", run.stderr);
            run.summary()
        })
        .collect();
    assert_eq!(verdicts, ["needs a test", "looks good", "looks good"]);
    let first = stub.run("review", STREAM).message();
    assert!(first.contains("VERDICT: APPROVED"));
    let log = stub.invocations();
    let indexes: Vec<_> = log.iter().map(|i| (i.rule, i.response)).collect();
    assert_eq!(
        indexes,
        [
            (Some(0), Some(0)),
            (Some(0), Some(1)),
            (Some(0), Some(1)),
            (Some(0), Some(1))
        ]
    );
}

#[test]
fn the_rejection_carries_its_instructions() {
    let stub = Stub::new(REVIEW_TWICE);
    let message = stub.run("review", STREAM).message();
    assert!(message.ends_with(
        "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: REJECTED\nSUMMARY: needs a test\n\
         INSTRUCTIONS:\n- add a test for parse()\n---END-RESULT---"
    ));
}

#[test]
fn eight_parallel_invocations_take_eight_distinct_responses() {
    let responses: Vec<String> = (0..8)
        .map(|i| format!("{{ summary = \"r{i}\" }}"))
        .collect();
    let stub = Stub::new(&format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{}]\n",
        responses.join(", ")
    ));
    let children: Vec<_> = (0..8)
        .map(|_| stub.spawn(&mut stub.command("implement", STREAM), "go"))
        .collect();
    let summaries: BTreeSet<String> = children
        .into_iter()
        .map(|child| {
            let run = crate::fixture::Run::from(child.wait_with_output().expect("wait"));
            assert_eq!(run.code(), Some(0), "{}", run.stderr);
            run.summary()
        })
        .collect();
    let expected: BTreeSet<String> = (0..8).map(|i| format!("r{i}")).collect();
    assert_eq!(summaries, expected);
    let mut taken: Vec<_> = stub
        .invocations()
        .iter()
        .filter_map(|i| i.response)
        .collect();
    taken.sort_unstable();
    assert_eq!(taken, (0..8).collect::<Vec<_>>());
}

#[test]
fn per_bead_rules_give_each_bead_the_whole_sequence() {
    let stub = Stub::new(
        r#"
        [[rule]]
        role = "review"
        per_bead = true
        responses = [{ verdict = "REJECTED", summary = "no" }, { summary = "yes" }]
        "#,
    );
    let run_for = |bead: &str| {
        let mut cmd = stub.command("review", STREAM);
        cmd.env("CATALYST_BEAD", bead)
            .env("CATALYST_STEP", format!("{bead}.review"));
        stub.run_cmd(cmd, "review").summary()
    };
    assert_eq!(run_for("cat-1"), "no");
    assert_eq!(run_for("cat-2"), "no");
    assert_eq!(run_for("cat-1"), "yes");
    assert_eq!(run_for("cat-2"), "yes");
}

#[test]
fn the_first_matching_rule_answers_by_step_bead_or_model() {
    let stub = Stub::new(
        r#"
        [[rule]]
        step = "cat-1.implement"
        model = "opus"
        responses = [{ summary = "full step id on opus" }]
        [[rule]]
        step = "implement"
        responses = [{ summary = "short step id" }]
        [[rule]]
        bead = "cat-*"
        responses = [{ summary = "any cat bead" }]
        "#,
    );
    let opus = ["-p", "--output-format", "json", "--model", "opus"];
    let sonnet = ["-p", "--output-format", "json", "--model", "sonnet"];
    assert_eq!(
        stub.run("implement", &opus).summary(),
        "full step id on opus"
    );
    assert_eq!(stub.run("implement", &sonnet).summary(), "short step id");
    assert_eq!(stub.run("refine", &sonnet).summary(), "any cat bead");
    // Without catalyst's environment no rule matches: a valid DONE.
    let run = stub.run("", &sonnet);
    assert!(run.message().contains("STATUS: DONE"));
    assert_eq!(stub.invocations().last().and_then(|i| i.rule), None);
}

#[test]
fn without_a_scenario_a_review_is_approved() {
    let stub = Stub::without_scenario();
    let review = stub.run("review", STREAM).message();
    assert!(review.contains("STATUS: DONE\nVERDICT: APPROVED\n"));
    let implement = stub.run("implement", STREAM).message();
    assert!(implement.contains("STATUS: DONE\n") && !implement.contains("VERDICT"));
}

#[test]
fn a_broken_scenario_fails_loudly_and_is_logged() {
    let cases = [
        (
            "[[rule]]\nresponses = [{ sumary = \"typo\" }]\n",
            "cannot parse the scenario",
        ),
        (
            "[[rule]]\nresponses = [{ write = { \"../out.txt\" = \"x\" } }]\n",
            "leaves the worktree",
        ),
        (
            "[[rule]]\nresponses = [{ write = { \"/tmp/out.txt\" = \"x\" } }]\n",
            "relative",
        ),
        (
            "[[rule]]\nresponses = [{ signal = \"SIGNOPE\" }]\n",
            "unknown signal",
        ),
        ("[[rule]]\nresponses = []\n", "no responses"),
    ];
    for (scenario, expected) in cases {
        let stub = Stub::new(scenario);
        let run = stub.run("implement", STREAM);
        assert_eq!(run.code(), Some(1), "{scenario}");
        assert!(run.stderr.contains(expected), "{scenario}: {}", run.stderr);
        let log = stub.invocations();
        assert_eq!(log.len(), 1);
        assert!(log[0].errors[0].contains(expected));
        assert_eq!(log[0].exit_code(), Some(1));
    }
}

#[test]
fn the_log_records_who_ran_with_what() {
    let stub = Stub::new(REVIEW_TWICE);
    let mut args = STREAM.to_vec();
    args.extend(["--disallowedTools", "Write", "Edit"]);
    stub.run("review", &args);
    stub.run("implement", STREAM);
    let log = stub.invocations();
    assert_eq!(log.len(), 2);
    let review = &log[0];
    assert_eq!(review.role(), "review");
    assert_eq!(review.step.as_deref(), Some("cat-1.review"));
    assert_eq!(review.bead.as_deref(), Some("cat-1"));
    assert_eq!(review.model.as_deref(), Some("sonnet"));
    assert_eq!(review.argv, args);
    assert_eq!(review.prompt, "Do the step.");
    assert_eq!(
        std::path::Path::new(&review.cwd)
            .canonicalize()
            .expect("cwd"),
        stub.work.canonicalize().expect("work")
    );
    let end = review.end.as_ref().expect("ended");
    assert_eq!(end.exit_code, 0);
    assert!(end.result.contains("SUMMARY: needs a test"));
    assert!(review.started_ms <= review.ended_ms.expect("ended"));
    assert!(review.ended_ms <= Some(log[1].started_ms));
    assert_eq!(log[1].rule, None);
    // Every line carries its session id and pid.
    let entries = stub_claude::read_log(&stub.log).expect("read");
    assert_eq!(entries.len(), 4);
    assert!(entries
        .iter()
        .all(|e| e.pid > 0 && !e.session_id.is_empty()));
}

#[test]
fn a_state_file_can_be_named_and_shared() {
    let stub = Stub::new(REVIEW_TWICE);
    let state = stub.dir.path().join("custom.state");
    let run = |stub: &Stub| {
        let mut cmd = stub.command("review", STREAM);
        cmd.env("STUB_CLAUDE_STATE", &state);
        stub.run_cmd(cmd, "x").summary()
    };
    assert_eq!(run(&stub), "needs a test");
    assert_eq!(run(&stub), "looks good");
    assert!(state.exists());
    assert!(!stub.dir.path().join("scenario.toml.state").exists());
}

#[test]
fn counts_are_kept_per_workspace() {
    let stub = Stub::new(REVIEW_TWICE);
    // The context file catalyst gives an agent lies in its workspace's run folders.
    let review_in = |workspace: &str| {
        let run_dir = stub
            .dir
            .path()
            .join(workspace)
            .join(".catalyst/runs/cat-1/cat-1.review/1");
        std::fs::create_dir_all(&run_dir).expect("run folder");
        let mut cmd = stub.command("review", STREAM);
        cmd.env("CATALYST_CONTEXT", run_dir.join("context.md"));
        stub.run_cmd(cmd, "x").summary()
    };
    assert_eq!(review_in("a"), "needs a test");
    assert_eq!(
        review_in("b"),
        "needs a test",
        "another workspace starts over"
    );
    assert_eq!(review_in("a"), "looks good", "the first one goes on");
    assert_eq!(review_in("b"), "looks good");
    // Run by hand, outside any workspace, the stub has counts of its own.
    assert_eq!(stub.run("review", STREAM).summary(), "needs a test");
}

#[test]
fn the_readme_scenario_rejects_once_then_approves() {
    let readme = include_str!("../../../README.md");
    let section = &readme[readme
        .find("## Five minutes with the stub agent")
        .expect("the README's tour with the stub agent")..];
    let scenario = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the scenario block");
    let stub = Stub::new(scenario);
    let steps = ["implement", "review", "fix", "review"].map(|role| stub.run(role, STREAM));
    assert!(steps.iter().all(|s| s.code() == Some(0)));
    assert_eq!(
        steps.map(|s| s.summary()),
        ["added notes.txt", "no test", "added the test", "tested now"]
    );
    assert_eq!(stub.read("notes_test.txt"), "ok\n");
}
