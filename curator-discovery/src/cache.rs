//! [`ServiceCache`]: the instances of one service, kept in memory by a [`PathChildrenCache`]
//! of `base/<name>`, as Curator's `ServiceCache`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use curator_cache::{ChildData, PathChildrenCache, PathChildrenCacheEvent, StartMode};
#[cfg(doc)]
use curator_core::CuratorError;
use curator_core::CuratorFramework;
use curator_core::{EventStream, ListenerId, Listeners};
use curator_core::{LifeState, Lifecycle, Readiness};
use futures::FutureExt;

use crate::paths::Paths;
use crate::{DiscoveryError, InstanceFilter, InstanceProvider, InstanceSerializer, ServiceInstance};

/// A change in a [`ServiceCache`].
///
/// Curator's `ServiceCacheListener` has one `cacheChanged()` for any change plus the
/// connection's states; here the change says what it is: an instance that appeared, changed or
/// went away (any of the three is Curator's `cacheChanged`), and the cache's connection
/// changes (Curator's `stateChanged`, as the cache sees them). The instances present when the
/// cache starts are not reported (as Curator: `start` returns with them loaded).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServiceCacheEvent<T> {
    /// An instance appeared.
    Added(ServiceInstance<T>),
    /// An instance's data changed; this is the new instance.
    Updated(ServiceInstance<T>),
    /// The instance with this id (its node's name) went away, or its node no longer holds an
    /// instance.
    Removed {
        /// The instance's id (its node's name).
        id: String,
    },
    /// The connection is suspended: changes may be missed until it is back.
    ConnectionSuspended,
    /// Connected again; changes made meanwhile follow as `Added`, `Updated`, `Removed`.
    ConnectionReconnected,
    /// The session was lost; the cache catches up on the next one.
    ConnectionLost,
}

/// The instances of one service, kept in memory and up to date, as Curator's `ServiceCache`;
/// made by [`ServiceDiscovery::service_cache_builder`](crate::ServiceDiscovery::service_cache_builder).
///
/// It is a [`PathChildrenCache`] of `base/<name>`: its first load reads every instance with
/// multi-reads, and each later change costs one read. [`instances`](Self::instances) reads
/// only memory, so a service provider may call it for every request (it implements
/// [`InstanceProvider`]). A node that is not an instance (empty, not JSON, fields of the wrong
/// type) is left out with a warning and counted in [`skipped_nodes`](Self::skipped_nodes);
/// Curator's cache threw from its event thread (CURATOR-452/453).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # use curator_discovery::{ServiceDiscovery, ServiceInstance};
/// # let me: ServiceInstance = ServiceInstance::builder("search").port(8080).build();
/// # let discovery = ServiceDiscovery::builder(&fw, "/services").this_instance(me).build()?;
/// # discovery.start()?;
/// # discovery.ready().await?;
/// use curator_discovery::ServiceCacheEvent;
///
/// let cache = discovery.service_cache_builder("search").build()?;
/// cache.add_listener(|event: &ServiceCacheEvent<serde_json::Value>| match event {
///     ServiceCacheEvent::Added(instance) => tracing::info!(id = %instance.id, "up"),
///     ServiceCacheEvent::Removed { id } => tracing::info!(%id, "down"),
///     _ => {}
/// });
/// cache.start()?;
/// cache.ready().await?; // the instances present are loaded
/// for instance in cache.instances() {
///     tracing::info!(id = %instance.id, address = ?instance.address, "instance");
/// }
/// assert_eq!(cache.instances().len(), 1); // the instance registered above
/// cache.close().await;
/// # Ok(()) }
/// ```
pub struct ServiceCache<T = serde_json::Value> {
    fw: CuratorFramework,
    /// Shared with the relay only as a `Weak`: dropping the service cache drops it.
    cache: Arc<PathChildrenCache>,
    path: String,
    /// The service's name (the label of its metrics).
    service: Arc<str>,
    shared: Arc<CacheShared<T>>,
    events: Arc<Listeners<ServiceCacheEvent<T>>>,
    /// Turned true by the relay's handler once the first load's events are handled.
    initialized_tx: Arc<tokio::sync::watch::Sender<bool>>,
    /// The cache's own life (its relay runs while started); the `PathChildrenCache` under it
    /// has its own, started and closed with this one.
    life: Lifecycle,
}

impl<T> std::fmt::Debug for ServiceCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCache").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Builder of a [`ServiceCache`]; see
/// [`ServiceDiscovery::service_cache_builder`](crate::ServiceDiscovery::service_cache_builder).
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceCacheBuilder<T> {
    fw: CuratorFramework,
    /// The discovery's paths: the service's instances are the children of its
    /// `path_for_instances(name)`.
    paths: Paths,
    serializer: Arc<dyn InstanceSerializer<T>>,
    name: String,
    filters: Vec<Box<dyn InstanceFilter<T>>>,
}

