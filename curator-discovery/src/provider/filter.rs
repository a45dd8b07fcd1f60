//! [`InstanceFilter`]: which instances a [`ServiceProvider`](crate::ServiceProvider) may pick,
//! as Curator's `InstanceFilter`.

use crate::ServiceInstance;

/// A predicate on instances: a [`ServiceProvider`](crate::ServiceProvider) picks only among the
/// instances every one of its filters accepts (Curator's `InstanceFilter`).
///
/// Any `Fn(&ServiceInstance<T>) -> bool` that is `Send + Sync` is a filter:
///
/// ```
/// use curator_discovery::{InstanceFilter, ServiceInstance};
///
/// let https_only = |instance: &ServiceInstance| instance.ssl_port.is_some();
/// let plain: ServiceInstance = ServiceInstance::builder("web").port(80).build();
/// let tls: ServiceInstance = ServiceInstance::builder("web").ssl_port(443).build();
/// assert!(!https_only.accept(&plain));
/// assert!(https_only.accept(&tls));
/// ```
pub trait InstanceFilter<T>: Send + Sync {
    /// True when the instance may be picked.
    fn accept(&self, instance: &ServiceInstance<T>) -> bool;
}

impl<T, F> InstanceFilter<T> for F
where
    F: Fn(&ServiceInstance<T>) -> bool + Send + Sync,
{
    fn accept(&self, instance: &ServiceInstance<T>) -> bool {
        self(instance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closure is a filter.
    #[test]
    fn a_closure_is_a_filter() {
        let on: ServiceInstance<()> = ServiceInstance::builder("s").id("1").build();
        let off: ServiceInstance<()> = ServiceInstance::builder("s").id("2").enabled(false).build();
        let odd = |i: &ServiceInstance<()>| i.id == "1";
        assert!(odd.accept(&on));
        assert!(!odd.accept(&off));
    }
}
