//! Setting up: `catalyst init` on a fresh repository, service files for systemd and launchd,
//! completions and man pages.

use std::path::Path;

use nix::sys::signal::Signal;

use catalyst_testkit::cli::{catalyst, have};
use catalyst_testkit::{catalystd_bin, Workspace};

/// An implement step must change the worktree to be believed.
const IMPLEMENT_WRITES: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_then_catalystd_then_submit_works_with_no_other_setup() {
    let ws = Workspace::bare(IMPLEMENT_WRITES);
    let repo = ws.repo.to_str().expect("utf-8 path");
    let (code, out, err) = catalyst(&ws.repo, &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("wrote") && out.contains("config.toml"),
        "{out}"
    );
    assert!(
        out.contains("claude"),
        "names the agent CLIs it looked for: {out}"
    );
    let exclude = std::fs::read_to_string(ws.repo.join(".git/info/exclude")).expect("exclude");
    assert!(exclude.lines().any(|l| l == ".catalyst/"), "{exclude}");

    // The one thing a test must add: stub-claude as the agent instead of Claude Code.
    let config = ws.paths.config();
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&ws.stub_config());
    std::fs::write(&config, text).expect("config");

    let mut daemon = ws.spawn();
    daemon.client().await;
    let (code, out, err) = catalyst(&ws.repo, &["ctl", "submit", "--title", "Hello"]);
    assert_eq!(code, 0, "{out}{err}");
    let id = out
        .trim()
        .strip_prefix("submitted ")
        .expect("an id")
        .to_owned();
    daemon.wait_status(&id, "closed").await;

    let git = git2::Repository::open(repo).expect("repo");
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true);
    let statuses = git.statuses(Some(&mut opts)).expect("status");
    let dirty: Vec<String> = statuses
        .iter()
        .filter_map(|s| s.path().ok().map(str::to_owned))
        .collect();
    assert!(dirty.is_empty(), "`.catalyst/` is excluded: {dirty:?}");

    // Again, with the prompts: existing files are kept, the copies load.
    let (code, out, err) = catalyst(&ws.repo, &["init", "--with-prompts"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("kept") && out.contains("config.toml"), "{out}");
    assert!(ws.paths.prompts().is_file());
    let formula = ws.paths.state.join("formulas/feature.formula.toml");
    assert!(formula.is_file(), "{out}");
    let (code, out, err) = catalyst(
        &ws.repo,
        &[
            "formula",
            "check",
            "--prompts",
            ws.paths.prompts().to_str().expect("utf-8"),
            formula.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

/// `init` told people to install Claude Code whenever `claude` was not on PATH, even when the
/// config it kept runs another agent.
#[test]
fn init_asks_for_the_program_of_the_configured_agent_only() {
    // The stub's profile runs this build's `catalyst`, by its path.
    let ws = Workspace::new("", "");
    let (code, out, err) = catalyst(&ws.repo, &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("kept"), "{out}");
    assert!(
        !out.contains("the agent profile") && !out.contains("Claude Code"),
        "no advice about an agent the config does not run: {out}"
    );

    std::fs::write(
        ws.paths.config(),
        "agent = \"mine\"\n[profiles.mine]\ncommand = [\"/nonexistent/agent\", \"-p\"]\n",
    )
    .expect("config");
    let (code, out, err) = catalyst(&ws.repo, &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "the agent profile `mine` runs `/nonexistent/agent`, which is not an executable file"
        ),
        "{out}"
    );
    assert!(!out.contains("runs `claude`"), "{out}");
}

/// A repository whose branch is `master` failed every step with "target branch `main` does
/// not exist"; `init` says so at once, and that the agent CLI runs.
#[test]
fn init_checks_the_target_branch_and_that_the_agent_cli_runs() {
    let ws = Workspace::new("", "");
    let (code, out, err) = catalyst(&ws.repo, &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("target branch `main` at "), "{out}");
    assert!(
        out.contains("agent CLI `") && out.contains("` runs: "),
        "the stub profile's program answered --version: {out}"
    );

    let repo = git2::Repository::open(&ws.repo).expect("repo");
    let mut main = repo
        .find_branch("main", git2::BranchType::Local)
        .expect("main");
    main.rename("master", false).expect("rename main to master");
    let (code, out, err) = catalyst(&ws.repo, &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("target branch `main` does not exist")
            && out.contains("target_branch = \"master\""),
        "{out}"
    );
}

#[test]
fn init_refuses_a_folder_that_is_not_a_repository() {
    let dir = tempfile::tempdir().expect("temp");
    let (code, _, err) = catalyst(dir.path(), &["init"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("not the top folder of a git repository"),
        "{err}"
    );
}

#[test]
fn catalystd_refuses_a_folder_that_is_not_a_repository_and_writes_nothing_there() {
    let dir = tempfile::tempdir().expect("temp");
    let out = std::process::Command::new(catalystd_bin())
        .arg("--workspace")
        .arg(dir.path())
        .output()
        .expect("run catalystd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the workspace must be one"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
}

/// The path of this build's `catalystd`, as the service files name it.
fn catalystd() -> String {
    catalystd_bin().display().to_string()
}

fn install(ws: &Workspace, units: &Path, extra: &[&str]) -> String {
    let catalystd = catalystd();
    let mut args = vec![
        "service",
        "install",
        "--workspace",
        ws.repo.to_str().expect("utf-8"),
        "--unit-dir",
        units.to_str().expect("utf-8"),
        "--catalystd",
        &catalystd,
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = catalyst(&ws.root, &args);
    assert_eq!(code, 0, "{out}{err}");
    out
}

/// `systemd-analyze verify` on a unit file; its complaints are the test's failure.
fn verify(unit: &Path) {
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .expect("systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "{}: {stderr}",
        unit.display()
    );
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    if !have("systemd-analyze") {
        return;
    }
    let ws = Workspace::bare("");
    let units = ws.root.join("units");
    let out = install(&ws, &units, &["--user"]);
    let user_unit = std::fs::read_dir(&units)
        .expect("units")
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| p.extension().is_some_and(|e| e == "service"))
        .expect("a user unit");
    let name = user_unit
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        out.contains(&format!("systemctl --user enable --now {name}")),
        "{out}"
    );
    let text = std::fs::read_to_string(&user_unit).expect("unit");
    assert!(text.contains("Type=notify"), "{text}");
    // Filled in, readable by people, with no word of placeholders left.
    assert!(!text.contains('@'), "{text}");
    assert!(!text.contains("placeholder"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&user_unit)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "the unit is written 0644");
    assert!(
        text.contains(&format!(
            "EnvironmentFile=-{}/.catalyst/env",
            ws.repo.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "ExecStart={} --workspace {}",
            catalystd(),
            ws.repo.display()
        )),
        "{text}"
    );
    verify(&user_unit);

    install(&ws, &units, &[]);
    let template = units.join("catalystd@.service");
    let escaped = catalyst::cli::service::escape_path(ws.repo.to_str().expect("utf-8"));
    if have("systemd-escape") {
        let out = std::process::Command::new("systemd-escape")
            .arg("--path")
            .arg(&ws.repo)
            .output()
            .expect("systemd-escape");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), escaped);
    }
    // A template is verified as one of its instances: this workspace's.
    let instance = units.join(format!("catalystd@{escaped}.service"));
    std::fs::copy(&template, &instance).expect("instance");
    verify(&instance);
    std::fs::remove_file(&instance).expect("instance");

    // Uninstall refuses while the unit is enabled, then removes it.
    let wants = units.join("default.target.wants");
    std::fs::create_dir_all(&wants).expect("wants");
    std::os::unix::fs::symlink(&user_unit, wants.join(&name)).expect("enable");
    let units_arg = units.to_str().expect("utf-8");
    let repo_arg = ws.repo.to_str().expect("utf-8");
    let catalystd = catalystd();
    let uninstall = [
        "service",
        "uninstall",
        "--user",
        "--workspace",
        repo_arg,
        "--unit-dir",
        units_arg,
        "--catalystd",
        &catalystd,
    ];
    let (code, _, err) = catalyst(&ws.root, &uninstall);
    assert_eq!(code, 2);
    assert!(err.contains("disable --now"), "{err}");
    std::fs::remove_file(wants.join(&name)).expect("disable");
    let (code, out, err) = catalyst(&ws.root, &uninstall);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!user_unit.exists());
}

