//! The client side of the control socket, used by `catalyst ctl`, `catalyst hook` and the
//! demo: one typed method per request, and the typed lines of the streams that follow
//! `subscribe` and `logs`.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use crate::protocol::{
    ApproveParams, Approved, BeadInput, BeadList, Cancelled, CloseParams, CommentParams, Commented,
    Exported, Hello, HookAnswer, HookParams, IdParams, ImportParams, Imported, ListParams, LogLine,
    LogsOpened, LogsParams, Method, PauseParams, PauseState, RejectParams, Rejected, Reloaded,
    RequestLine, Response, Retried, RpcError, ShowAnswer, ShowParams, StatusAnswer, StatusChanged,
    Stopping, StreamEnd, StreamLine, Submitted, SubscribeParams, Subscribed, UpdateParams, Updated,
    WorkersAnswer, PROTOCOL,
};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("catalystd is not running (no socket at `{}`); start it with `catalystd --workspace DIR`", .0.display())]
    NotRunning(PathBuf),
    #[error("cannot talk to catalystd at `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("catalystd closed the connection")]
    Closed,
    #[error("catalystd sent something unexpected: {0}")]
    Protocol(String),
    #[error("{}: {}", .0.code, .0.message)]
    Rpc(RpcError),
}

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    pub hello: Hello,
}

