//! The outside end of a sandboxed attempt's network (docs/agents.md#network): Unix sockets in
//! the attempt's run folder, which the forwarder (`__sandbox-net`) inside the namespace connects
//! loopback ports to.
//!
//! - A **forward** carries a connection to one fixed address: the model API when its base URL
//!   is on loopback (a local gateway, the tests' mock).
//! - The **proxy** reads an HTTP `CONNECT host:port` and carries the connection there only when
//!   `host:port` is one of the profile's model hosts; anything else gets `403`, is logged, and
//!   is told to the [`OnRefused`] callback (the runner records it as an `agent.tool` event).
//!
//! Everything stops when the returned [`NetGuard`] is dropped, at the attempt's end.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The longest `CONNECT` request head read, in bytes.
const MAX_HEAD: usize = 8 * 1024;

/// What one socket carries its connections to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Always this address.
    Forward(SocketAddr),
    /// Where a `CONNECT` asks, if it is one of these `host:port`s.
    Proxy(Vec<String>),
}

/// Called with the `host:port` of each connection the proxy refuses.
#[derive(Clone)]
pub struct OnRefused(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for OnRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnRefused")
    }
}

/// Serves one socket per route until dropped.
pub struct NetGuard {
    _stop: DropGuard,
    /// The short folder the sockets are in when `dir` was too long for them; removed on drop.
    short: Option<tempfile::TempDir>,
}

impl NetGuard {
    /// The folder holding the sockets when it is not the one [`start`] was given (a path too
    /// long for a Unix socket address): the sandbox must make it reachable.
    pub fn outside_dir(&self) -> Option<&Path> {
        self.short.as_ref().map(tempfile::TempDir::path)
    }
}

/// Binds `dir/<n>.sock` for each route and serves them; returns the socket paths, in order.
/// When those paths would be too long for a Unix socket address (a workspace deep in the file
/// system), the sockets go in a new private folder in the temporary folder instead, named at
/// random and removed with the guard ([`NetGuard::outside_dir`]).
pub fn start(
    dir: &Path,
    routes: Vec<Route>,
    refused: Option<OnRefused>,
) -> io::Result<(NetGuard, Vec<PathBuf>)> {
    let longest = dir.join(format!("{}.sock", routes.len()));
    let short = if longest.as_os_str().len() > crate::daemon::paths::MAX_SOCKET_PATH {
        Some(tempfile::Builder::new().prefix("catalyst-net-").tempdir()?)
    } else {
        std::fs::create_dir_all(dir)?;
        None
    };
    let dir = short.as_ref().map_or(dir, tempfile::TempDir::path);
    let stop = CancellationToken::new();
    let mut paths = Vec::new();
    for (n, route) in routes.into_iter().enumerate() {
        let path = dir.join(format!("{n}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let (stop, refused) = (stop.clone(), refused.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => {
                        let Ok((conn, _)) = accepted else { continue };
                        let (route, stop, refused) = (route.clone(), stop.clone(), refused.clone());
                        tokio::spawn(async move {
                            tokio::select! {
                                () = stop.cancelled() => {}
                                () = serve(conn, &route, refused.as_ref()) => {}
                            }
                        });
                    }
                }
            }
        });
        paths.push(path);
    }
    Ok((
        NetGuard {
            _stop: stop.drop_guard(),
            short,
        },
        paths,
    ))
}

async fn serve(mut conn: UnixStream, route: &Route, refused: Option<&OnRefused>) {
    match route {
        Route::Forward(addr) => {
            if let Ok(mut out) = TcpStream::connect(addr).await {
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut out).await;
            }
        }
        Route::Proxy(allowed) => {
            let Ok(target) = read_connect(&mut conn).await else {
                let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
                return;
            };
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&target)) {
                tracing::warn!(%target, "refused an agent's connection: not one of its model hosts");
                if let Some(OnRefused(tell)) = refused {
                    tell(&target);
                }
                let _ = conn
                    .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
                    .await;
                return;
            }
            match TcpStream::connect(&target).await {
                Ok(mut out) => {
                    if conn
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .await
                        .is_ok()
                    {
                        let _ = tokio::io::copy_bidirectional(&mut conn, &mut out).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(%target, error = %e, "cannot reach an agent's model host");
                    let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                }
            }
        }
    }
}

/// Reads a request head up to its blank line and returns the `host:port` of a `CONNECT`.
async fn read_connect(conn: &mut UnixStream) -> io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD || conn.read(&mut byte).await? == 0 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        head.push(byte[0]);
    }
    parse_connect(&head).ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// The target of a `CONNECT host:port HTTP/1.x` request line.
fn parse_connect(head: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(head).ok()?.lines().next()?;
    let mut words = line.split(' ');
    let (method, target, version) = (words.next()?, words.next()?, words.next()?);
    let valid = method == "CONNECT" && version.starts_with("HTTP/1.") && words.next().is_none();
    let (_, port) = target.rsplit_once(':')?;
    (valid && port.parse::<u16>().is_ok()).then(|| target.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connect_line_names_a_target() {
        assert_eq!(
            parse_connect(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").as_deref(),
            Some("api.anthropic.com:443")
        );
        for bad in [
            &b"GET http://x/ HTTP/1.1\r\n\r\n"[..],
            b"CONNECT x HTTP/1.1\r\n\r\n",
            b"CONNECT x:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT x:443 HTTP/1.1 extra\r\n\r\n",
        ] {
            assert_eq!(
                parse_connect(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[tokio::test]
    async fn the_proxy_carries_a_model_host_and_refuses_the_rest() {
        let model = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let allowed = model.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = model.accept().await.unwrap();
            s.write_all(b"model").await.unwrap();
        });
        let dir = tempfile::tempdir().unwrap();
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let tell = {
            let told = told.clone();
            OnRefused(Arc::new(move |t: &str| {
                told.lock().unwrap().push(t.to_owned())
            }))
        };
        let (_guard, paths) = start(
            dir.path(),
            vec![Route::Proxy(vec![allowed.clone()])],
            Some(tell),
        )
        .unwrap();
        let ask = |target: String| {
            let path = paths[0].clone();
            async move {
                let mut c = UnixStream::connect(&path).await.unwrap();
                c.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut out = String::new();
                c.read_to_string(&mut out).await.unwrap();
                out
            }
        };
        let through = ask(allowed).await;
        assert!(
            through.starts_with("HTTP/1.1 200") && through.ends_with("model"),
            "{through}"
        );
        let refused = ask("example.com:443".into()).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        assert_eq!(*told.lock().unwrap(), ["example.com:443"]);
    }
}
