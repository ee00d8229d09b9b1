use serde_json::json;

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
        ("find . -exec rm {} \\;", "`{}`"),
        // Brace expansion turns one word into options.
        ("find . {-exec,} touch X ';'", "`{-exec,}`"),
        ("sort {-o,X} a", "`{-o,X}`"),
        ("git log {--output=X,}", "`{--output=X,}`"),
        // Options as getopt reads them: abbreviated, glued, with `=`.
        ("git grep -O'vim' foo", "-Ovim"),
        ("git grep --open=vim foo", "--open=vim"),
        ("git log --outp=x", "--outp=x"),
        ("sort --o=X a", "sort"),
        ("sort --compress-prog=sh a", "sort"),
        ("tail --fo log", "tail"),
        ("rg --hostname-bin=./evil foo", "rg"),
        // A carriage return is part of a word to bash, not a space before a comment.
        ("ls\r#; touch X", "allowlist"),
        ("echo $'\\x41'", "expansions"),
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
        assert!(err.0.contains(needle), "{command}: {err}");
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
        assert!(err.0.contains(needle), "{command}: {err}");
    }
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
        assert_eq!(p.tools_for(None), Some(&WRITE_TOOLS.map(String::from)[..]));
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
