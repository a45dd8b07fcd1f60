//! [`LeaderSelector`]: leadership that lasts while the leader's function runs (Curator's
//! `LeaderSelector`), written as a lock plus a run loop.
//!
//! # The run loop
//!
//! The selector's life (latent, started, closed) is the core's
//! [`Lifecycle`](curator_core::Lifecycle); a started selector has one task, spawned
//! by its start (it ends by itself when the selector is closed or dropped, or the framework
//! closes), driven by the selector's [`State`]:
//!
//! ```text
//!  start ─► Queued ─grant─► Leading ─term ends─► Queued (auto-requeue) / Idle
//!             ▲  │                                          │
//!             │  └─ grant already lost: release, stay Queued │
//!             └───────────────── requeue ───────────────────┘
//! Idle / Queued / Leading ─close or drop─► Closing ─► Ended    (the framework closed, or the
//!                                                              first turn was refused: ─► Ended)
//! ```
//!
//! - **Queued**: acquire through the sequential-node core as a mutex (`P/_c_<uuid>-lock-<seq>`,
//!   data = the participant id, `Predicate::Leader`). An acquire the framework's retry policy
//!   gave up on a connection error is tried again (the latch's wait, `rejoin.rs`: the cleanup
//!   loop's backoff, or the next connection change): a selector in line stays in line while the session is down. A
//!   refusal for good ([`CuratorError::is_permanent`]) of the very first attempt ends the task
//!   and closes the selector, [`ready`](LeaderSelector::ready) returns it, and the framework's
//!   unhandled-error listeners hear it. Any other error is reported to those listeners and
//!   leaves the selector Idle, unless it auto-requeues.
//! - **Leading**: publish [`SelectorEvent::Took`], then run the user's future against
//!   [`Leadership::lost`](crate::sequential::HeldNode::lost) and the selector's own stop (interrupt, close). Whichever comes first
//!   ends the term: the future is dropped at once, the state moves on,
//!   [`SelectorEvent::Ended`] is published, and only then is our node deleted (a guaranteed
//!   delete; in the background when the term was lost), so the leader is told before anyone
//!   else can be granted.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use curator_core::{Callback, EventStream, ListenerId, Listeners};
use curator_core::{CuratorError, CuratorFramework, Result};
use curator_core::{LifeState, Lifecycle};
use tokio::sync::watch;

use super::leadership::Leadership;
use super::participant::{read_leader, read_participants, validate_participant_id, Participant};
use crate::sequential::cleanup::NodeReporter;
use crate::sequential::{ContenderGroup, LockLost, MUTEX_LOCK_NAME};

mod run;
use run::run;

/// Why a term of leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TermEnd {
    /// The leadership function returned, or panicked: the panic is logged and counted as a
    /// failed term ([`LEADER_TERM_FAILURES`](curator_core::metrics::LEADER_TERM_FAILURES)), and
    /// an auto-requeuing selector gets back in line only after its retry policy's pause (see
    /// [`auto_requeue`](LeaderSelectorBuilder::auto_requeue)).
    Returned,
    /// [`LeaderSelector::interrupt_leadership`], [`LeaderSelector::close`] or dropping the
    /// selector ended it.
    Interrupted,
    /// Leadership may have been lost, for this reason (see [`Leadership::lost`](crate::sequential::HeldNode::lost)): the connection
    /// was suspended (under [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard)),
    /// the session was lost, our node was deleted, or the framework was closed.
    Lost(LockLost),
}

impl std::fmt::Display for TermEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermEnd::Returned => f.write_str("the leadership function returned"),
            TermEnd::Interrupted => f.write_str("the term was interrupted"),
            TermEnd::Lost(reason) => write!(f, "leadership may be lost: {reason}"),
        }
    }
}

