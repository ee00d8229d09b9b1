//! `ctl logs BEAD|STEP [--attempt N] [-f] [--raw] [--stderr]`: what an agent did, for people.
//!
//! Each attempt is headed by which step, attempt and model it was, and read through
//! [`Transcript`]: the agent's messages, its tool calls and their results, and how the run
//! ended as the daemon read it. `--raw` prints the output as the agent wrote it; `--stderr`
//! prints the agent's stderr as text. A bead stands for its running step, else the step that
//! ran last.
//!
//! With `-f` the attempt is followed as it runs (the daemon ends the stream once the attempt
//! is over), then the next attempt of the step (or, for a bead, of any of its steps) as soon
//! as it is dispatched, until the bead is closed. Dispatches are read from a subscription
//! opened before the attempts are looked up, so none is missed in between.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::cli::client::{Client, ClientError};
use crate::cli::error::CtlError;
use crate::domain::event::{Event, EventBody};
use crate::domain::id::BeadId;
use crate::domain::model::{Role, Status};
use crate::protocol::{
    ErrorCode, LogLine, LogsParams, ShowAnswer, ShowParams, StreamLine, SubscribeParams,
};
use crate::render::logs::TranscriptView;
use crate::render::render_attempt_header;
use crate::render::style::{Paint, DIM};

/// What `ctl logs` was asked.
#[derive(Clone, Debug)]
pub struct LogsRequest {
    /// A bead or a step.
    pub target: String,
    pub attempt: Option<u32>,
    pub stderr: bool,
    pub raw: bool,
    pub follow: bool,
}

impl LogsRequest {
    fn stream(&self) -> &'static str {
        if self.stderr {
            "stderr"
        } else {
            "stdout"
        }
    }
}

/// One attempt of a step.
#[derive(Clone, Debug, PartialEq)]
struct Attempt {
    step: BeadId,
    attempt: u32,
    /// `None` for a gate.
    model: Option<String>,
}

/// Prints what `req` asks for; `client` is connected to the daemon at `socket`, where the
/// streams that follow attempts connect too.
pub async fn run(
    mut client: Client,
    socket: &Path,
    req: LogsRequest,
    out: &mut impl Write,
) -> Result<(), CtlError> {
    let named = client.show(show_params(&req.target, false)).await?;
    let (work, step) = match named.bead.step_meta() {
        Some(meta) => (meta.bead, Some(named.id.clone())),
        None => (named.id.clone(), None),
    };
    let mut dispatches = if req.follow {
        Some(Dispatches::subscribe(socket, &work).await?)
    } else {
        None
    };
    let show = client.show(show_params(work.as_str(), true)).await?;
    if show.status.is_closed() {
        // Nothing of it runs any more: following would wait forever.
        dispatches = None;
    }
    let mut seen = attempts_seen(&show);
    let mut next = chosen(&show, step.as_ref(), req.attempt)?;
    if next.is_none() && dispatches.is_none() {
        return Err(CtlError::Refused(match &step {
            Some(step) => format!("`{step}` has not run yet"),
            None => format!("`{work}` has not run any step yet"),
        }));
    }
    let paint = Paint::for_stdout();
    // Whether the attempt to show is running: then it is followed (with `-f`), or said to be
    // still running. One that ended is read as it is.
    let mut live = next.as_ref().is_some_and(|a| {
        show.running
            .as_ref()
            .is_some_and(|r| r.step == a.step && r.attempt == a.attempt)
    });
    loop {
        if let Some(attempt) = next.take() {
            if !req.raw {
                let header = render_attempt_header(
                    attempt.step.as_str(),
                    attempt.attempt,
                    attempt.model.as_deref(),
                    paint,
                );
                out.write_all(header.as_bytes())?;
            }
            let mut view = View::new(&req, paint);
            if attempt.model.is_none() {
                // A gate's output is its commands' text, each headed by its command line.
                view.lines = TranscriptView::new(true, paint);
                if !read_whole(&mut client, &attempt, &req, &mut view, out).await? {
                    view.note("no output", out)?;
                }
                view.finish(live, out)?;
            } else if let (true, Some(d)) = (live, dispatches.as_mut()) {
                follow_attempt(socket, &mut client, &attempt, &req, d, &mut view, out).await?;
            } else {
                if !read_whole(&mut client, &attempt, &req, &mut view, out).await? {
                    view.note("no output", out)?;
                }
                view.finish(live, out)?;
            }
            out.flush()?;
        }
        let Some(d) = dispatches.as_mut() else {
            return Ok(());
        };
        match d.next_dispatch(step.as_ref(), &mut seen).await? {
            Some(attempt) => {
                next = Some(attempt);
                live = true;
            }
            None => return Ok(()),
        }
    }
}

fn show_params(id: &str, runs: bool) -> ShowParams {
    ShowParams {
        id: id.to_owned(),
        runs,
    }
}

