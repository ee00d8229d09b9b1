//! The web dashboard over real HTTP: `catalystd --web` on a loopback port, the token, the
//! cookie, the CSRF and `Origin` checks, and `/events` as Server-Sent Events that resume from
//! `Last-Event-ID` with the same lines the control socket's `subscribe` sends.

use catalyst_testkit::web::{dashboard, free_port};
use catalyst_testkit::{bead, Workspace, TIMEOUT};
use futures::StreamExt;
use reqwest::header::{AUTHORIZATION, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::StatusCode;

/// The implementer writes `hello.txt`, so the bead merges.
const QUICK: &str = catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .timeout(TIMEOUT)
        .build()
        .expect("client")
}

/// The dashboard as a script uses it: the token sent as a bearer, redirects not followed.
struct Site {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// An answer: its status, `Location`, `Content-Type`, the other headers and the body.
struct Reply {
    code: StatusCode,
    location: Option<String>,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Site {
    /// `catalystd --web` on a new workspace whose agents follow `scenario`.
    async fn start(scenario: &str) -> (catalyst_testkit::TestDaemon, Site) {
        let (daemon, base, token) = dashboard(scenario).await;
        let http = client();
        (daemon, Site { http, base, token })
    }

    async fn get(&self, path: &str) -> Reply {
        let request = self.http.get(format!("{}{path}", self.base));
        Site::reply(request.bearer_auth(&self.token)).await
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Reply {
        let request = self.http.post(format!("{}{path}", self.base)).form(form);
        Site::reply(request.bearer_auth(&self.token)).await
    }

    async fn reply(request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("an answer");
        let headers = response.headers().clone();
        Reply {
            code: response.status(),
            location: headers
                .get(LOCATION)
                .map(|l| l.to_str().expect("location").to_owned()),
            headers,
            body: response.text().await.expect("body"),
        }
    }
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

/// DNS rebinding: a page of another site whose name was pointed at this machine sends its
/// requests with its own name as `Host`, and the browser adds the dashboard's cookie. The
/// server answered them as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_naming_another_host_is_refused_whatever_it_carries() {
    let (_daemon, base, token) = dashboard(QUICK).await;
    let http = client();
    let port = base.rsplit(':').next().expect("a port").to_owned();
    let cookie = format!("catalyst_token={token}");
    for host in [
        format!("rebind.example:{port}"),
        "rebind.example".to_owned(),
    ] {
        let with_cookie = http
            .get(format!("{base}/"))
            .header(reqwest::header::HOST, &host)
            .header(COOKIE, &cookie)
            .send()
            .await
            .expect("get");
        assert_eq!(
            with_cookie.status(),
            StatusCode::MISDIRECTED_REQUEST,
            "{host}"
        );
        assert!(with_cookie
            .text()
            .await
            .expect("body")
            .contains("[web] hosts"));
        let with_bearer = http
            .post(format!("{base}/actions/pause"))
            .header(reqwest::header::HOST, &host)
            .bearer_auth(&token)
            .send()
            .await
            .expect("post");
        assert_eq!(
            with_bearer.status(),
            StatusCode::MISDIRECTED_REQUEST,
            "{host}"
        );
    }
    let by_name = http
        .get(format!("http://localhost:{port}/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("get");
    assert_eq!(
        by_name.status(),
        StatusCode::OK,
        "localhost is this dashboard"
    );
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
    let (daemon, site) = Site::start(QUICK).await;
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
    let get = async |query: &str| site.get(&format!("/{query}")).await.body;
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
    let (daemon, site) = Site::start(QUICK).await;
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
    let get = async |path: &str| {
        let reply = site.get(path).await;
        (reply.code, reply.body)
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
    let (daemon, site) = Site::start(QUICK).await;
    let post = async |path: &str, form: &[(&str, &str)]| {
        let reply = site.post(path, form).await;
        (reply.code, reply.location, reply.body)
    };
    let get = async |path: &str| site.get(path).await.body;

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
    let shown = daemon.show(&id).await;
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

    // One model paused from the board, listed there with its resume button, then resumed.
    let (code, _, _) = post("/actions/pause", &[("model", "opus")]).await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    let status = daemon.call(catalyst::protocol::Method::Status).await;
    assert_eq!(status["model_pauses"][0]["model"], "opus", "{status}");
    assert_eq!(status["paused"], false, "only the model");
    let board = get("/").await;
    assert!(
        board.contains("<input type=\"hidden\" name=\"model\" value=\"opus\">"),
        "{board}"
    );
    let (code, _, _) = post("/actions/resume", &[("model", "opus")]).await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    let status = daemon.call(catalyst::protocol::Method::Status).await;
    assert_eq!(status["paused_models"], serde_json::json!([]), "{status}");

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

const FIX_LOOP: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt", cost_usd = 0.25 }]

[[rule]]
role = "review"
responses = [
  { verdict = "REJECTED", summary = "no test", instructions = ["add a <script>test</script>"] },
  { verdict = "APPROVED", summary = "good" },
]

[[rule]]
role = "fix"
responses = [{ write = { "hello_test.txt" = "test\n" }, summary = "added the test" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beads_page_draws_its_molecule_with_the_fix_and_shows_the_merged_diff_and_run_files() {
    let (daemon, site) = Site::start(FIX_LOOP).await;
    let id = daemon.submit(bead("Hello with a test")).await;
    daemon.wait_status(&id, "closed").await;
    let page = site.get(&format!("/beads/{id}")).await;
    assert_eq!(page.code, StatusCode::OK);
    let page = page.body;

    // The molecule: a box per step, the fix step the rejection made among them, and arrows.
    assert!(page.contains("<svg class=\"molecule\""), "{page}");
    let steps = ["refine", "implement", "review", "fix-1", "merge"];
    for step in steps {
        assert!(
            page.contains(&format!(
                "<g class=\"node closed\" data-id=\"{id}.{step}\">"
            )),
            "{step}: {page}"
        );
    }
    assert_eq!(page.matches("<g class=\"node ").count(), steps.len());
    assert!(page.matches("<path class=\"edge needs\"").count() >= steps.len() - 2);
    assert_eq!(
        page.matches("<path class=\"edge fix\"").count(),
        1,
        "review to fix-1"
    );

    // The review's instructions, as text; the cost its agents reported.
    assert!(
        page.contains("<li>add a &lt;script&gt;test&lt;&#x2f;script&gt;</li>")
            || page.contains("<li>add a &lt;script&gt;test&lt;/script&gt;</li>"),
        "{page}"
    );
    assert!(page.contains("$0.25"), "{page}");
    assert!(
        site.get("/").await.body.contains("$0.25"),
        "on the board too"
    );

    // The branch is gone after the merge: the diff is what the merge brought.
    assert!(!daemon.branch_exists(&id));
    assert!(page.contains("<td class=\"code\">+hello</td>"), "{page}");
    assert!(page.contains(">hello_test.txt</a>"), "{page}");
    let (code, out, err) = daemon.ctl(&["diff", &id], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("+hello") && out.contains("hello_test.txt"),
        "{out}"
    );

    // Each attempt's files one click away, served as text.
    let prompt = format!("/beads/{id}/runs/implement/1/prompt.md");
    assert!(page.contains(&format!("href=\"{prompt}\"")), "{page}");
    let file = site.get(&prompt).await;
    assert_eq!(file.code, StatusCode::OK);
    assert_eq!(file.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(file.headers["x-content-type-options"], "nosniff");
    assert!(
        file.body.contains("Step: implement (role: implement)"),
        "{}",
        file.body
    );
    let stdout = site.get(&format!("/beads/{id}/runs/fix-1/1/stdout")).await;
    assert_eq!(stdout.code, StatusCode::OK);
    assert!(stdout.body.contains("added the test"), "{}", stdout.body);
    for missing in [
        format!("/beads/{id}/runs/implement/2/stdout"),
        format!("/beads/{id}/runs/nothing/1/stdout"),
        format!("/beads/{id}/runs/implement/1/..%2F..%2F..%2Fjournal.jsonl"),
        format!("/beads/{id}/runs/implement/1/journal.jsonl"),
    ] {
        assert_eq!(
            site.get(&missing).await.code,
            StatusCode::NOT_FOUND,
            "{missing}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_attempts_output_streams_as_written_until_it_ends() {
    let ws = Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ wait_for = {:?}, summary = \"<b>done</b> waiting\" }}]\n",
        go.display().to_string(),
    ));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws).await;
    let site = Site {
        http: client(),
        base,
        token,
    };
    let idle = site.get("/beads/cat-404/output").await;
    assert_eq!(idle.code, StatusCode::NOT_FOUND);
    let pause = |model: Option<&str>| catalyst::protocol::PauseParams {
        model: model.map(str::to_owned),
    };
    daemon
        .call(catalyst::protocol::Method::Pause(pause(None)))
        .await;
    let id = daemon.submit(bead("Slow")).await;
    let nothing = site.get(&format!("/beads/{id}/output")).await;
    assert!(nothing.body.starts_with("event: end\n"), "{}", nothing.body);
    daemon
        .call(catalyst::protocol::Method::Resume(pause(None)))
        .await;

    daemon
        .wait_for("the implement attempt", |e| {
            e["type"] == "step.dispatched" && e["step"] == format!("{id}.implement")
        })
        .await;
    let response = site
        .http
        .get(format!("{}/beads/{id}/output", site.base))
        .bearer_auth(&site.token)
        .send()
        .await
        .expect("output");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut read_until = async |what: &str, done: &dyn Fn(&str) -> bool| {
        let read = async {
            while !done(&text) {
                let chunk = body
                    .next()
                    .await
                    .expect("the stream goes on")
                    .expect("bytes");
                text.push_str(&String::from_utf8_lossy(&chunk));
            }
        };
        if tokio::time::timeout(TIMEOUT, read).await.is_err() {
            panic!("timed out waiting for {what}:\n{text}");
        }
        text.clone()
    };
    let started = read_until("the session's start", &|t| {
        t.contains("event: output\ndata: ") && t.contains("session started")
    })
    .await;
    assert!(!started.contains("event: end"), "{started}");
    std::fs::write(&go, "").expect("release the agent");
    let ended = read_until("the end", &|t| t.contains("event: end\n")).await;
    assert!(ended.contains("<b>done</b> waiting"), "{ended}");
    assert!(
        ended.find("<b>done</b>") < ended.find("event: end"),
        "the last words come before the end: {ended}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_cancel_from_a_beads_page_do_what_ctl_does() {
    let (daemon, site) = Site::start(
        r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]

[[rule]]
role = "review"
responses = [{ verdict = "REJECTED", summary = "still wrong", instructions = ["do it differently"] }]

[[rule]]
role = "fix"
responses = [{ append = { "hello.txt" = "again\n" }, summary = "tried again" }]
"#,
    )
    .await;
    let stuck = daemon.submit(bead("Never good enough")).await;
    daemon.wait_status(&stuck, "blocked").await;
    let retried = site.post(&format!("/beads/{stuck}/retry"), &[]).await;
    assert_eq!(retried.code, StatusCode::SEE_OTHER, "{}", retried.body);
    assert_eq!(retried.location, Some(format!("/beads/{stuck}")));
    daemon
        .wait_for("the manual retry", |e| {
            e["type"] == "step.retry" && e["bead"] == stuck && e["manual"] == true
        })
        .await;

    daemon
        .call(catalyst::protocol::Method::Pause(
            catalyst::protocol::PauseParams { model: None },
        ))
        .await;
    let unwanted = daemon.submit(bead("Not wanted")).await;
    let cancelled = site
        .post(
            &format!("/beads/{unwanted}/cancel"),
            &[("text", "not needed after all")],
        )
        .await;
    assert_eq!(cancelled.code, StatusCode::SEE_OTHER, "{}", cancelled.body);
    let shown = daemon.show(&unwanted).await;
    assert_eq!(shown["bead"]["status"], "closed", "{shown}");
    assert!(
        shown["bead"]["close_reason"]
            .as_str()
            .is_some_and(|r| r.contains("not needed after all")),
        "{shown}"
    );
    let again = site.post(&format!("/beads/{unwanted}/cancel"), &[]).await;
    assert_eq!(again.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(again.body.contains("class=\"error\""), "{}", again.body);
}

/// The board and a bead's page say what needs a person and read as `ctl` does: a blocked bead
/// is named with its reason on the board and under a banner on its page, which offers Retry
/// and a Cancel that asks first; a cancelled bead reads `cancelled` and offers neither; a
/// failed attempt says it failed and why; text is Markdown, never markup; times are `<time>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_say_what_needs_a_person_and_read_as_ctl_does() {
    let scenario = r#"
[[rule]]
role = "implement"
bead = "cat-stuck"
responses = [{ status = "BLOCKED", summary = "the spec contradicts itself" }]

[[rule]]
role = "implement"
responses = [{ summary = "looked, changed nothing" }, { write = { "a.txt" = "a\n" } }]
"#;
    let (daemon, site) = Site::start(scenario).await;
    let stuck = daemon
        .submit(catalyst::protocol::BeadInput {
            id: Some("cat-stuck".into()),
            description: Some(
                "**Bold** words.\n\n<script>alert(1)</script>\n\n[click](javascript:alert(2))\n"
                    .into(),
            ),
            ..bead("Stuck")
        })
        .await;
    daemon.wait_status(&stuck, "blocked").await;
    let board = site.get("/").await.body;
    assert!(board.contains("Needs a person"), "{board}");
    assert!(
        board.contains("cat-stuck</a> blocked: ") && board.contains("the spec contradicts itself"),
        "{board}"
    );
    let page = site.get(&format!("/beads/{stuck}")).await.body;
    assert!(page.contains("class=\"banner blocked\""), "{page}");
    assert!(page.contains("the spec contradicts itself"), "{page}");
    assert!(
        page.contains("/retry\""),
        "a blocked bead offers Retry: {page}"
    );
    assert!(page.contains("data-confirm=\"Cancel cat-stuck?"), "{page}");
    assert!(page.contains("<strong>Bold</strong>"), "{page}");
    assert!(!page.contains("<script>alert(1)"), "{page}");
    assert!(
        !page.to_ascii_lowercase().contains("href=\"javascript"),
        "{page}"
    );
    assert!(page.contains("<time datetime=\""), "{page}");

    let retried = daemon.submit(bead("Tries twice")).await;
    daemon.wait_status(&retried, "closed").await;
    let page = site.get(&format!("/beads/{retried}")).await.body;
    assert!(page.contains("<tr class=\"run failed\""), "{page}");
    assert!(
        page.contains("<strong>failed</strong>: no changes"),
        "{page}"
    );
    assert!(
        !page.contains("/cancel\""),
        "a closed bead offers no Cancel: {page}"
    );
    assert!(!page.contains("/retry\""), "nor Retry: {page}");

    daemon
        .call(catalyst::protocol::Method::Cancel(
            catalyst::protocol::CloseParams {
                id: stuck.clone(),
                reason: None,
            },
        ))
        .await;
    let page = site.get(&format!("/beads/{stuck}")).await.body;
    assert!(page.contains("data-live=\"state\">cancelled<"), "{page}");
    let board = site.get("/?status=closed").await.body;
    assert!(board.contains(">cancelled"), "{board}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_says_which_file_a_reload_refused() {
    let (daemon, site) = Site::start(QUICK).await;
    let formulas = daemon.workspace().paths.state.join("formulas");
    std::fs::create_dir_all(&formulas).expect("formulas dir");
    std::fs::write(formulas.join("late.formula.toml"), "formula = \n").expect("broken");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert!(code != 0, "{err}");
    let board = site.get("/").await;
    assert_eq!(board.code, StatusCode::OK);
    assert!(
        board.body.contains("refused <code>")
            && board.body.contains("late.formula.toml</code>")
            && board.body.contains("catalyst ctl reload"),
        "{}",
        board.body
    );
}

/// The part of the board's page that is lane `lane`'s column.
fn lane<'a>(board: &'a str, lane: &str) -> &'a str {
    let open = format!("data-lane=\"{lane}\">");
    let start = board
        .find(&open)
        .unwrap_or_else(|| panic!("no lane {lane}: {board}"));
    let rest = &board[start..];
    &rest[..rest.find("</div>").expect("the lane ends")]
}

/// The ids of the cards in lane `lane` of the board.
fn cards(board: &str, lane_name: &str) -> Vec<String> {
    lane(board, lane_name)
        .split("<li class=\"card\" data-id=\"")
        .skip(1)
        .map(|card| card[..card.find('"').expect("the id ends")].to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_puts_each_bead_in_the_column_of_what_it_waits_for() {
    let ws = Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&format!(
        r#"
[[rule]]
role = "implement"
bead = "cat-stuck"
responses = [{{ status = "BLOCKED", summary = "the spec contradicts itself" }}]

[[rule]]
role = "implement"
bead = "cat-slow"
responses = [{{ wait_for = {go:?}, write = {{ "slow.txt" = "slow\n" }}, summary = "slow" }}]

[[rule]]
role = "implement"
bead = "gate-1"
responses = [{{ write = {{ "gate.txt" = "gate\n" }}, summary = "wrote gate.txt" }}]

[[rule]]
role = "implement"
responses = [{{ write = {{ "hello.txt" = "hello\n" }}, summary = "wrote hello.txt" }}]
"#,
        go = go.display().to_string(),
    ));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws).await;
    let site = Site {
        http: client(),
        base,
        token,
    };
    let with_id = |id: &str, after: &[&str]| catalyst::protocol::BeadInput {
        id: Some(id.to_owned()),
        after: after.iter().map(|a| a.to_string()).collect(),
        ..bead(&format!("Bead {id}"))
    };
    daemon.submit(with_id("cat-done", &[])).await;
    daemon.wait_status("cat-done", "closed").await;
    daemon.submit(with_id("cat-stuck", &[])).await;
    daemon.wait_status("cat-stuck", "blocked").await;
    daemon.submit(with_id("cat-after", &["cat-stuck"])).await;
    daemon.submit_gated_waiting("gate-1", "true").await;
    daemon.submit(with_id("cat-slow", &[])).await;
    daemon
        .wait_for("the slow implement attempt", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-slow.implement"
        })
        .await;
    daemon
        .call(catalyst::protocol::Method::Pause(
            catalyst::protocol::PauseParams { model: None },
        ))
        .await;
    daemon.submit(with_id("cat-ready", &[])).await;

    let board = site.get("/").await;
    assert_eq!(board.code, StatusCode::OK);
    let board = board.body;
    assert_eq!(cards(&board, "ready"), ["cat-ready"], "{board}");
    assert_eq!(cards(&board, "running"), ["cat-slow"], "{board}");
    assert_eq!(cards(&board, "needs_person"), ["gate-1"], "{board}");
    let mut blocked = cards(&board, "blocked");
    blocked.sort();
    assert_eq!(blocked, ["cat-after", "cat-stuck"], "{board}");
    assert_eq!(cards(&board, "done"), ["cat-done"], "{board}");
    // Each card links to its bead and says why it stands there.
    let needs = lane(&board, "needs_person");
    assert!(needs.contains("href=\"/beads/gate-1\""), "{needs}");
    assert!(needs.contains("approve waits for an approval"), "{needs}");
    let stuck = lane(&board, "blocked");
    assert!(
        stuck.contains("<span class=\"detail\">blocked: ")
            && stuck.contains("the spec contradicts itself"),
        "{stuck}"
    );
    assert!(stuck.contains("waiting for cat-stuck"), "{stuck}");
    assert!(lane(&board, "running").contains("implement"), "{board}");
    assert!(lane(&board, "done").contains("closed"), "{board}");
    // The table stays beside the columns.
    assert!(board.contains("<table class=\"beads\">"), "{board}");

    // A column's heading lists its beads in the table, a page at a time.
    let listed = site.get("/?lane=blocked").await.body;
    let table = &listed[listed.find("<table class=\"beads\">").expect("the table")..];
    for id in ["cat-stuck", "cat-after"] {
        assert!(
            table.contains(&format!("data-id=\"{id}\"")),
            "{id}: {table}"
        );
    }
    for id in ["cat-ready", "cat-slow", "gate-1", "cat-done"] {
        assert!(
            !table.contains(&format!("data-id=\"{id}\"")),
            "{id}: {table}"
        );
    }
    assert!(table.contains("(2 beads in Blocked)"), "{table}");
    let listed = site.get("/?lane=needs_person").await.body;
    let table = &listed[listed.find("<table class=\"beads\">").expect("the table")..];
    assert!(table.contains("data-id=\"gate-1\""), "{table}");
    assert!(table.contains("(1 beads in Needs a person)"), "{table}");
    std::fs::write(&go, "").expect("release the slow agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beads_diff_lists_its_files_with_their_counts_and_numbers_each_line() {
    let ws = Workspace::new("", "");
    let lines: Vec<String> = (1..=10).map(|n| format!("line {n}")).collect();
    let before = lines.join("\n") + "\n";
    catalyst_testkit::repo::commit_file(&ws.repo, "notes.txt", &before, "notes");
    let after = before.replace("line 5\n", "line five\n");
    ws.set_scenario(&format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ write = {{ \"hello.txt\" = \"hello\\n\", \"notes.txt\" = {after:?} }}, summary = \"edited\" }}]\n"
    ));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws).await;
    let site = Site {
        http: client(),
        base,
        token,
    };
    let id = daemon.submit(bead("Edit the notes")).await;
    daemon.wait_status(&id, "closed").await;
    let page = site.get(&format!("/beads/{id}")).await.body;

    // The files, in the patch's order, with what each adds and removes, linking to their part.
    assert!(
        page.contains("<a href=\"#file-1\">hello.txt</a> <span class=\"added\">+1</span> <span class=\"removed\">−0</span>"),
        "{page}"
    );
    assert!(
        page.contains("<a href=\"#file-2\">notes.txt</a> <span class=\"added\">+1</span> <span class=\"removed\">−1</span>"),
        "{page}"
    );
    let part = |anchor: &str| {
        let start = page
            .find(&format!("id=\"{anchor}\""))
            .unwrap_or_else(|| panic!("no part {anchor}: {page}"));
        page[start..].lines().next().expect("a row").to_owned()
    };
    assert!(part("file-1").contains("hello.txt"), "{page}");
    assert!(part("file-2").contains("notes.txt"), "{page}");

    // Each line with its number before and after the change.
    let row = |kind: &str, old: &str, new: &str, text: &str| {
        format!("<tr class=\"{kind}\"><td class=\"ln old\">{old}</td><td class=\"ln new\">{new}</td><td class=\"code\">{text}</td></tr>")
    };
    for expected in [
        row("add", "", "1", "+hello"),
        row("ctx", "4", "4", " line 4"),
        row("del", "5", "", "-line 5"),
        row("add", "", "5", "+line five"),
        row("ctx", "6", "6", " line 6"),
    ] {
        assert!(page.contains(&expected), "{expected}: {page}");
    }
}
