//! The cache tests' node edits, event waits, and event-log replays.

use std::collections::BTreeMap;
use std::future::Future;

use curator_cache::{CuratorCacheEvent, EventStream, PathChildrenCacheEvent, TreeCacheEvent};
use curator_core::{CreateMode, CuratorFramework};
use curator_test::Timing;

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

/// Whether `path` exists.
pub async fn exists(fw: &CuratorFramework, path: &str) -> bool {
    fw.check_exists().for_path(path).await.expect("exists").is_some()
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

/// The next `n` events of a `PathChildrenCache`, skipping reconnections.
pub async fn children_events_until(
    events: &mut EventStream<PathChildrenCacheEvent>,
    n: usize,
) -> Vec<PathChildrenCacheEvent> {
    let mut out = Vec::new();
    while out.len() < n {
        let e = next(events).await;
        if !matches!(e, PathChildrenCacheEvent::ConnectionReconnected) {
            out.push(e);
        }
    }
    out
}

/// A `PathChildrenCache` event in a few words (`added c1`, `updated c1 <data>`, ...).
pub fn describe(e: &PathChildrenCacheEvent) -> String {
    match e {
        PathChildrenCacheEvent::ChildAdded(n) => format!("added {}", n.name()),
        PathChildrenCacheEvent::ChildUpdated(n) => {
            format!("updated {} {}", n.name(), String::from_utf8_lossy(n.data.as_deref().unwrap_or_default()))
        }
        PathChildrenCacheEvent::ChildRemoved(n) => format!("removed {}", n.name()),
        PathChildrenCacheEvent::Initialized(v) => {
            format!("initialized {:?}", v.iter().map(|n| n.name().to_string()).collect::<Vec<_>>())
        }
        other => format!("{other:?}"),
    }
}

/// The direct children of `root` in a listing (see [`crate::zk::listing`]).
pub fn children_only(all: &BTreeMap<String, Vec<u8>>, root: &str) -> BTreeMap<String, Vec<u8>> {
    let prefix = format!("{root}/");
    all.iter()
        .filter(|(p, _)| p.strip_prefix(&prefix).is_some_and(|rest| !rest.is_empty() && !rest.contains('/')))
        .map(|(p, d)| (p.clone(), d.clone()))
        .collect()
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
