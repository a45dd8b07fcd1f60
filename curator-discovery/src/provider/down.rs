//! The down-instance policy: [`DownInstancePolicy`] and the [`DownInstanceManager`] that keeps
//! instances with errors out of a [`ServiceProvider`](crate::ServiceProvider)'s picks for a
//! while, as Curator's `DownInstancePolicy` and `DownInstanceManager`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ServiceInstance;

use super::{lock, InstanceFilter};

/// When an instance counts as down (Curator's `DownInstancePolicy`): once it has had
/// `error_threshold` errors noted ([`ServiceProvider::note_error`](crate::ServiceProvider::note_error))
/// within `timeout` of the first of them, it is out until `timeout` after that first error.
///
/// The default is Curator's: 30 seconds, 2 errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownInstancePolicy {
    /// How long an instance stays out, counted from its first error noted; errors older than
    /// this are forgotten.
    pub timeout: Duration,
    /// How many errors within `timeout` make an instance down (0 counts as 1: an instance is
    /// never down before its first error).
    pub error_threshold: u32,
}

impl DownInstancePolicy {
    /// Curator's default timeout: 30 seconds.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Curator's default error threshold: 2.
    pub const DEFAULT_ERROR_THRESHOLD: u32 = 2;

    /// A policy with this timeout and error threshold.
    pub fn new(timeout: Duration, error_threshold: u32) -> DownInstancePolicy {
        DownInstancePolicy { timeout, error_threshold }
    }
}

impl Default for DownInstancePolicy {
    fn default() -> DownInstancePolicy {
        DownInstancePolicy::new(DownInstancePolicy::DEFAULT_TIMEOUT, DownInstancePolicy::DEFAULT_ERROR_THRESHOLD)
    }
}

/// The time source of a [`DownInstanceManager`]: `Instant::now` outside tests.
pub(crate) type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Counts the errors noted against instances and says which are down under a
/// [`DownInstancePolicy`] (Curator's `DownInstanceManager`). Every
/// [`ServiceProvider`](crate::ServiceProvider) has one, as a filter after the user's.
///
/// Instances are told apart as Curator tells them apart, by equality of every field (payload
/// included): an instance whose registration has been updated since its errors starts afresh.
///
/// Entries older than the timeout are dropped (at most every half timeout, on the next note or
/// question, as Curator purges), so the manager holds only instances with recent errors. One
/// difference from Curator: there an expired entry counts until that purge runs, so an
/// instance can stay out up to 1.5 times the timeout; here it is back once the timeout has
/// passed.
pub struct DownInstanceManager<T> {
    policy: DownInstancePolicy,
    clock: Clock,
    state: Mutex<State<T>>,
}

struct State<T> {
    last_purge: Instant,
    /// By (name, id), then the versions of that instance with errors (almost always one).
    entries: HashMap<(String, String), Vec<Status<T>>>,
}

struct Status<T> {
    instance: ServiceInstance<T>,
    first_error: Instant,
    errors: u32,
}

impl<T> DownInstanceManager<T> {
    /// A manager with no errors noted.
    pub fn new(policy: DownInstancePolicy) -> DownInstanceManager<T> {
        DownInstanceManager::with_clock(policy, Arc::new(Instant::now))
    }

    /// A manager that reads the time from `clock` (tests move it by hand).
    pub(crate) fn with_clock(policy: DownInstancePolicy, clock: Clock) -> DownInstanceManager<T> {
        let now = clock();
        DownInstanceManager { policy, clock, state: Mutex::new(State { last_purge: now, entries: HashMap::new() }) }
    }

    /// The policy.
    pub fn policy(&self) -> DownInstancePolicy {
        self.policy
    }

    /// Drops the entries whose first error is a timeout old or more, at most every half
    /// timeout (Curator's `purge`).
    fn purge(&self, state: &mut State<T>, now: Instant) {
        if now.saturating_duration_since(state.last_purge) < self.policy.timeout / 2 {
            return;
        }
        state.last_purge = now;
        let timeout = self.policy.timeout;
        state.entries.retain(|_, versions| {
            versions.retain(|s| now.saturating_duration_since(s.first_error) < timeout);
            !versions.is_empty()
        });
    }

    fn expired(&self, status: &Status<T>, now: Instant) -> bool {
        now.saturating_duration_since(status.first_error) >= self.policy.timeout
    }
}

