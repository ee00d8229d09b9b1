//! A prompt template that would run for hours: refused on reload when it cannot finish with
//! sample values, and bounded at dispatch when only a real step's values set it off, so the
//! engine keeps answering and the attempt fails with the reason.

use catalyst::protocol::Method;
use catalyst_testkit::scenario::EACH_BEAD_WRITES_ITS_FILE;
use catalyst_testkit::{bead_with_id, Workspace};

/// Ten thousand million iterations, whatever the values.
const ALWAYS: &str = "[prompts.implement]\ntemplate = '''{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}'''\n";

/// The same loops, run only for a step that is not the sample's.
const LATER: &str = "[prompts.implement]\ntemplate = '''{% if step_id != \"cat-1.implement\" %}{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}{% endif %}Implement {{ bead_id }}.'''\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_that_would_hang_the_engine_is_refused_or_bounded() {
    let ws = Workspace::new(EACH_BEAD_WRITES_ITS_FILE, "");
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;

    std::fs::write(ws.paths.prompts(), ALWAYS).expect("prompts");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert!(
        code != 0
            && err.contains("template `implement` does not finish within the bounds")
            && err.contains("agent_prompts.toml"),
        "refused by name: {err}"
    );

    std::fs::write(ws.paths.prompts(), LATER).expect("prompts");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(code, 0, "the sample render is bounded and short: {err}");
    let mut events = daemon.subscribe(0).await;
    let id = daemon.submit(bead_with_id("cat-big")).await;
    let retry = events
        .wait_for("the first attempt's retry", |e| {
            e["type"] == "step.retry" && e["step"] == "cat-big.implement"
        })
        .await;
    let reason = retry["reason"].as_str().expect("reason");
    assert!(
        reason.contains("template `implement`") && reason.contains("out of fuel"),
        "{reason}"
    );
    // The engine answered all along and still does.
    let (code, status, err) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(status.contains("cat-big"), "{status}");

    // Every attempt fails the same way, quickly, and the bead ends blocked with the reason.
    daemon.wait_status(&id, "blocked").await;

    // A good template again: the next bead runs and merges.
    std::fs::remove_file(ws.paths.prompts()).expect("remove prompts");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(code, 0, "{err}");
    let next = daemon.submit(bead_with_id("cat-next")).await;
    daemon.wait_status(&next, "closed").await;
}
