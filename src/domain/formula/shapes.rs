//! The shapes of formula the Gas Town and beads projects publish, each written small: every one
//! loads, with the warnings it should have and no others.

use super::Formula;
use crate::domain::model::Role;

fn has_prompt(_: &str) -> bool {
    true
}

/// Loads `text`, panicking with its problems when it does not load; returns its warnings.
fn warnings(text: &str) -> (Formula, Vec<String>) {
    match Formula::load(text, "s.formula.toml", &has_prompt) {
        Ok(f) => {
            let w = f.warnings.iter().map(ToString::to_string).collect();
            (f, w)
        }
        Err(problems) => panic!("refused: {problems:#?}\n{text}"),
    }
}

fn errors(text: &str) -> Vec<String> {
    match Formula::load(text, "s.formula.toml", &has_prompt) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(problems) => problems
            .iter()
            .filter(|p| !p.warning)
            .map(ToString::to_string)
            .collect(),
    }
}

#[test]
fn each_published_shape_loads_with_its_warnings() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "go-template choices and fields render; range passes through",
            r#"
            formula = "t"
            [vars]
            pr = ""
            [[steps]]
            id = "a"
            title = "A {{if .pr}}for PR {{.pr}}{{else}}without a PR{{end}}"
            description = """
            {{- if .pr }}
            Review {{ .pr }}.
            {{- end }}
            {{range .files}}- {{.}}
            {{end}}"""
            "#,
            &["s.formula.toml: warning: template actions catalyst does not render are passed through verbatim to the agent: `{{range .files}}`"],
        ),
        (
            "a person's step",
            "formula = \"h\"\n[[steps]]\nid = \"ok\"\ntitle = \"Sign off\"\ntype = \"human\"\n",
            &[],
        ),
        (
            "a parallel group and a parallel step without children",
            r#"
            formula = "p"
            [[steps]]
            id = "fan"
            title = "Fan out"
            type = "parallel"
            [[steps.children]]
            id = "left"
            title = "Left"
            [[steps.children]]
            id = "right"
            title = "Right"
            [[steps]]
            id = "lone"
            title = "Lone"
            type = "parallel"
            needs = ["fan"]
            "#,
            &["s.formula.toml: lone: warning: `type = \"parallel\"` without `children` is kept but not acted on: it is a plain step; steps whose `needs` are met run side by side anyway"],
        ),
        (
            "review_only at the top and on a step",
            "formula = \"r\"\nreview_only = true\n[[steps]]\nid = \"look\"\ntitle = \"Look\"\nreview_only = true\n",
            &["s.formula.toml: warning: `review_only` is kept but not acted on: a review-only formula changes no code: no merge step is added when it is poured (as with `merge = false`)",
              "s.formula.toml: look: warning: `review_only` is kept but not acted on: the step's agent is told what to do by its role and description"],
        ),
        (
            "lenient vars",
            r#"
            formula = "v"
            [vars.mode]
            required = true
            default = "fast"
            [vars.count]
            type = "number"
            default = "2.5"
            [vars.title]
            description = "Gas Town's own title var"
            [vars.target]
            description = "no default"
            [[steps]]
            id = "a"
            title = "{{title}} in {{mode}} x{{count}} on {{target}}"
            "#,
            &["s.formula.toml: warning: var `mode`: `required = true` with a `default`: the default makes it not required",
              "s.formula.toml: warning: var `title` is built in (the work bead's title): its declaration is ignored, and `{{title}}` is the bead's",
              "s.formula.toml: warning: var `target` has no default: pouring needs a value for it (`ctl submit --var target=…`, or the config's `[vars]`)"],
        ),
        (
            "a placeholder its runtime fills (undeclared)",
            r#"
            formula = "u"
            [vars.issue]
            default = "gt-1"
            [[steps]]
            id = "a"
            title = "A"
            description = "escalate as polecat/{{polecat}} about {{issue}}"
            "#,
            &["s.formula.toml: a: warning: `{{polecat}}` in `description` is not a declared var: it is kept as written (declare it under `[vars]` to give it a value; built in: bead, title)"],
        ),
        (
            "one command as a string, and rollback steps",
            r#"
            formula = "r"
            merge = false
            [[steps]]
            id = "setup"
            title = "Set up"
            run = "make setup"
            [[rollback_steps]]
            id = "undo"
            title = "Undo"
            "#,
            &["s.formula.toml: warning: `rollback_steps` is kept but not acted on: Gas Town runs them when the molecule fails; catalyst blocks the bead and leaves its work on its branch"],
        ),
        (
            "formulas v2 (Gas City)",
            r#"
            formula = "v2"
            version = 2
            tags = ["ops"]
            [requires]
            formula_compiler = ">=2"
            [[steps]]
            id = "survey"
            title = "Survey"
            timeout = "1h30m"
            tags = ["scan"]
            opt_model = "fast"
            description_file = "survey.md"
            [steps.retry]
            max_attempts = 3
            on_exhausted = "soft_fail"
            [steps.check]
            max_attempts = 2
            [steps.check.check]
            mode = "exec"
            path = "scripts/verify.sh"
            [steps.on_complete]
            for_each = "output.items"
            bond = "item-work"
            [[steps]]
            id = "collect"
            title = "Collect"
            waits_for = "children-of(survey)"
            drain = true
            "#,
            &[
                "s.formula.toml: warning: `requires` is kept but not acted on: Gas City's compiler requirements (formula v2); catalyst reads the formula itself",
                "s.formula.toml: warning: `tags` is kept but not acted on: tags describe the formula; a step's `tags` become its labels",
                "s.formula.toml: survey: warning: `retry.on_exhausted = \"soft_fail\"` is kept but not acted on: a step whose attempts are spent blocks its bead, as with `hard_fail`",
                "s.formula.toml: survey: warning: `description_file` is kept but not acted on: catalyst does not read step text from other files; put it in `description`",
                "s.formula.toml: survey: warning: `on_complete` is kept but not acted on: bonding a formula for each item of a step's output happens at run time in Gas Town; catalyst pours a fixed molecule",
                "s.formula.toml: collect: warning: `drain` is kept but not acted on: Gas City drains a worker session after the step; catalyst starts an agent per attempt",
            ],
        ),
    ];
    for (what, text, want) in cases {
        let (_, got) = warnings(text);
        assert_eq!(got, *want, "{what}");
    }
}

