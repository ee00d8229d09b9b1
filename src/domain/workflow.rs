//! The workflow's own files: what a bead must not change without a person's approval.
//!
//! Formulas, prompts, the state folder, the followed beads file and the CI or hook files named
//! in the config decide what the daemon runs. A bead whose change touches one of them waits
//! before its merge until a person approves that change; see `docs/worktrees.md`.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The config's `workflow_files` when it does not say: the files catalyst itself reads, and
/// where common CI systems and git hook managers keep theirs.
pub const DEFAULT_WORKFLOW_FILES: [&str; 9] = [
    ".catalyst/",
    ".beads/",
    "*.formula.toml",
    "agent_prompts.toml",
    ".github/",
    ".gitlab-ci.yml",
    ".githooks/",
    ".husky/",
    ".pre-commit-config.yaml",
];

/// Paths relative to the repository's root, matched like `.gitignore` lines: `dir/` is the
/// folder and everything in it, a pattern without `/` matches a name in any folder, any other
/// pattern matches from the root (`*` stops at `/`, `**` does not).
#[derive(Clone, Debug)]
pub struct WorkflowFiles {
    set: GlobSet,
}

impl WorkflowFiles {
    /// Compiles `patterns`; an error names the pattern.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<WorkflowFiles, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            builder.add(glob(pattern)?);
        }
        let set = builder
            .build()
            .map_err(|e| format!("`workflow_files`: {e}"))?;
        Ok(WorkflowFiles { set })
    }

    /// Whether `path` (relative to the repository's root, `/`-separated) is a workflow file.
    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path.trim_start_matches("./"))
    }
}

impl Default for WorkflowFiles {
    fn default() -> Self {
        WorkflowFiles::new(&DEFAULT_WORKFLOW_FILES).expect("the default patterns compile")
    }
}

/// One `.gitignore`-like line as a glob anchored at the root.
fn glob(pattern: &str) -> Result<Glob, String> {
    let bad = |why: &str| format!("`workflow_files`: `{pattern}` {why}");
    let trimmed = pattern.trim();
    if trimmed.is_empty() || trimmed == "/" {
        return Err(bad("names no file"));
    }
    if trimmed.split('/').any(|part| part == "..") {
        return Err(bad("leaves the repository"));
    }
    let anchored = trimmed.trim_start_matches('/');
    let rooted = if let Some(dir) = anchored.strip_suffix('/') {
        let dir = if trimmed.starts_with('/') || dir.contains('/') {
            dir.to_owned()
        } else {
            format!("**/{dir}")
        };
        format!("{dir}/**")
    } else if trimmed.starts_with('/') || anchored.contains('/') {
        anchored.to_owned()
    } else {
        format!("**/{anchored}")
    };
    GlobBuilder::new(&rooted)
        .literal_separator(true)
        .build()
        .map_err(|e| bad(&format!("is not a pattern: {}", e.kind())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_cover_formulas_prompts_state_beads_and_ci() {
        let files = WorkflowFiles::default();
        for path in [
            ".beads/formulas/feature.formula.toml",
            ".beads/issues.jsonl",
            ".catalyst/config.toml",
            "formulas/feature.formula.toml",
            "deep/down/x.formula.toml",
            "agent_prompts.toml",
            "tools/agent_prompts.toml",
            ".github/workflows/ci.yml",
            ".gitlab-ci.yml",
            ".githooks/pre-commit",
            ".husky/pre-push",
            "./.pre-commit-config.yaml",
        ] {
            assert!(files.matches(path), "{path} should be a workflow file");
        }
        for path in [
            "src/main.rs",
            "README.md",
            "formulas.md",
            "x.formula.toml.bak",
            "docs/.github.md",
        ] {
            assert!(!files.matches(path), "{path} should not be a workflow file");
        }
    }

    #[test]
    fn patterns_read_like_gitignore_lines() {
        let files =
            WorkflowFiles::new(&["ci/", "/Makefile", "scripts/*.sh", "hooks/**/run", "/top/"])
                .expect("valid patterns");
        assert!(files.matches("ci/build.yml"));
        assert!(
            files.matches("sub/ci/build.yml"),
            "a trailing `/` alone does not root"
        );
        assert!(files.matches("top/x"));
        assert!(!files.matches("sub/top/x"), "a leading `/` roots");
        assert!(files.matches("Makefile"));
        assert!(!files.matches("sub/Makefile"));
        assert!(files.matches("scripts/test.sh"));
        assert!(!files.matches("scripts/deep/test.sh"), "`*` stops at `/`");
        assert!(files.matches("hooks/a/b/run"));
    }

    #[test]
    fn a_bad_pattern_is_named() {
        for (pattern, why) in [
            ("", "names no file"),
            ("../x", "leaves the repository"),
            ("a[", "is not a pattern"),
        ] {
            let err = WorkflowFiles::new(&[pattern]).expect_err(pattern);
            assert!(err.contains(why) && err.contains("workflow_files"), "{err}");
        }
        let none = WorkflowFiles::new::<&str>(&[]).expect("an empty list");
        assert!(!none.matches(".beads/formulas/x.formula.toml"));
    }
}
