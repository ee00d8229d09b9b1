//! Inputs with no bound: a bead too big for a journal line, a huge inbox file, an inbox link
//! to a file the daemon can read but nobody meant to hand it. One bead size limit holds at
//! every door; the inbox reads only regular files under its limit, never through a link, and
//! no refusal quotes a file's content.

use std::time::Duration;

use catalyst::domain::id::BeadId;
use catalyst::domain::model::{Bead, MAX_BEAD_BYTES};
use catalyst::protocol::{BeadInput, ImportParams, Method, PauseParams};
use catalyst_testkit::poll::eventually;
use catalyst_testkit::procfs::vm_kb;
use catalyst_testkit::{bead, Workspace};

const SECRET: &str = "root:$6$s3cr3t-hash-nobody-may-read:19000:0:99999:7:::";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bead_limit_at_every_door_and_the_inbox_reads_only_what_it_should() {
    let ws = Workspace::builder().build();
    let daemon = ws.spawn();
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    let big = "x".repeat(MAX_BEAD_BYTES + 1);
    let says_too_big = |text: &str| {
        text.contains("bytes of JSON; a bead may be at most") && !text.contains("xxxxxxxx")
    };

    // The socket: a line under the protocol's limit, a bead over the bead limit.
    let mut client = daemon.client().await;
    let err = client
        .call(&Method::Submit(vec![BeadInput {
            description: Some(big.clone()),
            ..bead("too big")
        }]))
        .await
        .expect_err("refused")
        .to_string();
    assert!(says_too_big(&err), "{err}");

    // An import.
    let mut imported = Bead::new(
        BeadId::new("imp-1").expect("id"),
        "imported",
        catalyst::daemon::clock::now(),
    );
    imported.description = Some(big.clone());
    let answer = client
        .call(&Method::Import(ImportParams {
            beads: vec![imported],
        }))
        .await
        .expect("an import answers with what it took");
    assert_eq!(answer["created"], 0, "{answer}");
    let invalid = answer["invalid"][0][1].as_str().unwrap_or_default();
    assert!(says_too_big(invalid), "{answer}");

    // The inbox: a bead too big, a file too big, a link to a secret, a fifo.
    let inbox = ws.paths.inbox();
    let described = serde_json::json!({"title": "from the inbox", "description": big});
    std::fs::write(inbox.join(".big-bead.tmp"), described.to_string()).expect("write");
    std::fs::rename(inbox.join(".big-bead.tmp"), inbox.join("big-bead.json")).expect("rename");
    let huge = std::fs::File::create(inbox.join(".huge.tmp")).expect("create");
    // Sparse: a gibibyte of file, next to nothing on disk.
    huge.set_len(1 << 30).expect("set_len");
    drop(huge);
    std::fs::rename(inbox.join(".huge.tmp"), inbox.join("huge.json")).expect("rename");
    let secret = ws.repo.parent().expect("parent").join("shadow");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("secret");
    std::os::unix::fs::symlink(&secret, inbox.join(".link.tmp")).expect("symlink");
    std::fs::rename(inbox.join(".link.tmp"), inbox.join("link.json")).expect("rename");
    nix::unistd::mkfifo(
        &inbox.join(".fifo.tmp"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("fifo");
    std::fs::rename(inbox.join(".fifo.tmp"), inbox.join("fifo.json")).expect("rename");

    let rejected = ws.paths.rejected();
    let why = |name: &str| std::fs::read_to_string(rejected.join(format!("{name}.why"))).ok();
    let reasons = eventually("the four files moved aside", async || {
        let all: Vec<String> = ["big-bead.json", "huge.json", "link.json", "fifo.json"]
            .iter()
            .map(|n| why(n))
            .collect::<Option<_>>()?;
        Some(all)
    })
    .await;
    assert!(says_too_big(&reasons[0]), "{}", reasons[0]);
    assert!(
        reasons[1].contains("it is 1073741824 bytes; an inbox file may be at most"),
        "{}",
        reasons[1]
    );
    assert!(reasons[2].contains("symbolic link"), "{}", reasons[2]);
    assert!(reasons[3].contains("not a regular file"), "{}", reasons[3]);
    // The link was moved, not what it points to; nothing of the secret went anywhere.
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        format!("{SECRET}\n")
    );
    let log = daemon.stderr();
    for text in reasons.iter().chain(std::iter::once(&log)) {
        assert!(!text.contains("s3cr3t"), "{text}");
    }
    // The gibibyte was never read into memory.
    let peak = vm_kb(daemon.pid(), "VmHWM").expect("VmHWM");
    println!(
        "daemon peak RSS with a 1 GiB inbox file: {} MB",
        peak / 1024
    );
    assert!(peak < 256 * 1024, "peak RSS {peak} kB");

    // Nothing was recorded, and the daemon answers at once.
    let status = tokio::time::timeout(Duration::from_secs(5), daemon.call(Method::Status))
        .await
        .expect("status answers");
    let beads: u64 = status["beads"]
        .as_object()
        .expect("counts")
        .values()
        .filter_map(serde_json::Value::as_u64)
        .sum();
    assert_eq!(beads, 0, "{status}");
}
