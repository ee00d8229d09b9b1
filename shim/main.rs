//! `catalyst-shim`: an agent's process started before its command line is known, without a C
//! library.
//!
//! It does what `catalyst-hook __exec` does (`src/daemon/agent/shim.rs` has the message format
//! and the reasons): joins the attempt's control group, sets its niceness and its parent-death
//! signal, waits for the command line on its stdin, and becomes the agent with `execve`. One
//! runs for every attempt, so its start is part of every attempt's cost: a program linked with
//! the C library spends about half a millisecond of CPU before `main` (the dynamic loader's
//! relocations, and the CPU feature probes that trap to the hypervisor on a virtual machine);
//! this one has no loader, no C library and no start-up code of its own, and starts in tens of
//! microseconds.
//!
//! `build.rs` compiles this file by itself (no dependencies, `panic = abort`, linked static
//! without start files) and the daemon's binaries carry the result
//! (`src/daemon/agent/shim_bin.rs` writes it out). x86-64 Linux only: elsewhere the daemon
//! starts `catalyst-hook __exec` instead.
//!
//! Arguments: `[__exec] [--parent PID] [--niceness N] [--cgroup JOIN_FILE]`. Exit codes as
//! the hook binary's shim: 126 when the setup fails, 127 when the command line is malformed or
//! the program cannot run (the reason on stderr), 1 without a word when stdin closes before a
//! whole command line arrived.

#![no_std]
#![no_main]

use core::arch::{asm, naked_asm};

/// The longest message read (a sandboxed command line is a few KiB).
const MAX_MESSAGE: usize = 1 << 20;

mod sys;

use sys::{say, say_error};

/// The process's entry: the stack holds `argc`, `argv` and `envp` (System V ABI).
#[unsafe(naked)]
#[unsafe(no_mangle)]
extern "C" fn _start() -> ! {
    naked_asm!(
        "xor ebp, ebp",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {start}",
        "ud2",
        start = sym start,
    )
}

unsafe extern "C" fn start(stack: *const usize) -> ! {
    // SAFETY: the kernel laid out `argc`, then `argc` argument pointers and a NULL, then the
    // environment's pointers and a NULL.
    let (args, env) = unsafe {
        let argc = *stack;
        let argv = stack.add(1) as *const *const u8;
        let envp = argv.add(argc + 1);
        let mut envc = 0;
        while !(*envp.add(envc)).is_null() {
            envc += 1;
        }
        (
            core::slice::from_raw_parts(argv, argc),
            core::slice::from_raw_parts(envp, envc),
        )
    };
    sys::exit(run(args, env))
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    say(&[b"internal error"]);
    sys::exit(127)
}

/// Referred to by the precompiled `core`; never called, since panics abort.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

// The memory functions the compiler may call (there is no C library to provide them).

/// # Safety
/// As C's `memcpy`.
#[unsafe(no_mangle)]
unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract; `rep movsb` copies `n` bytes forwards.
    unsafe {
        asm!("rep movsb", inout("rcx") n => _, inout("rdi") dest => _, inout("rsi") src => _,
             options(nostack, preserves_flags));
    }
    dest
}

/// # Safety
/// As C's `memmove`.
#[unsafe(no_mangle)]
unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize).wrapping_sub(src as usize) >= n {
        // SAFETY: copying forwards never reads what it wrote.
        return unsafe { memcpy(dest, src, n) };
    }
    // SAFETY: the caller's contract; copies backwards, from the last byte.
    unsafe {
        asm!("std", "rep movsb", "cld", inout("rcx") n => _,
             inout("rdi") dest.add(n).wrapping_sub(1) => _,
             inout("rsi") src.add(n).wrapping_sub(1) => _, options(nostack));
    }
    dest
}

/// # Safety
/// As C's `memset`.
#[unsafe(no_mangle)]
unsafe extern "C" fn memset(dest: *mut u8, byte: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract; `rep stosb` writes `n` bytes.
    unsafe {
        asm!("rep stosb", inout("rcx") n => _, inout("rdi") dest => _, in("al") byte as u8,
             options(nostack, preserves_flags));
    }
    dest
}

/// # Safety
/// As C's `memcmp`.
#[unsafe(no_mangle)]
unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller's contract: both hold `n` bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return x as i32 - y as i32;
        }
    }
    0
}

/// # Safety
/// As C's `bcmp`.
#[unsafe(no_mangle)]
unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcmp(a, b, n) }
}

/// # Safety
/// As C's `strlen` (the compiler turns a loop looking for a NUL into a call to it).
#[unsafe(no_mangle)]
unsafe extern "C" fn strlen(at: *const u8) -> usize {
    let mut len = 0;
    // SAFETY: the caller's contract: a NUL follows. Read volatile, so that this loop is not
    // turned into a call to itself.
    while unsafe { core::ptr::read_volatile(at.add(len)) } != 0 {
        len += 1;
    }
    len
}

