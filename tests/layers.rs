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

#[test]
fn comments_are_not_code() {
    assert_eq!(
        code("    use tokio::sync::mpsc;"),
        "    use tokio::sync::mpsc;"
    );
    assert_eq!(code("    /// uses `tokio`"), "");
    assert_eq!(code("let a = 1; // std::fs"), "let a = 1;");
}

/// Runs `.ci/module-cycles.py` on a module graph in the format `cargo modules dependencies`
/// prints, and returns its exit code and output.
fn module_cycles(uses: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut dot = String::from("digraph {\n");
    for m in ["c", "c::a", "c::b", "c::a::inner"] {
        dot.push_str(&format!(
            "    \"{m}\" [label=\"pub mod|{m}\", fillcolor=\"#81c169\"]; // \"mod\" node\n"
        ));
    }
    for (from, to) in uses {
        dot.push_str(&format!(
            "    \"{from}\" -> \"{to}\" [label=\"uses\", color=\"#7f7f7f\", style=\"dashed\"] [constraint=false]; // \"uses\" edge\n"
        ));
    }
    dot.push_str("}\n");
    let graph = dir.path().join("graph.dot");
    std::fs::write(&graph, dot).expect("write the graph");
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/module-cycles.py"))
        .arg(&graph)
        .output()
        .expect("run python3");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_cycle_check_finds_modules_that_use_each_other() {
    let (code, out) = module_cycles(&[("c::a::inner", "c::b"), ("c::b", "c::a")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cycle: c::a <-> c::a::inner <-> c::b") || out.contains("c::b uses c::a"),
        "{out}"
    );
    // A module and its own submodules may use each other; one-way uses are no cycle.
    let (code, out) = module_cycles(&[
        ("c::a", "c::a::inner"),
        ("c::a::inner", "c::a"),
        ("c::a", "c::b"),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("4 modules, 1 uses between them, 0 cycles"),
        "{out}"
    );
}
