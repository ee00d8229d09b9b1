//! Agents' processes started ahead as clones of the daemon that share its memory until they
//! become the agent (x86-64 Linux): what `catalyst-shim` does ([`super::shim`]), without
//! starting a second program.
//!
//! `posix_spawn` of the shim costs an attempt about a tenth of a millisecond of CPU more than
//! starting the agent itself would: C library's child maps and unmaps a stack of its own
//! (the unmap shoots down the TLB of every CPU the daemon runs on), resets the handler of each
//! of the 64 signals one by one, and the shim is a program the kernel loads before the agent.
//! Here the spawner thread calls `clone(CLONE_VM)` on a stack the daemon keeps, and the child
//! runs [`child`]: it takes its process group, death signal, niceness and control group, puts
//! its pipes on 0, 1 and 2, resets the signals the daemon handles, and waits for one byte on
//! its control pipe. The daemon writes the command line ([`Image`]) into the memory they
//! share, then that byte; the child `execve`s it, and from then on it has memory of its own.
//!
//! Until then the child runs in the daemon's address space, so [`child`] makes raw system
//! calls only: no allocation, no lock, no C library (whose wrappers would write `errno`, the
//! spawner thread's, since the clone shares its thread pointer). Every signal is blocked in
//! it until its handlers are reset, so none of the daemon's handlers ever runs on its stack.
//! What it reads ([`Plan`], [`Image`], its stack) stays alive until it is reaped.
// `unsafe` here: the clone started ahead shares the daemon's memory until it executes: raw
// system calls; each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use nix::libc;
use tokio::io::unix::AsyncFd;

use super::shim::Exec;

/// The child's stack: it makes a handful of system calls and formats one error line.
const STACK: usize = 64 * 1024;

/// What the child reads, set before `clone`, and the command line, set before the go byte.
#[repr(C)]
struct Plan {
    /// The daemon's pid: the child exits if its parent is already another.
    parent: libc::pid_t,
    /// The absolute niceness, when `set_niceness`.
    niceness: libc::c_int,
    set_niceness: bool,
    /// The control group's join file (NUL-terminated), or null.
    cgroup: *const u8,
    /// The child's ends of its stdin, stdout and stderr pipes.
    stdio: [RawFd; 3],
    /// The read end of the control pipe.
    go: RawFd,
    /// Written by the daemon before the go byte.
    image: *const Image,
}

/// The command line, as `execve` takes it.
#[repr(C)]
struct Image {
    cwd: *const u8,
    program: *const u8,
    argv: *const *const u8,
    envp: *const *const u8,
    stdin_null: bool,
}

/// What backs [`Image`]'s pointers.
struct ImageData {
    image: Image,
    _strings: Vec<CString>,
    _argv: Vec<*const u8>,
    _envp: Vec<*const u8>,
}

/// Everything the child may read, kept until it is reaped.
struct Shared {
    plan: *mut Plan,
    _cgroup: Option<CString>,
    image: Option<Box<ImageData>>,
    _stack: Vec<u8>,
}

// SAFETY: the raw pointers point into memory `Shared` owns (the plan is a leaked box freed in
// `drop`); nothing else refers to it but the child, which only reads.
unsafe impl Send for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `start`, freed once, after the child is gone.
        drop(unsafe { Box::from_raw(self.plan) });
    }
}

