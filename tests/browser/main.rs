//! The web dashboard in a real browser: Debian's Chromium, headless, driven over WebDriver
//! (chromedriver, through fantoccini) against `catalystd --web` with stub agents. Each test
//! skips, saying why, where Chromium or chromedriver is not installed
//! (`.ci/install-test-deps` installs both). Screenshots go to `target/screenshots/`.

use std::path::{Path, PathBuf};

use catalyst_testkit::bead;
use catalyst_testkit::poll::eventually;
use catalyst_testkit::web::{dashboard, free_port};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// A headless Chromium session. chromedriver runs in a process group of its own with the
/// browsers it starts; the whole group is killed when the session is dropped, even by a
/// failed test (killing chromedriver alone left its Chromium running, orphaned).
struct Browser {
    client: Client,
    driver: tokio::process::Child,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.driver.id().and_then(|id| i32::try_from(id).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// Chromium under chromedriver, or `None` (with the reason printed) where either is missing.
async fn browser() -> Option<Browser> {
    let (Some(chromium), Some(chromedriver)) = (on_path("chromium"), on_path("chromedriver"))
    else {
        eprintln!("skipping: chromium and chromedriver are not installed (.ci/install-test-deps installs them)");
        return None;
    };
    let port = free_port();
    let driver = tokio::process::Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("start chromedriver");
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,900"],
        }
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        unreachable!("an object")
    };
    let url = format!("http://127.0.0.1:{port}");
    let client = eventually("chromedriver to start a session", async || {
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities.clone())
            .connect(&url)
            .await
            .ok()
    })
    .await;
    Some(Browser { client, driver })
}

/// The texts of the elements `css` finds.
async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in client.find_all(Locator::Css(css)).await.unwrap_or_default() {
        out.push(element.text().await.unwrap_or_default());
    }
    out
}

/// Waits until an element `css` finds has a text containing `wanted`.
async fn wait_for_text(client: &Client, css: &str, wanted: &str) -> String {
    eventually(&format!("`{css}` to show {wanted:?}"), async || {
        texts(client, css)
            .await
            .into_iter()
            .find(|t| t.contains(wanted))
    })
    .await
}

/// Saves a screenshot of the page as `target/screenshots/<name>.png`.
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots folder");
    std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
}

const QUICK: &str = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 300, write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_follows_the_daemon_live_and_its_button_pauses_it() {
    let Some(browser) = browser().await else {
        return;
    };
    let (daemon, base, token) = dashboard(QUICK).await;
    let page = &browser.client;
    page.goto(&format!("{base}/?token={token}"))
        .await
        .expect("open the link");
    let url = page.current_url().await.expect("url");
    assert_eq!(
        url.as_str(),
        format!("{base}/"),
        "the token left the address bar"
    );
    assert_eq!(texts(page, "h1").await, ["catalyst"]);

    // A bead submitted elsewhere shows up in the open page, which is never reloaded.
    let marker = page
        .execute("window.__same_page = 1; return 1;", vec![])
        .await
        .expect("mark the page");
    assert_eq!(marker, json!(1));
    let id = daemon.submit(bead("Seen in the browser")).await;
    wait_for_text(page, "#feed li", &format!("bead.created {id}")).await;
    daemon.wait_status(&id, "closed").await;
    wait_for_text(page, "#feed li", &format!("bead.status {id} closed")).await;
    // The counters and the bead's row follow too.
    wait_for_text(page, "span.n[data-status=\"closed\"]", "1").await;
    let row = wait_for_text(page, "tr.bead", &id).await;
    assert!(row.contains("closed") && row.contains("4/4"), "{row}");
    let same = page
        .execute("return window.__same_page || null;", vec![])
        .await
        .expect("script");
    assert_eq!(same, json!(1), "the events came in without a reload");
    screenshot(page, "board-live").await;

    // The button pauses dispatching through the engine, as `ctl pause` does.
    page.find(Locator::Css("header form button"))
        .await
        .expect("the pause button")
        .click()
        .await
        .expect("click");
    wait_for_text(page, ".state", "paused").await;
    let status = daemon.call(catalyst::protocol::Method::Status).await;
    assert_eq!(status["paused"], true);
    // The page came back from the action with the bead listed, its molecule done.
    let row = wait_for_text(page, "tr.bead", &id).await;
    assert!(
        row.contains("Seen in the browser") && row.contains("4/4"),
        "{row}"
    );
    screenshot(page, "board").await;

    // Its id opens the bead's page: the steps with each attempt.
    page.find(Locator::Css("tr.bead a"))
        .await
        .expect("the bead's link")
        .click()
        .await
        .expect("click");
    wait_for_text(page, "h2.title", "Seen in the browser").await;
    let url = page.current_url().await.expect("url");
    assert_eq!(url.path(), format!("/beads/{id}"));
    let steps = texts(page, "tr.step").await;
    assert_eq!(steps.len(), 4, "{steps:?}");
    wait_for_text(page, "tr.run", "wrote hello.txt").await;
    screenshot(page, "bead").await;
}

