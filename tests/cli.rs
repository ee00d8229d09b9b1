//! The `catalyst` command line as a user runs it: `formula check`, `result parse` and `man`;
//! and `catalyst-hook`, which agents' hooks run.

use std::path::Path;

use catalyst_testkit::catalyst_hook_bin;
use catalyst_testkit::cli::catalyst_with_stdin;

/// What one run of `catalyst` gave: its exit code (-1 if a signal ended it) and output.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `catalyst args…` in the package's folder with `stdin`.
fn catalyst(args: &[&str], stdin: &str) -> Run {
    let cwd = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, stdout, stderr) = catalyst_with_stdin(cwd, args, stdin);
    Run {
        code,
        stdout,
        stderr,
    }
}

const REVIEW_WITHOUT_VERDICT: &str =
    "Looks fine.\n---STEP-RESULT---\nSTATUS: DONE\nSUMMARY: ok\n---END-RESULT---\n";

#[test]
fn result_parse_names_a_missing_verdict() {
    let out = catalyst(
        &["result", "parse", "--role", "review"],
        REVIEW_WITHOUT_VERDICT,
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("VERDICT"), "{}", out.stderr);
    assert!(out.stdout.is_empty());
    // Without a role, the same block is a valid DONE.
    let out = catalyst(&["result", "parse"], REVIEW_WITHOUT_VERDICT);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn result_parse_returns_the_later_of_two_blocks() {
    let message = "---STEP-RESULT---\nSTATUS: DONE\nVERDICT: REJECTED\nSUMMARY: first\n---END-RESULT---\n\
                   Then I looked again.\n---STEP-RESULT---\nSTATUS: DONE\nVERDICT: APPROVED\nSUMMARY: second\n---END-RESULT---\n";
    let out = catalyst(&["result", "parse", "--role", "review"], message);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("json on stdout");
    assert_eq!(json["summary"], "second");
    assert_eq!(json["verdict"], "approved");
    assert_eq!(json["status"], "done");
}

#[test]
fn result_parse_reads_a_block_in_a_code_fence() {
    let message = "Implemented it.\n\n```\n---STEP-RESULT---\nstatus: done\nsummary: wrote parse()\nINSTRUCTIONS:\n- none needed\n---END-RESULT---\n```\n";
    let out = catalyst(&["result", "parse", "--role", "implement"], message);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(json["summary"], "wrote parse()");
    assert_eq!(json["message"], "Implemented it.");
}

#[test]
fn result_parse_refuses_an_unknown_role() {
    let out = catalyst(&["result", "parse", "--role", "deploy"], "");
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unknown role `deploy`"),
        "{}",
        out.stderr
    );
}

#[test]
fn formula_check_accepts_the_shipped_formulas() {
    let shipped: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("formulas"))
            .expect("formulas/")
            .map(|e| e.expect("entry").path().display().to_string())
            .filter(|p| p.ends_with(".formula.toml"))
            .collect();
    assert!(
        shipped.len() >= 2,
        "feature and gated are shipped: {shipped:?}"
    );
    let args: Vec<&str> = ["formula", "check"]
        .into_iter()
        .chain(shipped.iter().map(String::as_str))
        .collect();
    let out = catalyst(&args, "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write formula");
    path.display().to_string()
}

#[test]
fn formula_check_names_the_steps_of_a_cycle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "cycle.formula.toml",
        r#"
formula = "cycle"
[[steps]]
id = "alpha"
title = "Alpha"
needs = ["gamma"]
[[steps]]
id = "beta"
title = "Beta"
needs = ["alpha"]
[[steps]]
id = "gamma"
title = "Gamma"
needs = ["beta"]
"#,
    );
    let out = catalyst(&["formula", "check", &file], "");
    assert_eq!(out.code, 1);
    let report = format!("{}{}", out.stdout, out.stderr);
    assert!(report.contains("cycle"), "{report}");
    for step in ["alpha", "beta", "gamma"] {
        assert!(report.contains(step), "{step} missing from: {report}");
    }
    assert!(report.contains(&file), "the line names the file: {report}");
}

#[test]
fn formula_check_names_the_step_of_a_loop_without_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "looping.formula.toml",
        r#"
