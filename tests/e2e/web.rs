//! The web dashboard over real HTTP: `catalystd --web` on a loopback port, the token, the
//! cookie, the CSRF and `Origin` checks, and `/events` as Server-Sent Events that resume from
//! `Last-Event-ID` with the same lines the control socket's `subscribe` sends.

use catalyst_testkit::web::{dashboard, free_port};
use catalyst_testkit::{bead, Workspace, TIMEOUT};
use futures::StreamExt;
use reqwest::header::{AUTHORIZATION, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::StatusCode;

const QUICK: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .timeout(TIMEOUT)
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_needs_the_token_which_a_link_turns_into_a_strict_cookie() {
    let (_daemon, base, token) = dashboard(QUICK).await;
    let http = client();
    let bare = http.get(format!("{base}/")).send().await.expect("get");
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    assert!(bare.text().await.expect("body").contains("web.token"));
    let events = http
        .get(format!("{base}/events"))
        .send()
        .await
        .expect("get");
    assert_eq!(events.status(), StatusCode::UNAUTHORIZED, "the events too");
    let wrong = http
        .get(format!("{base}/?token=0123"))
        .send()
        .await
        .expect("get");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);

    let link = http
        .get(format!("{base}/?token={token}"))
        .send()
        .await
        .expect("get");
    assert_eq!(link.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        link.headers()[LOCATION],
        "/",
        "the token leaves the address bar"
    );
    let cookie = link.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().expect("name=value").to_owned();

    let page = http
        .get(format!("{base}/"))
        .header(COOKIE, &pair)
        .send()
        .await
        .expect("get");
    assert_eq!(page.status(), StatusCode::OK);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_owned();
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(page
        .text()
        .await
        .expect("body")
        .contains("<h1>catalyst</h1>"));
    let script = http
        .get(format!("{base}/static/catalyst.js"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .expect("get");
    assert_eq!(script.status(), StatusCode::OK);
}

/// The CSRF token of the board page.
async fn csrf(http: &reqwest::Client, base: &str, token: &str) -> String {
    let page = http
        .get(format!("{base}/"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("body");
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..at + 64].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_sent_with_the_cookie_needs_the_dashboards_origin_and_csrf_token() {
    let (daemon, base, token) = dashboard(QUICK).await;
    let http = client();
    let cookie = format!("catalyst_token={token}");
    let host = base.trim_start_matches("http://").to_owned();
    let csrf = csrf(&http, &base, &token).await;
    let pause = |origin: Option<&str>, form: Vec<(&'static str, String)>| {
        let mut request = http
            .post(format!("{base}/actions/pause"))
            .header(COOKIE, &cookie)
            .form(&form);
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        request.send()
    };
    let paused = async || {
        let status = daemon.call(catalyst::protocol::Method::Status).await;
        status["paused"].as_bool().expect("paused")
    };
    let no_origin = pause(None, vec![("csrf", csrf.clone())])
        .await
        .expect("post");
    assert_eq!(no_origin.status(), StatusCode::FORBIDDEN);
    let elsewhere = pause(Some("http://evil.example"), vec![("csrf", csrf.clone())])
        .await
        .expect("post");
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN);
    let own = format!("http://{host}");
    let no_csrf = pause(Some(&own), vec![]).await.expect("post");
    assert_eq!(no_csrf.status(), StatusCode::FORBIDDEN);
    assert!(!paused().await, "nothing refused changed anything");

    let done = pause(Some(&own), vec![("csrf", csrf.clone())])
        .await
        .expect("post");
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert!(paused().await);
    // A script with the token needs neither (no cookie a page could ride on).
    let resumed = http
        .post(format!("{base}/actions/resume"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .form(&[("model", "")])
        .send()
        .await
        .expect("post");
    assert_eq!(resumed.status(), StatusCode::SEE_OTHER);
    assert!(!paused().await);
}

/// The SSE events of `response` until `count` have come: (id, data).
async fn sse(response: reqwest::Response, count: usize) -> Vec<(u64, String)> {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut events = Vec::new();
    let read = async {
        while events.len() < count {
            let chunk = body
                .next()
                .await
                .expect("more of the stream")
                .expect("bytes");
            text.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let (mut id, mut data) = (None, None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data = Some(v.trim_start().to_owned());
                    }
                }
                if let (Some(id), Some(data)) = (id, data) {
                    events.push((id, data));
                }
            }
        }
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .expect("the events in time");
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_as_the_socket_sends_them_and_resume_from_last_event_id() {
    let (daemon, base, token) = dashboard(QUICK).await;
    let http = client();
    let id = daemon.submit(bead("Streamed")).await;
    let closed = daemon.wait_status(&id, "closed").await;
    let last = closed["seq"].as_u64().expect("seq");
    let (code, stdout, stderr) = daemon.ctl(&["--json", "events", "--since", "0"], "").await;
    assert_eq!(code, 0, "{stderr}");
    let socket: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert!(socket.len() as u64 >= last);

    let all = http
        .get(format!("{base}/events?since=0"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .expect("get");
    assert_eq!(all.status(), StatusCode::OK);
    assert!(all.headers()["content-type"]
        .to_str()
        .expect("type")
        .starts_with("text/event-stream"));
    let streamed = sse(all, last as usize).await;
    // Events after `ctl events` read the journal (the worktree's removal) may come too.
    for (i, (seq, data)) in streamed.iter().take(socket.len()).enumerate() {
        assert_eq!(
            *seq,
            i as u64 + 1,
            "every event, in order, its seq as its id"
        );
        let line: serde_json::Value = serde_json::from_str(data).expect("json");
        let sent: serde_json::Value = serde_json::from_str(&socket[i]).expect("json");
        assert_eq!(line, sent, "the same event as the socket's");
    }

    // A client that reconnects after event 3 gets 4 onwards, nothing twice, nothing lost.
    let resumed = http
        .get(format!("{base}/events?since=0"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .header("Last-Event-ID", "3")
        .send()
        .await
        .expect("get");
    let again: Vec<u64> = sse(resumed, 2).await.iter().map(|(s, _)| *s).collect();
    let expected: Vec<u64> = (4..4 + again.len() as u64).collect();
    assert_eq!(again, expected);

    // Filtered as `subscribe` filters, and live: a new bead's creation arrives as it happens.
    let live = http
        .get(format!("{base}/events?types=bead.created"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .expect("get");
    let second = daemon.submit(bead("Later")).await;
    // The same checks as `subscribe`: a type no event has would wait forever.
    let typo = http
        .get(format!("{base}/events?types=bead.craeted"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .expect("get");
    assert_eq!(typo.status(), StatusCode::BAD_REQUEST);
    assert!(typo
        .text()
        .await
        .expect("body")
        .contains("unknown event type `bead.craeted`"));
    let created = sse(live, 1).await;
    let event: serde_json::Value = serde_json::from_str(&created[0].1).expect("json");
    assert_eq!(event["type"], "bead.created");
    assert_eq!(event["bead"]["id"], second.as_str());
    assert!(created[0].0 > last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_address_other_than_loopback_is_refused_unless_allowed() {
    let ws = Workspace::new(QUICK, "");
    let port = free_port();
    let out = tokio::process::Command::new(catalyst_testkit::catalystd_bin())
        .arg("--workspace")
        .arg(&ws.repo)
        .args(["--web", &format!("0.0.0.0:{port}")])
        .output();
    let out = tokio::time::timeout(TIMEOUT, out)
        .await
        .expect("it stops at once")
        .expect("run catalystd");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("allow_remote = true"), "{stderr}");
    assert!(!ws.paths.socket().exists(), "it never served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_lists_beads_page_by_page_filtered_and_escaped() {
    let (daemon, base, token) = dashboard(QUICK).await;
    daemon
        .call(catalyst::protocol::Method::Pause(
            catalyst::protocol::PauseParams { model: None },
        ))
        .await;
    let mut inputs: Vec<_> = (0..59).map(|i| bead(&format!("Bead number {i}"))).collect();
    inputs.push(bead("<script>alert('title')</script> hostile"));
    daemon
        .call(catalyst::protocol::Method::Submit(inputs))
        .await;
    let http = client();
    let get = async |query: &str| {
        http.get(format!("{base}/{query}"))
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("body")
    };
    let rows = |page: &str| page.matches("<tr class=\"bead\"").count();
    let first = get("").await;
    assert_eq!(rows(&first), 50);
    assert!(first.contains("page 1 of 2 (60 beads)"), "{first}");
    let second = get("?page=2").await;
    assert_eq!(rows(&second), 10);
    assert!(second.contains("&lt;script&gt;alert("), "bead text escaped");
    assert!(!second.contains("<script>alert("), "never as markup");

    let found = get("?q=NUMBER%2012").await;
    assert_eq!(rows(&found), 1, "search in any case");
    assert!(found.contains("Bead number 12"));
    let open = get("?status=open").await;
    assert_eq!(rows(&open), 50);
    let closed = get("?status=closed").await;
    assert_eq!(rows(&closed), 0);
    assert!(closed.contains("No beads"));
    let typo = get("?status=opne").await;
    assert!(
        typo.contains("unknown status"),
        "the engine's refusal is shown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beads_page_shows_its_steps_attempts_and_comments_escaped() {
    let (daemon, base, token) = dashboard(QUICK).await;
    let mut input = bead("Page <b>title</b>");
    input.description = Some("Do <script>alert(1)</script> this".into());
    let id = daemon.submit(input).await;
    daemon.wait_status(&id, "closed").await;
    daemon
        .call(catalyst::protocol::Method::Comment(
            catalyst::protocol::CommentParams {
                id: id.clone(),
                text: "<img src=x onerror=alert(2)> looks good".into(),
                author: Some("ann".into()),
            },
        ))
        .await;
    let http = client();
    let get = async |path: &str| {
        let response = http
            .get(format!("{base}{path}"))
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .await
            .expect("get");
        let code = response.status();
        (code, response.text().await.expect("body"))
    };
    let (code, page) = get(&format!("/beads/{id}")).await;
    assert_eq!(code, StatusCode::OK);
    for step in ["refine", "implement", "review", "merge"] {
        assert!(page.contains(&format!("<td>{step}</td>")), "{step}: {page}");
    }
    assert!(page.contains("attempt 1"), "{page}");
    assert!(page.contains("wrote hello.txt"), "the attempt's summary");
    assert!(page.contains("4/4"));
    assert!(page.contains("Page &lt;b&gt;title&lt;"), "{page}");
    assert!(page.contains("Do &lt;script&gt;alert(1)&lt;"), "{page}");
    assert!(
        page.contains("&lt;img src=x onerror=alert(2)&gt; looks good"),
        "{page}"
    );
    assert!(!page.contains("<script>alert") && !page.contains("<img src=x"));

    let (board_code, board) = get("/").await;
    assert_eq!(board_code, StatusCode::OK);
    assert!(
        board.contains(&format!("href=\"/beads/{id}\"")),
        "the board links to it"
    );
    let (missing, _) = get("/beads/cat-999").await;
    assert_eq!(missing, StatusCode::NOT_FOUND);
    let (bad, _) = get("/beads/not%20an%20id").await;
    assert_eq!(bad, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_forms_submit_comment_approve_and_show_refusals() {
    let (daemon, base, token) = dashboard(QUICK).await;
    let http = client();
    let post = async |path: &str, form: &[(&str, &str)]| {
        let response = http
            .post(format!("{base}{path}"))
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .form(form)
            .send()
            .await
            .expect("post");
        let code = response.status();
        let location = response
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().expect("location").to_owned());
        (code, location, response.text().await.expect("body"))
    };
    let get = async |path: &str| {
        http.get(format!("{base}{path}"))
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("body")
    };

    // A bead from the board's form goes in as `submit` makes it, and its page opens.
    let (code, location, _) = post(
        "/actions/submit",
        &[
            ("title", "From the form"),
            ("description", "typed in"),
            ("priority", "1"),
        ],
    )
    .await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    let location = location.expect("a location");
    let id = location
        .strip_prefix("/beads/")
        .expect("the bead's page")
        .to_owned();
    let shown = daemon
        .call(catalyst::protocol::Method::Show(
            catalyst::protocol::ShowParams {
                id: id.clone(),
                runs: false,
            },
        ))
        .await;
    assert_eq!(shown["title"], "From the form");
    assert_eq!(shown["priority"], 1);
    let (bad, _, page) = post("/actions/submit", &[("title", "x"), ("priority", "high")]).await;
    assert_eq!(bad, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("priority is a number"), "{page}");

    // A comment, shown on the page.
    let (code, location, _) = post(
        &format!("/beads/{id}/comment"),
        &[("text", "from the page")],
    )
    .await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    assert_eq!(location.as_deref(), Some(format!("/beads/{id}").as_str()));
    assert!(get(&format!("/beads/{id}")).await.contains("from the page"));

    // The engine's refusal is shown in the page: nothing waits for an approval here.
    let (code, _, page) = post(&format!("/beads/{id}/approve"), &[]).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("class=\"error\""), "{page}");
    let (unknown, _, _) = post(&format!("/beads/{id}/explode"), &[]).await;
    assert_eq!(unknown, StatusCode::NOT_FOUND);

    // An approval waiting for a person: its button on the bead's page passes it.
    daemon.submit_gated_waiting("gate-1", "true").await;
    let page = get("/beads/gate-1").await;
    assert!(
        page.contains("action=\"/beads/gate-1.approve/approve\""),
        "{page}"
    );
    let (code, location, _) = post("/beads/gate-1.approve/approve", &[("back", "gate-1")]).await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    assert_eq!(location.as_deref(), Some("/beads/gate-1"));
    daemon
        .wait_for("the approval to pass", |e| {
            e["type"] == "gate.passed" && e["step"] == "gate-1.approve"
        })
        .await;
}
