use std::path::Path;

use serde_json::{json, Value};

use super::bash::{check_read_only, check_writer};
use super::*;

#[test]
fn read_only_bash_allows_reading_commands_only() {
    let allowed = [
        "ls -la src",
        "git status",
        "git diff main...HEAD",
        "git --no-pager log --oneline main..HEAD",
        "git -C sub show HEAD:src/lib.rs",
        "git branch --show-current",
        "cat a.txt | grep -n foo | wc -l",
        "cd src && ls",
        "rg -n 'fn main' src",
        "find . -name '*.rs' -type f",
        "grep -rn \"parse(\" src",
        "head -n 20 README.md; tail -n 5 README.md",
        "echo 'a > b'",
        "git log -1 # the last commit",
    ];
    for command in allowed {
        assert_eq!(check_read_only(command), Ok(()), "{command}");
    }
    let refused = [
        ("rm -rf src", "allowlist"),
        ("ls > files.txt", "redirections"),
        ("cat < a.txt", "redirections"),
        ("ls; rm x", "allowlist"),
        ("ls && touch x", "allowlist"),
        ("cat a | tee b", "allowlist"),
        ("git log $(rm -rf /)", "substitution"),
        ("git log `rm x`", "substitution"),
        ("echo \"$(touch x)\"", "expansions"),
        ("echo $HOME", "expansions"),
        ("(cd / && ls)", "subshells"),
        ("sleep 100 &", "background"),
        ("find . -delete", "find"),
        ("find . -exec rm {} \\;", "find"),
        ("find . -fprint out.txt", "find"),
        ("git push", "git push"),
        ("git commit -m x", "git commit"),
        ("git checkout main", "git checkout"),
        ("git -c core.pager=evil log", "-c"),
        ("git diff --output=x", "--output"),
        ("git grep -O foo", "-O"),
        ("git branch -D main", "branch -D"),
        ("sort -o out.txt in.txt", "sort"),
        ("sort -no out.txt in.txt", "sort"),
        ("tail -f log", "tail"),
        ("rg --pre ./evil foo", "rg"),
        ("ls *.rs", "Glob"),
        ("sed -i s/a/b/ f", "allowlist"),
        ("python3 -c 'open(\"x\",\"w\")'", "allowlist"),
        ("echo 'unterminated", "unterminated"),
        ("| ls", "empty"),
        ("", "empty"),
    ];
    for (command, needle) in refused {
        let err = check_read_only(command).expect_err(command);
        assert!(err.contains(needle), "{command}: {err}");
    }
}

#[test]
fn writer_bash_keeps_away_from_pushes_the_target_and_protected_folders() {
    let allowed = [
        "cargo test",
        "echo $CATALYST_BEAD > $CATALYST_BEAD.txt",
        "git -c user.name=stub -c user.email=stub@localhost merge --no-edit main",
        "git checkout -b scratch",
        "git checkout -- src/lib.rs",
        "git status && git diff",
        "cat .gitignore",
        "cat .git/HEAD",
        "cat /ws/.catalyst/runs/cat-1/implement/1/context.md",
        "git branch --contains main",
        "make test 2>&1 | tail -n 20",
    ];
    for command in allowed {
        assert_eq!(check_writer(command, "main"), Ok(()), "{command}");
    }
    let refused = [
        ("git push origin catalyst/cat-1", "git push"),
        ("git -C . push", "git push"),
        ("env GIT_TRACE=1 git push", "git push"),
        ("sh -c \"git push\"", "git push"),
        ("bash -c 'cd x; git push -f'", "git push"),
        ("echo $(git push)", "git push"),
        ("git checkout main", "target branch"),
        ("git switch main", "target branch"),
        ("git checkout refs/heads/main", "target branch"),
        ("git branch -f main HEAD", "target branch"),
        ("git update-ref refs/heads/main HEAD", "target branch"),
        ("echo x > .git/config", ".git"),
        ("rm -rf .git", ".git"),
        ("cd .git && rm config", ".git"),
        ("cp evil .git/hooks/pre-commit", ".git"),
        ("rm -rf .catalyst", ".catalyst"),
        ("touch /ws/.catalyst/journal.jsonl", ".catalyst"),
        ("git --git-dir=.git config core.hooksPath x", ".git"),
    ];
    for (command, needle) in refused {
        let err = check_writer(command, "main").expect_err(command);
        assert!(err.contains(needle), "{command}: {err}");
    }
}

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
fn roles_have_their_default_policies() {
    for role in [Role::Refine, Role::Review] {
        let p = RolePolicy::default_for(role);
        assert_eq!(p.access, Access::ReadOnly, "{role}");
        assert_eq!(p.tools_for(None), Some(&READ_TOOLS.map(String::from)[..]));
    }
    for role in [Role::Implement, Role::Fix, Role::Merge, Role::Task] {
        let p = RolePolicy::default_for(role);
        assert_eq!(p.access, Access::Worktree, "{role}");
        assert_eq!(p.tools_for(None), None);
    }
    let step = vec!["Read".to_string(), "Bash".to_string()];
    let review = RolePolicy::default_for(Role::Review);
    assert_eq!(
        review.tools_for(Some(&step)),
        Some(&step[..]),
        "the step's own list wins"
    );
}

#[test]
fn targets_are_one_short_line() {
    assert_eq!(
        target("Write", &json!({"file_path": "a.txt"})).as_deref(),
        Some("a.txt")
    );
    assert_eq!(
        target("Bash", &json!({"command": "ls\n  -la"})).as_deref(),
        Some("ls -la")
    );
    let long = "x".repeat(500);
    let cut = target("Bash", &json!({ "command": long })).unwrap_or_default();
    assert_eq!(cut.chars().count(), 201);
    assert_eq!(target("TodoWrite", &json!({})), None);
}
