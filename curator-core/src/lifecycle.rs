//! The one lifecycle of every started thing: recipes, caches, discovery.
//!
//! Curator gives every recipe the same life (`LATENT -> STARTED -> STOPPED`, one `start()`, an
//! idempotent `close()`); this module is that idiom, written once (docs/architecture.md
//! section 6.4):
//!
//! | call | Latent | Started | Closed |
//! |---|---|---|---|
//! | `start` | Started (`Ok`) | [`AlreadyStarted`](CuratorError::AlreadyStarted) | [`AlreadyClosed`](CuratorError::AlreadyClosed) |
//! | `close` | Closed (nothing to tear down) | Closed (tear down) | nothing: idempotent |
//! | use ([`Lifecycle::with_started`]) | [`NotStarted`](CuratorError::NotStarted) | `Ok` | [`AlreadyClosed`](CuratorError::AlreadyClosed) |
//!
//! A start is also refused, with nothing changed, outside a tokio runtime
//! ([`NoRuntime`](CuratorError::NoRuntime): what starts runs as tasks) and on a closed framework
//! ([`Closed`](CuratorError::Closed)), unless the type says it has something to tell even then
//! ([`Lifecycle::tolerating_closed_framework`]). The runtime found at start is where the
//! thing's tasks run ([`Lifecycle::spawn`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> curator_core::Result<()> {
//! use curator_core::lifecycle::Lifecycle;
//! use curator_core::{CuratorError, CuratorFramework};
//!
//! let fw = CuratorFramework::builder().connect_string("127.0.0.1:1").build()?;
//! // What a recipe keeps while started: here, the sender that stops its task.
//! let life: Lifecycle<tokio::sync::oneshot::Sender<()>> = Lifecycle::new("Example");
//! assert!(matches!(life.with_started(|_| ()), Err(CuratorError::NotStarted { what: "Example" })));
//! life.start(&fw, |started| {
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     started.spawn(async move { let _ = stopped.await; });
//!     Ok(stop)
//! })?;
//! assert!(matches!(life.start(&fw, |_| unreachable!()), Err(CuratorError::AlreadyStarted { .. })));
//! if let Some(stop) = life.close() {
//!     let _ = stop.send(()); // the tear-down is the type's own
//! }
//! assert!(life.close().is_none(), "a second close finds nothing to tear down");
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::runtime::Handle;

use crate::listeners::EventStream;
use crate::{CuratorError, CuratorFramework, Result};

/// Where a started thing is in its life.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifeState {
    /// Made, not started yet.
    Latent,
    /// Started and not closed.
    Started,
    /// Closed (whether or not it was started).
    Closed,
}

enum Phase<S> {
    Latent,
    Started(S, Handle),
    Closed,
}

/// A start in progress: where the thing's tasks run (handed to `start`'s `make`).
#[derive(Debug)]
pub struct Starting<'a> {
    handle: &'a Handle,
}

impl Starting<'_> {
    /// The runtime the thing was started in.
    pub fn handle(&self) -> &Handle {
        self.handle
    }

    /// Spawns one of the thing's tasks on its runtime. The task is the thing's own: it must
    /// end by itself when the thing or the framework closes (it is not tracked by the
    /// framework's `close`, which would otherwise wait for every started recipe).
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(task);
    }

    /// Relays `stream` into `each` on the thing's runtime ([`EventStream::relay`]).
    pub fn relay<E: Send + 'static>(&self, stream: EventStream<E>, each: impl FnMut(E) + Send + 'static) {
        stream.relay(self.handle, each);
    }
}

/// The lifecycle of one started thing, with `S`, what it keeps while started (a sender to its
/// task, say), handed back to the close that tears it down. See the [module docs](self).
pub struct Lifecycle<S = ()> {
    what: &'static str,
    closed_framework_ok: bool,
    phase: Mutex<Phase<S>>,
}

impl<S> std::fmt::Debug for Lifecycle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle").field("what", &self.what).field("state", &self.state()).finish()
    }
}

impl<S> Lifecycle<S> {
    /// The lifecycle of a `what` (its type's name, as errors show it), latent.
    pub fn new(what: &'static str) -> Self {
        Self { what, closed_framework_ok: false, phase: Mutex::new(Phase::Latent) }
    }

    /// As [`new`](Self::new), for a type that starts on a closed framework too (to tell its
    /// listeners that the framework is closed, as a watcher does).
    pub fn tolerating_closed_framework(what: &'static str) -> Self {
        Self { closed_framework_ok: true, ..Self::new(what) }
    }

    fn lock(&self) -> MutexGuard<'_, Phase<S>> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the lifecycle is of.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// Where the thing is in its life.
    pub fn state(&self) -> LifeState {
        match *self.lock() {
            Phase::Latent => LifeState::Latent,
            Phase::Started(..) => LifeState::Started,
            Phase::Closed => LifeState::Closed,
        }
    }

