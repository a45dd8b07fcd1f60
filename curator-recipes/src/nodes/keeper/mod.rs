//! The keeper of a [`PersistentNode`](super::PersistentNode): one task per node that puts the
//! node back whenever it is missing, and deletes it at the end (docs/architecture.md, "Nodes
//! that stay").
//!
//! # The algorithm
//!
//! ```text
//! Place: create the node (the first time as configured; then at the path it got, in the
//!        mode without the sequence, so that it keeps its name)
//!    created ──────────────────────────────────────────────► Own   (tell the created listeners)
//!    NodeExists ─► look at the node in the way (inspect.rs) ─► Own, Place or Foreign
//!    outcome unknown (its reply lost, section 4.4):
//!        at a known path (a fixed one, or the one it got) ──► look at the node there (inspect.rs)
//!        protected: the core deletes any node it made ──────► back off ─► Place
//!        sequential, unprotected (first create) ────────────► decide by the data (doubt.rs):
//!            found ─► Own; none ─► Place; no evidence ─► wait for the session's end ─► Place
//!    retryable error ─► back off (cleanup backoff, 50 ms → 2 s) ─► Place
//!    permanent error (no permission...) before the first create: refused, closed ─► Stop
//!    other error (no permission, no parent) ────────────────► Stuck
//! Own: exists+watch on the node (on the current session); write our data if newer
//!    missing, or an ephemeral of another session ──────────► Place
//!    then wait: deleted, or the watch's session ended ──────► Place
//!               data changed, or connected again ───────────► Own  (a new watch checks again)
//!               set_data ─► write the new data, wait on
//! Foreign: exists+watch; wait until it is deleted ──────────► Place
//! Stuck: wait for a connection change or new data ──────────► Place
//! closing, or the framework closed (from any wait) ─► delete the node if it may be ours, and
//!    no other (close.rs); stop
//! ```
//!
//! The first outcome goes to the node's `Readiness`: ready once the node is first created or
//! adopted, or first Stuck on an error retrying may mend; refused on a permanent error
//! (`CuratorError::is_permanent`) before that, which closes the node.
//!
//! Waits end early on closing; requests in flight are not cut short, so their outcome is
//! known (each is bounded by the framework's retry policy and connection timeout).

use std::sync::Arc;

use curator_core::zk;
use curator_core::Readiness;
use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorFramework};
use tokio::sync::watch;

use super::shared::{lock, Shared};

mod close;
mod doubt;
mod inspect;

/// Where the keeper stands with the node.
#[derive(Debug)]
enum State {
    /// The node must be created (or found).
    Place,
    /// The node at this path is ours.
    Own(String),
    /// The path is held by another session's ephemeral node: wait for it to go.
    Foreign(String),
    /// An error that retrying will not fix: wait for something to change.
    Stuck,
    /// Closing, or the framework is closed.
    Stop,
}

/// How a wait ended.
enum Woken {
    Closing,
    /// The node was deleted, or the session of the watch ended.
    Gone,
    /// Look again: data changed, or connected again.
    Again,
    /// New data to write.
    Data,
}

struct Keeper {
    shared: Arc<Shared>,
    fw: CuratorFramework,
    /// The node's path once it was first created (sequence and protection included).
    known: Option<String>,
    /// Session ids on which this node made or adopted its (ephemeral) node.
    sessions: Vec<i64>,
    /// The data version last written to the node.
    written: u64,
    /// Whether the node may be ours: a create may have succeeded, or we own it.
    may_own: bool,
    /// The `czxid` of the node at `known` that the keeper made or adopted: the close deletes
    /// that node and no other (one made again at the path since is someone's new node). `None`
    /// while a create's outcome is unknown: the close then deletes the node at the path only if
    /// the keeper would adopt it.
    czxid: Option<i64>,
    /// The first create, sequential and unprotected, whose outcome is unknown: nothing is
    /// created while it is (doubt.rs).
    doubt: Option<doubt::Doubt>,
    /// Whether a create was tried at all (a close can come before the first).
    tried: bool,
    /// A create met a node at its path (NodeExists) that the keeper has not looked at yet: a
    /// close now looks at it as a close before the first create does, since it may be the
    /// node an earlier attempt of the same create made before its reply was lost.
    in_the_way: bool,
    retry: curator_core::RetryLoop,
    conn: watch::Receiver<curator_core::ConnectionStateEvent>,
    closing: watch::Receiver<bool>,
    /// Where the first outcome goes.
    readiness: Readiness,
}

