//! The lifecycle of the four caches (issue 27): every lifecycle condition is a typed error
//! naming the cache's type, `close` is idempotent, and a cache whose path refuses it reading
//! says so at once (its `wait_initialized` returns the refusal) instead of only logging while
//! it retries. The refusal is tried under every combination of error and retry policy.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use curator_cache::{CuratorCache, EventStream, NodeCache, PathChildrenCache, StartMode, TreeCache};
use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::LifeState;
use curator_core::{CuratorError, CuratorFramework};
use curator_test::{eventually, TestingServer, Timing};
use tests::caches::within;
use tests::policies::{framework, COMBINATIONS};
use tests::{client, init_tracing, unique_path};
use tokio::time::timeout;

fn server() -> String {
    TestingServer::shared().connect_string()
}

fn is_not_started(r: &curator_core::Result<()>, what: &str) -> bool {
    matches!(r, Err(CuratorError::NotStarted { what: w }) if *w == what)
}

fn is_already_started(r: &curator_core::Result<()>, what: &str) -> bool {
    matches!(r, Err(CuratorError::AlreadyStarted { what: w }) if *w == what)
}

fn is_already_closed(r: &curator_core::Result<()>, what: &str) -> bool {
    matches!(r, Err(CuratorError::AlreadyClosed { what: w }) if *w == what)
}

/// Follows Curator's TestPathChildrenCache.testClosedState / TestNodeCache's start checks (a
/// start twice, a use before start or after close is refused): here each refusal is a typed
/// error that names the cache, and a close is idempotent, of a started cache and of one never
/// started (after which a start is `AlreadyClosed`).
#[tokio::test]
async fn lifecycle_errors_are_typed_and_name_the_cache() {
    init_tracing();
    let fw = client(&server()).await;
    let base = unique_path("cache-life");

    let pcc = PathChildrenCache::new(&fw, &base, true).unwrap();
    assert!(is_not_started(&pcc.rebuild().await, "PathChildrenCache"), "{:?}", pcc.rebuild().await);
    assert!(is_not_started(&pcc.rebuild_node(&format!("{base}/x")).await, "PathChildrenCache"));
    assert!(is_not_started(&pcc.wait_initialized().await, "PathChildrenCache"));
    pcc.start(StartMode::BuildInitialCache).unwrap();
    within("start", pcc.wait_initialized()).await.unwrap();
    assert!(is_already_started(&pcc.start(StartMode::Normal), "PathChildrenCache"));
    pcc.close().await;
    pcc.close().await;
    assert!(is_already_closed(&pcc.start(StartMode::Normal), "PathChildrenCache"));
    assert!(is_already_closed(&pcc.rebuild().await, "PathChildrenCache"));

    let node = NodeCache::new(&fw, &base).unwrap();
    assert!(is_not_started(&node.rebuild().await, "NodeCache"));
    node.start(true).unwrap();
    within("start", node.wait_initialized()).await.unwrap();
    assert!(is_already_started(&node.start(false), "NodeCache"));
    node.close().await;
    node.close().await;
    assert!(is_already_closed(&node.start(false), "NodeCache"));

    let tree = TreeCache::new(&fw, &base).unwrap();
    tree.start().unwrap();
    assert!(is_already_started(&tree.start(), "TreeCache"));
    tree.close().await;
    tree.close().await;
    assert!(is_already_closed(&tree.start(), "TreeCache"));

    let cache = CuratorCache::builder(&fw, &base).build().unwrap();
    cache.start().unwrap();
    assert!(is_already_started(&cache.start(), "CuratorCache"));
    cache.close().await;
    cache.close().await;
    assert!(is_already_closed(&cache.start(), "CuratorCache"));

    let never = PathChildrenCache::new(&fw, &base, true).unwrap();
    never.close().await;
    assert!(is_already_closed(&never.start(StartMode::Normal), "PathChildrenCache"));
    assert!(is_already_closed(&never.wait_initialized().await, "PathChildrenCache"));
    fw.close().await;
}

