//! The one engine under every cache: a persistent watch on the root, a map of the nodes in
//! scope, and one task that applies ZooKeeper's events in the order they arrive.
//!
//! ```text
//!  start ─► session ─► add watch (recursive, or on the node only for depth 0)
//!                 └─► load: multi-reads of getData/getChildren, level by level, batches capped
//!                     by count (1,000) and by estimated reply bytes (512 KiB), 4 in flight
//!                 └─► diff against the map ─► Created / Changed / Deleted, then Initialized once
//!  NodeCreated / NodeDataChanged ─► one getData (pipelined, applied in event order)
//!  NodeDeleted                    ─► drop the node and anything cached below it
//!  watch reports SyncConnected after Disconnected (events may be lost, ZOOKEEPER-4698),
//!  Lost, new session, failed read ─► load again and diff: exactly what changed meanwhile
//! ```
//!
//! zookeeper-client 0.11.2 re-sends one-shot watches on a new connection but not persistent
//! ones (in `resend_watches`, the highest watch-kind index is never raised, so a plain
//! SetWatches without the persistent lists goes out). The server ties watches to the
//! connection, so after any reconnection the engine sends AddWatch again before it loads.
//!
//! ZooKeeper before 3.9 keeps one watch mode per path and connection (ZOOKEEPER-4466): a
//! one-shot data watch that another recipe on the same session sets on the root replaces the
//! persistent one, and the next change of the root consumes it. The engine therefore registers
//! again and loads after each change of the root itself (servers from 3.9 send event zxids, and
//! it does not there). The reverse cannot be helped on those servers: registering the
//! persistent recursive watch turns a pending one-shot *children* watch of the same session on
//! the same path into a recursive one, which never reports children changes.
//!
//! Reads are answered in the order they were sent and a read answers with the node's latest
//! state, so a read result whose `mzxid` is not newer than the cached one is a duplicate (or
//! stale) and changes nothing. Servers from 3.9 send the zxid of each event; the engine then
//! skips reads it does not need and ignores deletions of an older incarnation of a node.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use curator_core::zk;
use curator_core::{
    AddWatchMode, ConnectionState, ConnectionStateEvent, ConnectionStateStream, CuratorError, CuratorFramework, Result,
};
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::child_data::{ChildData, TreeCacheSelector};

/// The nodes of a cache by full path.
pub(crate) type NodeMap = BTreeMap<String, Arc<ChildData>>;

/// Most operations in one multi-read.
const BATCH_OPS: usize = 1000;
/// Most estimated reply bytes of one multi-read (the server's packet limit is about 1 MB).
const BATCH_BYTES: usize = 512 * 1024;
/// Multi-reads in flight at once during a load, once node sizes are known.
const BATCHES_IN_FLIGHT: usize = 4;
/// Data reads to learn the size of nodes from before sending full batches.
const PROBE_OPS: usize = 32;
/// Reply bytes of a stat and a result header in a multi-read.
const STAT_BYTES: usize = 80;
/// Reply bytes per child name, as a guess.
const NAME_BYTES: usize = 48;
/// First guess of a node's data length.
const INITIAL_AVG_DATA: usize = 256;
/// How long a catch-up after a reconnection waits for the framework to report the
/// reconnection, so that listeners hear "reconnected" before what changed meanwhile.
const RECONNECT_GRACE: Duration = Duration::from_millis(100);
/// Pause before retrying a failed load, doubling up to [`MAX_PAUSE`].
const MIN_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// What a cache holds: the root and how far below it.
pub(crate) struct Scope {
    pub(crate) root: String,
    /// 0: the root only; 1: the root and its children; `usize::MAX`: everything.
    pub(crate) max_depth: usize,
    pub(crate) selector: Option<Arc<dyn TreeCacheSelector>>,
}

impl Scope {
    /// The depth of `path` below the root (0 for the root), or `None` when it is not under it.
    pub(crate) fn depth(&self, path: &str) -> Option<usize> {
        if path == self.root {
            return Some(0);
        }
        let rest = if self.root == "/" {
            path.strip_prefix('/')?
        } else {
            path.strip_prefix(self.root.as_str())?.strip_prefix('/')?
        };
        if rest.is_empty() {
            return None;
        }
        Some(rest.split('/').count())
    }

