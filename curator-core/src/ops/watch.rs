//! Persistent and persistent-recursive watches (ZooKeeper 3.6+): `watches().add()`.
//!
//! This module owns every workaround the framework needs around zookeeper-client's watchers;
//! nothing else in the workspace polls a raw persistent watcher but the private `Fused`
//! wrapper it is built on (module `watcher`, below this module and the session manager, which
//! both use it):
//!
//! - **Never poll after the session ended.** zookeeper-client panics if a watcher is polled
//!   after it delivered a terminal session event. [`PersistentWatch::next`] returns `None`
//!   instead (and so does the session manager's event watch, built on the same `Fused`); the
//!   caller adds a new watch on the new session.
//! - **Re-add after a reconnection.** zookeeper-client 0.11.2 re-registers only one-shot watches
//!   when it reconnects (its `resend_watches` never raises the watch-kind index), so a persistent
//!   watch would go silent. [`PersistentWatch::next`] adds it again on the same session before
//!   it returns the `SyncConnected` event. Changes made while disconnected are not replayed (a
//!   server-side limit, ZOOKEEPER-4698): re-read what you need after that event.
//! - **Re-add after a one-shot watch replaced it (ZOOKEEPER-4466).** ZooKeeper before 3.9 keeps
//!   one watch mode per path and connection: a one-shot data watch that the same session sets
//!   on the path replaces the persistent one. Whoever sees that happen (a cache after a change of
//!   its root) calls [`PersistentWatch::register_again`].
//! - **Pause between attempts to add a watch again.** Whoever adds a persistent watch again
//!   after a failed attempt (the persistent watcher recipe, the caches) paces the attempts with
//!   one schedule, [`readd_pause`].
//! - **Let a one-shot watch we no longer want fire.** zookeeper-client sends a RemoveWatches
//!   request for a one-shot watch dropped before it fired; [`let_fire`] keeps it for the change
//!   of ours that is about to fire it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::Stream;

use zookeeper_client as zk;

use crate::background::{CuratorEvent, CuratorEventType, EventData};
use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::framework::Session;
use crate::listeners::Listeners;
use crate::ops::remove_watch::{RemovableWatch, RemoveAllWatchesBuilder, RemoveWatchesBuilder, WatcherType};
use crate::ops::Pending;
use crate::path;
use crate::retry::RetryLoop;
use crate::schema_set::SchemaOp;
use crate::task::BoxFuture;
use crate::watcher::Fused;

pub use zookeeper_client::AddWatchMode;

/// The longest pause of [`readd_pause`], once the framework is closed (whoever pauses hears of
/// the close meanwhile): the cleanup loop's longest.
pub const READD_MAX_PAUSE: Duration = Duration::from_secs(2);

/// The pause before trying again to add a persistent watch (or, for a cache, to load again over
/// it) after an attempt that failed with `err`, and counts the retry in `pauses`: the one
/// schedule of such attempts. `pauses` is the framework's
/// [`cleanup_retry_loop`](CuratorFramework::cleanup_retry_loop), reset whenever the watch is
/// in place: 50 ms doubling to 2 s (jittered) after every failure, whether or not a retry may
/// mend `err` (a framework not started yet, a refused permission: the watch is wanted all the
/// same), for as long as the framework is open; then [`READD_MAX_PAUSE`].
pub fn readd_pause(pauses: &mut RetryLoop, err: &CuratorError) -> Duration {
    pauses.next_pause(err).or_else(|| pauses.next_pause_after_failure()).unwrap_or(READD_MAX_PAUSE)
}

/// How long [`let_fire`] keeps a one-shot watch for the change that is to fire it.
pub const LET_FIRE_WAIT: Duration = Duration::from_secs(2);

/// Ends a one-shot watch we no longer want without a RemoveWatches request, when a request of
/// ours fires it (we deleted the watched node, or a child of the watched parent): waits for
/// `fired` (a [`Watch`](crate::Watch)'s [`changed`](crate::Watch::changed), or
/// zookeeper-client's `OneshotWatcher::changed`) at most [`LET_FIRE_WAIT`]; true if it fired.
///
/// zookeeper-client sends a RemoveWatches request for a one-shot watch dropped before it fired
/// (docs/architecture.md section 2.2). The server sends a watch's event before the reply to the
/// request that fired it, so once that reply is in, the wait costs nothing; the bound only keeps
/// a watch whose event never comes from holding the caller up (dropped then, it costs the
/// request after all). A watch nothing of ours will fire is better dropped at once.
pub async fn let_fire(fired: impl Future<Output = zk::WatchedEvent>) -> bool {
    tokio::time::timeout(LET_FIRE_WAIT, fired).await.is_ok()
}

