//! Where a file tool would really write: the path resolved through `..` and symlinks, as the
//! kernel would resolve it, even when the file (or some of its folders) does not exist yet.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::{refuse, Refusal};

/// What resolving a path needs to ask of the file system. The daemon passes the real one; the
/// policy itself never touches the disk.
pub trait Resolve {
    /// Whether `path` exists, following symlinks.
    fn exists(&self, path: &Path) -> bool;
    /// `path` made absolute with every symlink and `..` resolved; it must exist.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// Whether `path` itself is a symlink (not followed).
    fn is_symlink(&self, path: &Path) -> bool;
}

/// Folders inside a worktree that no agent may write into: git's own data, and catalyst's
/// state (a worktree's `.git` is a file pointing into the repository's, equally off limits).
pub const PROTECTED: [&str; 2] = [".git", ".catalyst"];

/// Checks that writing `file` (absolute, or relative to `base`) stays inside `worktree` and
/// outside its [`PROTECTED`] folders. The error says why, for the agent.
pub fn check_write(
    fs: &dyn Resolve,
    worktree: &Path,
    base: &Path,
    file: &Path,
) -> Result<(), Refusal> {
    let root = fs.canonicalize(worktree).map_err(|e| {
        refuse!(
            "the worktree `{}` cannot be resolved: {e}",
            worktree.display()
        )
    })?;
    let resolved = resolve(fs, &base.join(file))?;
    let Ok(inside) = resolved.strip_prefix(&root) else {
        return Err(refuse!(
            "it resolves to `{}`, outside the worktree `{}`",
            resolved.display(),
            root.display()
        ));
    };
    if let Some(dir) = inside.components().find_map(|c| match c {
        Component::Normal(name) => PROTECTED.iter().find(|p| name == **p),
        _ => None,
    }) {
        return Err(refuse!("`{dir}` is off limits to agents"));
    }
    Ok(())
}

/// Resolves `path` (absolute) the way the kernel would: the longest prefix that exists is
/// canonicalized (following symlinks and `..` in order), and the components after it, which do
/// not exist, are applied lexically. A dangling symlink among them is refused, since writing
/// through it would create its target, wherever that is.
pub fn resolve(fs: &dyn Resolve, path: &Path) -> Result<PathBuf, Refusal> {
    let components: Vec<Component<'_>> = path.components().collect();
    for split in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..split].iter().collect();
        if !fs.exists(&prefix) {
            continue;
        }
        let mut resolved = fs
            .canonicalize(&prefix)
            .map_err(|e| refuse!("`{}` cannot be resolved: {e}", prefix.display()))?;
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
                    if fs.is_symlink(&resolved) {
                        return Err(refuse!(
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
    Err(refuse!("`{}` is not an absolute path", path.display()))
}
