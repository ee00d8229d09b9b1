//! An agent's process, whichever way it was started: by `posix_spawn`
//! ([`tokio::process::Child`]), or as a clone started ahead (`super::cloned`, x86-64 Linux).

use std::io;
use std::process::ExitStatus;

use tokio::io::{AsyncRead, AsyncWrite};

/// The agent's stdin, as the daemon writes it.
pub(crate) type Input = Box<dyn AsyncWrite + Send + Unpin>;
/// The agent's stdout or stderr, as the daemon reads it.
pub(crate) type Output = Box<dyn AsyncRead + Send + Unpin>;

/// A started process; dropped before it was reaped, it is killed.
pub(crate) enum Process {
    Spawned(tokio::process::Child),
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    Cloned(super::cloned::Child),
}

impl Process {
    pub(crate) fn id(&self) -> Option<u32> {
        match self {
            Process::Spawned(child) => child.id(),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => Some(child.id()),
        }
    }

    /// Waits for it to exit; cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Process::Spawned(child) => child.wait().await,
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => child.wait().await,
        }
    }

    /// The exit status, if it has exited.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Process::Spawned(child) => child.try_wait(),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => child.try_wait(),
        }
    }

    /// Its stdin pipe, once; call it within the runtime.
    pub(crate) fn take_stdin(&mut self) -> io::Result<Option<Input>> {
        Ok(match self {
            Process::Spawned(child) => child.stdin.take().map(|p| Box::new(p) as Input),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => match child.stdin.take() {
                Some(fd) => Some(Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
                None => None,
            },
        })
    }

    /// Its stdout and stderr pipes, once; call it within the runtime.
    pub(crate) fn take_output(&mut self) -> io::Result<Option<(Output, Output)>> {
        Ok(match self {
            Process::Spawned(child) => match (child.stdout.take(), child.stderr.take()) {
                (Some(out), Some(err)) => Some((Box::new(out), Box::new(err))),
                _ => None,
            },
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Process::Cloned(child) => match (child.stdout.take(), child.stderr.take()) {
                (Some(out), Some(err)) => {
                    use tokio::net::unix::pipe::Receiver;
                    Some((
                        Box::new(Receiver::from_owned_fd(out)?),
                        Box::new(Receiver::from_owned_fd(err)?),
                    ))
                }
                _ => None,
            },
        })
    }
}