    /// Latent to Started: checks the thing's state, the runtime and the framework, then runs
    /// `make` (which spawns the thing's tasks and returns what the close will need). An error
    /// from `make` leaves the thing latent, so that it can be started again.
    ///
    /// # Errors
    /// [`AlreadyStarted`](CuratorError::AlreadyStarted), [`AlreadyClosed`](CuratorError::AlreadyClosed),
    /// [`NoRuntime`](CuratorError::NoRuntime), [`Closed`](CuratorError::Closed) for a closed
    /// framework (unless [tolerated](Self::tolerating_closed_framework)), or `make`'s.
    pub fn start(&self, fw: &CuratorFramework, make: impl FnOnce(&Starting<'_>) -> Result<S>) -> Result<()> {
        let mut phase = self.lock();
        let handle = self.startable(&phase, fw)?;
        let kept = make(&Starting { handle: &handle })?;
        *phase = Phase::Started(kept, handle);
        tracing::debug!(what = self.what, "started");
        Ok(())
    }

    /// Whether [`start`](Self::start) would go ahead now, with nothing changed: for a type that
    /// has work to do (a create, a first read) before it starts, so that the work is not
    /// tried, and does not panic, where the start would be refused.
    ///
    /// # Errors
    /// As [`start`](Self::start), but for `make`'s.
    pub fn check_start(&self, fw: &CuratorFramework) -> Result<()> {
        self.startable(&self.lock(), fw).map(drop)
    }

    /// The checks of a start from `phase`: the runtime to start in, or why not.
    fn startable(&self, phase: &Phase<S>, fw: &CuratorFramework) -> Result<Handle> {
        match phase {
            Phase::Latent => {}
            Phase::Started(..) => return Err(CuratorError::AlreadyStarted { what: self.what }),
            Phase::Closed => return Err(CuratorError::AlreadyClosed { what: self.what }),
        }
        let handle = Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: self.what })?;
        if fw.is_closed() && !self.closed_framework_ok {
            return Err(CuratorError::Closed);
        }
        Ok(handle)
    }

    /// To Closed, from any state: what the start kept, for the caller to tear down, if this
    /// call closed a started thing; `None` if it was latent or closed already (a close is
    /// idempotent).
    pub fn close(&self) -> Option<S> {
        let mut phase = self.lock();
        match std::mem::replace(&mut *phase, Phase::Closed) {
            Phase::Started(kept, _) => {
                tracing::debug!(what = self.what, "closed");
                Some(kept)
            }
            Phase::Latent | Phase::Closed => None,
        }
    }

    /// Runs `f` on what the start kept, if started.
    ///
    /// # Errors
    /// [`NotStarted`](CuratorError::NotStarted) or [`AlreadyClosed`](CuratorError::AlreadyClosed).
    pub fn with_started<R>(&self, f: impl FnOnce(&S) -> R) -> Result<R> {
        match &*self.lock() {
            Phase::Started(kept, _) => Ok(f(kept)),
            Phase::Latent => Err(CuratorError::NotStarted { what: self.what }),
            Phase::Closed => Err(CuratorError::AlreadyClosed { what: self.what }),
        }
    }

    /// Spawns one more of the thing's tasks on the runtime it was started in (see
    /// [`Starting::spawn`]).
    ///
    /// # Errors
    /// As [`with_started`](Self::with_started).
    pub fn spawn<F>(&self, task: F) -> Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match &*self.lock() {
            Phase::Started(_, handle) => {
                handle.spawn(task);
                Ok(())
            }
            Phase::Latent => Err(CuratorError::NotStarted { what: self.what }),
            Phase::Closed => Err(CuratorError::AlreadyClosed { what: self.what }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framework() -> CuratorFramework {
        CuratorFramework::builder().connect_string("127.0.0.1:1").build().expect("a valid builder")
    }

    #[test]
    fn outside_a_runtime_a_start_is_refused_and_changes_nothing() {
        let life: Lifecycle = Lifecycle::new("Thing");
        let fw = framework();
        assert!(matches!(life.start(&fw, |_| Ok(())), Err(CuratorError::NoRuntime { what: "Thing" })));
        assert_eq!(life.state(), LifeState::Latent);
    }

    #[tokio::test]
    async fn the_table_of_calls() {
        let fw = framework();
        let life: Lifecycle<u32> = Lifecycle::new("Thing");
        assert!(life.close().is_none());
        assert_eq!(life.state(), LifeState::Closed);
        assert!(matches!(life.start(&fw, |_| Ok(1)), Err(CuratorError::AlreadyClosed { .. })));

        let life: Lifecycle<u32> = Lifecycle::new("Thing");
        assert!(matches!(
            life.start(&fw, |_| Err(CuratorError::NoAuth { path: "/x".into() })),
            Err(CuratorError::NoAuth { .. })
        ));
        assert_eq!(life.state(), LifeState::Latent, "a failed start leaves it latent");
        life.start(&fw, |_| Ok(7)).expect("starts");
        assert_eq!(life.with_started(|k| *k).ok(), Some(7));
        assert!(matches!(life.start(&fw, |_| Ok(8)), Err(CuratorError::AlreadyStarted { .. })));
        assert_eq!(life.close(), Some(7));
        assert_eq!(life.close(), None);
        assert!(matches!(life.with_started(|k| *k), Err(CuratorError::AlreadyClosed { .. })));
        assert!(matches!(life.spawn(async {}), Err(CuratorError::AlreadyClosed { .. })));
    }

    #[tokio::test]
    async fn a_closed_framework_refuses_unless_tolerated() {
        let fw = framework();
        fw.close().await;
        let life: Lifecycle = Lifecycle::new("Thing");
        assert!(matches!(life.start(&fw, |_| Ok(())), Err(CuratorError::Closed)));
        assert_eq!(life.state(), LifeState::Latent);
        let tolerant: Lifecycle = Lifecycle::tolerating_closed_framework("Watcher");
        tolerant.start(&fw, |_| Ok(())).expect("tolerated");
        assert_eq!(tolerant.state(), LifeState::Started);
    }
}
