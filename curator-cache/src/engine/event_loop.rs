//! The engine's task: it waits on the framework's connection states, the cache's commands, the
//! watch and the reads in flight, applies each in turn, and loads when [`SyncState`] says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use curator_core::readd_pause;
use curator_core::zk;
use curator_core::RetryLoop;
use curator_core::{
    ConnectionState, ConnectionStateEvent, ConnectionStateStream, CreateMode, CuratorError, CuratorFramework,
    PersistentWatch, Result,
};
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::command::Command;
use super::loader::{load, Progress, INITIAL_AVG_DATA};
use super::state::{Link, NextLoad, SyncState, RECONNECT_GRACE};
use super::{shown_data, EngineConfig, EngineEvent, FirstLoad, Shared, Sink};
use crate::child_data::ChildData;

/// Failed loads with a retryable error logged at debug level before warnings start.
const QUIET_LOAD_RETRIES: u32 = 3;

mod apply;
mod install;

type ActionFuture = Pin<Box<dyn Future<Output = Action> + Send>>;

/// A node event turned into work, applied in the order the events came.
enum Action {
    Read {
        path: String,
        result: std::result::Result<(Vec<u8>, zk::Stat), zk::Error>,
        /// When its watch event came (for the event lag metric).
        received: std::time::Instant,
    },
    Delete {
        path: String,
        zxid: i64,
        received: std::time::Instant,
    },
    /// The read of a `rebuild_node` command, applied without events.
    Rebuilt {
        id: u64,
        path: String,
        result: std::result::Result<(Vec<u8>, zk::Stat), zk::Error>,
    },
}

/// The session the engine follows.
struct Live {
    generation: u64,
    /// The framework's client this is on ([`curator_core::Session::epoch`]).
    epoch: u64,
    client: zk::Client,
    /// Core's watch on the root: it adds itself again after a reconnection, and never polls
    /// zookeeper-client's watcher after the session ended.
    watch: PersistentWatch,
    pending: FuturesOrdered<ActionFuture>,
    link: Link,
    /// A one-shot watch replaced ours on the root (ZOOKEEPER-4466): register ours again before
    /// the next load.
    register_again: bool,
}

/// How a load ended.
enum SyncEnd {
    Stop,
    Done(Result<()>),
    Abandoned(ConnectionStateEvent),
}

/// What woke the engine up.
enum Wake {
    Shutdown,
    State(Option<ConnectionStateEvent>),
    Command(Option<Command>),
    Watch(Option<zk::WatchedEvent>),
    Action(Option<Action>),
    /// The wait [`SyncState`] set is over.
    WaitOver,
    /// The client of the live watch is no longer the framework's: its session was lost or
    /// moved to another client (ensemble tracking). Let go of it and load on the current one.
    ClientGone,
}

/// The task behind a cache.
pub(super) struct Engine {
    fw: CuratorFramework,
    config: Arc<EngineConfig>,
    shared: Arc<Shared>,
    sink: Sink,
    commands: mpsc::UnboundedReceiver<Command>,
    shutdown: watch::Receiver<bool>,
    /// Resolves when the framework starts ending its session (`CuratorFramework::closing`),
    /// made once so that waiting on it costs nothing per wake-up.
    fw_closing: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    live: Option<Live>,
    /// Clients up to this epoch are known to be over (their session was lost, or moved to a
    /// later client).
    dead_epoch: u64,
    state: SyncState,
    next_load: NextLoad,
    /// Times the pauses between failed loads; reset by a successful one.
    retry: RetryLoop,
    avg_data_len: usize,
    /// A `Lost` of this generation was reported after the first load: the first load on a
    /// later session ends with [`EngineEvent::Recovered`].
    recovering_from: Option<u64>,
    /// The root is still to be made (`EngineConfig::create_path`).
    create_path: bool,
    /// `rebuild_node` commands whose read is in flight, by id. A load answers those left when
    /// it starts (it reads everything, and drops the reads in flight).
    node_rebuilds: std::collections::HashMap<u64, oneshot::Sender<Result<()>>>,
    next_rebuild_id: u64,
    /// Where the outcome of the first load goes, until it is reported.
    first: Option<FirstLoad>,
}