    /// Whether the node `path` belongs in the cache.
    pub(crate) fn contains(&self, path: &str) -> bool {
        let Some(depth) = self.depth(path) else { return false };
        if depth > self.max_depth {
            return false;
        }
        let Some(selector) = &self.selector else { return true };
        if depth == 0 {
            return true;
        }
        if !selector.traverse_children(&self.root) {
            return false;
        }
        let mut next = if self.root == "/" { 1 } else { self.root.len() + 1 };
        loop {
            match path[next..].find('/') {
                Some(offset) => {
                    let ancestor = &path[..next + offset];
                    if !selector.accept_child(ancestor) || !selector.traverse_children(ancestor) {
                        return false;
                    }
                    next += offset + 1;
                }
                None => return selector.accept_child(path),
            }
        }
    }

    /// Whether the children of the cached node `path`, at `depth`, are in scope at all.
    fn lists(&self, path: &str, depth: usize) -> bool {
        depth < self.max_depth && self.selector.as_ref().map_or(true, |s| s.traverse_children(path))
    }

    fn accepts(&self, child: &str) -> bool {
        self.selector.as_ref().map_or(true, |s| s.accept_child(child))
    }

    fn child_path(parent: &str, name: &str) -> String {
        if parent == "/" {
            format!("/{name}")
        } else {
            format!("{parent}/{name}")
        }
    }

    fn watch_mode(&self) -> AddWatchMode {
        if self.max_depth == 0 {
            AddWatchMode::Persistent
        } else {
            AddWatchMode::PersistentRecursive
        }
    }
}

/// Whether `path` is strictly below `ancestor`.
#[cfg(test)]
pub(crate) fn is_descendant(path: &str, ancestor: &str) -> bool {
    if ancestor == "/" {
        return path.len() > 1 && path.starts_with('/');
    }
    path.len() > ancestor.len() && path.starts_with(ancestor) && path.as_bytes()[ancestor.len()] == b'/'
}

/// The keys of the nodes strictly below `path` in `map`, in order.
pub(crate) fn descendants<'a>(
    map: &'a NodeMap,
    path: &str,
) -> impl DoubleEndedIterator<Item = (&'a String, &'a Arc<ChildData>)> {
    // Keys starting with "path/" sort in ["path/", "path0"): '0' follows '/'.
    let (lo, hi) =
        if path == "/" { ("/".to_string(), "0".to_string()) } else { (format!("{path}/"), format!("{path}0")) };
    let root_too = path == "/";
    map.range(lo..hi).filter(move |(k, _)| !(root_too && k.as_str() == "/"))
}

/// What the engine tells its cache.
#[derive(Debug, Clone)]
pub(crate) enum EngineEvent {
    Created(Arc<ChildData>),
    Changed(Arc<ChildData>, Arc<ChildData>),
    Deleted(Arc<ChildData>),
    /// The first load is done (sent once, after its `Created` events).
    Initialized,
    Connection(ConnectionStateEvent),
}

/// Translates engine events into a cache's own and queues them for its listeners. Runs on
/// the engine's task: it must not block.
pub(crate) type Sink = Box<dyn FnMut(EngineEvent) + Send>;

/// How a cache is configured.
pub(crate) struct EngineConfig {
    pub(crate) scope: Scope,
    pub(crate) cache_data: bool,
}

/// Progress of the engine, for `start` and `wait_initialized`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Status {
    pub(crate) initialized: bool,
    pub(crate) failed_loads: u64,
    pub(crate) last_error: Option<CuratorError>,
    pub(crate) stopped: bool,
}

/// What the cache and its engine share.
pub(crate) struct Shared {
    nodes: RwLock<NodeMap>,
    status: watch::Sender<Status>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Self { nodes: RwLock::new(NodeMap::new()), status: watch::channel(Status::default()).0 }
    }

    pub(crate) fn nodes(&self) -> RwLockReadGuard<'_, NodeMap> {
        self.nodes.read().unwrap_or_else(|e| e.into_inner())
    }

    fn nodes_mut(&self) -> RwLockWriteGuard<'_, NodeMap> {
        self.nodes.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn clear(&self) {
        self.nodes_mut().clear();
    }
}

enum Command {
    /// Load again without events.
    Rebuild(oneshot::Sender<Result<()>>),
    /// Forget everything without events, then load again with events.
    ClearAndRefresh(oneshot::Sender<Result<()>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Latent,
    Started,
    Closed,
}

struct Running {
    commands: mpsc::UnboundedSender<Command>,
    shutdown: watch::Sender<bool>,
}

/// The part every cache has: configuration, the shared map, and the engine's handle.
pub(crate) struct CacheCore {
    fw: CuratorFramework,
    config: Arc<EngineConfig>,
    pub(crate) shared: Arc<Shared>,
    lifecycle: Mutex<(Lifecycle, Option<Running>)>,
    clear_on_close: bool,
}

impl CacheCore {
    /// Checks the root path and builds a cache core that is not started.
    pub(crate) fn new(fw: &CuratorFramework, config: EngineConfig, clear_on_close: bool) -> Result<Self> {
        curator_core::path::validate(&config.scope.root)?;
        Ok(Self {
            fw: fw.clone(),
            config: Arc::new(config),
            shared: Arc::new(Shared::new()),
            lifecycle: Mutex::new((Lifecycle::Latent, None)),
            clear_on_close,
        })
    }