impl<T> std::fmt::Debug for ServiceCacheBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCacheBuilder").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A node's version (`mzxid`) and the instance it holds, if it is one.
type Parsed<T> = (i64, Option<ServiceInstance<T>>);

/// What the cache's event handler and its handle share: the instances read so far, by node
/// path, with the `mzxid` of the version read, so each version of a node is read once.
struct CacheShared<T> {
    serializer: Arc<dyn InstanceSerializer<T>>,
    /// The builder's filters: an instance one of them refuses is not in the cache.
    filters: Vec<Box<dyn InstanceFilter<T>>>,
    parsed: Mutex<HashMap<String, Parsed<T>>>,
    skipped: AtomicU64,
}

impl<T: Clone> CacheShared<T> {
    /// The instance in `child` if every filter accepts it (see [`instance`](Self::instance)).
    fn accepted(&self, child: &ChildData) -> Option<ServiceInstance<T>> {
        self.instance(child).filter(|instance| self.filters.iter().all(|f| f.accept(instance)))
    }

    /// The instance in `child`, from the parsed versions or read now (a node that is not an
    /// instance is logged and counted once per version).
    fn instance(&self, child: &ChildData) -> Option<ServiceInstance<T>> {
        let mzxid = child.stat().mzxid;
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, instance)) = parsed.get(child.path()) {
            if *seen == mzxid {
                return instance.clone();
            }
        }
        let instance = match self.serializer.deserialize(child.data().unwrap_or_default()) {
            Ok(instance) => Some(instance),
            Err(e) => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %child.path(), error = %e, "skipping a node");
                None
            }
        };
        let newer = parsed.get(child.path()).is_none_or(|(seen, _)| *seen < mzxid);
        if newer {
            parsed.insert(child.path().to_string(), (mzxid, instance.clone()));
        }
        instance
    }

    /// Forgets a node deleted at or after the version last read.
    fn forget(&self, child: &ChildData) {
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if parsed.get(child.path()).is_some_and(|(seen, _)| *seen <= child.stat().mzxid) {
            parsed.remove(child.path());
        }
    }
}