/// Entry point of watch management. See [`CuratorFramework::watches`].
#[derive(Debug, Clone)]
pub struct WatchesBuilder {
    fw: CuratorFramework,
}

/// Builder of a persistent watch.
#[derive(Clone)]
pub struct AddWatchBuilder {
    fw: CuratorFramework,
    mode: AddWatchMode,
    watcher: Option<Arc<dyn Fn(zk::WatchedEvent) + Send + Sync>>,
}

impl CuratorFramework {
    /// Watch management: adding persistent watches, and removing watches (one-shot or
    /// persistent) with the server's answer.
    pub fn watches(&self) -> WatchesBuilder {
        WatchesBuilder { fw: self.clone() }
    }
}

impl WatchesBuilder {
    /// Adds a persistent watch (recursive by default, as Curator's `addWatch()`).
    pub fn add(self) -> AddWatchBuilder {
        AddWatchBuilder { fw: self.fw, mode: AddWatchMode::PersistentRecursive, watcher: None }
    }

    /// Removes a watch: a one-shot [`Watch`](crate::Watch) or a [`PersistentWatch`], with
    /// Curator's options (`of_type`, `locally`, `guaranteed`, `quietly`); see
    /// [`RemoveWatchesBuilder`]. The removal takes the watch: nothing more is heard from it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::WatcherType;
    ///
    /// let (_, _, watch) = fw.get_data().for_path_and_watch("/zookeeper").await?;
    /// fw.watches().remove(watch).of_type(WatcherType::Data).for_path("/zookeeper").await?;
    /// // locally(): no wait for the server, which may be out of reach.
    /// let (_, watch) = fw.check_exists().for_path_and_watch("/jobs").await?;
    /// fw.watches().remove(watch).locally().for_path("/jobs").await?;
    /// # Ok(()) }
    /// ```
    pub fn remove(self, watch: impl Into<RemovableWatch>) -> RemoveWatchesBuilder {
        RemoveWatchesBuilder::new(self.fw, watch.into())
    }

    /// Removes the watches of a path that the framework holds: those set with `watched()` or
    /// `using_watcher()` (reads, and persistent watches given a watcher); see
    /// [`RemoveAllWatchesBuilder`]. Watches handed to the caller are removed with
    /// [`remove`](Self::remove).
    pub fn remove_all(self) -> RemoveAllWatchesBuilder {
        RemoveAllWatchesBuilder::new(self.fw)
    }
}

impl AddWatchBuilder {
    /// `Persistent` (the node only) or `PersistentRecursive` (the node and all below it).
    pub fn with_mode(mut self, mode: AddWatchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Deliver every event to `watcher` from a task the framework runs, instead of returning
    /// the watch to the caller. It runs until the session ends.
    pub fn using_watcher(mut self, watcher: impl Fn(zk::WatchedEvent) + Send + Sync + 'static) -> Self {
        self.watcher = Some(Arc::new(watcher));
        self
    }

    /// Adds the watch on `path`.
    pub fn for_path(self, path: &str) -> Pending<PersistentWatch> {
        if let Err(err) = path::validate(path).and_then(|_| self.fw.check_schema(path, SchemaOp::Watch(true))) {
            return Pending::failed(&self.fw, CuratorEventType::AddWatch, path, err);
        }
        let (fw, owned, mode, watcher) = (self.fw.clone(), path.to_string(), self.mode, self.watcher);
        Pending::new(&self.fw, CuratorEventType::AddWatch, path, async move {
            let watch = fw
                .call_with_retry("add_watch", &owned, |session, _| {
                    let (path, fw) = (&owned, &fw);
                    async move { PersistentWatch::add_on(fw, &session, path, mode).await }
                })
                .await?;
            if let Some(watcher) = watcher {
                let mut watch = watch;
                let queue = Listeners::new();
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    queue.start(handle);
                }
                queue.add_callback(Arc::new(move |event: &zk::WatchedEvent| watcher(event.clone())));
                let kind = match mode {
                    AddWatchMode::Persistent => WatcherType::Persistent,
                    AddWatchMode::PersistentRecursive => WatcherType::PersistentRecursive,
                };
                let mut held = fw.hold_watch(&owned, kind);
                crate::task::spawn_detached(async move {
                    loop {
                        match held.until_removed(watch.next()).await {
                            Ok(Some(event)) => queue.publish(event),
                            Ok(None) => break,
                            // Ended by `remove_all`: the watch is dropped (which removes it)
                            // before `remove_all` hears so.
                            Err(ack) => {
                                drop(watch);
                                drop(ack);
                                break;
                            }
                        }
                    }
                    queue.close();
                });
                return Ok(PersistentWatch {
                    inner: Fused::ended(),
                    generation: 0,
                    epoch: 0,
                    fw: None,
                    path: String::new(),
                    mode,
                    link: Link::Up,
                    readd: Mutex::new(None),
                });
            }
            Ok(watch)
        })
    }
}

