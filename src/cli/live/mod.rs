//! `catalyst ctl watch`: a live view of the daemon in the terminal.
//!
//! The screen is a [`Board`] folded from the event stream (`subscribe`) on top of one `status`
//! and two `list` answers; nothing asks the daemon again. A 1 s timer only redraws, so that
//! elapsed times move. The terminal is put in raw mode on the alternate screen and restored
//! by a guard, whichever way the view ends (q, Esc, Ctrl-C, SIGTERM, the daemon going away,
//! an error or a panic).

mod board;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, queue, terminal};
use futures::StreamExt;

pub use board::Board;

use crate::cli::client::{Client, ClientError};
use crate::protocol::{ListParams, StreamLine, SubscribeParams};

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("`ctl watch` needs a terminal; use `ctl events -f` in scripts")]
    NotATerminal,
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

/// Puts the terminal back as it was when dropped.
struct Screen<'a, W: Write> {
    out: &'a mut W,
}

impl<'a, W: Write> Screen<'a, W> {
    fn enter(out: &'a mut W) -> std::io::Result<Screen<'a, W>> {
        terminal::enable_raw_mode()?;
        let screen = Screen { out };
        execute!(screen.out, terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }

    fn draw(&mut self, lines: &[String]) -> std::io::Result<()> {
        queue!(self.out, cursor::MoveTo(0, 0))?;
        for (i, line) in lines.iter().enumerate() {
            let row = u16::try_from(i).unwrap_or(u16::MAX);
            queue!(
                self.out,
                cursor::MoveTo(0, row),
                crossterm::style::Print(line),
                terminal::Clear(terminal::ClearType::UntilNewLine)
            )?;
        }
        let below = u16::try_from(lines.len()).unwrap_or(u16::MAX);
        queue!(
            self.out,
            cursor::MoveTo(0, below),
            terminal::Clear(terminal::ClearType::FromCursorDown)
        )?;
        self.out.flush()
    }
}

impl<W: Write> Drop for Screen<'_, W> {
    fn drop(&mut self) {
        let _ = execute!(self.out, cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// Runs the view until the user quits. `client` is a connection to the daemon at `socket`; a
/// second one carries the event stream. When the daemon goes away the view says so and takes
/// the stream up again, from the board's seq, once the daemon answers again.
pub async fn run(
    mut client: Client,
    socket: &Path,
    out: &mut impl Write,
) -> Result<(), WatchError> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout())
        || !std::io::IsTerminal::is_terminal(&std::io::stdin())
    {
        return Err(WatchError::NotATerminal);
    }
    let status = client.status().await?;
    let work = client
        .list(ListParams {
            status: None,
            steps: false,
            ..Default::default()
        })
        .await?;
    let all = client
        .list(ListParams {
            status: None,
            steps: true,
            ..Default::default()
        })
        .await?;
    let mut board = Board::new(&status, &work, &all, chrono::Utc::now());
    // The view opens with the recent history, not an empty list.
    let since = board.seq.saturating_sub(board::HISTORY as u64);
    let mut events = Some(follow(socket, since).await?);

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut screen = Screen::enter(out)?;
    loop {
        let (width, height) = terminal::size().unwrap_or((80, 24));
        screen.draw(&board.render(chrono::Utc::now(), width.into(), height.into()))?;
        let next = async {
            match events.as_mut() {
                Some(stream) => stream.next_event().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = next => match event {
                Ok(Some(StreamLine::Event(e))) => board.apply(&e),
                Ok(Some(StreamLine::End(_)) | None) | Err(ClientError::Io { .. }) => {
                    events = None;
                    board.note = Some("catalystd stopped: following again once it is back".into());
                }
                Err(e) => return Err(e.into()),
            },
            key = keys.next() => match key {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                        break;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            _ = tick.tick() => {
                if events.is_none() {
                    if let Ok(stream) = follow(socket, board.seq).await {
                        events = Some(stream);
                        board.note = None;
                    }
                }
            }
            _ = term.recv() => break,
        }
    }
    drop(screen);
    Ok(())
}

/// A connection to the daemon at `socket` following every event after `since`.
async fn follow(socket: &Path, since: u64) -> Result<Client, ClientError> {
    let mut events = Client::connect(socket).await?;
    events
        .subscribe(SubscribeParams {
            since: Some(since),
            bead: None,
            types: None,
            follow: true,
        })
        .await?;
    Ok(events)
}
