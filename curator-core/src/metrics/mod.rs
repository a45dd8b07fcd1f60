//! Metrics through the [`metrics`](https://docs.rs/metrics) facade: every name the workspace
//! records, written once here with its kind, unit and labels, and the hooks that record them.
//!
//! Nothing is exported until the application installs a recorder (a Prometheus exporter, say;
//! `curator-examples/examples/metrics_prometheus.rs`). The table of names is also in
//! `docs/operations.md` section 6.
//!
//! | name | kind | unit | labels |
//! |---|---|---|---|
//! | [`CONNECTION_STATE`] | gauge | state number (0..=6) | `framework` |
//! | [`CONNECTION_STATE_CHANGES`] | counter | transitions | `state` |
//! | [`SESSIONS`] | counter | sessions | |
//! | [`SESSION_EXPIRATIONS`] | counter | sessions | `reason` |
//! | [`RECONNECTIONS`] | counter | reconnections | |
//! | [`CONNECT_FAILURES`] | counter | attempts | |
//! | [`OPERATION_DURATION`] | histogram | seconds | `op` |
//! | [`OPERATION_ERRORS`] | counter | operations | `op`, `error` |
//! | [`OPERATION_RETRIES`] | counter | retries | `op`, `error` |
//! | [`LOCK_WAIT`] | histogram | seconds | `recipe` |
//! | [`LOCK_HOLD`] | histogram | seconds | `recipe` |
//! | [`LOCK_LOST`] | counter | holds | `recipe`, `reason` |
//! | [`LEADER_CHANGES`] | counter | terms | `recipe` |
//! | [`LEADER_TERM_FAILURES`] | counter | terms | `recipe` |
//! | [`CACHE_LOADS`] | counter | loads | `cache` |
//! | [`CACHE_LOAD_FAILURES`] | counter | loads | `cache` |
//! | [`CACHE_LOAD_DURATION`] | histogram | seconds | `cache` |
//! | [`CACHE_EVENT_LAG`] | histogram | seconds | `cache` |
//! | [`QUEUE_PUTS`] | counter | items | `queue` |
//! | [`QUEUE_TAKES`] | counter | items | `queue` |
//! | [`QUEUE_REDELIVERIES`] | counter | item nodes | `queue`, `reason` |
//! | [`QUEUE_FENCE_FAILURES`] | counter | finishes | `reason` |
//! | [`ATOMIC_TRIES`] | counter | tries | `phase` |
//! | [`ATOMIC_PROMOTIONS`] | counter | operations | |
//! | [`BARRIER_WAITS`] | counter | calls | `call`, `outcome` |
//! | [`DISCOVERY_REGISTRATIONS`] | counter | calls | `op` |
//! | [`DISCOVERY_CACHE_INSTANCES`] | gauge | instances | `service` |
//! | [`DISCOVERY_PICKS`] | counter | picks | `outcome` |
//! | [`DISCOVERY_INSTANCE_ERRORS`] | counter | errors | |
//! | [`DISCOVERY_INSTANCES_DOWN`] | counter | instances | |
//!
//! Every label value is one of a fixed set written in the code (an operation kind, an error
//! kind, a recipe, cache or queue kind, a state, reason or outcome), or one of the few names
//! the application chose (a framework's `metrics_name`, a service's name): never a path, a
//! session id or anything else that grows with use, so the number of series stays small.
//!
//! # What it costs
//!
//! Without a recorder, each hook is a call into the facade, which finds no recorder (a
//! thread-local read and an atomic load) and drops the value: no lock, no `String`, no
//! request. Where a label value is only known at run time (the operation kind of an
//! operation, a recipe or cache kind, an error kind), building the metric's key also allocates
//! one small `Vec` of borrowed labels. The hooks read the clock only where the code already had
//! a time or where one `Instant` per operation, acquire, hold, load or cache event gives the
//! duration. With a recorder, the cost is the recorder's (for
//! `metrics-exporter-prometheus`, a hash lookup of the key and an atomic update or a histogram
//! sample).
//!
//! # Hooks
//!
//! Each event is recorded at the one place it already happens: connection states in the
//! state hub (`state.rs`), session ends and failed connects in the session manager
//! (`session/follow.rs`, `session/connect.rs`), operations in [`CuratorFramework::call_with_retry`](crate::CuratorFramework::call_with_retry),
//! lock waits and holds in `curator-recipes`' sequential-node core (behind every lock,
//! semaphore and leader election), terms of leadership in its `Leadership` (and failed terms in
//! the `LeaderSelector`'s run loop), and cache loads
//! and events in `curator-cache`'s engine; queue puts, takes and redeliveries where the
//! queues make, hand over and finish their items (`curator-recipes`' `queue` module), atomic
//! tries in the optimistic loop, barrier waits where each call ends, and registrations, cache
//! sizes, picks and noted errors in `curator-discovery`. The recipes and caches call the `pub` functions
//! below; applications have no need to.
//!
//! # Without the `metrics` feature
//!
//! curator-core's `metrics` feature (on by default) brings in the facade. Without it the
//! names stay, every hook keeps its signature and does nothing, and [`describe`] does nothing:
//! no caller changes.
//!
//! Not measured per request: the requests that recipes and caches pipeline on a session's raw
//! client (a lock's create and listing, a cache's multi-reads); the lock, leader and cache
//! metrics cover them.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "metrics")]
use ::metrics::{counter, gauge, histogram};
#[cfg(not(feature = "metrics"))]
use off::{counter, gauge, histogram};