formula = "looping"
[[steps]]
id = "work"
title = "Work"
[steps.loop]
count = 3
"#,
    );
    let out = catalyst(&["formula", "check", &file], "");
    assert_eq!(out.code, 1);
    let report = out.stdout;
    let line = report
        .lines()
        .find(|l| l.contains("loop"))
        .unwrap_or_else(|| panic!("no line names `loop`: {report}"));
    assert!(
        line.starts_with(&format!("{file}: work: ")),
        "`file: step: problem` shape: {line}"
    );
}

#[test]
fn formula_check_reports_a_missing_file_clearly() {
    let out = catalyst(&["formula", "check", "/nonexistent/x.formula.toml"], "");
    assert_ne!(out.code, 0);
    let report = format!("{}{}", out.stdout, out.stderr);
    assert!(report.contains("/nonexistent/x.formula.toml"), "{report}");
}

#[test]
fn man_pages_come_for_both_binaries() {
    let dir = tempfile::tempdir().expect("a folder");
    let folder = dir.path().join("man1");
    let out = catalyst(&["man", "--dir", folder.to_str().expect("utf-8")], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    for page in [
        "catalyst.1",
        "catalyst-ctl.1",
        "catalyst-ctl-logs.1",
        "catalystd.1",
    ] {
        let text =
            std::fs::read_to_string(folder.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie \\n(.g .ds Aq"),
            "{page} is roff: {text}"
        );
    }
    let daemon = catalyst(&["man", "catalystd"], "");
    assert_eq!(daemon.code, 0, "{}", daemon.stderr);
    assert!(
        daemon.stdout.contains(".TH catalystd 1"),
        "{}",
        daemon.stdout
    );
    assert!(
        daemon.stdout.contains("\\-\\-workspace") && daemon.stdout.contains("state lives in"),
        "the flags with their help: {}",
        daemon.stdout
    );
    let main = catalyst(&["man"], "");
    assert!(main.stdout.contains(".TH catalyst 1"), "{}", main.stdout);
    // The sections a man page reader looks for, in the printed pages and the written ones.
    for text in [
        &main.stdout,
        &daemon.stdout,
        &std::fs::read_to_string(folder.join("catalystd.1")).expect("catalystd.1"),
        &std::fs::read_to_string(folder.join("catalyst.1")).expect("catalyst.1"),
    ] {
        for section in [
            ".SH FILES",
            ".SH ENVIRONMENT",
            ".SH EXIT STATUS",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(text.contains(section), "{section} in {text}");
        }
        assert!(
            text.contains("config.toml") && text.contains("RUST_LOG"),
            "{text}"
        );
    }
}

/// `catalystd`'s page says it exits 2 for a usage error or a workspace that does not exist
/// (and 1 when it cannot start on a workspace that does: `reliability::lock`).
#[test]
fn catalystd_exits_as_its_man_page_says() {
    let page = catalyst(&["man", "catalystd"], "").stdout;
    let exit = page
        .split(".SH EXIT STATUS")
        .nth(1)
        .expect("an EXIT STATUS section");
    assert!(
        exit.contains("\\fB2\\fR\na usage error, a workspace that does not exist"),
        "{exit}"
    );
    let missing = tempfile::tempdir().expect("tempdir").path().join("nowhere");
    for args in [
        vec!["--workspace".to_owned(), missing.display().to_string()],
        vec!["--no-such-flag".to_owned()],
    ] {
        let out = std::process::Command::new(catalyst_testkit::catalystd_bin())
            .args(&args)
            .output()
            .expect("run catalystd");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A workflow in the shape Gas Town publishes ("design → implement → review → test → submit",
/// with `execution` and a step's `output`): it loads, each key catalyst does not act on is
/// one warning line, and the check exits 0. A key neither beads nor catalyst knows is still an
/// error.
#[test]
fn formula_check_accepts_beads_and_gas_town_workflow_keys_with_warnings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "engineer.formula.toml",
        r#"
formula = "engineer"
type = "workflow"
version = 1
description = "Design, build, review, test and hand in a feature."
execution = "distributed"
phase = "liquid"

[vars.feature]
description = "what to build"
required = true

[[steps]]
id = "design"
title = "Design {{feature}}"
description = "Write the design down."
output = "design.md"
assignee = "architect"

[[steps]]
id = "implement"
title = "Implement {{feature}}"
type = "feature"
needs = ["design"]

[[steps]]
id = "review"
title = "Review the implementation"
needs = ["implement"]
parallel = false

[[steps]]
id = "submit"
title = "Submit for merge"
role = "merge"
needs = ["review"]
"#,
    );
    let out = catalyst(&["formula", "check", &file], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let warnings: Vec<&str> = out.stdout.lines().collect();
    for (step, key) in [
        (None, "execution"),
        (None, "phase"),
        (Some("design"), "assignee"),
        (Some("review"), "parallel"),
    ] {
        let prefix = match step {
            Some(step) => format!("{file}: {step}: warning: `{key}` is kept but not acted on: "),
            None => format!("{file}: warning: `{key}` is kept but not acted on: "),
        };
        assert!(
            warnings.iter().any(|l| l.starts_with(&prefix)),
            "one line for `{key}`: {warnings:?}"
        );
    }
    assert!(
        warnings.contains(&format!("{file}: warning: var `feature` has no default: pouring needs a value for it (`ctl submit --var feature=…`, or the config's `[vars]`)").as_str()),
        "what pouring demands is said: {warnings:?}"
    );
    assert_eq!(warnings.len(), 5, "nothing else: {warnings:?}");

    let typo = std::fs::read_to_string(&file)
        .expect("read")
        .replace("parallel = false", "paralel = false");
    std::fs::write(&file, typo).expect("write");
    let out = catalyst(&["formula", "check", &file], "");
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("{file}: review: unknown key `paralel`")),
        "{}",
        out.stdout
    );
}

/// `formula check` takes a workflow and the expansion it names together; `formula show` prints
/// what a workflow pours as a tree, with an aspect applied, and warns of a pointcut that
/// matches nothing.
#[test]
fn formula_show_prints_the_composed_molecule_as_a_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let formulas = dir.path().join(".catalyst/formulas");
    std::fs::create_dir_all(&formulas).expect("formulas folder");
    let polish = write(
        &formulas,
        "polish.formula.toml",
        "formula = \"polish\"\ntype = \"expansion\"\n[[template]]\nid = \"{target}.draft\"\ntitle = \"Draft: {target.title}\"\n[[template]]\nid = \"{target}.refine\"\ntitle = \"Refine: {target.title}\"\nneeds = [\"{target}.draft\"]\n",
    );
    let polished = write(
        &formulas,
        "polished.formula.toml",
        "formula = \"polished\"\n[[steps]]\nid = \"implement\"\ntitle = \"Implement {{title}}\"\nexpand = \"polish\"\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\nneeds = [\"implement\"]\n",
    );
    write(
        &formulas,
        "guard.formula.toml",
        "formula = \"guard\"\ntype = \"aspect\"\n[[advice]]\ntarget = \"implement\"\n[advice.before]\nid = \"{step.id}-prescan\"\ntitle = \"Prescan\"\n[[pointcuts]]\nglob = \"implement\"\n[[pointcuts]]\nglob = \"deploy\"\n",
    );
    let out = catalyst(&["formula", "check", &polished, &polish], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = catalyst(&["formula", "check", &polished], "");
    assert_eq!(
        out.code, 0,
        "its expansion is found beside it: {}",
        out.stdout
    );
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let polished = write(
        elsewhere.path(),
        "polished.formula.toml",
        &std::fs::read_to_string(&polished).expect("read"),
    );
    let out = catalyst(&["formula", "check", &polished], "");
    assert_eq!(out.code, 1, "alone, its expansion is unknown");
    assert!(
        out.stdout
            .contains("implement: `expand` names unknown formula `polish`"),
        "{}",
        out.stdout
    );

    let workspace = dir.path().display().to_string();
    let out = catalyst(
        &["formula", "show", "polished", "--workspace", &workspace],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "polished (3 steps)\n  merge: step `merge`\n└ implement-draft [task] Draft: Implement Example\n  └ implement-refine [task] Refine: Implement Example\n    └ merge [merge] Merge\n"
    );
    let out = catalyst(
        &[
            "formula",
            "pour",
            "feature",
            "--expand",
            "implement=polish",
            "--workspace",
            &workspace,
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("└ implement-draft [task] Draft: Implement: Example\n")
            && out
                .stdout
                .contains("implement-refine [task] Refine: Implement: Example\n")
            && !out.stdout.contains(" implement [implement]"),
        "`--expand` replaces `implement` by the chain: {}",
        out.stdout
    );
    let out = catalyst(
        &[
            "formula",
            "pour",
            "feature",
            "--expand",
            "deploy=polish",
            "--workspace",
            &workspace,
        ],
        "",
    );
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("no step `deploy` to expand with `polish`"),
        "{}",
        out.stderr
    );
    let out = catalyst(
        &[
            "formula",
            "show",
            "feature",
            "--aspect",
            "guard",
            "--workspace",
            &workspace,
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(
            "warning: aspect `guard`: pointcut `deploy` matches no step of `feature`\n"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  └ implement-prescan [task] Prescan\n    └ implement [implement]"),
        "{}",
        out.stdout
    );
    let out = catalyst(&["formula", "show", "nope", "--workspace", &workspace], "");
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("unknown formula `nope`"),
        "{}",
        out.stderr
    );
}

/// Every key of beads' workflow format at once, in a workflow that extends another and is
/// composed with an expansion and an aspect: `formula check` exits 0 with warnings only, and
/// `formula show` prints what it pours.
#[test]
fn formula_check_accepts_beads_full_workflow_key_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let formulas = dir.path().join(".catalyst/formulas");
    std::fs::create_dir_all(&formulas).expect("formulas folder");
    let base = write(
        &formulas,
        "base.formula.toml",
        r#"
formula = "base"
description = "What every change goes through."
version = 1
type = "workflow"

[vars.lang]
description = "the language"
default = "rust"
enum = ["rust", "go"]

[[steps]]
id = "plan"
title = "Plan {{title}}"

[[steps]]
id = "merge"
title = "Merge"
role = "merge"
needs = ["plan"]
"#,
    );
    let polish = write(
        &formulas,
        "polish.formula.toml",
        r#"
formula = "polish"
type = "expansion"
[vars]
rounds = "2"
[[template]]
id = "{target}.draft"
title = "Draft: {target.title}"
description = "{target.description}"
[[template]]
id = "{target}.refine"
title = "Refine ({{rounds}} rounds)"
needs = ["{target}.draft"]
"#,
    );
    let audit = write(
        &formulas,
        "audit.formula.toml",
        r#"
formula = "audit"
type = "aspect"
[[advice]]
target = "*"
[advice.around]
before = [{ id = "{step.id}-scan", title = "Scan before {step.title}" }]
after = [{ id = "{step.id}-audit", title = "Audit {step.id}" }]
[[pointcuts]]
glob = "build*"
type = "feature"
"#,
    );
    let full = write(
        &formulas,
        "full.formula.toml",
        r#"
formula = "full"
description = "Every key beads defines for a workflow."
version = 1
type = "workflow"
extends = ["base"]
phase = "liquid"
pour = true
source = "full.formula.toml"

[vars.count]
description = "how many"
default = "2"
type = "int"
pattern = "[0-9]+"
[vars.fast]
type = "bool"
default = "false"
[vars.owner]
required = true

[compose]
aspects = ["audit"]
bond_points = [{ id = "end", after_step = "join", parallel = false }]
hooks = [{ trigger = "label:security", attach = "audit", at = "end", vars = {} }]
gate = [{ before = "join", condition = "tests.status == 'complete'" }]
[[compose.expand]]
target = "docs"
with = "polish"
vars = { rounds = "3" }
[[compose.map]]
select = "lint*"
with = "polish"
[[compose.branch]]
from = "plan"
steps = ["build", "docs"]
join = "join"

[[steps]]
id = "build"
title = "Build in {{lang}} for {{owner}}"
description = "Build it."
notes = "n"
type = "feature"
priority = 1
labels = ["core"]
depends_on = ["plan"]
assignee = "{{owner}}"
on_complete = { for_each = "output.parts", bond = "base", vars = { part = "{item}" }, parallel = true }

[[steps]]
id = "docs"
title = "Docs"
description = "Write the docs."

[[steps]]
id = "lint"
title = "Lint"
needs = ["plan"]
condition = "{{fast}} != true"

[[steps]]
id = "join"
title = "Join"
waits_for = "all-children"
gate = { type = "timer", timeout = "1h" }

[[steps]]
id = "group"
title = "Group"
needs = ["join"]
[[steps.children]]
id = "check"
title = "Check"
[[steps.children]]
id = "tidy"
title = "Tidy"
needs = ["check"]

[[steps]]
id = "rounds"
title = "Rounds"
needs = ["group"]
[steps.loop]
range = "1..{count}"
var = "n"
[[steps.loop.body]]
id = "pass"
title = "Pass {n}"

[[steps]]
id = "settle"
title = "Settle"
needs = ["rounds"]
[steps.loop]
until = "settle.status == 'complete'"
max = 3
[[steps.loop.body]]
id = "try"
title = "Try"

[[steps]]
id = "approve"
title = "Approve"
needs = ["settle"]
gate = { type = "human" }

[[steps]]
id = "inline"
title = "Inline"
needs = ["approve"]
expand = "polish"
expand_vars = { rounds = "1" }

[[steps]]
id = "merge"
title = "Merge"
role = "merge"
needs = ["inline"]
"#,
    );
    let out = catalyst(&["formula", "check", &full, &base, &polish, &audit], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.iter().all(|l| l.contains(": warning: ")),
        "warnings only: {lines:#?}"
    );
    for key in [
        "`phase`",
        "`pour`",
        "`source`",
        "`bond_points`",
        "`hooks`",
        "`gate` is kept",
        "`on_complete`",
        "`waits_for`",
        "`assignee`",
        "`type = \"timer\"`",
        "`until`",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(key)).count(),
            1,
            "one line for {key}: {lines:#?}"
        );
    }

    let workspace = dir.path().display().to_string();
    let show = |vars: &[&str]| {
        let mut args = vec!["formula", "show", "full", "--workspace", &workspace];
        for v in vars {
            args.extend(["--var", v]);
        }
        catalyst(&args, "")
    };
    let out = show(&["owner=ann"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("  kept, not acted on: phase = \"liquid\"\n")
            && out
                .stdout
                .contains("  kept, not acted on: compose.hooks = "),
        "the kept keys are shown: {}",
        out.stdout
    );
    let ids: Vec<&str> = out
        .stdout
        .lines()
        .skip(1)
        .filter(|l| {
            !l.starts_with("  kept") && !l.starts_with("  var ") && !l.starts_with("  merge: ")
        })
        .filter_map(|l| {
            l.trim_start_matches(|c: char| " │└├─".contains(c))
                .split_whitespace()
                .next()
        })
        .collect();
    assert_eq!(
        ids,
        [
            "plan",
            "build-scan",
            "build",
            "build-audit",
            "docs-draft",
            "docs-refine",
            "lint-draft",
            "lint-refine",
            "gate-join",
            "join",
            "check",
            "tidy",
            "rounds-iter1-pass",
            "rounds-iter2-pass",
            "settle-iter1-try",
            "gate-approve",
            "approve",
            "inline-draft",
            "inline-refine",
            "merge",
        ],
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("Refine (3 rounds)") && out.stdout.contains("Refine (1 rounds)"),
        "expansion vars from the rule and from the step: {}",
        out.stdout
    );
    let out = show(&["owner=ann", "fast=true"]);
    assert!(
        !out.stdout.contains("lint-draft"),
        "the condition drops lint: {}",
        out.stdout
    );
    let out = show(&["owner=ann", "count=many"]);
    assert_ne!(out.code, 0, "an int var refuses text: {}", out.stdout);
}

/// `catalyst-hook`, which skips the standard library's start-up (it has a C `main`), reads its
/// event from the arguments and its environment, and answers whole on stdout.
#[test]
fn the_hook_binary_answers_on_stdout() {
    use catalyst::domain::agent::attempt::{AttemptPolicy, POLICY_FILE};
    use catalyst::domain::id::BeadId;
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("tempdir");
    let bead = BeadId::new("cli-1").expect("id");
    let policy = AttemptPolicy {
        step: bead.step("implement").expect("step"),
        bead,
        role: catalyst::domain::model::Role::Implement,
        attempt: 1,
        access: catalyst::domain::policy::Access::Worktree,
        tools: None,
        worktree: dir.path().to_owned(),
        target_branch: "main".into(),
        context: dir.path().join("context.md"),
        contract: "the contract".into(),
    };
    std::fs::write(
        dir.path().join(POLICY_FILE),
        serde_json::to_vec(&policy).expect("json"),
    )
    .expect("policy");
    let mut child = Command::new(catalyst_hook_bin())
        .arg("session-start")
        .env("CATALYST_CONTEXT", dir.path().join("context.md"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("catalyst-hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(br#"{"hook_event_name":"SessionStart","session_id":"s"}"#)
        .expect("input");
    let out = child.wait_with_output().expect("output");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {:?}", String::from_utf8_lossy(&out.stdout));
    });
    assert_eq!(
        answer["hookSpecificOutput"]["additionalContext"].as_str(),
        Some(policy.session_text().as_str()),
        "{answer}"
    );
}

/// `formula check FILE` finds the formula a file `extends` in a file beside it (the formula
/// search path), and reports only the file it was given.
#[test]
fn formula_check_resolves_extends_over_the_files_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "base.formula.toml",
        "formula = \"base\"\n[vars]\nlang = \"rust\"\n[[steps]]\nid = \"build\"\ntitle = \"Build in {{lang}}\"\n",
    );
    write(
        dir.path(),
        "broken.formula.toml",
        "formula = \"broken\"\nfrobnicate = 1\n",
    );
    let child = write(
        dir.path(),
        "child.formula.toml",
        "formula = \"child\"\nextends = [\"base\"]\n[[steps]]\nid = \"docs\"\ntitle = \"Docs for {{lang}}\"\nneeds = [\"build\"]\n",
    );
    let out = catalyst(&["formula", "check", &child], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "", "nothing of the files beside it");
    let lonely = tempfile::tempdir().expect("tempdir");
    let child = write(
        lonely.path(),
        "child.formula.toml",
        &std::fs::read_to_string(&child).expect("read"),
    );
    let out = catalyst(&["formula", "check", &child], "");
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("`extends` names unknown formula `base`"),
        "{}",
        out.stdout
    );
}

