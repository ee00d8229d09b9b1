//! Compiles `shim/main.rs`, the agents' process shim without a C library, for the daemon's
//! binaries to carry (`src/daemon/agent/shim_bin.rs`). It is compiled alone, with `rustc`
//! rather than as a Cargo target, because it needs `panic = abort` and its own link flags
//! while the rest of the crate unwinds. Only for x86-64 Linux, whose system calls it makes;
//! elsewhere the daemon starts `catalyst-hook __exec`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=shim/main.rs");
    println!("cargo::rerun-if-changed=shim/sys.rs");
    println!("cargo::rustc-check-cfg=cfg(embedded_shim)");
    let target = env::var("TARGET").expect("cargo sets TARGET");
    if !(target.starts_with("x86_64-") && target.contains("-linux-")) {
        return;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalyst-shim");
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--crate-name",
            "catalyst_shim",
        ])
        .args(["--target", &target])
        .args([
            "-C",
            "opt-level=s",
            "-C",
            "panic=abort",
            "-C",
            "debuginfo=0",
        ])
        .args(["-C", "strip=symbols", "-C", "relocation-model=static"])
        .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
        .args(["-C", "link-arg=-static"])
        .arg("-o")
        .arg(&out)
        .arg("shim/main.rs")
        .status()
        .expect("run rustc for shim/main.rs");
    assert!(status.success(), "shim/main.rs did not compile: {status}");
    println!("cargo::rustc-cfg=embedded_shim");
    println!("cargo::rustc-env=CATALYST_SHIM_BIN={}", out.display());
}
