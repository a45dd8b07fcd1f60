//! The lifecycle of the four caches (issue 27): every lifecycle condition is a typed error
//! naming the cache's type, `close` is idempotent, and a cache whose path refuses it reading
//! says so at once (its `wait_initialized` returns the refusal) instead of only logging while
//! it retries. The refusal is tried under every combination of error and retry policy.

use std::time::{Duration, Instant};

use curator_cache::{CuratorCache, NodeCache, PathChildrenCache, StartMode, TreeCache};
use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CuratorError, CuratorFramework};
use curator_test::TestingServer;
use tests::caches::within;
use tests::policies::{framework, COMBINATIONS};
use tests::{client, init_tracing, unique_path};

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
    within("start", pcc.start(StartMode::BuildInitialCache)).await.unwrap();
    assert!(is_already_started(&pcc.start(StartMode::Normal).await, "PathChildrenCache"));
    pcc.close();
    pcc.close();
    assert!(is_already_closed(&pcc.start(StartMode::Normal).await, "PathChildrenCache"));
    assert!(is_already_closed(&pcc.rebuild().await, "PathChildrenCache"));

    let node = NodeCache::new(&fw, &base).unwrap();
    assert!(is_not_started(&node.rebuild().await, "NodeCache"));
    within("start", node.start(true)).await.unwrap();
    assert!(is_already_started(&node.start(false).await, "NodeCache"));
    node.close();
    node.close();
    assert!(is_already_closed(&node.start(false).await, "NodeCache"));

    let tree = TreeCache::new(&fw, &base).unwrap();
    tree.start().unwrap();
    assert!(is_already_started(&tree.start(), "TreeCache"));
    tree.close();
    tree.close();
    assert!(is_already_closed(&tree.start(), "TreeCache"));

    let cache = CuratorCache::builder(&fw, &base).build().unwrap();
    cache.start().unwrap();
    assert!(is_already_started(&cache.start(), "CuratorCache"));
    cache.close();
    cache.close();
    assert!(is_already_closed(&cache.start(), "CuratorCache"));

    let never = PathChildrenCache::new(&fw, &base, true).unwrap();
    never.close();
    assert!(is_already_closed(&never.start(StartMode::Normal).await, "PathChildrenCache"));
    fw.close().await;
}

/// A cache started on a path whose ACL refuses the client reading it (every permission but
/// READ): each cache's `wait_initialized` returns `NoAuth` within a second (it hung before,
/// while the engine retried and logged), under every error and retry policy. Curator's caches
/// only log such a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_read_is_reported_promptly() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server(), policy, retry).await;
        let path = unique_path("cache-noauth");
        let no_read = Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN;
        fw.create().with_acl(vec![Acl::new(no_read, AuthId::anyone())]).for_path(&path, Vec::new()).await.unwrap();

        let pcc = PathChildrenCache::new(&fw, &path, true).unwrap();
        let node = NodeCache::new(&fw, &path).unwrap();
        let tree = TreeCache::new(&fw, &path).unwrap();
        let cache = CuratorCache::builder(&fw, &path).build().unwrap();
        pcc.start(StartMode::Normal).await.unwrap();
        node.start(false).await.unwrap();
        tree.start().unwrap();
        cache.start().unwrap();
        let started = Instant::now();
        let waits = [
            ("PathChildrenCache", tokio::time::timeout(Duration::from_secs(5), pcc.wait_initialized()).await),
            ("NodeCache", tokio::time::timeout(Duration::from_secs(5), node.wait_initialized()).await),
            ("TreeCache", tokio::time::timeout(Duration::from_secs(5), tree.wait_initialized()).await),
            ("CuratorCache", tokio::time::timeout(Duration::from_secs(5), cache.wait_initialized()).await),
        ];
        for (what, waited) in waits {
            assert!(matches!(waited, Ok(Err(CuratorError::NoAuth { .. }))), "{policy:?}/{retry:?}: {what}: {waited:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{policy:?}/{retry:?}: took {:?}", started.elapsed());

        // BuildInitialCache reports it from start (as before).
        let blocking = PathChildrenCache::new(&fw, &path, true).unwrap();
        let r = within("start", blocking.start(StartMode::BuildInitialCache)).await;
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {r:?}");
        for c in [&pcc, &blocking] {
            c.close();
        }
        node.close();
        tree.close();
        cache.close();
        close(fw).await;
    }
}

async fn close(fw: CuratorFramework) {
    fw.close().await;
}
