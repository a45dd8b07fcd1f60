//! `watches().remove(watch)`: Curator's watch removal (`RemoveWatchesBuilder`) on the watches
//! this crate hands out, a one-shot [`Watch`] or a [`PersistentWatch`]
//! (docs/architecture.md section 6.3.1).
//!
//! zookeeper-client removes a watch only through the watcher it handed out (dropping it, or
//! its deprecated `remove()`, the one way to hear the server's answer), and only while it is
//! connected: a removal asked for while disconnected waits in its queue until it connects
//! again. So the removal takes the watch by value; what Curator does with a watcher object and
//! a path, this does with the watch itself, and checks that the path and type given match it.
//!
//! `remove_all()` ends the watches the framework holds for its callers (`watched()`,
//! `using_watcher()`), found in a registry of them (`HeldWatches`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::ops::watch::{AddWatchMode, PersistentWatch};
use crate::ops::{Pending, Watch};
use crate::path;

/// Which watches a removal concerns: Curator's (ZooKeeper's) `WatcherType`. A watch of another
/// type than the one asked for is not removed: the removal fails with
/// [`NoWatcher`](CuratorError::NoWatcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum WatcherType {
    /// A data watch: set by `check_exists` or `get_data`.
    Data,
    /// A children watch: set by `get_children`.
    Children,
    /// A persistent watch on one node ([`AddWatchMode::Persistent`]).
    Persistent,
    /// A persistent recursive watch ([`AddWatchMode::PersistentRecursive`]).
    PersistentRecursive,
    /// Any watch (the default, as in Curator).
    #[default]
    Any,
}

/// A watch that [`watches().remove()`](crate::WatchesBuilder::remove) takes: made with `into()`
/// from a [`Watch`] or a [`PersistentWatch`].
#[derive(Debug)]
pub enum RemovableWatch {
    /// A one-shot watch of a read.
    OneShot(Watch),
    /// A persistent watch.
    Persistent(PersistentWatch),
}

impl From<Watch> for RemovableWatch {
    fn from(watch: Watch) -> Self {
        Self::OneShot(watch)
    }
}

impl From<PersistentWatch> for RemovableWatch {
    fn from(watch: PersistentWatch) -> Self {
        Self::Persistent(watch)
    }
}

impl RemovableWatch {
    fn path(&self) -> &str {
        match self {
            Self::OneShot(w) => w.path(),
            Self::Persistent(w) => w.path(),
        }
    }

    fn is_of(&self, wanted: WatcherType) -> bool {
        let kind = match self {
            Self::OneShot(w) => w.watcher_type(),
            Self::Persistent(w) if w.mode() == AddWatchMode::Persistent => WatcherType::Persistent,
            Self::Persistent(_) => WatcherType::PersistentRecursive,
        };
        wanted == WatcherType::Any || wanted == kind
    }

    /// The client's watcher; `None` for a persistent watch whose session ended (the server
    /// dropped it with the session) or that was handed to a watcher callback.
    fn into_raw(self) -> Option<Raw> {
        match self {
            Self::OneShot(w) => Some(Raw::OneShot(w.into_raw())),
            Self::Persistent(mut w) => w.take_raw().map(Raw::Persistent),
        }
    }
}

/// zookeeper-client's watcher behind a removable watch.
#[derive(Debug)]
pub(crate) enum Raw {
    OneShot(zk::OneshotWatcher),
    Persistent(zk::PersistentWatcher),
}

impl Raw {
    /// Removes the watcher and waits for the server's answer (the client answers at once
    /// when another of its watchers still needs the server's watch, or the watch fired).
    async fn remove(self) -> std::result::Result<(), zk::Error> {
        // The deprecated `remove()` is zookeeper-client's only removal that reports the
        // server's answer; dropping the watcher sends the same request and forgets the answer.
        #[allow(deprecated)]
        match self {
            Self::OneShot(w) => w.remove().await,
            Self::Persistent(w) => w.remove().await,
        }
    }
}

/// Builder of a watch removal: Curator's `RemoveWatchesBuilder`. See
/// [`WatchesBuilder::remove`](crate::WatchesBuilder::remove).
///
/// The watch is given up in every case: once the removal is built, nothing more is heard from
/// it, and a watch that a failed removal leaves behind is removed by the client when it is
/// connected again (zookeeper-client removes a watcher that is dropped).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_core::{CuratorError, WatcherType};
///
/// let (_, watch) = fw.check_exists().for_path_and_watch("/job").await?;
/// // Of another type: nothing is removed, and the error says so.
/// let wrong = fw.watches().remove(watch).of_type(WatcherType::Children).for_path("/job").await;
/// assert!(matches!(wrong, Err(CuratorError::NoWatcher { .. })));
///
/// let (_, _, watch) = fw.get_children().for_path_and_watch("/").await?;
/// fw.watches().remove(watch).of_type(WatcherType::Children).for_path("/").await?;
///
/// let watch = fw.watches().add().for_path("/jobs").await?;
/// fw.watches().remove(watch).guaranteed().for_path("/jobs").await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RemoveWatchesBuilder {
    fw: CuratorFramework,
    watch: RemovableWatch,
    of_type: WatcherType,
    local: bool,
    guaranteed: bool,
    quietly: bool,
}