impl Client {
    /// Connects and reads the hello line.
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = match UnixStream::connect(path).await {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Err(ClientError::NotRunning(path.to_owned()))
            }
            Err(source) => {
                return Err(ClientError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let (read, writer) = stream.into_split();
        let mut client = Client {
            path: path.to_owned(),
            reader: BufReader::new(read),
            writer,
            next_id: 1,
            hello: Hello::new(),
        };
        let first = client.next_value().await?.ok_or(ClientError::Closed)?;
        if let Ok(response) = serde_json::from_value::<Response>(first.clone()) {
            if let Some(error) = response.error {
                return Err(ClientError::Rpc(error));
            }
        }
        client.hello = serde_json::from_value(first)
            .map_err(|e| ClientError::Protocol(format!("bad hello: {e}")))?;
        if client.hello.protocol != PROTOCOL {
            return Err(ClientError::Protocol(format!(
                "the daemon speaks protocol {}, this client {PROTOCOL}",
                client.hello.protocol
            )));
        }
        Ok(client)
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Sends a request and waits for its answer, as the JSON the daemon sent: the escape hatch
    /// for `ctl --json`, which prints an answer as it came (whatever this client's types know
    /// of it), and for tests that look at the answers' bytes. Everything else uses the typed
    /// methods, which read each method's answer as its own type.
    pub async fn call(&mut self, method: &Method) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = RequestLine { id, method }
            .to_json()
            .map_err(|e| ClientError::Protocol(format!("cannot write the request: {e}")))?;
        self.send_line(&line).await?;
        loop {
            let value = self.next_value().await?.ok_or(ClientError::Closed)?;
            let response: Response =
                serde_json::from_value(value).map_err(|e| ClientError::Protocol(e.to_string()))?;
            if response.id != json!(id) {
                continue;
            }
            return match (response.result, response.error) {
                (_, Some(error)) => Err(ClientError::Rpc(error)),
                (Some(result), None) => Ok(result),
                (None, None) => Err(ClientError::Protocol(
                    "a response with neither result nor error".into(),
                )),
            };
        }
    }

    /// Sends a request and reads its answer as `T`, the type the method answers with.
    async fn request<T: DeserializeOwned>(&mut self, method: Method) -> Result<T, ClientError> {
        let answer = self.call(&method).await?;
        answer_as(method.name(), answer)
    }

    pub async fn status(&mut self) -> Result<StatusAnswer, ClientError> {
        self.request(Method::Status).await
    }

    pub async fn ready(&mut self) -> Result<BeadList, ClientError> {
        self.request(Method::Ready).await
    }

    pub async fn list(&mut self, p: ListParams) -> Result<BeadList, ClientError> {
        self.request(Method::List(p)).await
    }

    pub async fn show(&mut self, p: ShowParams) -> Result<ShowAnswer, ClientError> {
        self.request(Method::Show(p)).await
    }

    pub async fn submit(&mut self, beads: Vec<BeadInput>) -> Result<Submitted, ClientError> {
        self.request(Method::Submit(beads)).await
    }

    pub async fn update(&mut self, p: UpdateParams) -> Result<Updated, ClientError> {
        self.request(Method::Update(Box::new(p))).await
    }

    pub async fn comment(&mut self, p: CommentParams) -> Result<Commented, ClientError> {
        self.request(Method::Comment(p)).await
    }

    pub async fn close(&mut self, p: CloseParams) -> Result<StatusChanged, ClientError> {
        self.request(Method::Close(p)).await
    }

    pub async fn reopen(&mut self, p: IdParams) -> Result<StatusChanged, ClientError> {
        self.request(Method::Reopen(p)).await
    }

    pub async fn approve(&mut self, p: ApproveParams) -> Result<Approved, ClientError> {
        self.request(Method::Approve(p)).await
    }

    pub async fn reject(&mut self, p: RejectParams) -> Result<Rejected, ClientError> {
        self.request(Method::Reject(p)).await
    }

    pub async fn retry(&mut self, p: IdParams) -> Result<Retried, ClientError> {
        self.request(Method::Retry(p)).await
    }

    pub async fn cancel(&mut self, p: CloseParams) -> Result<Cancelled, ClientError> {
        self.request(Method::Cancel(p)).await
    }

    pub async fn pause(&mut self, p: PauseParams) -> Result<PauseState, ClientError> {
        self.request(Method::Pause(p)).await
    }

    pub async fn resume(&mut self, p: PauseParams) -> Result<PauseState, ClientError> {
        self.request(Method::Resume(p)).await
    }

    pub async fn hook(&mut self, p: HookParams) -> Result<HookAnswer, ClientError> {
        self.request(Method::Hook(p)).await
    }

    pub async fn import(
        &mut self,
        beads: Vec<crate::domain::model::Bead>,
    ) -> Result<Imported, ClientError> {
        self.request(Method::Import(ImportParams { beads })).await
    }

    /// Asks the daemon to read its config, prompts and formulas again.
    pub async fn reload(&mut self) -> Result<Reloaded, ClientError> {
        self.request(Method::Reload).await
    }

    /// Asks the daemon to stop; it answers before it does.
    pub async fn shutdown(&mut self) -> Result<Stopping, ClientError> {
        self.request(Method::Shutdown).await
    }

    pub async fn export(&mut self) -> Result<Exported, ClientError> {
        self.request(Method::Export).await
    }

    pub async fn workers(&mut self) -> Result<WorkersAnswer, ClientError> {
        self.request(Method::Workers).await
    }

    /// Starts an event stream; read it with [`Client::next_event`].
    pub async fn subscribe(&mut self, p: SubscribeParams) -> Result<Subscribed, ClientError> {
        self.request(Method::Subscribe(p)).await
    }

    /// Starts reading a run's output; read it with [`Client::next_log`].
    pub async fn logs(&mut self, p: LogsParams) -> Result<LogsOpened, ClientError> {
        self.request(Method::Logs(p)).await
    }

    /// The next line of an event stream; `None` when the daemon closed the connection.
    pub async fn next_event(&mut self) -> Result<Option<StreamLine>, ClientError> {
        self.next_typed("event").await
    }

    /// The next line of a run's output; `None` when the daemon closed the connection.
    pub async fn next_log(&mut self) -> Result<Option<LogLine>, ClientError> {
        self.next_typed("log line").await
    }

    /// Every event after `since` that the journal holds now (a `subscribe` without `follow`),
    /// as JSON. The connection is used up: the daemon closes it after the replay.
    pub async fn replay(mut self, since: u64) -> Result<Vec<Value>, ClientError> {
        let params = SubscribeParams {
            since: Some(since),
            bead: None,
            types: None,
            follow: false,
        };
        self.subscribe(params).await?;
        let mut events = Vec::new();
        while let Some(event) = self.next_value().await? {
            if serde_json::from_value::<StreamEnd>(event.clone()).is_ok() {
                break;
            }
            events.push(event);
        }
        Ok(events)
    }

    /// Sends one raw line (for tests of malformed input).
    pub async fn send_line(&mut self, line: &str) -> Result<(), ClientError> {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await.map_err(|e| self.io(e))
    }

    /// The connection's remaining lines, unparsed (for readers that need only a field or two of
    /// each event), and its writing half: dropping that hangs up, which ends a subscription.
    pub fn into_lines(self) -> (tokio::io::Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf) {
        (self.reader.lines(), self.writer)
    }

    /// The next line from the daemon as JSON; `None` when it closed the connection.
    pub async fn next_value(&mut self) -> Result<Option<Value>, ClientError> {
        self.next_typed("JSON").await
    }

    async fn next_typed<T: DeserializeOwned>(
        &mut self,
        what: &str,
    ) -> Result<Option<T>, ClientError> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .await
            .map_err(|e| self.io(e))?;
        if n == 0 {
            return Ok(None);
        }
        serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| ClientError::Protocol(format!("not {what}: {e}")))
    }
}

/// Reads the answer to `method` as `T`.
fn answer_as<T: DeserializeOwned>(method: &str, answer: Value) -> Result<T, ClientError> {
    serde_json::from_value(answer)
        .map_err(|e| ClientError::Protocol(format!("the answer to `{method}`: {e}")))
}