/// `formula show` prints the vars pouring used, each step's `output`, and how the work is
/// merged: the formula's own merge step, one added, or none for `merge = false`.
#[test]
fn formula_show_prints_vars_outputs_and_the_merge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let formulas = dir.path().join(".catalyst/formulas");
    std::fs::create_dir_all(&formulas).expect("formulas folder");
    let text = "formula = \"notes\"\n[vars]\nlang = \"rust\"\n[vars.area]\nrequired = true\n[[steps]]\nid = \"write\"\ntitle = \"Write {{area}} notes{{if .lang}} in {{.lang}}{{end}}\"\noutput = \"notes/{{area}}.md\"\n";
    write(&formulas, "notes.formula.toml", text);
    write(
        &formulas,
        "kept.formula.toml",
        &text
            .replace("\"notes\"", "\"kept\"")
            .replace("[vars]", "merge = false\n[vars]"),
    );
    let workspace = dir.path().display().to_string();
    let show = |name: &str, vars: &[&str]| {
        let mut args = vec!["formula", "show", name, "--workspace", &workspace];
        for v in vars {
            args.extend(["--var", v]);
        }
        catalyst(&args, "")
    };
    let out = show("notes", &["area=api"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "notes (2 steps)\n  var area = \"api\" (given)\n  var lang = \"rust\" (default)\n  merge: step `merge` (added: the formula has none)\n└ write [task] Write api notes in rust  (output: notes/api.md)\n  └ merge [merge] Merge: Example\n"
    );
    let out = show("kept", &["area=ui", "lang="]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "kept (1 steps)\n  var area = \"ui\" (given)\n  var lang = \"\" (given)\n  merge: none (merge = false): the work stays on its branch `catalyst/<bead>`\n└ write [task] Write ui notes  (output: notes/ui.md)\n"
    );
    let out = show("notes", &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("formula `notes` needs a value for `area` (no default)"),
        "{}",
        out.stderr
    );
    let out = catalyst(
        &[
            "formula",
            "check",
            &formulas.join("notes.formula.toml").display().to_string(),
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout
            .contains("var `area` has no default: pouring needs a value for it"),
        "`check` reports what `show` and pouring demand: {}",
        out.stdout
    );
    // A refused file elsewhere in the workspace does not keep `notes` from being shown, and
    // is the error when the formula asked for is the missing one.
    write(
        &formulas,
        "broken.formula.toml",
        "formula = \"broken\"\n[[steps]]\nid = \"a\"\n",
    );
    let out = show("notes", &["area=api"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("warning: 1 problem(s) in other formula files of the workspace"),
        "{}",
        out.stdout
    );
    let out = show("broken", &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("the step has no `title`"),
        "{}",
        out.stderr
    );
}