/// The bytes of a NUL-terminated string, without the NUL.
fn c_str<'a>(at: *const u8) -> &'a [u8] {
    // SAFETY: the kernel's argument and environment strings, and the message's fields, end
    // with NUL.
    unsafe { core::slice::from_raw_parts(at, strlen(at)) }
}

fn number(text: &[u8]) -> Option<isize> {
    let (negative, digits) = match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0isize, |n, d| n * 10 + (d - b'0') as isize);
    Some(if negative { -n } else { n })
}

fn run(args: &[*const u8], env: &[*const u8]) -> u8 {
    if setup(args).is_err() {
        return 126;
    }
    let unread = match read_message().and_then(|body| command(body, env)) {
        Ok(command) => {
            let errno = exec(&command);
            let program = &command.program[..command.program.len() - 1];
            say_error(&[b"cannot run `", program, b"`"], errno);
            return 127;
        }
        Err(unread) => unread,
    };
    match unread {
        Unread::Closed => 1,
        Unread::Bad(why) => {
            say(&[b"cannot read the agent's command line: ", why]);
            127
        }
    }
}

/// Applies `--parent`, `--niceness` and `--cgroup`; says what failed.
fn setup(args: &[*const u8]) -> Result<(), ()> {
    let mut args = args.iter().skip(1).map(|a| c_str(*a)).peekable();
    if args.peek() == Some(&&b"__exec"[..]) {
        args.next();
    }
    let (mut parent, mut niceness, mut cgroup) = (None, None, None);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            say(&[b"`", flag, b"` needs a value"]);
            return Err(());
        };
        let slot = match flag {
            b"--parent" => &mut parent,
            b"--niceness" => &mut niceness,
            b"--cgroup" => {
                cgroup = Some(value);
                continue;
            }
            _ => {
                say(&[b"unknown argument `", flag, b"`"]);
                return Err(());
            }
        };
        match number(value).filter(|n| flag != b"--parent" || *n >= 0) {
            Some(n) => *slot = Some(n),
            None => {
                say(&[b"`", value, b"` is not a number here"]);
                return Err(());
            }
        }
    }
    if let Some(parent) = parent {
        if let Err(e) = sys::die_with_parent() {
            say_error(&[b"cannot ask to die with the daemon"], e);
            return Err(());
        }
        // The daemon may have died before the call above; then the signal never comes.
        if sys::getppid() != parent as usize {
            say(&[b"the daemon is gone"]);
            return Err(());
        }
    }
    if let Some(n) = niceness {
        if let Err(e) = sys::set_niceness(n) {
            say_error(&[b"cannot set the niceness"], e);
            return Err(());
        }
    }
    if let Some(procs) = cgroup {
        join(procs)?;
    }
    Ok(())
}

/// Joins the control group by writing `0` (the writer itself) into its `tasks` file (cgroup
/// v1: the calling thread, which is this whole process, moves without the kernel's global
/// cgroup lock) or `cgroup.procs` (v2), named by `procs`.
fn join(procs: &[u8]) -> Result<(), ()> {
    let failed = |e| {
        say_error(
            &[b"cannot join the attempt's control group `", procs, b"`"],
            e,
        )
    };
    let mut path = [0u8; 4096];
    if procs.len() >= path.len() {
        failed(36);
        return Err(());
    }
    path[..procs.len()].copy_from_slice(procs);
    sys::join_cgroup(path[..=procs.len()].as_ptr())
        .map(drop)
        .map_err(failed)
}

enum Unread {
    /// Stdin ended before a whole message: the daemon gave up on the attempt.
    Closed,
    Bad(&'static [u8]),
}

/// Reads one message from stdin, without reading past it (what follows is the agent's).
fn read_message() -> Result<&'static mut [u8], Unread> {
    let mut len = 0usize;
    let mut digits = 0;
    loop {
        let mut byte = [0u8];
        match sys::read(0, &mut byte) {
            Ok(1) => {}
            Ok(_) => return Err(Unread::Closed),
            Err(_) => return Err(Unread::Bad(b"stdin cannot be read")),
        }
        match byte[0] {
            b'\n' if digits > 0 => break,
            d @ b'0'..=b'9' if digits < 8 => {
                len = len * 10 + (d - b'0') as usize;
                digits += 1;
            }
            _ => return Err(Unread::Bad(b"the message does not start with its length")),
        }
    }
    if len > MAX_MESSAGE {
        return Err(Unread::Bad(
            b"the message's length is not a number up to 1 MiB",
        ));
    }
    let body = sys::alloc(len).map_err(|_| Unread::Bad(b"no memory for the message"))?;
    let mut filled = 0;
    while filled < len {
        match sys::read(0, &mut body[filled..len]) {
            Ok(0) => return Err(Unread::Closed),
            Ok(n) => filled += n,
            Err(_) => return Err(Unread::Bad(b"stdin cannot be read")),
        }
    }
    Ok(&mut body[..len])
}