impl RemoveWatchesBuilder {
    pub(crate) fn new(fw: CuratorFramework, watch: RemovableWatch) -> Self {
        Self { fw, watch, of_type: WatcherType::Any, local: false, guaranteed: false, quietly: false }
    }

    /// Remove the watch only if it is of this type ([`WatcherType::Any`] by default).
    pub fn of_type(mut self, of_type: WatcherType) -> Self {
        self.of_type = of_type;
        self
    }

    /// Remove the watch from the client without waiting for the server, which may be out of
    /// reach: succeeds at once (in the background too: the callback comes at once, whatever the
    /// connection), and the client tells the server when it is connected (a session that ends
    /// first takes the watch with it).
    pub fn locally(mut self) -> Self {
        self.local = true;
        self
    }

    /// When the removal fails with an unknown outcome (no connection in time, under the retry
    /// policy), return the error but keep the removal going in the background until the server
    /// has answered or the session ended. Through [`CuratorFramework::spawn_background`], as a
    /// guaranteed delete.
    pub fn guaranteed(mut self) -> Self {
        self.guaranteed = true;
        self
    }

    /// No watch to remove ([`NoWatcher`](CuratorError::NoWatcher)) is not an error.
    pub fn quietly(mut self) -> Self {
        self.quietly = true;
        self
    }

    /// Removes the watch on `path` (the path it was set on, relative to the namespace; another
    /// path has no such watch: [`NoWatcher`](CuratorError::NoWatcher)). Awaited, or handed to
    /// the background with [`Pending::in_background`] (a
    /// [`RemoveWatches`](CuratorEventType::RemoveWatches) event).
    pub fn for_path(self, path: &str) -> Pending<()> {
        let kind = CuratorEventType::RemoveWatches;
        if let Err(err) = path::validate(path) {
            return Pending::failed(&self.fw, kind, path, err);
        }
        let Self { fw, watch, of_type, local, guaranteed, quietly } = self;
        let no_watcher = |path: &str| {
            if quietly {
                Pending::new(&fw, kind, path, async { Ok(()) }).sending_nothing()
            } else {
                Pending::failed(&fw, kind, path, CuratorError::NoWatcher { path: path.to_string() })
            }
        };
        if watch.path() != path || !watch.is_of(of_type) {
            tracing::debug!(path, watch = %watch.path(), ?of_type, "removeWatches: not a watch of this path and type");
            return no_watcher(path);
        }
        let Some(raw) = watch.into_raw() else {
            tracing::debug!(path, "removeWatches: the watch ended with its session");
            return no_watcher(path);
        };
        if local {
            tracing::debug!(path, ?of_type, "removeWatches (locally)");
            drop(raw);
            return Pending::new(&fw, kind, path, async { Ok(()) }).sending_nothing();
        }
        let owned = path.to_string();
        Pending::new(&fw.clone(), kind, path, async move {
            let slot = Arc::new(Mutex::new(Some(raw)));
            let result = fw
                .call_with_retry("remove_watches", &owned, |_session, _| {
                    let (slot, path, limit) = (slot.clone(), owned.clone(), fw.connection_timeout());
                    async move { attempt(&slot, &path, of_type, limit).await }
                })
                .await;
            match result {
                Err(CuratorError::NoWatcher { .. }) if quietly => Ok(()),
                Err(err) if guaranteed && err.outcome_unknown() && !fw.is_closed() => {
                    if let Some(raw) = take(&slot) {
                        tracing::info!(path = %owned, error = %err, "guaranteed watch removal continues in the background");
                        fw.guarantee_remove_watch(owned, raw);
                    }
                    Err(err)
                }
                other => other,
            }
        })
    }
}

fn take(slot: &Mutex<Option<Raw>>) -> Option<Raw> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// One attempt, on a connected session: hands the watcher to the client and waits (at most
/// `limit`) for the server's answer.
async fn attempt(
    slot: &Mutex<Option<Raw>>,
    path: &str,
    of_type: WatcherType,
    limit: std::time::Duration,
) -> Result<()> {
    let Some(raw) = take(slot) else {
        // An earlier attempt handed the watcher to the client and lost its connection: the
        // client has forgotten the watch, or will before any later request of ours, and does
        // not set it again on the server after reconnecting. Done.
        tracing::debug!(path, "removeWatches: handed to the client by an earlier attempt");
        return Ok(());
    };
    tracing::debug!(path, ?of_type, "removeWatches");
    match tokio::time::timeout(limit, raw.remove()).await {
        Ok(answer) => answer.map_err(|e| CuratorError::from_zk(path, e)),
        Err(_) => Err(CuratorError::ConnectionLoss {
            path: path.to_string(),
            detail: "no answer to removeWatches in time".into(),
        }),
    }
}

