//! The real Codex CLI (`codex exec --json`), driven by the daemon through the shipped `codex`
//! profile, against the mock Responses API.

use std::path::Path;

use catalyst::domain::agent::profile::AgentProfile;
use serde_json::Value;

use crate::anthropic::Turn as Answer;
use crate::isolate::{agent_bin, in_netns, runtime};
use crate::openai::{user_text, MockOpenAi, Turn};
use catalyst_testkit::{bead, TestDaemon};

/// The shipped Codex profile with the installed binary and a throwaway `CODEX_HOME` whose
/// config points the model provider at `mock`; every role's model maps to `gpt-5`.
pub(crate) fn config(root: &Path, mock: &MockOpenAi) -> String {
    let home = root.join("home");
    let codex_home = root.join("codex-home");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&codex_home).expect("codex home");
    // `OPENAI_BASE_URL` alone does not move Codex 0.169 off api.openai.com (it tries a
    // WebSocket there first); a model provider in its config does.
    let provider = format!(
        "model_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = {}\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\nsupports_websockets = false\n",
        toml::Value::String(mock.url.clone())
    );
    std::fs::write(codex_home.join("config.toml"), provider).expect("codex config");
    let mut profile = AgentProfile::codex();
    profile.command[0] = agent_bin("codex")
        .expect("codex is installed")
        .display()
        .to_string();
    for (k, v) in [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("OPENAI_BASE_URL", mock.url.clone()),
        ("OPENAI_API_KEY", "sk-test-dummy".into()),
    ] {
        profile.env.insert(k.into(), v);
    }
    let mut table = toml::Table::new();
    table.insert("agent".into(), "real".into());
    table.insert("stall_timeout_secs".into(), 60.into());
    table.insert("agent_timeout_secs".into(), 120.into());
    table.insert("grace_secs".into(), 2.into());
    let mut profiles = toml::Table::new();
    profiles.insert(
        "real".into(),
        toml::Value::try_from(&profile).expect("profile as TOML"),
    );
    table.insert("profiles".into(), profiles.into());
    let mut models = toml::Table::new();
    for name in ["sonnet", "haiku", "opus"] {
        let mut m = toml::Table::new();
        m.insert("id".into(), "gpt-5".into());
        models.insert(name.into(), m.into());
    }
    table.insert("models".into(), models.into());
    toml::to_string(&table).expect("config as TOML")
}

/// A final message with a result block, as the Claude mock writes it.
fn done(text: &str, summary: &str, extra: &[&str]) -> Turn {
    match Answer::done(text, summary, extra) {
        Answer::Text(t) => Turn::Text(t),
        _ => unreachable!("done() is a text answer"),
    }
}

#[test]
fn an_implement_step_through_codex_exec_writes_a_file() {
    if !in_netns(
        "codex::an_implement_step_through_codex_exec_writes_a_file",
        "codex",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockOpenAi::start(vec![
            (
                "refine",
                vec![done("Plan: write hello.txt.", "planned", &[])],
            ),
            (
                "implement",
                vec![
                    Turn::Exec("printf 'hello\\n' > {worktree}/hello.txt".into()),
                    done("Wrote it.", "wrote hello.txt with codex", &[]),
                ],
            ),
            (
                "review",
                vec![done("Fine.", "hello.txt is right", &["VERDICT: APPROVED"])],
            ),
            (
                "merge",
                vec![done("Up to date.", "up to date with main", &[])],
            ),
        ])
        .await;
        let daemon = {
            let mock = mock.clone();
            TestDaemon::start_with(move |root| config(root, &mock)).await
        };
        let id = daemon.submit(bead("Say hello")).await;
        daemon.wait_status(&id, "closed").await;
        assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
        let events = daemon.events().await;
        let result = events
            .iter()
            .find(|e| e["type"] == "step.result" && e["step"] == format!("{id}.implement"))
            .expect("the implement step's result");
        assert_eq!(result["outcome"], "finished", "{result}");
        assert_eq!(
            result["summary"], "wrote hello.txt with codex",
            "the final agent_message's block: {result}"
        );
        let implement = mock.conversation("implement");
        assert!(
            user_text(&implement[0].body).contains("You are the implementation step"),
            "the prompt reached Codex as its argument"
        );
        let stdout = std::fs::read_to_string(daemon.run_dir(&id, "implement", 1).join("stdout"))
            .expect("the implement step's stdout");
        let ran = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| {
                e["type"] == "item.completed"
                    && e["item"]["type"] == "command_execution"
                    && e["item"]["exit_code"] == 0
            });
        assert!(ran, "Codex ran the command: {stdout}");
    });
}
