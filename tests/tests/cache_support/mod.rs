//! Helpers shared by the cache tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;

use curator_cache::{CuratorCacheEvent, EventStream, PathChildrenCacheEvent, TreeCacheEvent};
use curator_core::zk;
use curator_core::{CreateMode, CuratorFramework};
use curator_test::Timing;

/// A path no other test uses.
pub fn unique(name: &str) -> String {
    format!("/cache-{name}-{:016x}", fastrand::u64(..))
}

#[path = "../common/mod.rs"]
mod common;
pub use common::builder;

/// A started and connected framework.
pub async fn connected(connect_string: &str) -> CuratorFramework {
    common::start(builder(connect_string)).await
}

/// Creates `path` (and its parents) with `data`.
pub async fn create(fw: &CuratorFramework, path: &str, data: &[u8]) {
    fw.create().creating_parents_if_needed().for_path(path, data.to_vec()).await.expect("create");
}

/// Creates `path` as an ephemeral node of `fw`'s session.
pub async fn create_ephemeral(fw: &CuratorFramework, path: &str, data: &[u8]) {
    fw.create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path(path, data.to_vec())
        .await
        .expect("create ephemeral");
}

/// Sets `path`'s data.
pub async fn set(fw: &CuratorFramework, path: &str, data: &[u8]) {
    fw.set_data().for_path(path, data.to_vec()).await.expect("set data");
}

/// Deletes `path`.
pub async fn delete(fw: &CuratorFramework, path: &str) {
    fw.delete().for_path(path).await.expect("delete");
}

/// The next item of `stream`, within the test deadline.
pub async fn next<E: std::fmt::Debug>(stream: &mut EventStream<E>) -> E {
    match tokio::time::timeout(Timing::new().deadline(), stream.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the event stream ended"),
        Err(_) => panic!("no event within {:?}", Timing::new().deadline()),
    }
}

/// Awaits `fut` within the test deadline.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Timing::new().deadline(), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: not done within {:?}", Timing::new().deadline()),
    }
}

/// Every node at or below `root` on the server, with its data (depth-first, retried while
/// nodes vanish under it).
pub async fn listing(client: &zk::Client, root: &str) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_string()];
    while let Some(path) = todo.pop() {
        let (data, _) = match client.get_data(&path).await {
            Ok(d) => d,
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("get_data {path}: {e}"),
        };
        let children = match client.list_children(&path).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("list {path}: {e}"),
        };
        out.insert(path.clone(), data);
        for c in children {
            todo.push(if path == "/" { format!("/{c}") } else { format!("{path}/{c}") });
        }
    }
    out
}

/// The direct children of `root` in a listing.
pub fn children_only(all: &BTreeMap<String, Vec<u8>>, root: &str) -> BTreeMap<String, Vec<u8>> {
    let prefix = format!("{root}/");
    all.iter()
        .filter(|(p, _)| p.strip_prefix(&prefix).is_some_and(|rest| !rest.is_empty() && !rest.contains('/')))
        .map(|(p, d)| (p.clone(), d.clone()))
        .collect()
}

/// A raw client for direct listings.
pub async fn raw_client(connect_string: &str) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Timing::new().session_timeout())
        .connect(connect_string)
        .await
        .expect("raw client")
}

/// Replays a `CuratorCache` event log from empty.
pub fn replay_curator(log: &[CuratorCacheEvent]) -> BTreeMap<String, Vec<u8>> {
    let mut map = BTreeMap::new();
    for e in log {
        match e {
            CuratorCacheEvent::Created(n) | CuratorCacheEvent::Changed { new: n, .. } => {
                map.insert(n.path.clone(), n.data.clone().unwrap_or_default());
            }
            CuratorCacheEvent::Deleted(n) => {
                map.remove(&n.path);
            }
            _ => {}
        }
    }
    map
}

/// Replays a `PathChildrenCache` event log from empty.
pub fn replay_children(log: &[PathChildrenCacheEvent]) -> BTreeMap<String, Vec<u8>> {
    let mut map = BTreeMap::new();
    for e in log {
        match e {
            PathChildrenCacheEvent::ChildAdded(n) | PathChildrenCacheEvent::ChildUpdated(n) => {
                map.insert(n.path.clone(), n.data.clone().unwrap_or_default());
            }
            PathChildrenCacheEvent::ChildRemoved(n) => {
                map.remove(&n.path);
            }
            _ => {}
        }
    }
    map
}

/// Replays a `TreeCache` event log from empty.
pub fn replay_tree(log: &[TreeCacheEvent]) -> BTreeMap<String, Vec<u8>> {
    let mut map = BTreeMap::new();
    for e in log {
        match e {
            TreeCacheEvent::NodeAdded(n) | TreeCacheEvent::NodeUpdated(n) => {
                map.insert(n.path.clone(), n.data.clone().unwrap_or_default());
            }
            TreeCacheEvent::NodeRemoved(n) => {
                map.remove(&n.path);
            }
            _ => {}
        }
    }
    map
}

/// Installs a tracing subscriber once (RUST_LOG decides what shows).
pub fn trace() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
