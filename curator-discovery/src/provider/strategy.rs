//! [`ProviderStrategy`] and Curator's three strategies: [`RoundRobinStrategy`],
//! [`RandomStrategy`] and [`StickyStrategy`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::ServiceInstance;

use super::lock;

/// How a [`ServiceProvider`](crate::ServiceProvider) picks one instance for a single use from
/// the instances it may use now (Curator's `ProviderStrategy`).
///
/// The provider calls [`pick`](ProviderStrategy::pick) with the instances of its
/// `InstanceProvider` that pass its filters, in the provider's order, on every
/// [`instance`](crate::ServiceProvider::instance); the strategy is shared by every caller of
/// the provider, hence `Send + Sync`.
pub trait ProviderStrategy<T>: Send + Sync {
    /// One of `instances`, or `None` when there is none to pick (Curator returns `null`).
    fn pick<'a>(&self, instances: &'a [ServiceInstance<T>]) -> Option<&'a ServiceInstance<T>>;
}

impl<T, S: ProviderStrategy<T> + ?Sized> ProviderStrategy<T> for Box<S> {
    fn pick<'a>(&self, instances: &'a [ServiceInstance<T>]) -> Option<&'a ServiceInstance<T>> {
        (**self).pick(instances)
    }
}

/// Walks the list in order, one step per pick, as Curator's `RoundRobinStrategy`: the `n`-th
/// pick (from 0) returns `instances[n % len]` of the list it is given.
///
/// The counter belongs to the strategy, not to an instance: when the list changes between
/// picks the walk goes on at the same position in the new list. An empty list gives `None` and
/// does not move the counter. The default strategy of a
/// [`ServiceProvider`](crate::ServiceProvider).
///
/// Curator counts in a Java `int`, whose absolute value turns negative after 2^31 picks (the
/// pick then fails); this counter is a `usize` that wraps round.
#[derive(Debug, Default)]
pub struct RoundRobinStrategy {
    next: AtomicUsize,
}

impl RoundRobinStrategy {
    /// A strategy whose first pick is the first instance.
    pub fn new() -> RoundRobinStrategy {
        RoundRobinStrategy::default()
    }
}

impl<T> ProviderStrategy<T> for RoundRobinStrategy {
    fn pick<'a>(&self, instances: &'a [ServiceInstance<T>]) -> Option<&'a ServiceInstance<T>> {
        if instances.is_empty() {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        instances.get(n % instances.len())
    }
}

/// Picks an instance at random, each equally likely, as Curator's `RandomStrategy`. An empty
/// list gives `None`.
#[derive(Debug)]
pub struct RandomStrategy {
    rng: Mutex<fastrand::Rng>,
}

impl RandomStrategy {
    /// A strategy seeded from the operating system's randomness.
    pub fn new() -> RandomStrategy {
        RandomStrategy { rng: Mutex::new(fastrand::Rng::new()) }
    }

    /// A strategy whose picks are the same on every run for the same `seed` and the same lists
    /// (for tests and simulations).
    pub fn with_seed(seed: u64) -> RandomStrategy {
        RandomStrategy { rng: Mutex::new(fastrand::Rng::with_seed(seed)) }
    }
}

impl Default for RandomStrategy {
    fn default() -> RandomStrategy {
        RandomStrategy::new()
    }
}

impl<T> ProviderStrategy<T> for RandomStrategy {
    fn pick<'a>(&self, instances: &'a [ServiceInstance<T>]) -> Option<&'a ServiceInstance<T>> {
        if instances.is_empty() {
            return None;
        }
        let i = lock(&self.rng).usize(..instances.len());
        instances.get(i)
    }
}

/// Keeps returning the same instance for as long as it is in the list, as Curator's
/// `StickyStrategy`: another strategy (the master) picks the first instance, and picks again
/// only when the one held is no longer in the list.
///
/// "In the list" means an equal instance (every field, payload included, as Curator's
/// `equals`): when the held instance's registration is updated, the master picks again.
/// [`instance_number`](StickyStrategy::instance_number) counts the changes.
pub struct StickyStrategy<T> {
    master: Box<dyn ProviderStrategy<T>>,
    held: Mutex<Option<ServiceInstance<T>>>,
    picks: AtomicU64,
}