impl CuratorFramework {
    /// Keeps removing a watch in the background: waits for a connection (paced by the cleanup
    /// retry loop, as a guaranteed delete), then hands the watcher to the client and waits for
    /// the server's answer.
    fn guarantee_remove_watch(&self, path: String, raw: Raw) {
        let fw = self.clone();
        self.spawn_background(async move {
            let mut retry = fw.cleanup_retry_loop();
            loop {
                match fw.session_for(&path).await {
                    Ok(_) => break,
                    // Dropped here, the watcher is removed by the client if it connects again.
                    Err(CuratorError::Closed) => return,
                    Err(err) => {
                        if let Err(err) = retry.on_error(err).await {
                            if !fw.is_closed() {
                                fw.report_unhandled(&format!("guaranteed removal of the watch on {path} failed"), &err);
                            }
                            return;
                        }
                    }
                }
            }
            tracing::debug!(path = %path, "removeWatches (guaranteed, in the background)");
            match raw.remove().await.map_err(|e| CuratorError::from_zk(&path, e)) {
                // Handed to the client, the watch is gone from it: a lost connection only
                // means the server forgets it with that connection.
                Ok(()) | Err(CuratorError::NoWatcher { .. }) => tracing::info!(path = %path, "guaranteed watch removal done"),
                Err(err) if err.outcome_unknown() => tracing::info!(path = %path, "guaranteed watch removal done (locally; the server forgot the watch with the connection)"),
                Err(err) => fw.report_unhandled(&format!("guaranteed removal of the watch on {path} failed"), &err),
            }
        });
    }
}

/// The watches the framework holds for its callers (`watched()`, `using_watcher()`), by
/// namespace and path: what [`remove_all`](crate::WatchesBuilder::remove_all) ends.
#[derive(Debug, Default)]
pub(crate) struct HeldWatches {
    next_id: AtomicU64,
    by_path: Mutex<HashMap<String, Vec<Held>>>,
}

#[derive(Debug)]
struct Held {
    id: u64,
    kind: WatcherType,
    end: oneshot::Sender<Ack>,
}

/// Told to `remove_all` when dropped: by then the held watcher is dropped (so zookeeper-client
/// has queued its removal).
#[derive(Debug)]
pub(crate) struct Ack(Option<oneshot::Sender<()>>);

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl HeldWatches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Held>>> {
        self.by_path.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes out the watches of `key` of type `of_type`.
    fn take(&self, key: &str, of_type: WatcherType) -> Vec<Held> {
        let mut by_path = self.lock();
        let Some(held) = by_path.get_mut(key) else { return Vec::new() };
        let (taken, kept) = held.drain(..).partition(|h| of_type == WatcherType::Any || h.kind == of_type);
        *held = kept;
        if held.is_empty() {
            by_path.remove(key);
        }
        taken
    }
}

/// One watch the framework holds; leaves the registry when dropped.
#[derive(Debug)]
pub(crate) struct HeldWatch {
    fw: CuratorFramework,
    key: String,
    id: u64,
    end: Option<oneshot::Receiver<Ack>>,
}

impl HeldWatch {
    /// `work` (the wait for the watch's next event), or `Err` with an [`Ack`] when
    /// `remove_all` ended the watch first. `work` is dropped before this returns; the caller
    /// drops the watcher, then the `Ack`.
    pub(crate) async fn until_removed<T>(&mut self, work: impl Future<Output = T>) -> std::result::Result<T, Ack> {
        let Some(end) = self.end.as_mut() else { return Ok(work.await) };
        let mut work = std::pin::pin!(work);
        let ended = tokio::select! {
            biased;
            value = &mut work => return Ok(value),
            ended = end => ended,
        };
        self.end = None;
        match ended {
            Ok(ack) => Err(ack),
            // The registry forgot this watch without ending it: nothing ends it now.
            Err(_) => Ok(work.await),
        }
    }
}

impl Drop for HeldWatch {
    fn drop(&mut self) {
        let mut by_path = self.fw.inner.held_watches.lock();
        if let Some(held) = by_path.get_mut(&self.key) {
            held.retain(|h| h.id != self.id);
            if held.is_empty() {
                by_path.remove(&self.key);
            }
        }
    }
}

