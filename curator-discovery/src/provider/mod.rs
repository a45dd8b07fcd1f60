//! [`ServiceProvider`]: picks one instance of a service for a single use, as Curator's
//! `ServiceProvider`, from the instances an [`InstanceProvider`] holds (in practice a
//! `ServiceCache`), through the user's [`InstanceFilter`]s, the [`DownInstancePolicy`] and a
//! [`ProviderStrategy`].
//!
//! Nothing here talks to ZooKeeper: the provider is as current as its [`InstanceProvider`].

mod down;
mod filter;
mod strategy;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use down::{DownInstanceManager, DownInstancePolicy};
pub use filter::InstanceFilter;
pub use strategy::{ProviderStrategy, RandomStrategy, RoundRobinStrategy, StickyStrategy};

use curator_core::CuratorFramework;
use curator_core::{LifeState, Lifecycle};
use tokio::sync::oneshot;

use crate::{DiscoveryError, InstanceProvider, ServiceCache, ServiceInstance};
use down::Clock;

/// Locks a mutex of this module; a panic of another holder leaves nothing half done here, so
/// a poisoned lock is used as it is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Picks an instance of one service for a single use, as Curator's `ServiceProvider`.
///
/// On every [`instance`](ServiceProvider::instance) it takes the current instances from its
/// [`InstanceProvider`], keeps those that pass its filters in this order, as Curator's
/// `ServiceProviderImpl`:
///
/// 1. the user's [`InstanceFilter`]s, in the order they were added;
/// 2. the down-instance filter: instances with too many errors noted
///    ([`note_error`](ServiceProvider::note_error)) under the [`DownInstancePolicy`] are out for
///    a while;
/// 3. enabled instances only ([`ServiceInstance::enabled`]);
///
/// and lets its [`ProviderStrategy`] pick one ([`RoundRobinStrategy`] unless the builder says
/// otherwise). Use the instance once and ask again: the list changes as instances come and go.
///
/// The provider is `Send + Sync`; share it (`Arc`) between tasks. Its methods do no I/O.
///
/// One made by [`ServiceDiscovery::service_provider`](crate::ServiceDiscovery::service_provider)
/// owns the [`ServiceCache`] it picks from: [`start`](Self::start) starts it,
/// [`ready`](Self::ready) waits for its first load, [`close`](Self::close) closes it (as
/// Curator's provider's `start` and `close`). One built over another source has nothing to
/// start: its `start` and `ready` return `Ok` and its `close` does nothing but mark it
/// `Closed`; it picks without them.
///
/// ```
/// use std::sync::Arc;
/// use curator_discovery::{
///     DownInstancePolicy, InstanceProvider, RoundRobinStrategy, ServiceInstance, ServiceProvider,
/// };
///
/// // A fixed list; in practice the ServiceCache of the service.
/// struct Fixed(Vec<ServiceInstance>);
/// impl InstanceProvider<serde_json::Value> for Fixed {
///     fn instances(&self) -> Vec<ServiceInstance> {
///         self.0.clone()
///     }
/// }
/// let instance = |id: &str, port: u16| ServiceInstance::builder("search").id(id).port(port).build();
/// let source = Arc::new(Fixed(vec![instance("a", 8080), instance("b", 8080), instance("c", 9090)]));
///
/// let provider = ServiceProvider::builder()
///     .strategy(RoundRobinStrategy::new())
///     .filter(|i: &ServiceInstance| i.port == Some(8080))
///     .down_instance_policy(DownInstancePolicy::default()) // 2 errors: out for 30 s
///     .build(source);
///
/// let id = |i: Option<ServiceInstance>| i.map(|i| i.id);
/// assert_eq!(id(provider.instance()).as_deref(), Some("a"));
/// assert_eq!(id(provider.instance()).as_deref(), Some("b"));
/// assert_eq!(provider.all_instances().len(), 2); // "c" is filtered out
///
/// // "b" fails twice: the provider leaves it out for the next 30 seconds.
/// let b = provider.all_instances().remove(1);
/// provider.note_error(&b);
/// provider.note_error(&b);
/// assert_eq!(id(provider.instance()).as_deref(), Some("a"));
/// assert_eq!(id(provider.instance()).as_deref(), Some("a"));
/// ```
pub struct ServiceProvider<T = serde_json::Value> {
    source: Arc<dyn InstanceProvider<T>>,
    strategy: Box<dyn ProviderStrategy<T>>,
    filters: Vec<Box<dyn InstanceFilter<T>>>,
    down: DownInstanceManager<T>,
    /// The cache it owns, and its framework (a provider over a service cache).
    owned: Option<(Arc<ServiceCache<T>>, CuratorFramework)>,
    /// Started, it keeps the sender whose drop ends the task that waits for the first load.
    life: Lifecycle<oneshot::Sender<()>>,
}

