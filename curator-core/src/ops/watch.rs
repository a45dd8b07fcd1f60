//! Persistent and persistent-recursive watches (ZooKeeper 3.6+): `watches().add()`.
//!
//! A persistent watch lives as long as its session. [`PersistentWatch::next`] returns `None`
//! once the session has ended (zookeeper-client panics if its watcher is polled after that, so
//! this wrapper never does); the caller adds a new watch on the new session.
//!
//! After a reconnection to the same session the watch is added again: zookeeper-client 0.11.2
//! re-registers only one-shot watches with the server when it reconnects, so a persistent watch
//! would otherwise go silent. Changes made while disconnected are not replayed (a server-side
//! limit, ZOOKEEPER-4698): re-read what you need after a `SyncConnected` session event.

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
                    let (path, fw) = (&owned, &fw);
                    async move {
                        let inner =
                            session.client().watch(path, mode).await.map_err(|e| CuratorError::from_zk(path, e))?;
                        Ok(PersistentWatch {
                            inner: Some(inner),
                            generation: session.generation(),
                            fw: Some(fw.clone()),
                            path: path.clone(),
                            mode,
                            disconnected: false,
                        })
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
                return Ok(PersistentWatch {
                    inner: None,
                    generation: 0,
                    fw: None,
                    path: String::new(),
                    mode,
                    disconnected: false,
                });
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
    fw: Option<CuratorFramework>,
    path: String,
    mode: AddWatchMode,
    disconnected: bool,
}

impl PersistentWatch {
    /// The next event, or `None` once the session has ended (the watch is gone with it) or the
    /// watch was handed to a watcher callback.
    ///
    /// Disconnections arrive as events with `event_type == Session`; the watch survives them.
    pub async fn next(&mut self) -> Option<zk::WatchedEvent> {
        let watcher = self.inner.as_mut()?;
        let event = watcher.changed().await;
        if event.event_type == zk::EventType::Session {
            match event.session_state {
                s if s.is_terminated() => self.inner = None,
                zk::SessionState::Disconnected => self.disconnected = true,
                zk::SessionState::SyncConnected if self.disconnected => {
                    self.disconnected = false;
                    self.add_again().await;
                }
                _ => {}
            }
        }
        Some(event)
    }

    /// Adds the watch again on the same session after a reconnection. The new watcher is in
    /// place before the old one is dropped, so no removal reaches the server.
    async fn add_again(&mut self) {
        let Some(fw) = &self.fw else { return };
        let Ok(session) = fw.session_for(&self.path).await else { return };
        if session.generation() != self.generation {
            return;
        }
        match session.client().watch(&self.path, self.mode).await {
            Ok(watcher) => {
                tracing::debug!(path = %self.path, "persistent watch added again after a reconnection");
                self.inner = Some(watcher);
            }
            Err(err) => tracing::warn!(path = %self.path, error = %err, "could not add the persistent watch again"),
        }
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
