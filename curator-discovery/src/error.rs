//! The one error type of the discovery model.

/// What went wrong reading or writing a service instance, or parsing a URI spec.
///
/// The model's failures are about bytes and templates; the service discovery's
/// ([`ServiceDiscovery`](crate::ServiceDiscovery), [`ServiceCache`](crate::ServiceCache)) add
/// those of ZooKeeper, wrapped whole in [`DiscoveryError::Curator`] (so the path, the retry
/// class and an unknown outcome stay readable), and those of their own use
/// ([`DiscoveryError::BadNode`], [`DiscoveryError::NotRegistered`],
/// [`DiscoveryError::InvalidInstance`]). One error type for the crate, so that `?` works across
/// the model and the registry. Not `PartialEq`, as `CuratorError` is not: match on the variant.
/// New variants may be added.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The bytes are not a service instance: empty, not JSON, not a JSON object, or a field of
    /// the wrong type (a port that is not an integer, an unknown service type, ...).
    #[error("not a service instance: {reason}")]
    BadJson {
        /// What is wrong, with the line and column where the JSON parser says so.
        reason: String,
    },
    /// The instance is well formed but its payload does not read as the payload type asked for
    /// (Curator fails the same way with a `ClassCastException`).
    #[error("the payload does not read as the payload type: {reason}")]
    BadPayload {
        /// What the payload type's deserializer said.
        reason: String,
    },
    /// The payload cannot be written as JSON (for instance a map with keys that are not
    /// strings).
    #[error("the payload cannot be written as JSON: {reason}")]
    PayloadNotSerializable {
        /// What the payload's serializer said.
        reason: String,
    },
    /// The URI spec template is not well formed (Curator throws `IllegalStateException`).
    #[error("invalid URI spec {spec:?}: {reason}")]
    InvalidUriSpec {
        /// The template as given.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A ZooKeeper operation of the service discovery failed.
    #[error(transparent)]
    Curator(#[from] curator_core::CuratorError),
    /// The node at `path` does not hold a service instance (returned by
    /// [`ServiceDiscovery::query_for_instance`](crate::ServiceDiscovery::query_for_instance);
    /// the queries of many instances and the caches skip such nodes instead).
    // The source says what the node is not ("not a service instance: ..."): said once.
    #[error("node {path:?}: {source}")]
    BadNode {
        /// The node's path.
        path: String,
        /// What reading it said ([`BadJson`](Self::BadJson) or [`BadPayload`](Self::BadPayload)).
        source: Box<DiscoveryError>,
    },
    /// `update` of an instance this discovery has not registered (or has unregistered), or a
    /// `register` whose instance was unregistered (or whose discovery was closed) before its
    /// node was first made.
    #[error("service instance {id:?} is not registered")]
    NotRegistered {
        /// The instance's id.
        id: String,
    },
    /// The discovery's [`DiscoveryPathConstructor`](crate::DiscoveryPathConstructor) gave a
    /// path that is not a valid ZooKeeper path; nothing was sent.
    #[error("the discovery path constructor gave {path:?}: {reason}")]
    InvalidConstructedPath {
        /// The path as the constructor gave it.
        path: String,
        /// Why it is not a valid path.
        reason: String,
    },
    /// The instance cannot be registered as given: a name or id that is not one node name, or
    /// an `update` that changes the name or the service type of a registration.
    #[error("invalid service instance {id:?}: {reason}")]
    InvalidInstance {
        /// The instance's id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
}