/// What the agent is: every string NUL-terminated, every list NULL-terminated.
struct Command<'a> {
    cwd: &'a [u8],
    stdin_null: bool,
    program: &'a [u8],
    argv: &'a [*const u8],
    envp: &'a [*const u8],
}

/// Reads the message's fields in place. The environment is the shim's own `env` with the
/// message's entries added (a later value of a name wins).
fn command<'a>(body: &'a mut [u8], env: &[*const u8]) -> Result<Command<'a>, Unread> {
    let bad = Unread::Bad;
    let missing = || bad(b"the message lacks the folder, stdin, environment or program");
    if body.last() != Some(&0) {
        return Err(bad(b"the message does not end with a NUL byte"));
    }
    let body: &'a [u8] = body;
    let mut fields = body.split_inclusive(|b| *b == 0);
    let cwd = fields.next().ok_or_else(missing)?;
    let stdin_null = match fields.next().ok_or_else(missing)? {
        b"null\0" => true,
        b"pipe\0" => false,
        _ => return Err(bad(b"stdin is neither `null` nor `pipe`")),
    };
    let count = fields.next().ok_or_else(missing)?;
    let count = number(&count[..count.len() - 1])
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(bad(b"the environment's size is not a number"))?;
    let left = body.iter().filter(|b| **b == 0).count() - 3;
    if count > left {
        return Err(missing());
    }
    // One array for both lists: the environment, then the arguments, each ending with NULL.
    let slots = env.len() + left + 2;
    let memory = sys::alloc(slots * core::mem::size_of::<*const u8>())
        .map_err(|_| bad(b"no memory for the command line"))?;
    // SAFETY: the mapping is page-aligned, zeroed (NULL pointers) and holds `slots` pointers.
    let list =
        unsafe { core::slice::from_raw_parts_mut(memory.as_mut_ptr() as *mut *const u8, slots) };
    // The message's entries go at the end first, so the shim's own can be checked against them.
    let added = slots - count..slots;
    for slot in added.clone() {
        let entry = fields.next().ok_or_else(missing)?;
        if !entry.contains(&b'=') {
            return Err(bad(b"an environment entry has no `=`"));
        }
        list[slot] = entry.as_ptr();
    }
    let name = |entry: *const u8| {
        let text = c_str(entry);
        &text[..text.iter().position(|b| *b == b'=').unwrap_or(text.len())]
    };
    let mut len = 0;
    for &own in env {
        if !added.clone().any(|slot| name(list[slot]) == name(own)) {
            list[len] = own;
            len += 1;
        }
    }
    for slot in added.clone() {
        let later = slot + 1..added.end;
        if !later.clone().any(|l| name(list[l]) == name(list[slot])) {
            list[len] = list[slot];
            len += 1;
        }
    }
    // `len <= slot` held throughout: each move is to a slot at or before the one read.
    list[len] = core::ptr::null();
    let (envp, argv) = list.split_at_mut(len + 1);
    let program = fields.next().ok_or_else(missing)?;
    let mut argc = 0;
    for arg in core::iter::once(program).chain(fields) {
        argv[argc] = arg.as_ptr();
        argc += 1;
    }
    argv[argc] = core::ptr::null();
    Ok(Command {
        cwd,
        stdin_null,
        program,
        argv: &argv[..=argc],
        envp,
    })
}

/// Becomes the agent; returns only the error number of what failed.
fn exec(command: &Command) -> usize {
    if let Err(e) = sys::chdir(command.cwd.as_ptr()) {
        return e;
    }
    if command.stdin_null {
        if let Err(e) = sys::stdin_from_null() {
            return e;
        }
    }
    let program = command.program;
    if program.contains(&b'/') {
        return sys::execve(
            program.as_ptr(),
            command.argv.as_ptr(),
            command.envp.as_ptr(),
        );
    }
    // A bare name: looked up on the agent's `PATH`, as `execvp` does.
    let path = command
        .envp
        .iter()
        .take_while(|p| !p.is_null())
        .map(|p| c_str(*p))
        .find_map(|entry| entry.strip_prefix(b"PATH="))
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    let mut denied = false;
    for dir in path.split(|b| *b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let mut full = [0u8; 4096];
        if dir.len() + 1 + program.len() > full.len() {
            continue;
        }
        full[..dir.len()].copy_from_slice(dir);
        full[dir.len()] = b'/';
        full[dir.len() + 1..dir.len() + 1 + program.len()].copy_from_slice(program);
        match sys::execve(full.as_ptr(), command.argv.as_ptr(), command.envp.as_ptr()) {
            sys::EACCES => denied = true,
            sys::ENOENT | sys::ENOTDIR => {}
            e => return e,
        }
    }
    if denied {
        sys::EACCES
    } else {
        sys::ENOENT
    }
}
