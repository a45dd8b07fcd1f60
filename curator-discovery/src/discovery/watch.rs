//! Watched registrations (Curator's `watchInstances`): a [`NodeCache`] on each registered
//! instance's node, and the registration taking in what another client writes there
//! (docs/architecture.md, section 14.2).

use std::sync::{Arc, Weak};

use curator_cache::{NodeCache, NodeCacheEvent};
use curator_core::CuratorError;
use curator_recipes::PersistentNode;

use super::registration::check_same_registration;
use super::{Inner, Result};
use crate::{DiscoveryError, ServiceInstance};

/// What happened to a watched registration (see
/// [`ServiceDiscoveryBuilder::watch_instances`](crate::ServiceDiscoveryBuilder::watch_instances)),
/// from [`ServiceDiscovery::registration_events`](crate::ServiceDiscovery::registration_events).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # let other = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # other.start()?;
/// use curator_discovery::{RegistrationEvent, ServiceDiscovery, ServiceInstance};
///
/// let discovery = ServiceDiscovery::builder(&fw, "/services").watch_instances(true).build()?;
/// let mut events = discovery.registration_events();
/// let me: ServiceInstance = ServiceInstance::builder("search").port(8080).build();
/// discovery.register(me.clone()).await?;
///
/// // Another client (an operator's tool, say) moves the instance to another port.
/// let mut moved = me.clone();
/// moved.port = Some(8081);
/// other.set_data().for_path(&format!("/services/search/{}", me.id), moved.to_json()?).await?;
/// match events.next().await {
///     Some(RegistrationEvent::Edited(instance)) => assert_eq!(instance.port, Some(8081)),
///     other => panic!("{other:?}"),
/// }
/// assert_eq!(discovery.registered(), vec![moved]); // and re-registered so after a new session
/// discovery.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RegistrationEvent<T> {
    /// Another client wrote this instance to the registration's node: the registration holds
    /// it now ([`registered`](crate::ServiceDiscovery::registered) returns it, and the node is
    /// made again with it after a new session).
    Edited(ServiceInstance<T>),
    /// Another client wrote something to the registration's node that the registration cannot
    /// take: bytes that are not an instance ([`DiscoveryError::BadNode`]), or an instance with
    /// another id, name or service type ([`DiscoveryError::InvalidInstance`]). The registration
    /// is unchanged, and so is the node until this discovery writes it again.
    Rejected {
        /// The registration's instance id.
        id: String,
        /// Why the node's content was not taken.
        error: DiscoveryError,
    },
}

/// Starts watching the node of registration `id` at `path` (not for sequential nodes, whose
/// name is known only once made: Curator's watch of the unsequenced path never fires either).
pub(super) fn watch<T: Clone + Send + Sync + 'static>(
    inner: &Arc<Inner<T>>,
    id: &str,
    path: &str,
    node: &Arc<PersistentNode>,
) -> Result<NodeCache> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: "NodeCache" })?;
    let cache = NodeCache::new(&inner.fw, path)?;
    let events = cache.events();
    cache.start(false)?;
    tracing::debug!(%path, "watching a registered service instance");
    let weak: Weak<Inner<T>> = Arc::downgrade(inner);
    let node = Arc::downgrade(node);
    let id = id.to_string();
    // Ends with the cache's events, when the registration's watch is closed.
    events.relay(&runtime, move |event| {
        let NodeCacheEvent::NodeChanged(Some(data)) = event else { return };
        let (Some(inner), Some(node)) = (weak.upgrade(), node.upgrade()) else { return };
        inner.take_edit(&id, &node, &data.path, data.data().unwrap_or_default(), data.stat.mzxid);
    });
    Ok(cache)
}

impl<T: Clone + Send + Sync + 'static> Inner<T> {
    /// The node of registration `id` (kept by `node`) holds `bytes`, written at zxid `mzxid`:
    /// take them into the registration if another client wrote an instance of it there after
    /// our last write (a read of the watch can come after our next write, with data of ours).
    fn take_edit(&self, id: &str, node: &Arc<PersistentNode>, path: &str, bytes: &[u8], mzxid: i64) {
        if bytes == node.data() {
            return; // our own write
        }
        let read = self.serializer.deserialize(bytes);
        let mut state = self.lock();
        let Some(registration) = state.registrations.get_mut(id).filter(|r| Arc::ptr_eq(&r.node, node)) else {
            return; // unregistered meanwhile
        };
        let instance = match read {
            Ok(instance) if instance.id != id => Err(DiscoveryError::InvalidInstance {
                id: instance.id,
                reason: format!("written to the node of registration {id:?}"),
            }),
            Ok(instance) => check_same_registration(&registration.instance, &instance).map(|()| instance),
            Err(e) => Err(DiscoveryError::BadNode { path: path.to_string(), source: Box::new(e) }),
        };
        let event = match instance {
            Ok(instance) => match node.adopt_data(bytes.to_vec(), mzxid) {
                Ok(true) => {
                    tracing::debug!(%path, "a registered service instance was edited by another client");
                    registration.instance = instance.clone();
                    RegistrationEvent::Edited(instance)
                }
                // A write of ours is on its way (it replaces the edit), or the data is ours.
                Ok(false) => return,
                Err(e) => RegistrationEvent::Rejected { id: id.to_string(), error: e.into() },
            },
            Err(error) => {
                tracing::warn!(%path, %error, "a registered service instance's node holds what the registration cannot take");
                RegistrationEvent::Rejected { id: id.to_string(), error }
            }
        };
        drop(state);
        self.registration_events.publish(event);
    }
}