use crate::connection_state::{ConnectionState, ConnectionStateEvent};
use crate::error::CuratorError;

mod recipes;
pub use recipes::*;

/// Gauge: a framework's latest connection state as a number: 0 `Latent`, 1 `Connected`,
/// 2 `Suspended`, 3 `Reconnected`, 4 `Lost`, 5 `ReadOnly`, 6 `Closed` (see
/// [`state_number`]). Label `framework`: the framework's
/// [`metrics_name`](crate::CuratorFramework::metrics_name) (the builder's, or its connect string
/// followed by its namespace), one series per framework. Set at every transition; it stays at
/// 6 after the close.
pub const CONNECTION_STATE: &str = "curator_connection_state";

/// Counter: connection-state transitions, by the state entered. Label `state`: `connected`,
/// `suspended`, `reconnected`, `lost`, `read_only`, `closed`. Moves at every transition the
/// framework publishes (docs/architecture.md section 3.3).
pub const CONNECTION_STATE_CHANGES: &str = "curator_connection_state_changes_total";

/// Counter: sessions opened by the framework (the first, and each one after a loss). No labels.
/// Moves when a session is published connected with a new generation.
pub const SESSIONS: &str = "curator_sessions_total";

/// Counter: sessions lost, by how the framework learnt it. Label `reason`: `expired` (the
/// server said so), `presumed` (no answer for 19/20 of the session timeout,
/// docs/architecture.md section 3.2), `closed` or `auth_failed` (the session's other terminal
/// states). Moves when the session manager publishes `Lost`.
pub const SESSION_EXPIRATIONS: &str = "curator_session_expirations_total";

/// Counter: connections regained on the same session (`Reconnected` after `Suspended`, not a
/// new session). No labels.
pub const RECONNECTIONS: &str = "curator_reconnections_total";

/// Counter: failed attempts to open a session (one attempt is one pass over the connect
/// string's servers). No labels.
pub const CONNECT_FAILURES: &str = "curator_connect_failures_total";

/// Histogram, seconds: one framework operation, from the call to its result, retries and waits
/// for a connection included (the fluent operations, and recipes' calls through
/// `call_with_retry`). Label `op`: the operation kind (`create`, `delete`, `get_data`,
/// `set_data`, `get_children`, `exists`, `transaction`, `guarded_transaction` (a transaction
/// guarded by a hold, `TransactionBuilder::guarded_by`), ..., and the recipes' own such as
/// `lock-participants`). Recorded once per call, whether it succeeded or failed.
pub const OPERATION_DURATION: &str = "curator_operation_duration_seconds";

/// Counter: operations that failed, by operation kind and error kind. Labels `op` (as
/// [`OPERATION_DURATION`]) and `error` (see [`error_kind`]: `no_node`, `node_exists`,
/// `bad_version`, `connection_loss`, `not_connected`, `session_expired`, `timeout`, `closed`,
/// ...). Moves once per failed call, after the retries. A definite answer such as `no_node`
/// counts: it is the operation's outcome.
pub const OPERATION_ERRORS: &str = "curator_operation_errors_total";

