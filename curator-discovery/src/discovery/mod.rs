//! [`ServiceDiscovery`]: registering instances of services and querying them, as Curator's
//! `ServiceDiscovery`, with every registration kept by a [`PersistentNode`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use curator_cache::NodeCache;
use curator_core::{path, CuratorError, CuratorFramework};
use curator_core::{EventStream, LifeState, Lifecycle, Listeners};
use curator_recipes::PersistentNode;

use crate::cache::ServiceCacheBuilder;
use crate::paths::Paths;
use crate::{
    DefaultPathConstructor, DiscoveryError, DiscoveryPathConstructor, InstanceSerializer, JsonInstanceSerializer,
    ServiceInstance,
};
use registration::{check_same_registration, close_node, instance_path, register_this, Prepared};
pub use watch::RegistrationEvent;

mod registration;
mod watch;

type Result<T> = std::result::Result<T, DiscoveryError>;

/// Registers instances of services in ZooKeeper and finds them, as Curator's
/// `ServiceDiscovery`.
///
/// ```text
///  register(instance) ─► a PersistentNode at base/<name>/<id>: create (mode from ServiceType,
///                        data = the instance's JSON, container parents), then exists+watch;
///                        made again on a new session, adopted when found in place
///                     ─► returns at the first create (or after the connection timeout)
///  update(instance)   ─► setData on the node; every later re-create uses the new data
///  watch_instances    ─► a NodeCache per registration: an instance another client writes to
///                        the node is taken in (RegistrationEvent), no write back
///  unregister / close ─► guaranteed delete of base/<name>/<id>
///  query_for_names              ─► getChildren(base)
///  query_for_instances(name)    ─► getChildren(base/<name>) + getData of each, pipelined
///  query_for_instance(name, id) ─► getData(base/<name>/<id>)
///  service_cache_builder(name)  ─► a PathChildrenCache of base/<name>
/// ```
///
/// Java's `ServiceDiscovery` on the same base path sees the same instances, and this one sees
/// Java's. See `docs/architecture.md`, section 14 (and section 13 for the `PersistentNode`s
/// that keep the registrations).
///
/// # Node layout
/// Instance `id` of service `name` is the node `base/<name>/<id>`, whose data is the instance's
/// JSON (see [`JsonInstanceSerializer`]); `base` and `base/<name>` are made as containers when
/// missing. The node's mode comes from the instance's [`ServiceType`](crate::ServiceType): `Dynamic` is
/// ephemeral, `DynamicSequential` ephemeral sequential (`base/<name>/<id><seq>`), `Static` and
/// `Permanent` persistent.
///
/// # How registrations are kept
/// Each registration is a [`PersistentNode`]: it is created in the background, made again
/// after a new session or an outage (with the instance's *current* data: [`update`](Self::update)
/// sets the node's data, which every re-create uses), adopted when already there, and left
/// alone while the connection flaps on the same session (one check per reconnection, no
/// delete and create). [`unregister`](Self::unregister) and [`close`](Self::close) delete the
/// nodes with a guaranteed delete, which goes on in the background when the connection is down.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_discovery::{ServiceDiscovery, ServiceInstance};
/// use serde_json::json;
///
/// let me = ServiceInstance::builder("search").port(8080).payload(json!({"zone": "eu-1"})).build();
/// let discovery = ServiceDiscovery::builder(&fw, "/services").this_instance(me.clone()).build()?;
/// discovery.start()?;
/// discovery.ready().await?; // `me` is registered
///
/// let mut moved = me.clone();
/// moved.port = Some(8081);
/// discovery.update(moved)?; // kept across new sessions from now on
///
/// for instance in discovery.query_for_instances("search").await? {
///     tracing::info!(id = %instance.id, port = ?instance.port, "found");
/// }
/// discovery.close().await; // deletes `me`
/// # Ok(()) }
/// ```
///
/// # After a lost reply
/// A registration's create whose reply was lost is never sent again on a guess: a
/// `DynamicSequential` one (Curator's unprotected `<id><sequence>` name) is found among the
/// service's children by its JSON, which holds the instance's id and registration time
/// ([`PersistentNodeBuilder::unique_data`](curator_recipes::PersistentNodeBuilder::unique_data));
/// the others, at a fixed path, by looking at the node there. So a lost reply never leaves a
/// second registration of an instance (docs/architecture.md section 14).
///
/// # Differences from Curator
/// - [`register`](Self::register) of an id already registered updates it (Curator creates the
///   node again); one that changes its name or service type fails.
/// - [`query_for_instances`](Self::query_for_instances) skips a node that is not an instance
///   (empty, not JSON, fields of the wrong type) with a warning, and counts it in
///   [`skipped_nodes`](Self::skipped_nodes); Curator fails the whole query (CURATOR-452/453).
/// - [`query_for_names`](Self::query_for_names) of a missing base path is empty (Curator throws
///   `NoNodeException`).
/// - With [`watch_instances`](ServiceDiscoveryBuilder::watch_instances), an edit another
///   client writes to a registration's node that is not an instance of that registration
///   (garbage, another id, name or service type) is refused with a
///   [`RegistrationEvent::Rejected`]; Curator's listener threw on garbage and took an instance
///   of another id into that id's registration.
/// - `close` deletes every instance registered here, `Permanent` ones included, as Curator 5
///   does; `Permanent` differs from `Static` only for Curator's discovery server.
pub struct ServiceDiscovery<T = serde_json::Value> {
    inner: Arc<Inner<T>>,
}

