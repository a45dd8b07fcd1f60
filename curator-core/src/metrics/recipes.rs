//! The names and hooks of the queues, atomic values, barriers and service discovery (issue 28
//! item 6), re-exported by the parent module: what is said there of labels and cost holds here.

#[cfg(feature = "metrics")]
use ::metrics::{counter, gauge};

#[cfg(not(feature = "metrics"))]
use super::off::{counter, gauge};

/// Counter: items put in a queue by this process (an offer of `SimpleDistributedQueue`, each
/// item of a `put` or `put_multi` of a `DistributedQueue` and its id, priority and delay
/// variants). Label `queue` (see [`queue`]). Moves once the item's node is created; a timed put
/// that found no room, or a put that failed, counts nothing.
pub const QUEUE_PUTS: &str = "curator_queue_puts_total";

/// Counter: items taken from a queue by this process: each item a `SimpleDistributedQueue`
/// take, poll or remove returned, and each item a `DistributedQueue` handed to its consumer
/// (whatever the consumer then answered). Label `queue`. An item handed over again after a
/// redelivery counts again.
pub const QUEUE_TAKES: &str = "curator_queue_takes_total";

/// Counter: item nodes put back or left for another consumer. Labels `queue` and `reason`:
/// `requeued` (a lock-safe consumer failed under `ErrorMode::Requeue`: the node is made again
/// at the tail), `released` (a lock-safe take ended unfinished: its lock may have been lost, the
/// fence refused the finish, or the queue closed; the node stays for the next consumer),
/// `reoffered` (a `SimpleDistributedQueue` take dropped after its delete went through: the item
/// is offered again). Moves once per node.
pub const QUEUE_REDELIVERIES: &str = "curator_queue_redeliveries_total";

/// Counter: lock-safe finishes (of a take, or of an id queue's `remove`) that the fence
/// refused because the item's lock node was no longer ours (docs/architecture.md section 17).
/// Label `reason`: `session_ended` (the lock's session ended: nothing is sent on the next one),
/// `lock_deleted` (the multi's check of the lock node failed). Moves once per finish.
pub const QUEUE_FENCE_FAILURES: &str = "curator_queue_fence_failures_total";

/// Counter: tries of atomic-value operations (a read and a versioned write each, the
/// `AtomicStats` tries). Label `phase`: `optimistic`, or `promoted` (under the promoted mutex).
/// Moves once per try.
pub const ATOMIC_TRIES: &str = "curator_atomic_tries_total";

/// Counter: atomic-value operations whose optimistic tries ran out under contention and which
/// went on to the promoted mutex (`PromotedToLock`). No labels. Moves once per operation, before
/// the mutex is acquired.
pub const ATOMIC_PROMOTIONS: &str = "curator_atomic_promotions_total";

/// Counter: barrier waits, by call and how they ended. Labels `call`: `wait`
/// (`DistributedBarrier::wait_on_barrier` and its timed form), `enter`, `leave`
/// (`DistributedDoubleBarrier`); `outcome`: `passed`, `timed_out` (a timed call's time ran out),
/// `failed` (an error). Moves once per call.
pub const BARRIER_WAITS: &str = "curator_barrier_waits_total";

/// Counter: registration calls of `ServiceDiscovery` that took effect. Label `op`: `register`
/// (the registration is accepted, before its node is made; the builder's `this_instance` at
/// `start` too), `update` (also a register of an id registered here already), `unregister` (an
/// id that was registered; an unknown id counts nothing).
pub const DISCOVERY_REGISTRATIONS: &str = "curator_discovery_registrations_total";

/// Gauge: the instances held by this process's open `ServiceCache`s of a service. Label
/// `service`: the service's name (one the application chose). Moves with each instance the
/// caches learn or forget, the first load's included; a cache's instances leave it when the
/// cache closes.
pub const DISCOVERY_CACHE_INSTANCES: &str = "curator_discovery_cache_instances";

/// Counter: picks of a `ServiceProvider` (`instance()`). Label `outcome`: `picked`, or `none`
/// (no instance passed the filters). Moves once per call.
pub const DISCOVERY_PICKS: &str = "curator_discovery_provider_picks_total";

/// Counter: errors noted with instances (`ServiceProvider::note_error`,
/// `DownInstanceManager::note_error`). No labels.
pub const DISCOVERY_INSTANCE_ERRORS: &str = "curator_discovery_instance_errors_total";

/// Counter: instances noted down: the error that brought an instance to its
/// `DownInstancePolicy`'s threshold, after which providers leave it out until the policy's
/// timeout. No labels. Moves once per instance and period.
pub const DISCOVERY_INSTANCES_DOWN: &str = "curator_discovery_instances_down_total";

/// The values of the `queue` label of the queue metrics.
pub mod queue {
    /// `SimpleDistributedQueue`.
    pub const SIMPLE: &str = "simple";
    /// `DistributedQueue` and its id, priority and delay variants, without a lock path.
    pub const DISTRIBUTED: &str = "distributed";
    /// The same with a lock path (lock-safe mode).
    pub const LOCK_SAFE: &str = "lock_safe";
}

/// How a barrier call ended, for [`barrier_waited`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierOutcome {
    /// Through the barrier.
    Passed,
    /// A timed call's time ran out.
    TimedOut,
    /// The call failed.
    Failed,
}