impl<T: PartialEq> DownInstanceManager<T> {
    /// True unless the instance is down: it has had the policy's number of errors, and its
    /// first error is less than the timeout old (Curator's `apply`).
    pub fn is_up(&self, instance: &ServiceInstance<T>) -> bool {
        let now = (self.clock)();
        let mut state = lock(&self.state);
        self.purge(&mut state, now);
        let key = (instance.name.clone(), instance.id.clone());
        let Some(versions) = state.entries.get(&key) else { return true };
        match versions.iter().find(|s| s.instance == *instance) {
            Some(status) => self.expired(status, now) || status.errors < self.policy.error_threshold,
            None => true,
        }
    }

    /// Notes one error with the instance (Curator's `add`); the first error, or the first
    /// after the timeout has passed, starts a new count.
    pub fn note_error(&self, instance: &ServiceInstance<T>)
    where
        T: Clone,
    {
        let now = (self.clock)();
        let mut state = lock(&self.state);
        self.purge(&mut state, now);
        let versions = state.entries.entry((instance.name.clone(), instance.id.clone())).or_default();
        let index = match versions.iter().position(|s| s.instance == *instance) {
            Some(i) => i,
            None => {
                versions.push(Status { instance: instance.clone(), first_error: now, errors: 0 });
                versions.len() - 1
            }
        };
        let timeout = self.policy.timeout;
        let status = &mut versions[index];
        if now.saturating_duration_since(status.first_error) >= timeout {
            status.first_error = now;
            status.errors = 0;
        }
        status.errors = status.errors.saturating_add(1);
        let down = status.errors == self.policy.error_threshold;
        drop(state);
        curator_core::metrics::discovery_error_noted(down);
    }

    /// How many instances have errors noted that are not yet purged (for tests and
    /// diagnostics).
    pub fn tracked(&self) -> usize {
        lock(&self.state).entries.values().map(Vec::len).sum()
    }
}

impl<T: PartialEq + Send + Sync> InstanceFilter<T> for DownInstanceManager<T> {
    fn accept(&self, instance: &ServiceInstance<T>) -> bool {
        self.is_up(instance)
    }
}

impl<T> std::fmt::Debug for DownInstanceManager<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownInstanceManager").field("policy", &self.policy).finish_non_exhaustive()
    }
}

