//! `catalyst-hook __sandbox-net` (or `catalyst __sandbox-net`): the first process inside an
//! attempt's network namespace. It
//! listens on the loopback ports the agent is told to use (its model API's, and the HTTPS
//! proxy's), carries each connection to a Unix socket the daemon serves from outside the
//! namespace, and runs the agent as its child, exiting as it exits.
//!
//! Arguments: `--listen <addr>=<socket>` (repeated), then `--` and the agent's command line.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

/// Why the forwarder could not start the agent.
#[derive(Debug, thiserror::Error)]
pub enum SandboxNetError {
    #[error("usage: catalyst __sandbox-net [--listen ADDR=SOCKET]... -- COMMAND...: {0}")]
    Usage(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
    #[error("cannot run `{program}`: {source}")]
    Spawn { program: String, source: io::Error },
}

/// One loopback port carried to a Unix socket.
#[derive(Debug, PartialEq, Eq)]
pub struct Forward {
    pub listen: SocketAddr,
    pub socket: PathBuf,
}

/// The whole subcommand, given the arguments after its name: exits as the agent does, or 127
/// (said on stderr) when it could not start it.
pub fn main(args: &[String]) -> u8 {
    match parse(args).and_then(|(forwards, command)| run(&forwards, &command)) {
        Ok(code) => u8::try_from(code).unwrap_or(1),
        Err(e) => {
            eprintln!("catalyst: {e}");
            127
        }
    }
}

/// Reads the arguments: the forwards and the command.
pub fn parse(args: &[String]) -> Result<(Vec<Forward>, Vec<String>), SandboxNetError> {
    let usage = |m: &str| SandboxNetError::Usage(m.to_owned());
    let mut forwards = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match &**arg {
            "--" => {
                let command: Vec<String> = rest.cloned().collect();
                if command.is_empty() {
                    return Err(usage("no command after `--`"));
                }
                return Ok((forwards, command));
            }
            "--listen" => {
                let spec = rest
                    .next()
                    .ok_or_else(|| usage("`--listen` needs a value"))?;
                let (addr, socket) = spec
                    .split_once('=')
                    .ok_or_else(|| usage("`--listen` takes ADDR=SOCKET"))?;
                let listen = addr
                    .parse()
                    .map_err(|_| usage(&format!("`{addr}` is not an address and port")))?;
                forwards.push(Forward {
                    listen,
                    socket: socket.into(),
                });
            }
            other => return Err(usage(&format!("unexpected `{other}`"))),
        }
    }
    Err(usage("no `--` before the command"))
}

/// Starts the forwards, runs the command and returns the exit code to leave with (128 plus
/// the signal's number when a signal ended it, as a shell reports it).
pub fn run(forwards: &[Forward], command: &[String]) -> Result<i32, SandboxNetError> {
    for forward in forwards {
        let listener =
            TcpListener::bind(forward.listen).map_err(|source| SandboxNetError::Listen {
                addr: forward.listen,
                source,
            })?;
        let socket = forward.socket.clone();
        std::thread::spawn(move || accept(listener, socket));
    }
    let (program, args) = command
        .split_first()
        .expect("parse refuses an empty command");
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|source| SandboxNetError::Spawn {
            program: program.clone(),
            source,
        })?;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

fn accept(listener: TcpListener, socket: PathBuf) {
    for conn in listener.incoming().flatten() {
        let socket = socket.clone();
        std::thread::spawn(move || {
            // A connection the daemon does not take is closed; the agent sees a reset.
            if let Ok(outside) = UnixStream::connect(&socket) {
                pipe(conn, outside);
            }
        });
    }
}

/// Copies both ways until either side closes.
fn pipe(tcp: TcpStream, unix: UnixStream) {
    let (Ok(mut tcp_read), Ok(mut unix_read)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let (mut tcp_write, mut unix_write) = (tcp, unix);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut tcp_read, &mut unix_write);
        let _ = unix_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = io::copy(&mut unix_read, &mut tcp_write);
    let _ = tcp_write.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line, split at spaces.
    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn forwards_then_the_command() {
        let (forwards, command) = parse(&words(
            "--listen 127.0.0.1:3128=/run/net/proxy.sock -- claude -p",
        ))
        .unwrap();
        assert_eq!(
            forwards,
            vec![Forward {
                listen: "127.0.0.1:3128".parse().unwrap(),
                socket: "/run/net/proxy.sock".into()
            }]
        );
        assert_eq!(command, words("claude -p"));
    }

    #[test]
    fn a_malformed_line_is_refused() {
        for line in [
            "--listen nope=/s -- x",
            "--listen 127.0.0.1:1 -- x",
            "--listen 127.0.0.1:1=/s",
            "--",
            "x",
        ] {
            assert!(parse(&words(line)).is_err(), "{line}");
        }
    }
}