/// A persistent watch: a stream of events until its session ends, read with
/// [`next`](Self::next) or as a [`futures::Stream`] (both the same, and both cancel safe).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use futures::StreamExt;
/// use curator_core::{zk, CuratorFramework};
///
/// let server = curator_test::TestingServer::start().await?;
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// fw.start()?;
/// let watch = fw.watches().add().for_path("/config").await?;
/// fw.create().for_path("/config", b"v1".to_vec()).await?;
/// // Node events only, as a stream: session events (a disconnection, say) are left out.
/// let mut changes = watch.filter(|e| std::future::ready(e.event_type != zk::EventType::Session));
/// assert_eq!(changes.next().await.map(|e| e.event_type), Some(zk::EventType::NodeCreated));
/// fw.close().await;
/// # Ok(()) }
/// ```
pub struct PersistentWatch {
    inner: Fused,
    generation: u64,
    epoch: u64,
    fw: Option<CuratorFramework>,
    path: String,
    mode: AddWatchMode,
    link: Link,
    /// The adding again under way after a reconnection ([`Link::Readd`]), kept across polls. In
    /// a mutex only so that the watch stays `Sync`; reached through `get_mut`, never locked.
    readd: Mutex<Option<BoxFuture<Result<()>>>>,
}

/// Where a [`PersistentWatch`] stands with its connection.
#[derive(Debug, Clone)]
enum Link {
    /// Registered on the current connection.
    Up,
    /// The connection dropped; the server will forget the watch with it.
    Down,
    /// Connected again: the watch must be added again before this event is handed out. Kept
    /// across a dropped `next()`, which makes `next()` cancel safe.
    Readd(zk::WatchedEvent),
    /// Adding it again failed: the watch is silent until
    /// [`register_again`](PersistentWatch::register_again) succeeds.
    Unregistered,
}

impl PersistentWatch {
    /// The next event, or `None` once the session has ended (the watch is gone with it) or the
    /// watch was handed to a watcher callback.
    ///
    /// Disconnections arrive as events with `event_type == Session`; the watch survives them.
    pub async fn next(&mut self) -> Option<zk::WatchedEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The one reading of the watch, behind [`next`](Self::next) and [`Stream::poll_next`].
    /// Its state lives in the watch, not in a future, so a dropped `next()` loses nothing: after
    /// a reconnection the watch is added again before the `SyncConnected` event is handed out,
    /// and an add under way when the caller stopped polling is finished by the next poll.
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<zk::WatchedEvent>> {
        loop {
            let readd = self.readd.get_mut().unwrap_or_else(PoisonError::into_inner);
            if let Some(adding) = readd {
                let added = ready!(adding.as_mut().poll(cx));
                *readd = None;
                let Link::Readd(event) = std::mem::replace(&mut self.link, Link::Up) else {
                    continue;
                };
                if let Err(err) = added {
                    // A session that ended meanwhile takes the watch with it: its owner moves to
                    // the next session, so that is no cause for a warning.
                    if matches!(err, CuratorError::SessionExpired { .. }) {
                        tracing::debug!(path = %self.path, error = %err, "could not add the persistent watch again: its session ended");
                    } else {
                        tracing::warn!(path = %self.path, error = %err, "could not add the persistent watch again");
                    }
                    self.link = Link::Unregistered;
                }
                return Poll::Ready(Some(event));
            }
            if matches!(self.link, Link::Readd(_)) {
                // Connected again: add the watch before anyone hears of it.
                let adding = self.add_again();
                *self.readd.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(adding);
                continue;
            }
            // A new future each poll is sound: the watcher's channel keeps the waker.
            let event = ready!(std::pin::pin!(self.inner.next()).poll(cx));
            let Some(event) = event else { return Poll::Ready(None) };
            if event.event_type != zk::EventType::Session {
                return Poll::Ready(Some(event));
            }
            match (event.session_state, &self.link) {
                (zk::SessionState::Disconnected, _) => self.link = Link::Down,
                (zk::SessionState::SyncConnected, Link::Down | Link::Unregistered) => {
                    self.link = Link::Readd(event);
                    continue;
                }
                _ => {}
            }
            return Poll::Ready(Some(event));
        }
    }