/// Counter: retries of operations, by operation kind and the error that caused the retry.
/// Labels `op` and `error` (as [`OPERATION_ERRORS`]). Moves once per retry the policy allowed.
pub const OPERATION_RETRIES: &str = "curator_operation_retries_total";

/// Histogram, seconds: how long an acquire waited, from its start to the grant. Label
/// `recipe` (see [`recipe`]). Recorded for granted acquires only (not for timed-out or
/// abandoned ones); a reentrant acquire that only counts up records nothing.
pub const LOCK_WAIT: &str = "curator_lock_wait_seconds";

/// Histogram, seconds: how long a node held, from the grant to its release or its loss. Label
/// `recipe`. Recorded once per hold when it ends.
pub const LOCK_HOLD: &str = "curator_lock_hold_seconds";

/// Counter: holds that ended otherwise than by their release (the lock may have been lost).
/// Labels `recipe` and `reason`: `suspended`, `session_lost`, `node_deleted`, `closed` (the
/// reasons of the recipes' `LockLost`). Moves once per hold, when the hold learns of it: from
/// `lost()`, `is_held()` or its release, whichever comes first.
pub const LOCK_LOST: &str = "curator_lock_lost_total";

/// Counter: terms of leadership begun in this process. Label `recipe`: `leader_latch` or
/// `leader_selector`. Summed over the participants of an election, it counts the election's
/// leader changes.
pub const LEADER_CHANGES: &str = "curator_leader_changes_total";

/// Counter: terms of leadership that failed: the leadership function panicked. Label `recipe`:
/// `leader_selector` (the only recipe that runs a function per term). Moves once per failed
/// term, when it ends; an auto-requeuing selector then waits the framework's retry policy's
/// pause before it gets back in line.
pub const LEADER_TERM_FAILURES: &str = "curator_leader_term_failures_total";

/// Counter: full loads of a cache (the first, and each re-read after a reconnection, a lost
/// session or a failed read; docs/architecture.md section 9). Label `cache`: `curator_cache`,
/// `path_children_cache`, `node_cache`, `tree_cache`. Moves when a load completes.
pub const CACHE_LOADS: &str = "curator_cache_loads_total";

/// Counter: cache loads that failed (each is retried). Label `cache`.
pub const CACHE_LOAD_FAILURES: &str = "curator_cache_load_failures_total";

/// Histogram, seconds: how long a completed full load of a cache took. Label `cache`.
pub const CACHE_LOAD_DURATION: &str = "curator_cache_load_duration_seconds";

/// Histogram, seconds: from a cache's receipt of a watch event to the hand-over of the cache
/// events it caused to the cache's listener queue (docs/architecture.md section 6.2), the
/// read of the changed node included. Label `cache`. Recorded once per watch event that
/// changed the cache. Time spent in the queue behind a slow listener is not included.
pub const CACHE_EVENT_LAG: &str = "curator_cache_event_lag_seconds";

/// The values of the `recipe` label of [`LOCK_WAIT`], [`LOCK_HOLD`], [`LOCK_LOST`],
/// [`LEADER_CHANGES`] and [`LEADER_TERM_FAILURES`].
pub mod recipe {
    /// `InterProcessMutex` (and what is built on it: `QueuedMutex`, the multi-lock's mutexes,
    /// a semaphore's inner mutex `P/locks`).
    pub const MUTEX: &str = "mutex";
    /// The read side of `InterProcessReadWriteLock`.
    pub const READ: &str = "read";
    /// The write side of `InterProcessReadWriteLock`.
    pub const WRITE: &str = "write";
    /// A semaphore lease (`InterProcessSemaphoreV2`, `InterProcessSemaphoreMutex`): its hold
    /// only; a lease's wait is its inner mutex's wait.
    pub const LEASE: &str = "lease";
    /// `LeaderLatch`.
    pub const LEADER_LATCH: &str = "leader_latch";
    /// `LeaderSelector`.
    pub const LEADER_SELECTOR: &str = "leader_selector";
}

/// The values of the `cache` label of the cache metrics.
pub mod cache {
    /// `CuratorCache`.
    pub const CURATOR_CACHE: &str = "curator_cache";
    /// `PathChildrenCache`.
    pub const PATH_CHILDREN_CACHE: &str = "path_children_cache";
    /// `NodeCache`.
    pub const NODE_CACHE: &str = "node_cache";
    /// `TreeCache`.
    pub const TREE_CACHE: &str = "tree_cache";
}

