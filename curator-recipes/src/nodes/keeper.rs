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
//!    NodeExists ─► getData (on the current session):
//!        gone ─────────────────────────────────────────────► Place
//!        persistent mode, or ephemeral of this session ─────► Own   (adopt; our data if it differs,
//!                                                                  unless the node is one we made and
//!                                                                  we have no new data: an edit stays)
//!        ephemeral of an earlier session of this node ──────► Place (after deleting it, at its version)
//!        ephemeral of any other session ────────────────────► Foreign
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
//! closing, or the framework closed (from any wait) ─► delete the node if it may be ours
//!    (the node it made or adopted, by its czxid: not one made at the path since); stop
//!    (closing before the first create, or after a NodeExists before its getData: the node at
//!     the path is looked at first, and taken as ours if it is persistent or of this session)
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
    /// while a create's outcome is unknown: the close then deletes by the path's ownership.
    czxid: Option<i64>,
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
        // Wait for a connection here, where the close can end the wait: the create below is
        // not cut short (its outcome must be known), so it should start connected.
        if let Err(err) = self.session().await {
            return self.failed(err).await;
        }
        let config = &self.shared.config;
        let (data, version) = self.shared.data();
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
        tracing::debug!(path = %path, ?mode, "persistent node: create");
        match create.for_path_with_stat(&path, data).await {
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
            Err(err) => {
                if err.outcome_unknown() {
                    self.may_own = self.may_own || self.known.is_some() || !config.mode.is_sequential();
                    self.czxid = None;
                }
                self.failed(err).await
            }
        }
    }

    /// The path is taken: adopt the node, clear it away, or wait for it.
    async fn inspect(&mut self, path: String) -> State {
        let session = match self.session().await {
            Ok(session) => session,
            Err(err) => return self.failed(err).await,
        };
        tracing::debug!(path = %path, "persistent node: getData of the node in the way");
        let (current, stat) = match session.client().get_data(&path).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => {
                self.in_the_way = false;
                return State::Place;
            }
            Err(err) => return self.failed(CuratorError::from_zk(&path, err)).await,
        };
        // Looked at: what follows decides whose it is.
        self.in_the_way = false;
        let owner = stat.ephemeral_owner;
        if self.mode().is_ephemeral() && owner != session.id() {
            if self.sessions.contains(&owner) {
                tracing::info!(path = %path, owner = format_args!("{owner:#x}"), "persistent node: deleting our node of an earlier session");
                let delete = match session.delete(&path, Some(stat.version)) {
                    Ok(delete) => delete,
                    Err(refused) => return self.failed(refused).await,
                };
                return match delete.await {
                    Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => State::Place,
                    Err(err) => self.failed(CuratorError::from_zk(&path, err)).await,
                };
            }
            if owner != 0 {
                tracing::warn!(path = %path, owner = format_args!("{owner:#x}"), "persistent node: the path is held by another session; waiting for it to go");
                self.known.get_or_insert_with(|| path.clone());
                return State::Foreign(path);
            }
            tracing::warn!(path = %path, "persistent node: a persistent node is in the way of an ephemeral one; adopting it, as Curator does");
        }
        let (data, version) = self.shared.data();
        // A node this keeper made (an ephemeral of the current session, or the persistent node
        // at the path it got) keeps what another client wrote to it since, as in Own: our data
        // goes over it only when a `set_data` of ours is still to be written. A node of an
        // earlier run, or one this keeper never held, gets our data.
        // Compared decoded (section 3.10); data that does not decode is not ours.
        let current = self.fw.decode_data(&path, current).ok();
        // The zxid of our write over the node's data, if we write it.
        let mut zxid = None;
        let made_here =
            self.may_own && self.known.as_deref() == Some(path.as_str()) && (owner == 0 || owner == session.id());
        if current.as_deref() != Some(&data[..]) && (!made_here || version != self.written) {
            let stored = match self.fw.encode_data(&path, &data) {
                Ok(stored) => stored,
                Err(err) => return self.failed(err).await,
            };
            tracing::debug!(path = %path, "persistent node: setData of the adopted node");
            let write = match session.set_data(&path, &stored, Some(stat.version)) {
                Ok(write) => write,
                Err(refused) => return self.failed(refused).await,
            };
            match write.await {
                Ok(written) => zxid = Some(written.mzxid),
                Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => return State::Place,
                Err(err) => return self.failed(CuratorError::from_zk(&path, err)).await,
            }
        }
        drop(session);
        self.took(&path, &stat, version, zxid);
        self.settled();
        State::Own(path)
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

    /// Deletes the node, if it may be ours and the node is meant to go on close.
    async fn finish(&mut self) {
        if !self.tried || (self.in_the_way && self.known.is_none()) {
            self.adopt_for_close().await;
        }
        let config = &self.shared.config;
        // A create whose outcome is unknown may have made the node before any reply gave its
        // path; without a sequence or protection, that path is the configured one.
        let unknown = self.may_own && !config.mode.is_sequential() && !config.protected;
        let Some(path) = self.known.clone().or_else(|| unknown.then(|| config.path.clone())) else { return };
        if !self.may_own || !self.shared.config.delete_on_close || self.fw.is_closed() {
            return;
        }
        let mut delete = self.fw.delete().guaranteed();
        // The node it made or adopted, by its identity: the delete may run after a
        // reconnection, when a new node (this client's or another's) may stand at the path.
        if let Some(czxid) = self.czxid.filter(|_| self.known.as_deref() == Some(path.as_str())) {
            delete = delete.if_created_at(czxid);
        }
        let delete = delete.for_path(&path);
        if !self.fw.connection_state().is_connected() {
            // The close does not wait for a connection: the guaranteed delete goes on in the
            // background until the node is gone (docs/architecture.md, section 7).
            tracing::debug!(path = %path, "persistent node: delete on close, in the background (not connected)");
            delete.in_background(|_, _| {});
            return;
        }
        tracing::debug!(path = %path, "persistent node: delete on close");
        // Connected: delete now, for no longer than the connection timeout. Past it the delete's
        // future is dropped, and a guaranteed delete dropped unfinished carries on in the
        // background (a request sent just as the connection went may otherwise wait for the
        // connection to come back).
        match tokio::time::timeout(self.fw.connection_timeout(), delete).await {
            Ok(Ok(())) | Ok(Err(CuratorError::NoNode { .. })) => {}
            Ok(Err(err)) => {
                tracing::debug!(path = %path, error = %err, "persistent node: the delete goes on in the background")
            }
            Err(_) => {
                tracing::debug!(path = %path, "persistent node: the delete goes on in the background (connection timeout)")
            }
        }
    }
}

