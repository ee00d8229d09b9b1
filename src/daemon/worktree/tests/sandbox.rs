//! Taking back what a sandboxed attempt committed: its objects are in a private folder, and
//! reach the shared store only written again under the id their content hashes to.

use std::process::Command;

use super::*;

/// Runs `git` in `dir` as the agent's git runs in its sandbox (new objects go to the private
/// folder `env` names), with `stdin`; returns what it printed.
fn agent_git(dir: &Path, env: &[(String, String); 2], args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(args)
        .envs(env.iter().cloned())
        .env("GIT_AUTHOR_NAME", "agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.com")
        .env("GIT_COMMITTER_NAME", "agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.com")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write");
    drop(input);
    let out = child.wait_with_output().expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// A commit made the agent's way on top of the branch, adding `hello.txt` holding `text`, and
/// its private ref. Returns the commit's id, the blob's and the git environment used.
fn agent_commit(
    f: &Fixture,
    b: &BeadId,
    private: &Path,
    text: &str,
) -> (String, String, [(String, String); 2]) {
    let env = f.repo.sandbox_mounts(b, private).expect("mounts").env();
    let wt = f.repo.worktree_path(b);
    let blob = agent_git(&wt, &env, &["hash-object", "-w", "--stdin"], text);
    let tip = f.tip(&format!("catalyst/{b}")).to_string();
    let listing = agent_git(&wt, &env, &["ls-tree", &tip], "");
    let tree = agent_git(
        &wt,
        &env,
        &["mktree"],
        &format!("{listing}\n100644 blob {blob}\thello.txt\n"),
    );
    let args = ["commit-tree", &tree, "-p", &tip, "-m", "by the agent"];
    let commit = agent_git(&wt, &env, &args, "");
    fs::write(private.join("refs").join(b.as_str()), format!("{commit}\n")).expect("ref");
    (commit, blob, env)
}

fn oid(id: &str) -> Oid {
    Oid::from_str(id).expect("an object id")
}

#[test]
fn an_attempts_commit_is_imported_into_the_store_and_taken() {
    let (f, b, _wt) = Fixture::with_bead();
    let private = f.tmp.path().join("private");
    let (commit, blob, _) = agent_commit(&f, &b, &private, "from the agent\n");
    assert!(
        f.git().find_commit(oid(&commit)).is_err(),
        "not in the store before"
    );
    let taken = f.repo.adopt_sandbox_ref(&b, &private).expect("adopt");
    assert_eq!(taken.map(|c| c.to_string()), Some(commit.clone()));
    let store = f.git();
    store.find_commit(oid(&commit)).expect("imported");
    let content = store.find_blob(oid(&blob)).expect("blob");
    assert_eq!(content.content(), b"from the agent\n");
}

/// An agent that controls its object folder can put any bytes under any name: an object file
/// whose content is another object's must not enter the store under the name it claims.
#[test]
fn an_object_that_does_not_hold_what_its_name_says_is_refused() {
    let (f, b, _wt) = Fixture::with_bead();
    let private = f.tmp.path().join("private");
    let (commit, blob, env) = agent_commit(&f, &b, &private, "honest\n");
    let wt = f.repo.worktree_path(&b);
    let other = agent_git(&wt, &env, &["hash-object", "-w", "--stdin"], "forged\n");
    let file = |id: &str| private.join("objects").join(&id[..2]).join(&id[2..]);
    fs::remove_file(file(&blob)).expect("remove");
    fs::copy(file(&other), file(&blob)).expect("forge");
    let taken = f.repo.adopt_sandbox_ref(&b, &private).expect("adopt");
    assert_eq!(taken, None);
    let store = f.git();
    assert!(store.find_commit(oid(&commit)).is_err());
    assert!(store.find_blob(oid(&blob)).is_err());
}
