//! See the docs of the main type below, where this module's guide lives.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::runtime::Handle;
use tokio::sync::watch;

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

impl<S> Phase<S> {
    fn state(&self) -> LifeState {
        match self {
            Phase::Latent => LifeState::Latent,
            Phase::Started(..) => LifeState::Started,
            Phase::Closed => LifeState::Closed,
        }
    }

    /// To Closed: what the start kept, if it was started.
    fn close(&mut self) -> Option<S> {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Started(kept, _) => Some(kept),
            Phase::Latent | Phase::Closed => None,
        }
    }
}

/// A start in progress: where the thing's tasks run (handed to `start`'s `make`).
pub struct Starting<'a> {
    handle: &'a Handle,
    readiness: Readiness,
    deferred: std::cell::Cell<bool>,
}

impl std::fmt::Debug for Starting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Starting").field("handle", &self.handle).finish_non_exhaustive()
    }
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

    /// Defers the first outcome of this start to the thing's task, which reports it through
    /// the [`Readiness`] returned. Without this call the start's outcome is `Ok` at once.
    pub fn readiness(&self) -> Readiness {
        self.deferred.set(true);
        self.readiness.clone()
    }
}

/// The first outcome of a start, reported by the started thing's task: that its first step is
/// done ([`ready`](Self::ready)), or that the server refused it for good
/// ([`refused`](Self::refused), which closes the thing). What
/// [`Lifecycle::ready`] waits for. The first report wins; later ones are ignored.
#[derive(Clone)]
pub struct Readiness {
    first: watch::Sender<Option<Result<()>>>,
    refuse: Arc<dyn Fn(CuratorError) + Send + Sync>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").field("outcome", &*self.first.borrow()).finish_non_exhaustive()
    }
}

/// Sets the first outcome unless one was reported; true if this one was.
fn set_first(first: &watch::Sender<Option<Result<()>>>, outcome: Result<()>) -> bool {
    first.send_if_modified(|first| {
        if first.is_some() {
            return false;
        }
        *first = Some(outcome);
        true
    })
}

impl Readiness {
    /// The first step is done (or failed in a way the thing goes on trying to mend).
    pub fn ready(&self) {
        set_first(&self.first, Ok(()));
    }

    /// The first step was refused for good (`err`, typically
    /// [`is_permanent`](CuratorError::is_permanent)): the thing closes (its state is
    /// [`LifeState::Closed`]; its task ends by itself) and [`Lifecycle::ready`] returns `err`.
    /// Ignored after a first report.
    pub fn refused(&self, err: CuratorError) {
        (self.refuse)(err);
    }

    /// Reports `outcome`, the first step's: [`ready`](Self::ready) for `Ok`,
    /// [`refused`](Self::refused) for an error.
    pub fn report(&self, outcome: Result<()>) {
        match outcome {
            Ok(()) => self.ready(),
            Err(err) => self.refused(err),
        }
    }

    /// Whether the first outcome was reported.
    pub fn is_reported(&self) -> bool {
        self.first.borrow().is_some()
    }
}

