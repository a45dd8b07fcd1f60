//! Reading the server directly: children, listings, raw clients, and request counts.

use std::collections::BTreeMap;

use curator_core::zk;
use curator_core::CuratorFramework;
use curator_test::{eventually, four_letter_word, Timing};

/// The children of `path` (empty when it does not exist or cannot be read).
pub async fn children(fw: &CuratorFramework, path: &str) -> Vec<String> {
    fw.get_children().for_path(path).await.unwrap_or_default()
}

/// The value of `key` in the output of the `mntr` four-letter word.
///
/// # Panics
/// If `key` is missing or not a number.
pub fn mntr_value(mntr: &str, key: &str) -> u64 {
    mntr.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(|c: char| c.is_whitespace())))
        .map(|v| v.trim().parse().unwrap_or_else(|e| panic!("{key} in mntr is not a number: {v:?} ({e})")))
        .unwrap_or_else(|| panic!("{key} not in mntr output"))
}

/// The number of requests the server has received (`zk_packets_received` of `mntr`), to
/// measure what an operation costs: read it before and after, and subtract.
pub async fn packets_received(connect_string: &str) -> u64 {
    let mntr = four_letter_word(connect_string, "mntr").await.expect("mntr");
    mntr_value(&mntr, "zk_packets_received")
}

/// A raw client (no framework) for direct listings.
pub async fn raw_client(connect_string: &str) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Timing::new().session_timeout())
        .connect(connect_string)
        .await
        .expect("raw client")
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

/// Waits (up to the test deadline) until `path` has `n` children; panics with what it has
/// otherwise.
pub async fn wait_children(fw: &CuratorFramework, path: &str, n: usize) {
    let done =
        curator_test::eventually(Timing::new().deadline(), || async { children(fw, path).await.len() == n }).await;
    assert!(done, "{path} never had {n} children: {:?}", children(fw, path).await);
}

/// Waits until the server's clock (a write's mtime on the scratch node `clock`, made and
/// deleted here) is more than `age` past `mtime`: ages measured by the server, as a reaper
/// that compares mtimes sees them.
///
/// # Panics
/// If the server's clock does not get there within the default deadline.
pub async fn server_clock_past(fw: &CuratorFramework, clock: &str, mtime: i64, age: std::time::Duration) {
    fw.create().for_path(clock, Vec::new()).await.expect("clock node");
    let past = eventually(Timing::new().deadline(), || async {
        let stat = fw.set_data().for_path(clock, Vec::new()).await.expect("tick");
        stat.mtime - mtime > age.as_millis() as i64
    })
    .await;
    assert!(past, "the server's clock did not pass {mtime} + {age:?}");
    fw.delete().for_path(clock).await.expect("clock node deleted");
}

/// Makes `path` readable by anyone and nothing more: the base where a recipe that writes under
/// it is refused for good (`NoAuth`), as a client without permission is.
///
/// # Panics
/// If the node cannot be made.
pub async fn read_only_node(fw: &CuratorFramework, path: &str) {
    let read_only = vec![zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone())];
    fw.create().with_acl(read_only).for_path(path, Vec::new()).await.expect("a read-only node");
}
