//! Judging `Bash` commands: a small shell lexer, the read-only allowlist, and the checks for
//! roles that write.
//!
//! Read-only roles ([`check_read_only`]) get an allowlist, and the check is strict: the command
//! is split into simple commands at `|`, `||`, `&&`, `;` and newlines, each must be a program
//! on the list with arguments that do not make it write or run something else, and anything
//! the lexer cannot see through is refused: redirections (`>`, `<`), `$` expansions, command
//! substitution (`$(…)`, backticks), subshells and groups, background jobs (`&`), and unquoted
//! glob characters (a file named `-delete` or `--output=x` in the worktree would otherwise
//! become an option). The list:
//! - `ls`, `cat`, `head`, `wc`, `cut`, `diff`, `cmp`, `stat`, `pwd`, `echo`, `true`,
//!   `basename`, `dirname`, `realpath`, `cd`, `grep`, `egrep`, `fgrep`;
//! - `tail` without `-f`/`-F`/`--follow` (it would never end), `sort` without `-o`/`--output`,
//!   `rg` without `--pre` (which runs a program), `find` without `-exec`, `-execdir`, `-ok`,
//!   `-okdir`, `-delete` or the `-fprint*`/`-fls` family;
//! - `git` with only `-C DIR`, `--no-pager` or `--no-optional-locks` before one of `status`,
//!   `diff`, `log`, `show`, `blame`, `ls-files`, `ls-tree`, `rev-parse`, `cat-file`, `grep`,
//!   `describe`, `shortlog`, `merge-base`, `rev-list`, `name-rev`, or `branch` with listing
//!   flags only; no `--output`, `--ext-diff`, `-O`/`--open-files-in-pager` anywhere.
//!
//! Roles that write ([`check_writer`]) may run anything but: `git push`; `git checkout` or
//! `git switch` naming the target branch, `git branch` changing it, `git update-ref` of it;
//! and commands naming a path through `.git` or `.catalyst` unless they pass the read-only check
//! (reading `.catalyst/runs/…/context.md` is fine, `rm -rf .git` is not). Quoted text that looks
//! like a script (`sh -c "git push"`) is checked as a command too. This is a check against
//! mistakes and casual escapes, not a sandbox: a shell can always build a command the lexer
//! never sees (`eval`, variables), which is why the daemon, not the agent, commits and merges.

use super::shell::{lex, simple_commands, Op, Token, Word};
use super::{refuse, Refusal};

/// Checks a command for a read-only role; the error says what is refused.
pub fn check_read_only(command: &str) -> Result<(), Refusal> {
    let tokens = lex(command)?;
    let mut program_next = true;
    for token in &tokens {
        match token {
            Token::Op(Op::Redirect) => {
                return Err("redirections (`>`, `<`) are not allowed in a read-only step".into())
            }
            Token::Op(Op::Subshell) => {
                return Err(
                    "subshells and command substitution (`( )`, `$( )`, backticks) are not allowed in a read-only step"
                        .into(),
                )
            }
            Token::Op(Op::Background) => {
                return Err("background jobs (`&`) are not allowed in a read-only step".into())
            }
            Token::Op(Op::List | Op::Pipe) => {
                if program_next {
                    return Err("an empty command".into());
                }
                program_next = true;
            }
            Token::Word(w) => {
                program_next = false;
                if w.expands {
                    return Err(
                        "`$` expansions and backticks are not allowed in a read-only step".into(),
                    );
                }
                if w.glob {
                    return Err(refuse!(
                        "the unquoted pattern `{}` is not allowed in a read-only step: use the Glob or Grep tool, or quote it",
                        w.text
                    ));
                }
            }
        }
    }
    let commands = simple_commands(tokens);
    if commands.is_empty() {
        return Err("an empty command".into());
    }
    commands.iter().try_for_each(|c| read_only_simple(&c.words))
}

