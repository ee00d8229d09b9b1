//! The commented config `catalyst init` writes: every key at its default, commented out, with a
//! note above it. The values come from [`Config::default`] serialized, the notes from one table,
//! [`KEYS`], so the file cannot show a default the code does not have. `docs/configuration.md`
//! holds a copy of it, which a test keeps the same.

use crate::domain::agent::profile::BUILTIN_PROFILES;
use crate::domain::model::Role;
use crate::domain::policy::RolePolicy;

use super::Config;

/// One key of the config file and what the template says about it.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The key: `max_agents`, a table (`router`), or a key in a table (`router.max_attempts`).
    pub key: &'static str,
    /// What it does, written above it.
    pub note: &'static str,
    /// The value shown for a key that is unset by default (the note says so); `None` for keys
    /// whose default the template shows.
    pub example: Option<&'static str>,
}

const fn key(key: &'static str, note: &'static str) -> Key {
    Key {
        key,
        note,
        example: None,
    }
}

/// Every key of the config, in the template's order: top-level keys first (TOML puts them
/// before any table), then each table followed by its keys.
pub const KEYS: &[Key] = &[
    key("prefix", "new bead ids are `<prefix>-<base36 number>`"),
    key("target_branch", "the branch beads merge into"),
    key(
        "default_formula",
        "the formula of a bead without a `formula:<name>` label; \"\" leaves such beads waiting",
    ),
    key(
        "max_agents",
        "agent steps running at once, over all beads (gates and merges take no slot)",
    ),
    key(
        "agent",
        "the profile steps run with: `claude`, `codex` or a name under `profiles`",
    ),
    key(
        "agent_timeout_secs",
        "how long one agent attempt may run (a formula step's `timeout` wins)",
    ),
    key(
        "stall_timeout_secs",
        "an agent that prints nothing for this long is stopped, and the attempt has failed",
    ),
    key(
        "grace_secs",
        "SIGTERM to SIGKILL when stopping an agent's or a gate command's process group",
    ),
    key(
        "gate_timeout_secs",
        "how long a gate's commands may run, all of them together (a formula step's `timeout` \
         wins)",
    ),
    key(
        "shutdown_grace_secs",
        "how long running agents may finish after SIGTERM before they are stopped (their steps \
         run again after the restart)",
    ),
    key(
        "output_cap_bytes",
        "bytes kept of each of an attempt's stdout and stderr in its run folder; the rest is cut \
         with a marker line",
    ),
    key(
        "max_file_bytes",
        "the largest file the daemon commits of an agent's work: an attempt that leaves a larger \
         one in the worktree fails, with a comment on the bead naming it, and the file is never \
         read (so a huge file cannot make the daemon huge)",
    ),
    key(
        "pause_secs",
        "a model that reports a usage limit, or dispatching after a failure no retry fixes (a \
         refused key, an unreachable API, a step the daemon cannot prepare), is paused this \
         long, doubling on each repeat up to `max_pause_secs`",
    ),
    key("max_pause_secs", "the longest such pause"),
    key(
        "dirty_target_retry_secs",
        "wait before trying again to merge into a target whose checkout has uncommitted changes",
    ),
    key(
        "budget_usd",
        "US dollars the agents may spend on one bead: a Claude Code attempt may spend what is \
         left (`--max-budget-usd`), and the bead is blocked once its agents report more; 0 \
         turns it off",
    ),
    key(
        "daily_budget_usd",
        "US dollars all agents may spend in one UTC day: once reached, no agent attempt starts \
         until the next day (gates and merges go on); 0 turns it off",
    ),
    key(
        "total_budget_usd",
        "US dollars all agents may spend over the store's life: once reached, no agent \
         attempt starts until it is raised; 0 (the default) is no limit",
    ),
    key(
        "max_turns",
        "turns one Claude Code attempt may take (`--max-turns`); 0 turns it off",
    ),
    key(
        "allow_unconfined_root",
        "let a daemon running as root use a profile with `sandbox = \"none\"`, whose agents \
         then hold every capability; off, such a config is refused",
    ),
    key(
        "gate_sandbox",
        "how gates' commands are confined: \"bwrap\" (the default on Linux) runs them in the \
         agents' sandbox, worktree writable; \"none\" runs them with the daemon's rights \
         (logged); a formula's gate may say `sandbox = \"none\"` for itself",
    ),
    key(
        "gate_network",
        "what a sandboxed gate reaches: \"none\" (its own loopback) or \"open\"",
    ),
    key(
        "gate_writable",
        "paths a sandboxed gate may write besides its worktree and a private /tmp (a build \
         tool's cache, e.g. \"~/.cargo\"); missing ones are skipped",
    ),
    key(
        "max_processes",
        "processes (threads too) one agent attempt or gate may have at once; 0 turns it off",
    ),
    key(
        "agent_nice",
        "scheduling niceness of agents and gates (0-19): they yield the CPU to the daemon's \
         own work; 0 runs them at the daemon's priority",
    ),
    key(
        "workflow_files",
        "`.gitignore`-like patterns of the files that decide what the daemon runs: a bead \
         changing one waits for `ctl approve` before its merge; `[]` turns this off",
    ),
    key(
        "aspects",
        "aspect formulas applied, in order, to every bead's formula when it is poured; a bead \
         adds its own with `aspect:<name>` labels",
    ),
    Key {
        key: "catalyst_bin",
        note: "the `catalyst` the agents' hooks run; unset by default: the one next to \
               catalystd, else the first on PATH",
        example: Some("\"/usr/local/bin/catalyst\""),
    },
    Key {
        key: "webhooks",
        note: "where notices of what needs a person (an approval, a blocked bead, paused \
               dispatching or forge work, a budget reached) and of merges are posted: `name`, \
               `url`, `format` (\"json\" or \"slack\"), `notices` (\"approval\", \"blocked\", \
               \"paused\", \"budget\", \"merged\"; all by default), `tries` (8) and \
               `retry_secs` (2, doubling); none by default (a reload puts a change in force)",
        example: Some(
            "[{ name = \"team\", url = \"https://hooks.slack.com/services/...\", format = \"slack\" }]",
        ),
    },
    Key {
        key: "forge",
        note: "the forge (GitHub, or Forgejo and Gitea) beads' merges go to as pull requests, and \
               whose labelled issues become beads: `kind` (\"github\" or \"forgejo\", which \
               Gitea is too), `repository` (\"owner/name\"), `token_file` \
               (readable only by the daemon's user; agents never see it), `api_url` and `remote` \
               (the public instance's by default), `issue_label` (no issues are taken without \
               it), `pull_requests` (true; false merges locally), `poll_secs` (30) and \
               `blocked_label` (\"catalyst: blocked\"); none by default (changing it needs a \
               restart)",
        example: Some(
            "{ kind = \"github\", repository = \"acme/widgets\", token_file = \"/etc/catalyst/github-token\", issue_label = \"catalyst\" }",
        ),
    },
    key(
        "profiles",
        "agent profiles, `[profiles.<name>]` with `command`, `format`, `stdin`, `env`, \
         `sandbox`, `network`, `writable` and `model_hosts`; a profile named after a built-in \
         one changes only the keys it sets, any other name needs `command`",
    ),
    key(
        "models",
        "per model name the roles use, `[models.<name>]` with `id` (what `{model}` becomes; \
         default: the name) and `max_concurrent` (agents of that model at once; default: no \
         limit of its own)",
    ),
    key(
        "role_models",
        "the model each role runs with, over the built-in ones",
    ),
    key(
        "tool_policy",
        "per agent role, `[tool_policy.<role>]` with `access` (`read-only` or `worktree`) and \
         `tools` (what `--tools` offers a Claude Code agent), over the built-in ones",
    ),
    key(
        "vars",
        "values for formula vars in this workspace (`test_command = \"cargo test\"`), used by \
         every formula that declares the var unless the bead gives its own; unlike a bead from \
         the inbox or the followed beads file, they may choose a gate's command",
    ),
    key("router", "retries, escalation and the fix loop"),
    key(
        "router.max_attempts",
        "attempts with the step's own model before one attempt with `escalation_model`",
    ),
    key(
        "router.escalation_model",
        "the model of that one extra attempt; \"\" blocks the step instead",
    ),
    key(
        "router.max_fix_iterations",
        "the rejection that blocks the bead instead of asking for another fix (a formula \
         step's own value wins): 3 allows two fixes",
    ),
    key(
        "router.retry_delay_secs",
        "the wait before the first retry of a failed attempt, doubling for each further one \
         (at most 15 minutes); 0 retries at once",
    ),
    key(
        "merge",
        "how a finished bead lands on `target_branch`, and whom the daemon's commits name",
    ),
    key(
        "merge.strategy",
        "`merge` (a merge commit, `target_branch` its first parent), `squash` (one commit) or \
         `rebase` (the bead's commits replayed, then a fast-forward); a formula's merge step \
         may say `merge_strategy`",
    ),
    key(
        "merge.author",
        "the author of the daemon's commits, `Name <email>`; \"\" takes the repository's \
         `user.name` and `user.email`",
    ),
    key("merge.committer", "the committer of the daemon's commits"),
    key(
        "beads",
        "following a beads export file: its open issues with `label` become work, and their \
         final statuses are written back",
    ),
    Key {
        key: "beads.watch",
        note: "the export file, relative to the workspace; unset by default: none is followed \
               (changing it needs a restart)",
        example: Some("\".beads/issues.jsonl\""),
    },
    key("beads.label", "the label that makes an issue work"),
    key(
        "beads.close_command",
        "writes a `closed` status back; `{id}`, `{status}` and `{reason}` are filled in",
    ),
    key(
        "beads.update_command",
        "writes any other final status (`blocked`) back",
    ),
    key(
        "beads.retry_secs",
        "wait after a failed write-back, doubling up to ten minutes",
    ),
    key(
        "web",
        "the web dashboard: off unless `listen` is set here or `catalystd --web ADDR` is given",
    ),
    Key {
        key: "web.listen",
        note: "the address and port to serve on; every page needs the token the daemon writes \
               to .catalyst/web.token at each start (changing it needs a restart)",
        example: Some("\"127.0.0.1:7400\""),
    },
    key(
        "web.allow_remote",
        "let `listen` be an address other than loopback (the traffic is plain HTTP)",
    ),
    key(
        "web.hosts",
        "host names a request's `Host` may give besides the listening address and localhost \
         (the name people reach a remote dashboard by); any other is refused",
    ),
    key(
        "cluster",
        "agents on other machines: off unless `nats` names servers; then `catalyst worker` \
         processes run the agents' attempts (gates and merges stay here)",
    ),
    key(
        "cluster.nats",
        "the NATS servers (JetStream on), e.g. [\"tls://10.0.0.1:4222\", \
         \"tls://10.0.0.2:4222\"]: several of one cluster, so one may be down (changing it \
         needs a restart); a server off this machine takes `tls://` unless `insecure`",
    ),
    Key {
        key: "cluster.workers",
        note: "the workers the daemon trusts, by name, with each one's public key (`catalyst \
               cluster-key FILE` prints it): leases, ends and presence are taken from these \
               only, signed with their keys; required with `nats` (read at start)",
        example: Some("{ build-7 = \"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\" }"),
    },
    Key {
        key: "cluster.key_file",
        note: "the seed of the daemon's own key, which signs its orders and cancels (workers \
               take its public key as `--daemon-key`; the daemon logs it at start); unset: \
               `.catalyst/cluster.nk`, made at the first start",
        example: Some("\"/etc/catalyst/daemon.nk\""),
    },
    key(
        "cluster.insecure",
        "speak plain `nats://` to servers off this machine: orders (prompts, code) and ends \
         (verdicts) then cross the network in clear",
    ),
    Key {
        key: "cluster.tls_ca_file",
        note: "CA certificates (PEM) the NATS servers' TLS certificates are checked against, \
               besides the system's (workers: `--tls-ca`)",
        example: Some("\"/etc/catalyst/nats-ca.pem\""),
    },
    Key {
        key: "cluster.nkey_file",
        note: "a file holding the seed of the daemon's NATS nkey user, for servers that list \
               nkey users with permissions (workers: `--nats-nkey`); one of `token_file`, \
               `credentials_file` and `nkey_file`",
        example: Some("\"/etc/catalyst/nats-daemon.nk\""),
    },
    Key {
        key: "cluster.credentials_file",
        note: "a NATS credentials file (a user JWT and its seed), for servers of an operator \
               set-up (workers: `--nats-creds`)",
        example: Some("\"/etc/catalyst/daemon.creds\""),
    },
    Key {
        key: "cluster.token_file",
        note: "a file holding the token the NATS servers ask for, read at start (workers: \
               `--nats-token-file`); a user and password can go in the `nats` URLs instead",
        example: Some("\"/etc/catalyst/nats-token\""),
    },
    Key {
        key: "cluster.remote",
        note: "the git repository the daemon and its workers share: a path, ssh:// or https:// \
               URL (used with the `git` command and its credentials); required with `nats`",
        example: Some("\"ssh://git@example.com/team/repo.git\""),
    },
    key(
        "cluster.name",
        "the prefix of this daemon's subjects and streams, so several workspaces can share \
         one NATS cluster",
    ),
    key(
        "cluster.lease_secs",
        "a worker silent this long on an attempt loses it: recorded as interrupted (not \
         counted) and handed out again",
    ),
    key(
        "cluster.keep_refs_secs",
        "a finished bead's refs stay this long in the shared remote, so a bead starting from \
         its commit needs no push (0: deleted at once)",
    ),
    Key {
        key: "cluster.replicas",
        note: "copies of each JetStream stream; unset: 3, or the number of `nats` servers if \
               fewer",
        example: Some("3"),
    },
];

