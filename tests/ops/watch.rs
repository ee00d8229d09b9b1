//! `ctl watch` in a real terminal: tmux runs it, capture-pane reads the screen.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

use catalyst_testkit::cli::have;
use catalyst_testkit::scenario::{implement_waits_for, IMPLEMENT_REPORTS_BLOCKED};
use catalyst_testkit::{bead, catalyst_bin, poll, Workspace};

/// A tmux server of our own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(cwd: &Path) -> Tmux {
        // A server per test: the tests of this binary run at the same time.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: format!("catalyst-ops-{}-{n}", std::process::id()),
        };
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            cwd.to_str().expect("utf-8"),
            "sh",
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn type_line(&self, line: &str) {
        self.run(&["send-keys", "-t", "t", "-l", line]);
        self.run(&["send-keys", "-t", "t", "Enter"]);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen shows `needle` (tmux has no notification for that; the screen
    /// is read again every 50 ms, within one timeout).
    async fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let found = poll::poll(Duration::from_millis(50), async || {
            let screen = self.screen();
            pred(&screen).then_some(screen)
        })
        .await;
        found.unwrap_or_else(|| {
            panic!(
                "timed out waiting for {what}; the screen:\n{}",
                self.screen()
            )
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_watch_follows_a_run_and_restores_the_terminal() {
    if !have("tmux") {
        return;
    }
    let ws = Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&implement_waits_for(&go));
    let mut daemon = ws.spawn();
    daemon.client().await;

    let catalyst = catalyst_bin().display().to_string();
    let tmux = Tmux::start(&ws.root);
    let before = ws.root.join("stty-before");
    let after = ws.root.join("stty-after");
    tmux.type_line(&format!(
        "echo shell-before-watch; stty -g > {}; {catalyst} ctl watch --workspace {}; echo watch-exited-$?; stty -g > {}",
        before.display(),
        ws.repo.display(),
        after.display()
    ));
    tmux.wait_screen("the watch view", |s| {
        s.contains("RUNNING (0)") && s.contains("BEADS (0)")
    })
    .await;
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "t", "#{alternate_on}"])
            .trim(),
        "1"
    );

    let id = daemon.submit(bead("Write a")).await;
    let running = tmux
        .wait_screen("the implement step running at 1/4", |s| {
            s.contains("1/4") && s.contains(&format!("{id}.implement")) && s.contains("sonnet")
        })
        .await;
    assert!(running.contains("[###-------] 1/4"), "{running}");
    assert!(
        running.contains("RUNNING (1)") && running.contains("attempt 1"),
        "{running}"
    );
    // The elapsed time is a display timer: it moves while nothing else happens.
    tmux.wait_screen("the elapsed time to tick", |s| {
        s.contains("0:01") || s.contains("0:02")
    })
    .await;

    std::fs::write(&go, "").expect("release the agent");
    let done = tmux
        .wait_screen("the bead closed at 4/4", |s| {
            s.contains("[##########] 4/4") && s.contains("closed")
        })
        .await;
    assert!(
        done.contains("merge.completed")
            || done.contains("worktree.removed")
            || done.contains("bead.status"),
        "{done}"
    );

    tmux.run(&["send-keys", "-t", "t", "q"]);
    let back = tmux
        .wait_screen("the shell again", |s| s.contains("watch-exited-0"))
        .await;
    assert!(
        back.contains("shell-before-watch"),
        "the screen from before is back:\n{back}"
    );
    assert!(!back.contains("RUNNING"), "{back}");
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "t", "#{alternate_on}"])
            .trim(),
        "0"
    );
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "t", "#{cursor_flag}"])
            .trim(),
        "1"
    );
    tmux.wait_screen("stty to run", |_| after.exists()).await;
    assert_eq!(
        std::fs::read_to_string(&before).expect("before"),
        std::fs::read_to_string(&after).expect("after"),
        "the terminal modes are as they were"
    );

    // Ctrl-C quits too, in raw mode as outside it.
    tmux.type_line(&format!(
        "{catalyst} ctl watch --workspace {}; echo second-exit-$?",
        ws.repo.display()
    ));
    tmux.wait_screen("the watch view", |s| {
        s.contains("EVENTS") && !s.contains("second-exit")
    })
    .await;
    tmux.run(&["send-keys", "-t", "t", "C-c"]);
    tmux.wait_screen("the shell again", |s| s.contains("second-exit-0"))
        .await;

    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