/// A template in `run` is refused; one in text that does not read as a Go template (a stray
/// `{{end}}`, Handlebars' `{{#if}}…{{else}}…{{/if}}` as some published formulas write) is kept
/// as written, with a warning, and pours verbatim but for its placeholders.
#[test]
fn a_template_in_run_is_refused_and_a_broken_one_in_text_kept_as_written() {
    let text = r#"
        formula = "t"
        [[steps]]
        id = "g"
        title = "G {{end}}"
        role = "gate"
        run = ["make {{if .x}}x{{end}}"]
    "#;
    assert_eq!(
        errors(text),
        [
            "s.formula.toml: g: `run` holds a Go-template action (`make {{if .x}}x{{end}}`): a gate's command is not a template, so that the shell runs exactly what is written; use `{{var}}` placeholders",
        ]
    );
    let handlebars = "formula = \"t\"\n[vars]\nn = \"3\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\ndescription = \"{{#if failures}}{{n}} failed{{else}}all passed{{/if}}\"\n";
    let (formula, got) = warnings(handlebars);
    assert!(
        got.iter().any(|w| w.contains("`description`: `{{else}}` without its `{{if}}`: its template actions are kept as written")),
        "{got:?}"
    );
    let values = std::collections::BTreeMap::from([("n".to_owned(), "3".to_owned())]);
    let step = formula.step("a").expect("a");
    assert_eq!(
        super::template::render(&step.description, &values),
        "{{#if failures}}3 failed{{else}}all passed{{/if}}"
    );
    let var = "formula = \"t\"\n[vars.x]\npattern = \"[a-z]+\"\n[[steps]]\nid = \"g\"\ntitle = \"G\"\nrole = \"gate\"\nrun = [\"echo {{.x}}\"]\n";
    assert_eq!(
        errors(var).len(),
        1,
        "`{{{{.x}}}}` of a declared var in `run`"
    );
    // A command's own braces are its text.
    let docker = "formula = \"t\"\n[[steps]]\nid = \"g\"\ntitle = \"G\"\nrole = \"gate\"\nrun = [\"docker inspect --format '{{.State.Status}}' db\"]\n";
    warnings(docker);
}

