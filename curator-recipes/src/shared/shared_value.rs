//! [`SharedValue`]: a value in one node that every client watching it sees (Curator's
//! `SharedValue`).
//!
//! One task per started value (docs/architecture.md section 16.1), whose first step is the
//! start's: create the node with the seed if missing, then the first Read (either failing, the
//! value is refused: closed, and `ready` returns the error):
//!
//! ```text
//! Read ──ok──► Watching(one-shot watch) ──node event──► Read
//!   │               │  connected again (same or new session) ──► Read
//!   │               └─ session event (the watch is gone) ──► Waiting
//!   └─err──► Waiting ──connected again, or the cleanup backoff's pause──► Read
//! ```
//!
//! The local copy only moves forward: a read replaces it only if the node's `mzxid` is newer
//! (CURATOR-688: a version is an `i32` that overflows, a zxid does not go back).

use std::sync::{Arc, Weak};
use std::time::Duration;

use curator_core::zk::{self, EventType};
use curator_core::Watch;
use curator_core::{path, ConnectionState, CuratorError, CuratorFramework, Result, TransactionResult, WriteTag};
use curator_core::{EventStream, ListenerId, Listeners};
use curator_core::{LifeState, Lifecycle, Readiness, Starting};
use tokio::sync::watch;

/// A value with the version of the node it was read from (or written to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedValue<T> {
    /// The node's data version (`-1` before the first read).
    pub version: i32,
    /// The value.
    pub value: T,
}

/// What a [`SharedValue`]'s listeners receive.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SharedValueEvent {
    /// The node changed (a write of any client, this one's included): its newest value.
    Changed(VersionedValue<Vec<u8>>),
    /// The framework's connection changed (Curator's `stateChanged`).
    State(ConnectionState),
}

/// The local copy, ordered by the node's `mzxid`.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    mzxid: i64,
    version: i32,
    pub(crate) value: Vec<u8>,
}

#[derive(Debug)]
struct Inner {
    fw: CuratorFramework,
    path: String,
    seed: Vec<u8>,
    current: watch::Sender<Current>,
    events: Listeners<SharedValueEvent>,
    /// Started, it keeps the id of the connection-state listener that forwards the states.
    lifecycle: Lifecycle<ListenerId>,
    /// True once closed: ends the task.
    shutdown: watch::Sender<bool>,
    /// Bumped by every write of this handle, in the same multi: it decides a write whose reply
    /// was lost (curator-core's `WriteTag`, docs/architecture.md section 16.1).
    tag: WriteTag,
}

impl Inner {
    /// Takes `data` at `stat` if it is newer than the local copy. True if it was.
    fn update(&self, stat: &zk::Stat, data: Vec<u8>) -> bool {
        self.current.send_if_modified(|current| {
            // A stat read back after a lost reply, the node written again since, may not know
            // its version (-1): the watch brings the newer value.
            if stat.mzxid <= current.mzxid || stat.version == -1 {
                return false;
            }
            *current = Current { mzxid: stat.mzxid, version: stat.version, value: data };
            true
        })
    }

    fn check_started(&self) -> Result<()> {
        self.lifecycle.with_started(|_| ())
    }

    /// Writes `value` (at `version`, if given) with the handle's write tag: one multi, decided
    /// by the tag after a lost reply. Resolves to the node's stat after the write.
    async fn write(&self, value: Vec<u8>, version: Option<i32>) -> Result<zk::Stat> {
        let results =
            self.fw.transaction().set_data(&self.path, value, version).with_write_tag(&self.tag).commit().await?;
        match results.into_iter().next() {
            Some(TransactionResult::SetData { stat, .. }) => Ok(stat),
            other => Err(CuratorError::IllegalState(format!("a value write of {} answered {other:?}", self.path))),
        }
    }
}

