//! Starting an agent's process before its command line is known, so that what the start
//! costs the kernel overlaps the attempt's preparation instead of following it.
//!
//! Starting a process and entering an attempt's control group take time the daemon need not
//! wait for (in cgroup v2, the kernel's cgroup write lock waits for an RCU grace period,
//! milliseconds; see [`crate::daemon::cgroup::AttemptGroup::join_path`] for v1). So the daemon
//! starts agents' processes ahead ([`super::Launcher`]), as `catalyst-shim`
//! ([`super::shim_bin`], the same protocol without a C library) or else
//! `catalyst-hook __exec` (or `catalyst __exec`), in a process group
//! of their own; each shim joins its control group, sets its niceness and its parent-death
//! signal itself ([`Setup`], so the daemon can start it with `posix_spawn`), then waits on
//! its stdin while an attempt's worktree and run folder are made ready. When the command line
//! is known the daemon writes it there ([`encode`]), followed by the prompt for agents that
//! read it from stdin, and the shim replaces itself with the agent ([`main`]): same pid, same
//! group, same pipes.
//!
//! The message: the body's length in decimal and `\n`, then the body: the working directory,
//! `null` or `pipe` for the agent's stdin, the number of environment entries and each as
//! `NAME=value`, the program (resolved by the daemon) and its arguments, each ending with a NUL
//! byte (none of them can hold one). The environment travels in the message so that a shim
//! started before any attempt ([`super::Launcher`]) serves whichever takes it.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The hidden subcommand of `catalyst` and `catalyst-hook` that runs [`main`].
pub const EXEC_COMMAND: &str = "__exec";

/// The longest message [`main`] reads (a sandboxed command line is a few KiB).
const MAX_MESSAGE: usize = 1 << 20;

/// What the shim becomes.
#[derive(Debug, PartialEq, Eq)]
pub struct Exec {
    pub cwd: PathBuf,
    /// The agent's stdin is `/dev/null` (else the rest of the shim's stdin).
    pub stdin_null: bool,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Added to the shim's environment (a later value of a name wins).
    pub env: Vec<(OsString, OsString)>,
}

/// The message that turns a waiting shim into `exec`.
pub fn encode(exec: &Exec) -> Vec<u8> {
    let mut body = Vec::new();
    let mut field = |bytes: &[u8]| {
        body.extend_from_slice(bytes);
        body.push(0);
    };
    field(exec.cwd.as_os_str().as_bytes());
    field(if exec.stdin_null { b"null" } else { b"pipe" });
    field(exec.env.len().to_string().as_bytes());
    for (name, value) in &exec.env {
        field(&[name.as_bytes(), b"=", value.as_bytes()].concat());
    }
    field(exec.program.as_os_str().as_bytes());
    for arg in &exec.args {
        field(arg.as_bytes());
    }
    let mut message = format!("{}\n", body.len()).into_bytes();
    message.extend(body);
    message
}

