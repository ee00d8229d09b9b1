//! The control protocol's framing on a Unix socket, shared by the daemon's control socket and
//! the agents' per-attempt sockets: request lines of at most [`MAX_LINE`] bytes, where a line
//! too long or not UTF-8 is an item (answered with an error) rather than the end of the stream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::SinkExt;
use tokio::net::UnixStream;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder, Framed, LinesCodec, LinesCodecError};

use crate::protocol::MAX_LINE;

pub type Conn = Framed<UnixStream, RequestLines>;

/// One line read from a client: a request line, or a line that cannot be one.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Longer than [`MAX_LINE`]; its bytes were dropped up to its newline.
    TooLong,
    NotUtf8,
    /// The connections together hold [`MAX_BUFFERED`] bytes of unfinished lines: this
    /// connection's were dropped, and it is to be closed.
    OverBudget,
}

/// The most the daemon holds for unfinished request lines across all its connections (each
/// holds at most [`MAX_LINE`] of its own): a hundred clients each sending most of a line
/// cannot make it grow by a hundred times that. Counted as the buffers' capacity; the
/// allocator holds about twice as much for buffers grown by doubling.
pub const MAX_BUFFERED: usize = 8 << 20;

/// A connection's buffer above this is given back once it is empty again (a long request
/// line must not keep its memory for the life of the connection).
const KEEP_CAPACITY: usize = 64 << 10;

/// The bytes connections hold for unfinished lines, counted against a cap.
#[derive(Debug)]
pub struct Buffered {
    used: AtomicUsize,
    cap: usize,
}

impl Buffered {
    pub fn new(cap: usize) -> Arc<Buffered> {
        Arc::new(Buffered {
            used: AtomicUsize::new(0),
            cap,
        })
    }

    /// The budget every socket of the daemon shares.
    pub fn process() -> Arc<Buffered> {
        static PROCESS: std::sync::OnceLock<Arc<Buffered>> = std::sync::OnceLock::new();
        PROCESS.get_or_init(|| Buffered::new(MAX_BUFFERED)).clone()
    }

    /// The bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}

/// `LinesCodec` with [`MAX_LINE`], except that a line too long or not UTF-8 is an item, not
/// an error: `Framed` ends the stream after a decoder error (and does not decode lines already
/// buffered behind it until more bytes arrive), while a bad line must get an error reply and
/// leave the connection usable (docs/protocol.md#framing).
/// Each connection's buffer counts against a [`Buffered`] budget shared with the others.
pub struct RequestLines {
    lines: LinesCodec,
    budget: Arc<Buffered>,
    /// What this connection's buffer counts for in the budget.
    held: usize,
}

impl Default for RequestLines {
    fn default() -> RequestLines {
        RequestLines::new()
    }
}

impl RequestLines {
    /// Lines counted against the daemon's budget ([`Buffered::process`]).
    pub fn new() -> RequestLines {
        RequestLines::with_budget(Buffered::process())
    }

    pub fn with_budget(budget: Arc<Buffered>) -> RequestLines {
        RequestLines {
            lines: LinesCodec::new_with_max_length(MAX_LINE),
            budget,
            held: 0,
        }
    }

    /// Counts the buffer as it is now; gives back a large buffer that is empty, and drops the
    /// bytes of one that takes the budget over its cap (returning false).
    fn account(&mut self, buf: &mut BytesMut) -> bool {
        if buf.is_empty() && buf.capacity() > KEEP_CAPACITY {
            *buf = BytesMut::new();
        }
        let now = buf.capacity();
        let total = if now >= self.held {
            self.budget
                .used
                .fetch_add(now - self.held, Ordering::SeqCst)
                + now
                - self.held
        } else {
            self.budget
                .used
                .fetch_sub(self.held - now, Ordering::SeqCst)
                - (self.held - now)
        };
        self.held = now;
        if total <= self.budget.cap || now <= KEEP_CAPACITY {
            return true;
        }
        *buf = BytesMut::new();
        self.budget.used.fetch_sub(self.held, Ordering::SeqCst);
        self.held = 0;
        false
    }

    fn map(
        decoded: Result<Option<String>, LinesCodecError>,
    ) -> Result<Option<Line>, LinesCodecError> {
        match decoded {
            Ok(line) => Ok(line.map(Line::Text)),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
            Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                Ok(Some(Line::NotUtf8))
            }
            Err(e) => Err(e),
        }
    }
}

impl Decoder for RequestLines {
    type Item = Line;
    type Error = LinesCodecError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, LinesCodecError> {
        let line = RequestLines::map(self.lines.decode(buf));
        if !self.account(buf) {
            return Ok(Some(Line::OverBudget));
        }
        line
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, LinesCodecError> {
        let line = RequestLines::map(self.lines.decode_eof(buf));
        self.account(buf);
        line
    }
}

impl Drop for RequestLines {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::SeqCst);
    }
}

impl Encoder<String> for RequestLines {
    type Error = LinesCodecError;

    fn encode(&mut self, line: String, buf: &mut BytesMut) -> Result<(), LinesCodecError> {
        self.lines.encode(line, buf)
    }
}

pub async fn send(conn: &mut Conn, value: &impl serde::Serialize) -> std::io::Result<()> {
    let line = serde_json::to_string(value).map_err(std::io::Error::other)?;
    conn.send(line).await.map_err(codec_io)
}

pub fn codec_io(e: LinesCodecError) -> std::io::Error {
    match e {
        LinesCodecError::Io(e) => e,
        LinesCodecError::MaxLineLengthExceeded => std::io::Error::other("line too long"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(kib: usize) -> BytesMut {
        BytesMut::from(vec![b'x'; kib << 10].as_slice())
    }

    #[test]
    fn unfinished_lines_count_against_one_budget_for_all_connections() {
        let budget = Buffered::new(2 << 20);
        let (mut a, mut b, mut c) = (
            RequestLines::with_budget(budget.clone()),
            RequestLines::with_budget(budget.clone()),
            RequestLines::with_budget(budget.clone()),
        );
        let (mut buf_a, mut buf_b, mut buf_c) = (partial(900), partial(900), partial(900));
        assert_eq!(a.decode(&mut buf_a).unwrap(), None);
        assert_eq!(b.decode(&mut buf_b).unwrap(), None);
        assert_eq!(budget.used(), 1800 << 10);
        // The third takes the total over the cap: its bytes go, and it is told so.
        assert_eq!(c.decode(&mut buf_c).unwrap(), Some(Line::OverBudget));
        assert!(buf_c.is_empty());
        assert_eq!(budget.used(), 1800 << 10);
        // A connection that ends gives its share back.
        drop(a);
        assert_eq!(budget.used(), 900 << 10);
        // A line finished: the big buffer it needed is given back too.
        buf_b.extend_from_slice(b"\n");
        assert!(matches!(b.decode(&mut buf_b).unwrap(), Some(Line::Text(_))));
        assert_eq!((buf_b.capacity(), budget.used()), (0, 0));
    }
}
