//! Which file system the workspaces are made on, printed before the rows: on ext4 without a
//! journal, every file created scans the inodes freed in the last seconds, and the rows that
//! create thousands of files measure that scan as much as catalyst (docs/benchmarks.md).

use std::path::Path;

/// The kind of file system `dir` is on, as the header line names it.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Tmpfs,
    Ext4 { journal: bool },
    Other,
}

impl Kind {
    pub fn of(dir: &Path) -> Kind {
        use nix::sys::statfs::{statfs, EXT4_SUPER_MAGIC, TMPFS_MAGIC};
        let Ok(fs) = statfs(dir) else {
            return Kind::Other;
        };
        match fs.filesystem_type() {
            t if t == TMPFS_MAGIC => Kind::Tmpfs,
            t if t == EXT4_SUPER_MAGIC => Kind::Ext4 {
                journal: ext4_has_journal(dir),
            },
            _ => Kind::Other,
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Kind::Tmpfs => "tmpfs",
            Kind::Ext4 { journal: true } => "ext4 with a journal",
            Kind::Ext4 { journal: false } => {
                "ext4 WITHOUT a journal: creating a file scans recently freed inodes, \
                 so rows that create many files are slower and vary (docs/benchmarks.md)"
            }
            Kind::Other => "another file system",
        }
    }
}

/// Whether the ext4 file system holding `dir` keeps a journal: its device has a `jbd2`
/// journal thread's entry under `/proc/fs/jbd2/` (named `<device>-<inode>`; the folder is
/// missing where no file system has one). A device whose name cannot be found counts as
/// journaled, the usual case.
fn ext4_has_journal(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return true;
    };
    let dev = meta.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
    let Some(name) = std::fs::read_to_string(uevent).ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_owned))
    }) else {
        return true;
    };
    let Ok(journals) = std::fs::read_dir("/proc/fs/jbd2") else {
        return false;
    };
    let prefix = format!("{name}-");
    journals
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
}

/// The header line: where the workspaces go and on what.
pub fn header() -> String {
    let dir = std::env::temp_dir();
    format!(
        "workspaces under {}: {}",
        dir.display(),
        Kind::of(&dir).describe()
    )
}

/// How long ext4 without a journal treats a freed inode as recently freed once its inode table
/// block is written back (`dirty_expire_centisecs`, 30 s by default).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

/// Between two rows: on ext4 without a journal, writes back what the row before deleted (its
/// workspace) and waits [`SETTLE`], so that the next row's files do not pay for the previous
/// row's deletions; each row still pays for its own. Nothing to wait for elsewhere.
pub fn settle() {
    if Kind::of(&std::env::temp_dir()) != (Kind::Ext4 { journal: false }) {
        return;
    }
    nix::unistd::sync();
    println!(
        "  (waiting {}s for the file system to settle after the row's workspace was deleted)",
        SETTLE.as_secs()
    );
    std::thread::sleep(SETTLE);
}