/// What a [`LeaderSelector`] tells its listeners, in order: each `Took` is followed by its
/// `Ended` before the next `Took`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SelectorEvent {
    /// A term began: the leadership function is about to run with this leadership.
    Took(Leadership),
    /// A term ended; the function's future has been dropped (or had returned).
    Ended {
        /// The fencing token of the term that ended.
        token: i64,
        /// Why it ended.
        end: TermEnd,
    },
}

/// The leadership function, boxed.
type LeaderFn = Arc<dyn Fn(Leadership) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Where a started selector stands (the run loop's state machine; see the module docs). Whether
/// it is started or closed is its [`Lifecycle`]'s.
#[derive(Debug, Clone)]
enum State {
    /// Not in line: not started yet, a term ended without auto-requeue, or an acquire failed.
    Idle,
    /// In line: the run loop is acquiring.
    Queued,
    /// Leading: the leadership function runs. `interrupted` once it was asked to stop.
    Leading { leadership: Leadership, interrupted: bool },
    /// Close (or drop) asked the run loop to end.
    Closing,
    /// The run loop has ended (or a never-started selector was closed).
    Ended,
}

/// Elects one leader at a time among the selectors on one path, and runs the leader's async
/// function for as long as it leads (Curator's `LeaderSelector`). It is a mutex: nodes
/// `P/_c_<uuid>-lock-<seq>`, ephemeral sequential, with the participant id as data, so Java
/// `LeaderSelector`s on the same path take part in the same election.
///
/// A term of leadership lasts while the function's future runs. It ends when the future
/// returns, when [`interrupt_leadership`](Self::interrupt_leadership), [`close`](Self::close)
/// or dropping the selector ends it, or when leadership may be lost
/// ([`Leadership::lost`](crate::sequential::HeldNode::lost): the connection was suspended under
/// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard), the session was lost, our
/// node was deleted, the framework was closed). In every case the future is dropped at once
/// (the function must not rely on finishing what it started: stamp writes with
/// [`Leadership::fencing_token`](crate::sequential::HeldNode::fencing_token)), [`SelectorEvent::Ended`] says why, and only then is our node
/// deleted, so a term that may be lost is over on our side before anyone else can be granted.
/// After a term the selector is idle until [`requeue`](Self::requeue), or in line again with
/// [auto-requeue](LeaderSelectorBuilder::auto_requeue): at once after a term that ended
/// normally, after a pause of the framework's retry policy after one whose function panicked.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{LeaderSelector, Leadership, SelectorEvent, TermEnd};
///
/// let selector = LeaderSelector::builder(&fw, "/jobs/leader", |leadership: Leadership| async move {
///     // Lead: stamp what we write with the token. Returning gives leadership up; the future
///     // is dropped at once if leadership may be lost.
///     tracing::info!(token = leadership.fencing_token(), "leading");
/// })
/// .id("worker-1")
/// .build()?;
/// let mut events = selector.events();
/// selector.start()?;
/// selector.ready().await?; // in line (or the server refused our node: the selector is closed)
/// let Some(SelectorEvent::Took(term)) = events.next().await else { unreachable!() };
/// assert_eq!(term.participant_id(), "worker-1");
/// let Some(SelectorEvent::Ended { token, end }) = events.next().await else { unreachable!() };
/// assert_eq!((token, end), (term.fencing_token(), TermEnd::Returned));
/// selector.close().await; // leaves no node behind
/// # Ok(()) }
/// ```
///
/// # Differences from Curator
/// - The leadership function is async and is cancelled by dropping its future; there is no
///   thread to interrupt and no `CancelLeadershipException`: the connection states that end a
///   term are the framework's error policy's, as for a held lock.
/// - A suspension ends a term but not a wait in line: a selector waiting for leadership stays in
///   line through connection trouble (Curator's adapter cancels the wait as well).
/// - A grant that is already lost when it comes (the connection was suspended as it was
///   granted) does not start a term: the function is not called, the node is released and the
///   selector stays in line.
/// - [`close`](Self::close) waits until the running term has ended and our node is deleted; it
///   may be called more than once, and before [`start`](Self::start).
/// - With auto-requeue, a term whose function panicked is followed by the retry policy's pause
///   (Curator requeues at once after a `takeLeadership` that throws).
pub struct LeaderSelector {
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
}

impl std::fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderSelector")
            .field("path", &self.shared.group.base_path())
            .field("id", &self.shared.id)
            .field("life", &self.lifecycle.state())
            .field("state", &*self.shared.state.borrow())
            .finish_non_exhaustive()
    }
}

