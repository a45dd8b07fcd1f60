//! The one engine under every cache: a persistent watch on the root, a map of the nodes in
//! scope, and one task that applies ZooKeeper's events in the order they arrive.
//!
//! ```text
//!  start ─► session ─► add watch (recursive, or on the node only for depth 0)
//!                 └─► load: multi-reads of getData/getChildren, level by level, batches capped
//!                     by count (1,000) and by estimated reply bytes (512 KiB), 4 in flight
//!                 └─► diff against the map ─► Deleted, then Created / Changed level by level
//!                     (a first load: each reply's nodes added and Created as they arrive),
//!                     then Initialized once (Recovered, on a later session after a Lost)
//!  NodeCreated / NodeDataChanged ─► one getData (pipelined, applied in event order)
//!  NodeDeleted                    ─► drop the node and anything cached below it
//!  watch reports SyncConnected after Disconnected (events may be lost, ZOOKEEPER-4698),
//!  Lost, new session, failed read ─► load again and diff: exactly what changed meanwhile
//! ```
//!
//! The watch is core's [`curator_core::PersistentWatch`], which owns the client's watch
//! workarounds: it is never polled after its session ended, and it adds itself again after a
//! reconnection to the same session (zookeeper-client 0.11.2 does not re-send persistent
//! watches). What it cannot do is replay the events the server did not send while the
//! connection was down (ZOOKEEPER-4698): that is why the engine loads again after a
//! reconnection. Its `next()` is cancel safe, so the engine's waits may drop it at any point
//! without losing a re-registration.
//!
//! ZooKeeper before 3.9 keeps one watch mode per path and connection (ZOOKEEPER-4466): a
//! one-shot data watch that another recipe on the same session sets on the root replaces the
//! persistent one, and the next change of the root consumes it. The engine therefore sends
//! AddWatch again and loads after each change of the root itself (servers from 3.9 send event
//! zxids, and it does not there), through [`curator_core::PersistentWatch::register_again`].
//! The reverse cannot be helped on those servers: registering the persistent recursive watch
//! turns a pending one-shot *children* watch of the same session on the same path into a
//! recursive one, which never reports children changes.
//!
//! Reads are answered in the order they were sent and a read answers with the node's latest
//! state, so a read result whose `mzxid` is not newer than the cached one is a duplicate (or
//! stale) and changes nothing. Servers from 3.9 send the zxid of each event; the engine then
//! skips reads it does not need and ignores deletions of an older incarnation of a node.
//!
//! Files: [`scope`] (what a cache holds, ordered ranges of the map), [`handle`] (the
//! [`CacheCore`] a cache holds: start, commands, close), [`command`] (what the handle asks of
//! the task), [`event_loop`] (the task), [`state`] (its state machines), [`loader`] (the
//! multi-read load). Failed loads are retried after pauses timed by core's one re-add schedule
//! ([`readd_pause`](curator_core::readd_pause)), 50 ms doubling to 2 s.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use curator_core::Readiness;
use curator_core::{ConnectionStateEvent, CuratorError, CuratorFramework};
use tokio::sync::watch;

use crate::child_data::ChildData;

mod command;
mod event_loop;
mod handle;
mod loader;
mod node_map;
mod scope;
mod state;

pub(crate) use handle::CacheCore;
pub(crate) use node_map::NodeMap;
pub(crate) use scope::{descendants, Scope};

/// What the engine tells its cache.
#[derive(Debug, Clone)]
pub(crate) enum EngineEvent {
    Created(Arc<ChildData>),
    Changed(Arc<ChildData>, Arc<ChildData>),
    Deleted(Arc<ChildData>),
    /// The first load is done (sent once, after its `Created` events).
    Initialized,
    /// After a lost session (reported as `Connection(Lost)` once the first load was done), a
    /// load on a later session is done and its differences were sent: the cache is whole again.
    /// Sent once per loss, after that `Lost`.
    Recovered,
    Connection(ConnectionStateEvent),
}

/// Translates engine events into a cache's own and queues them for its listeners. Runs on
/// the engine's task: it must not block.
pub(crate) type Sink = Box<dyn FnMut(EngineEvent) + Send>;

/// How the engine reports the outcome of its first load: the cache's `wait_initialized`
/// ([`curator_core::Lifecycle`], whose `ready` it is).
pub(crate) struct FirstLoad {
    /// The cache's lifecycle's first outcome.
    pub(crate) readiness: Readiness,
    /// Whether any failed first load refuses the start (a cache started to build its initial
    /// state first, whose start returned that error), not only a refusal no retry mends.
    pub(crate) any_failure_refuses: bool,
    /// Ends the cache's listeners after a refusal.
    pub(crate) on_refused: Box<dyn FnOnce() + Send>,
}

impl FirstLoad {
    /// Whether a first load that failed with `err` refuses the start.
    fn refuses(&self, err: &CuratorError) -> bool {
        err.is_permanent() || self.any_failure_refuses
    }

    /// Reports the refusal `err`: the cache's lifecycle closes (which stops the engine) and its
    /// listeners end.
    fn refuse(self, err: CuratorError) {
        self.readiness.refused(err);
        (self.on_refused)();
    }
}

/// How a cache is configured.
pub(crate) struct EngineConfig {
    pub(crate) scope: Scope,
    pub(crate) cache_data: bool,
    /// Make the root and its missing parents as containers before the first load (Curator's
    /// `EnsureContainers`, through core's create with parent containers).
    pub(crate) create_path: bool,
    /// The `cache` label of its metrics (`curator_core::metrics::cache`).
    pub(crate) kind: &'static str,
    /// The cache's type name, as its lifecycle errors say it (`"PathChildrenCache"`, ...).
    pub(crate) what: &'static str,
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

    /// Drops the data of the node at `path`, keeping the node and its stat, if it has data and
    /// (when `if_version` is given) its version is that one; whether it did.
    pub(crate) fn clear_data(&self, path: &str, if_version: Option<i32>) -> bool {
        let mut nodes = self.nodes_mut();
        let Some(node) = nodes.get(path) else { return false };
        if node.data().is_none() || if_version.is_some_and(|v| v != node.stat().version) {
            return false;
        }
        let cleared = Arc::new(ChildData::new(node.path(), *node.stat(), None));
        nodes.insert(cleared);
        true
    }
}

/// The data a cache shows for `data` read from `path` on the raw client: decoded as the
/// framework's reads are, so decompressed under `enable_compression()` (docs/architecture.md
/// section 3.10). Data that does not decompress (written uncompressed by another client, or a
/// parent made empty by `creating_parents`) is shown as stored, with a warning for non-empty
/// data: a cache keeps every node of its tree (Curator's cache leaves such a node out and logs).
pub(crate) fn shown_data(fw: &CuratorFramework, path: &str, data: Vec<u8>) -> Vec<u8> {
    if !fw.compression_enabled() || data.is_empty() {
        return data;
    }
    match fw.decode_data(path, data.clone()) {
        Ok(decoded) => decoded,
        Err(err) => {
            tracing::warn!(path, error = %err, "cache: node data does not decompress: shown as stored");
            data
        }
    }
}
