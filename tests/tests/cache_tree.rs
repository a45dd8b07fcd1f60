//! TreeCache against a real ZooKeeper: depth limit, selector, and events in order; the first
//! load level by level; no "reconnected" on the first connection; "initialized" again after a
//! lost session; creating its path. Tests that follow Apache Curator's `TestTreeCache` name the
//! test they follow.

use std::collections::BTreeSet;

use curator_cache::{EventStream, TreeCache, TreeCacheEvent, TreeCacheSelector};
use curator_core::CreateMode;
use curator_test::{expire_session, TestingServer};
use tests::caches::{create, delete, exists, next, set, within};
use tests::{builder, client, unique_path};

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

fn is_connection(e: &TreeCacheEvent) -> bool {
    matches!(
        e,
        TreeCacheEvent::ConnectionSuspended | TreeCacheEvent::ConnectionReconnected | TreeCacheEvent::ConnectionLost
    )
}

/// The events up to and including the next `Initialized`, described; connection events are
/// kept only if `with_connection`.
async fn until_initialized(events: &mut EventStream<TreeCacheEvent>, base: &str, with_connection: bool) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let e = next(events).await;
        if is_connection(&e) && !with_connection {
            continue;
        }
        got.push(describe_tree(&e, base));
        if matches!(e, TreeCacheEvent::Initialized) {
            return got;
        }
    }
}

/// The next node event (connection events skipped), described.
async fn next_node_event(events: &mut EventStream<TreeCacheEvent>, base: &str) -> String {
    loop {
        let e = next(events).await;
        if !is_connection(&e) {
            return describe_tree(&e, base);
        }
    }
}

fn names(
    children: Option<std::collections::BTreeMap<String, std::sync::Arc<curator_cache::ChildData>>>,
) -> Option<BTreeSet<String>> {
    children.map(|c| c.into_keys().collect())
}

fn set_of(names: &[&str]) -> Option<BTreeSet<String>> {
    Some(names.iter().map(|n| n.to_string()).collect())
}

