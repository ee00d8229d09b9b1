//! The daemon and the forge end to end: a labelled issue becomes a bead, its merge pushes the
//! branch to a real remote (`git daemon` on loopback) and opens a pull request on the mock
//! forge behind Prism (as GitHub, and as Forgejo), a request for changes becomes a fix whose
//! commit updates the pull request, and the merge on the forge closes the bead and the issue;
//! a webhook hears the merge once. The forge's token is out of reach of the bead's agents and
//! gates. A rate limit pauses forge work only, a push finds its own commit already on the
//! remote (a crash lost its record), and a pull request closed unmerged cancels its bead.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use catalyst_testkit::forge::prism::{validated_as, Api, Validated};
use catalyst_testkit::forge::Failure;
use catalyst_testkit::{bead_of, Workspace};

use catalyst_testkit::poll::eventually;

use crate::{git, GitRemote, TOKEN};

/// The shared mock speaking `api` behind Prism; `None`, saying which test skips, without
/// Prism.
fn setup(api: Api, test: &str) -> Option<&'static Validated> {
    let v = validated_as(api);
    if v.is_none() {
        eprintln!("skipping {test}: Prism is not available (see above)");
    }
    v
}

/// What a test runs against: the shared mock speaking `api` behind Prism, a bare repository
/// served by `git daemon` as the remote, the token in a file only its owner may read (outside
/// `/tmp`, which the sandbox replaces anyway), and a webhook receiver. `None`, saying why,
/// without Prism or `git daemon`.
struct Scene {
    v: &'static Validated,
    remote: GitRemote,
    token: std::path::PathBuf,
    hook: String,
    heard: Arc<Mutex<Vec<Value>>>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn scene(api: Api, test: &str, remote: &str) -> Option<Scene> {
    let v = setup(api, test)?;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let remote = GitRemote::serve(dir.path(), remote).await?;
    let secrets =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a folder for the token");
    let token = token_file(secrets.path());
    let (hook, heard) = receiver().await;
    Some(Scene {
        v,
        remote,
        token,
        hook,
        heard,
        _dirs: (dir, secrets),
    })
}

/// An implementer, then the merge; `{gate}` is where a gate goes.
const FLOW: &str = r#"
formula = "flow"
[[steps]]
id = "implement"
title = "Implement"
role = "implement"
{gate}
[[steps]]
id = "merge"
title = "Merge"
role = "merge"
needs = ["{before_merge}"]
"#;

/// A gate that runs the project's code with the daemon's view: it fails if it can read the
/// forge's token.
const PEEKING_GATE: &str = r#"
[[steps]]
id = "peek"
title = "Peek"
role = "gate"
run = ["if grep -q ghp_ '{token}'; then exit 1; fi"]
max_fix_iterations = 1
needs = ["implement"]
"#;

/// The implementer writes the feature and looks for the token where an agent could find it
/// (the token file, its environment, its context); the fixer answers the review.
const SCENARIO: &str = r#"
[[rule]]
role = "implement"
responses = [{ shell = ["echo feature > feature.txt; cat '{token}' > seen.txt 2>&1; env >> seen.txt; cat \"$CATALYST_CONTEXT\" >> seen.txt 2>&1; true"], summary = "wrote the feature" }]

[[rule]]
role = "fix"
responses = [{ shell = ["echo 'fixed: says why' >> feature.txt; cat \"$CATALYST_CONTEXT\" > fix-context.txt"], summary = "answered the review" }]
"#;

/// A token file only its owner may read, in `dir`: a folder outside `/tmp` (which the
/// sandbox replaces anyway), as `/etc/catalyst` would be.
fn token_file(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("github-token");
    std::fs::write(&path, format!("{TOKEN}\n")).expect("write the token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

/// A receiver of webhook posts on loopback: its URL and the bodies it got.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let keep = got.clone();
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let keep = keep.clone();
        async move {
            if let Ok(body) = serde_json::from_slice::<Value>(&body) {
                keep.lock().expect("receiver").push(body);
            }
            axum::http::StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// The `[forge]` kind of a mock's API.
fn kind(api: Api) -> &'static str {
    match api {
        Api::GitHub => "github",
        Api::Forgejo => "forgejo",
    }
}

/// The daemon's `[forge]` and webhook config for `repo` on the forge of `kind` at `api`.
fn forge_config(
    kind: &str,
    api: &str,
    repo: &str,
    remote: &str,
    token: &std::path::Path,
    hook: &str,
) -> String {
    format!(
        "forge = {{ kind = \"{kind}\", api_url = \"{api}\", repository = \"{repo}\", \
         token_file = \"{}\", remote = \"{remote}\", issue_label = \"catalyst\", poll_secs = 1 }}\n\
         webhooks = [{{ name = \"team\", url = \"{hook}\", notices = [\"merged\"] }}]\n",
        token.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issue_becomes_a_pull_request_that_a_review_fixes_and_a_merge_closes() {
    issue_to_merge(Api::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_forgejo_an_issue_becomes_a_pull_request_that_a_review_fixes_and_a_merge_closes() {
    issue_to_merge(Api::Forgejo).await;
}

/// A labelled issue through its bead, pull request, review, fix and merge on the mock forge
/// speaking `api`.
async fn issue_to_merge(api: Api) {
    let test =
        format!("an_issue_becomes_a_pull_request_that_a_review_fixes_and_a_merge_closes ({api:?})");
    let Some(Scene {
        v,
        remote,
        token,
        hook,
        heard,
        _dirs,
    }) = scene(api, &test, "flow.git").await
    else {
        return;
    };
    let repo = "acme/flow";
    let issue = v.mock.open_issue(
        repo,
        "Add a feature",
        "Please add feature.txt.",
        &["catalyst", "formula:flow"],
    );

    let token_text = token.display().to_string();
    let scenario = SCENARIO.replace("{token}", &token_text);
    let config = forge_config(kind(api), &v.url, repo, &remote.url, &token, &hook);
    let sandboxed = catalyst_testkit::sandboxed();
    let formula = if sandboxed {
        FLOW.replace("{gate}", &PEEKING_GATE.replace("{token}", &token_text))
            .replace("{before_merge}", "peek")
    } else {
        FLOW.replace("{gate}", "")
            .replace("{before_merge}", "implement")
    };
    // The formula is there before the daemon takes the issue; the remote has the branch the
    // pull request merges into.
    let ws = Workspace::new(&scenario, &config);
    ws.write_formula("flow", &formula);
    git(&ws.repo, &["push", "-q", &remote.url, "main"]);
    // A process of its own, so that it can be killed while its pull request waits.
    let mut daemon = ws.spawn();

    // The issue becomes a bead, with its title, body and labels.
    let created = daemon
        .wait_for("the issue to become a bead", |e| {
            e["type"] == "bead.created" && e["bead"]["title"] == "Add a feature"
        })
        .await;
    let id = created["bead"]["id"].as_str().expect("an id").to_owned();
    let labels = &created["bead"]["labels"];
    assert!(
        labels
            .as_array()
            .is_some_and(|l| l.contains(&"formula:flow".into())),
        "{labels}"
    );
    assert!(created["bead"]["description"]
        .as_str()
        .is_some_and(|d| d.contains("Please add feature.txt.")));

    // Its merge pushes the branch and opens the pull request.
    let opened = daemon
        .wait_for("the pull request to open", |e| {
            e["type"] == "forge.pushed" && e["bead"] == id.as_str()
        })
        .await;
    let number = opened["number"].as_u64().expect("a number");
    let first = opened["head"].as_str().expect("a head").to_owned();
    let branch = format!("catalyst/{id}");
    assert_eq!(
        git(
            &remote.bare,
            &["rev-parse", &format!("refs/heads/{branch}")]
        ),
        first,
        "the branch is on the remote"
    );
    // The agent was told the forge's target as fetched, not the local one nobody moves.
    let prompt = daemon
        .invocations()
        .into_iter()
        .find(|i| i.bead.as_deref() == Some(id.as_str()) && i.role() == "implement")
        .expect("the implementer ran")
        .prompt;
    assert!(
        prompt.contains("to be merged into `refs/catalyst/forge/main`"),
        "{prompt}"
    );
    let pull = v.mock.pull(repo, number).expect("the pull request");
    assert_eq!(
        (pull.head.as_str(), pull.base.as_str()),
        (branch.as_str(), "main")
    );
    assert!(pull.open && !pull.merged);
    assert!(pull.body.contains(&format!("Bead `{id}`")), "{}", pull.body);
    assert!(
        pull.body.contains(&format!("Closes #{issue}")),
        "{}",
        pull.body
    );
    assert!(
        pull.body
            .contains("**implement** (implement, done): wrote the feature"),
        "{}",
        pull.body
    );
    let show = daemon.show(&id).await;
    assert_eq!(show["bead"]["status"], "in_progress", "{show}");
    // `status` says what waits for people, and where.
    let (code, status, err) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0, "{err}");
    let url = opened["url"].as_str().unwrap_or_default();
    assert!(
        status.contains(&format!(
            "waiting for review: {id}: pull request #{number} {url}"
        )),
        "{status}"
    );

    // The issue is told where the work is, once.
    daemon
        .wait_for("the issue to be linked", |e| {
            e["type"] == "forge.issue_written" && e["bead"] == id.as_str() && e["write"] == "linked"
        })
        .await;
    let comments = v.mock.issue(repo, issue).expect("the issue").comments;
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains(&opened["url"].as_str().unwrap_or_default().to_owned()));

    // Killed while the pull request waits, the daemon takes it up again from its journal.
    daemon.kill().await;
    daemon.restart();
    daemon.call(catalyst::protocol::Method::Status).await;
    let (code, status, err) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        status.contains(&format!("pull request #{number}")),
        "{status}"
    );

    // A reviewer asks for changes: a fix answers them, and its commit updates the pull request.
    v.mock.request_changes(
        repo,
        number,
        "Please say why in feature.txt.",
        &[("feature.txt", 1, "why a feature?")],
    );
    daemon
        .wait_for("the request for changes to be taken", |e| {
            e["type"] == "forge.feedback" && e["bead"] == id.as_str()
        })
        .await;
    let updated = daemon
        .wait_for("the fix to be pushed", |e| {
            e["type"] == "forge.pushed" && e["bead"] == id.as_str() && e["head"] != first.as_str()
        })
        .await;
    assert_eq!(updated["number"], number, "the same pull request");
    let second = updated["head"].as_str().expect("a head");
    assert_eq!(
        git(
            &remote.bare,
            &["rev-parse", &format!("refs/heads/{branch}")]
        ),
        second
    );
    let feature = git(&remote.bare, &["show", &format!("{second}:feature.txt")]);
    assert_eq!(feature, "feature\nfixed: says why");
    let context = git(
        &remote.bare,
        &["show", &format!("{second}:fix-context.txt")],
    );
    assert!(
        context.contains("Please say why in feature.txt."),
        "{context}"
    );
    assert!(
        context.contains("`feature.txt`, line 1: why a feature?"),
        "{context}"
    );

    // A check `main` requires fails on the pull request's head: another fix, named after
    // it, and another push. A failing check nobody requires asks for nothing.
    let checked_sha = v
        .mock
        .pull(repo, number)
        .expect("the pull request")
        .head_sha;
    v.mock.require_checks(repo, "main", &["ci/test"]);
    v.mock.set_status(repo, &checked_sha, "ci/lint", "failure");
    v.mock.set_status(repo, &checked_sha, "ci/test", "failure");
    daemon
        .wait_for("the failing check to be taken", |e| {
            e["type"] == "forge.feedback"
                && e["bead"] == id.as_str()
                && e["answered_checks"] == checked_sha.as_str()
        })
        .await;
    let refixed = daemon
        .wait_for("the second fix to be pushed", |e| {
            e["type"] == "forge.pushed"
                && e["bead"] == id.as_str()
                && e["head"] != first.as_str()
                && e["head"] != second
        })
        .await;
    let third = refixed["head"].as_str().expect("a head");
    let context = git(&remote.bare, &["show", &format!("{third}:fix-context.txt")]);
    assert!(
        context.contains("Checks failing on") && context.contains("ci/test"),
        "{context}"
    );
    assert!(!context.contains("ci/lint"), "not required: {context}");

    // Approved and merged on the forge: the bead closes, and so does the issue.
    v.mock.approve(repo, number);
    v.mock.merge(repo, number);
    let closed = daemon.wait_status(&id, "closed").await;
    let reason = closed["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("merged by pull request #{number}")),
        "{closed}"
    );
    daemon
        .wait_for("the issue to be closed", |e| {
            e["type"] == "forge.issue_written" && e["bead"] == id.as_str() && e["write"] == "closed"
        })
        .await;
    assert!(!v.mock.issue(repo, issue).expect("the issue").open);

    // The webhook heard the merge once, and nothing was written to the issue twice.
    let sent = daemon
        .wait_for("the merge notice", |e| {
            e["type"] == "notify.sent" && e["kind"] == "merged"
        })
        .await;
    assert_eq!(sent["hook"], "team");
    let merged: Vec<Value> = heard
        .lock()
        .expect("receiver")
        .iter()
        .filter(|b| b["bead"] == id.as_str())
        .cloned()
        .collect();
    assert_eq!(merged.len(), 1, "{merged:?}");
    let writes = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "forge.issue_written")
        .count();
    assert_eq!(writes, 2, "linked and closed, once each");
    assert_eq!(
        v.mock.issue(repo, issue).expect("the issue").comments.len(),
        1
    );
    let beads = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "bead.created" && e["bead"]["title"] == "Add a feature")
        .count();
    assert_eq!(beads, 1, "the issue became one bead");

    // The token was out of the agents' and gates' reach.
    let seen = git(&remote.bare, &["show", &format!("{first}:seen.txt")]);
    assert!(!seen.contains(TOKEN), "an agent saw the token:\n{seen}");
    if sandboxed {
        let peek = format!("{id}.peek");
        let gate = daemon
            .wait_for("the peeking gate", |e| {
                (e["type"] == "gate.passed" || e["type"] == "gate.failed")
                    && e["step"] == peek.as_str()
            })
            .await;
        assert_eq!(gate["type"], "gate.passed", "a gate read the token: {gate}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_pauses_only_forge_work_and_a_closed_pull_request_cancels() {
    let Some(Scene {
        v,
        remote,
        token,
        hook,
        _dirs,
        ..
    }) = scene(
        Api::GitHub,
        "a_rate_limit_pauses_only_forge_work_and_a_closed_pull_request_cancels",
        "paused.git",
    )
    .await
    else {
        return;
    };
    let repo = "acme/paused";
    // The forge's first answer is a rate limit: its `retry-after` is not in GitHub's
    // description of every operation, so this daemon talks to the mock directly.
    v.mock.fail_next(repo, Failure::rate_limit_429(5));
    let scenario = SCENARIO.replace("{token}", &token.display().to_string());
    let config = forge_config("github", &v.mock_url, repo, &remote.url, &token, &hook);
    let ws = Workspace::new(&scenario, &config);
    ws.write_formula(
        "flow",
        &FLOW
            .replace("{gate}", "")
            .replace("{before_merge}", "implement"),
    );
    git(&ws.repo, &["push", "-q", &remote.url, "main"]);
    let daemon = ws.start().await;

    let paused = daemon
        .wait_for("forge work to pause", |e| e["type"] == "forge.paused")
        .await;
    assert!(
        paused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("rate limit")),
        "{paused}"
    );
    let (code, status, err) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        status.contains("forge work paused until") && status.contains("rate limit"),
        "{status}"
    );
    // Local work goes on meanwhile: the bead's implementer runs during the pause.
    let id = daemon.submit(bead_of("flow", "Paused")).await;
    let implemented = daemon
        .wait_for("the implementer to finish", |e| {
            e["type"] == "step.result" && e["step"] == format!("{id}.implement").as_str()
        })
        .await;
    // The branch is on the remote already, at the commit the daemon is about to push: as
    // after a crash that lost the record of a push. The daemon's push still succeeds.
    let branch = format!("catalyst/{id}");
    git(
        &daemon.repo,
        &["push", "-q", &remote.url, &format!("{branch}:{branch}")],
    );
    // And its pull request is open already, as after a crash between opening it and
    // recording it: the daemon takes it up rather than failing to open a second.
    let lost = v
        .mock
        .open_pull(repo, &branch, "main", "opened before a crash");
    let resumed = daemon
        .wait_for("forge work to resume", |e| e["type"] == "forge.resumed")
        .await;
    assert!(
        implemented["seq"].as_u64() < resumed["seq"].as_u64(),
        "the implementer finished during the pause: {implemented} {resumed}"
    );
    let opened = daemon
        .wait_for("the pull request to open", |e| {
            e["type"] == "forge.pushed" && e["bead"] == id.as_str()
        })
        .await;
    let number = opened["number"].as_u64().expect("a number");
    assert_eq!(number, lost, "the pull request opened before the crash");
    let pull = v.mock.pull(repo, number).expect("the pull request");
    assert!(
        pull.title.contains("Paused"),
        "its title is brought up to date: {pull:?}"
    );
    assert_eq!(
        git(
            &remote.bare,
            &["rev-parse", &format!("refs/heads/{branch}")]
        ),
        opened["head"].as_str().unwrap_or_default()
    );

    // Closed without a merge on the forge: the bead is cancelled, saying why.
    v.mock.close(repo, number);
    let closed = daemon.wait_status(&id, "closed").await;
    let reason = closed["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("cancelled: ")
            && reason.contains(&format!(
                "pull request #{number} was closed without a merge"
            )),
        "{closed}"
    );

    // Someone merges on the forge: the next bead starts from the forge's `main`, which the
    // daemon fetched, not from its own, which it does not move.
    let merged = remote.someone_commits("merged.txt", "merged on the forge\n");
    let repo_dir = daemon.repo.clone();
    eventually("the daemon to fetch the forge's main", async || {
        let fetched = std::process::Command::new("git")
            .current_dir(&repo_dir)
            .args(["rev-parse", "--verify", "-q", "refs/catalyst/forge/main"])
            .output()
            .ok()?;
        (String::from_utf8_lossy(&fetched.stdout).trim() == merged).then_some(())
    })
    .await;
    let next = daemon.submit(bead_of("flow", "Next")).await;
    let pushed = daemon
        .wait_for("the next pull request", |e| {
            e["type"] == "forge.pushed" && e["bead"] == next.as_str()
        })
        .await;
    let head = pushed["head"].as_str().expect("a head");
    git(
        &remote.bare,
        &["merge-base", "--is-ancestor", &merged, head],
    );
    assert_ne!(
        git(&daemon.repo, &["rev-parse", "main"]),
        merged,
        "the daemon's own `main` is left as it was"
    );
    // No check failed: the target's required checks were never read.
    let branch_reads = v
        .mock
        .requests(repo)
        .iter()
        .filter(|r| r.path.contains("/branches/"))
        .count();
    assert_eq!(branch_reads, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_others_may_read_stops_the_start_saying_how_to_fix_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let token = token_file(dir.path());
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let config = format!(
        "forge = {{ kind = \"github\", repository = \"acme/open\", token_file = \"{}\" }}\n",
        token.display()
    );
    let ws = Workspace::new("", &config);
    let mut catalystd = ws.catalystd().spawn();
    let status = catalystd.wait_exit().await;
    assert!(!status.success(), "{status}");
    let log = catalystd.stderr();
    assert!(
        log.contains(&token.display().to_string()) && log.contains("chmod 600"),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_requests_off_keeps_the_local_merge_and_an_issue_hears_of_a_block_and_its_end() {
    let Some(v) = setup(
        Api::GitHub,
        "pull_requests_off_keeps_the_local_merge_and_an_issue_hears_of_a_block_and_its_end",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let token = token_file(dir.path());
    let repo = "acme/local";
    let issue = v.mock.open_issue(
        repo,
        "Local work",
        "Merge it here.",
        &["catalyst", "formula:flow"],
    );
    let config = format!(
        "forge = {{ kind = \"github\", api_url = \"{}\", repository = \"{repo}\", \
         token_file = \"{}\", issue_label = \"catalyst\", pull_requests = false, poll_secs = 1 }}\n",
        v.url,
        token.display()
    );
    // The implementer is stuck at first: the bead blocks until a person retries it.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { status = "BLOCKED", summary = "which feature?" },
  { shell = ["echo feature > feature.txt"], summary = "wrote the feature" },
]
"#;
    let ws = Workspace::new(scenario, &config);
    ws.write_formula(
        "flow",
        &FLOW
            .replace("{gate}", "")
            .replace("{before_merge}", "implement"),
    );
    let daemon = ws.start().await;
    let created = daemon
        .wait_for("the issue to become a bead", |e| {
            e["type"] == "bead.created" && e["bead"]["title"] == "Local work"
        })
        .await;
    let id = created["bead"]["id"].as_str().expect("an id").to_owned();

    // Blocked: the issue gets the blocked label, once.
    daemon.wait_status(&id, "blocked").await;
    daemon
        .wait_for("the blocked label", |e| {
            e["type"] == "forge.issue_written"
                && e["bead"] == id.as_str()
                && e["write"] == "blocked"
        })
        .await;
    let labels = v.mock.issue(repo, issue).expect("the issue").labels;
    assert!(
        labels.iter().any(|l| l == "catalyst: blocked"),
        "{labels:?}"
    );

    // A person retries it: the label comes off, and the bead goes on to its merge.
    let (code, _, err) = daemon.ctl(&["retry", &id], "").await;
    assert_eq!(code, 0, "{err}");
    daemon
        .wait_for("the blocked label to come off", |e| {
            e["type"] == "forge.issue_written"
                && e["bead"] == id.as_str()
                && e["write"] == "unblocked"
                && e.get("error").is_none()
        })
        .await;
    let closed = daemon.wait_status(&id, "closed").await;
    assert!(
        closed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("merged into `main`")),
        "{closed}"
    );
    let merged = git(&daemon.repo, &["show", "main:feature.txt"]);
    assert_eq!(merged, "feature");
    daemon
        .wait_for("the issue to be closed", |e| {
            e["type"] == "forge.issue_written" && e["bead"] == id.as_str() && e["write"] == "closed"
        })
        .await;
    let opened = v
        .mock
        .requests(repo)
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
        .count();
    assert_eq!(opened, 0, "no pull request");
    let issue = v.mock.issue(repo, issue).expect("the issue");
    assert!(!issue.open);
    assert_eq!(
        issue.labels,
        ["catalyst", "formula:flow"],
        "the blocked label is off"
    );
    let writes: Vec<Value> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "forge.issue_written")
        .map(|e| e["write"].clone())
        .collect();
    assert_eq!(writes, ["blocked", "unblocked", "closed"], "each once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_the_forge_cannot_merge_gets_the_forges_target_merged_in() {
    let Some(Scene {
        v,
        remote,
        token,
        hook,
        _dirs,
        ..
    }) = scene(
        Api::GitHub,
        "a_pull_request_the_forge_cannot_merge_gets_the_forges_target_merged_in",
        "outdated.git",
    )
    .await
    else {
        return;
    };
    let repo = "acme/outdated";
    // The merge agent merges what it is told to, keeping the bead's side, as a real one
    // would after resolving.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "feature.txt" = "ours\n" }, summary = "wrote the feature" }]

[[rule]]
role = "merge"
responses = [{ tools = [{ name = "Bash", input = { command = "git -c user.name=stub -c user.email=stub@localhost merge -X ours --no-edit refs/catalyst/forge/main" } }], summary = "merged the forge's main, keeping ours" }]
"#;
    let config = forge_config("github", &v.url, repo, &remote.url, &token, &hook);
    let ws = Workspace::new(scenario, &config);
    ws.write_formula(
        "flow",
        &FLOW
            .replace("{gate}", "")
            .replace("{before_merge}", "implement"),
    );
    git(&ws.repo, &["push", "-q", &remote.url, "main"]);
    let daemon = ws.start().await;
    let id = daemon.submit(bead_of("flow", "Outdated")).await;
    // A push of a head other than those already seen.
    let pushed = |seen: Vec<String>| {
        let id = id.clone();
        move |e: &Value| {
            e["type"] == "forge.pushed"
                && e["bead"] == id.as_str()
                && !seen.iter().any(|h| e["head"] == h.as_str())
        }
    };
    let opened = daemon
        .wait_for("the pull request to open", pushed(Vec::new()))
        .await;
    let number = opened["number"].as_u64().expect("a number");
    let first = opened["head"].as_str().expect("a head").to_owned();
    // A push to the same pull request whose head has `commit` and keeps the bead's side of
    // `feature.txt`; gives the head.
    let same_pull_request_with = |pushed: &Value, commit: &str| {
        assert_eq!(pushed["number"], number, "the same pull request");
        let head = pushed["head"].as_str().expect("a head").to_owned();
        git(
            &remote.bare,
            &["merge-base", "--is-ancestor", commit, &head],
        );
        let feature = git(&remote.bare, &["show", &format!("{head}:feature.txt")]);
        assert_eq!(feature, "ours");
        head
    };

    // Someone merges other work on the forge, and the forge says the pull request cannot be
    // merged: the daemon merges the forge's main into the branch itself, and pushes.
    let other = remote.someone_commits("other.txt", "other\n");
    v.mock.set_mergeable(repo, number, Some(false));
    daemon
        .wait_for("the pull request to be seen outdated", |e| {
            e["type"] == "forge.outdated" && e["bead"] == id.as_str()
        })
        .await;
    let updated = daemon
        .wait_for(
            "the merged branch to be pushed",
            pushed(vec![first.clone()]),
        )
        .await;
    let second = same_pull_request_with(&updated, &other);
    assert!(
        !daemon.roles_of(&id).iter().any(|r| r == "merge"),
        "git merged it: no merge agent"
    );

    // Someone changes the same file on the forge: the merge agent resolves the conflict,
    // and the resolution is pushed to the same pull request.
    let theirs = remote.someone_commits("feature.txt", "theirs\n");
    let conflict = daemon
        .wait_for("the conflict", |e| {
            e["type"] == "merge.conflict" && e["bead"] == id.as_str()
        })
        .await;
    assert_eq!(
        conflict["files"],
        serde_json::json!(["feature.txt"]),
        "{conflict}"
    );
    assert_eq!(conflict["target"], "refs/catalyst/forge/main", "{conflict}");
    let resolved = daemon
        .wait_for(
            "the resolution to be pushed",
            pushed(vec![first.clone(), second.clone()]),
        )
        .await;
    let third = same_pull_request_with(&resolved, &theirs);

    // It changes that file again later: a new conflict, and the merge agent gets a new turn
    // for it, not a failed attempt.
    let again = remote.someone_commits("feature.txt", "theirs again\n");
    let resolved = daemon
        .wait_for(
            "the second resolution to be pushed",
            pushed(vec![first.clone(), second.clone(), third.clone()]),
        )
        .await;
    same_pull_request_with(&resolved, &again);
    let events = daemon.events().await;
    let conflicts = events
        .iter()
        .filter(|e| e["type"] == "merge.conflict" && e["bead"] == id.as_str())
        .count();
    assert_eq!(conflicts, 2, "one for each change of the same file");
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.retry" && e["counted"] == true)
        .collect();
    assert!(failed.is_empty(), "no attempt failed: {failed:?}");
    assert_eq!(
        daemon
            .roles_of(&id)
            .iter()
            .filter(|r| *r == "merge")
            .count(),
        2,
        "the merge agent ran once for each conflict"
    );

    // Merged on the forge: the bead closes.
    v.mock.merge(repo, number);
    daemon.wait_status(&id, "closed").await;
    let outdated = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "forge.outdated")
        .count();
    assert_eq!(outdated, 3, "once for each move of the forge's main");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_pauses_forge_work_and_a_person_is_told() {
    let Some(Scene {
        v,
        remote,
        token,
        hook,
        heard,
        _dirs,
    }) = scene(
        Api::GitHub,
        "a_refused_token_pauses_forge_work_and_a_person_is_told",
        "refused.git",
    )
    .await
    else {
        return;
    };
    let repo = "acme/refused";
    // The forge refuses the token on its first call, the issue list. (A 401 is not in
    // GitHub's description of every operation, so this daemon talks to the mock directly.)
    v.mock.fail_next(
        repo,
        Failure {
            status: 401,
            headers: Vec::new(),
            message: "Bad credentials".into(),
        },
    );
    let config = forge_config("github", &v.mock_url, repo, &remote.url, &token, &hook)
        .replace("notices = [\"merged\"]", "notices = [\"paused\"]");
    let ws = Workspace::new("", &config);
    git(&ws.repo, &["push", "-q", &remote.url, "main"]);
    let daemon = ws.start().await;
    let paused = daemon
        .wait_for("forge work to pause", |e| e["type"] == "forge.paused")
        .await;
    assert_eq!(paused["refusals"], 1, "{paused}");
    let reason = paused["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("401") && reason.contains("Bad credentials"),
        "{paused}"
    );
    let sent = daemon
        .wait_for("the notice", |e| {
            e["type"] == "notify.sent" && e["kind"] == "paused"
        })
        .await;
    assert_eq!(sent["event"], paused["seq"]);
    let told: Vec<Value> = heard.lock().expect("receiver").clone();
    assert_eq!(told.len(), 1, "{told:?}");
    let text = told[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("forge work is paused") && text.contains("check the forge token"),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "{text}");
}