/// Tells the installed recorder the unit and a one-line help text of every metric (an exporter
/// shows them, as Prometheus's `# HELP`). Call it once, after installing the recorder; metrics
/// are recorded whether or not it is called.
pub fn describe() {
    #[cfg(feature = "metrics")]
    describe_all();
}

#[cfg(feature = "metrics")]
fn describe_all() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    let state = "connection state: 0 latent, 1 connected, 2 suspended, 3 reconnected, 4 lost, 5 read_only, 6 closed";
    describe_gauge!(CONNECTION_STATE, state);
    describe_counter!(CONNECTION_STATE_CHANGES, Unit::Count, "connection-state transitions, by state entered");
    describe_counter!(SESSIONS, Unit::Count, "sessions opened");
    describe_counter!(SESSION_EXPIRATIONS, Unit::Count, "sessions lost, by reason");
    describe_counter!(RECONNECTIONS, Unit::Count, "connections regained on the same session");
    describe_counter!(CONNECT_FAILURES, Unit::Count, "failed attempts to open a session");
    describe_histogram!(OPERATION_DURATION, Unit::Seconds, "operation time, retries included, by op");
    describe_counter!(OPERATION_ERRORS, Unit::Count, "failed operations, by op and error");
    describe_counter!(OPERATION_RETRIES, Unit::Count, "operation retries, by op and error");
    describe_histogram!(LOCK_WAIT, Unit::Seconds, "acquire start to grant, by recipe");
    describe_histogram!(LOCK_HOLD, Unit::Seconds, "grant to release or loss, by recipe");
    describe_counter!(LOCK_LOST, Unit::Count, "holds that may have been lost, by recipe and reason");
    describe_counter!(LEADER_CHANGES, Unit::Count, "terms of leadership begun here, by recipe");
    describe_counter!(LEADER_TERM_FAILURES, Unit::Count, "terms whose leadership function failed, by recipe");
    describe_counter!(CACHE_LOADS, Unit::Count, "full cache loads, by cache");
    describe_counter!(CACHE_LOAD_FAILURES, Unit::Count, "failed cache loads, by cache");
    describe_histogram!(CACHE_LOAD_DURATION, Unit::Seconds, "full cache load time, by cache");
    describe_histogram!(CACHE_EVENT_LAG, Unit::Seconds, "watch event to listener queue, by cache");
    recipes::describe_recipes();
}

/// The number [`CONNECTION_STATE`] shows for `state`.
pub fn state_number(state: ConnectionState) -> u8 {
    match state {
        ConnectionState::Latent => 0,
        ConnectionState::Connected => 1,
        ConnectionState::Suspended => 2,
        ConnectionState::Reconnected => 3,
        ConnectionState::Lost => 4,
        ConnectionState::ReadOnly => 5,
        ConnectionState::Closed => 6,
    }
}

/// The `error` label value for `err`: its variant's name in snake case.
pub fn error_kind(err: &CuratorError) -> &'static str {
    match err {
        CuratorError::InvalidPath { .. } => "invalid_path",
        CuratorError::InvalidArgument { .. } => "invalid_argument",
        CuratorError::DataTooLarge { .. } => "data_too_large",
        CuratorError::SchemaViolation { .. } => "schema_violation",
        CuratorError::NoNode { .. } => "no_node",
        CuratorError::NodeExists { .. } => "node_exists",
        CuratorError::BadVersion { .. } => "bad_version",
        CuratorError::NotEmpty { .. } => "not_empty",
        CuratorError::NoAuth { .. } => "no_auth",
        CuratorError::NoChildrenForEphemerals { .. } => "no_children_for_ephemerals",
        CuratorError::InvalidAcl { .. } => "invalid_acl",
        CuratorError::NoWatcher { .. } => "no_watcher",
        CuratorError::ConnectionLoss { .. } => "connection_loss",
        CuratorError::NotConnected { .. } => "not_connected",
        CuratorError::SessionExpired { .. } => "session_expired",
        CuratorError::Timeout { .. } => "timeout",
        CuratorError::Closed => "closed",
        CuratorError::NotStarted { .. } => "not_started",
        CuratorError::AlreadyStarted { .. } => "already_started",
        CuratorError::AlreadyClosed { .. } => "already_closed",
        CuratorError::NoRuntime { .. } => "no_runtime",
        CuratorError::NotHeld { .. } => "not_held",
        CuratorError::AlreadyHeld { .. } => "already_held",
        CuratorError::OwnNodeLost { .. } => "own_node_lost",
        CuratorError::OutcomeUnknown { .. } => "outcome_unknown",
        CuratorError::GaveUp { .. } => "gave_up",
        CuratorError::IllegalState(_) => "illegal_state",
        CuratorError::BadData { .. } => "bad_data",
        #[cfg(feature = "tls")]
        CuratorError::Tls { .. } => "tls",
        CuratorError::AuthFailed { .. } => "auth_failed",
        CuratorError::Zk { .. } => "zk",
    }
}

