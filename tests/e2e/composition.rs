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

/// The legs of a convoy run side by side, each in a worktree of its own, as many at once as
/// `max_agents` allows: each leg waits (at most 10 s) until two legs have started, which only
/// happens when two run at once. The synthesis starts once all three are merged into the
/// bead's branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_convoys_legs_run_in_parallel_within_max_agents_and_the_synthesis_waits_for_all() {
    let daemon = TestDaemon::start("", "max_agents = 2").await;
    let arrived = daemon.stub_file("arrived");
    std::fs::create_dir_all(&arrived).expect("arrivals folder");
    let barrier = format!(
        "touch {dir}/$CATALYST_STEP; for i in $(seq 500); do [ $(ls {dir} | wc -l) -ge 2 ] && break; sleep 0.02; done; \
         mkdir -p survey && echo $CATALYST_STEP > survey/${{CATALYST_STEP##*.}}.md",
        dir = arrived.display()
    );
    daemon.set_scenario(&format!(
        r#"
[[rule]]
step = "synthesis"
responses = [{{ tools = [{{ name = "Bash", input = {{ command = "cat survey/api.md survey/data.md survey/ops.md > survey/report.md" }} }}], summary = "reported" }}]
[[rule]]
role = "task"
responses = [{{ tools = [{{ name = "Bash", input = {{ command = {barrier:?} }} }}], summary = "looked" }}]
"#
    ));
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
    assert_eq!(legs.len(), 3, "each leg once: {legs:#?}");
    let spans: Vec<(u64, u64)> = legs
        .iter()
        .map(|l| (l.started_ms, l.ended_ms.expect("ended")))
        .collect();
    assert_eq!(
        catalyst_testkit::most_at_once(legs.iter().copied()),
        2,
        "two legs at once, never more: {spans:?}"
    );
    let last_leg = spans.iter().map(|s| s.1).max().expect("ended");
    assert!(
        synthesis.started_ms >= last_leg,
        "synthesis waited for every leg"
    );
    // Legs that run at the same time each have a worktree of their own. A leg that starts
    // once the others are done and merged runs in the bead's worktree, as any lone step.
    let own = |l: &stub_claude::Invocation| l.step.as_deref().is_some_and(|s| l.cwd.ends_with(s));
    let cwds = legs.iter().map(|l| &l.cwd).collect::<Vec<_>>();
    for (i, a) in legs.iter().enumerate() {
        let alone = legs.iter().enumerate().all(|(j, b)| {
            i == j
                || b.ended_ms.expect("ended") <= a.started_ms
                || a.ended_ms.expect("ended") <= b.started_ms
        });
        assert!(
            own(a) || (alone && a.cwd.ends_with(id.as_str())),
            "each leg in a worktree of its own while others run: {cwds:?}"
        );
    }
    assert!(
        legs.iter().filter(|l| own(l)).count() >= 2,
        "the legs that ran at once in worktrees of their own: {cwds:?}"
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

/// Two legs that write the same file, side by side: the first to finish is merged into the
/// bead's branch; the other's attempt fails, naming the file, and its next attempt runs on top
/// of the first one's work, so nothing is lost and the bead merges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legs_whose_work_conflicts_are_merged_one_on_top_of_the_other() {
    let daemon = TestDaemon::start("", "max_agents = 2").await;
    let arrived = daemon.stub_file("arrived");
    std::fs::create_dir_all(&arrived).expect("arrivals folder");
    let leg = format!(
        "touch {dir}/$CATALYST_STEP; for i in $(seq 500); do [ $(ls {dir} | wc -l) -ge 2 ] && break; sleep 0.02; done; \
         mkdir -p survey && (cat survey/shared.md 2>/dev/null; echo $CATALYST_STEP) > survey/shared.md.new && mv survey/shared.md.new survey/shared.md",
        dir = arrived.display()
    );
    daemon.set_scenario(&format!(
        r#"
[[rule]]
role = "task"
responses = [{{ tools = [{{ name = "Bash", input = {{ command = {leg:?} }} }}], summary = "wrote" }}]
"#
    ));
    daemon
        .add_formula(
            "pair",
            "formula = \"pair\"\ntype = \"convoy\"\n[[legs]]\nid = \"left\"\ntitle = \"Left\"\n[[legs]]\nid = \"right\"\ntitle = \"Right\"\n[synthesis]\ntitle = \"Both\"\n",
        )
        .await;
    let id = daemon.submit(bead_of("pair", "Pair")).await;
    daemon.wait_status(&id, "closed").await;
    let events = daemon.events().await;
    let conflicts: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "step.result")
        .filter(|e| {
            e.to_string()
                .contains("conflicts with work of steps that ran beside it, in survey/shared.md")
        })
        .collect();
    assert_eq!(
        conflicts.len(),
        1,
        "one leg's first attempt conflicted: {events:#?}"
    );
    let shared = daemon.file_on_main("survey/shared.md").expect("merged");
    let mut lines: Vec<&str> = shared.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            format!("{id}.left"),
            format!("{id}.right"),
            format!("{id}.synthesis")
        ],
        "both legs' work, the second on top of the first, then the synthesis's"
    );
}
