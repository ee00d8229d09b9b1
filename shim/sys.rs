//! Linux system calls on x86-64, made without the C library: by `catalyst-shim` (`main.rs`,
//! which has no C library) and by the daemon's clones before they `execve`
//! (`src/daemon/agent/cloned.rs`, where the C library's wrappers would write the spawner
//! thread's `errno`), and the one error line they write. Each uses some of them.
#![allow(dead_code)]

use core::arch::asm;

const READ: usize = 0;
const WRITE: usize = 1;
const CLOSE: usize = 3;
const MMAP: usize = 9;
const RT_SIGACTION: usize = 13;
const RT_SIGPROCMASK: usize = 14;
const DUP2: usize = 33;
const EXECVE: usize = 59;
const FCNTL: usize = 72;
const CHDIR: usize = 80;
const SETPGID: usize = 109;
const GETPPID: usize = 110;
const SETPRIORITY: usize = 141;
const PRCTL: usize = 157;
const EXIT_GROUP: usize = 231;
const OPENAT: usize = 257;
const CLOSE_RANGE: usize = 436;

pub const EINTR: usize = 4;
pub const ENOENT: usize = 2;
pub const EACCES: usize = 13;
pub const ENOTDIR: usize = 20;

/// A system call's result: the value, or the error number.
pub type Result = core::result::Result<usize, usize>;

fn check(ret: isize) -> Result {
    if (-4095..0).contains(&ret) {
        Err(-ret as usize)
    } else {
        Ok(ret as usize)
    }
}

