//! TreeCache against a real ZooKeeper (the shared server): depth limit, selector, and events in
//! order.

use curator_cache::{TreeCache, TreeCacheEvent, TreeCacheSelector};
use curator_test::TestingServer;
use tests::caches::{create, delete, next, set};
use tests::{client, unique_path};

fn server() -> String {
    TestingServer::shared().connect_string()
}

struct NoLocks;

impl TreeCacheSelector for NoLocks {
    fn traverse_children(&self, path: &str) -> bool {
        !path.ends_with("/locks")
    }
    fn accept_child(&self, path: &str) -> bool {
        !path.ends_with("/tmp")
    }
}

fn describe_tree(e: &TreeCacheEvent, base: &str) -> String {
    let rel = |p: &str| p.strip_prefix(base).unwrap_or(p).to_string();
    match e {
        TreeCacheEvent::NodeAdded(n) => format!("added {}", rel(&n.path)),
        TreeCacheEvent::NodeUpdated(n) => format!("updated {}", rel(&n.path)),
        TreeCacheEvent::NodeRemoved(n) => format!("removed {}", rel(&n.path)),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn tree_cache_depth_selector_and_events() {
    let fw = client(&server()).await;
    let base = unique_path("tc");
    create(&fw, &format!("{base}/a/b/c"), b"deep").await;
    create(&fw, &format!("{base}/locks/l1"), b"").await;
    create(&fw, &format!("{base}/tmp/t1"), b"").await;
    let tree = TreeCache::builder(&fw, &base).max_depth(2).selector(NoLocks).build().unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    let mut got = Vec::new();
    loop {
        let e = next(&mut events).await;
        if matches!(e, TreeCacheEvent::ConnectionReconnected) {
            continue;
        }
        let done = matches!(e, TreeCacheEvent::Initialized);
        got.push(describe_tree(&e, &base));
        if done {
            break;
        }
    }
    assert_eq!(got, vec!["added ", "added /a", "added /a/b", "added /locks", "Initialized"]);
    let top: Vec<_> = tree.current_children(&base).unwrap().into_keys().collect();
    assert_eq!(top, vec!["a", "locks"]);
    assert_eq!(tree.size(), 4);

    // Out of scope: too deep, under a node not traversed, not accepted.
    set(&fw, &format!("{base}/a/b/c"), b"x").await;
    create(&fw, &format!("{base}/locks/l2"), b"").await;
    create(&fw, &format!("{base}/tmp/t2"), b"").await;
    // In scope; each step waits for its event (the out-of-scope ones above must cause none).
    async fn tree_event(events: &mut curator_cache::EventStream<TreeCacheEvent>, base: &str) -> String {
        loop {
            let e = next(events).await;
            if !matches!(e, TreeCacheEvent::ConnectionReconnected) {
                return describe_tree(&e, base);
            }
        }
    }
    let d = format!("{base}/d");
    let mut got = Vec::new();
    create(&fw, &d, b"1").await;
    got.push(tree_event(&mut events, &base).await);
    set(&fw, &d, b"2").await;
    got.push(tree_event(&mut events, &base).await);
    delete(&fw, &d).await;
    got.push(tree_event(&mut events, &base).await);
    create(&fw, &d, b"3").await;
    got.push(tree_event(&mut events, &base).await);
    assert_eq!(got, vec!["added /d", "updated /d", "removed /d", "added /d"]);
    assert_eq!(tree.current_data(&format!("{base}/d")).unwrap().data.as_deref(), Some(&b"3"[..]));
    assert!(tree.current_data(&format!("{base}/a/b/c")).is_none());
    tree.close();
    fw.close().await;
}