/// A cache started on a path whose ACL refuses the client reading it (every permission but
/// READ): `start` returns `Ok` (it is sync), and each cache's `wait_initialized` returns
/// `NoAuth` within a second (it hung before, while the engine retried and logged), and the cache
/// is closed (its state `Closed`, its event stream ended) within that second too, under every
/// error and retry policy, in every start mode. Curator's caches only log such a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_read_is_reported_promptly() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server(), policy, retry).await;
        let path = unique_path("cache-noauth");
        let no_read = Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN;
        fw.create().with_acl(vec![Acl::new(no_read, AuthId::anyone())]).for_path(&path, Vec::new()).await.unwrap();

        let pcc = PathChildrenCache::new(&fw, &path, true).unwrap();
        let building = PathChildrenCache::new(&fw, &path, true).unwrap();
        let node = NodeCache::new(&fw, &path).unwrap();
        let building_node = NodeCache::new(&fw, &path).unwrap();
        let tree = TreeCache::new(&fw, &path).unwrap();
        let cache = CuratorCache::builder(&fw, &path).build().unwrap();
        let mut streams = vec![
            ("PathChildrenCache", discard(pcc.events())),
            ("PathChildrenCache (BuildInitialCache)", discard(building.events())),
            ("NodeCache", discard(node.events())),
            ("NodeCache (build_initial)", discard(building_node.events())),
            ("TreeCache", discard(tree.events())),
            ("CuratorCache", discard(cache.events())),
        ];
        let started = Instant::now();
        pcc.start(StartMode::Normal).unwrap();
        building.start(StartMode::BuildInitialCache).unwrap();
        node.start(false).unwrap();
        building_node.start(true).unwrap();
        tree.start().unwrap();
        cache.start().unwrap();
        let bound = Timing::new().deadline(); // a hang guard: the time bound is the one below
        let waits = [
            ("PathChildrenCache", timeout(bound, pcc.wait_initialized()).await, closed(|| pcc.state()).await),
            (
                "PathChildrenCache (BuildInitialCache)",
                timeout(bound, building.wait_initialized()).await,
                closed(|| building.state()).await,
            ),
            ("NodeCache", timeout(bound, node.wait_initialized()).await, closed(|| node.state()).await),
            (
                "NodeCache (build_initial)",
                timeout(bound, building_node.wait_initialized()).await,
                closed(|| building_node.state()).await,
            ),
            ("TreeCache", timeout(bound, tree.wait_initialized()).await, closed(|| tree.state()).await),
            ("CuratorCache", timeout(bound, cache.wait_initialized()).await, closed(|| cache.state()).await),
        ];
        for (what, waited, state) in waits {
            assert!(matches!(waited, Ok(Err(CuratorError::NoAuth { .. }))), "{policy:?}/{retry:?}: {what}: {waited:?}");
            assert_eq!(state, LifeState::Closed, "{policy:?}/{retry:?}: {what}: a refused cache is closed");
        }
        for (what, stream) in streams.drain(..) {
            within(what, stream).await;
        }
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());

        for c in [&pcc, &building] {
            c.close().await;
        }
        for c in [&node, &building_node] {
            c.close().await;
        }
        tree.close().await;
        cache.close().await;
        close(fw).await;
    }
}

/// The state `state` gives once it is `Closed`, or after a second (the refusal closes the cache
/// right after reporting it).
async fn closed(state: impl Fn() -> LifeState) -> LifeState {
    eventually(Duration::from_secs(1), || std::future::ready(state() == LifeState::Closed)).await;
    state()
}

/// The end of `stream`: every event read and dropped.
fn discard<E: Send + 'static>(mut stream: EventStream<E>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move { while stream.next().await.is_some() {} })
}

async fn close(fw: CuratorFramework) {
    fw.close().await;
}
