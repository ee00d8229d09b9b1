//! The workflow's own files: what a bead must not change without a person's approval.
//!
//! Formulas, prompts, the state folder, the followed beads file and the CI or hook files named
//! in the config decide what the daemon runs. A bead whose change touches one of them waits
//! before its merge until a person approves that change; see `docs/worktrees.md`.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The config's `workflow_files` when it does not say: the files catalyst itself reads, and
/// where common CI systems and git hook managers keep theirs.
pub const DEFAULT_WORKFLOW_FILES: [&str; 21] = [
    ".catalyst/",
    ".beads/",
    "*.formula.toml",
    "agent_prompts.toml",
    // CI systems.
    ".github/",
    ".gitlab-ci.yml",
    ".gitlab/",
    ".circleci/",
    "Jenkinsfile",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    ".buildkite/",
    ".drone.yml",
    ".travis.yml",
    // Git hook managers, and what git itself reads from the tree.
    ".githooks/",
    ".husky/",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".gitmodules",
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
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<WorkflowFiles, WorkflowFilesError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            builder.add(glob(pattern)?);
        }
        let set = builder.build().map_err(WorkflowFilesError::Set)?;
        Ok(WorkflowFiles { set })
    }

    /// Whether `path` (relative to the repository's root, `/`-separated) is a workflow file.
    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path.trim_start_matches("./"))
    }

    /// Whether `path` is a workflow file or a folder that workflow files are in (`.beads`
    /// for `.beads/`).
    fn covers(&self, path: &str) -> bool {
        self.matches(path) || self.matches(&format!("{path}/_"))
    }

    /// Whether a symbolic link at `path` to `target` (its text, as git stores it) needs a
    /// person's approval: it stands where a workflow file or folder is (a committed
    /// `.beads -> elsewhere` would make elsewhere's files the workflow), or it points out of
    /// the repository, at its root, or into a workflow path. A target that is not UTF-8 is
    /// held too.
    pub fn link_needs_approval(&self, path: &str, target: &[u8]) -> bool {
        let Ok(target) = std::str::from_utf8(target) else {
            return true;
        };
        if self.covers(path) || target.starts_with('/') {
            return true;
        }
        let mut resolved: Vec<&str> = path.split('/').collect();
        resolved.pop();
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if resolved.pop().is_none() {
                        return true;
                    }
                }
                name => resolved.push(name),
            }
        }
        resolved.is_empty() || self.covers(&resolved.join("/"))
    }
}

impl Default for WorkflowFiles {
    fn default() -> Self {
        WorkflowFiles::new(&DEFAULT_WORKFLOW_FILES).expect("the default patterns compile")
    }
}

/// One `.gitignore`-like line as a glob anchored at the root.
fn glob(pattern: &str) -> Result<Glob, WorkflowFilesError> {
    let trimmed = pattern.trim();
    if trimmed.is_empty() || trimmed == "/" {
        return Err(WorkflowFilesError::NamesNoFile(pattern.to_owned()));
    }
    if trimmed.split('/').any(|part| part == "..") {
        return Err(WorkflowFilesError::LeavesRepository(pattern.to_owned()));
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
        .map_err(|e| WorkflowFilesError::NotAPattern {
            pattern: pattern.to_owned(),
            kind: e.kind().to_string(),
        })
}

/// Why the config's `workflow_files` do not compile: each names the pattern.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowFilesError {
    #[error("`workflow_files`: `{0}` names no file")]
    NamesNoFile(String),
    #[error("`workflow_files`: `{0}` leaves the repository")]
    LeavesRepository(String),
    #[error("`workflow_files`: `{pattern}` is not a pattern: {kind}")]
    NotAPattern { pattern: String, kind: String },
    /// The patterns, each fine, do not make one set.
    #[error("`workflow_files`: {0}")]
    Set(#[source] globset::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_at_out_of_or_into_the_workflow_needs_approval() {
        let files = WorkflowFiles::default();
        let cases: &[(&str, &str, bool)] = &[
            (".beads", "/home/agent/planted", true),
            (".beads", "src/planted", true),
            (".github", "ci", true),
            ("docs/shared", "/etc", true),
            ("docs/up", "../..", true),
            ("docs/root", "..", true),
            ("docs/beads", "../.beads/formulas", true),
            ("tools/flow.toml", "../x.formula.toml", true),
            ("docs/logo.svg", "../assets/logo.svg", false),
            ("src/lib", "./inner/lib", false),
            ("a/b/c", "../../d", false),
        ];
        for (path, target, held) in cases {
            assert_eq!(
                files.link_needs_approval(path, target.as_bytes()),
                *held,
                "{path} -> {target}"
            );
        }
        assert!(files.link_needs_approval("x", b"\xff"));
    }

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
            ".circleci/config.yml",
            ".gitlab/ci/build.yml",
            "Jenkinsfile",
            "azure-pipelines.yml",
            "bitbucket-pipelines.yml",
            "lefthook.yml",
            ".gitmodules",
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
            let err = err.to_string();
            assert!(err.contains(why) && err.contains("workflow_files"), "{err}");
        }
        let none = WorkflowFiles::new::<&str>(&[]).expect("an empty list");
        assert!(!none.matches(".beads/formulas/x.formula.toml"));
    }
}
