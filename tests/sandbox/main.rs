//! Escapes: an agent in a writing role tries to reach beyond its attempt, and the operating
//! system's sandbox refuses. The agent is stub-claude running shell commands past every hook
//! (the scenario's `shell`), so what stops it here is the sandbox alone; each test fails when
//! the sandbox is off. The attempt and the daemon carry on: every bead still closes.

mod control;
mod files;
mod formulas;
mod gates;
mod git;
mod paths;
mod processes;
mod readonly;
mod root;

use catalyst_testkit::{bead, TestDaemon};
use stub_claude::ShellEntry;

/// Whether the escape tests can run: without bubblewrap they say so and skip.
pub fn skip() -> bool {
    if catalyst_testkit::sandboxed() {
        return false;
    }
    println!("SKIPPED: bubblewrap is not installed (run .ci/install-test-deps)");
    true
}

/// From a bead's worktree (`<repo>/.catalyst/worktrees/<bead>`), the main checkout.
pub const MAIN_CHECKOUT: &str = "../../..";
/// From a bead's worktree, the daemon's state folder.
pub const STATE: &str = "../..";

/// A scenario whose implement agent runs `commands` (TOML strings) and then reports DONE
/// with a file written, so the bead goes on to merge.
pub fn implement_runs(commands: &[&str]) -> String {
    let commands: Vec<String> = commands
        .iter()
        .map(|c| toml::Value::String((*c).to_owned()).to_string())
        .collect();
    format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ shell = [{}], write = {{ \"done.txt\" = \"done\\n\" }}, summary = \"tried\" }}]\n",
        commands.join(", ")
    )
}

/// Runs one bead whose implement agent runs `commands`; returns the daemon (for what the test
/// checks next) and what each command printed, once the bead has closed.
pub async fn attempt(commands: &[&str]) -> (TestDaemon, Vec<ShellEntry>) {
    attempt_with(commands, |_| {}).await
}

/// [`attempt`], with `setup` run on the workspace before the bead is submitted.
pub async fn attempt_with(
    commands: &[&str],
    setup: impl FnOnce(&catalyst_testkit::Workspace),
) -> (TestDaemon, Vec<ShellEntry>) {
    attempt_configured(commands, "", setup).await
}

/// [`attempt_with`], with `config` added to the workspace's config.
pub async fn attempt_configured(
    commands: &[&str],
    config: &str,
    setup: impl FnOnce(&catalyst_testkit::Workspace),
) -> (TestDaemon, Vec<ShellEntry>) {
    let daemon = TestDaemon::start(&implement_runs(commands), config).await;
    setup(&daemon);
    let id = daemon.submit(bead("Try to get out")).await;
    daemon.wait_status(&id, "closed").await;
    let shell = implement_shell(&daemon, commands.len());
    (daemon, shell)
}

/// Runs a bead whose implement agent runs `commands` while another bead, `cat-gated`, waits
/// for a person's approval; returns the daemon and what each command printed, once the bead
/// has closed.
pub async fn attempt_beside_a_waiting_approval(commands: &[&str]) -> (TestDaemon, Vec<ShellEntry>) {
    let scenario = format!(
        "[[rule]]\nrole = \"implement\"\nbead = \"cat-gated\"\nresponses = [{{ write = {{ \"impl.txt\" = \"impl\\n\" }} }}]\n\n{}",
        implement_runs(commands)
    );
    let daemon = TestDaemon::start(&scenario, "").await;
    daemon.submit_gated_waiting("cat-gated", "true").await;
    let id = daemon.submit(bead("Tries to get past the approval")).await;
    daemon.wait_status(&id, "closed").await;
    let shell = daemon
        .invocations()
        .into_iter()
        .find(|i| i.bead.as_deref() == Some(id.as_str()) && i.role() == "implement")
        .expect("the second bead's agent ran")
        .shell;
    assert_eq!(shell.len(), commands.len(), "every command ran: {shell:?}");
    (daemon, shell)
}

/// What each of the `n` commands the implement agent ran printed.
pub fn implement_shell(daemon: &TestDaemon, n: usize) -> Vec<ShellEntry> {
    let shell = daemon
        .invocations()
        .into_iter()
        .find(|i| i.role() == "implement")
        .expect("the implement agent ran")
        .shell;
    assert_eq!(shell.len(), n, "every command ran: {shell:?}");
    shell
}
