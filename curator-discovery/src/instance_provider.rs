//! [`InstanceProvider`]: where a [`ServiceProvider`](crate::ServiceProvider) gets the instances
//! it picks from, as Curator's `InstanceProvider`.

use crate::ServiceInstance;

/// A source of the current instances of one service, as Curator's `InstanceProvider`.
///
/// `ServiceCache` implements it with the instances it holds; a fixed list (in tests,
/// or for a service whose instances are known in advance) can implement it too. A
/// [`ServiceProvider`](crate::ServiceProvider) asks for the list on every pick, so an
/// implementation should answer from memory, without I/O.
pub trait InstanceProvider<T>: Send + Sync {
    /// The instances available now, in a stable order (round robin walks this order).
    fn instances(&self) -> Vec<ServiceInstance<T>>;
}