    pub(crate) fn root(&self) -> &str {
        &self.config.scope.root
    }

    pub(crate) fn scope(&self) -> &Scope {
        &self.config.scope
    }

    /// Starts the engine on the current runtime with `sink` receiving its events.
    pub(crate) fn start(&self, sink: Sink) -> Result<tokio::runtime::Handle> {
        let mut lifecycle = self.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
        match lifecycle.0 {
            Lifecycle::Started => return Err(CuratorError::IllegalState("the cache is already started".into())),
            Lifecycle::Closed => return Err(CuratorError::IllegalState("the cache is closed".into())),
            Lifecycle::Latent => {}
        }
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| CuratorError::IllegalState("start() must be called within a tokio runtime".into()))?;
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (shutdown_tx, shutdown) = watch::channel(false);
        // Subscribe now, so that no transition after start() is missed.
        let states = self.fw.connection_state_stream();
        let engine = Engine {
            fw: self.fw.clone(),
            config: self.config.clone(),
            shared: self.shared.clone(),
            sink,
            commands,
            shutdown,
            live: None,
            dead_generation: 0,
            want_sync: true,
            silent_sync: false,
            waiters: Vec::new(),
            initialized: false,
            pause: MIN_PAUSE,
            retry_at: None,
            avg_data_len: INITIAL_AVG_DATA,
        };
        tracing::debug!(path = %self.config.scope.root, "starting cache");
        handle.spawn(engine.run(states));
        *lifecycle = (Lifecycle::Started, Some(Running { commands: commands_tx, shutdown: shutdown_tx }));
        Ok(handle)
    }

    /// Waits until the first load is done. `Err` if the cache stops first, or, when
    /// `fail_fast`, with the error of the first failed attempt.
    pub(crate) async fn wait_initialized(&self, fail_fast: bool) -> Result<()> {
        let mut status = self.shared.status.subscribe();
        let seen = status.wait_for(|s| s.initialized || s.stopped || (fail_fast && s.failed_loads > 0)).await;
        let Ok(seen) = seen else { return Err(CuratorError::Closed) };
        if seen.initialized {
            return Ok(());
        }
        if seen.stopped {
            return Err(CuratorError::Closed);
        }
        Err(seen.last_error.clone().unwrap_or(CuratorError::Closed))
    }

    /// Whether the first load is done.
    pub(crate) fn is_initialized(&self) -> bool {
        self.shared.status.borrow().initialized
    }

    async fn command(&self, make: fn(oneshot::Sender<Result<()>>) -> Command) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        {
            let lifecycle = self.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
            match &lifecycle.1 {
                Some(running) if lifecycle.0 == Lifecycle::Started => {
                    running.commands.send(make(tx)).map_err(|_| CuratorError::Closed)?;
                }
                _ => return Err(CuratorError::IllegalState("the cache is not running".into())),
            }
        }
        rx.await.map_err(|_| CuratorError::Closed)?
    }

    /// Loads everything again and replaces the map, without events.
    pub(crate) async fn rebuild(&self) -> Result<()> {
        self.command(Command::Rebuild).await
    }

    /// Forgets everything without events, then loads again with events.
    pub(crate) async fn clear_and_refresh(&self) -> Result<()> {
        self.command(Command::ClearAndRefresh).await
    }

    /// Stops the engine (its watch is removed), and clears the map unless told not to.
    pub(crate) fn close(&self) {
        let mut lifecycle = self.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
        if lifecycle.0 == Lifecycle::Closed {
            return;
        }
        if let Some(running) = lifecycle.1.take() {
            running.shutdown.send_replace(true);
        }
        lifecycle.0 = Lifecycle::Closed;
        self.shared.status.send_modify(|s| s.stopped = true);
        if self.clear_on_close {
            self.shared.clear();
        }
        tracing::debug!(path = %self.config.scope.root, "cache closed");
    }
}

impl Drop for CacheCore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The watch of the current session: never polled again after a terminal session event
/// (zookeeper-client panics if it is).
struct SafeWatch {
    inner: Option<zk::PersistentWatcher>,
}

impl SafeWatch {
    fn is_alive(&self) -> bool {
        self.inner.is_some()
    }