impl<T: Clone + PartialEq + Send + Sync + 'static> ServiceProvider<T> {
    /// A builder with Curator's defaults: [`RoundRobinStrategy`], no filters of the user's,
    /// [`DownInstancePolicy::default`] (2 errors, 30 seconds). Finish it with
    /// [`build`](ServiceProviderBuilder::build) and the instance source.
    pub fn builder() -> ServiceProviderBuilder<T> {
        ServiceProviderBuilder::default()
    }

    /// One instance for a single use, picked by the strategy among those that pass the
    /// filters; `None` when none does (Curator returns `null`).
    pub fn instance(&self) -> Option<ServiceInstance<T>> {
        let instances = self.all_instances();
        let picked = self.strategy.pick(&instances).cloned();
        curator_core::metrics::discovery_picked(picked.is_some());
        picked
    }

    /// Every instance that passes the filters (the user's, not down, enabled), in the order of
    /// the [`InstanceProvider`] (Curator's `getAllInstances`).
    pub fn all_instances(&self) -> Vec<ServiceInstance<T>> {
        let mut instances = self.source.instances();
        instances.retain(|instance| {
            self.filters.iter().all(|f| f.accept(instance)) && self.down.accept(instance) && instance.enabled
        });
        instances
    }

    /// Notes an error using `instance` (Curator's `noteError`): once it has had the
    /// [`DownInstancePolicy`]'s number of errors, the provider leaves it out until the
    /// policy's timeout has passed since the first of them.
    ///
    /// Pass the instance the provider returned (or an equal one): instances are told apart by
    /// every field, as Curator's `equals`, so an instance whose registration has changed since
    /// starts with no errors.
    pub fn note_error(&self, instance: &ServiceInstance<T>) {
        self.down.note_error(instance);
    }

    /// The down-instance policy.
    pub fn down_instance_policy(&self) -> DownInstancePolicy {
        self.down.policy()
    }

    /// Starts the provider (Curator's `ServiceProvider.start`): starts the
    /// [`ServiceCache`] it owns (sync: [`ready`](Self::ready) waits for its first load). A
    /// provider over another source has nothing to start: `Ok`.
    ///
    /// # Errors
    /// For a provider owning a cache, [`DiscoveryError::Curator`] with
    /// [`AlreadyStarted`](curator_core::CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed),
    /// [`NoRuntime`](curator_core::CuratorError::NoRuntime) outside a tokio runtime or
    /// [`Closed`](curator_core::CuratorError::Closed) on a closed framework, each naming
    /// `ServiceProvider` ([`Lifecycle`](curator_core::Lifecycle)): nothing started then.
    pub fn start(&self) -> Result<(), DiscoveryError> {
        if let Some((cache, fw)) = &self.owned {
            self.life.start(fw, |started| {
                cache.start().map_err(into_curator)?;
                // The cache's first outcome is the provider's: a refusal closes the provider
                // too. The task ends with the provider (its close or drop drops `stop`).
                let readiness = started.readiness();
                let (stop, stopped) = oneshot::channel::<()>();
                let cache = cache.clone();
                started.spawn(async move {
                    tokio::select! {
                        _ = stopped => {}
                        outcome = cache.ready() => readiness.report(outcome.map_err(into_curator)),
                    }
                });
                Ok(stop)
            })?;
        }
        Ok(())
    }

    /// Waits for the outcome of [`start`](Self::start): the first load of the cache it owns
    /// ([`ServiceCache::ready`]); at once for a provider over another source.
    ///
    /// # Errors
    /// As [`ServiceCache::ready`]: a first load refused for good closes the cache and the
    /// provider ([`state`](Self::state) `Closed`).
    /// [`NotStarted`](curator_core::CuratorError::NotStarted) before `start`,
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) if closed first.
    pub async fn ready(&self) -> Result<(), DiscoveryError> {
        match &self.owned {
            Some(_) => Ok(self.life.ready().await?),
            None => Ok(()),
        }
    }

    /// Where the provider is in its life: `Closed` after [`close`](Self::close), and when the
    /// cache it owns is closed (its first load refused).
    pub fn state(&self) -> LifeState {
        self.life.state()
    }

    /// Closes the provider (Curator's `ServiceProvider.close`): closes the cache it owns.
    /// Idempotent: a second call, or one on a provider never started (which can then no longer
    /// start), does nothing more. Dropping the provider closes its cache too.
    pub async fn close(&self) {
        self.life.close();
        if let Some((cache, _)) = &self.owned {
            cache.close().await;
        }
    }
}

