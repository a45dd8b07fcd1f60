//! [`CacheCore`]: the handle a cache holds on its engine. It starts the engine's task, passes
//! commands to it, reports its progress, and stops it on close or drop.

use std::sync::{Arc, Mutex};

use curator_core::{CuratorError, CuratorFramework, Result};
use tokio::sync::{mpsc, oneshot, watch};

use super::event_loop::Engine;
use super::{EngineConfig, Scope, Shared, Sink};

/// What a cache asks of its running engine.
pub(super) enum Command {
    /// Load again without events.
    Rebuild(oneshot::Sender<Result<()>>),
    /// Forget everything without events, then load again with events.
    ClearAndRefresh(oneshot::Sender<Result<()>>),
    /// Read one node again and replace (or drop) it in the map, without events.
    RebuildNode(String, oneshot::Sender<Result<()>>),
}

/// Where a cache is in its life; it only moves forward.
enum Lifecycle {
    /// Built, not started.
    Latent,
    /// The engine runs; these reach it.
    Started(Running),
    /// Closed (started or not); nothing runs.
    Closed,
}

/// The channels to a running engine.
struct Running {
    commands: mpsc::UnboundedSender<Command>,
    shutdown: watch::Sender<bool>,
}

/// The part every cache has: configuration, the shared map, and the engine's handle.
pub(crate) struct CacheCore {
    fw: CuratorFramework,
    config: Arc<EngineConfig>,
    pub(crate) shared: Arc<Shared>,
    lifecycle: Mutex<Lifecycle>,
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
            lifecycle: Mutex::new(Lifecycle::Latent),
            clear_on_close,
        })
    }

    /// The path of the cache's root.
    pub(crate) fn root(&self) -> &str {
        &self.config.scope.root
    }

    /// What the cache holds.
    pub(crate) fn scope(&self) -> &Scope {
        &self.config.scope
    }

    fn lifecycle(&self) -> std::sync::MutexGuard<'_, Lifecycle> {
        self.lifecycle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the engine on the current runtime with `sink` receiving its events.
    pub(crate) fn start(&self, sink: Sink) -> Result<tokio::runtime::Handle> {
        let mut lifecycle = self.lifecycle();
        match *lifecycle {
            Lifecycle::Started(_) => return Err(CuratorError::IllegalState("the cache is already started".into())),
            Lifecycle::Closed => return Err(CuratorError::IllegalState("the cache is closed".into())),
            Lifecycle::Latent => {}
        }
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: "the cache" })?;
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (shutdown_tx, shutdown) = watch::channel(false);
        // Subscribe now, so that no transition after start() is missed.
        let states = self.fw.connection_state_stream();
        let engine = Engine::new(&self.fw, self.config.clone(), self.shared.clone(), sink, commands, shutdown);
        tracing::debug!(path = %self.config.scope.root, "starting cache");
        handle.spawn(engine.run(states));
        *lifecycle = Lifecycle::Started(Running { commands: commands_tx, shutdown: shutdown_tx });
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

    async fn command(&self, make: impl FnOnce(oneshot::Sender<Result<()>>) -> Command) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        match &*self.lifecycle() {
            Lifecycle::Started(running) => running.commands.send(make(tx)).map_err(|_| CuratorError::Closed)?,
            Lifecycle::Latent | Lifecycle::Closed => {
                return Err(CuratorError::IllegalState("the cache is not running".into()))
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

    /// Reads the node at `full_path` (in scope) again and replaces it in the map, or drops it if
    /// it is gone, without events. When a load is due anyway, waits for that load instead.
    pub(crate) async fn rebuild_node(&self, full_path: &str) -> Result<()> {
        let path = full_path.to_string();
        self.command(move |reply| Command::RebuildNode(path, reply)).await
    }

    /// Stops the engine (its watch is removed), and clears the map unless told not to.
    pub(crate) fn close(&self) {
        let mut lifecycle = self.lifecycle();
        match std::mem::replace(&mut *lifecycle, Lifecycle::Closed) {
            Lifecycle::Closed => return,
            Lifecycle::Started(running) => {
                running.shutdown.send_replace(true);
            }
            Lifecycle::Latent => {}
        }
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