    /// Adding the watch again on its session, as a future that owns what it needs.
    fn add_again(&self) -> BoxFuture<Result<()>> {
        let (fw, path, mode, epoch) = (self.fw.clone(), self.path.clone(), self.mode, self.epoch);
        let ended = self.inner.is_terminated();
        Box::pin(async move {
            let Some(fw) = fw else { return Ok(()) };
            let session = fw.session_for(&path).await?;
            if session.epoch() != epoch || ended {
                return Err(CuratorError::SessionExpired { path });
            }
            tracing::debug!(path = %path, "addWatch (again, same session)");
            // The watcher we hold keeps receiving: the new one only re-registers the watch with
            // the server and is dropped at once (ours still stands, so dropping it sends no
            // removal). Keeping the first watcher keeps zookeeper-client's order of the watchers
            // on this path stable, which matters when two watches of one session share the path.
            let added = session.client().watch(&path, mode).await;
            drop(added.map_err(|e| CuratorError::from_zk(&path, e))?);
            Ok(())
        })
    }

    /// False when adding the watch again after a reconnection failed: it hears nothing until
    /// [`register_again`](Self::register_again) succeeds.
    pub fn is_registered(&self) -> bool {
        !matches!(self.link, Link::Unregistered)
    }

    /// Adds a persistent watch on `path` on the given session (for recipes that pipeline their
    /// own requests on one session). No retry: the caller's loop decides.
    pub async fn add_on(fw: &CuratorFramework, session: &Session, path: &str, mode: AddWatchMode) -> Result<Self> {
        tracing::debug!(path, ?mode, "addWatch");
        let inner = session.client().watch(path, mode).await.map_err(|e| CuratorError::from_zk(path, e))?;
        Ok(PersistentWatch {
            inner: Fused::new(inner),
            generation: session.generation(),
            epoch: session.epoch(),
            fw: Some(fw.clone()),
            path: path.to_string(),
            mode,
            link: Link::Up,
            readd: Mutex::new(None),
        })
    }

    /// Adds the watch again on the same session: after a reconnection (done by
    /// [`next`](Self::next), which is cancel safe: dropped during the re-add, the next call
    /// finishes it before handing out the `SyncConnected` event), or after a one-shot watch of the same session replaced it
    /// (ZOOKEEPER-4466, servers before 3.9). The new watcher is in place before the old one is
    /// dropped, so no removal reaches the server. Fails with
    /// [`CuratorError::SessionExpired`] when the session of this watch is gone, or moved to another client.
    pub async fn register_again(&mut self) -> Result<()> {
        self.add_again().await?;
        if matches!(self.link, Link::Unregistered) {
            self.link = Link::Up;
        }
        Ok(())
    }

    /// The client ([`Session::epoch`]) the watch was added on: it ends with that client (a
    /// session that moved to another client needs the watch added there).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The framework's session generation the watch was added on.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The path the watch was added on (relative to the framework's namespace); empty for a
    /// watch handed to a watcher callback.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The mode the watch was added with.
    pub fn mode(&self) -> AddWatchMode {
        self.mode
    }

    /// The raw watcher, for `watches().remove()`; the watch has ended after.
    pub(crate) fn take_raw(&mut self) -> Option<zk::PersistentWatcher> {
        self.inner.take()
    }

    /// True once the session of this watch has ended.
    pub fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
}

impl std::fmt::Debug for PersistentWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let adding = self.readd.lock().map(|r| r.is_some()).unwrap_or_default();
        f.debug_struct("PersistentWatch")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("generation", &self.generation)
            .field("epoch", &self.epoch)
            .field("link", &self.link)
            .field("adding_again", &adding)
            .field("terminated", &self.inner.is_terminated())
            .finish()
    }
}

/// The events of [`next`](PersistentWatch::next), as a stream: it ends when the session does.
impl Stream for PersistentWatch {
    type Item = zk::WatchedEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<zk::WatchedEvent>> {
        self.get_mut().poll_event(cx)
    }
}

impl EventData for PersistentWatch {
    fn fill(&self, _event: &mut CuratorEvent) {}
}