const HEADER: &str = "\
# catalyst daemon configuration. Every key is optional, and each `# key = value` line below
# shows the built-in default, commented out (the keys that are unset by default show an
# example instead, as their notes say). Uncomment a line to change it; unknown keys are
# refused by name. The daemon reloads this file when it changes and on SIGHUP; a broken edit
# is refused and the old config stays in force.
";

/// Notes are wrapped to lines of at most this many characters.
const WIDTH: usize = 96;

/// The commented config: [`HEADER`], then each of [`KEYS`] with its note and its default.
pub fn commented() -> String {
    let defaults =
        toml::Table::try_from(Config::default()).expect("the default config serializes to TOML");
    let mut out = String::from(HEADER);
    for key in KEYS {
        out.push('\n');
        push_note(&mut out, key.note);
        let (table, name) = match key.key.split_once('.') {
            Some((table, name)) => (defaults.get(table).and_then(toml::Value::as_table), name),
            None => (Some(&defaults), key.key),
        };
        match (table.and_then(|t| t.get(name)), key.example) {
            // A table inside a table, shown inline.
            (Some(toml::Value::Table(_)), Some(example)) => {
                out.push_str(&format!("# {name} = {example}\n"))
            }
            (Some(toml::Value::Table(_)), None) => {
                if let Some(builtin) = builtin_entries(key.key) {
                    push_note(&mut out, &builtin);
                }
                out.push_str(&format!("# [{}]\n", key.key));
            }
            (Some(value), _) => out.push_str(&format!("# {name} = {value}\n")),
            (None, Some(example)) => out.push_str(&format!("# {name} = {example}\n")),
            // A key with neither: the tests refuse it.
            (None, None) => {}
        }
    }
    out
}