#[cfg(feature = "metrics")]
pub(super) fn describe_recipes() {
    use ::metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(QUEUE_PUTS, Unit::Count, "items put, by queue");
    describe_counter!(QUEUE_TAKES, Unit::Count, "items taken or handed to a consumer, by queue");
    describe_counter!(QUEUE_REDELIVERIES, Unit::Count, "item nodes put back or left, by queue and reason");
    describe_counter!(QUEUE_FENCE_FAILURES, Unit::Count, "lock-safe finishes refused by the fence, by reason");
    describe_counter!(ATOMIC_TRIES, Unit::Count, "atomic value tries, by phase");
    describe_counter!(ATOMIC_PROMOTIONS, Unit::Count, "atomic operations promoted to the mutex");
    describe_counter!(BARRIER_WAITS, Unit::Count, "barrier calls, by call and outcome");
    describe_counter!(DISCOVERY_REGISTRATIONS, Unit::Count, "registration calls, by op");
    describe_gauge!(DISCOVERY_CACHE_INSTANCES, Unit::Count, "instances in open service caches, by service");
    describe_counter!(DISCOVERY_PICKS, Unit::Count, "service provider picks, by outcome");
    describe_counter!(DISCOVERY_INSTANCE_ERRORS, Unit::Count, "errors noted with instances");
    describe_counter!(DISCOVERY_INSTANCES_DOWN, Unit::Count, "instances noted down");
}

// --- hooks ---

/// `n` items were put in a queue of kind `queue` (a value of [`queue`]).
pub fn queue_put(queue: &'static str, n: usize) {
    counter!(QUEUE_PUTS, "queue" => queue).increment(n as u64);
}

/// An item of a queue of kind `queue` was taken (handed to the caller or the consumer).
pub fn queue_taken(queue: &'static str) {
    counter!(QUEUE_TAKES, "queue" => queue).increment(1);
}

/// A lock-safe consumer's failed node was made again at the tail.
pub fn queue_requeued() {
    counter!(QUEUE_REDELIVERIES, "queue" => queue::LOCK_SAFE, "reason" => "requeued").increment(1);
}

/// A lock-safe take ended unfinished: its node stays for the next consumer.
pub fn queue_released() {
    counter!(QUEUE_REDELIVERIES, "queue" => queue::LOCK_SAFE, "reason" => "released").increment(1);
}

/// A dropped `SimpleDistributedQueue` take's item is offered again.
pub fn queue_reoffered() {
    counter!(QUEUE_REDELIVERIES, "queue" => queue::SIMPLE, "reason" => "reoffered").increment(1);
}

/// The fence refused a lock-safe finish: the lock's session ended (`session_ended`) or the
/// check of the lock node failed (otherwise).
pub fn queue_fence_failed(session_ended: bool) {
    match session_ended {
        true => counter!(QUEUE_FENCE_FAILURES, "reason" => "session_ended").increment(1),
        false => counter!(QUEUE_FENCE_FAILURES, "reason" => "lock_deleted").increment(1),
    }
}

/// One try of an atomic operation, optimistic or under the promoted mutex (`promoted`).
pub fn atomic_try(promoted: bool) {
    match promoted {
        true => counter!(ATOMIC_TRIES, "phase" => "promoted").increment(1),
        false => counter!(ATOMIC_TRIES, "phase" => "optimistic").increment(1),
    }
}

/// An atomic operation goes on to the promoted mutex.
pub fn atomic_promoted() {
    counter!(ATOMIC_PROMOTIONS).increment(1);
}

/// A barrier call `call` (`wait`, `enter` or `leave`) ended with `outcome`.
pub fn barrier_waited(call: &'static str, outcome: BarrierOutcome) {
    let outcome = match outcome {
        BarrierOutcome::Passed => "passed",
        BarrierOutcome::TimedOut => "timed_out",
        BarrierOutcome::Failed => "failed",
    };
    counter!(BARRIER_WAITS, "call" => call, "outcome" => outcome).increment(1);
}

/// A registration call `op` (`register`, `update` or `unregister`) took effect.
pub fn discovery_registration(op: &'static str) {
    counter!(DISCOVERY_REGISTRATIONS, "op" => op).increment(1);
}

/// A service cache of `service` learnt (`delta` > 0) or forgot (`delta` < 0) instances.
pub fn discovery_cache_changed(service: &std::sync::Arc<str>, delta: i64) {
    if delta != 0 {
        gauge!(DISCOVERY_CACHE_INSTANCES, "service" => service.clone()).increment(delta as f64);
    }
}

/// A service provider's pick found an instance (`picked`) or none.
pub fn discovery_picked(picked: bool) {
    match picked {
        true => counter!(DISCOVERY_PICKS, "outcome" => "picked").increment(1),
        false => counter!(DISCOVERY_PICKS, "outcome" => "none").increment(1),
    }
}

/// An error was noted with an instance; `down` if it brought the instance to its threshold.
pub fn discovery_error_noted(down: bool) {
    counter!(DISCOVERY_INSTANCE_ERRORS).increment(1);
    if down {
        counter!(DISCOVERY_INSTANCES_DOWN).increment(1);
    }
}
