//! Bad ids and files: ids become paths and branch names, so an id with
//! `..`, `/`, spaces, colons, control characters or a kilobyte of text is refused wherever
//! it enters (a request, an inbox file, a formula), and nothing is ever created outside
//! `.catalyst/` (which holds the worktrees).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use catalyst::protocol::{BeadInput, CloseParams, CommentParams, LogsParams, Method, ShowParams};
use serde_json::Value;

use catalyst_testkit::{bead_with_id, Workspace};

fn bad_ids() -> Vec<String> {
    vec![
        "../evil".into(),
        "cat-1/../../evil".into(),
        "a/b".into(),
        "has space".into(),
        // A dependency may name another project's issue this way; a bead may not be one.
        "external:billing:BIL-7".into(),
        "bell\u{7}".into(),
        "new\nline".into(),
        "nul\u{0}byte".into(),
        "a".repeat(1024),
        ".hidden".into(),
        "-dash".into(),
        "cat-1.lock".into(),
        String::new(),
    ]
}

/// Every path under `root`, relative, leaving out the folders catalyst and git own.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).expect("under root").to_path_buf();
            let name = entry.file_name();
            if name == ".catalyst" || name == ".git" {
                continue;
            }
            out.insert(rel);
            if path.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// Whether any file or folder name under `root` (everything, `.git` and `.catalyst` too)
/// contains `needle`.
fn any_name_contains(root: &Path, needle: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(root).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().contains(needle) {
            return Some(path);
        }
        if path.is_dir() && !path.is_symlink() {
            if let Some(found) = any_name_contains(&path, needle) {
                return Some(found);
            }
        }
    }
    None
}

/// Drops a bead file into the inbox as a writer should: written elsewhere, then renamed.
fn drop_in_inbox(ws: &Workspace, name: &OsStr, content: &[u8]) {
    let tmp = ws.paths.inbox().join(".incoming.tmp");
    std::fs::write(&tmp, content).expect("write");
    std::fs::rename(&tmp, ws.paths.inbox().join(name)).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_are_refused_everywhere_and_nothing_lands_outside_the_state_folder() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ tools = [{ name = "Bash", input = { command = "echo $CATALYST_BEAD > $CATALYST_BEAD.txt" } }], summary = "wrote a file" }]