/// A clock that moves only when told (for tests of timeouts without sleeping).
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct ManualClock {
    now: Arc<Mutex<Instant>>,
}

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new() -> ManualClock {
        ManualClock { now: Arc::new(Mutex::new(Instant::now())) }
    }

    pub(crate) fn advance(&self, by: Duration) {
        *lock(&self.now) += by;
    }

    pub(crate) fn clock(&self) -> Clock {
        let now = self.now.clone();
        Arc::new(move || *lock(&now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str) -> ServiceInstance<()> {
        ServiceInstance::builder("hey").id(id).registration_time_utc(1).build()
    }

    /// Curator's `debugDownInstancePolicy` (1 s, 1 error) and `debugMultiDownInstancePolicy`
    /// (1 s, 2 errors).
    const ONE_ERROR: DownInstancePolicy = DownInstancePolicy { timeout: Duration::from_secs(1), error_threshold: 1 };
    const TWO_ERRORS: DownInstancePolicy = DownInstancePolicy { timeout: Duration::from_secs(1), error_threshold: 2 };

    /// Curator's defaults: 30 seconds, 2 errors.
    #[test]
    fn default_policy_is_curators() {
        assert_eq!(DownInstancePolicy::default(), DownInstancePolicy::new(Duration::from_secs(30), 2));
    }

    /// Follows Curator's `TestDownInstanceManager.testBasic`: with a threshold of 1, one error
    /// puts that instance, and only it, down.
    #[test]
    fn one_error_puts_an_instance_down() {
        let (one, two) = (instance("1"), instance("2"));
        let manager = DownInstanceManager::new(ONE_ERROR);
        assert!(manager.is_up(&one));
        assert!(manager.is_up(&two));
        manager.note_error(&one);
        assert!(!manager.is_up(&one));
        assert!(manager.is_up(&two));
    }

    /// Follows Curator's `TestDownInstanceManager.testThreshold`: with a threshold of 2, the
    /// first error leaves the instance up, the second puts it down.
    #[test]
    fn the_threshold_counts_errors() {
        let (one, two) = (instance("1"), instance("2"));
        let manager = DownInstanceManager::new(TWO_ERRORS);
        assert!(manager.is_up(&one));
        assert!(manager.is_up(&two));
        manager.note_error(&one);
        assert!(manager.is_up(&one));
        assert!(manager.is_up(&two));
        manager.note_error(&one);
        assert!(!manager.is_up(&one));
        assert!(manager.is_up(&two));
    }

    /// Follows Curator's `TestDownInstanceManager.testExpiration`, on a hand-moved clock
    /// instead of a sleep: a down instance is up again once the timeout has passed, and its
    /// entry is purged at the next purge.
    #[test]
    fn a_down_instance_is_back_after_the_timeout() {
        let clock = ManualClock::new();
        let (one, two) = (instance("1"), instance("2"));
        let manager = DownInstanceManager::with_clock(ONE_ERROR, clock.clock());
        manager.note_error(&one);
        assert!(!manager.is_up(&one));
        assert!(manager.is_up(&two));

        clock.advance(Duration::from_millis(999));
        assert!(!manager.is_up(&one), "still down just before the timeout");
        clock.advance(Duration::from_millis(1));
        assert!(manager.is_up(&one));
        assert!(manager.is_up(&two));
        // The last purge ran at 0.999 s; the next, half a timeout later, drops the entry.
        assert_eq!(manager.tracked(), 1);
        clock.advance(Duration::from_millis(498));
        assert!(manager.is_up(&two));
        assert_eq!(manager.tracked(), 1);
        clock.advance(Duration::from_millis(1));
        assert!(manager.is_up(&two));
        assert_eq!(manager.tracked(), 0, "the expired entry is purged");
    }

    /// The timeout counts from the first error: errors spread over more than the timeout do
    /// not add up, and an error after expiry starts a new count.
    #[test]
    fn errors_older_than_the_timeout_are_forgotten() {
        let clock = ManualClock::new();
        let one = instance("1");
        let manager = DownInstanceManager::with_clock(TWO_ERRORS, clock.clock());
        manager.note_error(&one);
        clock.advance(Duration::from_millis(1200));
        manager.note_error(&one);
        assert!(manager.is_up(&one), "the first error has expired: one error in the window");
        clock.advance(Duration::from_millis(300));
        manager.note_error(&one);
        assert!(!manager.is_up(&one), "two errors within the window");
        // Down until a second after the second count began (at 1.2 s), not after the last error.
        clock.advance(Duration::from_millis(699));
        assert!(!manager.is_up(&one));
        clock.advance(Duration::from_millis(1));
        assert!(manager.is_up(&one));
    }

    /// Where Curator's purge lags (it runs at most every half timeout, so an instance can stay
    /// out up to 1.5 timeouts), here an expired entry counts as gone at once; the purge still
    /// runs at most every half timeout and drops only expired entries.
    #[test]
    fn purge_runs_every_half_timeout() {
        let clock = ManualClock::new();
        let (one, two) = (instance("1"), instance("2"));
        let manager = DownInstanceManager::with_clock(ONE_ERROR, clock.clock());
        clock.advance(Duration::from_millis(400));
        manager.note_error(&one); // purge skipped: 0.4 s since the manager began
        clock.advance(Duration::from_millis(600));
        manager.note_error(&two); // purge at 1.0 s: "1" is 0.6 s old, kept
        assert_eq!(manager.tracked(), 2);
        clock.advance(Duration::from_millis(400));
        // 1.4 s: "1" has expired; the purge is not due (0.4 s since the last), yet "1" is up.
        assert!(manager.is_up(&one));
        assert_eq!(manager.tracked(), 2);
        clock.advance(Duration::from_millis(100));
        assert!(!manager.is_up(&two), "purge at 1.5 s; \"2\" is 0.5 s old");
        assert_eq!(manager.tracked(), 1);
    }

    /// Instances are told apart by every field, as Curator's `equals`: an updated
    /// registration of a down instance is up, and errors on two versions count apart.
    #[test]
    fn an_updated_registration_starts_afresh() {
        let manager = DownInstanceManager::new(ONE_ERROR);
        let old: ServiceInstance<String> =
            ServiceInstance::builder("hey").id("1").payload("v1".to_owned()).registration_time_utc(5).build();
        let mut new = old.clone();
        new.payload = Some("v2".to_owned());
        manager.note_error(&old);
        assert!(!manager.is_up(&old));
        assert!(manager.is_up(&new));
        manager.note_error(&new);
        assert!(!manager.is_up(&new));
        assert_eq!(manager.tracked(), 2);
    }

    /// A zero timeout never puts anything down (every error has expired at once), as in
    /// Curator.
    #[test]
    fn a_zero_timeout_keeps_everything_up() {
        let manager = DownInstanceManager::new(DownInstancePolicy::new(Duration::ZERO, 1));
        let one = instance("1");
        manager.note_error(&one);
        manager.note_error(&one);
        assert!(manager.is_up(&one));
    }
}