/// Builder of a [`LeaderSelector`]; see [`LeaderSelector::builder`].
pub struct LeaderSelectorBuilder {
    fw: CuratorFramework,
    path: String,
    leader: LeaderFn,
    id: Option<String>,
    auto_requeue: bool,
    listeners: Vec<Callback<SelectorEvent>>,
}

impl std::fmt::Debug for LeaderSelectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderSelectorBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("auto_requeue", &self.auto_requeue)
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

impl LeaderSelectorBuilder {
    /// The participant id, stored as our node's data (UTF-8) and read back by
    /// [`participants`](LeaderSelector::participants). Left unset, it is the framework's
    /// default node data (this host's address, as in Curator), not checked; one set here must
    /// be one node name, as every participant id is (checked by
    /// [`build`](Self::build)).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Whether to get back in line after every term (default `false`; Curator's
    /// `autoRequeue()`). After a term that ended normally (returned, interrupted, lost) the
    /// selector is in line again at once. After a failed term (the function panicked) it waits
    /// the framework's [retry policy](curator_core::CuratorFrameworkBuilder::retry_policy)'s
    /// pause first, consecutive failed terms counting as retries of one operation; when the
    /// policy gives up, the selector stays idle, reports it to the framework's unhandled-error
    /// listeners ([`CuratorError::GaveUp`]), and gets back in line only at
    /// [`requeue`](LeaderSelector::requeue), with the whole policy again. (Curator requeues at
    /// once: a function that fails at once would lead about 1,000 times a second.)
    pub fn auto_requeue(mut self, auto_requeue: bool) -> Self {
        self.auto_requeue = auto_requeue;
        self
    }