// --- hooks: the core's ---

/// A connection-state transition of the framework labelled `framework`, published after
/// `previous_generation` (the state hub).
pub(crate) fn state_published(framework: &Arc<str>, event: &ConnectionStateEvent, previous_generation: u64) {
    // An `Arc` clone: the label is shared, not copied.
    gauge!(CONNECTION_STATE, "framework" => framework.clone()).set(f64::from(state_number(event.state)));
    // Literal labels: static keys, nothing built per call.
    match event.state {
        ConnectionState::Latent => {}
        ConnectionState::Connected => counter!(CONNECTION_STATE_CHANGES, "state" => "connected").increment(1),
        ConnectionState::Suspended => counter!(CONNECTION_STATE_CHANGES, "state" => "suspended").increment(1),
        ConnectionState::Reconnected => counter!(CONNECTION_STATE_CHANGES, "state" => "reconnected").increment(1),
        ConnectionState::Lost => counter!(CONNECTION_STATE_CHANGES, "state" => "lost").increment(1),
        ConnectionState::ReadOnly => counter!(CONNECTION_STATE_CHANGES, "state" => "read_only").increment(1),
        ConnectionState::Closed => counter!(CONNECTION_STATE_CHANGES, "state" => "closed").increment(1),
    }
    if event.state.is_connected() && event.generation > previous_generation {
        counter!(SESSIONS).increment(1);
    } else if event.state == ConnectionState::Reconnected {
        counter!(RECONNECTIONS).increment(1);
    }
}

/// The session manager presumed the session lost after a silence (docs/architecture.md
/// section 3.2).
pub(crate) fn session_presumed_lost() {
    counter!(SESSION_EXPIRATIONS, "reason" => "presumed").increment(1);
}

/// The session ended in the terminal state `state`.
pub(crate) fn session_ended(state: zookeeper_client::SessionState) {
    match state {
        zookeeper_client::SessionState::Expired => counter!(SESSION_EXPIRATIONS, "reason" => "expired").increment(1),
        zookeeper_client::SessionState::AuthFailed => {
            counter!(SESSION_EXPIRATIONS, "reason" => "auth_failed").increment(1)
        }
        _ => counter!(SESSION_EXPIRATIONS, "reason" => "closed").increment(1),
    }
}

/// An attempt to open a session failed.
pub(crate) fn connect_failed() {
    counter!(CONNECT_FAILURES).increment(1);
}

/// An operation `op` started at `started` ended with `error` (`None`: it succeeded).
pub(crate) fn operation_done(op: &'static str, started: Instant, error: Option<&CuratorError>) {
    histogram!(OPERATION_DURATION, "op" => op).record(started.elapsed());
    if let Some(err) = error {
        counter!(OPERATION_ERRORS, "op" => op, "error" => error_kind(err)).increment(1);
    }
}

/// An operation `op` is retried after an error of kind `error` (an [`error_kind`]).
pub(crate) fn operation_retried(op: &'static str, error: &'static str) {
    counter!(OPERATION_RETRIES, "op" => op, "error" => error).increment(1);
}

// --- hooks: for the recipes and caches of this workspace ---

/// A contender of `recipe` (a value of [`recipe`]) was granted its hold after waiting since
/// `started`: records [`LOCK_WAIT`].
pub fn lock_granted(recipe: &'static str, started: Instant) {
    histogram!(LOCK_WAIT, "recipe" => recipe).record(started.elapsed());
}