/// The lifecycle of one started thing, with `S`, what it keeps while started (a sender to its
/// task, say), handed back to the close that tears it down.
///
/// # Guide
///
/// The one lifecycle of every started thing: recipes, caches, discovery.
///
/// Curator gives every recipe the same life (`LATENT -> STARTED -> STOPPED`, one `start()`, an
/// idempotent `close()`); this module is that idiom, written once (docs/architecture.md
/// section 6.4):
///
/// | call | Latent | Started | Closed |
/// |---|---|---|---|
/// | `start` | Started (`Ok`) | [`AlreadyStarted`](CuratorError::AlreadyStarted) | [`AlreadyClosed`](CuratorError::AlreadyClosed) |
/// | `close` | Closed (nothing to tear down) | Closed (tear down) | nothing: idempotent |
/// | use ([`Lifecycle::with_started`]) | [`NotStarted`](CuratorError::NotStarted) | `Ok` | [`AlreadyClosed`](CuratorError::AlreadyClosed) |
///
/// A start is also refused, with nothing changed, outside a tokio runtime
/// ([`NoRuntime`](CuratorError::NoRuntime): what starts runs as tasks) and on a closed framework
/// ([`Closed`](CuratorError::Closed)), unless the type says it has something to tell even then
/// ([`Lifecycle::tolerating_closed_framework`]). The runtime found at start is where the
/// thing's tasks run ([`Lifecycle::spawn`]).
///
/// Every started type has the same three calls:
///
/// - `fn start(&self) -> Result<()>`: sync. It checks, spawns the thing's task and returns; it
///   fails only when nothing could start (the errors above, bad arguments). No I/O is awaited.
/// - `async fn ready(&self) -> Result<()>` (caches: `wait_initialized`): the first outcome of
///   the start, reported by the thing's task ([`Readiness`]): its first step is done (our node
///   exists, the first read is in), or the server refused it for good
///   ([`CuratorError::is_permanent`]: an ACL that refuses the client, say), which closes the
///   thing: a refusal is never only logged while the thing retries for ever.
/// - `async fn close(&self)`: idempotent, the same for every type; returns once what the thing
///   made is gone (or its delete left to the framework's tracked background work).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> curator_core::Result<()> {
/// use curator_core::Lifecycle;
/// use curator_core::{CuratorError, CuratorFramework};
///
/// let fw = CuratorFramework::builder().connect_string("127.0.0.1:1").build()?;
/// // What a recipe keeps while started: here, the sender that stops its task.
/// let life: Lifecycle<tokio::sync::oneshot::Sender<()>> = Lifecycle::new("Example");
/// assert!(matches!(life.with_started(|_| ()), Err(CuratorError::NotStarted { what: "Example" })));
/// life.start(&fw, |started| {
///     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
///     started.spawn(async move { let _ = stopped.await; });
///     Ok(stop)
/// })?;
/// assert!(matches!(life.start(&fw, |_| unreachable!()), Err(CuratorError::AlreadyStarted { .. })));
/// if let Some(stop) = life.close() {
///     let _ = stop.send(()); // the tear-down is the type's own
/// }
/// assert!(life.close().is_none(), "a second close finds nothing to tear down");
/// # Ok(()) }
/// ```
pub struct Lifecycle<S = ()> {
    what: &'static str,
    closed_framework_ok: bool,
    core: Arc<Core<S>>,
}

/// What a [`Readiness`] shares with its lifecycle.
struct Core<S> {
    phase: Mutex<Phase<S>>,
    first: watch::Sender<Option<Result<()>>>,
}

impl<S> Core<S> {
    fn lock(&self) -> MutexGuard<'_, Phase<S>> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A refusal of the first step: reported and Closed at once, under the phase's lock, so
    /// that no one sees the one without the other. What the start kept, if this closed it.
    fn refuse(&self, err: CuratorError) -> Option<S> {
        let mut phase = self.lock();
        if !set_first(&self.first, Err(err)) {
            return None;
        }
        phase.close()
    }

    /// To Closed; what the start kept, if started. Wakes [`Lifecycle::ready`]'s waiters.
    fn close(&self) -> Option<S> {
        let kept = self.lock().close();
        self.first.send_modify(|_| {});
        kept
    }
}

impl<S> std::fmt::Debug for Lifecycle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle").field("what", &self.what).field("state", &self.state()).finish()
    }
}

impl<S> Lifecycle<S> {
    /// The lifecycle of a `what` (its type's name, as errors show it), latent.
    pub fn new(what: &'static str) -> Self {
        let core = Core { phase: Mutex::new(Phase::Latent), first: watch::channel(None).0 };
        Self { what, closed_framework_ok: false, core: Arc::new(core) }
    }

    /// As [`new`](Self::new), for a type that starts on a closed framework too (to tell its
    /// listeners that the framework is closed, as a watcher does).
    pub fn tolerating_closed_framework(what: &'static str) -> Self {
        Self { closed_framework_ok: true, ..Self::new(what) }
    }

