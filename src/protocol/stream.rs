//! The lines that follow the answer to `subscribe` and `logs`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::domain::event::Event;

/// `subscribe`: the stream starts after `since`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Subscribed {
    pub since: u64,
    pub subscribed: bool,
}

/// One line of an event stream: a journal event, or the end of a replay without `follow`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StreamLine {
    End(StreamEnd),
    Event(Box<Event>),
}

/// `{"seq":N,"type":"end"}`: the replay sent every event up to `seq`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamEnd {
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: EndTag,
}

impl StreamEnd {
    pub fn new(seq: u64) -> StreamEnd {
        StreamEnd {
            seq,
            kind: EndTag::End,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndTag {
    #[serde(rename = "end")]
    End,
}

/// `logs`: the file the output is read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogsOpened {
    pub file: PathBuf,
}

/// One line after the answer to `logs`: a piece of the output, or its end (without `follow`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LogLine {
    Data(LogData),
    End(LogEnd),
}

/// `{"data":"…","type":"log"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogData {
    pub data: String,
    #[serde(rename = "type")]
    pub kind: LogTag,
}

impl LogData {
    pub fn new(data: String) -> LogData {
        LogData {
            data,
            kind: LogTag::Log,
        }
    }
}

/// `{"type":"log.end"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEnd {
    #[serde(rename = "type")]
    pub kind: LogEndTag,
}

impl Default for LogEnd {
    fn default() -> Self {
        LogEnd {
            kind: LogEndTag::End,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogTag {
    #[serde(rename = "log")]
    Log,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogEndTag {
    #[serde(rename = "log.end")]
    End,
}