/// An agent whose summary is markup meant to run in the dashboard.
const HOSTILE: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "x.txt" = "x\n" }, summary = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_output_is_shown_as_text_and_never_runs() {
    let Some(browser) = browser().await else {
        return;
    };
    let (daemon, base, token) = dashboard(HOSTILE).await;
    let page = &browser.client;
    page.goto(&format!("{base}/?token={token}"))
        .await
        .expect("open the link");
    let id = daemon.submit(bead("Hostile summary")).await;
    let shown = wait_for_text(page, "#feed li", "<script>document.title").await;
    assert!(
        shown.contains(&id) || shown.contains("step.result"),
        "{shown}"
    );
    daemon.wait_status(&id, "closed").await;
    wait_for_text(page, "#feed li", &format!("bead.status {id} closed")).await;
    // Had the summary gone in as markup, the image's error handler would have run by the time
    // the later events arrived; the title is still the page's own.
    assert_eq!(
        page.title().await.expect("title"),
        "catalyst",
        "no markup from an agent ran"
    );
    let images = page
        .find_all(Locator::Css("#feed img"))
        .await
        .expect("find");
    assert!(images.is_empty(), "no element came from an agent's text");
    screenshot(page, "hostile-output").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_token_the_browser_gets_nothing() {
    let Some(browser) = browser().await else {
        return;
    };
    let (_daemon, base, _token) = dashboard(QUICK).await;
    let page = &browser.client;
    page.goto(&format!("{base}/")).await.expect("open");
    let body = page
        .find(Locator::Css("body"))
        .await
        .expect("body")
        .text()
        .await
        .expect("text");
    assert!(body.contains("open the link catalystd printed"), "{body}");
    assert!(texts(page, "h1").await.is_empty());
    page.goto(&format!("{base}/?token=not-the-token"))
        .await
        .expect("open");
    assert_eq!(
        page.current_url().await.expect("url").path(),
        "/",
        "not redirected"
    );
    assert!(texts(page, "h1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_is_submitted_through_the_form_and_an_approval_passed_with_its_button() {
    let Some(browser) = browser().await else {
        return;
    };
    let (daemon, base, token) = dashboard(QUICK).await;
    // First a bead that will wait for a person (its agents write what the next one's would).
    daemon.submit_gated_waiting("gate-1", "true").await;
    let page = &browser.client;
    page.goto(&format!("{base}/?token={token}"))
        .await
        .expect("open the link");
    page.find(Locator::Css("form.submit input[name=title]"))
        .await
        .expect("the title field")
        .send_keys("Typed into the form")
        .await
        .expect("type");
    page.find(Locator::Css("form.submit button"))
        .await
        .expect("the submit button")
        .click()
        .await
        .expect("click");
    wait_for_text(page, "h2.title", "Typed into the form").await;
    let url = page.current_url().await.expect("url");
    let id = url
        .path()
        .strip_prefix("/beads/")
        .expect("the bead's page")
        .to_owned();
    let shown = daemon.show(&id).await;
    assert_eq!(shown["title"], "Typed into the form");
    // The page follows the bead without a reload: its molecule runs, it merges, and the
    // diff of what it merged appears.
    page.execute("window.__same_page = 1; return 1;", vec![])
        .await
        .expect("mark the page");
    wait_for_text(page, "header .state", "closed").await;
    wait_for_text(page, "table.patch", "+hello").await;
    assert_eq!(
        page.find_all(Locator::Css("svg.molecule g.node.closed"))
            .await
            .expect("find")
            .len(),
        4,
        "every step's box is closed"
    );
    let same = page
        .execute("return window.__same_page || null;", vec![])
        .await
        .expect("script");
    assert_eq!(same, json!(1), "no reload");
    screenshot(page, "bead-closed").await;

    page.goto(&format!("{base}/beads/gate-1"))
        .await
        .expect("open");
    page.find(Locator::Css("form.approve button"))
        .await
        .expect("the approve button")
        .click()
        .await
        .expect("click");
    daemon
        .wait_for("the approval to pass", |e| {
            e["type"] == "gate.passed" && e["step"] == "gate-1.approve"
        })
        .await;
    wait_for_text(page, "h2.title", "gated bead gate-1").await;
    screenshot(page, "approved").await;
}

/// The implementer writes one file, a fix another: both change the worktree.
const WITH_FIX: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "impl.txt" = "impl\n" }, summary = "implemented" }]

