//! Persistent and persistent-recursive watches (ZooKeeper 3.6+): `watches().add()`.
//!
//! A persistent watch lives as long as its session. [`PersistentWatch::next`] returns `None`
//! once the session has ended (zookeeper-client panics if its watcher is polled after that, so
//! this wrapper never does); the caller adds a new watch on the new session.

use std::sync::Arc;

use zookeeper_client as zk;

use crate::background::{CuratorEvent, CuratorEventType, EventData};
use crate::error::CuratorError;
use crate::framework::CuratorFramework;
use crate::ops::Pending;
use crate::path;

pub use zookeeper_client::AddWatchMode;

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
    /// Watch management: persistent watches.
    pub fn watches(&self) -> WatchesBuilder {
        WatchesBuilder { fw: self.clone() }
    }
}

impl WatchesBuilder {
    /// Adds a persistent watch (recursive by default, as Curator's `addWatch()`).
    pub fn add(self) -> AddWatchBuilder {
        AddWatchBuilder { fw: self.fw, mode: AddWatchMode::PersistentRecursive, watcher: None }
    }

    /// Removes a persistent watch from the server.
    pub fn remove(self, watch: PersistentWatch) {
        drop(watch);
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
        if let Err(err) = path::validate(path) {
            return Pending::failed(&self.fw, CuratorEventType::AddWatch, path, err);
        }
        let (fw, owned, mode, watcher) = (self.fw.clone(), path.to_string(), self.mode, self.watcher);
        Pending::new(&self.fw, CuratorEventType::AddWatch, path, async move {
            let watch = fw
                .call_with_retry("add_watch", &owned, |session, _| {
                    let path = &owned;
                    async move {
                        let inner =
                            session.client().watch(path, mode).await.map_err(|e| CuratorError::from_zk(path, e))?;
                        Ok(PersistentWatch { inner: Some(inner), generation: session.generation() })
                    }
                })
                .await?;
            if let Some(watcher) = watcher {
                let mut watch = watch;
                crate::background::spawn_detached(async move {
                    while let Some(event) = watch.next().await {
                        let watcher = watcher.clone();
                        let _ = tokio::task::spawn_blocking(move || watcher(event)).await;
                    }
                });
                return Ok(PersistentWatch { inner: None, generation: 0 });
            }
            Ok(watch)
        })
    }
}

/// A persistent watch: a stream of events until its session ends.
#[derive(Debug)]
pub struct PersistentWatch {
    inner: Option<zk::PersistentWatcher>,
    generation: u64,
}

impl PersistentWatch {
    /// The next event, or `None` once the session has ended (the watch is gone with it) or the
    /// watch was handed to a watcher callback.
    ///
    /// Disconnections arrive as events with `event_type == Session`; the watch survives them.
    pub async fn next(&mut self) -> Option<zk::WatchedEvent> {
        let watcher = self.inner.as_mut()?;
        let event = watcher.changed().await;
        if event.event_type == zk::EventType::Session && event.session_state.is_terminated() {
            self.inner = None;
        }
        Some(event)
    }

    /// The framework's session generation the watch was added on.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True once the session of this watch has ended.
    pub fn is_terminated(&self) -> bool {
        self.inner.is_none()
    }
}

impl EventData for PersistentWatch {
    fn fill(&self, _event: &mut CuratorEvent) {}
}