/// Resolves once the client of `epoch` is no longer the framework's; pends without one.
async fn client_gone(fw: &CuratorFramework, epoch: Option<u64>) {
    match epoch {
        Some(epoch) => fw.client_gone(epoch).await,
        None => std::future::pending().await,
    }
}

async fn shutdown_signal(rx: &mut watch::Receiver<bool>) {
    // An error means the cache is gone: shut down as well.
    let _ = rx.wait_for(|stop| *stop).await;
}

impl Engine {
    /// An engine that loads as soon as it runs and reports its first load to `first`.
    pub(super) fn new(
        fw: &CuratorFramework,
        config: Arc<EngineConfig>,
        shared: Arc<Shared>,
        (sink, first): (Sink, FirstLoad),
        commands: mpsc::UnboundedReceiver<Command>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let closing_fw = fw.clone();
        Self {
            fw: fw.clone(),
            fw_closing: Box::pin(async move { closing_fw.closing().await }),
            create_path: config.create_path,
            config,
            shared,
            sink,
            commands,
            shutdown,
            live: None,
            dead_epoch: 0,
            state: SyncState::Wanted { not_before: None },
            next_load: NextLoad::default(),
            retry: fw.cleanup_retry_loop(),
            avg_data_len: INITIAL_AVG_DATA,
            recovering_from: None,
            node_rebuilds: std::collections::HashMap::new(),
            next_rebuild_id: 0,
            first: Some(first),
        }
    }

    fn root(&self) -> &str {
        &self.config.scope.root
    }