/// Reads one message from `input`, without reading past it (what follows is the agent's).
pub fn decode(input: &mut impl Read) -> io::Result<Exec> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut header = Vec::new();
    let mut byte = [0u8];
    loop {
        input.read_exact(&mut byte)?;
        match byte[0] {
            b'\n' => break,
            b'0'..=b'9' if header.len() < 8 => header.push(byte[0]),
            _ => return Err(bad("the message does not start with its length")),
        }
    }
    let len: usize = std::str::from_utf8(&header)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n <= MAX_MESSAGE)
        .ok_or_else(|| bad("the message's length is not a number up to 1 MiB"))?;
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    let Some(body) = body.strip_suffix(&[0]) else {
        return Err(bad("the message does not end with a NUL byte"));
    };
    let mut fields = body
        .split(|b| *b == 0)
        .map(|f| OsString::from_vec(f.to_vec()));
    let missing = || bad("the message lacks the folder, stdin, environment or program");
    let (cwd, stdin, count) = match (fields.next(), fields.next(), fields.next()) {
        (Some(cwd), Some(stdin), Some(count)) => (cwd, stdin, count),
        _ => return Err(missing()),
    };
    let stdin_null = match stdin.as_bytes() {
        b"null" => true,
        b"pipe" => false,
        _ => return Err(bad("stdin is neither `null` nor `pipe`")),
    };
    let count: usize = count
        .to_str()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("the environment's size is not a number"))?;
    let mut env = Vec::new();
    for _ in 0..count {
        let entry = fields.next().ok_or_else(missing)?;
        let bytes = entry.as_bytes();
        let eq = bytes
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(|| bad("an environment entry has no `=`"))?;
        env.push((
            OsString::from_vec(bytes[..eq].to_vec()),
            OsString::from_vec(bytes[eq + 1..].to_vec()),
        ));
    }
    let program = fields.next().ok_or_else(missing)?;
    Ok(Exec {
        cwd: cwd.into(),
        stdin_null,
        program: program.into(),
        args: fields.collect(),
        env,
    })
}

/// What the shim does to itself before it waits, which a `pre_exec` would otherwise do
/// between `fork` and `exec`: done by the shim, the daemon can start it with `posix_spawn`,
/// which does not copy the daemon's page tables. Its command-line arguments after
/// [`EXEC_COMMAND`]: `--parent PID [--niceness N] [--cgroup JOIN_FILE]`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// The daemon's pid: the shim dies with the thread that started it (`PR_SET_PDEATHSIG`),
    /// and exits at once if that already happened.
    pub parent: Option<u32>,
    /// The absolute niceness to run at.
    pub niceness: Option<i32>,
    /// The file the shim joins the attempt's control group by, writing `0` there
    /// ([`crate::daemon::cgroup::AttemptGroup::join_path`]).
    pub cgroup: Option<PathBuf>,
}

impl Setup {
    /// The arguments that say this setup.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        if let Some(parent) = self.parent {
            args.extend(["--parent".into(), parent.to_string().into()]);
        }
        if let Some(n) = self.niceness {
            args.extend(["--niceness".into(), n.to_string().into()]);
        }
        if let Some(procs) = &self.cgroup {
            args.extend(["--cgroup".into(), procs.clone().into_os_string()]);
        }
        args
    }

    /// Reads the arguments [`Setup::args`] wrote. By hand, not with clap: `catalyst-hook`,
    /// which runs on every tool call, stays as small as it can be.
    pub fn parse(args: &[OsString]) -> Result<Setup, String> {
        fn number<T: std::str::FromStr>(value: &OsStr) -> Result<T, String> {
            value
                .to_str()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("`{}` is not a number here", value.to_string_lossy()))
        }
        let mut setup = Setup::default();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("`{}` needs a value", flag.to_string_lossy()))?;
            match flag.to_str() {
                Some("--parent") => setup.parent = Some(number(value)?),
                Some("--niceness") => setup.niceness = Some(number(value)?),
                Some("--cgroup") => setup.cgroup = Some(value.into()),
                _ => return Err(format!("unknown argument `{}`", flag.to_string_lossy())),
            }
        }
        Ok(setup)
    }

    /// Applies the setup to this process.
    fn apply(&self) -> Result<(), String> {
        if let Some(parent) = self.parent {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| format!("cannot ask to die with the daemon: {e}"))?;
            // The daemon may have died before the line above; then the signal never comes.
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err("the daemon is gone".into());
            }
        }
        if let Some(n) = self.niceness {
            super::priority::set_niceness(n)
                .map_err(|e| format!("cannot set the niceness: {e}"))?;
        }
        if let Some(procs) = &self.cgroup {
            std::fs::write(procs, crate::daemon::cgroup::JOIN_SELF).map_err(|e| {
                format!(
                    "cannot join the attempt's control group `{}`: {e}",
                    procs.display()
                )
            })?;
        }
        Ok(())
    }
}

