//! The control protocol's framing on a Unix socket, shared by the daemon's control socket and
//! the agents' per-attempt sockets: request lines of at most [`MAX_LINE`] bytes, where a line
//! too long or not UTF-8 is an item (answered with an error) rather than the end of the stream.

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
}

/// `LinesCodec` with [`MAX_LINE`], except that a line too long or not UTF-8 is an item, not
/// an error: `Framed` ends the stream after a decoder error (and does not decode lines already
/// buffered behind it until more bytes arrive), while a bad line must get an error reply and
/// leave the connection usable (docs/protocol.md#framing).
pub struct RequestLines(LinesCodec);

impl Default for RequestLines {
    fn default() -> RequestLines {
        RequestLines::new()
    }
}

impl RequestLines {
    pub fn new() -> RequestLines {
        RequestLines(LinesCodec::new_with_max_length(MAX_LINE))
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
        RequestLines::map(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, LinesCodecError> {
        RequestLines::map(self.0.decode_eof(buf))
    }
}

impl Encoder<String> for RequestLines {
    type Error = LinesCodecError;

    fn encode(&mut self, line: String, buf: &mut BytesMut) -> Result<(), LinesCodecError> {
        self.0.encode(line, buf)
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
