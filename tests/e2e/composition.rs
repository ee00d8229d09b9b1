//! Composed formulas, run end to end with the stub: an aspect applied by a bead's label, an
//! expansion of `implement`, and a convoy whose synthesis waits for its legs. The fixtures are
//! written here in the formats beads and Gas Town publish.

use catalyst::protocol::BeadInput;
use catalyst_testkit::{bead, bead_of, TestDaemon};

/// The short step names of `bead`'s agent runs, in the order they started.
fn steps_run(daemon: &TestDaemon, bead: &str) -> Vec<String> {
    let mut runs: Vec<_> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.bead.as_deref() == Some(bead))
        .collect();
    runs.sort_by_key(|i| i.started_ms);
    runs.into_iter()
        .filter_map(|i| Some(i.step?.rsplit_once('.')?.1.to_owned()))
        .collect()
}

const GUARD: &str = r#"
formula = "guard"
type = "aspect"
description = "Scan before and after the implementation."

[[advice]]
target = "implement"
[advice.around]
[[advice.around.before]]
id = "{step.id}-prescan"
title = "Prescan before {step.id}"
[[advice.around.after]]
id = "{step.id}-postscan"
title = "Postscan after {step.id}"

[[pointcuts]]
glob = "implement"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aspect_from_a_label_runs_its_advice_before_and_after_implement() {
    let daemon = TestDaemon::start(catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO, "").await;
    daemon.add_formula("guard", GUARD).await;
    let id = daemon
        .submit(BeadInput {
            labels: vec!["aspect:guard".into()],
            ..bead("Guarded work")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        steps_run(&daemon, &id),
        [
            "refine",
            "implement-prescan",
            "implement",
            "implement-postscan",
            "review"
        ]
    );
    assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
}

const POLISH: &str = r#"
formula = "polish"
type = "expansion"
description = "Draft, then refine."

[[template]]
id = "{target}.draft"
title = "Draft: {target.title}"
description = "{target.description}"

[[template]]
id = "{target}.refine"
title = "Refine: {target.title}"
needs = ["{target}.draft"]
"#;

const POLISHED: &str = r#"
formula = "polished"

[[steps]]
id = "implement"
title = "Implement {{title}}"
description = "Make it so."
expand = "polish"

[[steps]]
id = "merge"
title = "Merge {{title}}"
role = "merge"
needs = ["implement"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expansion_turns_implement_into_a_draft_then_refine_chain() {
    let scenario = r#"
[[rule]]
step = "implement-draft"
responses = [{ write = { "draft.txt" = "draft\n" }, summary = "drafted" }]
[[rule]]
step = "implement-refine"
responses = [{ write = { "draft.txt" = "refined\n" }, summary = "refined" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("polish", POLISH).await;
    daemon.add_formula("polished", POLISHED).await;
    let id = daemon.submit(bead_of("polished", "Polish it")).await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        steps_run(&daemon, &id),
        ["implement-draft", "implement-refine"]
    );
    let shown = daemon.show(&id).await;
    let titles: Vec<&str> = shown["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["title"].as_str())
        .collect();
    assert!(titles.contains(&"Draft: Implement Polish it"), "{titles:?}");
    assert_eq!(
        daemon.file_on_main("draft.txt").as_deref(),
        Some("refined\n")
    );
}

const SURVEY: &str = r#"
formula = "survey"
type = "convoy"
description = "Three looks at one problem, then one report."

[inputs.problem]
description = "what to look at"
required = true

[prompts]
base = "The problem: {{problem}}."

[output]
directory = "survey"
leg_pattern = "{{leg.id}}.md"
synthesis = "report.md"

[[legs]]
id = "api"
title = "API"
focus = "interfaces"
description = "Look at the API."

[[legs]]
id = "data"
title = "Data"
focus = "storage"
description = "Look at the data."

[[legs]]
id = "ops"
title = "Ops"
focus = "running it"
description = "Look at operations."

[synthesis]
title = "Report"
description = "Put the three together."
depends_on = ["api", "data", "ops"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_convoys_legs_each_run_and_its_synthesis_waits_for_all_of_them() {
    let scenario = r#"
[[rule]]
step = "synthesis"
responses = [{ tools = [{ name = "Bash", input = { command = "cat survey/api.md survey/data.md survey/ops.md > survey/report.md" } }], summary = "reported" }]
[[rule]]
role = "task"
responses = [{ tools = [{ name = "Bash", input = { command = "mkdir -p survey && echo $CATALYST_STEP > survey/${CATALYST_STEP##*.}.md" } }], summary = "looked" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("survey", SURVEY).await;
    let id = daemon
        .submit(BeadInput {
            metadata: Some(
                serde_json::json!({"formula_vars": {"problem": "slow start"}})
                    .as_object()
                    .expect("object")
                    .clone(),
            ),
            ..bead_of("survey", "Survey")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    let runs: Vec<_> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.bead.as_deref() == Some(id.as_str()))
        .collect();
    let legs: Vec<_> = runs
        .iter()
        .filter(|i| !i.step.as_deref().unwrap_or("").ends_with(".synthesis"))
        .collect();
    let synthesis = runs
        .iter()
        .find(|i| i.step.as_deref().is_some_and(|s| s.ends_with(".synthesis")))
        .expect("the synthesis ran");
    // The legs need nothing of each other; one bead runs one agent at a time in its worktree,
    // so they take turns. The synthesis starts after all three ended.
    assert_eq!(legs.len(), 3);
    let last_leg = legs.iter().filter_map(|l| l.ended_ms).max().expect("ended");
    assert!(
        synthesis.started_ms >= last_leg,
        "synthesis waited for every leg"
    );
    assert!(
        legs[0].prompt.contains("The problem: slow start.")
            || std::fs::read_to_string(daemon.run_dir(&id, "api", 1).join("context.md"))
                .is_ok_and(|c| c.contains("The problem: slow start.")),
        "the base prompt reached the legs"
    );
    let report = daemon
        .file_on_main("survey/report.md")
        .expect("the report is merged");
    assert_eq!(report.lines().count(), 3, "{report}");
}