/// The discovery's state, shared by its handle's clones.
struct Inner<T> {
    fw: CuratorFramework,
    /// Every path of the discovery is built here.
    paths: Paths,
    /// Watch each registration's node and take in other clients' edits.
    watch_instances: bool,
    registration_events: Listeners<RegistrationEvent<T>>,
    serializer: Arc<dyn InstanceSerializer<T>>,
    state: Mutex<State<T>>,
    skipped: AtomicU64,
    /// Started by [`ServiceDiscovery::start`] (nothing to tear down but the registrations).
    life: Lifecycle,
}

struct State<T> {
    this_instance: Option<ServiceInstance<T>>,
    closed: bool,
    registrations: HashMap<String, Registration<T>>,
}

/// One registered instance and the node that keeps it.
struct Registration<T> {
    instance: ServiceInstance<T>,
    node: Arc<PersistentNode>,
    /// The watch on the node, with [`ServiceDiscoveryBuilder::watch_instances`].
    watch: Option<NodeCache>,
}

impl<T> std::fmt::Debug for ServiceDiscovery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceDiscovery").field("base_path", &self.inner.paths.base()).finish_non_exhaustive()
    }
}

/// Builder of a [`ServiceDiscovery`]; see [`ServiceDiscovery::builder`].
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceDiscoveryBuilder<T> {
    fw: CuratorFramework,
    base_path: String,
    path_constructor: Option<Arc<dyn DiscoveryPathConstructor>>,
    watch_instances: bool,
    serializer: Arc<dyn InstanceSerializer<T>>,
    this_instance: Option<ServiceInstance<T>>,
}

impl<T> std::fmt::Debug for ServiceDiscoveryBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceDiscoveryBuilder").field("base_path", &self.base_path).finish_non_exhaustive()
    }
}

