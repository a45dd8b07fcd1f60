//! [`CacheCore`]: the handle a cache holds on its engine. It starts the engine's task (through
//! core's [`Lifecycle`], which names the cache in its errors), passes
//! commands to it, reports its progress, and stops it on close or drop.

use std::sync::Arc;

use curator_core::{CuratorError, CuratorFramework, Result};
use curator_core::{LifeState, Lifecycle};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::command::Command;
use super::event_loop::Engine;
use super::{EngineConfig, FirstLoad, Scope, Shared, Sink};

/// The channels to a running engine: what the cache's [`Lifecycle`] keeps while started.
struct Running {
    commands: mpsc::UnboundedSender<Command>,
    shutdown: watch::Sender<bool>,
}

/// The part every cache has: configuration, the shared map, and the engine's handle.
pub(crate) struct CacheCore {
    fw: CuratorFramework,
    config: Arc<EngineConfig>,
    pub(crate) shared: Arc<Shared>,
    life: Lifecycle<Running>,
    clear_on_close: bool,
}

impl CacheCore {
    /// Checks the root path and builds a cache core that is not started.
    pub(crate) fn new(fw: &CuratorFramework, config: EngineConfig, clear_on_close: bool) -> Result<Self> {
        curator_core::path::validate(&config.scope.root)?;
        Ok(Self {
            fw: fw.clone(),
            life: Lifecycle::new(config.what),
            config: Arc::new(config),
            shared: Arc::new(Shared::new()),
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

    /// Starts the engine on the current runtime with `sink` receiving its events, after
    /// `on_start` (the cache's listeners start there, before any event); `on_refused` runs if
    /// the first load is refused (see [`FirstLoad`]). Sync: the first load is the engine's.
    ///
    /// # Errors
    /// The [`Lifecycle::start`] refusals, naming the cache's type.
    pub(crate) fn start(
        &self,
        sink: Sink,
        any_failure_refuses: bool,
        on_start: impl FnOnce(&tokio::runtime::Handle),
        on_refused: Box<dyn FnOnce() + Send>,
    ) -> Result<()> {
        self.life.start(&self.fw, |starting| {
            let (commands_tx, commands) = mpsc::unbounded_channel();
            let (shutdown_tx, shutdown) = watch::channel(false);
            // Subscribe now, so that no transition after start() is missed.
            let states = self.fw.connection_state_stream();
            let first = FirstLoad { readiness: starting.readiness(), any_failure_refuses, on_refused };
            let engine =
                Engine::new(&self.fw, self.config.clone(), self.shared.clone(), (sink, first), commands, shutdown);
            on_start(starting.handle());
            tracing::debug!(path = %self.config.scope.root, "starting cache");
            starting.spawn(engine.run(states));
            Ok(Running { commands: commands_tx, shutdown: shutdown_tx })
        })
    }

    /// Waits for the outcome of the first load (the lifecycle's
    /// [`ready`](Lifecycle::ready)): `Ok` once it is done; the refusal that closed the cache;
    /// `NotStarted` before a start, `AlreadyClosed` if closed first, and
    /// [`Closed`](CuratorError::Closed) if the engine stopped first (its framework closed).
    pub(crate) async fn wait_initialized(&self) -> Result<()> {
        let mut status = self.shared.status.subscribe();
        tokio::select! {
            biased;
            outcome = self.life.ready() => outcome,
            _ = status.wait_for(|s| s.stopped) => {
                // An outcome reported just before the engine stopped wins.
                self.life.ready().now_or_never().unwrap_or(Err(CuratorError::Closed))
            }
        }
    }

    /// Where the cache is in its life.
    pub(crate) fn state(&self) -> LifeState {
        self.life.state()
    }

    /// Whether the first load is done.
    pub(crate) fn is_initialized(&self) -> bool {
        self.shared.status.borrow().initialized
    }

    async fn command(&self, make: impl FnOnce(oneshot::Sender<Result<()>>) -> Command) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.life.with_started(|running| running.commands.send(make(tx)))?.map_err(|_| CuratorError::Closed)?;
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

    /// Stops the engine (its watch is removed), and clears the map unless told not to. Idempotent;
    /// a cache closed before it started can no longer start.
    pub(crate) fn close(&self) {
        let was = self.life.state();
        if let Some(running) = self.life.close() {
            running.shutdown.send_replace(true);
        } else if was == LifeState::Closed {
            return;
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