    async fn next(&mut self) -> Option<zk::WatchedEvent> {
        let watcher = self.inner.as_mut()?;
        let event = watcher.changed().await;
        if event.event_type == zk::EventType::Session && event.session_state.is_terminated() {
            self.inner = None;
        }
        Some(event)
    }
}

type ActionFuture = Pin<Box<dyn Future<Output = Action> + Send>>;

/// A node event turned into work, applied in the order the events came.
enum Action {
    Read { path: String, result: std::result::Result<(Vec<u8>, zk::Stat), zk::Error> },
    Delete { path: String, zxid: i64 },
}

/// The session the engine follows.
struct Live {
    generation: u64,
    client: zk::Client,
    watch: SafeWatch,
    pending: FuturesOrdered<ActionFuture>,
    disconnected: bool,
    /// The framework reported this session's reconnection before the watch did.
    reconnect_announced: bool,
    /// The watch must be registered again on the server before the next load.
    rewatch: bool,
}

/// How a load ended.
enum SyncEnd {
    Stop,
    Done(Result<()>),
    Abandoned(ConnectionStateEvent),
}

enum Wake {
    Shutdown,
    State(Option<ConnectionStateEvent>),
    Command(Option<Command>),
    Watch(Option<zk::WatchedEvent>),
    Action(Option<Action>),
    RetryDue,
}

struct Engine {
    fw: CuratorFramework,
    config: Arc<EngineConfig>,
    shared: Arc<Shared>,
    sink: Sink,
    commands: mpsc::UnboundedReceiver<Command>,
    shutdown: watch::Receiver<bool>,
    live: Option<Live>,
    /// Sessions up to this generation are known to be over.
    dead_generation: u64,
    want_sync: bool,
    silent_sync: bool,
    waiters: Vec<oneshot::Sender<Result<()>>>,
    initialized: bool,
    pause: Duration,
    retry_at: Option<Instant>,
    avg_data_len: usize,
}

async fn shutdown_signal(rx: &mut watch::Receiver<bool>) {
    // An error means the cache is gone: shut down as well.
    let _ = rx.wait_for(|stop| *stop).await;
}

impl Engine {
    fn root(&self) -> &str {
        &self.config.scope.root
    }