impl<T: Clone + Send + Sync + 'static> ServiceDiscoveryBuilder<T> {
    /// The serializer of the instances (default: [`JsonInstanceSerializer::new`]); give a
    /// [`JsonInstanceSerializer`] with a [`payload_class`](JsonInstanceSerializer::payload_class)
    /// for payloads Java must read as a class of its own.
    pub fn serializer(mut self, serializer: impl InstanceSerializer<T> + 'static) -> Self {
        self.serializer = Arc::new(serializer);
        self
    }

    /// An instance registered by [`start`](ServiceDiscovery::start) (Curator's `thisInstance`).
    pub fn this_instance(mut self, instance: ServiceInstance<T>) -> Self {
        self.this_instance = Some(instance);
        self
    }

    /// Where the services and instances are (Curator's `pathConstructor`), in place of the
    /// base path given to [`ServiceDiscovery::builder`] (which makes a
    /// [`DefaultPathConstructor`]). Every path of the discovery, of its caches and providers is
    /// built by it and checked; `build()` asks it once for a sample service and instance and
    /// refuses it if those paths are bad.
    pub fn path_constructor(mut self, constructor: impl DiscoveryPathConstructor + 'static) -> Self {
        self.path_constructor = Some(Arc::new(constructor));
        self
    }

    /// Watch the node of each instance registered from now on (Curator's `watchInstances`,
    /// default off): when another client writes an instance of the same id, name and service
    /// type there, the registration takes it in, as if [`update`](ServiceDiscovery::update)d
    /// with it but with no write: [`registered`](ServiceDiscovery::registered) returns it and a
    /// re-registration after a new session writes it. What the registration cannot take
    /// (garbage, another id, name or type) leaves it unchanged. Each change is a
    /// [`RegistrationEvent`] ([`registration_events`](ServiceDiscovery::registration_events)).
    /// A deleted node is made again, as without a watch. One
    /// [`NodeCache`] per registration; `DynamicSequential` instances are not watched (their
    /// node's name is known only once made). See `docs/architecture.md`, section 14.2.
    pub fn watch_instances(mut self, watch: bool) -> Self {
        self.watch_instances = watch;
        self
    }

    /// Checks the paths and makes the discovery; nothing is sent before
    /// [`start`](ServiceDiscovery::start) or [`register`](ServiceDiscovery::register).
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with `InvalidPath` for an invalid base path;
    /// [`DiscoveryError::InvalidConstructedPath`] for a
    /// [`path_constructor`](Self::path_constructor) whose base path, the paths it gives for a
    /// sample service and instance, or the path of `this_instance`, are not valid paths (or an
    /// instance's path is not its id under its service's path); [`DiscoveryError::InvalidInstance`] for a
    /// `this_instance` whose name or id is not one node name.
    pub fn build(self) -> Result<ServiceDiscovery<T>> {
        let constructor = match self.path_constructor {
            Some(constructor) => constructor,
            None => Arc::new(DefaultPathConstructor::new(&self.base_path)?),
        };
        let paths = Paths::new(constructor)?;
        if let Some(instance) = &self.this_instance {
            instance_path(&paths, instance)?;
        }
        Ok(ServiceDiscovery {
            inner: Arc::new(Inner {
                fw: self.fw,
                paths,
                watch_instances: self.watch_instances,
                registration_events: Listeners::new(),
                serializer: self.serializer,
                state: Mutex::new(State {
                    this_instance: self.this_instance,
                    closed: false,
                    registrations: HashMap::new(),
                }),
                skipped: AtomicU64::new(0),
                life: Lifecycle::new("ServiceDiscovery"),
            }),
        })
    }
}