"#;
    let ws = Workspace::new(scenario, "");
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let before = tree(&ws.repo);
    let mut client = daemon.client().await;

    // Requests.
    for id in bad_ids() {
        let shown = format!("{id:?}");
        let refused = |method: Method| {
            let label = format!("{} {shown}", method.name());
            (method, label)
        };
        let requests = [
            refused(Method::Submit(vec![BeadInput {
                id: Some(id.clone()),
                title: "bad".into(),
                ..Default::default()
            }])),
            refused(Method::Submit(vec![BeadInput {
                title: "after a bad id".into(),
                after: vec![id.clone()],
                ..Default::default()
            }])),
            refused(Method::Show(ShowParams {
                id: id.clone(),
                runs: true,
            })),
            refused(Method::Comment(CommentParams {
                id: id.clone(),
                text: "x".into(),
                author: None,
            })),
            refused(Method::Cancel(CloseParams {
                id: id.clone(),
                reason: None,
            })),
            refused(Method::Logs(LogsParams {
                step: format!("{id}.implement"),
                attempt: None,
                stream: None,
                follow: false,
            })),
        ];
        for (method, label) in requests {
            let error = client.call(&method).await.expect_err(&label);
            let text = error.to_string();
            assert!(
                text.starts_with("bad_request") || text.starts_with("not_found"),
                "{label}: {text}"
            );
        }
    }

    // Inbox files: each one is moved aside with the reason next to it.
    for (n, id) in bad_ids().into_iter().enumerate() {
        let json = serde_json::json!({"id": id, "title": "from the inbox"}).to_string();
        drop_in_inbox(
            &ws,
            OsStr::new(&format!("bad-{n:02}.json")),
            json.as_bytes(),
        );
    }
    drop_in_inbox(
        &ws,
        OsStr::new("bad-toml.toml"),
        b"id = \"../../evil\"\ntitle = \"toml\"\n",
    );
    drop_in_inbox(
        &ws,
        OsStr::from_bytes(b"bad-name-\xff.json"),
        br#"{"title": "a name that is not UTF-8"}"#,
    );
    // Files are handled in the order they arrive: once this one is in, the others were seen.
    drop_in_inbox(
        &ws,
        OsStr::new("zz-probe.json"),
        br#"{"id": "cat-probe", "title": "probe"}"#,
    );
    daemon.wait_status("cat-probe", "closed").await;
    let rejected = ws.paths.rejected();
    for n in 0..bad_ids().len() {
        let why = rejected.join(format!("bad-{n:02}.json.why"));
        let reason = std::fs::read_to_string(&why).unwrap_or_else(|e| panic!("{why:?}: {e}"));
        assert!(reason.contains("id"), "{reason}");
        assert!(rejected.join(format!("bad-{n:02}.json")).exists());
    }
    assert!(rejected.join("bad-toml.toml.why").exists());
    let why = std::fs::read_to_string(rejected.join(OsStr::from_bytes(b"bad-name-\xff.json.why")))
        .expect("why of the non-UTF-8 name");
    assert!(why.contains("not UTF-8"), "{why}");
    let left: Vec<_> = std::fs::read_dir(ws.paths.inbox())
        .expect("inbox")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the inbox is empty: {left:?}");

    // Formulas: a step id that would leave the runs folder is refused by `formula check`,
    // and by a reload, which keeps the formulas in force.
    let formula = ws.paths.state.join("formulas").join("evil.formula.toml");
    std::fs::create_dir_all(formula.parent().expect("parent")).expect("formulas");
    std::fs::write(
        &formula,
        "formula = \"evil\"\nversion = 1\n\n[[steps]]\nid = \"../../../evil\"\ntitle = \"x\"\n\n[[steps]]\nid = \"Bad Step\"\ntitle = \"y\"\n",
    )
    .expect("formula");
    let check = Command::new(env!("CARGO_BIN_EXE_catalyst"))
        .args(["formula", "check"])
        .arg(&formula)
        .output()
        .expect("formula check");
    assert_eq!(check.status.code(), Some(1));
    let text = String::from_utf8_lossy(&check.stdout).to_string()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(
        text.contains("../../../evil") && text.contains("Bad Step"),
        "{text}"
    );
    let error = client
        .call(&Method::Reload)
        .await
        .expect_err("the reload is refused");
    assert!(error.to_string().contains("../../../evil"), "{error}");
    std::fs::remove_file(&formula).expect("remove the bad formula");

    // A bead still runs end to end afterwards.
    daemon.submit(bead_with_id("cat-after")).await;
    daemon.wait_status("cat-after", "closed").await;

    let events = daemon.events().await;
    let created: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "bead.created")
        .filter_map(|e| e["bead"]["id"].as_str())
        .collect();
    assert_eq!(
        created,
        ["cat-probe", "cat-after"],
        "only good beads entered"
    );
    // The merges put the beads' files into the checkout of `main`, as they should; nothing
    // else appears.
    let merged: BTreeSet<PathBuf> = ws
        .files_on_main()
        .into_iter()
        .map(|(path, _)| PathBuf::from(path))
        .collect();
    let after = tree(&ws.repo);
    let new: Vec<_> = after
        .difference(&before)
        .filter(|p| !merged.contains(*p))
        .collect();
    assert!(
        new.is_empty(),
        "created outside .catalyst/ and .git/: {new:?}"
    );
    assert_eq!(any_name_contains(&ws.root, "evil"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_file_recorded_but_not_removed_before_a_kill_is_not_submitted_twice() {
    // The daemon records a file's beads, then removes the file; killed in between, it finds
    // the same file again at start-up. Simulated exactly: a hard link keeps the inbox file's
    // inode, which is linked back under its name after the daemon removed it.
    // Beads without a formula label are not dispatched: this test is about the inbox only.
    let ws = Workspace::new("", "default_formula = \"\"");
    let mut daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let keep = ws.root.join("kept-link");
    let tmp = ws.paths.inbox().join(".incoming.tmp");
    std::fs::write(&tmp, br#"{"title": "no id: the daemon makes one"}"#).expect("write");
    std::fs::hard_link(&tmp, &keep).expect("link");
    let name = ws.paths.inbox().join("once.json");
    std::fs::rename(&tmp, &name).expect("rename");
    daemon
        .wait_for("the bead from the inbox", |e| e["type"] == "bead.created")
        .await;
    daemon.kill().await;
    if !name.exists() {
        std::fs::hard_link(&keep, &name).expect("link back");
    }
    let daemon = ws.spawn();
    let status = daemon.call(Method::Status).await;
    let created = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["type"] == "bead.created")
            .count()
    };
    // A later file proves the inbox was read again.
    drop_in_inbox(
        &ws,
        OsStr::new("zz-probe.json"),
        br#"{"id": "cat-probe", "title": "probe"}"#,
    );
    daemon
        .wait_for("the probe", |e| {
            e["type"] == "bead.created" && e["bead"]["id"] == "cat-probe"
        })
        .await;
    let events = daemon.events().await;
    assert_eq!(
        created(&events),
        2,
        "one bead from the file, one probe: {status}"
    );
    assert!(!name.exists(), "the file is removed");
}
