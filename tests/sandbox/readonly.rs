//! A read-only reviewer's `Bash`: the hook reads a command as bash will run it, so brace
//! expansion, abbreviated or glued options, a carriage return before `#` and programs that run
//! other programs are refused, and nothing they would write appears.

use catalyst_testkit::{bead, TestDaemon};

const BYPASSES: [&str; 8] = [
    "find . {-exec,} touch found.txt ';'",
    "sort {-o,sorted.txt} README.md",
    "git log {--output=log.txt,}",
    "git grep -O'touch grep.txt' demo",
    "sort --o=short.txt README.md",
    "tail --fo README.md",
    "rg --hostname-bin=./x demo",
    "ls\r#; touch cr.txt",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reviewers_bash_bypasses_are_refused() {
    let calls: Vec<String> = BYPASSES
        .iter()
        .map(|c| {
            format!(
                "{{ name = \"Bash\", input = {{ command = {} }} }}",
                toml::Value::String((*c).to_owned())
            )
        })
        .collect();
    let scenario = format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [{{ write = {{ \"a.txt\" = \"a\\n\" }} }}]\n\n[[rule]]\nrole = \"review\"\nresponses = [{{ tools = [{}], verdict = \"APPROVED\" }}]\n",
        calls.join(", ")
    );
    let daemon = TestDaemon::start(&scenario, "").await;
    let id = daemon.submit(bead("Read only")).await;
    daemon.wait_status(&id, "closed").await;
    let review = daemon
        .invocations()
        .into_iter()
        .find(|i| i.role() == "review")
        .expect("the review ran");
    assert_eq!(review.tools.len(), BYPASSES.len());
    for tool in &review.tools {
        assert!(!tool.allowed, "{tool:?}");
    }
    for file in [
        "found.txt",
        "sorted.txt",
        "log.txt",
        "grep.txt",
        "short.txt",
        "cr.txt",
    ] {
        assert_eq!(daemon.file_on_main(file), None, "{file}");
        assert!(!daemon.repo.join(file).exists(), "{file}");
    }
}