impl<T: Clone + Send + Sync + 'static> ServiceDiscovery<T> {
    /// A builder for a discovery under `base_path` (a [`DefaultPathConstructor`]; see
    /// [`path_constructor`](ServiceDiscoveryBuilder::path_constructor) for another layout),
    /// with Curator's JSON.
    pub fn builder(fw: &CuratorFramework, base_path: &str) -> ServiceDiscoveryBuilder<T>
    where
        JsonInstanceSerializer: InstanceSerializer<T>,
    {
        ServiceDiscoveryBuilder {
            fw: fw.clone(),
            base_path: base_path.to_string(),
            path_constructor: None,
            watch_instances: false,
            serializer: Arc::new(JsonInstanceSerializer::new()),
            this_instance: None,
        }
    }

    /// The base path (the [`DiscoveryPathConstructor`]'s): the services are its children.
    pub fn base_path(&self) -> &str {
        self.inner.paths.base()
    }

    /// The changes of watched registrations from now on, in order (see
    /// [`watch_instances`](ServiceDiscoveryBuilder::watch_instances)); the stream ends when the
    /// discovery closes.
    pub fn registration_events(&self) -> EventStream<RegistrationEvent<T>> {
        self.inner.registration_events.stream()
    }

    /// Starts the discovery (Curator's `start`): registers the builder's
    /// [`this_instance`](ServiceDiscoveryBuilder::this_instance), if any, as
    /// [`register`](Self::register) does, in the discovery's task; [`ready`](Self::ready) says
    /// how that went. Sync: the instance is checked and serialized here, its node made by the
    /// task. Once only ([`Lifecycle`](curator_core::Lifecycle));
    /// [`register`](Self::register) itself needs no start.
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with [`AlreadyStarted`](CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed), [`NoRuntime`](CuratorError::NoRuntime)
    /// (outside a tokio runtime) or [`Closed`](CuratorError::Closed) (a closed framework), each
    /// naming `ServiceDiscovery`; the serializer's error or `DataTooLarge` for the instance:
    /// nothing registered then.
    pub fn start(&self) -> Result<()> {
        // Nothing is checked or made where the start would be refused.
        self.inner.life.check_start(&self.inner.fw)?;
        let this = self.inner.lock().this_instance.clone();
        let checked = this.map(|instance| self.check(instance)).transpose()?;
        let mut refused = None;
        let started = self.inner.life.start(&self.inner.fw, |started| {
            let Some(checked) = checked else { return Ok(()) };
            let pending = match self.install(checked) {
                Ok(Prepared::Created(pending)) => pending,
                Ok(Prepared::Updated) => return Ok(()),
                Err(DiscoveryError::Curator(err)) => return Err(err),
                Err(other) => {
                    // Not a CuratorError (an id registered here under another name or type):
                    // handed out below, the start refused meanwhile.
                    refused = Some(other);
                    return Err(CuratorError::IllegalState("this_instance refused".into()));
                }
            };
            let readiness = started.readiness();
            let inner = self.inner.clone();
            started.spawn(async move { register_this(inner, pending, readiness).await });
            Ok(())
        });
        match (started, refused) {
            (_, Some(err)) => Err(err),
            (Err(err), None) => Err(err.into()),
            (Ok(()), None) => {
                self.inner.lock().this_instance = None;
                Ok(())
            }
        }
    }

    /// Waits for the outcome of [`start`](Self::start): `Ok` once `this_instance` is
    /// registered (its node first made or adopted), at once without one.
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with the create's refusal (`NoAuth` when the ACL of `base`
    /// or `base/<name>` refuses the client creating under it, see
    /// [`CuratorError::is_permanent`]), or `Timeout` when the node was not made within the
    /// framework's connection timeout: the discovery is closed then (as by
    /// [`close`](Self::close): its [`state`](Self::state) is `Closed`, nothing stays
    /// registered). [`NotStarted`](CuratorError::NotStarted) before `start`,
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed) if closed first.
    pub async fn ready(&self) -> Result<()> {
        Ok(self.inner.life.ready().await?)
    }

    /// Where the discovery is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused `this_instance`.
    pub fn state(&self) -> LifeState {
        self.inner.life.state()
    }

    /// Registers `instance` at `base/<name>/<id>` and keeps it registered until
    /// [`unregister`](Self::unregister) or [`close`](Self::close), through new sessions and
    /// outages. Returns once the node is first created (or adopted), or after the framework's
    /// connection timeout. An id already registered here is updated instead
    /// ([`update`](Self::update)).
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidInstance`] for a name or id that is not one node name,
    /// a serializer's error, `DataTooLarge` for JSON over the framework's limit,
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed) after [`close`](Self::close): nothing is
    /// registered then. A create refused for good ([`CuratorError::is_permanent`]: `NoAuth`
    /// when the ACL of `base` or `base/<name>` refuses the client creating under it), at once:
    /// nothing is kept registered then either. `Timeout` when the node was not
    /// created within the connection timeout: the registration is kept and made as soon as it
    /// can be (Curator also keeps it, to register again after reconnecting).
    /// [`DiscoveryError::NotRegistered`] when the instance was unregistered (or the discovery
    /// closed) before its node was first made.
    pub async fn register(&self, instance: ServiceInstance<T>) -> Result<()> {
        let checked = self.check(instance)?;
        match self.install(checked)? {
            Prepared::Updated => Ok(()),
            Prepared::Created(pending) => self.inner.wait_created(pending).await,
        }
    }

    /// Replaces the data of the registered instance with `instance`'s id: written now in the
    /// background if the node is there (also when the connection is down: then once it is
    /// back), and used by every later re-registration (CURATOR-181: Curator re-registered the
    /// first data after a new session).
    ///
    /// # Errors
    /// [`DiscoveryError::NotRegistered`] for an id not registered here;
    /// [`DiscoveryError::InvalidInstance`] for a change of name or service type; the
    /// serializer's error, or `DataTooLarge`: then nothing changes.
    pub fn update(&self, instance: ServiceInstance<T>) -> Result<()> {
        let bytes = self.inner.serializer.serialize(&instance)?;
        let mut state = self.inner.lock();
        let Some(existing) = state.registrations.get_mut(&instance.id) else {
            return Err(DiscoveryError::NotRegistered { id: instance.id });
        };
        check_same_registration(&existing.instance, &instance)?;
        tracing::debug!(path = ?existing.node.actual_path(), id = %instance.id, "updating a service instance");
        existing.node.set_data(bytes)?;
        existing.instance = instance;
        curator_core::metrics::discovery_registration("update");
        Ok(())
    }

    /// Unregisters the instance with `instance`'s id: stops keeping its node and deletes it
    /// with a guaranteed delete. Connected, it returns once the node is deleted; not connected,
    /// at once, and the delete is made once the connection is back (CURATOR-617: Curator's
    /// unregister failed after a connection loss). An id not registered here is nothing to do
    /// (idempotent).
    pub async fn unregister(&self, instance: &ServiceInstance<T>) {
        self.unregister_id(&instance.id).await
    }

    /// As [`unregister`](Self::unregister), by id.
    pub async fn unregister_id(&self, id: &str) {
        let registration = self.inner.lock().registrations.remove(id);
        if let Some(registration) = registration {
            tracing::debug!(path = ?registration.node.actual_path(), %id, "unregistering a service instance");
            curator_core::metrics::discovery_registration("unregister");
            close_node(registration).await;
        }
    }

    /// The instances registered here, with their current data.
    pub fn registered(&self) -> Vec<ServiceInstance<T>> {
        self.inner.lock().registrations.values().map(|r| r.instance.clone()).collect()
    }

    /// The names of the services under the base path, sorted; empty when the base path does not
    /// exist.
    ///
    /// # Errors
    /// The read's [`DiscoveryError::Curator`] error.
    pub async fn query_for_names(&self) -> Result<Vec<String>> {
        let base = self.inner.paths.base();
        tracing::debug!(path = %base, "querying service names");
        match self.inner.fw.get_children().for_path(base).await {
            Ok(mut names) => {
                names.sort();
                Ok(names)
            }
            Err(CuratorError::NoNode { .. }) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// The instances of service `name`, sorted by id: one listing and then all the reads
    /// pipelined. A node that is not an instance (empty, not JSON, fields of the wrong type) is
    /// skipped with a warning and counted in [`skipped_nodes`](Self::skipped_nodes); one
    /// deleted meanwhile is left out.
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidInstance`] for a name that is not one node name, or a read's
    /// [`DiscoveryError::Curator`] error.
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance<T>>> {
        let parent = self.inner.service_path(name)?;
        tracing::debug!(path = %parent, "querying service instances");
        let ids = match self.inner.fw.get_children().for_path(&parent).await {
            Ok(ids) => ids,
            Err(CuratorError::NoNode { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let reads = ids.iter().map(|id| {
            let path = path::make_path(&parent, id);
            let read = self.inner.fw.get_data().for_path(&path);
            async move { (path, read.await) }
        });
        let mut instances = Vec::with_capacity(ids.len());
        for (path, read) in futures::future::join_all(reads).await {
            match read {
                Ok(bytes) => {
                    if let Some(instance) = self.inner.read_instance(&path, &bytes) {
                        instances.push(instance);
                    }
                }
                Err(CuratorError::NoNode { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(instances)
    }

    /// The instance `id` of service `name`, or `None` when there is no such node.
    ///
    /// # Errors
    /// [`DiscoveryError::BadNode`] (also counted in [`skipped_nodes`](Self::skipped_nodes))
    /// when the node is not an instance; [`DiscoveryError::InvalidInstance`] for a name or id
    /// that is not one node name; the read's [`DiscoveryError::Curator`] error.
    pub async fn query_for_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance<T>>> {
        let path = self.inner.paths.instance(name, id)?;
        tracing::debug!(%path, "querying a service instance");
        match self.inner.fw.get_data().for_path(&path).await {
            Ok(bytes) => match self.inner.serializer.deserialize(&bytes) {
                Ok(instance) => Ok(Some(instance)),
                Err(e) => {
                    self.inner.skipped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%path, error = %e, "querying a service instance failed");
                    Err(DiscoveryError::BadNode { path, source: Box::new(e) })
                }
            },
            Err(CuratorError::NoNode { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// How many nodes the queries of this discovery found that were not instances (each read
    /// of such a node counts once).
    pub fn skipped_nodes(&self) -> u64 {
        self.inner.skipped.load(Ordering::Relaxed)
    }

    /// A builder for a [`ServiceCache`](crate::ServiceCache) of service `name`.
    pub fn service_cache_builder(&self, name: &str) -> ServiceCacheBuilder<T> {
        ServiceCacheBuilder::new(&self.inner.fw, &self.inner.paths, self.inner.serializer.clone(), name)
    }

    /// A provider of service `name` (Curator's `serviceProviderBuilder().serviceName(name)`,
    /// then `build()`): a [`ServiceProvider`](crate::ServiceProvider) configured by `provider`
    /// (its strategy, filters and down-instance policy) over a
    /// [`ServiceCache`](crate::ServiceCache) of the service that it owns. Nothing is read yet:
    /// [`start`](crate::ServiceProvider::start) starts the cache,
    /// [`ready`](crate::ServiceProvider::ready) waits for its first load,
    /// [`close`](crate::ServiceProvider::close) (or dropping the provider) closes it.
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidInstance`] for a name that is not one node name.
    pub fn service_provider(
        &self,
        name: &str,
        provider: crate::ServiceProviderBuilder<T>,
    ) -> Result<crate::ServiceProvider<T>>
    where
        T: PartialEq,
    {
        let cache = Arc::new(self.service_cache_builder(name).build()?);
        Ok(provider.build_over_cache(cache))
    }

    /// Unregisters every instance registered here (`Permanent` ones too, as Curator), each as
    /// [`unregister`](Self::unregister) does, and refuses registrations from then on (Curator's
    /// `close`). Idempotent: a second call, or one on a discovery never started (which can then
    /// no longer start), finds nothing more to do. Caches made from this discovery are the
    /// caller's to close.
    pub async fn close(&self) {
        self.inner.close().await;
    }
}

impl<T> Inner<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The parent of the instances of service `name`, for a name that is one node name.
    fn service_path(&self, name: &str) -> Result<String> {
        self.paths.service(name)
    }

    /// The instance in `bytes`, or `None` (logged and counted) when they are not one.
    fn read_instance(&self, path: &str, bytes: &[u8]) -> Option<ServiceInstance<T>> {
        match self.serializer.deserialize(bytes) {
            Ok(instance) => Some(instance),
            Err(e) => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%path, error = %e, "skipping a node");
                None
            }
        }
    }
}
