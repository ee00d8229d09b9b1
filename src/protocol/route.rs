//! Which side of the daemon serves each method: the connection task itself, or the engine.

use super::params::{
    ApproveParams, BeadInput, CloseParams, CommentParams, HookParams, IdParams, ImportParams,
    ListParams, LogsParams, PauseParams, RejectParams, SubscribeParams, UpdateParams,
};
use super::request::Method;

/// Who serves a method: the connection task itself, or the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    Connection(ConnectionMethod),
    Engine(EngineRequest),
}

/// The methods a connection serves without the engine's help, or with the engine's state and
/// files the engine must not read itself (run folders, the journal).
#[derive(Clone, Debug, PartialEq)]
pub enum ConnectionMethod {
    Subscribe(SubscribeParams),
    Logs(LogsParams),
    Shutdown,
    /// `show` with `runs`: the engine's `show`, then each attempt's run folder and dispatch.
    ShowRuns(IdParams),
    /// The workers on other machines (`[cluster]`), from their presence messages.
    Workers,
}

/// The methods the engine answers: the ones that read or change its state, and the dashboard's
/// board. It is the engine's input, kept apart from [`Method`] so that the type says a
/// connection's method (a stream, a shutdown, the run folders) never reaches the engine;
/// [`Method::route`] is the one place a socket method becomes one.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineRequest {
    Status,
    Ready,
    List(ListParams),
    /// The dashboard's board: each lane's count and its first `cards` beads.
    Board {
        cards: usize,
    },
    Show(IdParams),
    Submit(Vec<BeadInput>),
    Update(Box<UpdateParams>),
    Comment(CommentParams),
    Close(CloseParams),
    Reopen(IdParams),
    Approve(ApproveParams),
    Reject(RejectParams),
    Retry(IdParams),
    Cancel(CloseParams),
    Pause(PauseParams),
    Resume(PauseParams),
    Reload,
    Hook(HookParams),
    Import(ImportParams),
    Export,
}

impl Method {
    /// Which side of the daemon serves this method.
    pub fn route(self) -> Route {
        use EngineRequest as E;
        let engine = match self {
            Method::Subscribe(p) => return Route::Connection(ConnectionMethod::Subscribe(p)),
            Method::Logs(p) => return Route::Connection(ConnectionMethod::Logs(p)),
            Method::Shutdown => return Route::Connection(ConnectionMethod::Shutdown),
            Method::Workers => return Route::Connection(ConnectionMethod::Workers),
            Method::Show(p) if p.runs => {
                return Route::Connection(ConnectionMethod::ShowRuns(IdParams { id: p.id }))
            }
            Method::Show(p) => E::Show(IdParams { id: p.id }),
            Method::Status => E::Status,
            Method::Ready => E::Ready,
            Method::List(p) => E::List(p),
            Method::Submit(p) => E::Submit(p),
            Method::Update(p) => E::Update(p),
            Method::Comment(p) => E::Comment(p),
            Method::Close(p) => E::Close(p),
            Method::Reopen(p) => E::Reopen(p),
            Method::Approve(p) => E::Approve(p),
            Method::Reject(p) => E::Reject(p),
            Method::Retry(p) => E::Retry(p),
            Method::Cancel(p) => E::Cancel(p),
            Method::Pause(p) => E::Pause(p),
            Method::Resume(p) => E::Resume(p),
            Method::Reload => E::Reload,
            Method::Hook(p) => E::Hook(p),
            Method::Import(p) => E::Import(p),
            Method::Export => E::Export,
        };
        Route::Engine(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ShowParams;

    #[test]
    fn connection_methods_never_reach_the_engine() {
        let follow = SubscribeParams {
            since: None,
            bead: None,
            types: None,
            follow: true,
        };
        assert!(matches!(
            Method::Subscribe(follow).route(),
            Route::Connection(ConnectionMethod::Subscribe(_))
        ));
        assert_eq!(
            Method::Shutdown.route(),
            Route::Connection(ConnectionMethod::Shutdown)
        );
        let show = |runs| {
            Method::Show(ShowParams {
                id: "cat-1".into(),
                runs,
            })
            .route()
        };
        assert!(matches!(
            show(true),
            Route::Connection(ConnectionMethod::ShowRuns(_))
        ));
        assert!(matches!(show(false), Route::Engine(EngineRequest::Show(_))));
    }
}
