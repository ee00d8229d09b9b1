//! Loading and checking the config.

use super::*;

#[test]
fn empty_file_means_defaults() {
    assert_eq!(Config::parse("", "c.toml").unwrap(), Config::default());
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let err = Config::parse("max_agent = 3\n", "c.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_agent") && err.contains("c.toml"), "{err}");
}

#[test]
fn bad_values_are_refused() {
    for (text, needle) in [
        ("max_agents = 0", "max_agents"),
        ("target_branch = \"a..b\"", "target_branch"),
        ("prefix = \"b/d\"", "prefix"),
        ("agent = \"nope\"", "nope"),
        ("[models.opus]\nmax_concurrent = 0", "max_concurrent"),
        (
            "stall_timeout_secs = 0",
            "`stall_timeout_secs` must be from 1 to 31536000, not 0",
        ),
        (
            "gate_timeout_secs = 18446744073709551615",
            "`gate_timeout_secs` must be from 1 to 31536000, not 18446744073709551615",
        ),
        (
            "budget_usd = -1.0",
            "`budget_usd` must be a number of dollars",
        ),
        (
            "budget_usd = nan",
            "`budget_usd` must be a number of dollars",
        ),
        (
            "budget_usd = inf",
            "`budget_usd` must be a number of dollars",
        ),
        (
            "[router]\nmax_attempts = 0",
            "`router.max_attempts` must be from 1 to 100, not 0",
        ),
        (
            "[router]\nmax_fix_iterations = 0",
            "`router.max_fix_iterations` must be from 1 to 100, not 0",
        ),
        (
            "pause_secs = 10\nmax_pause_secs = 5",
            "`max_pause_secs` must be from 10",
        ),
        (
            "output_cap_bytes = 10",
            "`output_cap_bytes` must be from 1024",
        ),
        (
            "grace_secs = 999999999",
            "`grace_secs` must be from 0 to 86400",
        ),
        (
            "[tool_policy.gate]\naccess = \"worktree\"",
            "tool_policy.gate",
        ),
        (
            "[tool_policy.review]\naccess = \"read-only\"\ntools = [\"\"]",
            "empty name",
        ),
        ("[tool_policy.review]\naccess = \"sometimes\"", "sometimes"),
        ("catalyst_bin = \"\"", "catalyst_bin"),
        ("[router]\nmax_atempts = 5", "max_atempts"),
    ] {
        let err = Config::parse(text, "c.toml").unwrap_err().to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
}

#[test]
fn a_profile_named_after_a_builtin_extends_it() {
    let c = Config::parse(
        "[profiles.claude]\nenv = { ANTHROPIC_API_KEY = \"k\" }\n",
        "c.toml",
    )
    .unwrap();
    let profile = c.profile().unwrap();
    assert_eq!(profile.env["ANTHROPIC_API_KEY"], "k");
    assert_eq!(profile.command, AgentProfile::claude().command);
    assert_eq!(profile.writable, AgentProfile::claude().writable);
}

#[test]
fn a_new_profile_without_a_command_is_refused_naming_the_profile_and_key() {
    let err = Config::parse(
        "agent = \"mine\"\n[profiles.mine]\nformat = \"text\"\n",
        "c.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`profiles.mine`: no `command`") && err.contains("c.toml"),
        "{err}"
    );
}

#[test]
fn models_resolve_through_roles_and_ids() {
    let c = Config::parse(
        "[role_models]\nreview = \"sonnet\"\n[models.sonnet]\nid = \"claude-sonnet-4-5\"\nmax_concurrent = 1\n",
        "c.toml",
    )
    .unwrap();
    assert_eq!(c.role_model(Role::Review).as_deref(), Some("sonnet"));
    assert_eq!(c.role_model(Role::Merge).as_deref(), Some("opus"));
    assert_eq!(c.model_id("sonnet"), "claude-sonnet-4-5");
    assert_eq!(c.model_id("opus"), "opus");
    assert_eq!(c.model_limit("sonnet"), Some(1));
}

#[test]
fn tool_policies_default_per_role_and_can_be_replaced() {
    use crate::domain::policy::Access;
    let c = Config::parse(
        "[tool_policy.review]\naccess = \"read-only\"\ntools = [\"Read\", \"Bash\"]\n",
        "c.toml",
    )
    .unwrap();
    let review = c.role_policy(Role::Review);
    assert_eq!(review.access, Access::ReadOnly);
    assert_eq!(
        review.tools_for(None),
        Some(&["Read".to_string(), "Bash".into()][..])
    );
    assert_eq!(
        c.role_policy(Role::Refine),
        RolePolicy::default_for(Role::Refine)
    );
    assert_eq!(c.role_policy(Role::Fix).access, Access::Worktree);
}

