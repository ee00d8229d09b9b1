//! A bead's run files in the browser: each attempt's prompt, context, output and records as
//! plain text (`GET /beads/<id>/runs/<step>/<attempt>/<file>`), and the running attempt's
//! output as it is written (`GET /beads/<id>/output`, Server-Sent Events).

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::daemon::agent::{PROMPT_FILE, STDERR_FILE, STDOUT_FILE};
use crate::domain::context::{CONTEXT_JSON, CONTEXT_MD};
use crate::protocol::ShowAnswer;

use super::bead::show;
use super::Shared;

/// The files of a run folder the dashboard serves; a gate's commands have their `stdout` and
/// `stderr` in `command-<n>/`.
const RUN_FILES: [&str; 9] = [
    PROMPT_FILE,
    CONTEXT_MD,
    CONTEXT_JSON,
    STDOUT_FILE,
    STDERR_FILE,
    "report.json",
    "result.json",
    "settings.json",
    "base",
];

/// How a run file is served: as text, never run or sniffed as anything else.
const TEXT_HEADERS: [(header::HeaderName, &str); 4] = [
    (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::CONTENT_SECURITY_POLICY, "sandbox; default-src 'none'"),
    (header::CACHE_CONTROL, "no-cache"),
];

/// Whether `file` names a run file: one of [`RUN_FILES`], or `command-<n>/stdout|stderr`.
fn is_run_file(file: &str) -> bool {
    match file.split_once('/') {
        None => RUN_FILES.contains(&file),
        Some((dir, name)) => {
            dir.strip_prefix("command-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && (name == STDOUT_FILE || name == STDERR_FILE)
        }
    }
}

/// The folder of attempt `attempt` of the step named `step` of the bead `show`, if the bead
/// has that step and the step that attempt.
fn run_dir(shared: &Shared, show: &ShowAnswer, step: &str, attempt: u32) -> Option<PathBuf> {
    let detail = show
        .steps
        .iter()
        .filter_map(|s| s.detail.as_ref())
        .find(|d| d.step == step)?;
    (1..=detail.attempts)
        .contains(&attempt)
        .then(|| shared.paths.run_dir(&show.id, step, attempt))
}

/// `GET /beads/<id>/runs/<step>/<attempt>/<file>`: one file of an attempt's run folder, as
/// plain text.
pub async fn file(
    State(shared): State<Shared>,
    Path((id, step, attempt, file)): Path<(String, String, u32, String)>,
) -> Response {
    if !is_run_file(&file) {
        return (StatusCode::NOT_FOUND, "catalyst: no such run file\n").into_response();
    }
    let show = match show(&shared, id).await {
        Ok(show) => show,
        Err(refused) => return refused,
    };
    let Some(dir) = run_dir(&shared, &show, &step, attempt) else {
        let message = format!("catalyst: `{}` has no attempt {attempt} of a step `{step}`\n", show.id);
        return (StatusCode::NOT_FOUND, message).into_response();
    };
    match tokio::fs::File::open(dir.join(&file)).await {
        Ok(f) => (
            TEXT_HEADERS,
            Body::from_stream(tokio_util::io::ReaderStream::new(f)),
        )
            .into_response(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
            StatusCode::NOT_FOUND,
            format!("catalyst: attempt {attempt} of `{step}` has no `{file}`\n"),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("catalyst: cannot read `{file}`: {e}\n"),
        )
            .into_response(),
    }
}

/// How often the running attempt's output is looked at, and how often the engine is asked
/// whether that attempt still runs.
const POLL: Duration = Duration::from_millis(200);
const STILL_RUNS_EVERY: u32 = 10;

/// At most this much of what the attempt wrote before the page asked is sent first.
const BACKLOG: u64 = 64 * 1024;

/// `GET /beads/<id>/output`: the standard output of the bead's running attempt as it is
/// written, line by line, as `output` events (each line a `data:` line); then an `end` event
/// when the attempt ends (or when nothing runs), after which the page closes the stream.
pub async fn output(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let show = match show(&shared, id).await {
        Ok(show) => show,
        Err(refused) => return refused,
    };
    let running = show.running.as_ref().and_then(|r| {
        let step = show.steps.iter().find(|s| s.id == r.step)?;
        let name = &step.detail.as_ref()?.step;
        Some((r.step.clone(), r.attempt, shared.paths.run_dir(&show.id, name, r.attempt)))
    });
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    let Some((step, attempt, dir)) = running else {
        return (headers, "event: end\ndata: nothing runs\n\n").into_response();
    };
    let tail = Tail {
        shared,
        bead: show.id.to_string(),
        step,
        attempt,
        path: dir.join(STDOUT_FILE),
        offset: None,
        partial: Vec::new(),
        polls: 0,
        ended: false,
    };
    let stream = futures::stream::unfold(tail, |mut tail| async move {
        let chunk = tail.next().await?;
        Some((Ok::<_, Infallible>(chunk), tail))
    });
    (headers, Body::from_stream(stream)).into_response()
}

/// Follows one attempt's output file.
struct Tail {
    shared: Shared,
    bead: String,
    step: crate::domain::id::BeadId,
    attempt: u32,
    path: PathBuf,
    /// Where the next read starts; `None` before the first.
    offset: Option<u64>,
    /// The end of what was read that is not a whole line yet.
    partial: Vec<u8>,
    polls: u32,
    ended: bool,
}

impl Tail {
    /// The next piece of the stream: new whole lines, a keep-alive, or the end.
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        loop {
            let read = self.read().await;
            if !read.is_empty() {
                return Some(Bytes::from(read));
            }
            self.polls += 1;
            if self.polls.is_multiple_of(STILL_RUNS_EVERY) && !self.still_runs().await {
                self.ended = true;
                let mut last = String::new();
                if !self.partial.is_empty() {
                    let line = std::mem::take(&mut self.partial);
                    push_lines(&mut last, &String::from_utf8_lossy(&line));
                }
                last.push_str("event: end\ndata: the attempt ended\n\n");
                return Some(Bytes::from(last));
            }
            if self.polls.is_multiple_of(75) {
                return Some(Bytes::from_static(b": keep-alive\n\n"));
            }
            tokio::select! {
                () = self.shared.shutdown.cancelled() => return None,
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// The whole lines written since the last read, as `output` events.
    async fn read(&mut self) -> String {
        let Ok(mut file) = tokio::fs::File::open(&self.path).await else {
            return String::new();
        };
        let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
        let from = *self
            .offset
            .get_or_insert_with(|| len.saturating_sub(BACKLOG));
        if len <= from || file.seek(std::io::SeekFrom::Start(from)).await.is_err() {
            return String::new();
        }
        let mut bytes = Vec::new();
        if file.take(len - from).read_to_end(&mut bytes).await.is_err() {
            return String::new();
        }
        self.offset = Some(from + bytes.len() as u64);
        self.partial.extend_from_slice(&bytes);
        let Some(cut) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return String::new();
        };
        let rest = self.partial.split_off(cut + 1);
        let whole = std::mem::replace(&mut self.partial, rest);
        let mut out = String::new();
        push_lines(&mut out, &String::from_utf8_lossy(&whole));
        out
    }

    /// Whether the engine still runs this attempt.
    async fn still_runs(&self) -> bool {
        match show(&self.shared, self.bead.clone()).await {
            Ok(show) => show
                .running
                .is_some_and(|r| r.step == self.step && r.attempt == self.attempt),
            Err(_) => false,
        }
    }
}

/// One `output` event with a `data:` line per line of `text` (a `\r` dropped: SSE would read
/// it as a line break).
fn push_lines(out: &mut String, text: &str) {
    out.push_str("event: output\n");
    for line in text.strip_suffix('\n').unwrap_or(text).split('\n') {
        out.push_str("data: ");
        out.push_str(&line.replace('\r', ""));
        out.push('\n');
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_run_files_are_served() {
        for ok in ["prompt.md", "stdout", "result.json", "command-2/stderr"] {
            assert!(is_run_file(ok), "{ok}");
        }
        for refused in [
            "../journal.jsonl",
            "command-/stdout",
            "command-1/../../x",
            "command-1/result.json",
            "x/stdout",
            "",
        ] {
            assert!(!is_run_file(refused), "{refused}");
        }
    }

    #[test]
    fn each_line_is_a_data_line_of_one_event() {
        let mut out = String::new();
        push_lines(&mut out, "one\r\ntwo <script>\n");
        assert_eq!(out, "event: output\ndata: one\ndata: two <script>\n\n");
    }
}
