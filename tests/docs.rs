//! The project stands alone for its readers: its README, docs, sources and shipped files point
//! at nothing outside the repository (no design folder next to it, no issue numbers), and every
//! relative link in the README and docs leads to a file that exists.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files a reader of the project meets: the README, docs, sources, tests, shipped files.
fn readable_files() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("agent_prompts.toml")];
    for dir in [
        "docs",
        "src",
        "tests",
        "formulas",
        "contrib",
        "benches",
        "stub-claude",
        "testkit",
    ] {
        walk(&root().join(dir), &mut out);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            walk(&path, out);
        } else if path.extension().is_some_and(|e| {
            ["rs", "md", "toml", "service", "plist", "sh"].contains(&e.to_str().unwrap_or(""))
        }) {
            out.push(path);
        }
    }
}

#[test]
fn nothing_points_outside_the_repository_or_at_issue_numbers() {
    // Spelt in two pieces so that this file does not find itself.
    let outside = ["../sha", "red/"].concat();
    let issue = regex::Regex::new(&["(?i)\\bissue", "[ -]?#?[0-9]+"].concat()).expect("regex");
    let mut found = Vec::new();
    for file in readable_files() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.contains(&outside) || issue.is_match(line) {
                let rel = file.strip_prefix(root()).unwrap_or(&file);
                found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn relative_links_in_the_readme_and_docs_lead_to_files_that_exist() {
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)\s]*)?\)").expect("regex");
    let mut docs = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut docs);
    let mut broken = Vec::new();
    for file in docs
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(file).expect("read");
        for cap in link.captures_iter(&text) {
            let target = &cap[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = file.parent().expect("a folder").join(target);
            if !path.exists() {
                let rel = file.strip_prefix(root()).unwrap_or(file);
                broken.push(format!("{}: {target}", rel.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
