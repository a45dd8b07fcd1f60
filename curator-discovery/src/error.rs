//! The one error type of the discovery model.

/// What went wrong reading or writing a service instance, or parsing a URI spec.
///
/// The model has its own error rather than `curator_core::CuratorError`: its failures are about
/// bytes and templates, not about ZooKeeper operations, so they have no path, no retry class and
/// no unknown outcome. Whoever reads instances from nodes (the service discovery built on this
/// model) adds the node's path when it reports one. New variants may be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}
