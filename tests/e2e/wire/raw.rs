//! A raw connection to the daemon that records each line as sent, and the log that masks
//! what changes from run to run.

use std::path::Path;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use catalyst_testkit::TIMEOUT;

/// Keys whose values change from run to run.
const VOLATILE: [&str; 21] = [
    "stdout_bytes",
    "journal_syncs",
    "stderr_bytes",
    "ts",
    "started",
    "base",
    "data",
    "created_at",
    "updated_at",
    "closed_at",
    "started_at",
    "dispatched_at",
    "elapsed_ms",
    "duration_ms",
    "pid",
    "version",
    "commit",
    "from",
    "to",
    "session_id",
    "store",
];

/// One raw connection: lines exactly as the daemon sent them.
pub struct Raw {
    lines: Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl Raw {
    pub async fn connect(socket: &Path, log: &mut Log) -> Raw {
        let stream = UnixStream::connect(socket).await.expect("connect");
        let (read, writer) = stream.into_split();
        let mut raw = Raw {
            lines: BufReader::new(read).lines(),
            writer,
        };
        let hello = raw.line().await.expect("hello");
        log.push(format!("< {hello}"));
        raw
    }

    pub async fn line(&mut self) -> Option<String> {
        tokio::time::timeout(TIMEOUT, self.lines.next_line())
            .await
            .expect("an answer in time")
            .expect("read a line")
    }

    pub async fn send(&mut self, line: &str, log: &mut Log) {
        log.push(format!("> {line}"));
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("send");
    }

    /// Sends `line` and logs the next `n` lines of the answer.
    pub async fn ask(&mut self, line: &str, n: usize, log: &mut Log) {
        self.send(line, log).await;
        for _ in 0..n {
            let answer = self.line().await.expect("an answer line");
            log.push(format!("< {answer}"));
        }
    }

    /// Sends `line` and logs every line until the daemon closes the connection.
    pub async fn ask_all(&mut self, line: &str, log: &mut Log) {
        self.send(line, log).await;
        while let Some(answer) = self.line().await {
            log.push(format!("< {answer}"));
        }
    }
}

/// What the test saw, masked as it is recorded.
pub struct Log {
    pub root: String,
    pub lines: Vec<String>,
}

impl Log {
    pub fn push(&mut self, line: String) {
        let line = line.replace(&self.root, "<root>");
        let mut line = mask_keys(&line);
        if !line.starts_with('<') && !line.starts_with('>') {
            line = mask_text(&line);
        }
        self.lines.push(line);
    }

    pub fn section(&mut self, title: &str) {
        self.lines.push(String::new());
        self.lines.push(format!("## {title}"));
    }
}

/// The end of the JSON value that starts at `start`.
fn value_end(s: &[u8], start: usize) -> usize {
    let (mut depth, mut in_str, mut escaped) = (0i32, false, false);
    let mut i = start;
    while i < s.len() {
        let c = s[i];
        if in_str {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_str = false;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return i,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' if depth == 0 => return i,
                _ => {}
            }
        }
        i += 1;
    }
    s.len()
}

/// Replaces the values of [`VOLATILE`] keys (but `null`) with `"<key>"`.
fn mask_keys(line: &str) -> String {
    let mut out = line.to_owned();
    for key in VOLATILE {
        let needle = format!("\"{key}\":");
        let mut from = 0;
        while let Some(at) = out[from..].find(&needle) {
            let start = from + at + needle.len();
            let end = value_end(out.as_bytes(), start);
            let value = &out[start..end];
            if value == "null" || value.starts_with("\"<") {
                from = end;
                continue;
            }
            let masked = format!("\"<{key}>\"");
            out.replace_range(start..end, &masked);
            from = start + masked.len();
        }
    }
    out
}

/// Masks what changes in text for people: dates, times, durations, pids and commit hashes.
fn mask_text(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let bare = word.trim_matches(|c: char| "`(),:".contains(c));
        let previous = if i > 0 { words[i - 1] } else { "" };
        let next = words.get(i + 1).copied().unwrap_or("");
        // A short commit id may be all digits: beside `->` (a merge's `from -> to`) it is one.
        let hex = bare.len() >= 7
            && bare.chars().all(|c| c.is_ascii_hexdigit())
            && (bare.chars().any(|c| c.is_ascii_alphabetic()) || previous == "->" || next == "->");
        let digits = !bare.is_empty() && bare.chars().all(|c| c.is_ascii_digit());
        let clock = bare.len() >= 8
            && bare.as_bytes()[bare.len() - 3] == b':'
            && bare.bytes().filter(|b| *b == b':').count() >= 2
            && bare.bytes().any(|b| b.is_ascii_digit());
        let date = bare.len() == 10
            && bare.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        let masked = if hex {
            word.replace(bare, "<sha>")
        } else if date {
            word.replace(bare, "<date>")
        } else if clock {
            word.replace(bare, "<time>")
        } else if digits && previous == "(pid" {
            word.replace(bare, "<pid>")
        } else if digits && next.starts_with("ms") {
            word.replace(bare, "<ms>")
        } else {
            (*word).to_owned()
        };
        out.push(masked);
    }
    out.join(" ")
}