/// A process started ahead, waiting for its command line, then the agent.
pub(crate) struct Child {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    /// The pidfd, watched by the runtime from the first [`Child::wait`].
    watch: Option<AsyncFd<OwnedFd>>,
    /// The write end of the control pipe, until the go byte is sent.
    go: Option<OwnedFd>,
    shared: Option<Shared>,
    status: Option<ExitStatus>,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// The setup [`start`] gives the child.
pub(crate) struct Setup<'a> {
    pub(crate) niceness: Option<libc::c_int>,
    pub(crate) cgroup: Option<&'a Path>,
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// Starts a child that applies `setup` and waits. Call it on the thread whose end should end
/// the child (`PR_SET_PDEATHSIG`): the spawner thread.
pub(crate) fn start(setup: &Setup<'_>) -> io::Result<Child> {
    let (stdin_child, stdin) = pipe()?;
    let (stdout, stdout_child) = pipe()?;
    let (stderr, stderr_child) = pipe()?;
    let (go_child, go) = pipe()?;
    let cgroup = setup
        .cgroup
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .transpose()
        .map_err(io::Error::other)?;
    let plan = Box::into_raw(Box::new(Plan {
        parent: std::process::id() as libc::pid_t,
        niceness: setup.niceness.unwrap_or(0),
        set_niceness: setup.niceness.is_some(),
        cgroup: cgroup
            .as_ref()
            .map_or(std::ptr::null(), |c| c.as_ptr().cast()),
        stdio: [
            stdin_child.as_raw_fd(),
            stdout_child.as_raw_fd(),
            stderr_child.as_raw_fd(),
        ],
        go: go_child.as_raw_fd(),
        image: std::ptr::null(),
    }));
    let mut shared = Shared {
        plan,
        _cgroup: cgroup,
        image: None,
        _stack: vec![0u8; STACK],
    };
    // 16-byte aligned, as the ABI wants at a call.
    let top = (shared._stack.as_mut_ptr() as usize + STACK) & !15;
    let cloned = with_signals_blocked(|| {
        // SAFETY: `child` runs on its own stack, which `shared` keeps, and reads only `plan`,
        // which `shared` keeps too, until the child is reaped (see the module documentation).
        let pid = unsafe {
            libc::clone(
                child,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::SIGCHLD,
                plan.cast(),
            )
        };
        if pid < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(pid)
        }
    });
    let pid = cloned?;
    // Also from here, so that the group exists when `start` returns, as with `posix_spawn`.
    // SAFETY: no memory is involved; an error means the child already did it, or is gone.
    unsafe { libc::setpgid(pid, pid) };
    let mut started = Child {
        pid,
        pidfd: None,
        watch: None,
        go: Some(go),
        shared: Some(shared),
        status: None,
        stdin: Some(stdin),
        stdout: Some(stdout),
        stderr: Some(stderr),
    };
    // SAFETY: `pidfd_open` takes a pid and flags and returns a new descriptor.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        // Dropped, it is killed and reaped.
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor `pidfd_open` just made, owned by nobody else.
    started.pidfd = Some(unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) });
    // The child's ends are its own now (it dup'ed them); closing ours lets EOF through.
    drop((stdin_child, stdout_child, stderr_child, go_child));
    Ok(started)
}

/// Runs `f` with every signal blocked on this thread: the clone inherits the mask, and no
/// handler of the daemon's runs in it before it resets them.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data; the calls fill it and swap this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let out = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        out
    }
}

impl Child {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Turns the waiting child into `exec`: its command line goes into the shared memory, and
    /// the go byte down the control pipe. The environment is the daemon's with `exec`'s
    /// entries added (a later value of a name wins), as the shim's.
    pub(crate) fn exec(&mut self, exec: &Exec) -> io::Result<()> {
        let go = self
            .go
            .take()
            .ok_or_else(|| io::Error::other("the process was already given its command line"))?;
        let shared = self
            .shared
            .as_mut()
            .ok_or_else(|| io::Error::other("the process is gone"))?;
        let data = image(exec)?;
        let image: *const Image = &data.image;
        shared.image = Some(data);
        // SAFETY: the plan lives in `shared`; the child reads this field only after the byte
        // below, which it cannot have read yet.
        unsafe { std::ptr::write_volatile(&raw mut (*shared.plan).image, image) };
        nix::unistd::write(&go, b"x").map_err(io::Error::from)?;
        Ok(())
    }

    /// Gives up on it before its command line: it exits (1) when it sees the pipe closed.
    #[cfg(test)]
    pub(crate) fn close_go(&mut self) {
        self.go = None;
    }

    /// The exit status, if it has exited (reaping it).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = reap(self.pid, libc::WNOHANG)?;
            if self.status.is_some() {
                self.shared = None;
            }
        }
        Ok(self.status)
    }

    /// Waits for it to exit, and reaps it. Cancel-safe: the pidfd stays watched.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.try_wait()? {
            return Ok(status);
        }
        if self.watch.is_none() {
            let fd = self
                .pidfd
                .take()
                .ok_or_else(|| io::Error::other("the process has no pidfd"))?;
            // SAFETY: an `OwnedFd` keeps its descriptor open and the same until it is
            // dropped, and the `AsyncFd` owns it.
            let watch =
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                    .map_err(io::Error::from)?;
            self.watch = Some(watch);
        }
        let pid = self.pid;
        let status = loop {
            let watch = self.watch.as_ref().expect("watched above");
            // Readable once it has exited.
            let mut ready = watch.readable().await?;
            match reap(pid, libc::WNOHANG)? {
                Some(status) => break status,
                None => ready.clear_ready(),
            }
        };
        self.status = Some(status);
        self.shared = None;
        Ok(status)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: our own child, not reaped yet, so the pid is still its.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        if let Ok(Some(_)) = reap(self.pid, libc::WNOHANG) {
            return;
        }
        // It dies in a moment; what it may still read stays alive until it is reaped, and
        // is never freed while it may be (leaked if no thread can wait for it).
        // The thread holds one reference until the child is reaped (or is no child of ours
        // any more); this one is forgotten if the thread cannot start.
        let (pid, shared) = (self.pid, self.shared.take());
        let waited = std::sync::Arc::new(std::sync::Mutex::new(shared));
        let kept = waited.clone();
        let reaper = std::thread::Builder::new()
            .name("catalyst-reaper".into())
            .spawn(move || {
                let _ = reap(pid, 0);
                drop(kept);
            });
        if reaper.is_err() {
            std::mem::forget(waited);
        }
    }
}