    async fn run(mut self, mut states: ConnectionStateStream) {
        loop {
            if self.want_sync && self.retry_at.map_or(true, |at| Instant::now() >= at) {
                let mut shutdown = self.shutdown.clone();
                // A connection change abandons a load: it is reported first, and the load
                // starts over on whatever session is current (loads are cheap, changes rare).
                let end = {
                    let sync = self.sync();
                    tokio::pin!(sync);
                    tokio::select! {
                        biased;
                        _ = shutdown_signal(&mut shutdown) => SyncEnd::Stop,
                        result = &mut sync => SyncEnd::Done(result),
                        state = states.next() => state.map_or(SyncEnd::Stop, SyncEnd::Abandoned),
                    }
                };
                match end {
                    SyncEnd::Stop | SyncEnd::Done(Err(CuratorError::Closed)) => break,
                    SyncEnd::Abandoned(event) => self.on_state(event),
                    SyncEnd::Done(Ok(())) => {}
                    SyncEnd::Done(Err(err)) => self.sync_failed(err),
                }
                continue;
            }
            match self.wait(&mut states).await {
                Wake::Shutdown | Wake::State(None) | Wake::Command(None) => break,
                Wake::State(Some(event)) => self.on_state(event),
                Wake::Command(Some(command)) => self.on_command(command),
                Wake::Watch(Some(event)) => self.on_watch(event),
                Wake::Watch(None) => {}
                Wake::Action(Some(action)) => self.apply(action),
                Wake::Action(None) => {}
                Wake::RetryDue => self.retry_at = None,
            }
        }
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(CuratorError::Closed));
        }
        self.shared.status.send_modify(|s| s.stopped = true);
        tracing::debug!(path = %self.config.scope.root, "cache engine stopped");
    }

    async fn wait(&mut self, states: &mut ConnectionStateStream) -> Wake {
        let (watch, pending) = match self.live.as_mut() {
            Some(live) => (Some(&mut live.watch), Some(&mut live.pending)),
            None => (None, None),
        };
        let retry_at = if self.want_sync { self.retry_at } else { None };
        tokio::select! {
            biased;
            _ = shutdown_signal(&mut self.shutdown) => Wake::Shutdown,
            state = states.next() => Wake::State(state),
            command = self.commands.recv() => Wake::Command(command),
            action = next_action(pending) => Wake::Action(action),
            event = next_event(watch) => Wake::Watch(event),
            _ = sleep_until(retry_at) => Wake::RetryDue,
        }
    }

    fn emit(&mut self, event: EngineEvent) {
        (self.sink)(event);
    }

    fn need_sync(&mut self) {
        self.want_sync = true;
        self.retry_at = None;
    }

    fn drop_live(&mut self) {
        if let Some(live) = self.live.take() {
            self.dead_generation = self.dead_generation.max(live.generation);
        }
        self.need_sync();
    }

    fn on_state(&mut self, event: ConnectionStateEvent) {
        tracing::debug!(path = %self.root(), state = ?event.state, generation = event.generation, "cache sees connection state");
        let live_generation = self.live.as_ref().map(|l| l.generation);
        match event.state {
            ConnectionState::Lost => {
                if live_generation.is_some_and(|g| g <= event.generation) {
                    self.drop_live();
                }
            }
            ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly => {
                if live_generation.is_some_and(|g| g < event.generation) {
                    self.drop_live();
                } else if live_generation.is_none() {
                    self.need_sync();
                } else if self.want_sync {
                    // The watch saw the reconnection first and its catch-up waits for this.
                    self.retry_at = None;
                } else if let Some(live) = self.live.as_mut() {
                    live.reconnect_announced = true;
                }
            }
            ConnectionState::Suspended | ConnectionState::Latent | ConnectionState::Closed => {}
        }
        self.emit(EngineEvent::Connection(event));
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Rebuild(reply) => {
                self.silent_sync = true;
                self.waiters.push(reply);
            }
            Command::ClearAndRefresh(reply) => {
                self.shared.clear();
                self.waiters.push(reply);
            }
        }
        self.need_sync();
    }

    fn on_watch(&mut self, event: zk::WatchedEvent) {
        let Some(live) = self.live.as_mut() else { return };
        match event.event_type {
            zk::EventType::Session => {
                let state = event.session_state;
                tracing::debug!(path = %self.config.scope.root, %state, "cache watch sees session state");
                if state.is_terminated() {
                    self.drop_live();
                } else if state == zk::SessionState::Disconnected {
                    live.disconnected = true;
                } else if live.disconnected {
                    // zookeeper-client 0.11.2 does not register persistent watches again on a
                    // new connection (its SetWatches leaves them out), and events while
                    // disconnected are not replayed to them anyway (ZOOKEEPER-4698): register
                    // again and catch up, once the framework has reported the reconnection (or
                    // soon anyway).
                    live.disconnected = false;
                    live.rewatch = true;
                    let announced = std::mem::take(&mut live.reconnect_announced);
                    if !self.want_sync {
                        self.want_sync = true;
                        self.retry_at = if announced { None } else { Some(Instant::now() + RECONNECT_GRACE) };
                    }
                }
            }
            zk::EventType::NodeCreated | zk::EventType::NodeDataChanged | zk::EventType::NodeDeleted
                if event.zxid < 0 && event.path == self.config.scope.root =>
            {
                // ZOOKEEPER-4466, servers before 3.9 (they send no zxid): a one-shot data
                // watch this session set on the root (another recipe's getData or exists)
                // replaced our registration there, and this event consumed it. Register again,
                // then load, to see what happened in between.
                tracing::trace!(path = %event.path, kind = ?event.event_type, "root changed: re-register and load");
                live.rewatch = true;
                self.need_sync();
            }
            zk::EventType::NodeCreated | zk::EventType::NodeDataChanged => {
                let path = event.path;
                if !self.config.scope.contains(&path) {
                    return;
                }
                if event.zxid >= 0 {
                    let nodes = self.shared.nodes();
                    if nodes.get(&path).is_some_and(|n| n.stat.mzxid >= event.zxid) {
                        tracing::trace!(path = %path, "event already seen");
                        return;
                    }
                }
                tracing::trace!(path = %path, kind = ?event.event_type, "reading changed node");
                let read = live.client.get_data(&path);
                live.pending.push_back(Box::pin(async move { Action::Read { path, result: read.await } }));
            }
            zk::EventType::NodeDeleted => {
                let path = event.path;
                if self.config.scope.contains(&path) {
                    let zxid = event.zxid;
                    live.pending.push_back(Box::pin(async move { Action::Delete { path, zxid } }));
                }
            }
            zk::EventType::NodeChildrenChanged => {}
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Read { path, result } => match result {
                Ok((data, stat)) => self.apply_read(path, data, stat),
                Err(zk::Error::NoNode) => {
                    tracing::trace!(path = %path, "node gone before its read; its deletion follows")
                }
                Err(err) => {
                    tracing::debug!(path = %path, error = %err, "read failed; the cache will load again");
                    self.need_sync();
                }
            },
            Action::Delete { path, zxid } => self.apply_delete(&path, zxid),
        }
    }

    fn apply_read(&mut self, path: String, data: Vec<u8>, stat: zk::Stat) {
        let new = Arc::new(ChildData { path: path.clone(), stat, data: self.config.cache_data.then_some(data) });
        let mut events = Vec::with_capacity(1);
        {
            let mut nodes = self.shared.nodes_mut();
            match nodes.get(&path) {
                None => events.push(EngineEvent::Created(new.clone())),
                Some(old) if stat.mzxid <= old.stat.mzxid => {
                    tracing::trace!(path = %path, "read brings nothing new");
                    return;
                }
                Some(old) if stat.czxid != old.stat.czxid => {
                    events.push(EngineEvent::Deleted(old.clone()));
                    events.push(EngineEvent::Created(new.clone()));
                }
                Some(old) => events.push(EngineEvent::Changed(old.clone(), new.clone())),
            }
            nodes.insert(path, new);
        }
        for event in events {
            self.emit(event);
        }
    }

    fn apply_delete(&mut self, path: &str, zxid: i64) {
        let mut removed = Vec::new();
        {
            let mut nodes = self.shared.nodes_mut();
            let Some(node) = nodes.get(path) else { return };
            if zxid >= 0 && node.stat.czxid > zxid {
                tracing::trace!(path = %path, "deletion of an older incarnation");
                return;
            }
            let below: Vec<String> = descendants(&nodes, path).rev().map(|(k, _)| k.clone()).collect();
            for key in below {
                if let Some(node) = nodes.remove(&key) {
                    removed.push(node);
                }
            }
            if let Some(node) = nodes.remove(path) {
                removed.push(node);
            }
        }
        for node in removed {
            tracing::trace!(path = %node.path, "node deleted");
            self.emit(EngineEvent::Deleted(node));
        }
    }

    fn sync_failed(&mut self, err: CuratorError) {
        tracing::warn!(path = %self.config.scope.root, error = %err, pause = ?self.pause, "cache load failed; retrying");
        self.retry_at = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(err.clone()));
        }
        self.shared.status.send_modify(|s| {
            s.failed_loads += 1;
            s.last_error = Some(err);
        });
    }

    /// (Re)attaches to the current session and loads everything, then emits the difference.
    async fn sync(&mut self) -> Result<()> {
        let root = self.config.scope.root.clone();
        let session = current_session(&self.fw).await?;
        let generation = session.generation();
        let reuse = self.live.as_ref().is_some_and(|l| l.generation == generation && l.watch.is_alive());
        if !reuse {
            if let Some(old) = self.live.take() {
                if old.generation < generation || !old.watch.is_alive() {
                    self.dead_generation = self.dead_generation.max(old.generation);
                }
            }
        }
        if generation <= self.dead_generation {
            return Err(CuratorError::ConnectionLoss { path: root, detail: "waiting for a new session".into() });
        }
        if reuse {
            if let Some(live) = self.live.as_mut() {
                // Whatever these reads would do, the load sees as well.
                live.pending = FuturesOrdered::new();
                if live.rewatch {
                    // The server gets the watch again; locally the first watcher stays, so
                    // dropping this one removes nothing on the server.
                    let again = live.client.watch(&root, self.config.scope.watch_mode()).await;
                    drop(again.map_err(|e| CuratorError::from_zk(&root, e))?);
                    live.rewatch = false;
                }
            }
        } else {
            let client = session.client().clone();
            let watcher = client
                .watch(&root, self.config.scope.watch_mode())
                .await
                .map_err(|e| CuratorError::from_zk(&root, e))?;
            tracing::debug!(path = %root, generation, "cache watch added");
            self.live = Some(Live {
                generation,
                client,
                watch: SafeWatch { inner: Some(watcher) },
                pending: FuturesOrdered::new(),
                disconnected: false,
                reconnect_announced: false,
                rewatch: false,
            });
        }
        let Some(client) = self.live.as_ref().map(|l| l.client.clone()) else {
            return Err(CuratorError::IllegalState("no session to load with".into()));
        };
        let started = std::time::Instant::now();
        let loaded = load(&client, &self.config, &self.shared, &mut self.avg_data_len).await?;
        tracing::debug!(path = %root, nodes = loaded.len(), elapsed = ?started.elapsed(), "cache loaded");
        self.install(loaded);
        Ok(())
    }

    /// Replaces the map with a fresh load and emits what differs (unless silent).
    fn install(&mut self, loaded: NodeMap) {
        let silent = std::mem::take(&mut self.silent_sync);
        let mut events = Vec::new();
        {
            let mut nodes = self.shared.nodes_mut();
            if !silent {
                for (path, old) in nodes.iter().rev() {
                    if !loaded.contains_key(path) {
                        events.push(EngineEvent::Deleted(old.clone()));
                    }
                }
                for (path, new) in &loaded {
                    match nodes.get(path) {
                        None => events.push(EngineEvent::Created(new.clone())),
                        Some(old) if old.stat.czxid != new.stat.czxid => {
                            events.push(EngineEvent::Deleted(old.clone()));
                            events.push(EngineEvent::Created(new.clone()));
                        }
                        Some(old) if old.stat.mzxid != new.stat.mzxid => {
                            events.push(EngineEvent::Changed(old.clone(), new.clone()))
                        }
                        Some(_) => {}
                    }
                }
            }
            *nodes = loaded;
        }
        if !events.is_empty() {
            tracing::debug!(path = %self.config.scope.root, changes = events.len(), "cache caught up");
        }
        for event in events {
            self.emit(event);
        }
        self.want_sync = false;
        self.retry_at = None;
        self.pause = MIN_PAUSE;
        if let Some(live) = self.live.as_mut() {
            live.reconnect_announced = false;
        }
        if !self.initialized {
            self.initialized = true;
            self.emit(EngineEvent::Initialized);
            self.shared.status.send_modify(|s| s.initialized = true);
        }
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Ok(()));
        }
    }
}

