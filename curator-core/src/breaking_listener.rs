//! See the docs of the main type below, where this module's guide lives.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::breaker::{Circuit, Step};
use crate::error::{CuratorError, Result};
use crate::listeners::{Callback, Listeners};
use crate::retry::RetryPolicy;
use crate::state::{ConnectionStateEvent, ConnectionStateStream};

const WHAT: &str = "CircuitBreakingConnectionStateListener";

/// A connection-state listener that holds back the transitions after a disconnection for a
/// retry policy's sleeps, so that a flapping connection reaches the listener behind it as one
/// disconnection and one recovery (Curator's `CircuitBreakingConnectionStateListener`).
///
/// # Guide
///
/// Closed, the circuit passes every transition on. A transition to a state that is not
/// connected ([`Suspended`](crate::ConnectionState::Suspended) or
/// [`Lost`](crate::ConnectionState::Lost)) is passed on and *opens* it, for the policy's first
/// sleep ([`RetryPolicy::allow_retry`] with retry count 0). While open, transitions are held
/// (only the latest is kept), except the first `Lost`, which is passed on at once. When the
/// sleep ends: if the latest transition is a connected one, the circuit closes and passes it on;
/// if not, the policy is asked for another sleep (counting retries and the time since the circuit
/// opened) and, when it refuses, the circuit closes and passes the latest on (unless its state
/// is the one passed on last). [`Closed`](crate::ConnectionState::Closed) is always passed on at
/// once. A sleep no timer ends (`Duration::MAX`, `u64::MAX` ms: about 30 years and more) counts
/// as the policy's refusal, so that no policy keeps the listener's view stale for good. Events
/// passed on are the framework's own (their `seq` shows what was held back), except
/// that a held reconnection on a later session than the listener was last told of has
/// `new_session` set.
///
/// Use it around one listener or stream, as below, or for every listener and stream of a
/// framework with
/// [`CuratorFrameworkBuilder::connection_state_circuit_breaker`](crate::CuratorFrameworkBuilder::connection_state_circuit_breaker).
///
/// **It only shapes what listeners are told.** Locks' `lost()` and `is_held()`, leaders'
/// leadership, [`SessionLiveness`](crate::SessionLiveness) and
/// [`connection_state_watch`](crate::CuratorFramework::connection_state_watch) read the session
/// itself and are never delayed: a lock holder is still told its lock may be lost before anyone
/// else can be granted it (docs/architecture.md section 3.9).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// use std::time::Duration;
/// use curator_core::{CircuitBreakingConnectionStateListener, ConnectionState, CuratorFramework, RetryForever};
///
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// // Told of a disconnection at once, then of nothing more for at least 5 s at a time.
/// let breaker = CircuitBreakingConnectionStateListener::new(RetryForever::new(Duration::from_secs(5)), move |event| {
///     let _ = tx.send(event.state); // must not block: it may run on a runtime worker
/// })?;
/// let listener = breaker.clone();
/// fw.add_connection_state_listener(move |_fw, event| listener.state_changed(event));
/// fw.start()?;
/// assert_eq!(rx.recv().await, Some(ConnectionState::Connected));
/// assert!(!breaker.is_open());
/// fw.close().await;
/// assert_eq!(rx.recv().await, Some(ConnectionState::Closed));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CircuitBreakingConnectionStateListener {
    inner: Arc<Inner>,
}

struct Inner {
    circuit: Mutex<Circuit>,
    listener: Callback<ConnectionStateEvent>,
    /// Where the checks run; set at construction, or when the framework starts.
    runtime: OnceLock<Handle>,
}

impl std::fmt::Debug for CircuitBreakingConnectionStateListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `try_lock`: the listener, which runs with the circuit locked, may print its breaker.
        let open = self.inner.circuit.try_lock().map(|circuit| circuit.is_open()).ok();
        f.debug_struct(WHAT).field("open", &open).finish_non_exhaustive()
    }
}