/// A value in one node, seen by every client that watches it (Curator's `SharedValue`):
/// the node is created with the seed on [`start`](Self::start) if it is missing, then
/// watched; the local copy follows the node (ordered by its `mzxid`, so a stale read never
/// replaces a newer value) and is read again after every reconnection. Writers either set
/// the value ([`set`](Self::set)) or compare and set it by version
/// ([`try_set`](Self::try_set)).
///
/// Dropping the value closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{SharedValue, SharedValueEvent};
///
/// let value = SharedValue::new(&fw, "/app/motd", b"hello".to_vec())?; // the seed, if the node is new
/// let mut events = value.events();
/// value.start()?;
/// value.ready().await?; // created if missing, and read
/// assert_eq!(value.value(), b"hello");
/// let seen = value.versioned_value();
/// assert!(value.try_set(&seen, b"bye".to_vec()).await?); // nobody wrote since we read
/// assert!(!value.try_set(&seen, b"again".to_vec()).await?); // that version is gone
/// while let Some(event) = events.next().await {
///     if let SharedValueEvent::Changed(v) = event {
///         assert_eq!(v.value, b"bye");
///         break;
///     }
/// }
/// value.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SharedValue {
    inner: Arc<Inner>,
}

impl SharedValue {
    /// A value at `path` whose node is created with `seed` if missing. Nothing is sent before
    /// [`start`](Self::start).
    pub fn new(fw: &CuratorFramework, path: &str, seed: Vec<u8>) -> Result<Self> {
        Self::named(fw, path, seed, "SharedValue")
    }