/// The framework's current session; "not started yet" counts as "not connected yet".
async fn current_session(fw: &CuratorFramework) -> Result<curator_core::Session> {
    match fw.session().await {
        Err(CuratorError::IllegalState(reason)) => {
            Err(CuratorError::ConnectionLoss { path: String::new(), detail: reason })
        }
        other => other,
    }
}

async fn next_action(pending: Option<&mut FuturesOrdered<ActionFuture>>) -> Option<Action> {
    match pending {
        Some(pending) if !pending.is_empty() => pending.next().await,
        _ => std::future::pending().await,
    }
}

async fn next_event(watch: Option<&mut SafeWatch>) -> Option<zk::WatchedEvent> {
    match watch {
        Some(watch) if watch.is_alive() => watch.next().await,
        _ => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

enum Op {
    Data(String),
    Children(String),
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Op::Data(p) | Op::Children(p) => p,
        }
    }
}

/// Reads every node in scope with multi-reads: data first, then the children of nodes that
/// have some, level by level, several batches in flight.
async fn load(
    client: &zk::Client,
    config: &EngineConfig,
    shared: &Shared,
    avg_data_len: &mut usize,
) -> Result<NodeMap> {
    let scope = &config.scope;
    let mut map = NodeMap::new();
    let mut queue = VecDeque::from([Op::Data(scope.root.clone())]);
    if scope.lists(&scope.root, 0) {
        queue.push_back(Op::Children(scope.root.clone()));
    }
    let mut in_flight = FuturesUnordered::new();
    let (mut data_bytes, mut data_reads) = (0usize, 0usize);
    // Sizes are known for nodes cached before; otherwise learn them from a small batch first.
    let sizes_known = shared.nodes().len() > 1;
    loop {
        let probing = !sizes_known && data_reads <= 1;
        let (window, max_ops) = if probing { (1, PROBE_OPS) } else { (BATCHES_IN_FLIGHT, BATCH_OPS) };
        while in_flight.len() < window && !queue.is_empty() {
            let ops = take_batch(&mut queue, &map, shared, *avg_data_len, max_ops);
            let mut reader = client.new_multi_reader();
            for op in &ops {
                let added = match op {
                    Op::Data(p) => reader.add_get_data(p),
                    Op::Children(p) => reader.add_get_children(p),
                };
                added.map_err(|e| CuratorError::from_zk(op.path(), e))?;
            }
            let commit = reader.commit();
            in_flight.push(async move { (ops, commit.await) });
        }
        let Some((ops, result)) = in_flight.next().await else { break };
        let results = result.map_err(|e| CuratorError::from_zk(&scope.root, e))?;
        if results.len() != ops.len() {
            return Err(CuratorError::IllegalState(format!(
                "a multi-read of {} operations answered {} results",
                ops.len(),
                results.len()
            )));
        }
        for (op, result) in ops.into_iter().zip(results) {
            match (op, result) {
                (Op::Data(path), zk::MultiReadResult::Data { data, stat }) => {
                    data_bytes += data.len();
                    data_reads += 1;
                    let depth = scope.depth(&path).unwrap_or(0);
                    if depth > 0 && stat.num_children > 0 && scope.lists(&path, depth) {
                        queue.push_back(Op::Children(path.clone()));
                    }
                    let node = ChildData { path: path.clone(), stat, data: config.cache_data.then_some(data) };
                    map.insert(path, Arc::new(node));
                }
                (Op::Children(path), zk::MultiReadResult::Children { children }) => {
                    for name in children {
                        let child = Scope::child_path(&path, &name);
                        if scope.accepts(&child) {
                            queue.push_back(Op::Data(child));
                        }
                    }
                }
                (_, zk::MultiReadResult::Error { err: zk::Error::NoNode }) => {}
                (op, zk::MultiReadResult::Error { err }) => return Err(CuratorError::from_zk(op.path(), err)),
                (op, other) => {
                    return Err(CuratorError::IllegalState(format!(
                        "unexpected multi-read result for {}: {other:?}",
                        op.path()
                    )))
                }
            }
        }
        if let Some(avg) = data_bytes.checked_div(data_reads) {
            *avg_data_len = avg;
        }
    }
    Ok(map)
}