    /// A listener in place from the start, so that it hears every event.
    pub fn listener(mut self, listener: impl Fn(&SelectorEvent) + Send + Sync + 'static) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Checks the settings and builds the selector; nothing is sent until
    /// [`start`](LeaderSelector::start).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for an invalid path; [`CuratorError::DataTooLarge`] for an
    /// id over the framework's data limit; [`CuratorError::InvalidArgument`] for an id that was
    /// set and is not one node name (the check every participant id gets).
    pub fn build(self) -> Result<LeaderSelector> {
        let group = ContenderGroup::new(&self.fw, &self.path, MUTEX_LOCK_NAME, &[MUTEX_LOCK_NAME])?
            .labelled(curator_core::metrics::recipe::LEADER_SELECTOR);
        let set = self.id.is_some();
        let id = self.id.unwrap_or_else(|| String::from_utf8_lossy(self.fw.default_data()).into_owned());
        self.fw.check_data(&self.path, id.as_bytes())?;
        if set {
            validate_participant_id(&self.path, &id)?;
        }
        let events = Listeners::new();
        for listener in self.listeners {
            events.add_callback(listener);
        }
        let shared = Arc::new(Shared {
            group,
            id: id.into(),
            leader: self.leader,
            auto_requeue: AtomicBool::new(self.auto_requeue),
            events,
            state: watch::channel(State::Idle).0,
            ours: Arc::new(watch::channel(None).0),
        });
        Ok(LeaderSelector { shared, lifecycle: Lifecycle::new(WHAT) })
    }
}

impl LeaderSelector {
    /// A builder for a selector on `path` whose leader runs `leader` with each term's
    /// [`Leadership`].
    pub fn builder<F, Fut>(fw: &CuratorFramework, path: &str, leader: F) -> LeaderSelectorBuilder
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let leader: LeaderFn = Arc::new(move |leadership| Box::pin(leader(leadership)));
        LeaderSelectorBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            leader,
            id: None,
            auto_requeue: false,
            listeners: Vec::new(),
        }
    }

    /// Gets in line for leadership (Curator's `LeaderSelector.start()`): starts the run loop,
    /// a task of its own, which makes our node and waits in line. Sync: it sends nothing
    /// itself; [`ready`](Self::ready) tells when the selector is in line, or that the server
    /// refused it.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`] (use [`requeue`](Self::requeue) to get in line again),
    /// [`CuratorError::AlreadyClosed`], [`CuratorError::NoRuntime`] (outside a tokio runtime)
    /// or [`CuratorError::Closed`] (a closed framework), as for every started thing (module
    /// [`Lifecycle`](curator_core::Lifecycle)); nothing changes then.
    pub fn start(&self) -> Result<()> {
        let shared = &self.shared;
        self.lifecycle.start(shared.framework(), |started| {
            shared.events.start(started.handle().clone());
            shared.state.send_replace(State::Queued);
            tracing::debug!(path = %shared.group.base_path(), id = %shared.id, "leader selector started");
            // The run loop ends by itself once the selector closes (or is dropped) or the
            // framework closes; the node deletes it makes are tracked by the framework.
            started.spawn(run(shared.clone(), started.readiness()));
            Ok(())
        })
    }

    /// Waits for the first outcome of [`start`](Self::start): `Ok` once our node exists, or
    /// the first term began, or the first attempt to make our node failed in a way worth
    /// trying again (no connection within the retry policy, say: the selector keeps trying in
    /// the background). A first attempt refused for good (no permission to create our node,
    /// an ACL the server refuses) is returned, and the selector is closed by then, as
    /// [`LeaderLatch::ready`](super::LeaderLatch::ready) does; the framework's unhandled-error
    /// listeners hear it too, as they hear a later attempt's refusal (Curator's selector tells
    /// nobody).
    ///
    /// # Errors
    /// The refusal of the first attempt ([`CuratorError::is_permanent`]: `NoAuth`,
    /// `InvalidAcl`...); [`CuratorError::NotStarted`] before `start`;
    /// [`CuratorError::AlreadyClosed`] if the selector was closed before a first outcome.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// From now on, get back in line after every term (Curator's `autoRequeue()`; after a failed
    /// term, after a pause: see [`LeaderSelectorBuilder::auto_requeue`]). A selector that is
    /// idle now is not queued by this: call [`requeue`](Self::requeue).
    pub fn auto_requeue(&self) {
        self.shared.auto_requeue.store(true, Ordering::Release);
    }

    /// Gets back in line after a term ended (Curator's `requeue()`): `Ok(true)` if queued,
    /// `Ok(false)` if already in line or leading. While the session is down the attempt waits
    /// for it, as an acquire does.
    ///
    /// # Errors
    /// [`CuratorError::NotStarted`] before [`start`](Self::start),
    /// [`CuratorError::AlreadyClosed`] after [`close`](Self::close) (module
    /// [`Lifecycle`](curator_core::Lifecycle)); [`CuratorError::Closed`] once the framework
    /// closed (the run loop ended with it).
    pub fn requeue(&self) -> Result<bool> {
        let mut outcome = Ok(false);
        self.lifecycle.with_started(|()| {
            self.shared.state.send_if_modified(|state| match state {
                State::Idle => {
                    *state = State::Queued;
                    outcome = Ok(true);
                    true
                }
                State::Queued | State::Leading { .. } => false,
                // The run loop ended: the framework was closed.
                State::Closing | State::Ended => {
                    outcome = Err(CuratorError::Closed);
                    false
                }
            });
        })?;
        outcome
    }

    /// Ends the running term, if any (Curator's `interruptLeadership()`): the function's future
    /// is dropped and [`SelectorEvent::Ended`] says [`TermEnd::Interrupted`]. The selector then
    /// gets back in line only with auto-requeue.
    pub fn interrupt_leadership(&self) {
        self.shared.state.send_if_modified(|state| match state {
            State::Leading { interrupted, .. } if !*interrupted => {
                *interrupted = true;
                true
            }
            _ => false,
        });
    }

    /// Whether this selector leads now: its function runs and its leadership is not known to
    /// be lost. Costs no request.
    pub fn has_leadership(&self) -> bool {
        self.leadership().is_some_and(|leadership| leadership.is_held())
    }

    /// The running term's leadership, if a term runs.
    pub fn leadership(&self) -> Option<Leadership> {
        match &*self.shared.state.borrow() {
            State::Leading { leadership, .. } => Some(leadership.clone()),
            _ => None,
        }
    }

    /// Adds a callback listener (run on the blocking pool, in order; section 6.2 of the
    /// architecture notes).
    pub fn add_listener(&self, listener: impl Fn(&SelectorEvent) + Send + Sync + 'static) -> ListenerId {
        self.shared.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener; false if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shared.events.remove(id)
    }

    /// The events from now on, as a stream; it ends once the selector is closed.
    pub fn events(&self) -> EventStream<SelectorEvent> {
        self.shared.events.stream()
    }

    /// This participant's id (the data of its node).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The participants of the election, in line order (the leader first), read from the
    /// server (Curator's `getParticipants()`).
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        read_participants(&self.shared.group).await
    }

    /// The leader of the election, read from the server; `None` when nobody takes part
    /// (Curator's `getLeader()` answers a dummy participant instead).
    pub async fn leader(&self) -> Result<Option<Participant>> {
        read_leader(&self.shared.group).await
    }

    /// Leaves the election: a running term ends (its future is dropped,
    /// [`TermEnd::Interrupted`]) and our node is deleted before this returns (when connected; a
    /// delete that cannot finish goes on in the background). A wait in line is abandoned and its
    /// node deleted in the background. The event streams end.
    ///
    /// Idempotent, as every close ([`Lifecycle`](curator_core::Lifecycle)): closing again,
    /// or closing a selector never started, does nothing (it returns once the run loop, if any,
    /// has ended). A closed selector cannot be started again. (Curator's `close()`.)
    pub async fn close(&self) {
        self.begin_close();
        let mut state = self.shared.state.subscribe();
        let _ = state.wait_for(|s| matches!(s, State::Ended)).await;
    }

    /// Closes the lifecycle and asks the run loop to end (a selector never started ends at
    /// once).
    fn begin_close(&self) {
        let latent = self.lifecycle.state() == LifeState::Latent;
        if self.lifecycle.close().is_some() {
            self.shared.state.send_if_modified(|state| match state {
                State::Idle | State::Queued | State::Leading { .. } => {
                    *state = State::Closing;
                    true
                }
                State::Closing | State::Ended => false,
            });
        } else if latent {
            self.shared.state.send_replace(State::Ended);
            self.shared.events.close();
        }
    }
}

impl Drop for LeaderSelector {
    /// Closes the selector in the background (see [`close`](LeaderSelector::close)).
    fn drop(&mut self) {
        self.begin_close();
    }
}

/// The selector's name in lifecycle errors.
const WHAT: &str = "LeaderSelector";

/// What the handle and the run loop share.
struct Shared {
    group: ContenderGroup,
    id: Arc<str>,
    leader: LeaderFn,
    auto_requeue: AtomicBool,
    events: Listeners<SelectorEvent>,
    state: watch::Sender<State>,
    /// The path of our latest node, once a turn made one (for `ready`: in line).
    ours: NodeReporter,
}

impl Shared {
    fn framework(&self) -> &CuratorFramework {
        self.group.framework()
    }

    fn auto_requeue(&self) -> bool {
        self.auto_requeue.load(Ordering::Acquire)
    }
}
