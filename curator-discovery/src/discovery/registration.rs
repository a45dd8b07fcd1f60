//! Registering one instance: the checks, the node that keeps it, the wait for its first
//! create, and the discovery's task that registers `this_instance` after `start`.

use std::sync::Arc;

use curator_core::Readiness;
use curator_core::{CreateMode, CuratorError};
use curator_recipes::PersistentNode;

use super::{Inner, Registration, Result, ServiceDiscovery};
use crate::paths::Paths;
use crate::{DiscoveryError, ServiceInstance, ServiceType};

impl<T: Clone + Send + Sync + 'static> ServiceDiscovery<T> {
    /// Checks and serializes `instance`: the part of a registration that changes nothing.
    pub(super) fn check(&self, instance: ServiceInstance<T>) -> Result<Checked<T>> {
        let path = instance_path(&self.inner.paths, &instance)?;
        let bytes = self.inner.serializer.serialize(&instance)?;
        Ok(Checked { path, bytes, instance })
    }

    /// Updates the registration of a checked instance's id, or starts the node that keeps a
    /// new one (awaiting nothing).
    pub(super) fn install(&self, checked: Checked<T>) -> Result<Prepared> {
        let Checked { path, bytes, instance } = checked;
        let mut state = self.inner.lock();
        if state.closed {
            return Err(closed());
        }
        if let Some(existing) = state.registrations.get_mut(&instance.id) {
            check_same_registration(&existing.instance, &instance)?;
            existing.node.set_data(bytes)?;
            existing.instance = instance;
            curator_core::metrics::discovery_registration("update");
            return Ok(Prepared::Updated);
        }
        let mode = match instance.service_type {
            ServiceType::Dynamic => CreateMode::Ephemeral,
            ServiceType::DynamicSequential => CreateMode::EphemeralSequential,
            ServiceType::Static | ServiceType::Permanent => CreateMode::Persistent,
        };
        tracing::debug!(%path, ?mode, "registering a service instance");
        let mut node = PersistentNode::builder(&self.inner.fw, &path).mode(mode).data(bytes);
        if mode.is_sequential() {
            // Curator's name (`<id><sequence>`, unprotected), so the create whose reply is lost
            // is found by its data instead: the instance's JSON, with its id and registration
            // time, is no other node's (docs/architecture.md section 14).
            node = node.unique_data();
        }
        let node = Arc::new(node.build()?);
        node.start()?;
        let watch = if self.inner.watch_instances && mode != CreateMode::EphemeralSequential {
            match super::watch::watch(&self.inner, &instance.id, &path, &node) {
                Ok(watch) => Some(watch),
                Err(e) => {
                    // Not registered after all: the node's drop deletes it in the background.
                    drop(node);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let instance_id = instance.id.clone();
        state.registrations.insert(instance.id.clone(), Registration { instance, node: node.clone(), watch });
        curator_core::metrics::discovery_registration("register");
        Ok(Prepared::Created(Pending { path, instance_id, node }))
    }
}

/// An instance checked for registration: its node's path and data.
pub(super) struct Checked<T> {
    path: String,
    bytes: Vec<u8>,
    instance: ServiceInstance<T>,
}

/// A registration whose node was started: what is left is to wait for its first create.
pub(super) struct Pending {
    path: String,
    instance_id: String,
    node: Arc<PersistentNode>,
}

/// What [`ServiceDiscovery::prepare`] did.
pub(super) enum Prepared {
    /// A registration of the same id was updated: nothing to wait for.
    Updated,
    /// A new registration, whose node is being created.
    Created(Pending),
}

/// The discovery's task after [`ServiceDiscovery::start`]: registers `this_instance` and
/// reports how that went; a failure closes the discovery.
pub(super) async fn register_this<T: Clone + Send + Sync + 'static>(
    inner: Arc<Inner<T>>,
    pending: Pending,
    readiness: Readiness,
) {
    match inner.wait_created(pending).await {
        Ok(()) => readiness.ready(),
        Err(err) => {
            tracing::debug!(path = %inner.paths.base(), error = %err, "service discovery: this_instance was refused; closing");
            let err = match err {
                DiscoveryError::Curator(err) => err,
                // Unregistered, or the discovery closed, before the node was made.
                _ => CuratorError::AlreadyClosed { what: "ServiceDiscovery" },
            };
            // Registers are refused from before `ready` tells the refusal.
            inner.lock().closed = true;
            readiness.refused(err);
            inner.close().await;
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Inner<T> {
    /// Waits for the first create of a registration's node (see
    /// [`ServiceDiscovery::register`]).
    pub(super) async fn wait_created(&self, pending: Pending) -> Result<()> {
        let Pending { path, instance_id, node } = pending;
        let created = tokio::select! {
            // The refusal first: it closes the node, which also ends the wait for the create.
            biased;
            refusal = node.refused() => {
                // Refused for good (no permission to create, say): nothing stays registered, so
                // that the caller's next register tries again rather than updating nothing.
                tracing::debug!(%path, error = %refusal, "registering a service instance was refused");
                let removed = {
                    let mut state = self.lock();
                    let ours = state.registrations.get(&instance_id).is_some_and(|r| Arc::ptr_eq(&r.node, &node));
                    ours.then(|| state.registrations.remove(&instance_id)).flatten()
                };
                if let Some(registration) = removed {
                    close_node(registration).await;
                }
                return Err(refusal.into());
            }
            created = node.wait_for_initial_create(self.fw.connection_timeout()) => created,
        };
        if created {
            tracing::debug!(path = ?node.actual_path(), "registered a service instance");
            Ok(())
        } else if let Some(error) = node.last_error() {
            Err(error.into())
        } else if !self.lock().registrations.get(&instance_id).is_some_and(|r| Arc::ptr_eq(&r.node, &node)) {
            // Unregistered (or the discovery closed) before the node was first made.
            Err(DiscoveryError::NotRegistered { id: instance_id })
        } else {
            Err(CuratorError::Timeout { path }.into())
        }
    }

    /// The discovery's close (see [`ServiceDiscovery::close`]).
    pub(super) async fn close(&self) {
        self.life.close();
        let registrations: Vec<Registration<T>> = {
            let mut state = self.lock();
            state.closed = true;
            state.registrations.drain().map(|(_, r)| r).collect()
        };
        futures::future::join_all(registrations.into_iter().map(close_node)).await;
        self.registration_events.close();
    }
}

/// Stops watching a registration's node (if watched) and keeping it, and deletes it: waits
/// for the delete if no `register` still waits on the node, else leaves it to the node's drop
/// (the same delete, in the background).
pub(super) async fn close_node<T>(registration: Registration<T>) {
    if let Some(watch) = registration.watch {
        watch.close().await;
    }
    // Also when a register still waiting for the node's create holds a clone.
    registration.node.close().await;
}

pub(super) fn closed() -> DiscoveryError {
    CuratorError::AlreadyClosed { what: "ServiceDiscovery" }.into()
}

/// The node path of `instance` (`base/<name>/<id>` by default).
pub(super) fn instance_path<T>(paths: &Paths, instance: &ServiceInstance<T>) -> Result<String> {
    let invalid = |reason: String| DiscoveryError::InvalidInstance { id: instance.id.clone(), reason };
    paths.service(&instance.name).map_err(|e| match e {
        DiscoveryError::InvalidInstance { .. } => invalid(format!("bad service name {:?}", instance.name)),
        other => other,
    })?;
    paths.instance(&instance.name, &instance.id).map_err(|e| match e {
        DiscoveryError::InvalidInstance { .. } => invalid("the id is not one node name".to_string()),
        other => other,
    })
}

/// An update keeps the node: same name (same parent) and same service type (same mode).
pub(super) fn check_same_registration<T>(registered: &ServiceInstance<T>, new: &ServiceInstance<T>) -> Result<()> {
    let reason = if registered.name != new.name {
        format!("registered as service {:?}, not {:?}; unregister it first", registered.name, new.name)
    } else if registered.service_type != new.service_type {
        format!("registered as {}, not {}; unregister it first", registered.service_type, new.service_type)
    } else {
        return Ok(());
    };
    Err(DiscoveryError::InvalidInstance { id: new.id.clone(), reason })
}