#[test]
fn shapes_pour_as_catalyst_means_them() {
    use crate::domain::formula::{pour, MergePlan};
    use crate::domain::id::BeadId;
    use crate::domain::model::{Bead, Role};
    use crate::domain::time::Timestamp;
    use std::collections::BTreeMap;

    let at = Timestamp::parse("2026-01-01T00:00:00Z").expect("valid");
    let work = Bead::new(BeadId::new("cat-1").expect("valid"), "Fix it", at);
    let pour_with = |text: &str, vars: &[(&str, &str)]| {
        let (f, _) = warnings(text);
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let beads = pour(&f, &work, &vars, at).expect("pours");
        (f, beads)
    };

    let text = "formula = \"t\"\n[vars]\npr = \"\"\n[[steps]]\nid = \"a\"\ntitle = \"{{title}}: {{if .pr}}PR {{.pr}}{{else}}no PR{{end}}\"\n[[steps]]\nid = \"ok\"\ntitle = \"OK\"\ntype = \"human\"\nneeds = [\"a\"]\n";
    let (_, beads) = pour_with(text, &[("pr", "12")]);
    assert_eq!(beads[0].title, "Fix it: PR 12");
    let roles: Vec<(&str, Role)> = beads
        .iter()
        .map(|b| {
            let meta = b.step_meta().expect("meta");
            (b.id.as_str(), meta.role)
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("cat-1.a", Role::Task),
            ("cat-1.ok", Role::Approval),
            ("cat-1.merge", Role::Merge)
        ]
    );
    let (_, beads) = pour_with(text, &[]);
    assert_eq!(beads[0].title, "Fix it: no PR");

    // The added merge needs every step nothing needs; `merge` taken by a task, it is `merge-2`.
    let text = "formula = \"m\"\n[[steps]]\nid = \"merge\"\ntitle = \"Merge the docs\"\n[[steps]]\nid = \"b\"\ntitle = \"B\"\n";
    let (f, beads) = pour_with(text, &[]);
    assert_eq!(f.merge_plan(), MergePlan::Added("merge-2".into()));
    let last = beads.last().expect("steps");
    assert_eq!(last.id.as_str(), "cat-1.merge-2");
    let needs: Vec<&str> = last
        .dependencies
        .iter()
        .filter(|d| d.dep_type == crate::domain::model::DepType::Blocks)
        .map(|d| d.depends_on_id.as_str())
        .collect();
    assert_eq!(needs, ["cat-1.merge", "cat-1.b"]);

    for (text, why) in [
        (
            "formula = \"n\"\nmerge = false\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n",
            "merge = false",
        ),
        (
            "formula = \"n\"\nreview_only = true\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n",
            "review_only = true",
        ),
    ] {
        let (f, beads) = pour_with(text, &[]);
        assert_eq!(f.merge_plan(), MergePlan::Off(why));
        assert_eq!(beads.len(), 1, "{why}: no merge step");
    }
}

#[test]
fn a_run_written_as_one_string_is_one_command_of_a_gate() {
    let (f, _) =
        warnings("formula = \"r\"\n[[steps]]\nid = \"g\"\ntitle = \"G\"\nrun = \"make setup\"\n");
    let g = f.step("g").expect("g");
    assert_eq!(g.run, ["make setup"]);
    assert_eq!(
        g.role,
        Role::Gate,
        "a step with commands and no role is the daemon's to run"
    );
}