/// The highest attempt of each step so far: a dispatch at or below it was seen already.
fn attempts_seen(show: &ShowAnswer) -> HashMap<BeadId, u32> {
    show.steps
        .iter()
        .filter_map(|s| Some((s.id.clone(), s.detail.as_ref()?.attempts)))
        .collect()
}

/// The attempt to show: `attempt` (else the latest) of `step`, or for the bead its running
/// step, else the step dispatched last. `None` when that step has not run.
fn chosen(
    show: &ShowAnswer,
    step: Option<&BeadId>,
    attempt: Option<u32>,
) -> Result<Option<Attempt>, CtlError> {
    let last_dispatched = || {
        show.steps
            .iter()
            .filter_map(|s| {
                let runs = s.detail.as_ref()?.runs.as_ref()?;
                let at = runs.iter().filter_map(|r| r.dispatched_at).max()?;
                Some((at, &s.id))
            })
            .max()
            .map(|(_, id)| id.clone())
    };
    let step = match step {
        Some(step) => Some(step.clone()),
        None => show
            .running
            .as_ref()
            .map(|r| r.step.clone())
            .or_else(last_dispatched),
    };
    let Some(view) = step.and_then(|id| show.steps.iter().find(|s| s.id == id)) else {
        return Ok(None);
    };
    let Some(detail) = &view.detail else {
        return Ok(None);
    };
    let n = attempt.unwrap_or(detail.attempts);
    if n == 0 {
        return Ok(None);
    }
    if n > detail.attempts {
        return Err(CtlError::Refused(format!(
            "`{}` has no attempt {n} (it ran {} times)",
            view.id, detail.attempts
        )));
    }
    let recorded = detail
        .runs
        .iter()
        .flatten()
        .find(|r| r.attempt == n)
        .and_then(|r| r.model.clone());
    // The model the attempt was dispatched with, else the step's; a gate has none.
    let model = match detail.role {
        Role::Gate => None,
        _ => Some(
            recorded
                .flatten()
                .or_else(|| detail.model.clone())
                .unwrap_or_else(|| "-".into()),
        ),
    };
    Ok(Some(Attempt {
        step: view.id.clone(),
        attempt: n,
        model,
    }))
}

