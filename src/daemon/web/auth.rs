//! Who may use the web dashboard: whoever holds the token written to `.catalyst/web.token`
//! (mode 0600) at each start. A browser brings it once in the URL (`/?token=…`, printed in the
//! log), is answered with a cookie (`HttpOnly; SameSite=Strict`) and sent on to the same page
//! without it; scripts send `Authorization: Bearer <token>`. A request that changes anything
//! (any method but GET and HEAD) made with the cookie must also come from the dashboard's own
//! origin (`Origin`) and carry the page's CSRF token (docs/web.md#security).

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The cookie that carries the token.
pub const COOKIE: &str = "catalyst_token";
/// The header and form field that carry the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";
pub const CSRF_FIELD: &str = "csrf";

/// The secrets of one daemon run: the access token and the CSRF token of its pages.
#[derive(Clone)]
pub struct Secrets {
    token: Arc<str>,
    csrf: Arc<str>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// New random secrets, the access token written to `path` (mode 0600; replaced, so a
    /// token of an earlier run stops working).
    pub fn create(path: &Path) -> io::Result<Secrets> {
        let secrets = Secrets {
            token: random_hex()?.into(),
            csrf: random_hex()?.into(),
        };
        let _ = std::fs::remove_file(path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        writeln!(file, "{}", secrets.token)?;
        Ok(secrets)
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CSRF token the pages put in their forms.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    fn is_token(&self, text: &str) -> bool {
        same(text.as_bytes(), self.token.as_bytes())
    }

    /// Whether `text` is the CSRF token.
    pub fn is_csrf(&self, text: &str) -> bool {
        same(text.as_bytes(), self.csrf.as_bytes())
    }
}

/// 32 random bytes from the kernel, in hex.
fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The names a request may give in its `Host` header: the address the dashboard listens on,
/// `localhost` and the loopback addresses, and the config's `[web] hosts`, each with the
/// listening port. Any other name is refused before the token is looked at, so a page of
/// another site whose name was pointed at this machine (DNS rebinding) gets nothing, whatever
/// cookie the browser holds.
#[derive(Clone, Debug)]
pub struct Hosts(Arc<[String]>);

impl Hosts {
    pub fn new(addr: std::net::SocketAddr, extra: &[String]) -> Hosts {
        let port = addr.port();
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("{h}:{port}"))
            .collect();
        if !addr.ip().is_unspecified() {
            names.push(addr.to_string());
        }
        names.extend(
            extra
                .iter()
                .map(|h| format!("{}:{port}", h.to_ascii_lowercase())),
        );
        Hosts(names.into())
    }

    /// Whether `host` (a `Host` header's value) is one of them; a name without a port is
    /// taken as port 80, as a browser would send it.
    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let with_port = if host.ends_with(']') || !host.contains(':') {
            format!("{host}:80")
        } else {
            host
        };
        self.0.contains(&with_port)
    }
}

/// The middleware in front of [`require`]: refuses a request whose `Host` is not one of
/// [`Hosts`] (or that has none).
pub async fn check_host(State(hosts): State<Hosts>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    match host {
        Some(host) if hosts.allows(host) => next.run(request).await,
        _ => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this request names a host that is not this dashboard's (add it to `[web] hosts` if people reach the dashboard by that name)",
        ),
    }
}

/// How a request proved it may come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proof {
    Cookie,
    Bearer,
}

/// The middleware in front of every route (see the module documentation).
pub async fn require(State(secrets): State<Secrets>, mut request: Request, next: Next) -> Response {
    if let Some(token) = query_token(request.uri()) {
        if !secrets.is_token(&token) {
            return refuse(StatusCode::UNAUTHORIZED, "this link's token is not this daemon's (it changes at each start; see .catalyst/web.token)");
        }
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            secrets.token
        );
        let location = without_token(request.uri());
        return (
            StatusCode::SEE_OTHER,
            [(header::SET_COOKIE, cookie), (header::LOCATION, location)],
        )
            .into_response();
    }
    let headers = request.headers();
    let proof = if bearer(headers).is_some_and(|t| secrets.is_token(t)) {
        Proof::Bearer
    } else if cookie(headers).is_some_and(|t| secrets.is_token(t)) {
        Proof::Cookie
    } else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "open the link catalystd printed when it started (the token is also in .catalyst/web.token)",
        );
    };
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes && proof == Proof::Cookie && !same_origin(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this request comes from another site (its Origin is not this dashboard's)",
        );
    }
    request.extensions_mut().insert(proof);
    next.run(request).await
}

/// An answer that refuses, as plain text.
fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("catalyst: {why}\n"),
    )
        .into_response()
}

/// The `token` query parameter of `uri`.
fn query_token(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_owned)
}

/// `uri`'s path and query without its `token` parameter.
fn without_token(uri: &Uri) -> String {
    let rest: Vec<&str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("token="))
        .collect();
    if rest.is_empty() {
        uri.path().to_owned()
    } else {
        format!("{}?{}", uri.path(), rest.join("&"))
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Whether the request's `Origin` is the dashboard's own (`http://` and its `Host`). A
/// browser sends `Origin` with every POST; a request without one did not come from a page.
fn same_origin(headers: &HeaderMap) -> bool {
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    match (value(header::ORIGIN), value(header::HOST)) {
        (Some(origin), Some(host)) => origin == format!("http://{host}"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_taken_out_of_the_link() {
        let uri: Uri = "/beads/cat-1?token=abc&tab=diff".parse().expect("uri");
        assert_eq!(query_token(&uri).as_deref(), Some("abc"));
        assert_eq!(without_token(&uri), "/beads/cat-1?tab=diff");
        let bare: Uri = "/?token=abc".parse().expect("uri");
        assert_eq!(without_token(&bare), "/");
    }

    #[test]
    fn secrets_are_compared_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }

    #[test]
    fn the_token_file_is_private_and_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("web.token");
        let first = Secrets::create(&path).expect("token");
        let second = Secrets::create(&path).expect("token");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.trim(), second.token());
        assert_ne!(first.token(), second.token());
        assert_eq!(first.token().len(), 64);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_host_is_the_listening_address_localhost_or_a_configured_name() {
        let hosts = Hosts::new(
            "127.0.0.1:7400".parse().expect("addr"),
            &["Dash.example.com".to_owned()],
        );
        for ok in [
            "127.0.0.1:7400",
            "localhost:7400",
            "LOCALHOST:7400",
            "[::1]:7400",
            "dash.example.com:7400",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:7400",
            "127.0.0.1:7401",
            "localhost",
            "dash.example.com",
            "127.0.0.1.evil.example:7400",
            "",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
        let any = Hosts::new("0.0.0.0:80".parse().expect("addr"), &[]);
        assert!(any.allows("localhost"), "port 80 may go unsaid");
        assert!(!any.allows("0.0.0.0:80"), "nobody browses to the wildcard");
        assert!(!any.allows("10.1.2.3"));
    }

    #[test]
    fn the_origin_must_be_the_dashboards() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:7400".parse().expect("host"));
        assert!(!same_origin(&headers), "no Origin");
        headers.insert(
            header::ORIGIN,
            "http://evil.example".parse().expect("origin"),
        );
        assert!(!same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            "http://127.0.0.1:7400".parse().expect("origin"),
        );
        assert!(same_origin(&headers));
    }
}
