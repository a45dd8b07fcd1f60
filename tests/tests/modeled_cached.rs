//! The cached modeled client (issue 29 item 2): Curator's `TestCachedModeledFramework`
//! scenarios, typed events with old and new values, read-through on a miss, and reads from the
//! cache while ZooKeeper is out of reach (under both error policies and both retry policies).
//!
//! Curator runs each scenario twice, with a cache that answers reads at once and one
//! (`initialized()`) whose reads wait for the first load. Here there is one kind: a read the
//! cache cannot answer (not loaded yet, or a miss) reads through to ZooKeeper, so both of
//! Curator's kinds give the same answers; the scenarios run once. Curator's `testDownServer`
//! waits for `LOST`; here the connection is cut and refused, and the test waits for
//! `Suspended` (what matters is that the read needs no server; a `LOST` would take a session
//! timeout for each of the four policy combinations).

use std::time::Duration;

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ZPath};
use curator_modeled::{
    CachedModeledFramework, ModelSpec, ModeledCacheEvent, ModeledCacheEvents, ModeledFramework, RawModelSerializer,
};
use curator_test::{ChaosProxy, TestingServer, Timing};
use serde::{Deserialize, Serialize};
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::{builder, client, init_tracing, unique_path, wait_for};

/// Curator's `TestModel`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TestModel {
    first_name: String,
    last_name: String,
    address: String,
    age: i32,
    salary: u64,
}

fn model(first: &str, last: &str, address: &str, age: i32) -> TestModel {
    TestModel { first_name: first.into(), last_name: last.into(), address: address.into(), age, salary: 1 }
}

fn spec(base: &str) -> ModelSpec<TestModel> {
    ModelSpec::json(ZPath::parse(&format!("{base}/test/path")).unwrap()).build().unwrap()
}

fn cached(fw: &CuratorFramework, base: &str) -> CachedModeledFramework<TestModel> {
    CachedModeledFramework::new(ModeledFramework::new(fw, spec(base))).unwrap()
}

async fn shared_client() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

/// The next event, within the test deadline.
async fn next<T: Send + Sync + 'static>(events: &mut ModeledCacheEvents<T>) -> ModeledCacheEvent<T> {
    tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event in time").expect("open")
}

/// The next event's kind and path (`Initialized` with the path "").
async fn next_kind<T: Send + Sync + 'static>(events: &mut ModeledCacheEvents<T>) -> (&'static str, String) {
    match next(events).await {
        ModeledCacheEvent::Added(node) => ("added", node.path.to_string()),
        ModeledCacheEvent::Updated { new, .. } => ("updated", new.path.to_string()),
        ModeledCacheEvent::Removed(node) => ("removed", node.path.to_string()),
        ModeledCacheEvent::Initialized => ("initialized", String::new()),
        _ => panic!("an event of a kind this test does not know"),
    }
}

/// Curator's `TestCachedModeledFramework.testDownServer`: once a node is cached, reading it
/// needs no server. A miss then reads through, and fails with a typed error.
#[tokio::test]
async fn down_server() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
        // A short connection timeout: the miss below waits for a connection that never comes.
        let quick = builder(&proxy.connect_string()).connection_timeout(Duration::from_millis(300));
        let fw = with_policies(quick, policy, retry).build().unwrap();
        let mut states = fw.connection_state_stream();
        fw.start().unwrap();
        fw.block_until_connected(Timing::new().deadline()).await.unwrap();
        let base = unique_path("cached-down");
        let client = cached(&fw, &base);
        let mut events = client.events();
        client.start().unwrap();
        let value = model("a", "b", "c", 1);
        let child = client.child("a").unwrap();
        child.set(&value).await.unwrap();
        while !matches!(next(&mut events).await, ModeledCacheEvent::Added(_)) {}

        proxy.set_reject(true);
        proxy.cut();
        wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
        assert_eq!(child.read().await.unwrap(), value, "{case}");
        if retry == Retry::Short {
            let miss = client.child("missing").unwrap().read().await;
            assert!(miss.as_ref().is_err_and(CuratorError::is_retryable), "{case}: {miss:?}");
        }
        proxy.set_reject(false);
        client.close().await;
        fw.close().await;
    }
}

/// Curator's `TestCachedModeledFramework.testPostInitializedFilter`: a node there before the
/// start comes before `Initialized`, one made after comes after it (a listener that wants only
/// the later ones skips to `Initialized`).
#[tokio::test]
async fn post_initialized() {
    let fw = shared_client().await;
    let base = unique_path("cached-post-init");
    let client = cached(&fw, &base);
    client.child("1").unwrap().set(&model("a", "b", "c", 1)).await.unwrap(); // before the start
    let mut events = client.events();
    client.start().unwrap();
    let path = |n: &str| format!("{base}/test/path/{n}");
    assert_eq!(next_kind(&mut events).await, ("added", path("1")));
    assert_eq!(next_kind(&mut events).await, ("initialized", String::new()));
    client.child("2").unwrap().set(&model("d", "e", "f", 1)).await.unwrap();
    assert_eq!(next_kind(&mut events).await, ("added", path("2")));
    client.close().await;
    fw.close().await;
}