impl<T: Clone + Send + Sync + 'static> ServiceCacheBuilder<T> {
    /// A builder for the cache of service `name` under a discovery's `base_path`, reading
    /// instances with the discovery's `serializer`.
    pub(crate) fn new(
        fw: &CuratorFramework,
        paths: &Paths,
        serializer: Arc<dyn InstanceSerializer<T>>,
        name: &str,
    ) -> Self {
        ServiceCacheBuilder {
            fw: fw.clone(),
            paths: paths.clone(),
            serializer,
            name: name.to_string(),
            filters: Vec::new(),
        }
    }

    /// Keeps only the instances `filter` accepts: the others are not in
    /// [`instances`](ServiceCache::instances) and make no events (an instance whose update the
    /// filter refuses is `Removed`, one whose update it accepts again `Added`). Filters add up:
    /// an instance must pass each. A [`ServiceProvider`](crate::ServiceProvider) over the cache
    /// applies its own filters after these (`docs/architecture.md`, section 14.3). Any
    /// `Fn(&ServiceInstance<T>) -> bool + Send + Sync` is a filter:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_discovery::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::builder(&fw, "/services").build()?;
    /// for port in [8080, 9090] {
    ///     discovery.register(ServiceInstance::builder("search").port(port).build()).await?;
    /// }
    /// let cache = discovery
    ///     .service_cache_builder("search")
    ///     .filter(|i: &ServiceInstance| i.port == Some(8080))
    ///     .build()?;
    /// cache.start()?;
    /// cache.ready().await?;
    /// assert_eq!(cache.instances().len(), 1);
    /// cache.close().await;
    /// discovery.close().await;
    /// # Ok(()) }
    /// ```
    pub fn filter(mut self, filter: impl InstanceFilter<T> + 'static) -> Self {
        self.filters.push(Box::new(filter));
        self
    }

    /// Makes the cache; nothing is read before [`start`](ServiceCache::start).
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidInstance`] for a name that is not one node name;
    /// [`DiscoveryError::InvalidConstructedPath`] when the discovery's path constructor gives
    /// an invalid path for it.
    pub fn build(self) -> Result<ServiceCache<T>, DiscoveryError> {
        let path = self.paths.service(&self.name)?;
        let cache = Arc::new(PathChildrenCache::builder(&self.fw, &path).create_parent_containers(true).build()?);
        let shared = Arc::new(CacheShared {
            serializer: self.serializer,
            filters: self.filters,
            parsed: Mutex::new(HashMap::new()),
            skipped: AtomicU64::new(0),
        });
        Ok(ServiceCache {
            fw: self.fw,
            cache,
            path,
            service: self.name.as_str().into(),
            shared,
            events: Arc::new(Listeners::new()),
            initialized_tx: Arc::new(tokio::sync::watch::channel(false).0),
            life: Lifecycle::new("ServiceCache"),
        })
    }
}

/// Turns the cache's child events into [`ServiceCacheEvent`]s, in order.
struct Handler<T> {
    shared: Arc<CacheShared<T>>,
    events: Arc<Listeners<ServiceCacheEvent<T>>>,
    /// Node name -> whether its last version seen (in event order) was an instance.
    good: HashMap<String, bool>,
    initialized_tx: Arc<tokio::sync::watch::Sender<bool>>,
    /// Told when the first load's events are handled.
    readiness: Readiness,
    /// The service's name: the label of the cache-size gauge.
    service: Arc<str>,
    /// The instances among `good`: what this cache adds to the gauge, taken back on drop.
    held: i64,
    /// The children cache under this one: the data of each node read is dropped from it once
    /// parsed (Curator's `ServiceCacheImpl` does the same), so that an instance is held once.
    cache: Weak<PathChildrenCache>,
    /// Reports a refused first load when the relay ends.
    _end: RelayEnd,
}

/// Dropped with the relay's handler, when the `PathChildrenCache`'s events end: if the first
/// load was refused for good (the cache closed itself), the service cache reports the refusal
/// and ends its listeners.
struct RelayEnd {
    readiness: Readiness,
    cache: Weak<PathChildrenCache>,
    /// Ends the service cache's listeners.
    close_events: Box<dyn Fn() + Send>,
}

impl Drop for RelayEnd {
    fn drop(&mut self) {
        if self.readiness.is_reported() {
            return;
        }
        let Some(cache) = self.cache.upgrade() else { return };
        // The cache's outcome is reported before its events end: at hand, no wait.
        if let Some(Err(err)) = cache.wait_initialized().now_or_never() {
            if err.is_permanent() {
                self.readiness.refused(err);
                (self.close_events)();
            }
        }
    }
}

/// A cache of `service` learnt (`delta` 1) or forgot (-1) an instance; `held` is its count
/// ([`DISCOVERY_CACHE_INSTANCES`](curator_core::metrics::DISCOVERY_CACHE_INSTANCES)).
fn size_changed(held: &mut i64, service: &Arc<str>, delta: i64) {
    *held += delta;
    curator_core::metrics::discovery_cache_changed(service, delta);
}

/// The relay ends with the cache: its instances leave the gauge.
impl<T> Drop for Handler<T> {
    fn drop(&mut self) {
        curator_core::metrics::discovery_cache_changed(&self.service, -self.held);
    }
}

impl<T: Clone + Send + Sync + 'static> Handler<T> {
    fn handle(&mut self, event: &PathChildrenCacheEvent) {
        // Before the first load is done, only learn the instances present: not reported.
        let report = *self.initialized_tx.borrow();
        let publish = |event: ServiceCacheEvent<T>| {
            if report {
                self.events.publish(event);
            }
        };
        match event {
            PathChildrenCacheEvent::ChildAdded(child) | PathChildrenCacheEvent::ChildUpdated(child) => {
                let id = child.name().to_string();
                let was_good = self.good.get(&id).copied().unwrap_or(false);
                // Left out by a filter: as if not an instance (but not counted as skipped).
                let parsed = self.shared.accepted(child);
                // Parsed (or refused) at this version: the bytes are not needed any more.
                if let Some(cache) = self.cache.upgrade() {
                    cache.clear_data_bytes(child.path(), Some(child.stat().version));
                }
                match parsed {
                    Some(instance) => {
                        self.good.insert(id, true);
                        if !was_good {
                            size_changed(&mut self.held, &self.service, 1);
                        }
                        publish(if was_good {
                            ServiceCacheEvent::Updated(instance)
                        } else {
                            ServiceCacheEvent::Added(instance)
                        });
                    }
                    None => {
                        self.good.insert(id.clone(), false);
                        if was_good {
                            size_changed(&mut self.held, &self.service, -1);
                            publish(ServiceCacheEvent::Removed { id });
                        }
                    }
                }
            }
            PathChildrenCacheEvent::ChildRemoved(child) => {
                self.shared.forget(child);
                if self.good.remove(child.name()) == Some(true) {
                    size_changed(&mut self.held, &self.service, -1);
                    publish(ServiceCacheEvent::Removed { id: child.name().to_string() });
                }
            }
            PathChildrenCacheEvent::Initialized(_) => {
                self.initialized_tx.send_replace(true);
                self.readiness.ready();
            }
            PathChildrenCacheEvent::ConnectionSuspended => publish(ServiceCacheEvent::ConnectionSuspended),
            PathChildrenCacheEvent::ConnectionReconnected => publish(ServiceCacheEvent::ConnectionReconnected),
            PathChildrenCacheEvent::ConnectionLost => publish(ServiceCacheEvent::ConnectionLost),
            // An event added to curator-cache later: not one a service cache reports.
            other => tracing::debug!(event = ?other, "service cache ignores a cache event"),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> ServiceCache<T> {
    /// Starts the cache (Curator's `start`), making `base/<name>` as a container if missing.
    /// Sync: the instances are loaded by the cache's task; [`ready`](Self::ready) waits for
    /// that (Curator's `start` returns once they are). Listeners hear the changes after that.
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with [`AlreadyStarted`](CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed), [`NoRuntime`](CuratorError::NoRuntime)
    /// (outside a tokio runtime) or [`Closed`](CuratorError::Closed) (a closed framework), each
    /// naming `ServiceCache` ([`Lifecycle`](curator_core::Lifecycle)): nothing started
    /// then.
    pub fn start(&self) -> Result<(), DiscoveryError> {
        self.life.start(&self.fw, |starting| {
            self.events.start(starting.handle().clone());
            let readiness = starting.readiness();
            let events = self.events.clone();
            let mut handler = Handler {
                shared: self.shared.clone(),
                events: self.events.clone(),
                good: HashMap::new(),
                initialized_tx: self.initialized_tx.clone(),
                readiness: readiness.clone(),
                service: self.service.clone(),
                held: 0,
                cache: Arc::downgrade(&self.cache),
                _end: RelayEnd {
                    readiness,
                    cache: Arc::downgrade(&self.cache),
                    close_events: Box::new(move || events.close()),
                },
            };
            // The cache's events, in order, handled by one relay rather than by a callback: a
            // callback runs on the blocking pool, one more thread hop per event before our own
            // listeners get it. The stream ends when the cache closes.
            starting.relay(self.cache.events(), move |event| handler.handle(&event));
            self.cache.start(StartMode::PostInitializedEvent)
        })?;
        Ok(())
    }

    /// Waits until the instances present at start are loaded: the outcome of
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with a first load refused for good (`NoAuth` when
    /// `base/<name>` refuses reading it, see [`CuratorError::is_permanent`]): the cache is
    /// closed then ([`state`](Self::state) `Closed`, streams ended).
    /// [`NotStarted`](CuratorError::NotStarted) before `start`,
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed) if closed first,
    /// [`Closed`](CuratorError::Closed) if the framework closed first.
    pub async fn ready(&self) -> Result<(), DiscoveryError> {
        let outcome = tokio::select! {
            biased;
            outcome = self.life.ready() => outcome,
            loaded = self.cache.wait_initialized() => match loaded {
                // Then the relay reports it, once the first load's events are handled.
                Ok(()) => self.life.ready().await,
                Err(err) => Err(err),
            },
        };
        Ok(outcome?)
    }

    /// Where the cache is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused first load.
    pub fn state(&self) -> LifeState {
        self.life.state()
    }

    /// The service's instances now, sorted by id; nodes that are not instances, and instances
    /// a [`filter`](ServiceCacheBuilder::filter) refuses, are left out. Reads memory only.
    pub fn instances(&self) -> Vec<ServiceInstance<T>> {
        self.cache.current_data().iter().filter_map(|child| self.shared.accepted(child)).collect()
    }

    /// How many node versions this cache read that were not instances (each logged once).
    pub fn skipped_nodes(&self) -> u64 {
        self.shared.skipped.load(Ordering::Relaxed)
    }

    /// The framework the cache reads with.
    pub(crate) fn framework(&self) -> &CuratorFramework {
        &self.fw
    }

    /// The cached node path, `base/<name>`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Calls `listener` for each change from now on, in order, on the blocking pool.
    pub fn add_listener(&self, listener: impl Fn(&ServiceCacheEvent<T>) + Send + Sync + 'static) -> ListenerId {
        self.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.events.remove(id)
    }

    /// The changes from now on, as an ordered stream.
    pub fn events(&self) -> EventStream<ServiceCacheEvent<T>> {
        self.events.stream()
    }

    /// Stops the cache and its watch (Curator's `close`); listener streams end after the
    /// events already queued. Idempotent: a second call, or one on a cache never started (which
    /// can then no longer start), does nothing more. Dropping the cache does the same.
    pub async fn close(&self) {
        self.life.close();
        self.cache.close().await;
        self.events.close();
    }
}

impl<T: Clone + Send + Sync + 'static> InstanceProvider<T> for ServiceCache<T> {
    fn instances(&self) -> Vec<ServiceInstance<T>> {
        ServiceCache::instances(self)
    }
}