impl Keeper {
    /// A close that came before the first create, or before the keeper looked at the node its
    /// first create met: a node already at the configured path is the one the keeper would have
    /// adopted (a node it may not adopt, another session's ephemeral, is left), so the close
    /// deletes it, as it would after the adoption. Without this, the outcome of a close right
    /// after `start` depended on whether the keeper had adopted the node yet (Curator's
    /// TestPersistentNode.testQuickCloseNodeExists deletes it), and a close just after a
    /// create's retry met the node its lost first attempt made left that node for the rest of
    /// the session. A sequential or protected node has no path before its create: nothing to
    /// adopt.
    async fn adopt_for_close(&mut self) {
        let config = &self.shared.config;
        if config.mode.is_sequential() || config.protected || !config.delete_on_close || self.fw.is_closed() {
            return;
        }
        if !self.fw.connection_state().is_connected() {
            // The close does not wait for a connection: the look and the delete, by the same
            // rule (any persistent node, or an ephemeral of the session then current), go on
            // in the background.
            let (fw, path) = (self.fw.clone(), config.path.clone());
            tracing::debug!(path = %path, "persistent node: closed before it looked at its path: in the background (not connected)");
            self.fw.spawn_background(async move {
                let _ = fw.delete_if_ours(&path, true).await;
            });
            return;
        }
        let path = config.path.clone();
        let session = match self.fw.session().await {
            Ok(session) => session,
            Err(_) => return,
        };
        tracing::debug!(path = %path, "persistent node: closed before its first create: exists");
        match session.client().check_stat(&path).await {
            Ok(Some(stat))
                if !self.mode().is_ephemeral() || stat.ephemeral_owner == 0 || stat.ephemeral_owner == session.id() =>
            {
                tracing::debug!(path = %path, "persistent node: adopting the node in the way, to delete it on close");
                self.known = Some(path);
                self.may_own = true;
                self.czxid = Some(stat.czxid);
            }
            Ok(_) => {}
            Err(err) => {
                tracing::debug!(path = %path, error = %err, "persistent node: could not look at the path on close")
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
