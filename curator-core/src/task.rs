//! The futures and tasks of the framework's own work: the boxed future operations are made of,
//! and the untracked spawn (docs/architecture.md section 6.1). Re-exported by modules
//! [`ops`](crate::ops) and [`background`](crate::background).

use std::future::Future;
use std::pin::Pin;

#[cfg(doc)]
use crate::CuratorFramework;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Spawns a task on the current runtime, if there is one (drop-time cleanups run where no
/// runtime may be left). Unlike [`CuratorFramework::spawn_background`], `close()` does not wait
/// for it: for monitors that end by themselves.
pub fn spawn_detached<F>(future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => drop(handle.spawn(future)),
        Err(_) => tracing::warn!("no tokio runtime: background task not started"),
    }
}