/// Runs the keeper until the node is closed or the framework is, reporting the first outcome
/// to `readiness`.
pub(super) async fn run(shared: Arc<Shared>, readiness: Readiness) {
    let fw = shared.fw.clone();
    let mut keeper = Keeper {
        retry: fw.cleanup_retry_loop(),
        conn: fw.connection_state_watch(),
        closing: shared.closing.subscribe(),
        fw,
        shared,
        known: None,
        sessions: Vec::new(),
        written: 0,
        may_own: false,
        czxid: None,
        doubt: None,
        tried: false,
        in_the_way: false,
        readiness,
    };
    let mut state = State::Place;
    loop {
        state = match state {
            State::Stop => break,
            _ if keeper.is_closing() => State::Stop,
            State::Place => keeper.place().await,
            State::Own(path) => keeper.watch(path, true).await,
            State::Foreign(path) => keeper.watch(path, false).await,
            State::Stuck => keeper.stuck().await,
        };
    }
    if keeper.fw.is_closed() && !keeper.readiness.is_reported() {
        // The framework closed before a first outcome: none can come now. (The node's own close
        // has woken `ready` already.)
        keeper.readiness.refused(CuratorError::Closed);
    }
    keeper.finish().await;
}

impl Keeper {
    fn is_closing(&self) -> bool {
        *self.closing.borrow() || self.fw.is_closed()
    }

    fn mode(&self) -> CreateMode {
        self.shared.config.mode
    }

    /// The current session, waiting for one (up to the connection timeout) unless the node
    /// is closed meanwhile (then `Closed`, which stops the keeper).
    async fn session(&mut self) -> curator_core::Result<curator_core::Session> {
        let fw = self.fw.clone();
        tokio::select! {
            session = fw.session() => session,
            _ = self.closing.wait_for(|closing| *closing) => Err(CuratorError::Closed),
        }
    }

    /// Creates the node, or finds out who holds its path.
    async fn place(&mut self) -> State {
        self.tried = true;
        if self.doubt.is_some() {
            // Nothing is created while a first create's outcome is unknown.
            return self.resolve_doubt().await;
        }
        // Wait for a connection here, where the close can end the wait: the create below is
        // not cut short (its outcome must be known), so it should start connected.
        if let Err(err) = self.session().await {
            return self.failed(err).await;
        }
        let config = &self.shared.config;
        let (data, version, unique) = self.shared.data_for_create();
        let mut create = self.fw.create();
        let (path, mode) = match &self.known {
            Some(known) => (known.clone(), without_sequence(config.mode)),
            None => {
                if config.protected {
                    create = create.with_protection();
                }
                (config.path.clone(), config.mode)
            }
        };
        create = create.with_mode(mode);
        if let Some(ttl) = config.ttl {
            create = create.with_ttl(ttl);
        }
        if config.parents {
            create = create.creating_parent_containers_if_needed();
        }
        if unique {
            // The evidence of a create at a known path whose reply is lost.
            create = create.unique_data();
        }
        tracing::debug!(path = %path, ?mode, "persistent node: create");
        match create.for_path_with_stat(&path, data.clone()).await {
            Ok((created, stat)) => {
                tracing::debug!(path = %created, "persistent node: created");
                self.took(&created, &stat, version, Some(stat.mzxid));
                // Published before the node is told made: a stream taken once
                // `wait_for_initial_create` or `ready` returned gets the creates to come only.
                self.shared.created.publish(created.clone());
                self.settled();
                State::Own(created)
            }
            Err(CuratorError::NodeExists { .. }) => {
                self.in_the_way = true;
                self.inspect(path).await
            }
            // Its reply was lost and nothing decided it (a retryable error means nothing was
            // applied; `Closed` stops the keeper).
            Err(err) if err.outcome_unknown() && !err.is_retryable() && !matches!(err, CuratorError::Closed) => {
                self.czxid = None;
                let sequential = mode.is_sequential();
                if !sequential && (self.known.is_some() || !config.protected) {
                    // At a path known before the reply: the node there, if any, decides.
                    tracing::debug!(path = %path, error = %err, "persistent node: the create's outcome is unknown: looking at the path");
                    self.may_own = true;
                    self.inspect(path).await
                } else if config.protected {
                    // The core deletes any node it made (its orphan guard): make another.
                    tracing::debug!(path = %path, error = %err, "persistent node: the protected create's outcome is unknown: its node, if any, is deleted");
                    self.back_off().await
                } else {
                    self.first_create_in_doubt(err, data, version, unique).await
                }
            }
            Err(err) => self.failed(err).await,
        }
    }