impl CircuitBreakingConnectionStateListener {
    /// A closed circuit in front of `listener`, timed by `policy`; its checks run on the current
    /// runtime. `listener` is called in order, one transition at a time, with the circuit's lock
    /// held: it must not block (it may run on a runtime worker) nor call back into this breaker.
    ///
    /// # Errors
    /// [`CuratorError::NoRuntime`] outside a tokio runtime.
    pub fn new(
        policy: impl RetryPolicy + 'static,
        listener: impl Fn(&ConnectionStateEvent) + Send + Sync + 'static,
    ) -> Result<Self> {
        let runtime = Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: WHAT })?;
        let breaker = Self::unstarted(Arc::new(policy), Arc::new(listener));
        breaker.start(runtime);
        Ok(breaker)
    }

    /// `source` seen through a circuit timed by `policy`: a stream of the transitions the
    /// circuit passes on. It ends after `source` does.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// use std::time::Duration;
    /// use curator_core::{CircuitBreakingConnectionStateListener, ConnectionState, CuratorFramework, RetryNTimes};
    ///
    /// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// let policy = RetryNTimes::new(3, Duration::from_secs(1));
    /// let mut states = CircuitBreakingConnectionStateListener::stream(policy, fw.connection_state_stream())?;
    /// fw.start()?;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Connected));
    /// fw.close().await;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Closed));
    /// assert!(states.next().await.is_none());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`CuratorError::NoRuntime`] outside a tokio runtime.
    pub fn stream(policy: impl RetryPolicy + 'static, source: ConnectionStateStream) -> Result<ConnectionStateStream> {
        let runtime = Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: WHAT })?;
        let out = Listeners::new();
        let stream = out.stream();
        // The relay owns the breaker, which owns `out`: when `source` ends, they go, and the
        // stream ends after what was passed on.
        let breaker =
            Self::unstarted(Arc::new(policy), Arc::new(move |e: &ConnectionStateEvent| out.publish(e.clone())));
        breaker.start(runtime.clone());
        source.relay(&runtime, move |event| breaker.state_changed(&event));
        Ok(stream)
    }

    /// A closed circuit in front of `listener` whose checks wait for [`start`](Self::start)
    /// (the framework's, built before its runtime is known).
    pub(crate) fn unstarted(policy: Arc<dyn RetryPolicy>, listener: Callback<ConnectionStateEvent>) -> Self {
        Self {
            inner: Arc::new(Inner { circuit: Mutex::new(Circuit::new(policy)), listener, runtime: OnceLock::new() }),
        }
    }

    /// Runs the checks on `runtime` from now on (the first runtime given is kept).
    pub(crate) fn start(&self, runtime: Handle) {
        let _ = self.inner.runtime.set(runtime);
    }

    /// Feeds one transition to the circuit (what a framework's listener calls): passed on now,
    /// or held, as the guide says.
    pub fn state_changed(&self, event: &ConnectionStateEvent) {
        let mut circuit = self.lock();
        let step = circuit.on_event(event.clone(), Instant::now());
        self.apply(&mut circuit, step);
    }

    /// Whether the circuit is open (transitions are being held back).
    pub fn is_open(&self) -> bool {
        self.lock().is_open()
    }

    fn lock(&self) -> MutexGuard<'_, Circuit> {
        self.inner.circuit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the listener what `step` passes on and arms its check, with the circuit locked so
    /// that the listener sees transitions in order.
    fn apply(&self, circuit: &mut Circuit, step: Step) {
        if let Some(event) = step.forward {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.inner.listener)(&event))).is_err() {
                tracing::error!("a circuit-breaking connection-state listener panicked; it keeps receiving");
            }
        }
        let Some((opening, wait)) = step.check else { return };
        let Some(runtime) = self.inner.runtime.get() else {
            // No runtime to time the circuit: it must not stay open for ever.
            tracing::warn!("no runtime for the connection-state circuit: it stays closed");
            circuit.reset();
            return;
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            if let Some(inner) = weak.upgrade() {
                let breaker = Self { inner };
                let mut circuit = breaker.lock();
                let step = circuit.check(opening, Instant::now());
                breaker.apply(&mut circuit, step);
            }
        });
    }
}
