//! [`InstanceProvider`]: where a [`ServiceProvider`](crate::ServiceProvider) gets the instances
//! it picks from, as Curator's `InstanceProvider`.

use crate::ServiceInstance;

/// A source of the current instances of one service, as Curator's `InstanceProvider`.
///
/// The service cache ([`ServiceCache`](crate::ServiceCache)) implements it from its in-memory
/// view, so reading is cheap and never talks to ZooKeeper; a
/// [`ServiceProvider`](crate::ServiceProvider) asks for the list on every pick and picks among
/// what it returns (round robin, random, sticky, filters). A fixed list (in tests, or for a
/// service whose instances are known in advance) can implement it too.
///
/// `instances` returns a snapshot: later registrations do not change a vector already
/// returned. Nodes whose data is not an instance are not in it (they are skipped and counted
/// by whoever reads them).
pub trait InstanceProvider<T>: Send + Sync {
    /// The instances known now; empty when there are none. Round robin walks them in the order
    /// given, so an implementation should keep a stable order.
    fn instances(&self) -> Vec<ServiceInstance<T>>;
}

impl<T, P: InstanceProvider<T> + ?Sized> InstanceProvider<T> for std::sync::Arc<P> {
    fn instances(&self) -> Vec<ServiceInstance<T>> {
        (**self).instances()
    }
}
