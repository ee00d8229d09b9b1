//! The shapes of formula the Gas Town and beads projects publish, each written small: every one
//! loads, with the warnings it should have and no others.

use super::Formula;

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
    ];
    for (what, text, want) in cases {
        let (_, got) = warnings(text);
        assert_eq!(got, *want, "{what}");
    }
}

#[test]
fn a_template_in_run_or_a_broken_one_is_refused() {
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
            "s.formula.toml: g: `title`: `{{end}}` without its `{{if}}`",
        ]
    );
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
