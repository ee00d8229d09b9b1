//! The crate's layers depend only downward (`cli` → `daemon` → `protocol` → `domain`), and the
//! pure core names no I/O at all. Clippy's disallowed methods and types catch calls; this test
//! reads the sources so that a mere `use` of an upper layer, tokio or a blocking module fails
//! too, with the file and line.

use std::path::{Path, PathBuf};

/// What each layer's sources must not name: upper layers, and for the core any I/O.
const RULES: [(&str, &[&str]); 3] = [
    (
        "src/domain",
        &[
            "crate::protocol",
            "crate::daemon",
            "crate::cli",
            "tokio",
            "std::fs",
            "std::process",
            "std::net",
            "std::os::unix::net",
            "std::env",
            "git2",
            "notify::",
        ],
    ),
    (
        "src/protocol",
        &["crate::daemon", "crate::cli", "tokio::fs", "std::fs"],
    ),
    ("src/daemon", &["crate::cli"]),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a line, without its comment (doc comments may name anything).
fn code(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    line.split(" //").next().unwrap_or(line)
}

#[test]
fn layers_name_only_the_layers_below_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for (layer, forbidden) in RULES {
        let mut files = Vec::new();
        rust_files(&root.join(layer), &mut files);
        assert!(!files.is_empty(), "no sources under {layer}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            for (n, line) in text.lines().enumerate() {
                let code = code(line);
                for name in forbidden {
                    if code.contains(name) {
                        found.push(format!(
                            "{}:{}: names `{name}`: {}",
                            file.strip_prefix(root).unwrap_or(&file).display(),
                            n + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "layering broken:\n{}", found.join("\n"));
}

/// The modules that may hold `unsafe` code, each for a system call no safe crate wraps.
/// The workspace's lints deny it everywhere else; a module that allows it must be named here.
const UNSAFE_MODULES: [&str; 5] = [
    "src/bin/catalyst-hook.rs",
    "src/bin/catalystd.rs",
    "src/daemon/agent/spawn.rs",
    "src/daemon/fswatch.rs",
    "src/daemon/sched.rs",
];

/// The most `unsafe` blocks `src/` may hold.
const MAX_UNSAFE: usize = 10;

/// `unsafe` stays rare and where it is declared: at most [`MAX_UNSAFE`] blocks (or functions,
/// impls, extern blocks) in `src/`, all in [`UNSAFE_MODULES`], each module allowing it at its
/// top.
#[test]
fn unsafe_code_is_rare_and_only_where_a_module_says_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let name = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file).expect("a source file");
        let allows = text.contains("#![allow(unsafe_code)]");
        assert!(
            !allows || UNSAFE_MODULES.contains(&name.as_str()),
            "{name} allows `unsafe` but is not among the modules that may"
        );
        for (n, line) in text.lines().enumerate() {
            let code = code(line);
            if ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"]
                .iter()
                .any(|u| code.contains(u))
            {
                assert!(
                    allows,
                    "{name}:{}: `unsafe` outside the allowed modules",
                    n + 1
                );
                found.push(format!("{name}:{}", n + 1));
            }
        }
    }
    assert!(
        found.len() <= MAX_UNSAFE,
        "{} `unsafe` blocks in src/, at most {MAX_UNSAFE}:\n{}",
        found.len(),
        found.join("\n")
    );
    println!(
        "{} `unsafe` blocks in src/: {}",
        found.len(),
        found.join(", ")
    );
}

#[test]
fn comments_are_not_code() {
    assert_eq!(
        code("    use tokio::sync::mpsc;"),
        "    use tokio::sync::mpsc;"
    );
    assert_eq!(code("    /// uses `tokio`"), "");
    assert_eq!(code("let a = 1; // std::fs"), "let a = 1;");
}

/// Runs `.ci/module-cycles.py` on a source folder of `files` (path, text), and returns its
/// exit code and output.
fn module_cycles(files: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&path, text).expect("write a source file");
    }
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/module-cycles.py"))
        .arg(dir.path())
        .output()
        .expect("run python3");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const LIB: &str = "pub mod a;\npub mod b;\n";

#[test]
fn the_cycle_check_finds_a_circle_made_by_a_whole_path() {
    // `b` names `a` only in a call, never in a `use`: a check of `use` items misses it.
    let (code, out) = module_cycles(&[
        ("lib.rs", LIB),
        ("a/mod.rs", "pub mod inner;\npub const LIMIT: u64 = 1;\n"),
        ("a/inner.rs", "use crate::b::Error;\n"),
        (
            "b.rs",
            "pub struct Error;\n// crate::a::nothing in a comment\npub fn limit() -> u64 { crate::a::LIMIT }\n",
        ),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cycle: crate::a <-> crate::b"), "{out}");
    assert!(
        out.contains("crate::b uses crate::a (crate::a::LIMIT)")
            && out.contains("crate::a::inner uses crate::b (crate::b::Error)"),
        "{out}"
    );
}

#[test]
fn the_cycle_check_lets_a_module_and_its_submodules_use_each_other() {
    let (code, out) = module_cycles(&[
        ("lib.rs", LIB),
        (
            "a/mod.rs",
            "pub mod inner;\npub use inner::Thing;\nuse crate::b::{self, Other as O};\n",
        ),
        ("a/inner.rs", "pub struct Thing;\nfn f() { super::super::a::g(); }\n"),
        (
            "b.rs",
            "pub struct Other;\nconst S: &str = \"crate::a::Thing\";\n#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\n",
        ),
    ]);
    assert_eq!(code, 0, "{out}");
    // `a` names `b` twice (`self` and `Other`); the string and the test module count for nothing.
    assert!(
        out.contains("4 modules, 2 uses between them, 0 cycles"),
        "{out}"
    );
}