impl<T> StickyStrategy<T> {
    /// A sticky strategy that uses `master` to pick the instance to hold.
    pub fn new(master: impl ProviderStrategy<T> + 'static) -> StickyStrategy<T> {
        StickyStrategy { master: Box::new(master), held: Mutex::new(None), picks: AtomicU64::new(0) }
    }

    /// How many times the master has picked the instance to hold: 0 before the first pick, and
    /// one more each time the held instance left the list and another was picked, so that a
    /// change of instance can be seen (Curator's `getInstanceNumber`, which starts at -1).
    ///
    /// Unlike Curator's, the number does not move on a pick from an empty list, which picks
    /// nothing.
    pub fn instance_number(&self) -> u64 {
        self.picks.load(Ordering::Relaxed)
    }
}

impl<T> std::fmt::Debug for StickyStrategy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StickyStrategy").field("instance_number", &self.instance_number()).finish_non_exhaustive()
    }
}

impl<T: Clone + PartialEq + Send + Sync> ProviderStrategy<T> for StickyStrategy<T> {
    fn pick<'a>(&self, instances: &'a [ServiceInstance<T>]) -> Option<&'a ServiceInstance<T>> {
        let mut held = lock(&self.held);
        if let Some(current) = held.as_ref() {
            if let Some(found) = instances.iter().find(|i| *i == current) {
                return Some(found);
            }
        }
        let chosen = self.master.pick(instances);
        *held = chosen.cloned();
        if chosen.is_some() {
            self.picks.fetch_add(1, Ordering::Relaxed);
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `qty` instances of service "foo" with ids `starting_at`.., as Curator's
    /// `TestStrategies.TestInstanceProvider`.
    fn instances(qty: usize, starting_at: usize) -> Vec<ServiceInstance<()>> {
        (0..qty)
            .map(|i| ServiceInstance::builder("foo").id((i + starting_at).to_string()).registration_time_utc(1).build())
            .collect()
    }

    /// Follows Curator's `TestStrategies.testRandom`: 1,000 picks among 10 instances are spread
    /// evenly (standard deviation of the counts at most 20). Seeded, so the same on every run;
    /// a second seed checks that the spread is not luck of one seed.
    #[test]
    fn random_spreads_evenly() {
        let list = instances(10, 0);
        for seed in [7, 20240601] {
            let strategy = RandomStrategy::with_seed(seed);
            let mut counts = [0u32; 10];
            for _ in 0..1000 {
                let picked = strategy.pick(&list).expect("a pick from 10");
                counts[picked.id.parse::<usize>().expect("numeric id")] += 1;
            }
            let mean = 100.0;
            let variance = counts.iter().map(|&c| (f64::from(c) - mean).powi(2)).sum::<f64>() / 9.0;
            assert!(variance.sqrt() <= 20.0, "seed {seed}: counts {counts:?}");
            assert!(counts.iter().all(|&c| c > 0), "seed {seed}: counts {counts:?}");
        }
    }

    /// The same seed gives the same picks.
    #[test]
    fn random_with_a_seed_repeats() {
        let list = instances(10, 0);
        let (a, b) = (RandomStrategy::with_seed(42), RandomStrategy::with_seed(42));
        let picks = |s: &RandomStrategy| (0..50).map(|_| s.pick(&list).map(|i| i.id.clone())).collect::<Vec<_>>();
        assert_eq!(picks(&a), picks(&b));
    }

    /// Follows Curator's `TestStrategies.testRoundRobin`: the i-th pick is instance `i % 10`,
    /// over 12,350 picks.
    #[test]
    fn round_robin_walks_in_order() {
        let list = instances(10, 0);
        let strategy = RoundRobinStrategy::new();
        for i in 0..10 {
            assert_eq!(strategy.pick(&list).map(|x| x.id.as_str()), Some(i.to_string().as_str()));
        }
        for i in 0..1234 * 10 {
            assert_eq!(strategy.pick(&list).map(|x| x.id.as_str()), Some((i % 10).to_string().as_str()));
        }
    }

    /// An empty list gives `None` from every strategy (Curator's `null`), and round robin's
    /// counter does not move on it (Curator returns before `getAndIncrement`).
    #[test]
    fn an_empty_list_picks_nothing() {
        let empty: Vec<ServiceInstance<()>> = Vec::new();
        let list = instances(3, 0);
        let round_robin = RoundRobinStrategy::new();
        assert_eq!(round_robin.pick(&empty), None);
        assert_eq!(round_robin.pick(&list).map(|i| i.id.as_str()), Some("0"));
        assert_eq!(round_robin.pick(&empty), None);
        assert_eq!(round_robin.pick(&list).map(|i| i.id.as_str()), Some("1"));
        assert_eq!(RandomStrategy::with_seed(1).pick(&empty), None);
        let sticky = StickyStrategy::new(RoundRobinStrategy::new());
        assert_eq!(sticky.pick(&empty), None);
        assert_eq!(sticky.instance_number(), 0);
    }

    /// Round robin's counter is the strategy's, not the list's: when the list shrinks the walk
    /// goes on at the same count, modulo the new length (Curator's `index % size`).
    #[test]
    fn round_robin_keeps_counting_when_the_list_changes() {
        let strategy = RoundRobinStrategy::new();
        let five = instances(5, 0);
        let three = instances(3, 0);
        let ids: Vec<String> = [&five, &five, &three, &three, &five]
            .iter()
            .map(|list| strategy.pick(list).map(|i| i.id.clone()).unwrap_or_default())
            .collect();
        // Counts 0, 1, 2, 3, 4: 0 % 5, 1 % 5, 2 % 3, 3 % 3, 4 % 5.
        assert_eq!(ids, ["0", "1", "2", "0", "4"]);
    }

    /// Follows Curator's `TestStrategies.testSticky`: sticky over random returns the same
    /// instance 1,000 times; when the whole list is replaced it picks a new one (and its
    /// instance number moves), which it then keeps.
    #[test]
    fn sticky_keeps_its_instance_while_listed() {
        let strategy = StickyStrategy::new(RandomStrategy::with_seed(3));
        let list = instances(10, 0);
        let the_instance = strategy.pick(&list).cloned().expect("a pick from 10");
        let number = strategy.instance_number();
        assert_eq!(number, 1);
        for _ in 0..1000 {
            assert_eq!(strategy.pick(&list), Some(&the_instance));
        }

        // Every instance goes down and ten others come up.
        let list = instances(10, 10);
        let new_instance = strategy.pick(&list).cloned().expect("a pick from 10");
        assert_ne!(new_instance, the_instance);
        assert_ne!(strategy.instance_number(), number);
        for _ in 0..1000 {
            assert_eq!(strategy.pick(&list), Some(&new_instance));
        }
        assert_eq!(strategy.instance_number(), 2);
    }

    /// Sticky keeps its instance while others come and go, and picks again only once it has
    /// gone; an updated registration (a new payload) counts as gone, as Curator's `equals`.
    #[test]
    fn sticky_changes_only_when_its_instance_leaves() {
        let strategy = StickyStrategy::new(RoundRobinStrategy::new());
        let mut list: Vec<ServiceInstance<String>> =
            (0..3).map(|i| ServiceInstance::builder("s").id(i.to_string()).registration_time_utc(1).build()).collect();
        assert_eq!(strategy.pick(&list).map(|i| i.id.as_str()), Some("0"));
        list.remove(2);
        list.insert(0, ServiceInstance::builder("s").id("9").registration_time_utc(1).build());
        assert_eq!(strategy.pick(&list).map(|i| i.id.as_str()), Some("0"));
        assert_eq!(strategy.instance_number(), 1);

        // Instance "0" re-registers with a payload: the master (round robin, second pick)
        // picks again.
        list[1].payload = Some("new".to_owned());
        assert_eq!(strategy.pick(&list).map(|i| i.id.as_str()), Some("0"));
        assert_eq!(strategy.instance_number(), 2);
        // Instance "0" leaves: round robin's third pick, index 2 % 2 of ["9", "1"].
        list.retain(|i| i.id != "0");
        assert_eq!(strategy.pick(&list).map(|i| i.id.as_str()), Some("9"));
        assert_eq!(strategy.instance_number(), 3);
    }
}