/// Reads an attempt's output as it is now; `false` when it has none.
async fn read_whole(
    client: &mut Client,
    attempt: &Attempt,
    req: &LogsRequest,
    view: &mut View,
    out: &mut impl Write,
) -> Result<bool, CtlError> {
    let params = LogsParams {
        step: attempt.step.to_string(),
        attempt: Some(attempt.attempt),
        stream: Some(req.stream().into()),
        follow: false,
    };
    match client.logs(params).await {
        Ok(_) => {}
        Err(ClientError::Rpc(e)) if e.code == ErrorCode::NotFound => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    while let Some(LogLine::Data(d)) = client.next_log().await? {
        view.feed(&d.data, out)?;
    }
    Ok(true)
}

/// What the log task passes on.
enum Piece {
    Opened,
    Data(String),
}

/// Follows one attempt to its end. If the attempt ends before it printed anything (it failed
/// before its agent started), what there is, if anything, is read once.
async fn follow_attempt(
    socket: &Path,
    client: &mut Client,
    attempt: &Attempt,
    req: &LogsRequest,
    dispatches: &mut Dispatches,
    view: &mut View,
    out: &mut impl Write,
) -> Result<(), CtlError> {
    let params = LogsParams {
        step: attempt.step.to_string(),
        attempt: Some(attempt.attempt),
        stream: Some(req.stream().into()),
        follow: true,
    };
    let (tx, mut pieces) = mpsc::unbounded_channel();
    let reader = AbortOnDropHandle::new(tokio::spawn(read_log(socket.to_owned(), params, tx)));
    let mut opened = false;
    loop {
        tokio::select! {
            piece = pieces.recv() => match piece {
                Some(Ok(Piece::Opened)) => opened = true,
                Some(Ok(Piece::Data(data))) => view.feed(&data, out)?,
                Some(Err(e)) => return Err(e),
                // The attempt is over (or the daemon stopped).
                None => return view.finish(false, out),
            },
            exit = dispatches.finished(attempt), if !opened => {
                drop(reader);
                let exit = exit?;
                if !read_whole(client, attempt, req, view, out).await? {
                    view.note(&format!("no output: {exit}"), out)?;
                }
                return view.finish(false, out);
            }
        }
    }
}

/// Reads a followed attempt's output into `tx` until its end; the channel closes then.
async fn read_log(
    socket: PathBuf,
    params: LogsParams,
    tx: mpsc::UnboundedSender<Result<Piece, CtlError>>,
) {
    let read = async {
        let mut client = Client::connect(&socket).await?;
        client.logs(params).await?;
        tx.send(Ok(Piece::Opened)).ok();
        while let Some(LogLine::Data(d)) = client.next_log().await? {
            if tx.send(Ok(Piece::Data(d.data))).is_err() {
                break;
            }
        }
        Ok::<(), CtlError>(())
    };
    if let Err(e) = read.await {
        tx.send(Err(e)).ok();
    }
}

/// The bead's dispatches, finished attempts and end, from a subscription read by a task of
/// its own into a channel, so that it can be waited on beside an attempt's output.
struct Dispatches {
    work: BeadId,
    events: mpsc::UnboundedReceiver<Result<Event, CtlError>>,
    /// Events read while waiting for something else, in order.
    held: VecDeque<Event>,
    _reader: AbortOnDropHandle<()>,
}

impl Dispatches {
    async fn subscribe(socket: &Path, work: &BeadId) -> Result<Dispatches, CtlError> {
        let mut client = Client::connect(socket).await?;
        let types = ["step.dispatched", "step.finished", "bead.status"];
        client
            .subscribe(SubscribeParams {
                since: None,
                bead: Some(work.to_string()),
                types: Some(types.iter().map(|t| (*t).to_owned()).collect()),
                follow: true,
            })
            .await?;
        let (tx, events) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            loop {
                let event = match client.next_event().await {
                    Ok(Some(StreamLine::Event(e))) => Ok(*e),
                    Ok(Some(StreamLine::End(_)) | None) => return,
                    Err(e) => Err(e.into()),
                };
                let failed = event.is_err();
                if tx.send(event).is_err() || failed {
                    return;
                }
            }
        });
        Ok(Dispatches {
            work: work.clone(),
            events,
            held: VecDeque::new(),
            _reader: AbortOnDropHandle::new(reader),
        })
    }

    /// Waits for `attempt`'s end and returns how its process ended; other events are held for
    /// [`Dispatches::next_dispatch`]. Never returns once the subscription is over. Safe to
    /// cancel: an event is held as soon as it is read.
    async fn finished(&mut self, attempt: &Attempt) -> Result<String, CtlError> {
        loop {
            let Some(event) = self.events.recv().await else {
                return std::future::pending().await;
            };
            let event = event?;
            if let EventBody::StepFinished {
                step,
                attempt: n,
                exit,
                ..
            } = &event.body
            {
                if *step == attempt.step && *n == attempt.attempt {
                    return Ok(exit.clone());
                }
            }
            self.held.push_back(event);
        }
    }

    /// The next attempt dispatched (of `step`, or of any step of the bead) that was not seen
    /// yet; `None` once the bead is closed or the subscription is over.
    async fn next_dispatch(
        &mut self,
        step: Option<&BeadId>,
        seen: &mut HashMap<BeadId, u32>,
    ) -> Result<Option<Attempt>, CtlError> {
        loop {
            let event = match self.held.pop_front() {
                Some(event) => event,
                None => match self.events.recv().await {
                    Some(event) => event?,
                    None => return Ok(None),
                },
            };
            match event.body {
                EventBody::StepDispatched {
                    step: dispatched,
                    attempt,
                    model,
                    ..
                } if step.is_none_or(|s| *s == dispatched) => {
                    let known = seen.entry(dispatched.clone()).or_insert(0);
                    if attempt > *known {
                        *known = attempt;
                        return Ok(Some(Attempt {
                            step: dispatched,
                            attempt,
                            model,
                        }));
                    }
                }
                EventBody::BeadStatus {
                    id,
                    status: Status::Closed,
                    ..
                } if id == self.work => return Ok(None),
                _ => {}
            }
        }
    }
}

/// One attempt's output on its way to the screen: read as a transcript (or passed through
/// for `--raw`, and as text for `--stderr`).
struct View {
    raw: bool,
    paint: Paint,
    lines: TranscriptView,
}

impl View {
    fn new(req: &LogsRequest, paint: Paint) -> View {
        View {
            raw: req.raw,
            paint,
            lines: TranscriptView::new(req.stderr, paint),
        }
    }

    fn feed(&mut self, data: &str, out: &mut impl Write) -> Result<(), CtlError> {
        if self.raw {
            out.write_all(data.as_bytes())?;
        } else {
            out.write_all(self.lines.feed(data).as_bytes())?;
        }
        out.flush()?;
        Ok(())
    }

    fn note(&self, text: &str, out: &mut impl Write) -> Result<(), CtlError> {
        if self.raw {
            return Ok(());
        }
        writeln!(out, "{}", self.paint.paint(DIM, &format!("({text})")))?;
        Ok(())
    }

    /// The end of the output: a last line without its newline, then how the run ended when
    /// the output did not say (`still_running`: it has not ended yet).
    fn finish(&mut self, still_running: bool, out: &mut impl Write) -> Result<(), CtlError> {
        if self.raw {
            return Ok(());
        }
        out.write_all(self.lines.finish(!still_running).as_bytes())?;
        if still_running && !self.lines.is_plain() {
            return self.note("still running: `-f` follows it", out);
        }
        Ok(())
    }
}