#[test]
fn v2_keys_that_map_onto_catalysts_own_are_used() {
    let text = "formula = \"v\"\nversion = 2\n[[steps]]\nid = \"a\"\ntitle = \"A\"\ntimeout = \"30m\"\nlabels = [\"x\"]\ntags = [\"x\", \"y\"]\nopt_model = \"haiku\"\n[steps.retry]\nmax_attempts = 3\n[[steps]]\nid = \"b\"\ntitle = \"B\"\nwaits_for = \"children-of(a)\"\n";
    let (f, _) = warnings(text);
    assert_eq!(f.version, 2);
    let a = f.step("a").expect("a");
    assert_eq!(a.timeout, Some(1800));
    assert_eq!(a.labels, ["x", "y"]);
    assert_eq!(a.max_attempts, Some(3), "`[steps.retry] max_attempts`");
    assert_eq!(a.model.as_deref(), Some("haiku"), "`opt_model`");
    assert!(!a.metadata.contains_key("retry"));
    let b = f.step("b").expect("b");
    assert_eq!(b.needs, ["a"]);
    assert!(!b.metadata.contains_key("waits_for"));
    assert_eq!(
        errors("formula = \"v\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\ntimeout = \"soon\"\n"),
        ["s.formula.toml: a: `timeout = \"soon\"` is not a duration (seconds, or whole numbers with `h`, `m` and `s`, such as `\"1h30m\"`)"]
    );
}

/// A v2 `check` is a gate after its step: the steps that needed the step need the gate, the
/// step's `timeout` bounds the script (Gas City's meaning), and the check's attempts in all
/// are the gate's fix limit.
#[test]
fn a_v2_check_is_a_gate_after_its_step() {
    let text = r#"
formula = "v"
version = 2
[[steps]]
id = "implement"
title = "Implement"
role = "implement"
timeout = "2m"
[steps.check]
max_attempts = 3
[steps.check.check]
mode = "exec"
path = "verify.sh"
[[steps]]
id = "review"
title = "Review"
role = "review"
needs = ["implement"]
"#;
    let (f, _) = warnings(text);
    let ids: Vec<&str> = f.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["implement", "check-implement", "review"]);
    let implement = f.step("implement").expect("implement");
    assert_eq!(implement.timeout, None, "the timeout is the check's");
    let check = f.step("check-implement").expect("the check");
    assert_eq!(check.role, Role::Gate);
    assert_eq!(check.run, ["'./verify.sh'"]);
    assert_eq!(check.needs, ["implement"]);
    assert_eq!(check.timeout, Some(120));
    assert_eq!(check.max_fix_iterations, Some(3));
    assert_eq!(f.step("review").expect("review").needs, ["check-implement"]);
    for (bad, why) in [
        (
            "[steps.check]\nmax_attempts = 2\n",
            "`check` needs its script",
        ),
        (
            "[steps.check]\n[steps.check.check]\nmode = \"http\"\npath = \"x\"\n",
            "is not supported",
        ),
        (
            "[steps.check]\nmax_attempts = 0\n[steps.check.check]\npath = \"x\"\n",
            "`check.max_attempts` must be 1 to 100",
        ),
    ] {
        let text = format!("formula = \"v\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n{bad}");
        let errors = errors(&text);
        assert!(errors.iter().any(|e| e.contains(why)), "{bad}: {errors:?}");
    }
}

#[test]
fn a_convoy_that_says_merge_false_has_no_merge_step() {
    let text = "formula = \"c\"\ntype = \"convoy\"\nmerge = false\n[[legs]]\nid = \"a\"\ntitle = \"A\"\n[synthesis]\ntitle = \"S\"\n";
    let (f, _) = warnings(text);
    let ids: Vec<&str> = f.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["a", "synthesis"]);
    assert_eq!(
        f.merge_plan(),
        crate::domain::formula::MergePlan::Off("merge = false")
    );
}