/// Curator's `TestCachedModeledFramework.testChildren`: the cached children of a node are its
/// children's models (not its grandchildren's), the same as the uncached client reads.
#[tokio::test]
async fn children() {
    let fw = shared_client().await;
    let base = unique_path("cached-children");
    let client = cached(&fw, &base);
    let mut events = client.events();
    client.start().unwrap();
    let p = client.child("p").unwrap();
    let (parent, child1, child2) = (model("a", "b", "c", 20), model("d", "e", "f", 1), model("g", "h", "i", 1));
    let (grand1, grand2) = (model("j", "k", "l", 10), model("m", "n", "0", 5));
    p.set(&parent).await.unwrap();
    p.child("c1").unwrap().set(&child1).await.unwrap();
    p.child("c2").unwrap().set(&child2).await.unwrap();
    p.child("c1").unwrap().child("g1").unwrap().set(&grand1).await.unwrap();
    p.child("c2").unwrap().child("g2").unwrap().set(&grand2).await.unwrap();
    let mut added = 0;
    while added < 5 {
        if let ModeledCacheEvent::Added(_) = next(&mut events).await {
            added += 1;
        }
    }
    let models = |nodes: Vec<curator_modeled::ZNode<TestModel>>| nodes.into_iter().map(|n| n.model).collect::<Vec<_>>();
    let cached_children = models(p.children_as_znodes().await.unwrap());
    assert_eq!(cached_children, [child1.clone(), child2.clone()]);
    assert_eq!(models(p.current_children().unwrap().models), cached_children);
    let uncached = ModeledFramework::new(&fw, spec(&base)).child("p").unwrap();
    assert_eq!(models(uncached.children_as_znodes().await.unwrap()), cached_children);
    assert_eq!(models(p.child("c1").unwrap().current_children().unwrap().models), [grand1]);
    assert_eq!(models(p.child("c2").unwrap().current_children().unwrap().models), [grand2]);
    client.close().await;
    fw.close().await;
}

/// Curator's `TestCachedModeledFramework.testAccessCacheDirectly` (CURATOR-546): the cached
/// model can be read twice in a row.
#[tokio::test]
async fn access_cache_directly() {
    let fw = shared_client().await;
    let base = unique_path("cached-direct");
    let client = cached(&fw, &base);
    let mut events = client.events();
    client.start().unwrap();
    let value = model("a", "b", "c", 20);
    let m = client.child("m").unwrap();
    m.set(&value).await.unwrap();
    while !matches!(next(&mut events).await, ModeledCacheEvent::Added(_)) {}
    for _ in 0..2 {
        let node = m.current().unwrap().expect("cached");
        assert_eq!((node.model, node.path), (value.clone(), m.spec().path().clone()));
    }
    let raw = client.cache().get(&m.full_path().unwrap()).expect("in the cache");
    assert_eq!(m.spec().serializer().deserialize(raw.data().unwrap()).unwrap(), value);
    client.close().await;
    fw.close().await;
}

/// Curator's `testEmptyNodeJacksonDeserialization` and `testEmptyNodeRawDeserialization`
/// (CURATOR-609): a node with no data (a parent) is no model: deleting it gives no event and no
/// error, with the JSON and the raw serializer alike.
#[tokio::test]
async fn empty_node_is_not_deserialized() {
    let fw = shared_client().await;
    let value = model("a", "b", "c", 20);
    let json = ModelSpec::<TestModel>::json(ZPath::parse(&unique_path("cached-empty-json")).unwrap()).build().unwrap();
    empty_node(&fw, json, value).await;
    let raw = ModelSpec::builder(ZPath::parse(&unique_path("cached-empty-raw")).unwrap(), RawModelSerializer);
    empty_node(&fw, raw.build().unwrap(), vec![1, 2, 3]).await;
    fw.close().await;
}

async fn empty_node<T: Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static>(
    fw: &CuratorFramework,
    spec: ModelSpec<T>,
    value: T,
) {
    let root = spec.path().clone();
    let client = CachedModeledFramework::new(ModeledFramework::new(fw, spec)).unwrap();
    let mut events = client.events();
    client.start().unwrap();
    let sub = root.child("sub").unwrap();
    let (test, signal) = (client.with_path(sub.child("test").unwrap()).unwrap(), client.child("signal").unwrap());
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Initialized));
    test.set(&value).await.unwrap(); // makes `sub`, empty
    match next(&mut events).await {
        ModeledCacheEvent::Added(node) => assert_eq!((&node.path, &node.model), (test.spec().path(), &value)),
        _ => panic!("not the test node's addition"),
    }
    test.delete().await.unwrap();
    fw.delete().quietly().for_path(&sub.full_path().unwrap()).await.unwrap(); // a container: maybe gone already
    signal.set(&value).await.unwrap();
    let mut seen = Vec::new();
    loop {
        match next(&mut events).await {
            ModeledCacheEvent::Added(node) if node.path == *signal.spec().path() => break,
            ModeledCacheEvent::Added(node) => seen.push(("added", node.path, node.model)),
            ModeledCacheEvent::Removed(node) => seen.push(("removed", node.path, node.model)),
            _ => panic!("an event of a kind this test does not expect"),
        }
    }
    assert_eq!(seen, [("removed", test.spec().path().clone(), value)], "no event of the empty `sub`");
    client.close().await;
}