/// Takes the next batch off the queue: at most `max_ops` operations and about [`BATCH_BYTES`]
/// of reply, from known sizes where the node was cached before and the average otherwise.
fn take_batch(
    queue: &mut VecDeque<Op>,
    loaded: &NodeMap,
    shared: &Shared,
    avg_data_len: usize,
    max_ops: usize,
) -> Vec<Op> {
    let cached = shared.nodes();
    let mut ops = Vec::new();
    let mut bytes = 0usize;
    while let Some(op) = queue.front() {
        let estimate = match op {
            Op::Data(p) => {
                let known = cached.get(p).map(|n| usize::try_from(n.stat.data_length).unwrap_or(0));
                p.len() + STAT_BYTES + known.unwrap_or(avg_data_len)
            }
            Op::Children(p) => {
                let children = loaded.get(p).map_or(0, |n| usize::try_from(n.stat.num_children).unwrap_or(0));
                16 + children * NAME_BYTES
            }
        };
        if !ops.is_empty() && (ops.len() >= max_ops || bytes + estimate > BATCH_BYTES) {
            break;
        }
        bytes += estimate;
        if let Some(op) = queue.pop_front() {
            ops.push(op);
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoB;
    impl TreeCacheSelector for NoB {
        fn accept_child(&self, full_path: &str) -> bool {
            !full_path.ends_with("/b")
        }
        fn traverse_children(&self, full_path: &str) -> bool {
            !full_path.ends_with("/leaf")
        }
    }

    fn scope(root: &str, max_depth: usize) -> Scope {
        Scope { root: root.into(), max_depth, selector: None }
    }

    #[test]
    fn depth_and_scope() {
        let s = scope("/a", 1);
        assert_eq!(s.depth("/a"), Some(0));
        assert_eq!(s.depth("/a/x"), Some(1));
        assert_eq!(s.depth("/a/x/y"), Some(2));
        assert_eq!(s.depth("/ab"), None);
        assert_eq!(s.depth("/"), None);
        assert!(s.contains("/a/x"));
        assert!(!s.contains("/a/x/y"));
        let r = scope("/", usize::MAX);
        assert_eq!(r.depth("/"), Some(0));
        assert_eq!(r.depth("/x"), Some(1));
        assert_eq!(r.depth("/x/y"), Some(2));
        let sel = Scope { root: "/r".into(), max_depth: usize::MAX, selector: Some(Arc::new(NoB)) };
        assert!(sel.contains("/r"));
        assert!(sel.contains("/r/a"));
        assert!(!sel.contains("/r/b"));
        assert!(!sel.contains("/r/b/c"));
        assert!(sel.contains("/r/leaf"));
        assert!(!sel.contains("/r/leaf/x"));
    }

    #[test]
    fn descendant_ranges() {
        let mut map = NodeMap::new();
        for p in ["/", "/a", "/a/b", "/a/b/c", "/a-x", "/a0", "/ab"] {
            let stat = zk::Stat {
                czxid: 1,
                mzxid: 1,
                pzxid: 1,
                ctime: 0,
                mtime: 0,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: 0,
                data_length: 0,
                num_children: 0,
            };
            map.insert(p.to_string(), Arc::new(ChildData::new(p, stat, None)));
        }
        let below: Vec<&str> = descendants(&map, "/a").map(|(k, _)| k.as_str()).collect();
        assert_eq!(below, vec!["/a/b", "/a/b/c"]);
        assert_eq!(descendants(&map, "/").count(), 6);
        assert!(is_descendant("/a/b", "/a"));
        assert!(!is_descendant("/ab", "/a"));
        assert!(is_descendant("/a", "/"));
        assert!(!is_descendant("/", "/"));
    }
}