/// What a table of entries holds without any in the config: the built-in profiles, models
/// per role and tool policies, from the code that defines them.
fn builtin_entries(table: &str) -> Option<String> {
    let agent_roles = || Role::ALL.into_iter().filter(|r| r.is_agent());
    let list = match table {
        "profiles" => BUILTIN_PROFILES.map(|p| format!("`{p}`")).join(", "),
        "role_models" => agent_roles()
            .filter_map(|role| Some(format!("{role} `{}`", role.default_model()?)))
            .collect::<Vec<_>>()
            .join(", "),
        "tool_policy" => {
            // Roles with the same policy together, in the order of `Role::ALL`.
            let mut groups: Vec<(RolePolicy, Vec<String>)> = Vec::new();
            for role in agent_roles() {
                let policy = RolePolicy::default_for(role);
                match groups.iter_mut().find(|(p, _)| *p == policy) {
                    Some((_, roles)) => roles.push(role.to_string()),
                    None => groups.push((policy, vec![role.to_string()])),
                }
            }
            groups
                .iter()
                .map(|(policy, roles)| {
                    format!(
                        "{} `{}` with `{}`",
                        roles.join(", "),
                        policy.access.as_str(),
                        policy.tools.as_deref().unwrap_or_default().join(" ")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        }
        _ => return None,
    };
    Some(format!("built in: {list}"))
}

/// `note` as comment lines, wrapped at [`WIDTH`].
fn push_note(out: &mut String, note: &str) {
    let mut line = String::from("#");
    for word in note.split_whitespace() {
        if line.len() > 1 && line.len() + 1 + word.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}