#[test]
fn workflow_files_default_on_add_the_followed_file_and_can_be_emptied() {
    let c = Config::parse("[beads]\nwatch = \"./issues/all.jsonl\"\n", "c.toml").unwrap();
    let files = c.workflow_files().unwrap().expect("on by default");
    assert!(files.matches(".beads/formulas/x.formula.toml"));
    assert!(files.matches("issues/all.jsonl"));
    assert!(!files.matches("src/issues/all.jsonl"));
    let off = Config::parse("workflow_files = []\n", "c.toml").unwrap();
    assert!(off.workflow_files().unwrap().is_none());
    let err = Config::parse("workflow_files = [\"a[\"]\n", "c.toml").unwrap_err();
    assert!(err.to_string().contains("`a[` is not a pattern"), "{err}");
}

/// The fields of the struct `T` deserializes, as serde's derive names them: what a config
/// table of that type may hold.
fn fields_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{Error as _, Visitor};

    /// A deserializer that only notes the fields it is asked for.
    struct Fields<'a>(&'a mut &'static [&'static str]);

    impl<'de> serde::Deserializer<'de> for Fields<'_> {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("fields noted"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    assert!(
        !fields.is_empty(),
        "{} is a struct",
        std::any::type_name::<T>()
    );
    fields
}

/// Every key the config file may hold at the top and in `[router]`, `[beads]` and `[web]`, as
/// `key` and `table.key`, and the tables of entries (`profiles`, …) with their entries' keys.
fn every_key() -> (Vec<String>, Vec<(&'static str, &'static [&'static str])>) {
    let mut keys: Vec<String> = fields_of::<Config>()
        .iter()
        .map(|k| k.to_string())
        .collect();
    for (table, fields) in [
        ("router", fields_of::<RouterConfig>()),
        ("beads", fields_of::<crate::domain::beads::BeadsConfig>()),
        ("web", fields_of::<super::web::WebConfig>()),
        ("cluster", fields_of::<super::cluster::ClusterConfig>()),
        ("merge", fields_of::<super::merge::MergeConfig>()),
    ] {
        keys.extend(fields.iter().map(|k| format!("{table}.{k}")));
    }
    let entries = vec![
        ("profiles", fields_of::<ProfileConfig>()),
        ("models", fields_of::<ModelConfig>()),
        ("tool_policy", fields_of::<RolePolicy>()),
    ];
    (keys, entries)
}

/// The template's `# key = value` and `# [table]` lines, uncommented, and their keys
/// (`table.key` inside a table).
fn key_lines(template: &str) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut keys = Vec::new();
    let mut table: Option<&str> = None;
    for line in template.lines().filter_map(|l| l.strip_prefix("# ")) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                table = Some(name);
                keys.push(name.to_owned());
                text.push_str(&format!("{line}\n"));
            }
        } else if let Some((key, _)) = line.split_once(" = ") {
            if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                keys.push(table.map_or(key.to_owned(), |t| format!("{t}.{key}")));
                text.push_str(&format!("{line}\n"));
            }
        }
    }
    (text, keys)
}