/// The shim: applies its [`Setup`] (from `args`, those after [`EXEC_COMMAND`]), reads the
/// message from stdin and becomes the program it names. Returns only when that fails (exit
/// 126 for the setup, 127 for the rest, the reason on stderr, which is the agent's stderr
/// file); a daemon that gave up on the attempt closes stdin, and the shim exits 1 without a
/// word.
pub fn main(args: &[OsString]) -> u8 {
    if let Err(e) = Setup::parse(args).and_then(|setup| setup.apply()) {
        eprintln!("catalyst: {e}");
        return 126;
    }
    let exec = match decode(&mut RawStdin) {
        Ok(exec) => exec,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return 1,
        Err(e) => {
            eprintln!("catalyst: cannot read the agent's command line: {e}");
            return 127;
        }
    };
    let mut command = Command::new(&exec.program);
    command
        .args(&exec.args)
        .envs(exec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&exec.cwd);
    if exec.stdin_null {
        command.stdin(Stdio::null());
    }
    let e = command.exec();
    eprintln!("catalyst: cannot run `{}`: {e}", exec.program.display());
    127
}

/// The shim's stdin read without a buffer (`io::stdin` has one): what follows the message is
/// the agent's, and must stay in the pipe.
struct RawStdin;

impl Read for RawStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        nix::unistd::read(io::stdin(), buf).map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec() -> Exec {
        Exec {
            cwd: "/work/tree".into(),
            stdin_null: false,
            program: "/usr/bin/claude".into(),
            args: vec!["-p".into(), "".into(), "two words".into()],
            env: vec![
                ("CATALYST_STEP".into(), "a.b".into()),
                ("EMPTY".into(), "".into()),
            ],
        }
    }

    #[test]
    fn a_message_reads_back_and_leaves_what_follows_it() {
        let mut input = encode(&exec());
        input.extend_from_slice(b"the prompt");
        let mut reader = &input[..];
        assert_eq!(decode(&mut reader).unwrap(), exec());
        assert_eq!(
            reader, b"the prompt",
            "the agent's stdin starts after the message"
        );
    }

    #[test]
    fn stdin_null_and_no_arguments_read_back() {
        let e = Exec {
            stdin_null: true,
            args: Vec::new(),
            env: Vec::new(),
            ..exec()
        };
        assert_eq!(decode(&mut &encode(&e)[..]).unwrap(), e);
    }

    #[test]
    fn malformed_messages_are_errors() {
        for input in [
            &b"x\n"[..],
            b"999999999\n",
            b"3\nab\0",
            b"4\n/a\0b",
            b"5\n/a\0\0\0",
            b"13\n/a\0maybe\x000\0p\0",
            b"12\n/a\0null\0x\0p\0",
            b"12\n/a\0null\x001\0p\0",
            b"13\n/a\0null\x001\0A=\0",
        ] {
            let err = decode(&mut &input[..]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{input:?}: {err}");
        }
        let err = decode(&mut &b"12"[..]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_setup_reads_back_from_its_arguments() {
        let setup = Setup {
            parent: Some(42),
            niceness: Some(10),
            cgroup: Some("/sys/fs/cgroup/pids/catalyst-1-2/cgroup.procs".into()),
        };
        assert_eq!(Setup::parse(&setup.args()), Ok(setup));
        assert_eq!(Setup::parse(&[]), Ok(Setup::default()));
        assert!(Setup::parse(&["--parent".into()]).is_err());
        assert!(Setup::parse(&["--niceness".into(), "x".into()]).is_err());
        // Out of the field's range: refused, not wrapped.
        assert!(Setup::parse(&["--parent".into(), "-1".into()]).is_err());
        assert!(Setup::parse(&["--niceness".into(), "4294967297".into()]).is_err());
        assert!(Setup::parse(&["--other".into(), "1".into()]).is_err());
    }
}