    /// Runs until the cache closes or its framework does.
    pub(super) async fn run(mut self, mut states: ConnectionStateStream) {
        loop {
            if self.state.load_due() {
                self.state = SyncState::Loading;
                let rebuilds: Vec<_> = self.node_rebuilds.drain().map(|(_, reply)| reply).collect();
                self.next_load.waiters.extend(rebuilds);
                let mut shutdown = self.shutdown.clone();
                let fw = self.fw.clone();
                // A connection change abandons a load: it is reported first, and the load
                // starts over on whatever session is current (loads are cheap, changes rare).
                let end = {
                    let sync = self.sync();
                    tokio::pin!(sync);
                    tokio::select! {
                        biased;
                        _ = shutdown_signal(&mut shutdown) => SyncEnd::Stop,
                        // The framework is ending its session: let go of our client at once.
                        _ = fw.closing() => SyncEnd::Stop,
                        result = &mut sync => SyncEnd::Done(result),
                        state = states.next() => state.map_or(SyncEnd::Stop, SyncEnd::Abandoned),
                    }
                };
                match end {
                    SyncEnd::Stop | SyncEnd::Done(Err(CuratorError::Closed)) => break,
                    SyncEnd::Abandoned(event) => {
                        self.state = SyncState::Wanted { not_before: None };
                        self.on_state(event);
                    }
                    SyncEnd::Done(Ok(())) => {}
                    SyncEnd::Done(Err(err)) => {
                        if self.sync_failed(err) {
                            break;
                        }
                    }
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
                Wake::WaitOver => self.state = SyncState::Wanted { not_before: None },
                Wake::ClientGone => self.drop_live(),
            }
        }
        for waiter in self.next_load.waiters.drain(..) {
            let _ = waiter.send(Err(CuratorError::Closed));
        }
        self.shared.status.send_modify(|s| s.stopped = true);
        tracing::debug!(path = %self.config.scope.root, "cache engine stopped");
    }

    async fn wait(&mut self, states: &mut ConnectionStateStream) -> Wake {
        let live_epoch = self.live.as_ref().map(|l| l.epoch);
        let fw = self.fw.clone();
        let (watch, pending) = match self.live.as_mut() {
            Some(live) => (Some(&mut live.watch), Some(&mut live.pending)),
            None => (None, None),
        };
        tokio::select! {
            biased;
            _ = shutdown_signal(&mut self.shutdown) => Wake::Shutdown,
            // The framework is ending its session: stop, which drops our clone of its client
            // (held for pipelined reads), so that the session ends with the close.
            _ = &mut self.fw_closing => Wake::Shutdown,
            state = states.next() => Wake::State(state),
            command = self.commands.recv() => Wake::Command(command),
            action = next_action(pending) => Wake::Action(action),
            event = next_event(watch) => Wake::Watch(event),
            _ = self.state.wait_over() => Wake::WaitOver,
            _ = client_gone(&fw, live_epoch) => Wake::ClientGone,
        }
    }

    fn emit(&mut self, event: EngineEvent) {
        (self.sink)(event);
    }

    fn need_sync(&mut self) {
        self.state = SyncState::Wanted { not_before: None };
    }

    fn drop_live(&mut self) {
        if let Some(live) = self.live.take() {
            self.dead_epoch = self.dead_epoch.max(live.epoch);
        }
        self.need_sync();
    }

    fn on_state(&mut self, event: ConnectionStateEvent) {
        tracing::debug!(path = %self.root(), state = ?event.state, generation = event.generation, "cache sees connection state");
        let live_generation = self.live.as_ref().map(|l| l.generation);
        // Whether the session our client was on is over as of this event (curator_core::liveness).
        let live_over = live_generation.is_some_and(|g| event.session_end(g).is_some());
        match event.state {
            ConnectionState::Lost if live_over => self.drop_live(),
            ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly => {
                if live_over {
                    self.drop_live();
                } else if live_generation.is_none() {
                    self.need_sync();
                } else if !matches!(self.state, SyncState::InSync) {
                    // The watch saw the reconnection first and its catch-up waits for this (or
                    // a pause after a failure is cut short).
                    self.state = SyncState::Wanted { not_before: None };
                } else if let Some(live) = self.live.as_mut() {
                    live.link = live.link.announced();
                }
            }
            // Suspended, Latent, Closed, Lost while our session lives on, and a state added to
            // curator-core later: nothing to do here.
            _ => {}
        }
        let lost = (event.state == ConnectionState::Lost).then_some(event.generation);
        self.emit(EngineEvent::Connection(event));
        if let Some(generation) = lost {
            if self.shared.status.borrow().initialized {
                self.recovering_from = Some(self.recovering_from.map_or(generation, |g| g.max(generation)));
                // The map may already follow a later session (its load ended before this
                // report came): then it is whole now.
                if matches!(self.state, SyncState::InSync) {
                    self.maybe_recovered();
                }
            }
        }
    }

    /// Sends [`EngineEvent::Recovered`] if a loss is pending and the map follows a later session.
    fn maybe_recovered(&mut self) {
        let Some(lost) = self.recovering_from else { return };
        if self.live.as_ref().is_some_and(|live| curator_core::is_later(live.generation, lost)) {
            self.recovering_from = None;
            self.emit(EngineEvent::Recovered);
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Rebuild(reply) => {
                self.next_load.silent = true;
                self.next_load.waiters.push(reply);
            }
            Command::ClearAndRefresh(reply) => {
                self.shared.clear();
                self.next_load.waiters.push(reply);
            }
            Command::RebuildNode(path, reply) => {
                match self.live.as_mut() {
                    Some(live) if matches!(self.state, SyncState::InSync) => {
                        // In line with the reads of the events before it, so that it is applied
                        // after them.
                        tracing::trace!(path = %path, "rebuilding one node");
                        let id = self.next_rebuild_id;
                        self.next_rebuild_id += 1;
                        self.node_rebuilds.insert(id, reply);
                        let (read, fw) = (live.client.get_data(&path), self.fw.clone());
                        let decode = self.config.cache_data;
                        live.pending.push_back(Box::pin(async move {
                            let shown = |data| if decode { shown_data(&fw, &path, data) } else { data };
                            let result = read.await.map(|(data, stat)| (shown(data), stat));
                            Action::Rebuilt { id, path, result }
                        }));
                    }
                    // A load is due: it reads this node too.
                    _ => self.next_load.waiters.push(reply),
                }
                return;
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
                    live.link = live.link.disconnected();
                } else if matches!(live.link, Link::Down | Link::DownAnnounced) {
                    // Core's watch is registered again by now, but the server does not replay
                    // what happened while we were away (ZOOKEEPER-4698): catch up with a load,
                    // once the framework has reported the reconnection (or soon anyway).
                    let announced = live.link == Link::DownAnnounced;
                    live.link = Link::Up;
                    if matches!(self.state, SyncState::InSync) {
                        let not_before = if announced { None } else { Some(Instant::now() + RECONNECT_GRACE) };
                        self.state = SyncState::Wanted { not_before };
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
                live.register_again = true;
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
                let (read, fw) = (live.client.get_data(&path), self.fw.clone());
                let (received, decode) = (std::time::Instant::now(), self.config.cache_data);
                live.pending.push_back(Box::pin(async move {
                    // Decoded as the framework's reads are (section 3.10), when data is kept.
                    let shown = |data| if decode { shown_data(&fw, &path, data) } else { data };
                    let result = read.await.map(|(data, stat)| (shown(data), stat));
                    Action::Read { path, result, received }
                }));
            }
            zk::EventType::NodeDeleted => {
                let path = event.path;
                if self.config.scope.contains(&path) {
                    let (zxid, received) = (event.zxid, std::time::Instant::now());
                    live.pending.push_back(Box::pin(async move { Action::Delete { path, zxid, received } }));
                }
            }
            zk::EventType::NodeChildrenChanged => {}
        }
    }

    /// After a failed load: retries after a pause, unless it was the first load and `err`
    /// refuses the start ([`FirstLoad`]); true then, and the engine stops.
    fn sync_failed(&mut self, err: CuratorError) -> bool {
        for waiter in self.next_load.waiters.drain(..) {
            let _ = waiter.send(Err(err.clone()));
        }
        curator_core::metrics::cache_load_failed(self.config.kind);
        self.shared.status.send_modify(|s| {
            s.failed_loads += 1;
            s.last_error = Some(err.clone());
        });
        if let Some(first) = self.first.take_if(|first| first.refuses(&err)) {
            tracing::debug!(path = %self.config.scope.root, error = %err, "cache: the first load was refused; closing");
            first.refuse(err);
            return true;
        }
        // A connection loss or a new session during a load is the normal course of a
        // recovery, as a framework started just after its cache: only a streak of them, or
        // another error, is worth a warning.
        let expected = err.is_retryable() || matches!(err, CuratorError::NotStarted { .. });
        if expected && self.retry.retries() < QUIET_LOAD_RETRIES {
            tracing::debug!(path = %self.config.scope.root, error = %err, retries = self.retry.retries(), "cache load failed; retrying");
        } else {
            tracing::warn!(path = %self.config.scope.root, error = %err, retries = self.retry.retries(), "cache load failed; retrying");
        }
        // The core's one re-add schedule counts the retry and names the pause (every failed
        // load is retried); the engine waits for it alongside everything else. Once the
        // framework is closed the pause is the longest: the engine stops as soon as it hears,
        // and until then does not spin.
        let pause = readd_pause(&mut self.retry, &err);
        self.state = SyncState::BackingOff { until: Instant::now() + pause };
        false
    }

    /// (Re)attaches to the current session and loads everything, then emits the difference.
    async fn sync(&mut self) -> Result<()> {
        let root = self.config.scope.root.clone();
        // A framework not started yet fails the load with `NotStarted`, retried as every failed
        // load until the framework starts.
        let session = self.fw.session().await?;
        let (generation, epoch) = (session.generation(), session.epoch());
        let reuse = self.live.as_ref().is_some_and(|l| l.epoch == epoch && !l.watch.is_terminated());
        if !reuse {
            if let Some(old) = self.live.take() {
                if old.epoch < epoch || old.watch.is_terminated() {
                    self.dead_epoch = self.dead_epoch.max(old.epoch);
                }
            }
        }
        if epoch <= self.dead_epoch {
            return Err(CuratorError::ConnectionLoss { path: root, detail: "waiting for a new session".into() });
        }
        if self.create_path {
            ensure_path(&self.fw, &root).await?;
            self.create_path = false;
        }
        let client = match self.live.as_mut() {
            Some(live) if reuse => {
                // Whatever these reads would do, the load sees as well.
                live.pending = FuturesOrdered::new();
                if live.register_again || !live.watch.is_registered() {
                    live.watch.register_again().await?;
                    live.register_again = false;
                }
                live.client.clone()
            }
            _ => {
                let watch = PersistentWatch::add_on(&self.fw, &session, &root, self.config.scope.watch_mode()).await?;
                tracing::debug!(path = %root, generation, "cache watch added");
                let client = session.client().clone();
                self.live = Some(Live {
                    generation,
                    epoch,
                    client: client.clone(),
                    watch,
                    pending: FuturesOrdered::new(),
                    link: Link::Up,
                    register_again: false,
                });
                client
            }
        };
        let started = std::time::Instant::now();
        // A first load (nothing cached, events wanted) adds and reports each reply's nodes as
        // they arrive: the same events, in the same order, as installing it whole would give
        // (loader.rs), with the client's work overlapping the server's. A load that fails
        // halfway leaves those nodes cached, and the next one reports the difference.
        let progressive = !self.next_load.silent && self.shared.nodes().len() == 0;
        let (shared, sink) = (&self.shared, &mut self.sink);
        let mut tell = |nodes: &[Arc<ChildData>]| {
            {
                let mut cached = shared.nodes_mut();
                for node in nodes {
                    cached.insert(node.clone());
                }
            }
            for node in nodes {
                sink(EngineEvent::Created(node.clone()));
            }
        };
        let progress: Option<Progress<'_>> = if progressive { Some(&mut tell) } else { None };
        let loaded = load(&self.fw, &client, &self.config, &self.shared, &mut self.avg_data_len, progress).await?;
        tracing::debug!(path = %root, nodes = loaded.len(), elapsed = ?started.elapsed(), "cache loaded");
        curator_core::metrics::cache_loaded(self.config.kind, started.elapsed());
        self.install(loaded, progressive);
        Ok(())
    }
}

/// Makes `root` and its missing parents as containers (Curator's `EnsureContainers`), with
/// core's create with parent containers (plain persistent nodes if the framework disables
/// containers). An existing node is fine. An error a retry may mend fails the load (it is
/// retried); any other (no permission, say) is logged and the cache goes on without making the
/// path, as Curator's caches do.
async fn ensure_path(fw: &CuratorFramework, root: &str) -> Result<()> {
    if root == "/" {
        return Ok(());
    }
    let mode = if fw.use_container_parents() { CreateMode::Container } else { CreateMode::Persistent };
    match fw
        .create()
        .creating_parent_containers_if_needed()
        .if_missing()
        .with_mode(mode)
        .for_path(root, Vec::new())
        .await
    {
        Ok(_) => {
            tracing::debug!(path = %root, "cache path made, or there already");
            Ok(())
        }
        Err(err @ CuratorError::Closed) => Err(err),
        Err(err) if err.is_retryable() => Err(err),
        Err(err) => {
            tracing::warn!(path = %root, error = %err, "cannot make the cache's path; going on without it");
            Ok(())
        }
    }
}

async fn next_action(pending: Option<&mut FuturesOrdered<ActionFuture>>) -> Option<Action> {
    match pending {
        Some(pending) if !pending.is_empty() => pending.next().await,
        _ => std::future::pending().await,
    }
}

/// The next event of the root's watch. `PersistentWatch::next` is cancel safe, so the engine may
/// drop this wait whenever something else wakes it.
async fn next_event(watch: Option<&mut PersistentWatch>) -> Option<zk::WatchedEvent> {
    match watch {
        Some(watch) if !watch.is_terminated() => watch.next().await,
        _ => std::future::pending().await,
    }
}