/// The `CuratorError` in `err`, for the lifecycle's start (the cache's start gives only those).
fn into_curator(err: DiscoveryError) -> curator_core::CuratorError {
    match err {
        DiscoveryError::Curator(err) => err,
        other => curator_core::CuratorError::IllegalState(other.to_string()),
    }
}

impl<T> std::fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProvider")
            .field("filters", &self.filters.len())
            .field("down", &self.down)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ServiceProvider`] (Curator's `ServiceProviderBuilder`); made by
/// [`ServiceProvider::builder`] or `Default`, finished by [`build`](ServiceProviderBuilder::build)
/// with the source of instances, so that whoever holds the source (the service discovery, with
/// a `ServiceCache`) can take a builder the user has set up and finish it.
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceProviderBuilder<T> {
    strategy: Option<Box<dyn ProviderStrategy<T>>>,
    filters: Vec<Box<dyn InstanceFilter<T>>>,
    policy: DownInstancePolicy,
    clock: Option<Clock>,
}

impl<T> Default for ServiceProviderBuilder<T> {
    fn default() -> ServiceProviderBuilder<T> {
        ServiceProviderBuilder {
            strategy: None,
            filters: Vec::new(),
            policy: DownInstancePolicy::default(),
            clock: None,
        }
    }
}

impl<T: Clone + PartialEq + Send + Sync + 'static> ServiceProviderBuilder<T> {
    /// Sets the strategy (default [`RoundRobinStrategy`]).
    pub fn strategy(mut self, strategy: impl ProviderStrategy<T> + 'static) -> Self {
        self.strategy = Some(Box::new(strategy));
        self
    }

    /// Adds a filter after those already added (Curator's `additionalFilter`); an instance is
    /// picked only if every filter accepts it.
    pub fn filter(mut self, filter: impl InstanceFilter<T> + 'static) -> Self {
        self.filters.push(Box::new(filter));
        self
    }

    /// Sets the down-instance policy (default [`DownInstancePolicy::default`]: 2 errors, 30
    /// seconds).
    pub fn down_instance_policy(mut self, policy: DownInstancePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Reads the down-instance manager's time from `clock` (tests move it by hand).
    #[cfg(test)]
    pub(crate) fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The provider, picking from the instances of `source`.
    pub fn build(self, source: Arc<dyn InstanceProvider<T>>) -> ServiceProvider<T> {
        self.finish(source, None)
    }

    /// The provider, picking from the instances of `cache`, which it owns (started with it,
    /// closed with it).
    pub(crate) fn build_over_cache(self, cache: Arc<ServiceCache<T>>) -> ServiceProvider<T> {
        let fw = cache.framework().clone();
        self.finish(cache.clone(), Some((cache, fw)))
    }

    fn finish(
        self,
        source: Arc<dyn InstanceProvider<T>>,
        owned: Option<(Arc<ServiceCache<T>>, CuratorFramework)>,
    ) -> ServiceProvider<T> {
        let down = match self.clock {
            Some(clock) => DownInstanceManager::with_clock(self.policy, clock),
            None => DownInstanceManager::new(self.policy),
        };
        ServiceProvider {
            source,
            strategy: self.strategy.unwrap_or_else(|| Box::new(RoundRobinStrategy::new())),
            filters: self.filters,
            down,
            owned,
            life: Lifecycle::new("ServiceProvider"),
        }
    }
}

impl<T> std::fmt::Debug for ServiceProviderBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProviderBuilder")
            .field("filters", &self.filters.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::down::ManualClock;
    use super::*;

    /// A source whose list the test changes, as a `ServiceCache` would.
    #[derive(Default)]
    struct Instances(Mutex<Vec<ServiceInstance<String>>>);

    impl Instances {
        fn set(&self, list: Vec<ServiceInstance<String>>) {
            *lock(&self.0) = list;
        }
    }

    impl InstanceProvider<String> for Instances {
        fn instances(&self) -> Vec<ServiceInstance<String>> {
            lock(&self.0).clone()
        }
    }

    fn source(ids: &[&str]) -> Arc<Instances> {
        let source = Arc::new(Instances::default());
        source.set(ids.iter().map(|id| instance(id)).collect());
        source
    }

    /// The same instance on every call for the same id (a fixed registration time: equality
    /// covers every field).
    fn instance(id: &str) -> ServiceInstance<String> {
        ServiceInstance::builder("test")
            .id(id)
            .payload("thing".to_owned())
            .port(10064)
            .registration_time_utc(1_700_000_000_000)
            .build()
    }

    fn ids(instances: &[ServiceInstance<String>]) -> Vec<&str> {
        instances.iter().map(|i| i.id.as_str()).collect()
    }

    fn picked(provider: &ServiceProvider<String>) -> Option<String> {
        provider.instance().map(|i| i.id)
    }

    /// Follows Curator's `TestServiceProvider.testBasic` (without ZooKeeper: the source is a
    /// fixed list): the provider returns the one instance, and `all_instances` is that list.
    #[test]
    fn a_provider_returns_the_instance() {
        let only = instance("1");
        let source = Arc::new(Instances::default());
        source.set(vec![only.clone()]);
        let provider = ServiceProvider::builder().build(source);
        assert_eq!(provider.instance(), Some(only.clone()));
        assert_eq!(provider.all_instances(), vec![only]);
    }

    /// Follows Curator's `TestServiceProvider.testDisabledInstance`: a disabled instance is
    /// neither returned nor listed.
    #[test]
    fn a_disabled_instance_is_not_provided() {
        let mut off = instance("1");
        off.enabled = false;
        let source = Arc::new(Instances::default());
        source.set(vec![off]);
        let provider = ServiceProvider::builder().build(source);
        assert_eq!(provider.instance(), None);
        assert!(provider.all_instances().is_empty(), "a disabled instance is listed");
    }

    /// The default strategy is round robin (Curator's `ServiceProviderBuilder`), over the
    /// filtered list; an empty source gives `None`.
    #[test]
    fn round_robin_by_default() {
        let source = source(&["a", "b", "c"]);
        let provider = ServiceProvider::builder().build(source.clone());
        let picks: Vec<_> = (0..4).filter_map(|_| picked(&provider)).collect();
        assert_eq!(picks, ["a", "b", "c", "a"]);
        source.set(Vec::new());
        assert_eq!(provider.instance(), None);
        assert!(provider.all_instances().is_empty());
    }

    /// Filters apply in the order added and all must accept (Curator's `additionalFilter`,
    /// `Predicates.and`); the strategy picks among what passes.
    #[test]
    fn filters_all_apply_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (first, second) = (seen.clone(), seen.clone());
        let provider = ServiceProvider::builder()
            .filter(move |i: &ServiceInstance<String>| {
                lock(&first).push(format!("1:{}", i.id));
                i.id != "a"
            })
            .filter(move |i: &ServiceInstance<String>| {
                lock(&second).push(format!("2:{}", i.id));
                i.id != "c"
            })
            .build(source(&["a", "b", "c", "d"]));
        assert_eq!(ids(&provider.all_instances()), ["b", "d"]);
        assert_eq!(*lock(&seen), ["1:a", "1:b", "2:b", "1:c", "2:c", "1:d", "2:d"]);
        assert_eq!(picked(&provider).as_deref(), Some("b"));
        assert_eq!(picked(&provider).as_deref(), Some("d"));
    }

    /// `note_error` with Curator's default policy: two errors put an instance out of
    /// `instance` and `all_instances` for 30 seconds (a hand-moved clock), then it is back.
    #[test]
    fn noted_errors_put_an_instance_out_for_the_timeout() {
        let clock = ManualClock::new();
        let provider = ServiceProvider::builder().clock(clock.clock()).build(source(&["a", "b"]));
        assert_eq!(provider.down_instance_policy(), DownInstancePolicy::new(Duration::from_secs(30), 2));
        let a = instance("a");
        provider.note_error(&a);
        assert_eq!(ids(&provider.all_instances()), ["a", "b"], "one error is under the threshold");
        provider.note_error(&a);
        assert_eq!(ids(&provider.all_instances()), ["b"]);
        for _ in 0..5 {
            assert_eq!(picked(&provider).as_deref(), Some("b"));
        }
        clock.advance(Duration::from_secs(29));
        assert_eq!(ids(&provider.all_instances()), ["b"]);
        clock.advance(Duration::from_secs(1));
        assert_eq!(ids(&provider.all_instances()), ["a", "b"]);
    }

    /// When every instance is down the provider gives `None`, as Curator's (it does not fall
    /// back to down instances).
    #[test]
    fn all_down_gives_none() {
        let provider = ServiceProvider::builder()
            .down_instance_policy(DownInstancePolicy::new(Duration::from_secs(60), 1))
            .build(source(&["a", "b"]));
        provider.note_error(&instance("a"));
        provider.note_error(&instance("b"));
        assert_eq!(provider.instance(), None);
    }

    /// A sticky provider keeps its instance until it is noted down, then sticks to another.
    #[test]
    fn sticky_moves_off_a_down_instance() {
        let provider = ServiceProvider::builder()
            .strategy(StickyStrategy::new(RoundRobinStrategy::new()))
            .down_instance_policy(DownInstancePolicy::new(Duration::from_secs(60), 1))
            .build(source(&["a", "b", "c"]));
        for _ in 0..3 {
            assert_eq!(picked(&provider).as_deref(), Some("a"));
        }
        provider.note_error(&instance("a"));
        for _ in 0..3 {
            assert_eq!(picked(&provider).as_deref(), Some("c"), "round robin's second pick: 1 % 2 of [b, c]");
        }
    }

    /// The provider follows its source: instances that come and go are picked or not at the
    /// next call.
    #[test]
    fn the_provider_follows_its_source() {
        let source = source(&["a"]);
        let provider = ServiceProvider::builder().strategy(RandomStrategy::with_seed(9)).build(source.clone());
        assert_eq!(picked(&provider).as_deref(), Some("a"));
        source.set(vec![instance("b")]);
        assert_eq!(picked(&provider).as_deref(), Some("b"));
    }

    /// The provider and its builder's parts can be shared between tasks and threads.
    #[test]
    fn the_provider_is_send_and_sync() {
        fn shareable<X: Send + Sync>() {}
        shareable::<ServiceProvider<String>>();
        shareable::<ServiceProviderBuilder<String>>();
        shareable::<DownInstanceManager<String>>();
        shareable::<StickyStrategy<String>>();
        shareable::<RandomStrategy>();
        shareable::<RoundRobinStrategy>();
    }
}
