//! [`CacheShell`]: what the four caches do alike around their engine. A cache wraps one and
//! keeps only what is its own: its event type, the translation of the engine's events into
//! it, and its accessors.
//!
//! The shell starts the engine with the cache's translation, hands the translated events to
//! core's [`Listeners`] (callbacks and streams), reports the outcome of the first load
//! (`wait_initialized`, the caches' `ready` in [`curator_core::Lifecycle`]), and closes
//! the engine and the listeners on `close`, on a refused first load, and on drop.

use std::sync::Arc;

use curator_core::LifeState;
use curator_core::{Callback, EventStream, ListenerId, Listeners};
use curator_core::{ConnectionState, ConnectionStateEvent, CuratorFramework, Result};

use crate::engine::{CacheCore, EngineConfig, EngineEvent};

/// What a cache makes of one engine event.
pub(crate) enum Translated<E> {
    /// Nothing for the listeners.
    Nothing,
    /// An event for the listeners.
    Event(E),
    /// An event for the listeners, which listeners added later hear first (see
    /// [`Listeners::publish_and_greet`]).
    Greeting(E),
}

/// The connection changes the Curator caches other than `CuratorCache` report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionChange {
    Suspended,
    Reconnected,
    Lost,
}

impl ConnectionChange {
    /// The change `event` reports, if it is one of those.
    pub(crate) fn of(event: &ConnectionStateEvent) -> Option<Self> {
        match event.state {
            ConnectionState::Suspended => Some(Self::Suspended),
            ConnectionState::Connected | ConnectionState::Reconnected => Some(Self::Reconnected),
            ConnectionState::Lost => Some(Self::Lost),
            ConnectionState::ReadOnly | ConnectionState::Latent | ConnectionState::Closed => None,
            // A state added to curator-core later: not one of the caches' changes.
            _ => None,
        }
    }
}

/// An engine and the listeners of its cache's events `E`. Dropping it closes the cache.
pub(crate) struct CacheShell<E: Clone + Send + 'static> {
    core: CacheCore,
    listeners: Arc<Listeners<E>>,
}

impl<E: Clone + Send + 'static> CacheShell<E> {
    /// Checks the root path and builds a shell that is not started.
    pub(crate) fn new(fw: &CuratorFramework, config: EngineConfig, clear_on_close: bool) -> Result<Self> {
        Ok(Self { core: CacheCore::new(fw, config, clear_on_close)?, listeners: Arc::new(Listeners::new()) })
    }

    /// The engine's handle: the map, the scope, the commands.
    pub(crate) fn core(&self) -> &CacheCore {
        &self.core
    }

    /// Starts the engine; `translate` runs on the engine's task for each of its events and must
    /// not block. With `any_failure_refuses`, any failure of the first load (not only a refusal
    /// no retry mends) closes the cache (see [`CacheCore::start`]). A refusal ends the
    /// listeners too.
    pub(crate) fn start(
        &self,
        any_failure_refuses: bool,
        mut translate: impl FnMut(EngineEvent) -> Translated<E> + Send + 'static,
    ) -> Result<()> {
        let listeners = self.listeners.clone();
        let sink = Box::new(move |event: EngineEvent| match translate(event) {
            Translated::Nothing => {}
            Translated::Event(event) => listeners.publish(event),
            Translated::Greeting(event) => listeners.publish_and_greet(event),
        });
        let refused = self.listeners.clone();
        self.core.start(
            sink,
            any_failure_refuses,
            |handle| self.listeners.start(handle.clone()),
            Box::new(move || refused.close()),
        )
    }

    /// Waits for the outcome of the first load (see [`CacheCore::wait_initialized`]).
    pub(crate) async fn wait_initialized(&self) -> Result<()> {
        self.core.wait_initialized().await
    }

    /// Where the cache is in its life.
    pub(crate) fn state(&self) -> LifeState {
        self.core.state()
    }

    /// Stops the engine and its watch; listener streams end after the events already queued.
    pub(crate) fn close(&self) {
        self.core.close();
        self.listeners.close();
    }

    /// Adds a callback listener; it runs on the blocking pool, in event order.
    pub(crate) fn add_listener(&self, listener: Callback<E>) -> ListenerId {
        self.listeners.add_callback(listener)
    }

    /// Removes a listener. False if it was not there.
    pub(crate) fn remove_listener(&self, id: ListenerId) -> bool {
        self.listeners.remove(id)
    }

    /// An ordered stream of the events from now on.
    pub(crate) fn events(&self) -> EventStream<E> {
        self.listeners.stream()
    }

    /// Formats the cache as `name { path: .. }`.
    pub(crate) fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(name).field("path", &self.core.root()).finish_non_exhaustive()
    }
}

impl<E: Clone + Send + 'static> Drop for CacheShell<E> {
    fn drop(&mut self) {
        self.close();
    }
}