    /// The node at `path`, of `stat`, is ours now, made or adopted, holding data version
    /// `version`, written by us at zxid `zxid` (`None`: the node kept the data it had).
    fn took(&mut self, path: &str, stat: &zk::Stat, version: u64, zxid: Option<i64>) {
        let owner = stat.ephemeral_owner;
        self.may_own = true;
        self.czxid = Some(stat.czxid);
        self.written = version;
        self.shared.mark_written(version, zxid);
        if owner != 0 && !self.sessions.contains(&owner) {
            self.sessions.push(owner);
        }
        self.known = Some(path.to_string());
        *lock(&self.shared.actual) = Some(path.to_string());
        self.shared.last_error.send_if_modified(|last| last.take().is_some());
        self.retry.reset();
    }

    /// After [`took`](Self::took) (and the create's publication, if any): the node is there, for
    /// `wait_for_initial_create` and the first outcome.
    fn settled(&mut self) {
        self.shared.initial.send_replace(true);
        self.readiness.ready();
    }

    /// Own (`ours`): watches our node, writes new data, and puts the node back when it goes.
    /// Foreign (not `ours`): watches another session's node until it goes.
    async fn watch(&mut self, path: String, ours: bool) -> State {
        let session = match self.session().await {
            Ok(session) => session,
            Err(err) => return self.failed(err).await,
        };
        tracing::debug!(path = %path, ours, "persistent node: exists+watch");
        let (stat, watcher) = match session.client().check_and_watch_stat(&path).await {
            Ok(found) => found,
            Err(err) => return self.failed(CuratorError::from_zk(&path, err)).await,
        };
        let session_id = session.id();
        drop(session);
        match stat {
            None => return State::Place,
            Some(stat) if ours && self.mode().is_ephemeral() && stat.ephemeral_owner != session_id => {
                return State::Place
            }
            Some(_) => {}
        }
        if ours {
            self.retry.reset();
        }
        let mut fired = std::pin::pin!(watcher.changed());
        loop {
            if ours {
                if let Err(state) = self.write_if_newer(&path).await {
                    return state;
                }
            }
            let woken = tokio::select! {
                event = &mut fired => match event.event_type {
                    zk::EventType::NodeDeleted => Woken::Gone,
                    zk::EventType::Session if event.session_state.is_terminated() => Woken::Gone,
                    _ => Woken::Again,
                },
                woken = self.wait_for_change() => woken,
            };
            match woken {
                Woken::Closing => return State::Stop,
                Woken::Gone => return State::Place,
                Woken::Again if ours => return State::Own(path),
                Woken::Again => return State::Foreign(path),
                // Written now if ours; kept for when the node is ours if not.
                Woken::Data => continue,
            }
        }
    }