/// `catalyst init` wrote a template of its own, which had drifted: it showed a budget the
/// code did not have, and missed keys. The template is now made from the defaults; this
/// guards that every key is there, with its default.
#[test]
fn the_template_shows_every_key_at_its_default() {
    let template = template::commented();
    assert_eq!(
        Config::parse(&template, "c.toml").unwrap(),
        Config::default(),
        "all commented out"
    );
    let (uncommented, mut shown) = key_lines(&template);
    let (mut keys, entries) = every_key();
    shown.sort();
    keys.sort();
    assert_eq!(shown, keys, "every key once, in its table:\n{template}");

    // Uncommented, the lines are the defaults, but for the examples of unset keys.
    let examples: Vec<&str> = template::KEYS
        .iter()
        .filter(|k| k.example.is_some())
        .map(|k| k.key)
        .collect();
    assert_eq!(
        examples,
        [
            "catalyst_bin",
            "webhooks",
            "forge",
            "beads.watch",
            "web.listen",
            "cluster.workers",
            "cluster.key_file",
            "cluster.tls_ca_file",
            "cluster.nkey_file",
            "cluster.credentials_file",
            "cluster.token_file",
            "cluster.remote",
            "cluster.replicas"
        ]
    );
    let with_examples =
        Config::parse(&uncommented, "c.toml").unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    let mut without_examples = with_examples.clone();
    assert!(with_examples.catalyst_bin.is_some() && with_examples.beads.watch.is_some());
    assert!(with_examples.web.listen.is_some());
    without_examples.catalyst_bin = None;
    assert_eq!(with_examples.webhooks.len(), 1);
    without_examples.webhooks.clear();
    assert!(with_examples.forge.is_some());
    without_examples.forge = None;
    without_examples.beads.watch = None;
    without_examples.web.listen = None;
    assert!(with_examples.cluster.remote.is_some() && with_examples.cluster.replicas.is_some());
    assert!(with_examples.cluster.token_file.is_some());
    without_examples.cluster.token_file = None;
    assert!(with_examples.cluster.workers.contains_key("build-7"));
    assert!(with_examples.cluster.key_file.is_some() && with_examples.cluster.nkey_file.is_some());
    without_examples.cluster.workers.clear();
    without_examples.cluster.key_file = None;
    without_examples.cluster.tls_ca_file = None;
    without_examples.cluster.nkey_file = None;
    without_examples.cluster.credentials_file = None;
    without_examples.cluster.remote = None;
    without_examples.cluster.replicas = None;
    assert_eq!(without_examples, Config::default(), "{uncommented}");

    // The tables of entries name their entries' keys.
    for (table, fields) in entries {
        let note = template::KEYS
            .iter()
            .find(|k| k.key == table)
            .expect("a note for every table")
            .note;
        for field in fields {
            assert!(note.contains(&format!("`{field}`")), "{table}: `{field}`");
        }
    }
}

/// `docs/configuration.md`: a copy of the template `catalyst init` writes, then an example of
/// the tables with entries.
const CONFIGURATION_DOC: &str = include_str!("../../../docs/configuration.md");

/// The part of `docs/configuration.md` under `heading`, up to the next heading of its level.
fn doc_section(heading: &str) -> &'static str {
    let doc = CONFIGURATION_DOC;
    let start = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/configuration.md has a section `{heading}`"))
        + 1;
    let section = &doc[start..];
    let end = section[heading.len()..]
        .find("\n## ")
        .map_or(section.len(), |i| i + heading.len());
    &section[..end]
}

#[test]
fn the_configuration_doc_shows_the_template_and_names_every_key() {
    let section = doc_section("## The file `catalyst init` writes");
    let template = template::commented();
    assert!(
        section.contains(&format!("```toml\n{template}```")),
        "docs/configuration.md must hold the template as it is now:\n{template}"
    );
    let (keys, entries) = every_key();
    for key in keys {
        let name = key.rsplit('.').next().unwrap_or(&key);
        assert!(
            section.contains(&format!("# {name} = ")) || section.contains(&format!("[{name}]")),
            "{key}"
        );
    }
    let example = doc_section("## Tables with entries of your own");
    for (table, fields) in entries {
        for field in fields {
            assert!(
                example.contains(&format!("{field} = ")),
                "the example sets `{table}`'s `{field}`"
            );
        }
    }
    // The example of tables with entries is a config that loads.
    let example = example
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the example's TOML block");
    let config = Config::parse(example, "docs/configuration.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.profile().unwrap().command,
        AgentProfile::claude().command
    );
}

#[test]
fn every_key_is_in_the_operations_reference() {
    let doc = include_str!("../../../docs/operations.md");
    let (keys, _) = every_key();
    for key in keys {
        let cells = match key.split_once('.') {
            Some((table, name)) => vec![format!("`[{table}] {name}`")],
            // A table: named by its keys' rows or its entries' (`[profiles.<name>]`).
            None => vec![format!("`{key}`"), format!("`[{key}]"), format!("`[{key}.")],
        };
        assert!(
            cells.iter().any(|cell| doc.contains(cell.as_str())),
            "docs/operations.md names `{key}`"
        );
    }
}

#[test]
fn known_models_are_the_roles_the_escalation_and_the_configured_ones() {
    let names = |c: &Config| c.known_models().into_iter().collect::<Vec<_>>();
    assert_eq!(names(&Config::default()), ["haiku", "opus", "sonnet"]);
    let config = Config::parse(
        "[role_models]\nreview = \"sonnet\"\nmerge = \"sonnet\"\n[router]\nescalation_model = \"big\"\n[models.local]\nmax_concurrent = 1\n",
        "c.toml",
    )
    .unwrap();
    assert_eq!(names(&config), ["big", "local", "sonnet"]);
}