#[test]
fn the_launchd_agent_is_a_valid_plist_naming_catalystd_and_the_workspace() {
    if !have("python3") {
        return;
    }
    let ws = Workspace::bare("");
    let dir = ws.root.join("agents");
    let out = install(&ws, &dir, &["--platform", "launchd"]);
    assert!(out.contains("launchctl bootstrap gui/$(id -u)"), "{out}");
    let plist = std::fs::read_dir(&dir)
        .expect("agents")
        .filter_map(|e| Some(e.ok()?.path()))
        .next()
        .expect("a plist");
    let script = "import json, plistlib, sys\n\
                  d = plistlib.load(open(sys.argv[1], 'rb'))\n\
                  print(json.dumps(d))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&plist)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        parsed["ProgramArguments"],
        serde_json::json!([catalystd(), "--workspace", ws.repo.to_str().expect("utf-8")])
    );
    let label = parsed["Label"].as_str().expect("label");
    assert_eq!(
        plist.file_name().expect("name").to_string_lossy(),
        format!("{label}.plist")
    );
    assert_eq!(parsed["KeepAlive"]["SuccessfulExit"], false);
    assert!(parsed["EnvironmentVariables"]["PATH"].is_string());
}

#[test]
fn completions_and_man_pages_come_from_the_cli_definition() {
    let dir = tempfile::tempdir().expect("temp");
    let (code, script, err) = catalyst(dir.path(), &["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        script.contains("catalyst__subcmd__ctl__subcmd__submit"),
        "ctl subcommands are completed"
    );
    if have("bash") {
        let file = dir.path().join("catalyst.bash");
        std::fs::write(&file, &script).expect("script");
        let ok = std::process::Command::new("bash")
            .arg("-n")
            .arg(&file)
            .status()
            .expect("bash");
        assert!(ok.success(), "the bash script parses");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let (code, script, err) = catalyst(dir.path(), &["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(!script.is_empty());
    }
    let (code, page, err) = catalyst(dir.path(), &["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH catalyst 1"), "{page}");
    assert!(page.contains("init"), "subcommands are listed");
    let pages = dir.path().join("man");
    let (code, _, err) = catalyst(
        dir.path(),
        &["man", "--dir", pages.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    for page in ["catalyst.1", "catalyst-ctl.1", "catalyst-service-install.1"] {
        assert!(pages.join(page).is_file(), "{page}");
    }
}