impl CuratorFramework {
    /// The registry key of `path` under this handle's namespace.
    fn held_key(&self, path: &str) -> String {
        format!("{}\u{0}{path}", self.namespace().unwrap_or(""))
    }

    /// Registers a watch the framework holds on `path` for a caller.
    pub(crate) fn hold_watch(&self, path: &str, kind: WatcherType) -> HeldWatch {
        let registry = &self.inner.held_watches;
        let id = registry.next_id.fetch_add(1, Ordering::Relaxed);
        let (end, rx) = oneshot::channel();
        let key = self.held_key(path);
        registry.lock().entry(key.clone()).or_default().push(Held { id, kind, end });
        HeldWatch { fw: self.clone(), key, id, end: Some(rx) }
    }
}

/// Builder of the removal of the watches of a path that the framework holds: Curator's
/// `removeAll()`. See [`WatchesBuilder::remove_all`](crate::WatchesBuilder::remove_all).
///
/// It ends every watch of the path (and [type](Self::of_type)) set with `watched()` or
/// `using_watcher()` through this framework (any namespace handle of it): nobody is told of
/// them any more, and zookeeper-client removes each from the server. Watches handed to the
/// caller (a [`Watch`], a [`PersistentWatch`]) are not touched: remove them with
/// [`remove`](crate::WatchesBuilder::remove). Unlike Curator, no `DataWatchRemoved` event is
/// delivered to the removed watchers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_core::{CuratorError, WatcherType};
///
/// fw.check_exists().using_watcher(|_event| {}).for_path("/job").await?;
/// fw.get_children().watched().for_path("/").await?;
/// fw.watches().remove_all().of_type(WatcherType::Data).for_path("/job").await?;
/// // Nothing left of that type: NoWatcher, unless quietly().
/// let again = fw.watches().remove_all().for_path("/job").await;
/// assert!(matches!(again, Err(CuratorError::NoWatcher { .. })));
/// fw.watches().remove_all().quietly().for_path("/job").await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RemoveAllWatchesBuilder {
    fw: CuratorFramework,
    of_type: WatcherType,
    local: bool,
    quietly: bool,
}

impl RemoveAllWatchesBuilder {
    pub(crate) fn new(fw: CuratorFramework) -> Self {
        Self { fw, of_type: WatcherType::Any, local: false, quietly: false }
    }

    /// Remove only the watches of this type ([`WatcherType::Any`] by default).
    pub fn of_type(mut self, of_type: WatcherType) -> Self {
        self.of_type = of_type;
        self
    }

    /// Do not wait for the server, which may be out of reach: the watches end at once (in the
    /// background too: the callback comes at once, whatever the connection), and the client
    /// tells the server when it is connected.
    pub fn locally(mut self) -> Self {
        self.local = true;
        self
    }

    /// No watch to remove ([`NoWatcher`](CuratorError::NoWatcher)) is not an error.
    pub fn quietly(mut self) -> Self {
        self.quietly = true;
        self
    }

    /// Removes the held watches on `path`. Without [`locally`](Self::locally), returns once
    /// the server has handled the removals: one request on the path after them (an exists
    /// check, under the retry policy), which the server answers after them.
    pub fn for_path(self, path: &str) -> Pending<()> {
        let kind = CuratorEventType::RemoveWatches;
        if let Err(err) = path::validate(path) {
            return Pending::failed(&self.fw, kind, path, err);
        }
        let Self { fw, of_type, local, quietly } = self;
        let owned = path.to_string();
        let pending = Pending::new(&fw.clone(), kind, path, async move {
            let held = fw.inner.held_watches.take(&fw.held_key(&owned), of_type);
            if held.is_empty() {
                tracing::debug!(path = %owned, ?of_type, "removeWatches (all): none held");
                return if quietly { Ok(()) } else { Err(CuratorError::NoWatcher { path: owned }) };
            }
            tracing::debug!(path = %owned, ?of_type, count = held.len(), local, "removeWatches (all)");
            let mut acks = Vec::new();
            for h in held {
                let (tx, rx) = oneshot::channel();
                // A watch that fired meanwhile has gone already: its task is over.
                let _ = h.end.send(Ack(Some(tx)));
                acks.push(rx);
            }
            // Each task drops its watcher at once; bounded all the same, never to hang.
            let _ = tokio::time::timeout(fw.connection_timeout(), futures::future::join_all(acks)).await;
            if local {
                return Ok(());
            }
            fw.call_with_retry("remove_watches", &owned, |session, _| {
                let path = owned.clone();
                async move {
                    tracing::debug!(path = %path, "exists (after removeWatches)");
                    session.client().check_stat(&path).await.map(drop).map_err(|e| CuratorError::from_zk(&path, e))
                }
            })
            .await
        });
        if local {
            pending.sending_nothing()
        } else {
            pending
        }
    }
}
