//! Where a file tool would really write: the path resolved through `..` and symlinks, as the
//! kernel would resolve it, even when the file (or some of its folders) does not exist yet.

use std::path::{Component, Path, PathBuf};

/// Folders inside a worktree that no agent may write into: git's own data, and catalyst's
/// state (a worktree's `.git` is a file pointing into the repository's, equally off limits).
pub const PROTECTED: [&str; 2] = [".git", ".catalyst"];

/// Checks that writing `file` (absolute, or relative to `base`) stays inside `worktree` and
/// outside its [`PROTECTED`] folders. The error says why, for the agent.
pub fn check_write(worktree: &Path, base: &Path, file: &Path) -> Result<(), String> {
    let root = worktree.canonicalize().map_err(|e| {
        format!(
            "the worktree `{}` cannot be resolved: {e}",
            worktree.display()
        )
    })?;
    let resolved = resolve(&base.join(file))?;
    let Ok(inside) = resolved.strip_prefix(&root) else {
        return Err(format!(
            "it resolves to `{}`, outside the worktree `{}`",
            resolved.display(),
            root.display()
        ));
    };
    if let Some(dir) = inside.components().find_map(|c| match c {
        Component::Normal(name) => PROTECTED.iter().find(|p| name == **p),
        _ => None,
    }) {
        return Err(format!("`{dir}` is off limits to agents"));
    }
    Ok(())
}

/// Resolves `path` (absolute) the way the kernel would: the longest prefix that exists is
/// canonicalized (following symlinks and `..` in order), and the components after it, which do
/// not exist, are applied lexically. A dangling symlink among them is refused, since writing
/// through it would create its target, wherever that is.
pub fn resolve(path: &Path) -> Result<PathBuf, String> {
    let components: Vec<Component<'_>> = path.components().collect();
    for split in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..split].iter().collect();
        if !prefix.exists() {
            continue;
        }
        let mut resolved = prefix
            .canonicalize()
            .map_err(|e| format!("`{}` cannot be resolved: {e}", prefix.display()))?;
        for c in &components[split..] {
            match c {
                Component::ParentDir => {
                    resolved.pop();
                }
                Component::Normal(name) => {
                    resolved.push(name);
                    // Past the existing prefix only a dangling symlink can exist (or, after a
                    // `..`, anything): writing through a symlink here would land wherever it
                    // points, so it is refused rather than followed by hand.
                    if resolved
                        .symlink_metadata()
                        .is_ok_and(|m| m.file_type().is_symlink())
                    {
                        return Err(format!(
                            "`{}` is a symlink that does not resolve; write to its target's own path",
                            resolved.display()
                        ));
                    }
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        return Ok(resolved);
    }
    Err(format!("`{}` is not an absolute path", path.display()))
}
