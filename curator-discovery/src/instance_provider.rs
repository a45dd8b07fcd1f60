//! [`InstanceProvider`]: where a service provider reads the instances of one service from.

use crate::ServiceInstance;

/// A source of the current instances of one service, as Curator's `InstanceProvider`.
///
/// The service cache ([`ServiceCache`](crate::ServiceCache)) implements it from
/// its in-memory view, so reading is cheap and never talks to ZooKeeper; a service provider
/// picks among what it returns (round robin, random, sticky, filters). A test can implement
/// it over a fixed list.
///
/// `instances` returns a snapshot: later registrations do not change a vector already
/// returned. Nodes whose data is not an instance are not in it (they are skipped and counted
/// by whoever reads them).
pub trait InstanceProvider<T>: Send + Sync {
    /// The instances known now, in no particular order; empty when there are none.
    fn instances(&self) -> Vec<ServiceInstance<T>>;
}

impl<T, P: InstanceProvider<T> + ?Sized> InstanceProvider<T> for std::sync::Arc<P> {
    fn instances(&self) -> Vec<ServiceInstance<T>> {
        (**self).instances()
    }
}