/// Programs a read-only role may run, with the arguments that would make them write or run
/// something refused.
fn read_only_simple(words: &[Word]) -> Result<(), Refusal> {
    let Some((program, args)) = words.split_first() else {
        return Err("an empty command".into());
    };
    let args: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    let refuse_args = |bad: &dyn Fn(&str) -> bool| -> Result<(), Refusal> {
        match args.iter().find(|a| bad(a)) {
            Some(a) => Err(refuse!(
                "`{}` with `{a}` can write or run other programs",
                program.text
            )),
            None => Ok(()),
        }
    };
    match program.text.as_str() {
        "ls" | "cat" | "head" | "wc" | "cut" | "diff" | "cmp" | "stat" | "pwd" | "echo"
        | "true" | "basename" | "dirname" | "realpath" | "cd" | "grep" | "egrep" | "fgrep" => {
            Ok(())
        }
        "tail" => refuse_args(&|a| {
            a == "-f" || a == "-F" || abbreviates(a, "--follow") || short_flags(a, &['f', 'F'])
        }),
        "sort" => refuse_args(&|a| {
            abbreviates(a, "--output")
                || abbreviates(a, "--compress-program")
                || short_flags(a, &['o'])
        }),
        "rg" => refuse_args(&|a| {
            ["--pre", "--hostname-bin"]
                .iter()
                .any(|o| a == *o || a.starts_with(&format!("{o}=")))
        }),
        "find" => refuse_args(&|a| {
            matches!(
                a,
                "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-delete"
                    | "-fprint"
                    | "-fprint0"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "git" => git_read_only(&args),
        other => Err(refuse!(
            "`{other}` is not on the read-only allowlist (ls, cat, head, tail, wc, grep, rg, find, git status/diff/log/show, …)"
        )),
    }
}

/// Whether `arg` names the long option `full`, whole or abbreviated as getopt accepts it
/// (`--fo`, `--o=x`), with or without `=value`.
fn abbreviates(arg: &str, full: &str) -> bool {
    let name = arg.split('=').next().unwrap_or(arg);
    name.len() > 2 && name.starts_with("--") && full.starts_with(name)
}

/// Whether `arg` is a cluster of short flags (`-nf`) holding one of `flags`.
fn short_flags(arg: &str, flags: &[char]) -> bool {
    arg.strip_prefix('-')
        .filter(|rest| !rest.starts_with('-') && !rest.is_empty())
        .is_some_and(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .any(|c| flags.contains(&c))
        })
}

const GIT_READ: [&str; 16] = [
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "cat-file",
    "grep",
    "describe",
    "shortlog",
    "merge-base",
    "rev-list",
    "name-rev",
    "branch",
];

/// `git branch` flags that only list.
const GIT_BRANCH_LIST: [&str; 10] = [
    "--show-current",
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-v",
    "-vv",
    "--verbose",
    "--list",
    "--no-color",
];

fn git_read_only(args: &[&str]) -> Result<(), Refusal> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match *arg {
            "--no-pager" | "--no-optional-locks" => i += 1,
            "-C" => i += 2,
            a if a.starts_with('-') => {
                return Err(refuse!(
                    "`git {a}` is not allowed in a read-only step (only `-C`, `--no-pager`)"
                ))
            }
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else {
        return Err("`git` without a command".into());
    };
    if !GIT_READ.contains(sub) {
        return Err(refuse!(
            "`git {sub}` is not allowed in a read-only step (status, diff, log, show, blame, grep, ls-files, rev-parse, … are)"
        ));
    }
    let rest = &args[i + 1..];
    if let Some(bad) = rest.iter().find(|a| {
        abbreviates(a, "--output")
            || abbreviates(a, "--ext-diff")
            || abbreviates(a, "--open-files-in-pager")
            || a.starts_with("-O")
    }) {
        return Err(refuse!("`git {sub} {bad}` can write or run other programs"));
    }
    if *sub == "branch" {
        if let Some(bad) = rest.iter().find(|a| !GIT_BRANCH_LIST.contains(a)) {
            return Err(refuse!(
                "`git branch {bad}` is not allowed in a read-only step (only listing)"
            ));
        }
    }
    Ok(())
}

/// How deep quoted scripts (`sh -c "…"`) are looked into.
const MAX_DEPTH: u32 = 4;

/// Checks a command for a role that writes in the worktree; the error says what is refused.
pub fn check_writer(command: &str, target: &str) -> Result<(), Refusal> {
    writer(command, target, 0)
}

fn writer(command: &str, target: &str, depth: u32) -> Result<(), Refusal> {
    for simple in simple_commands(lex(command)?) {
        for w in &simple.words {
            let script = w
                .text
                .chars()
                .any(|c| c.is_whitespace() || ";&|`".contains(c))
                || w.text.contains("$(");
            if script && depth < MAX_DEPTH {
                writer(&w.text, target, depth + 1)?;
            }
        }
        git_writer(&simple.words, target)?;
        let protected = simple.words.iter().find_map(|w| protected_in(&w.text));
        if let Some(dir) = protected {
            let reads = !simple.redirected
                && simple.words.first().is_some_and(|p| p.text != "cd")
                && read_only_simple(&simple.words).is_ok()
                && simple.words.iter().all(|w| !w.glob && !w.expands);
            if !reads {
                return Err(refuse!(
                    "`{dir}` is off limits to agents: only read-only commands may name it"
                ));
            }
        }
    }
    Ok(())
}

/// The protected folder a word names as a path component (`.git/config`, `--x=.catalyst/y`).
fn protected_in(word: &str) -> Option<&'static str> {
    let path = word.rsplit_once('=').map_or(word, |(_, p)| p);
    path.split('/')
        .find_map(|part| super::path::PROTECTED.into_iter().find(|p| part == *p))
}

/// Refuses git commands that would publish work or move the target branch. Every `git` word
/// starts a git command, so wrappers (`env`, `timeout`, `xargs`) do not hide one.
fn git_writer(words: &[Word], target: &str) -> Result<(), Refusal> {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    for (at, _) in texts
        .iter()
        .enumerate()
        .filter(|(_, w)| w.rsplit('/').next() == Some("git"))
    {
        let args = &texts[at + 1..];
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            match *arg {
                "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => {
                    i += 2
                }
                a if a.starts_with('-') => i += 1,
                _ => break,
            }
        }
        let Some(sub) = args.get(i) else { continue };
        let rest = &args[i + 1..];
        let names_target = |a: &&str| *a == target || a.strip_prefix("refs/heads/") == Some(target);
        match *sub {
            "push" => {
                return Err(
                    "`git push` is not allowed: catalyst merges the work into the target itself"
                        .into(),
                )
            }
            "checkout" | "switch" if rest.iter().any(names_target) => {
                return Err(refuse!(
                    "`git {sub} {target}` is not allowed: `{target}` is the target branch, which only catalyst moves; stay on the bead's branch"
                ))
            }
            "branch"
                if rest.iter().any(names_target)
                    && rest.iter().any(|a| {
                        matches!(
                            *a,
                            "-f" | "--force" | "-d" | "-D" | "--delete" | "-m" | "-M" | "--move"
                                | "-c" | "-C" | "--copy" | "-u" | "--unset-upstream"
                        ) || a.starts_with("--set-upstream-to")
                    }) =>
            {
                return Err(refuse!(
                    "changing the branch `{target}` is not allowed: it is the target branch, which only catalyst moves"
                ))
            }
            "update-ref" if rest.iter().any(names_target) => {
                return Err(refuse!(
                    "`git update-ref` of `{target}` is not allowed: it is the target branch, which only catalyst moves"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}
