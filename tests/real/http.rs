//! A minimal HTTP/1.1 server on loopback for the mock model APIs: requests with a
//! `content-length` or chunked body, keep-alive, one handler answering each request whole.
//! Enough for the agent CLIs' HTTP clients, nothing more.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One request, its body parsed as JSON (`Null` when empty or not JSON).
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A whole answer: status, content type, extra headers and body.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: u16, body: &Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        }
    }

    /// Server-sent events, each `(event, data)`; `event` may be empty for data-only events.
    pub fn sse(events: &[(String, Value)]) -> Response {
        let mut body = String::new();
        for (event, data) in events {
            if !event.is_empty() {
                body.push_str(&format!("event: {event}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Response {
            status: 200,
            content_type: "text/event-stream",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Serves `handler` on `127.0.0.1` at a free port until the runtime ends; returns the address.
pub async fn serve(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let _ = connection(stream, handler).await;
            });
        }
    });
    addr
}

async fn connection(stream: TcpStream, handler: Handler) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if read.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                read.read_line(&mut size).await?;
                let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                    .unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                read.read_exact(&mut chunk).await?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(len) = find("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(len, 0);
            read.read_exact(&mut body).await?;
        }
        let request = Request {
            method,
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        let response = handler(&request);
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n",
            response.status,
            if response.status < 400 { "OK" } else { "Error" },
            response.content_type,
            response.body.len()
        );
        for (k, v) in &response.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        write.write_all(head.as_bytes()).await?;
        write.write_all(&response.body).await?;
        write.flush().await?;
    }
}