/// Follows Curator's `TestTreeCache.testStartup`: the first load reports its nodes level by
/// level (the root, its children by name, then their children), then `Initialized`. Before,
/// they came in path order, depth first: `/t, /t/1, /t/2, /t/2/sub, /t/3`.
#[tokio::test]
async fn first_load_is_reported_level_by_level() {
    let fw = client(&server()).await;
    let base = unique_path("tcstartup");
    create(&fw, &base, b"").await;
    create(&fw, &format!("{base}/1"), b"one").await;
    create(&fw, &format!("{base}/2"), b"two").await;
    create(&fw, &format!("{base}/3"), b"three").await;
    create(&fw, &format!("{base}/2/sub"), b"two-sub").await;
    let tree = TreeCache::new(&fw, &base).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    let got = until_initialized(&mut events, &base, false).await;
    assert_eq!(got, vec!["added ", "added /1", "added /2", "added /3", "added /2/sub", "Initialized"]);
    // Nothing else was pending: the next event is the next change.
    create(&fw, &format!("{base}/marker"), b"").await;
    assert_eq!(next_node_event(&mut events, &base).await, "added /marker");

    assert_eq!(names(tree.current_children(&base)), set_of(&["1", "2", "3", "marker"]));
    assert_eq!(names(tree.current_children(&format!("{base}/1"))), set_of(&[]));
    assert_eq!(names(tree.current_children(&format!("{base}/2"))), set_of(&["sub"]));
    assert_eq!(names(tree.current_children(&format!("{base}/non_exist"))), None);
    assert_eq!(tree.current_data(&format!("{base}/2/sub")).unwrap().data.as_deref(), Some(&b"two-sub"[..]));
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testSelector`: a selector that does not traverse one node
/// and does not accept another; the first load is level by level. Before, the order was depth
/// first (`/n1-b/n2-a` before `/n1-d`).
#[tokio::test]
async fn selector_and_level_order() {
    struct Selector(String);
    impl TreeCacheSelector for Selector {
        fn traverse_children(&self, path: &str) -> bool {
            path != format!("{}/n1-b/n2-b", self.0)
        }
        fn accept_child(&self, path: &str) -> bool {
            path != format!("{}/n1-c", self.0)
        }
    }
    let fw = client(&server()).await;
    let base = unique_path("tcselector");
    for p in ["", "/n1-a", "/n1-b", "/n1-b/n2-a", "/n1-b/n2-b", "/n1-b/n2-b/n3-a", "/n1-c", "/n1-d"] {
        create(&fw, &format!("{base}{p}"), b"").await;
    }
    let tree = TreeCache::builder(&fw, &base).selector(Selector(base.clone())).build().unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    let got = until_initialized(&mut events, &base, false).await;
    assert_eq!(
        got,
        vec![
            "added ",
            "added /n1-a",
            "added /n1-b",
            "added /n1-d",
            "added /n1-b/n2-a",
            "added /n1-b/n2-b",
            "Initialized"
        ]
    );
    create(&fw, &format!("{base}/marker"), b"").await;
    assert_eq!(next_node_event(&mut events, &base).await, "added /marker");
    tree.close().await;
    fw.close().await;
}

/// A first load larger than one multi-read (2,403 nodes: the loader's batches hold at most
/// 1,000 reads) is reported as it arrives, batch by batch, and still level by level with siblings
/// by name across batch boundaries: the root, the three parents, then every child of the first
/// parent in name order before those of the second. Children are created in reverse name order
/// so that the server's listing order is not the answer. `current_data` finds every reported node.
#[tokio::test]
async fn first_load_over_many_batches_is_level_by_level() {
    let fw = client(&server()).await;
    let base = unique_path("tcbatches");
    create(&fw, &base, b"").await;
    let parents = ["p0", "p1", "p2"];
    let mut expected = vec!["added ".to_string()];
    expected.extend(parents.iter().map(|p| format!("added /{p}")));
    for parent in parents {
        create(&fw, &format!("{base}/{parent}"), b"").await;
        let names: Vec<String> = (0..800).map(|i| format!("c{i:04}")).collect();
        for chunk in names.rchunks(100).map(|c| c.iter().rev().collect::<Vec<_>>()) {
            futures::future::join_all(chunk.iter().map(|n| {
                let path = format!("{base}/{parent}/{n}");
                let fw = &fw;
                async move { fw.create().for_path(&path, b"x".to_vec()).await.unwrap() }
            }))
            .await;
        }
        expected.extend(names.iter().map(|n| format!("added /{parent}/{n}")));
    }
    expected.push("Initialized".to_string());
    let tree = TreeCache::new(&fw, &base).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    let got = within("initialized", until_initialized(&mut events, &base, false)).await;
    assert_eq!(got.len(), expected.len());
    let first_wrong = got.iter().zip(&expected).position(|(g, e)| g != e);
    assert_eq!(first_wrong, None, "first difference: {:?}", first_wrong.map(|i| (&got[i], &expected[i])));
    for parent in parents {
        assert!(tree.current_data(&format!("{base}/{parent}/c0799")).is_some());
    }
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testServerNotStartedYet`, and checks what Curator's
/// TreeCache does on the framework's first connection: nothing (it loads; "reconnected" is for
/// reconnections). A cache started before its framework ever connected reports `Initialized`
/// once the server is up, then the node created, and no connection event at all. Before, the
/// first connection was reported as `ConnectionReconnected`, ahead of `Initialized`.
#[tokio::test]
async fn no_reconnected_event_on_the_first_connection() {
    let mut server = TestingServer::start().await.unwrap();
    server.stop().await.unwrap();
    let fw = builder(&server.connect_string()).build().unwrap();
    fw.start().unwrap();
    let base = unique_path("tcfirst");
    let tree = TreeCache::new(&fw, &base).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    server.restart().await.unwrap();
    let got = within("initialized", until_initialized(&mut events, &base, true)).await;
    assert_eq!(got, vec!["Initialized"]);
    create(&fw, &base, b"").await;
    let e = next(&mut events).await;
    assert_eq!(describe_tree(&e, &base), "added ");
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testKilledSession`: after a lost session the cache loads on
/// the new one and reports `Initialized` again (Curator's TreeCache clears its "initialized"
/// flag on LOST), once what changed meanwhile was reported: here, the removal of an ephemeral
/// node of the lost session. Before, `Initialized` came only once.
#[tokio::test]
async fn initialized_again_after_a_lost_session() {
    let connect = server();
    let fw = client(&connect).await;
    let base = unique_path("tckilled");
    create(&fw, &base, b"").await;
    let tree = TreeCache::new(&fw, &base).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    assert_eq!(until_initialized(&mut events, &base, false).await, vec!["added ", "Initialized"]);
    create(&fw, &format!("{base}/foo"), b"foo").await;
    assert_eq!(next_node_event(&mut events, &base).await, "added /foo");
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&format!("{base}/me"), b"data".to_vec()).await.unwrap();
    assert_eq!(next_node_event(&mut events, &base).await, "added /me");

    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    let got = within("initialized again", until_initialized(&mut events, &base, true)).await;
    // The expiry may first cut the connection (suspended, reconnected) before the loss.
    let from_loss: Vec<_> = got.iter().skip_while(|e| *e != "ConnectionLost").cloned().collect();
    assert_eq!(from_loss, vec!["ConnectionLost", "ConnectionReconnected", "removed /me", "Initialized"], "{got:?}");
    create(&fw, &format!("{base}/marker"), b"").await;
    assert_eq!(next_node_event(&mut events, &base).await, "added /marker");
    tree.close().await;
    fw.close().await;
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
    // Level by level, as Curator's TreeCache.
    assert_eq!(got, vec!["added ", "added /a", "added /locks", "added /a/b", "Initialized"]);
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
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testCreateParents`: by default a TreeCache leaves a missing
/// path alone; with `create_parent_containers(true)` (Curator's `setCreateParentNodes`) it makes
/// the path and its parents as containers at start, and reports the path. Before, there was no
/// such option.
#[tokio::test]
async fn create_parent_containers_makes_the_path() {
    let fw = client(&server()).await;
    let base = unique_path("tcparents");
    let path = format!("{base}/one/two/three");
    let tree = TreeCache::new(&fw, &path).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    assert_eq!(until_initialized(&mut events, &base, false).await, vec!["Initialized"]);
    assert!(!exists(&fw, &base).await);
    tree.close().await;

    let tree = TreeCache::builder(&fw, &path).create_parent_containers(true).build().unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    assert_eq!(until_initialized(&mut events, &base, false).await, vec!["added /one/two/three", "Initialized"]);
    assert!(exists(&fw, &base).await && exists(&fw, &path).await);
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testDeleteThenCreateRoot`: the cache's root deleted and
/// created again, twice, is reported each time, and nothing else.
#[tokio::test]
async fn root_deleted_then_created_again() {
    let fw = client(&server()).await;
    let base = unique_path("tcroot");
    let foo = format!("{base}/foo");
    create(&fw, &foo, b"one").await;
    let tree = TreeCache::new(&fw, &foo).unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    assert_eq!(until_initialized(&mut events, &foo, false).await, vec!["added ", "Initialized"]);
    for _ in 0..2 {
        delete(&fw, &foo).await;
        assert_eq!(next_node_event(&mut events, &foo).await, "removed ");
        create(&fw, &foo, b"two").await;
        assert_eq!(next_node_event(&mut events, &foo).await, "added ");
    }
    assert_eq!(tree.current_data(&foo).unwrap().data.as_deref(), Some(&b"two"[..]));
    create(&fw, &format!("{foo}/marker"), b"").await;
    assert_eq!(next_node_event(&mut events, &foo).await, "added /marker");
    tree.close().await;
    fw.close().await;
}

/// Follows Curator's `TestTreeCache.testDepth0` and `testBasics`: with depth 0 only the root is
/// cached and its children map is empty; `current_children` of a node not cached (a child out
/// of depth, a missing one, or a path that only shares a prefix with the root) is `None`.
#[tokio::test]
async fn depth_zero_and_children_of_nodes_not_cached() {
    let fw = client(&server()).await;
    let base = unique_path("tcdepth0");
    for (p, d) in [("", ""), ("/1", "one"), ("/2", "two"), ("/3", "three"), ("/2/sub", "two-sub")] {
        create(&fw, &format!("{base}{p}"), d.as_bytes()).await;
    }
    let tree = TreeCache::builder(&fw, &base).max_depth(0).build().unwrap();
    let mut events = tree.events();
    tree.start().unwrap();
    assert_eq!(until_initialized(&mut events, &base, false).await, vec!["added ", "Initialized"]);
    assert_eq!(names(tree.current_children(&base)), set_of(&[]));
    assert!(tree.current_data(&format!("{base}/1")).is_none());
    assert_eq!(names(tree.current_children(&format!("{base}/1"))), None);
    assert_eq!(names(tree.current_children(&format!("{base}/non_exist"))), None);
    assert_eq!(names(tree.current_children(&format!("{base}ing"))), None);
    assert_eq!(names(tree.current_children(&base[..base.len() - 1])), None);
    // Changes below the root are not its business; the root's own are.
    set(&fw, &format!("{base}/1"), b"x").await;
    set(&fw, &base, b"root").await;
    assert_eq!(next_node_event(&mut events, &base).await, "updated ");
    assert_eq!(tree.size(), 1);
    tree.close().await;
    fw.close().await;
}