/// A hold of `recipe` granted at `granted` ended, by its release (`lost: None`) or with the
/// loss `lost` (a `reason` label value): records [`LOCK_HOLD`], and [`LOCK_LOST`] for a loss.
pub fn hold_ended(recipe: &'static str, granted: Instant, lost: Option<&'static str>) {
    histogram!(LOCK_HOLD, "recipe" => recipe).record(granted.elapsed());
    if let Some(reason) = lost {
        counter!(LOCK_LOST, "recipe" => recipe, "reason" => reason).increment(1);
    }
}

/// A term of leadership of `recipe` began in this process: records [`LEADER_CHANGES`].
pub fn leader_changed(recipe: &'static str) {
    counter!(LEADER_CHANGES, "recipe" => recipe).increment(1);
}

/// A term of leadership of `recipe` failed (its function panicked): records
/// [`LEADER_TERM_FAILURES`].
pub fn leader_term_failed(recipe: &'static str) {
    counter!(LEADER_TERM_FAILURES, "recipe" => recipe).increment(1);
}

/// A full load of a cache of kind `cache` (a value of [`cache`]) completed in `took`.
pub fn cache_loaded(cache: &'static str, took: Duration) {
    counter!(CACHE_LOADS, "cache" => cache).increment(1);
    histogram!(CACHE_LOAD_DURATION, "cache" => cache).record(took);
}

/// A load of a cache of kind `cache` failed.
pub fn cache_load_failed(cache: &'static str) {
    counter!(CACHE_LOAD_FAILURES, "cache" => cache).increment(1);
}

/// The events caused by a watch event received at `received` were handed to the listener
/// queue of a cache of kind `cache`: records [`CACHE_EVENT_LAG`].
pub fn cache_event_delivered(cache: &'static str, received: Instant) {
    histogram!(CACHE_EVENT_LAG, "cache" => cache).record(received.elapsed());
}

/// Without the `metrics` feature: the facade's three macros as no-ops, so that the hooks above
/// read the same either way. The arguments are evaluated (they are plain values) and dropped.
#[cfg(not(feature = "metrics"))]
mod off {
    /// A handle that records nothing.
    pub(super) struct Nothing;

    impl Nothing {
        pub(super) fn increment<T>(&self, _: T) {}
        pub(super) fn set(&self, _: f64) {}
        pub(super) fn record<T>(&self, _: T) {}
    }

    macro_rules! noop {
        ($name:expr $(, $key:literal => $value:expr)* $(,)?) => {{
            let _ = ($name, $(($key, $value)),*);
            $crate::metrics::off::Nothing
        }};
    }
    pub(crate) use noop as counter;
    pub(crate) use noop as gauge;
    pub(crate) use noop as histogram;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_carry_their_unit() {
        let all = [
            CONNECTION_STATE,
            CONNECTION_STATE_CHANGES,
            SESSIONS,
            SESSION_EXPIRATIONS,
            RECONNECTIONS,
            CONNECT_FAILURES,
            OPERATION_DURATION,
            OPERATION_ERRORS,
            OPERATION_RETRIES,
            LOCK_WAIT,
            LOCK_HOLD,
            LOCK_LOST,
            LEADER_CHANGES,
            LEADER_TERM_FAILURES,
            CACHE_LOADS,
            CACHE_LOAD_FAILURES,
            CACHE_LOAD_DURATION,
            CACHE_EVENT_LAG,
            QUEUE_PUTS,
            QUEUE_TAKES,
            QUEUE_REDELIVERIES,
            QUEUE_FENCE_FAILURES,
            ATOMIC_TRIES,
            ATOMIC_PROMOTIONS,
            BARRIER_WAITS,
            DISCOVERY_REGISTRATIONS,
            DISCOVERY_CACHE_INSTANCES,
            DISCOVERY_PICKS,
            DISCOVERY_INSTANCE_ERRORS,
            DISCOVERY_INSTANCES_DOWN,
        ];
        for name in all {
            assert!(name.starts_with("curator_"), "{name}");
            let gauge = name == CONNECTION_STATE || name == DISCOVERY_CACHE_INSTANCES;
            assert!(gauge || name.ends_with("_total") || name.ends_with("_seconds"), "{name}");
        }
        assert_eq!(state_number(ConnectionState::Closed), 6);
    }
}