/// Curator's `TestCachedModeledFramework.testInitializedCachedModeledFramework`: a read before
/// the cache is started (or loaded) reads through.
#[tokio::test]
async fn read_before_start_reads_through() {
    let fw = shared_client().await;
    let base = unique_path("cached-through");
    let client = cached(&fw, &base);
    let value = model("a", "b", "c", 1);
    client.set(&value).await.unwrap();
    assert_eq!(client.read().await.unwrap(), value);
    assert!(client.current().unwrap().is_none(), "not cached yet");
    client.start().unwrap();
    client.wait_initialized().await.unwrap();
    assert_eq!(client.current().unwrap().expect("cached").model, value);
    // A miss reads through: a node the cache has not seen yet is read from ZooKeeper.
    let fresh = client.child("fresh").unwrap();
    let quick = model("q", "", "", 3);
    fresh.set(&quick).await.unwrap();
    assert_eq!(fresh.read().await.unwrap(), quick);
    assert!(matches!(client.child("none").unwrap().read().await, Err(CuratorError::NoNode { .. })));
    client.close().await;
    fw.close().await;
}

/// Issue 40 item 10: one child whose data is not a model (written by another client) hides no
/// good one: `current_children` gives the models of the others, and reports the bad one as a
/// `BadData` naming its path. Before, the whole list was that `BadData`.
#[tokio::test]
async fn a_bad_child_hides_no_good_one() {
    let fw = shared_client().await;
    let base = unique_path("cached-bad-child");
    let client = cached(&fw, &base);
    let mut events = client.events();
    client.start().unwrap();
    let (a, c) = (model("a", "", "", 1), model("c", "", "", 3));
    client.child("a").unwrap().set(&a).await.unwrap();
    let bad = format!("{}/b", client.full_path().unwrap());
    fw.create().for_path(&bad, b"not a model".to_vec()).await.unwrap();
    client.child("c").unwrap().set(&c).await.unwrap();
    let mut added = 0;
    while added < 2 {
        if let ModeledCacheEvent::Added(_) = next(&mut events).await {
            added += 1;
        }
    }
    let children = client.current_children().expect("a resolved path");
    let names: Vec<_> = children.models.iter().map(|n| n.model.first_name.as_str()).collect();
    assert_eq!(names, ["a", "c"], "the good children, in order");
    assert!(
        matches!(&children.unreadable[..], [CuratorError::BadData { path, .. }] if *path == bad),
        "the bad one, reported: {:?}",
        children.unreadable
    );
    // The list read still fails as the uncached client's does, naming the bad child.
    let listed = client.children_as_znodes().await;
    assert!(matches!(&listed, Err(CuratorError::BadData { path, .. }) if *path == bad), "{listed:?}");
    client.close().await;
    fw.close().await;
}

/// Typed events carry the old and the new model; a node whose data is not the model's gives no
/// event (and a read of it is `BadData`), and a node that goes back to a model is added again.
#[tokio::test]
async fn typed_events() {
    let fw = shared_client().await;
    let base = unique_path("cached-events");
    let client = cached(&fw, &base);
    client.set(&model("root", "", "", 0)).await.unwrap();
    let mut events = client.events();
    client.start().unwrap();
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Added(n) if n.model.first_name == "root"));
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Initialized));
    let x = client.child("x").unwrap();
    x.set(&model("x", "", "", 1)).await.unwrap();
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Added(n) if n.model.age == 1));
    x.update(|mut m| {
        m.age = 2;
        m
    })
    .await
    .unwrap();
    match next(&mut events).await {
        ModeledCacheEvent::Updated { old, new } => {
            assert_eq!((old.model.age, new.model.age), (1, 2));
            assert_eq!((old.stat.version, new.stat.version), (0, 1));
        }
        other => panic!("unexpected {other:?}"),
    }
    let path = x.full_path().unwrap();
    fw.set_data().for_path(&path, b"not a model".to_vec()).await.unwrap();
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Removed(n) if n.model.age == 2));
    let cached_read = x.read().await;
    assert!(matches!(&cached_read, Err(CuratorError::BadData { path: p, .. }) if *p == path), "{cached_read:?}");
    x.set_existing(&model("x", "", "", 3)).await.unwrap();
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Added(n) if n.model.age == 3));
    x.delete().await.unwrap();
    assert!(matches!(next(&mut events).await, ModeledCacheEvent::Removed(n) if n.model.age == 3));
    client.close().await;
    assert!(events.next().await.is_none(), "the stream ends with the cache");
    fw.close().await;
}