    /// Writes the latest data if the node does not have it yet. `Err` with the next state
    /// when the node is gone or the write failed.
    async fn write_if_newer(&mut self, path: &str) -> std::result::Result<(), State> {
        let Some((data, version)) = self.shared.data_after(self.written) else { return Ok(()) };
        tracing::debug!(path, "persistent node: setData");
        let stored = self.fw.encode_data(path, &data).map(|d| d.into_owned());
        let written = match (self.session().await, stored) {
            (Ok(session), Ok(stored)) => match session.set_data(path, &stored, None) {
                Ok(write) => write.await.map_err(|e| CuratorError::from_zk(path, e)),
                Err(refused) => Err(refused),
            },
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        match written {
            Ok(stat) => {
                self.written = version;
                self.shared.mark_written(version, Some(stat.mzxid));
                Ok(())
            }
            Err(CuratorError::NoNode { .. }) => Err(State::Place),
            Err(err) => Err(self.failed(err).await),
        }
    }

    /// Waits for a connection change or new data after an error retrying cannot fix.
    async fn stuck(&mut self) -> State {
        match self.wait_for_change().await {
            Woken::Closing => State::Stop,
            _ => State::Place,
        }
    }

    /// After a failed step: back off and place again, or get stuck.
    async fn failed(&mut self, err: CuratorError) -> State {
        if matches!(err, CuratorError::Closed) || self.is_closing() {
            tracing::debug!(path = %self.shared.config.path, error = %err, "persistent node: stopping on close");
            return State::Stop;
        }
        let Some(pause) = self.retry.next_pause(&err) else {
            if err.is_permanent() && !self.readiness.is_reported() {
                // Issue 27: a first create refused for good is the start's outcome, not a log
                // line while the node waits for ever.
                tracing::warn!(path = %self.shared.config.path, error = %err, "persistent node: the first create was refused; closing");
                self.shared.last_error.send_replace(Some(err.clone()));
                self.readiness.refused(err);
                self.shared.close();
                return State::Stop;
            }
            tracing::warn!(path = %self.shared.config.path, error = %err, "persistent node: cannot create the node; trying again after the next connection change");
            self.shared.last_error.send_replace(Some(err));
            self.readiness.ready();
            return State::Stuck;
        };
        tracing::debug!(path = %self.shared.config.path, error = %err, ?pause, "persistent node: retrying");
        self.pause(pause).await
    }

    /// Backs off after a failure that is no retryable error (a create whose outcome is
    /// unknown), then places again.
    async fn back_off(&mut self) -> State {
        match self.retry.next_pause_after_failure() {
            Some(pause) => self.pause(pause).await,
            None => State::Stop,
        }
    }

    /// Waits `pause`, then `Place`; `Stop` when closed first.
    async fn pause(&mut self, pause: std::time::Duration) -> State {
        tokio::select! {
            _ = tokio::time::sleep(pause) => State::Place,
            _ = self.closing.wait_for(|closing| *closing) => State::Stop,
        }
    }

    /// Waits for the close, a connection change that needs a look (connected again, or the
    /// framework closed), or new data.
    async fn wait_for_change(&mut self) -> Woken {
        loop {
            tokio::select! {
                _ = self.closing.wait_for(|closing| *closing) => return Woken::Closing,
                changed = self.conn.changed() => {
                    if changed.is_err() || self.fw.is_closed() {
                        return Woken::Closing;
                    }
                    let state = self.conn.borrow_and_update().state;
                    match state {
                        ConnectionState::Connected | ConnectionState::Reconnected => return Woken::Again,
                        ConnectionState::Closed => return Woken::Closing,
                        _ => {}
                    }
                }
                // A close also wakes this; the next turn of the keeper sees it.
                _ = self.shared.wake.notified() => return Woken::Data,
            }
        }
    }
}

/// The mode that re-creates a sequential node under the name it got.
fn without_sequence(mode: CreateMode) -> CreateMode {
    match mode {
        CreateMode::PersistentSequential => CreateMode::Persistent,
        CreateMode::EphemeralSequential => CreateMode::Ephemeral,
        CreateMode::PersistentSequentialWithTtl => CreateMode::PersistentWithTtl,
        other => other,
    }
}