[[rule]]
role = "fix"
responses = [{ write = { "renamed.txt" = "renamed\n" }, summary = "renamed the flag" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_typed_on_the_page_starts_the_fix_step_it_asks_for() {
    let Some(browser) = browser().await else {
        return;
    };
    let (daemon, base, token) = dashboard(WITH_FIX).await;
    daemon.submit_gated_waiting("gate-1", "true").await;
    let page = &browser.client;
    page.goto(&format!("{base}/beads/gate-1?token={token}"))
        .await
        .expect("open the link");
    let reason = "Rename the flag to --fast";
    page.find(Locator::Css("form.reject input[name=text]"))
        .await
        .expect("the reason field")
        .send_keys(reason)
        .await
        .expect("type");
    page.find(Locator::Css("form.reject button"))
        .await
        .expect("the reject button")
        .click()
        .await
        .expect("click");
    let fix = daemon
        .wait_for("the fix for the rejection", |e| {
            e["type"] == "fix.created" && e["fixes"] == "gate-1.approve"
        })
        .await;
    let fix_step = fix["step"]["metadata"]["catalyst"]["step"]
        .as_str()
        .expect("the fix's step name")
        .to_owned();
    // The fix step appears in the open page, in the table and in the molecule, and its
    // attempt once it has run.
    wait_for_text(page, "tr.step", &fix_step).await;
    wait_for_text(page, "svg.molecule g.node", &fix_step).await;
    wait_for_text(page, ".comment .text", reason).await;
    wait_for_text(page, "tr.run", "renamed the flag").await;
    screenshot(page, "fix-step").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beads_page_shows_the_running_agents_output_as_it_is_written() {
    let Some(browser) = browser().await else {
        return;
    };
    let ws = catalyst_testkit::Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ wait_for = {:?}, write = {{ \"a.txt\" = \"a\\n\" }}, summary = \"<i>wrote</i> a.txt\" }}]\n",
        go.display().to_string(),
    ));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws).await;
    let id = daemon.submit(bead("Watched as it works")).await;
    daemon
        .wait_for("the implement attempt", |e| {
            e["type"] == "step.dispatched" && e["step"] == format!("{id}.implement")
        })
        .await;
    let page = &browser.client;
    page.goto(&format!("{base}/beads/{id}?token={token}"))
        .await
        .expect("open the link");
    wait_for_text(page, "#output", "session started").await;
    wait_for_text(page, "section.output h2", "implement").await;
    screenshot(page, "running-output").await;
    std::fs::write(&go, "").expect("release the agent");
    wait_for_text(page, "#output", "<i>wrote</i> a.txt").await;
    wait_for_text(page, "header .state", "closed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_browser_leaves_no_chromium_behind() {
    use nix::errno::Errno;
    use nix::sys::signal::killpg;
    let Some(browser) = browser().await else {
        return;
    };
    browser
        .client
        .goto("about:blank")
        .await
        .expect("the browser runs");
    let group = nix::unistd::Pid::from_raw(
        browser
            .driver
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .expect("chromedriver runs"),
    );
    assert_eq!(
        killpg(group, None),
        Ok(()),
        "chromedriver leads a group of its own"
    );
    drop(browser);
    eventually("chromedriver and its Chromium to be gone", async || {
        (killpg(group, None) == Err(Errno::ESRCH)).then_some(())
    })
    .await;
}

/// After about three visits to live pages, the next page waited about 20 s in Chromium with
/// its default settings: the back/forward cache kept the pages it left, their event streams
/// open, and the browser has six connections per host. Pages close their streams when hidden
/// now; a run of visits back and forth loads every page at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visits_back_and_forth_between_live_pages_never_wait_for_a_connection() {
    let Some(browser) = browser().await else {
        return;
    };
    let ws = catalyst_testkit::Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&catalyst_testkit::scenario::implement_waits_for(&go));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws).await;
    let id = daemon.submit(bead("Kept running")).await;
    daemon
        .wait_for("the implement attempt", |e| {
            e["type"] == "step.dispatched" && e["step"] == format!("{id}.implement")
        })
        .await;
    let page = &browser.client;
    // A page that waits for a connection fails its load here instead of after 20 s.
    page.update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
        None,
        Some(std::time::Duration::from_secs(8)),
        None,
    ))
    .await
    .expect("timeouts");
    page.goto(&format!("{base}/?token={token}"))
        .await
        .expect("open the link");
    for round in 0..5 {
        page.goto(&format!("{base}/beads/{id}"))
            .await
            .unwrap_or_else(|e| panic!("the bead's page, round {round}: {e}"));
        wait_for_text(page, "#output", "session started").await;
        page.back()
            .await
            .unwrap_or_else(|e| panic!("back to the board, round {round}: {e}"));
        page.forward()
            .await
            .unwrap_or_else(|e| panic!("forward to the bead, round {round}: {e}"));
        page.goto(&format!("{base}/"))
            .await
            .unwrap_or_else(|e| panic!("the board, round {round}: {e}"));
    }
    std::fs::write(&go, "").expect("release the agent");
    page.goto(&format!("{base}/beads/{id}"))
        .await
        .expect("the bead's page once more");
    wait_for_text(page, "header .state", "closed").await;
}