/// `waitpid(pid, flags)`: the status once it has exited.
fn reap(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: writes the status into `status`.
        let got = unsafe { libc::waitpid(pid, &mut status, flags) };
        match got {
            0 => return Ok(None),
            p if p == pid => return Ok(Some(ExitStatus::from_raw(status))),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// The daemon's environment with `extra` added (a later value of a name wins).
fn environment(extra: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    for (name, value) in extra {
        match env.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = value.clone(),
            None => env.push((name.clone(), value.clone())),
        }
    }
    env
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a command line holds a NUL byte",
        )
    })
}

/// `exec` laid out for `execve`.
fn image(exec: &Exec) -> io::Result<Box<ImageData>> {
    let arg = |s: &OsStr| c_string(s.as_bytes());
    let cwd = arg(exec.cwd.as_os_str())?;
    let program = arg(exec.program.as_os_str())?;
    let mut strings = vec![cwd, program];
    let argc = 1 + exec.args.len();
    strings.push(arg(exec.program.as_os_str())?);
    for a in &exec.args {
        strings.push(arg(a)?);
    }
    for (name, value) in environment(&exec.env) {
        strings.push(c_string(
            &[name.as_bytes(), b"=", value.as_bytes()].concat(),
        )?);
    }
    let ptr = |c: &CString| c.as_ptr().cast::<u8>();
    let mut argv: Vec<*const u8> = strings[2..2 + argc].iter().map(ptr).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const u8> = strings[2 + argc..].iter().map(ptr).collect();
    envp.push(std::ptr::null());
    Ok(Box::new(ImageData {
        image: Image {
            cwd: ptr(&strings[0]),
            program: ptr(&strings[1]),
            argv: argv.as_ptr(),
            envp: envp.as_ptr(),
            stdin_null: exec.stdin_null,
        },
        _strings: strings,
        _argv: argv,
        _envp: envp,
    }))
}

/// Where the child keeps its control pipe while it waits.
const GO_FD: usize = 3;

/// Whether this kernel closes a range of descriptors in one call (`close_range`, Linux 5.9),
/// which the child needs: asked once.
pub(crate) fn supported() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        // An empty range: closes nothing, fails only where the call does not exist.
        // SAFETY: no memory is involved, and no descriptor is closed.
        unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0) == 0 }
    })
}

/// The clone's life (see the module documentation): raw system calls only.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `start` passes its plan, which stays alive until this process is reaped.
    let plan = unsafe { &*(arg as *const Plan) };
    if sys::setpgid().is_err() {
        return 126;
    }
    if sys::die_with_parent().is_err() || sys::getppid() != plan.parent as usize {
        return 126;
    }
    for (i, fd) in plan.stdio.iter().enumerate() {
        if sys::keep_as(*fd as usize, i).is_err() {
            return 126;
        }
    }
    // Nothing of the daemon's stays open in it while it waits: a copy of another agent's
    // stdin pipe would keep that agent from seeing its end. The control pipe moves to 3
    // (closed when it `execve`s).
    if sys::dup2(plan.go as usize, GO_FD).is_err() || sys::close_from(GO_FD + 1).is_err() {
        return 126;
    }
    if plan.set_niceness {
        if let Err(e) = sys::set_niceness(plan.niceness as isize) {
            sys::say_error(&[b"cannot set the niceness"], e);
            return 126;
        }
    }
    if !plan.cgroup.is_null() {
        if let Err(e) = sys::join_cgroup(plan.cgroup) {
            sys::say_error(&[b"cannot join the attempt's control group"], e);
            return 126;
        }
    }
    sys::reset_signals();
    let mut byte = [0u8];
    if sys::read(GO_FD, &mut byte) != Ok(1) {
        // The daemon gave up on it (closed the pipe), or is gone.
        return 1;
    }
    // SAFETY: written before the go byte, and alive until this process is reaped.
    let image = unsafe { &*std::ptr::read_volatile(&plan.image) };
    if image.stdin_null {
        if let Err(e) = sys::stdin_from_null() {
            sys::say_error(&[b"cannot open /dev/null"], e);
            return 127;
        }
    }
    if let Err(e) = sys::chdir(image.cwd) {
        sys::say_error(&[b"cannot enter the worktree"], e);
        return 127;
    }
    sys::unblock_signals();
    let e = sys::execve(image.program, image.argv, image.envp);
    sys::say_error(&[b"cannot run `", c_bytes(image.program), b"`"], e);
    127
}

/// The bytes of a NUL-terminated string, without the NUL.
fn c_bytes<'a>(at: *const u8) -> &'a [u8] {
    // SAFETY: the caller's string ends with NUL, and lives as long as the process reads it.
    unsafe { std::ffi::CStr::from_ptr(at.cast()) }.to_bytes()
}

/// The system calls, shared with `catalyst-shim`.
#[path = "../../../shim/sys.rs"]
mod sys;