/// `ctl status` says what needs a person and the command that helps; `ctl watch` opens with
/// the history (not an empty event list) and gives the events the terminal's spare rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_what_needs_a_person_and_watch_opens_with_history() {
    if !have("tmux") {
        return;
    }
    let ws = Workspace::new(IMPLEMENT_REPORTS_BLOCKED, "");
    let mut daemon = ws.spawn();
    let id = daemon.submit(bead("Impossible")).await;
    daemon.wait_status(&id, "blocked").await;
    let history = ws.journal().len();
    assert!(
        history > 8,
        "more events than the old fixed list of 8: {history}"
    );

    let catalyst = catalyst_bin().display().to_string();
    let tmux = Tmux::start(&ws.root);
    tmux.type_line(&format!(
        "{catalyst} ctl status --workspace {}; echo status-exited-$?",
        ws.repo.display()
    ));
    let status = tmux
        .wait_screen("the status", |s| s.contains("status-exited-0"))
        .await;
    for needed in [
        "Needs a person:".to_owned(),
        format!("blocked {id}  Impossible: implement: the agent reported BLOCKED: the spec contradicts itself"),
        format!("see why: catalyst ctl show {id}   run again: catalyst ctl retry {id}"),
        "Recent events:".to_owned(),
        "bead.comment".to_owned(),
    ] {
        assert!(status.contains(&needed), "`{needed}` in:\n{status}");
    }

    tmux.type_line(&format!(
        "clear; {catalyst} ctl watch --workspace {}; echo watch-exited-$?",
        ws.repo.display()
    ));
    let screen = tmux
        .wait_screen("the watch view with its history", |s| {
            s.contains("EVENTS") && s.contains("bead.created")
        })
        .await;
    let events = screen
        .lines()
        .skip_while(|l| !l.starts_with("EVENTS"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(
        events, history,
        "every event so far fits the 40 rows, not only the last 8:\n{screen}"
    );
    tmux.run(&["send-keys", "-t", "t", "q"]);
    tmux.wait_screen("the shell again", |s| s.contains("watch-exited-0"))
        .await;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

/// `ctl watch` ended when the daemon restarted. It now says the daemon stopped, and once the
/// daemon is back it follows again from where it was: a bead submitted after the restart
/// appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_watch_waits_out_a_restart_and_follows_again() {
    if !have("tmux") {
        return;
    }
    let ws = Workspace::new(catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO, "");
    let mut daemon = ws.spawn();
    daemon.client().await;
    let tmux = Tmux::start(&ws.root);
    tmux.type_line(&format!(
        "{} ctl watch --workspace {}; echo watch-exited-$?",
        catalyst_bin().display(),
        ws.repo.display()
    ));
    tmux.wait_screen("the watch view", |s| s.contains("BEADS (0)"))
        .await;
    assert!(daemon.terminate().await.success());
    tmux.wait_screen("the view saying the daemon stopped", |s| {
        s.contains("catalystd stopped") && !s.contains("watch-exited")
    })
    .await;
    let daemon = ws.spawn();
    let id = daemon.submit(bead("After the restart")).await;
    tmux.wait_screen("the new bead on the board", |s| {
        s.contains(&id) && !s.contains("catalystd stopped")
    })
    .await;
    tmux.run(&["send-keys", "-t", "t", "q"]);
    tmux.wait_screen("the shell again", |s| s.contains("watch-exited-0"))
        .await;
}