    /// As [`new`](Self::new), for a type built on a value (a count), whose name its lifecycle
    /// errors give.
    pub(crate) fn named(fw: &CuratorFramework, path: &str, seed: Vec<u8>, what: &'static str) -> Result<Self> {
        path::validate(path)?;
        fw.check_data(path, &seed)?;
        let (current, _) = watch::channel(Current { mzxid: i64::MIN, version: -1, value: seed.clone() });
        let (shutdown, _) = watch::channel(false);
        Ok(Self {
            inner: Arc::new(Inner {
                fw: fw.clone(),
                path: path.to_string(),
                seed,
                current,
                events: Listeners::new(),
                lifecycle: Lifecycle::new(what),
                shutdown,
                tag: WriteTag::new(fw, path)?,
            }),
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// A receiver of the local copy, which sees every change of it: for the recipes of this
    /// crate that follow a value (a semaphore sized by a [`SharedCount`](super::SharedCount)).
    /// It keeps the last copy once the value is dropped.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Current> {
        self.inner.current.subscribe()
    }

    /// Starts following the node (Curator's `start`), in a task of its own whose first step
    /// creates the node with the seed if it is missing (and its parents as containers) and
    /// reads it: see [`ready`](Self::ready). Once only; returns at once.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] or [`CuratorError::Closed`] (a closed framework), as for
    /// every started thing ([`Lifecycle`](curator_core::Lifecycle)); nothing is sent
    /// then.
    pub fn start(&self) -> Result<()> {
        self.start_with(|_| {}, || {})
    }

    /// As [`start`](Self::start), running `also` as the value starts and `refused` after a
    /// refused first step has closed the value (for a type built on the value: to start and
    /// to end its own listeners).
    pub(crate) fn start_with(
        &self,
        also: impl FnOnce(&Starting<'_>),
        refused: impl FnOnce() + Send + 'static,
    ) -> Result<()> {
        let inner = &self.inner;
        inner.lifecycle.start(&inner.fw, |started| {
            inner.events.start(started.handle().clone());
            also(started);
            let weak: Weak<Inner> = Arc::downgrade(inner);
            let id = inner.fw.add_connection_state_listener(move |_, event| {
                if let Some(inner) = weak.upgrade() {
                    inner.events.publish(SharedValueEvent::State(event.state));
                }
            });
            let task = Task {
                published: inner.current.borrow().mzxid,
                inner: Arc::downgrade(inner),
                fw: inner.fw.clone(),
                path: inner.path.clone(),
                shutdown: inner.shutdown.subscribe(),
                states: inner.fw.connection_state_watch(),
                pauses: inner.fw.cleanup_retry_loop(),
            };
            // The value's own task: it lives as long as the value and ends by itself (close,
            // drop, refusal, or the framework's close).
            started.spawn(task.run(started.readiness(), id, refused));
            Ok(id)
        })
    }

    /// Waits for the outcome of the start's first step: `Ok` once the node was made (if it
    /// was missing) and first read, so that [`value`](Self::value) is the node's.
    ///
    /// # Errors
    /// The create's or the first read's error once the retry policy gives up, at once for a
    /// refusal retrying cannot mend ([`CuratorError::NoAuth`], ...): the value is closed then
    /// (Curator's `start` throws it); [`CuratorError::NotStarted`] before
    /// [`start`](Self::start); [`CuratorError::AlreadyClosed`] when closed before a first
    /// outcome.
    pub async fn ready(&self) -> Result<()> {
        self.inner.lifecycle.ready().await
    }

    /// Where the value is in its life: [`LifeState::Closed`] after [`close`](Self::close) or
    /// a refused first step.
    pub fn state(&self) -> LifeState {
        self.inner.lifecycle.state()
    }

    /// The local copy of the value (the seed before the first read).
    pub fn value(&self) -> Vec<u8> {
        self.inner.current.borrow().value.clone()
    }

    /// The local copy with its version, for [`try_set`](Self::try_set).
    pub fn versioned_value(&self) -> VersionedValue<Vec<u8>> {
        let current = self.inner.current.borrow();
        VersionedValue { version: current.version, value: current.value.clone() }
    }

    /// Sets the value whatever it was.
    ///
    /// Applied once, or reported as unknown: the write carries this handle's write tag (a
    /// child of the node, `curator-rs-write-tag-<uuid>`, made by its first write and deleted
    /// when the handle is dropped), so a write whose reply was lost is decided exactly, never
    /// sent twice on a guess; [`OutcomeUnknown`](CuratorError::OutcomeUnknown) only if the tag
    /// was changed or reaped meanwhile (docs/architecture.md section 16.1). While a handle's
    /// tag is there, a plain delete of the node fails (`NotEmpty`): delete it with its children.
    ///
    /// # Errors
    /// [`CuratorError::NotStarted`] or [`CuratorError::AlreadyClosed`] (module
    /// [`Lifecycle`](curator_core::Lifecycle)); the write's error.
    pub async fn set(&self, value: Vec<u8>) -> Result<()> {
        let inner = &self.inner;
        inner.check_started()?;
        let stat = inner.write(value.clone(), None).await?;
        inner.update(&stat, value);
        Ok(())
    }

    /// Sets `value` only if the node is still at `previous` (as read from
    /// [`versioned_value`](Self::versioned_value)): false, and the local copy read again, if
    /// anyone wrote since. A `previous` that is not the local copy is false at once.
    ///
    /// True only for this call's own write, false only when it was not applied: the write
    /// carries this handle's write tag (see [`set`](Self::set)), so a write whose reply was lost
    /// is decided by the tag, not by the node's bytes (another client may write the same
    /// value at the same version, and ours may be written over before we look). Version `-1`
    /// cannot be compared (ZooKeeper takes it as "any version"): after 2^32 writes the node
    /// passes through it, and `try_set` with it is
    /// [`InvalidArgument`](CuratorError::InvalidArgument). The version compared is the node's
    /// data version: a node deleted and made again, then written back to the same version, is
    /// not told apart (as in Curator).
    ///
    /// # Errors
    /// [`CuratorError::NotStarted`] or [`CuratorError::AlreadyClosed`] (module
    /// [`Lifecycle`](curator_core::Lifecycle)); [`CuratorError::InvalidArgument`] for version `-1`;
    /// [`CuratorError::OutcomeUnknown`] when the tag cannot decide; the write's or the read's
    /// error.
    pub async fn try_set(&self, previous: &VersionedValue<Vec<u8>>, value: Vec<u8>) -> Result<bool> {
        let inner = &self.inner;
        inner.check_started()?;
        {
            let current = inner.current.borrow();
            if previous.version != current.version || previous.value != current.value {
                return Ok(false);
            }
        }
        if previous.version == -1 {
            return Err(CuratorError::InvalidArgument {
                path: inner.path.clone(),
                reason: "version -1 cannot be compared (ZooKeeper reads it as any version)".into(),
            });
        }
        match inner.write(value.clone(), Some(previous.version)).await {
            Ok(stat) => {
                inner.update(&stat, value);
                Ok(true)
            }
            Err(CuratorError::BadVersion { path }) if path == inner.path => {
                let (data, stat) = inner.fw.get_data().for_path_with_stat(&inner.path).await?;
                inner.update(&stat, data);
                Ok(false)
            }
            Err(err) => Err(err),
        }
    }

    /// Calls `listener` with every event, in order, on the blocking pool (the one listener
    /// queue).
    pub fn add_listener(&self, listener: impl Fn(&SharedValueEvent) + Send + Sync + 'static) -> ListenerId {
        self.inner.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.inner.events.remove(id)
    }

    /// A stream of the events from now on.
    pub fn events(&self) -> EventStream<SharedValueEvent> {
        self.inner.events.stream()
    }

    /// Stops following the node and ends the listeners (after the events already queued). The
    /// node stays. Idempotent, as every close ([`Lifecycle`](curator_core::Lifecycle));
    /// a closed value cannot be started again.
    pub async fn close(&self) {
        close(&self.inner);
    }
}

fn close(inner: &Inner) {
    if let Some(id) = inner.lifecycle.close() {
        inner.fw.remove_connection_state_listener(id);
        tracing::debug!(path = %inner.path, "shared value closed");
    }
    inner.shutdown.send_replace(true);
    inner.events.close();
}

impl Drop for SharedValue {
    fn drop(&mut self) {
        close(&self.inner);
    }
}

/// What the task watches next.
enum Followed {
    /// The node's data (or its creation, when it was missing).
    Node(Watch),
}

/// Reads the node with a watch (an exists watch when it is missing) and takes its value.
async fn read_and_watch(inner: &Inner) -> Result<Followed> {
    loop {
        match inner.fw.get_data().for_path_and_watch(&inner.path).await {
            Ok((data, stat, watch)) => {
                tracing::debug!(path = %inner.path, version = stat.version, mzxid = stat.mzxid, "shared value read");
                inner.update(&stat, data);
                return Ok(Followed::Node(watch));
            }
            Err(CuratorError::NoNode { .. }) => {
                let (stat, watch) = inner.fw.check_exists().for_path_and_watch(&inner.path).await?;
                if stat.is_none() {
                    tracing::debug!(path = %inner.path, "shared value's node is missing: waiting for it");
                    return Ok(Followed::Node(watch));
                }
                // Created meanwhile: read it.
            }
            Err(err) => return Err(err),
        }
    }
}

/// The task's phases.
enum Phase {
    Read,
    Watching(Followed),
    /// Until connected again, or for the pause if any.
    Waiting(Option<Duration>),
    Done,
}

struct Task {
    inner: Weak<Inner>,
    fw: CuratorFramework,
    path: String,
    shutdown: watch::Receiver<bool>,
    states: watch::Receiver<curator_core::ConnectionStateEvent>,
    pauses: curator_core::RetryLoop,
    /// The `mzxid` of the last value published.
    published: i64,
}

impl Task {
    async fn run(mut self, readiness: Readiness, listener: ListenerId, refused: impl FnOnce()) {
        self.states.borrow_and_update();
        let mut shutdown = self.shutdown.clone();
        let first = tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => return,
            first = self.first() => first,
        };
        let first = match first {
            Ok(first) => first,
            Err(err) => {
                tracing::debug!(path = %self.path, error = %err, "shared value: the first step failed; closing");
                // The refusal closes the lifecycle, which drops the listener's id unused.
                readiness.refused(err);
                self.fw.remove_connection_state_listener(listener);
                if let Some(inner) = self.inner.upgrade() {
                    close(&inner);
                }
                refused();
                return;
            }
        };
        readiness.ready();
        let mut phase = Phase::Watching(first);
        loop {
            phase = match phase {
                Phase::Read => self.read().await,
                Phase::Watching(followed) => self.watching(followed).await,
                Phase::Waiting(pause) => self.waiting(pause).await,
                Phase::Done => break,
            };
        }
        tracing::debug!(path = %self.path, "shared value task ended");
    }

    /// The start's first step: the node made with the seed if missing, then read with a watch.
    async fn first(&mut self) -> Result<Followed> {
        let Some(inner) = self.inner.upgrade() else { return Err(CuratorError::Closed) };
        tracing::debug!(path = %inner.path, "shared value: create with the seed if missing");
        inner
            .fw
            .create()
            .creating_parent_containers_if_needed()
            .if_missing()
            .for_path(&inner.path, inner.seed.clone())
            .await?;
        let first = read_and_watch(&inner).await?;
        self.published = inner.current.borrow().mzxid;
        Ok(first)
    }

    fn closed(&self) -> bool {
        *self.shutdown.borrow() || self.fw.is_closed()
    }

    async fn read(&mut self) -> Phase {
        let Some(inner) = self.inner.upgrade() else { return Phase::Done };
        if self.closed() {
            return Phase::Done;
        }
        let mut shutdown = self.shutdown.clone();
        let result = tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => return Phase::Done,
            r = read_and_watch(&inner) => r,
        };
        match result {
            Ok(followed) => {
                self.pauses.reset();
                let current = inner.current.borrow().clone();
                if current.mzxid > self.published {
                    self.published = current.mzxid;
                    inner.events.publish(SharedValueEvent::Changed(VersionedValue {
                        version: current.version,
                        value: current.value,
                    }));
                }
                Phase::Watching(followed)
            }
            Err(CuratorError::Closed) => Phase::Done,
            Err(err) => {
                tracing::debug!(path = %self.path, error = %err, "shared value: read failed");
                Phase::Waiting(self.pauses.next_pause(&err))
            }
        }
    }

    async fn watching(&mut self, followed: Followed) -> Phase {
        let Followed::Node(watch) = followed;
        let fired = watch.changed();
        tokio::pin!(fired);
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.wait_for(|s| *s) => return Phase::Done,
                event = &mut fired => {
                    return match event.event_type {
                        EventType::Session => Phase::Waiting(None),
                        _ => Phase::Read,
                    }
                }
                changed = self.states.changed() => {
                    if changed.is_err() {
                        return Phase::Done;
                    }
                    if connected_again(&mut self.states) {
                        return Phase::Read;
                    }
                    if self.states.borrow().state == ConnectionState::Closed {
                        return Phase::Done;
                    }
                }
            }
        }
    }

    async fn waiting(&mut self, pause: Option<Duration>) -> Phase {
        if self.closed() {
            return Phase::Done;
        }
        if pause.is_none() && self.states.borrow().state.is_connected() {
            // Connected already (the session event was the end of the watch, not of the
            // connection): read now.
            return Phase::Read;
        }
        let sleep = tokio::time::sleep(pause.unwrap_or(Duration::MAX / 4));
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.wait_for(|s| *s) => return Phase::Done,
                changed = self.states.changed() => {
                    if changed.is_err() || self.states.borrow().state == ConnectionState::Closed {
                        return Phase::Done;
                    }
                    if connected_again(&mut self.states) {
                        return Phase::Read;
                    }
                }
                _ = &mut sleep, if pause.is_some() => return Phase::Read,
            }
        }
    }
}

/// The latest transition is a (re)connection: the task re-reads after every one (changes made
/// while disconnected fire no watch of ours).
fn connected_again(states: &mut watch::Receiver<curator_core::ConnectionStateEvent>) -> bool {
    let state = states.borrow_and_update().state;
    matches!(state, ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly)
}