unsafe fn call3(nr: usize, a: usize, b: usize, c: usize) -> Result {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for system call `nr`.
    unsafe {
        asm!("syscall", inlateout("rax") nr as isize => ret, in("rdi") a, in("rsi") b,
             in("rdx") c, lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    check(ret)
}

unsafe fn call6(nr: usize, a: [usize; 6]) -> Result {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for system call `nr`.
    unsafe {
        asm!("syscall", inlateout("rax") nr as isize => ret, in("rdi") a[0], in("rsi") a[1],
             in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    check(ret)
}

/// `call`, again while a signal interrupts it.
fn retry(mut call: impl FnMut() -> Result) -> Result {
    loop {
        match call() {
            Err(EINTR) => continue,
            done => return done,
        }
    }
}

pub fn read(fd: usize, buf: &mut [u8]) -> Result {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    retry(|| unsafe { call3(READ, fd, buf.as_mut_ptr() as usize, buf.len()) })
}

pub fn write(fd: usize, buf: &[u8]) -> Result {
    // SAFETY: the kernel reads `buf.len()` bytes of `buf`.
    retry(|| unsafe { call3(WRITE, fd, buf.as_ptr() as usize, buf.len()) })
}

pub fn close(fd: usize) {
    // SAFETY: closes a descriptor this process opened.
    let _ = unsafe { call3(CLOSE, fd, 0, 0) };
}

/// Opens the NUL-terminated `path` with `flags`.
pub fn open(path: *const u8, flags: usize) -> Result {
    const AT_FDCWD: isize = -100;
    // SAFETY: `path` is NUL-terminated.
    retry(|| unsafe { call6(OPENAT, [AT_FDCWD as usize, path as usize, flags, 0, 0, 0]) })
}

pub fn dup2(from: usize, to: usize) -> Result {
    // SAFETY: no memory is involved.
    unsafe { call3(DUP2, from, to, 0) }
}

/// Descriptor `from` as `to`, kept open across `execve` (`dup2` of a descriptor onto itself
/// would leave it close-on-exec).
pub fn keep_as(from: usize, to: usize) -> Result {
    const F_SETFD: usize = 2;
    if from == to {
        // SAFETY: no memory is involved.
        return unsafe { call3(FCNTL, from, F_SETFD, 0) };
    }
    dup2(from, to)
}

/// Closes every descriptor from `first` up (`close_range`, Linux 5.9).
pub fn close_from(first: usize) -> Result {
    // SAFETY: no memory is involved.
    unsafe { call3(CLOSE_RANGE, first, u32::MAX as usize, 0) }
}

/// `len` bytes of fresh zeroed memory, never given back (for a process that `exec`s or exits).
pub fn alloc(len: usize) -> core::result::Result<&'static mut [u8], usize> {
    const PROT_READ_WRITE: usize = 3;
    const MAP_PRIVATE_ANONYMOUS: usize = 0x22;
    let len = len.max(1);
    // SAFETY: a new anonymous mapping of `len` bytes, owned by nobody else.
    let at = unsafe {
        call6(
            MMAP,
            [
                0,
                len,
                PROT_READ_WRITE,
                MAP_PRIVATE_ANONYMOUS,
                usize::MAX,
                0,
            ],
        )?
    };
    // SAFETY: the mapping is `len` bytes, readable and writable, and lives for good.
    Ok(unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) })
}

pub fn getppid() -> usize {
    // SAFETY: no arguments.
    unsafe { call3(GETPPID, 0, 0, 0) }.unwrap_or(0)
}

/// Makes this process the leader of a process group of its own.
pub fn setpgid() -> Result {
    // SAFETY: no memory is involved.
    unsafe { call3(SETPGID, 0, 0, 0) }
}

/// Sets this process's niceness.
pub fn set_niceness(n: isize) -> Result {
    const PRIO_PROCESS: usize = 0;
    // SAFETY: no memory is involved.
    unsafe { call3(SETPRIORITY, PRIO_PROCESS, 0, n as usize) }
}

/// `SIGKILL` when the thread that started this process ends.
pub fn die_with_parent() -> Result {
    const PR_SET_PDEATHSIG: usize = 1;
    const SIGKILL: usize = 9;
    // SAFETY: no memory is involved.
    unsafe { call3(PRCTL, PR_SET_PDEATHSIG, SIGKILL, 0) }
}

/// Changes the working folder to the NUL-terminated `path`.
pub fn chdir(path: *const u8) -> Result {
    // SAFETY: `path` is NUL-terminated.
    unsafe { call3(CHDIR, path as usize, 0, 0) }
}

/// The kernel's `struct sigaction` on x86-64.
#[repr(C)]
struct Action {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// Every signal with a handler, and `SIGPIPE` when ignored, back to the default action.
pub fn reset_signals() {
    const SIG_DFL: usize = 0;
    const SIG_IGN: usize = 1;
    const SIGKILL: usize = 9;
    const SIGPIPE: usize = 13;
    const SIGSTOP: usize = 19;
    const MASK_SIZE: usize = 8;
    for signal in 1..=64 {
        if signal == SIGKILL || signal == SIGSTOP {
            continue;
        }
        let mut old = Action {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: reads the signal's action into `old`.
        let read = unsafe {
            call6(
                RT_SIGACTION,
                [signal, 0, &raw mut old as usize, MASK_SIZE, 0, 0],
            )
        };
        let handled = old.handler != SIG_DFL && old.handler != SIG_IGN;
        if read.is_ok() && (handled || (signal == SIGPIPE && old.handler == SIG_IGN)) {
            let default = Action {
                handler: SIG_DFL,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            // SAFETY: sets the signal's action from `default`.
            let _ = unsafe {
                call6(
                    RT_SIGACTION,
                    [signal, &raw const default as usize, 0, MASK_SIZE, 0, 0],
                )
            };
        }
    }
}

/// Blocks no signal any more.
pub fn unblock_signals() {
    const SIG_SETMASK: usize = 2;
    const MASK_SIZE: usize = 8;
    let none: u64 = 0;
    // SAFETY: sets the mask from `none`.
    let _ = unsafe {
        call6(
            RT_SIGPROCMASK,
            [SIG_SETMASK, &raw const none as usize, 0, MASK_SIZE, 0, 0],
        )
    };
}

/// Runs `program` (NUL-terminated) with the NULL-terminated arrays `argv` and `envp` of
/// NUL-terminated strings; returns only its error.
pub fn execve(program: *const u8, argv: *const *const u8, envp: *const *const u8) -> usize {
    // SAFETY: the caller's pointers are as said above.
    let ret = unsafe { call3(EXECVE, program as usize, argv as usize, envp as usize) };
    ret.err().unwrap_or(0)
}

/// `open` flags.
const O_RDONLY: usize = 0;
const O_WRONLY: usize = 1;
const O_CLOEXEC: usize = 0o2000000;

/// Joins a control group by writing `0` (the writer itself) to its join file, the
/// NUL-terminated `path`.
pub fn join_cgroup(path: *const u8) -> Result {
    let fd = open(path, O_WRONLY | O_CLOEXEC)?;
    let written = write(fd, b"0");
    close(fd);
    written
}

/// Stdin from `/dev/null`.
pub fn stdin_from_null() -> Result {
    let fd = open(c"/dev/null".as_ptr().cast(), O_RDONLY | O_CLOEXEC)?;
    let duped = dup2(fd, 0);
    close(fd);
    duped
}

pub fn exit(code: u8) -> ! {
    // SAFETY: ends the process.
    unsafe { asm!("syscall", in("rax") EXIT_GROUP, in("rdi") code as usize, options(noreturn)) }
}

/// Writes `catalyst: ` and `parts` as one line on stderr (the agent's stderr file).
pub fn say(parts: &[&[u8]]) {
    let mut line = [0u8; 1024];
    let mut len = 0;
    for part in [&b"catalyst: "[..]]
        .iter()
        .chain(parts)
        .chain([&&b"\n"[..]])
    {
        let room = (line.len() - 1 - len).min(part.len());
        line[len..len + room].copy_from_slice(&part[..room]);
        len += room;
    }
    if line[len - 1] != b'\n' {
        line[len] = b'\n';
        len += 1;
    }
    let _ = write(2, &line[..len]);
}

/// The text of an error number, as `strerror` would say the common ones.
fn error_text(errno: usize, digits: &mut [u8; 20]) -> [&[u8]; 3] {
    let text: &[u8] = match errno {
        1 => b"Operation not permitted",
        2 => b"No such file or directory",
        3 => b"No such process",
        5 => b"Input/output error",
        7 => b"Argument list too long",
        8 => b"Exec format error",
        12 => b"Cannot allocate memory",
        13 => b"Permission denied",
        20 => b"Not a directory",
        21 => b"Is a directory",
        26 => b"Text file busy",
        28 => b"No space left on device",
        30 => b"Read-only file system",
        36 => b"File name too long",
        40 => b"Too many levels of symbolic links",
        _ => b"error",
    };
    [text, b" (os error ", decimal(errno, digits)]
}

/// `n` in decimal, written at the end of `digits`.
fn decimal(mut n: usize, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// Says `what` failed with `errno`.
pub fn say_error(what: &[&[u8]], errno: usize) {
    let mut digits = [0u8; 20];
    let [text, open, number] = error_text(errno, &mut digits);
    let mut parts: [&[u8]; 12] = [b""; 12];
    let n = what.len().min(8);
    parts[..n].copy_from_slice(&what[..n]);
    parts[n..n + 4].copy_from_slice(&[b": ", text, open, number]);
    parts[n + 4] = b")";
    say(&parts[..n + 5]);
}
