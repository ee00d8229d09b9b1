//! A daemon started as root (a system service, a container): bubblewrap keeps every capability
//! of a root caller unless told otherwise, and an agent holding them could remount `/`
//! writable, unmount the private `/tmp` and the empty file system over the state folder, read
//! the journal and approve a waiting bead through the daemon's real socket. These run only as
//! root, as CI does.

use crate::{MAIN_CHECKOUT, STATE};

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    println!("SKIPPED: the daemon is not running as root");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_daemons_agent_holds_no_capability_and_cannot_leave_its_mounts() {
    if crate::skip() || !root() {
        return;
    }
    let planted = format!("/etc/catalyst-root-escape-{}", std::process::id());
    let commands = [
        "grep CapEff /proc/self/status".to_owned(),
        "mount -o remount,rw /".to_owned(),
        "umount -l /tmp".to_owned(),
        format!("umount -l {STATE}"),
        format!("touch {planted}"),
        format!("cat {STATE}/journal.jsonl"),
        format!(
            "{} ctl --workspace {MAIN_CHECKOUT} approve cat-gated",
            catalyst_testkit::catalyst_bin().display()
        ),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (daemon, shell) = crate::attempt_beside_a_waiting_approval(&commands).await;
    let escaped = std::path::Path::new(&planted).exists();
    let _ = std::fs::remove_file(&planted);
    assert!(!escaped, "a file written on the host: {shell:?}");
    assert!(
        shell[0].output.contains("CapEff:\t0000000000000000"),
        "{shell:?}"
    );
    for s in &shell[1..] {
        assert_ne!(s.exit_code, Some(0), "{s:?} in {shell:?}");
    }
    let shown = daemon.show("cat-gated").await;
    assert_eq!(shown["bead"]["status"], "in_progress", "{shown}");
}

#[test]
fn an_unconfined_profile_or_gate_is_refused_under_a_root_daemon_unless_the_config_accepts_it() {
    use catalyst::daemon::sandbox::{check, Confined};
    use catalyst::domain::agent::sandbox::SandboxKind;
    if !root() {
        return;
    }
    for what in [Confined::Agents("loose"), Confined::Gates] {
        let refused = check(what, SandboxKind::None, false)
            .expect_err("refused as root")
            .to_string();
        assert!(refused.contains("allow_unconfined_root"), "{refused}");
        check(what, SandboxKind::None, true).expect("accepted when the config says so");
    }
}
