//! What the framework and its session manager share (docs/architecture.md section 3.1): the
//! framework's options, the session slot operations take their session from, the hub of
//! connection states, the shutdown signal, and the record of failed attempts to open a session.
//!
//! The session manager (module [`session`](crate::session)) fills and empties the slot,
//! publishes the states and records the failures; the framework reads them, and `close()` closes
//! the slot and signals the shutdown. Each change keeps its own rule here (a closed slot stays
//! closed), so that neither side writes the other's state. This module knows neither side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::builder::Config;
use crate::error::CuratorError;
use crate::schema_set::SchemaSet;
use crate::state::{ConnectionState, ConnectionStateEvent, StateHub};
#[cfg(doc)]
use crate::CuratorFramework;

/// One ZooKeeper session of the framework.
///
/// Use it for a few requests and drop it: [`CuratorFramework::close`] can end the session only
/// once every clone of its client is dropped, so do not hold one across a long wait (a watch
/// does not need it: zookeeper-client's watchers do not keep the session open).
#[derive(Debug, Clone)]
pub struct Session {
    pub(crate) client: zk::Client,
    pub(crate) generation: u64,
    pub(crate) epoch: u64,
    /// The framework's schema set, which [`create`](Session::create), [`set_data`](Session::set_data),
    /// [`delete`](Session::delete) and [`multi`](Session::multi) check.
    pub(crate) schemas: Option<Arc<SchemaSet>>,
}

impl Session {
    /// The raw client of this session, already rooted at the framework's namespace. Requests
    /// made on it back to back are pipelined and answered in order. Its writes skip the
    /// framework's schema set: write with [`create`](Session::create),
    /// [`set_data`](Session::set_data), [`delete`](Session::delete) and
    /// [`multi`](Session::multi) instead, which check it first and pipeline the same.
    pub fn client(&self) -> &zk::Client {
        &self.client
    }
    /// The framework's count of sessions so far: 1 for the first, growing with each new one.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Whether this is the session of `generation`: a node made on that generation is still
    /// this session's ([`SessionLiveness`](crate::SessionLiveness)).
    pub fn is_generation(&self, generation: u64) -> bool {
        self.generation == generation
    }
    /// The ZooKeeper session id.
    pub fn id(&self) -> i64 {
        self.client.session_id().0
    }
    /// The framework's count of clients so far: grows with each new session and each move of
    /// a session to another client (docs/architecture.md section 3.7). Whatever was
    /// registered on a client (watches) ends with it; whoever keeps a client across waits lets
    /// go of it when [`CuratorFramework::client_gone`] resolves.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// The session operations run on: the current client, or none while connecting.
#[derive(Debug, Clone)]
pub(crate) enum SessionSlot {
    Empty,
    Live(Session),
    Closed,
}

/// The state the framework and its session manager share. The framework holds the only lasting
/// strong reference: the manager holds a weak one, and finds it gone once every handle of the
/// framework is dropped.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The options the framework was built with.
    pub(crate) config: Config,
    /// The connection states.
    pub(crate) hub: StateHub,
    session: watch::Sender<SessionSlot>,
    shutdown: watch::Sender<bool>,
    last_connect_error: Mutex<Option<String>>,
    /// The typed error of the latest failed attempt to open a session, when no wait for a
    /// connection can cure it (TLS, refused credentials): operations fail with it at once.
    /// Cleared when a session opens.
    fatal: watch::Sender<Option<CuratorError>>,
    /// Clients handed out so far ([`Session::epoch`]).
    epochs: AtomicU64,
}

impl Shared {
    /// The shared state of a framework not started yet: an empty slot, `Latent`.
    pub(crate) fn new(config: Config) -> Self {
        Self {
            hub: StateHub::new(config.metrics_name.clone(), config.circuit_breaker.clone()),
            config,
            session: watch::channel(SessionSlot::Empty).0,
            shutdown: watch::channel(false).0,
            last_connect_error: Mutex::new(None),
            fatal: watch::channel(None).0,
            epochs: AtomicU64::new(0),
        }
    }

    fn last_error(&self) -> MutexGuard<'_, Option<String>> {
        self.last_connect_error.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // --- read by the framework ---

    /// A `watch` of the session slot.
    pub(crate) fn session(&self) -> watch::Receiver<SessionSlot> {
        self.session.subscribe()
    }

    /// Whether a session is being opened (the slot is empty) and no attempt has failed yet.
    pub(crate) fn is_opening(&self) -> bool {
        matches!(*self.session.borrow(), SessionSlot::Empty) && self.last_error().is_none()
    }

    /// A `watch` of the fatal error of the latest failed attempt, if any.
    pub(crate) fn fatal(&self) -> watch::Receiver<Option<CuratorError>> {
        self.fatal.subscribe()
    }

    /// Why the latest attempt to open a session failed, if it did.
    pub(crate) fn last_connect_error(&self) -> Option<String> {
        self.last_error().clone()
    }

    /// A `watch` of the shutdown signal: true once `close()` is about to end the session.
    pub(crate) fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    // --- written by the framework's close() ---

    /// Closes the slot for good; the session that was in it, if any.
    pub(crate) fn close_session(&self) -> Option<Session> {
        match self.session.send_replace(SessionSlot::Closed) {
            SessionSlot::Live(session) => Some(session),
            SessionSlot::Empty | SessionSlot::Closed => None,
        }
    }

    /// Tells the session manager (and whoever waits in `closing()`) to stop.
    pub(crate) fn shut_down(&self) {
        self.shutdown.send_replace(true);
    }

    // --- written by the session manager ---

    /// Puts `client`, of session `generation`, in the slot as the next epoch, unless the slot
    /// is closed.
    pub(crate) fn set_live(&self, client: zk::Client, generation: u64) {
        if matches!(*self.session.borrow(), SessionSlot::Closed) {
            return;
        }
        let epoch = self.epochs.fetch_add(1, Ordering::AcqRel) + 1;
        let schemas = self.config.schema_set.clone();
        self.session.send_replace(SessionSlot::Live(Session { client, generation, epoch, schemas }));
    }

    /// Empties the slot (operations wait for the next client), unless it is closed.
    pub(crate) fn set_empty(&self) {
        if matches!(*self.session.borrow(), SessionSlot::Closed) {
            return;
        }
        self.session.send_replace(SessionSlot::Empty);
    }

    /// Records why the latest attempt failed (a cause waiting may cure), or, with `None`, that
    /// a session opened: the fatal error, if any, is cleared then too.
    pub(crate) fn set_connect_error(&self, error: Option<String>) {
        if error.is_none() {
            self.fatal.send_if_modified(|f| f.take().is_some());
        }
        *self.last_error() = error;
    }

    /// Records a failed attempt whose cause waiting cannot cure (TLS, refused credentials):
    /// operations and `block_until_connected` fail with it at once until a session opens.
    pub(crate) fn set_connect_failure(&self, error: CuratorError) {
        *self.last_error() = Some(error.to_string());
        self.fatal.send_replace(Some(error));
    }

    /// Publishes a transition of session `session_id`, of `generation`.
    pub(crate) fn publish(&self, state: ConnectionState, session_id: i64, generation: u64, new_session: bool) {
        self.hub.publish(ConnectionStateEvent {
            state,
            session_id,
            generation,
            new_session,
            at: Instant::now(),
            seq: 0, // numbered by the hub
        });
    }
}
