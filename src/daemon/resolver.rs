//! The real file system's answers for the tool policy's path checks.

use std::io;
use std::path::{Path, PathBuf};

use crate::domain::policy::path::Resolve;

/// Resolves paths as the kernel does, through `std::fs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl Resolve for RealFs {
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        path.canonicalize()
    }

    fn is_symlink(&self, path: &Path) -> bool {
        path.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
    }
}

/// The policy's path checks against a real worktree with symlinks in it.
#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::domain::model::Role;
    use crate::domain::policy::{decide, Access, Permission, RolePolicy, Scope};

    /// A worktree in a temporary folder, with a symlink pointing out of it and a dangling one.
    struct Tree {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
        outside: std::path::PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical");
        let root = base.join("wt");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src")).expect("src");
        std::fs::create_dir_all(&outside).expect("outside");
        std::fs::write(root.join(".git"), "gitdir: elsewhere\n").expect(".git file");
        std::fs::write(root.join("src/lib.rs"), "").expect("lib.rs");
        std::os::unix::fs::symlink(&outside, root.join("escape")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("nope/x"), root.join("dangling")).expect("symlink");
        Tree {
            _dir: dir,
            root,
            outside,
        }
    }

    fn scope<'a>(access: Access, root: &'a Path) -> Scope<'a> {
        Scope {
            access,
            worktree: root,
            target_branch: "main",
            fs: &RealFs,
            tools: None,
        }
    }

    #[test]
    fn file_tools_write_only_inside_the_worktree() {
        let t = tree();
        let writer = scope(Access::Worktree, &t.root);
        let inside_abs = t.root.join("src/new.rs").display().to_string();
        let allowed = [
            "src/lib.rs",
            "src/new/deep/file.rs",
            "new.txt",
            "./src/../src/x.rs",
            "missing/../new.txt",
            inside_abs.as_str(),
        ];
        for file in allowed {
            let input = json!({"file_path": file, "content": "x"});
            assert_eq!(
                decide(&writer, "Write", &input, None),
                Permission::Allow,
                "{file}"
            );
        }
        let outside_abs = t.outside.join("x.txt").display().to_string();
        let refused = [
            ("../outside.txt", "outside the worktree"),
            ("src/../../outside.txt", "outside the worktree"),
            ("missing/../../outside.txt", "outside the worktree"),
            (outside_abs.as_str(), "outside the worktree"),
            ("/etc/passwd", "outside the worktree"),
            ("escape/x.txt", "outside the worktree"),
            ("dangling", "symlink"),
            (".git/config", "`.git`"),
            (".git", "`.git`"),
            ("sub/.git/config", "`.git`"),
            (".catalyst/journal.jsonl", "`.catalyst`"),
        ];
        for (file, needle) in refused {
            for tool in ["Write", "Edit", "MultiEdit"] {
                let input = json!({"file_path": file});
                let verdict = decide(&writer, tool, &input, None);
                let reason = verdict.reason().unwrap_or_default();
                assert!(reason.contains(needle), "{tool} {file}: {verdict:?}");
            }
        }
        let notebook = json!({"notebook_path": "../x.ipynb"});
        assert!(!decide(&writer, "NotebookEdit", &notebook, None).is_allowed());
        assert!(!decide(&writer, "Write", &json!({}), None).is_allowed());
        // A relative path is resolved against the session's folder when the hook gives one.
        let sub = t.root.join("src");
        let input = json!({"file_path": "../../outside.txt"});
        assert!(!decide(&writer, "Write", &input, Some(&sub)).is_allowed());
        let input = json!({"file_path": "../ok.txt"});
        assert!(decide(&writer, "Write", &input, Some(&sub)).is_allowed());
    }

    #[test]
    fn read_only_roles_may_read_anything_and_write_nothing() {
        let t = tree();
        let reader = scope(Access::ReadOnly, &t.root);
        let cases: [(&str, Value, bool); 10] = [
            ("Read", json!({"file_path": "/etc/hostname"}), true),
            ("Grep", json!({"pattern": "fn"}), true),
            ("Glob", json!({"pattern": "**/*.rs"}), true),
            ("TodoWrite", json!({"todos": []}), true),
            (
                "Write",
                json!({"file_path": "src/lib.rs", "content": ""}),
                false,
            ),
            ("Edit", json!({"file_path": "src/lib.rs"}), false),
            ("MultiEdit", json!({"file_path": "src/lib.rs"}), false),
            ("NotebookEdit", json!({"notebook_path": "a.ipynb"}), false),
            ("Bash", json!({"command": "git diff main...HEAD"}), true),
            ("mcp__db__drop_table", json!({}), false),
        ];
        for (tool, input, allowed) in cases {
            assert_eq!(
                decide(&reader, tool, &input, None).is_allowed(),
                allowed,
                "{tool} {input}"
            );
        }
        let denied = decide(&reader, "Bash", &json!({"command": "touch x"}), None);
        assert!(denied.reason().is_some_and(|r| r.contains("allowlist")));
    }

    #[test]
    fn every_role_is_held_to_its_tool_list() {
        let t = tree();
        for role in [
            Role::Implement,
            Role::Fix,
            Role::Merge,
            Role::Task,
            Role::Review,
            Role::Refine,
        ] {
            let policy = RolePolicy::default_for(role);
            let scope = Scope {
                tools: policy.tools.as_deref(),
                ..scope(policy.access, &t.root)
            };
            for tool in [
                "EnterWorktree",
                "ExitWorktree",
                "CronCreate",
                "ScheduleWakeup",
                "SendMessage",
                "Workflow",
                "WebFetch",
                "WebSearch",
                "Agent",
                "Task",
                "SomethingNew",
            ] {
                let verdict = decide(&scope, tool, &json!({}), None);
                let reason = verdict.reason().unwrap_or_default();
                assert!(
                    reason.contains("not on this step's tool list"),
                    "{role} {tool}: {verdict:?}"
                );
            }
            // Both kinds of role may read, search and run (checked) commands.
            let read = json!({"file_path": "src/lib.rs"});
            assert!(decide(&scope, "Read", &read, None).is_allowed(), "{role}");
            let diff = json!({"command": "git diff main...HEAD"});
            assert!(decide(&scope, "Bash", &diff, None).is_allowed(), "{role}");
        }
        // A list entry with a rule names its tool.
        let listed = ["Bash(git log:*)".to_owned(), "WebFetch".to_owned()];
        let scope = Scope {
            tools: Some(&listed),
            ..scope(Access::ReadOnly, &t.root)
        };
        assert!(decide(&scope, "WebFetch", &json!({"url": "x"}), None).is_allowed());
        assert!(!decide(&scope, "Read", &json!({"file_path": "a"}), None).is_allowed());
    }
}