    fn lock(&self) -> MutexGuard<'_, Phase<S>> {
        self.core.lock()
    }

    /// What the lifecycle is of.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// Where the thing is in its life.
    pub fn state(&self) -> LifeState {
        self.lock().state()
    }

    /// Latent to Started: checks the thing's state, the runtime and the framework, then runs
    /// `make` (which spawns the thing's tasks and returns what the close will need). An error
    /// from `make` leaves the thing latent, so that it can be started again.
    ///
    /// # Errors
    /// [`AlreadyStarted`](CuratorError::AlreadyStarted), [`AlreadyClosed`](CuratorError::AlreadyClosed),
    /// [`NoRuntime`](CuratorError::NoRuntime), [`Closed`](CuratorError::Closed) for a closed
    /// framework (unless [tolerated](Self::tolerating_closed_framework)), or `make`'s.
    pub fn start(&self, fw: &CuratorFramework, make: impl FnOnce(&Starting<'_>) -> Result<S>) -> Result<()>
    where
        S: Send + 'static,
    {
        let mut phase = self.lock();
        let handle = self.startable(&phase, fw)?;
        let core = Arc::downgrade(&self.core);
        let readiness = Readiness {
            first: self.core.first.clone(),
            refuse: Arc::new(move |err| {
                if let Some(core) = core.upgrade() {
                    // Dropped outside the lock's scope: `kept` may own the task's senders.
                    drop(core.refuse(err));
                }
            }),
        };
        let starting = Starting { handle: &handle, readiness, deferred: std::cell::Cell::new(false) };
        let kept = make(&starting)?;
        let deferred = starting.deferred.get();
        *phase = Phase::Started(kept, handle);
        drop(phase);
        if !deferred {
            self.core.first.send_replace(Some(Ok(())));
        }
        tracing::debug!(what = self.what, "started");
        Ok(())
    }

    /// Waits for the first outcome of the start: `Ok` once the thing's first step is done (at
    /// once for a thing without one), or the refusal that closed it ([`Readiness::refused`]).
    ///
    /// # Errors
    /// The refusal; [`NotStarted`](CuratorError::NotStarted) if not started;
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed) if closed before a first outcome.
    pub async fn ready(&self) -> Result<()> {
        let mut first = self.core.first.subscribe();
        loop {
            // Read together, under the phase's lock: a refusal sets both at once.
            let (state, outcome) = {
                let phase = self.lock();
                (phase.state(), first.borrow_and_update().clone())
            };
            if let Some(outcome) = outcome {
                return outcome;
            }
            match state {
                LifeState::Latent => return Err(CuratorError::NotStarted { what: self.what }),
                LifeState::Closed => return Err(CuratorError::AlreadyClosed { what: self.what }),
                LifeState::Started => {}
            }
            // The sender lives as long as `self`.
            let _ = first.changed().await;
        }
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
        let kept = self.core.close();
        if kept.is_some() {
            tracing::debug!(what = self.what, "closed");
        }
        kept
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
    async fn the_first_outcome_is_reported_by_the_task() {
        let fw = framework();
        let life: Lifecycle = Lifecycle::new("Thing");
        assert!(matches!(life.ready().await, Err(CuratorError::NotStarted { .. })));
        life.start(&fw, |_| Ok(())).expect("starts");
        assert!(life.ready().await.is_ok(), "without a deferred outcome, ready at once");

        let life: Lifecycle = Lifecycle::new("Thing");
        let mut readiness = None;
        life.start(&fw, |started| {
            readiness = Some(started.readiness());
            Ok(())
        })
        .expect("starts");
        let readiness = readiness.expect("taken");
        assert!(!readiness.is_reported());
        readiness.refused(CuratorError::NoAuth { path: "/x".into() });
        readiness.ready(); // the first report wins
        assert!(matches!(life.ready().await, Err(CuratorError::NoAuth { .. })));
        assert_eq!(life.state(), LifeState::Closed, "a refusal closes the thing");
        assert!(life.close().is_none(), "nothing left for the close");

        let life: Lifecycle = Lifecycle::new("Thing");
        life.start(&fw, |started| {
            drop(started.readiness());
            Ok(())
        })
        .expect("starts");
        let waiting = life.ready();
        assert!(life.close().is_some());
        assert!(matches!(waiting.await, Err(CuratorError::AlreadyClosed { .. })), "a close wakes the waiters");
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
