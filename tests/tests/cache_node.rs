//! NodeCache against a real ZooKeeper (the shared server): a node that comes and goes, and
//! one-shot watches on the same path and session that must not silence it (nor a
//! PathChildrenCache on the same path).

use std::time::Duration;

use curator_cache::{NodeCache, NodeCacheEvent, PathChildrenCache, StartMode};
use curator_core::LifeState;
use curator_test::{eventually, TestingServer, Timing};
use tests::caches::{children_events_until, create, delete, describe, next, set, within};
use tests::{client, unique_path};

fn server() -> String {
    TestingServer::shared().connect_string()
}

#[tokio::test]
async fn node_cache_follows_a_node_that_comes_and_goes() {
    let fw = client(&server()).await;
    let base = unique_path("nc");
    let node = format!("{base}/config");
    let cache = NodeCache::new(&fw, &node).unwrap();
    let mut events = cache.events();
    cache.start(true).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
    assert!(cache.current_data().is_none(), "does not exist yet");

    // Each step waits for its event; the child's creation and deletion must cause none.
    let mut changes = Vec::new();
    async fn changed(events: &mut curator_cache::EventStream<NodeCacheEvent>) -> Option<String> {
        loop {
            if let NodeCacheEvent::NodeChanged(n) = next(events).await {
                return n.map(|n| String::from_utf8(n.data.clone().unwrap_or_default()).unwrap());
            }
        }
    }
    create(&fw, &node, b"v1").await;
    changes.push(changed(&mut events).await);
    create(&fw, &format!("{node}/child"), b"not mine").await;
    set(&fw, &node, b"v2").await;
    changes.push(changed(&mut events).await);
    delete(&fw, &format!("{node}/child")).await;
    delete(&fw, &node).await;
    changes.push(changed(&mut events).await);
    create(&fw, &node, b"v3").await;
    changes.push(changed(&mut events).await);
    assert_eq!(changes, vec![Some("v1".into()), Some("v2".into()), None, Some("v3".into())]);
    assert_eq!(cache.current_data().unwrap().data.as_deref(), Some(&b"v3"[..]));

    // Without build_initial, the first read is reported.
    let second = NodeCache::new(&fw, &node).unwrap();
    let mut events = second.events();
    second.start(false).unwrap();
    match next(&mut events).await {
        NodeCacheEvent::NodeChanged(Some(n)) => assert_eq!(n.data.as_deref(), Some(&b"v3"[..])),
        e => panic!("expected the initial state, got {e:?}"),
    }
    cache.close().await;
    second.close().await;
    fw.close().await;
}

/// ZOOKEEPER-4466 (servers before 3.9): one connection holds one watch mode per path, so a
/// one-shot data watch that another recipe on the same session sets on a cache's root replaces
/// the cache's persistent watch and is consumed by the next change of the root. The caches
/// register again after every change of their root: they keep following, and the one-shot
/// watches still fire.
#[tokio::test]
async fn one_shot_data_watches_on_the_same_path_and_session_do_not_silence_caches() {
    let fw = client(&server()).await;
    let base = unique_path("oneshot");
    create(&fw, &base, b"").await;
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let node = NodeCache::new(&fw, &base).unwrap();
    let mut events = cache.events();
    let mut node_events = node.events();
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
    node.start(true).unwrap();
    within("start", node.wait_initialized()).await.unwrap();
    for round in 0..3 {
        let (_, _, data_watch) = fw.get_data().for_path_and_watch(&base).await.unwrap();
        let (_, exists_watch) = fw.check_exists().for_path_and_watch(&base).await.unwrap();
        let value = format!("v{round}");
        set(&fw, &base, value.as_bytes()).await;
        within("one-shot watches fire", async {
            data_watch.changed().await;
            exists_watch.changed().await;
        })
        .await;
        loop {
            if let NodeCacheEvent::NodeChanged(Some(n)) = next(&mut node_events).await {
                assert_eq!(n.data.as_deref(), Some(value.as_bytes()));
                break;
            }
        }
        for i in 0..2 {
            create(&fw, &format!("{base}/r{round}-{i}"), b"").await;
        }
        let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
        assert_eq!(got, vec![format!("added r{round}-0"), format!("added r{round}-1")]);
    }
    set(&fw, &base, b"last").await;
    assert!(
        eventually(Timing::new().deadline(), || async {
            node.current_data().is_some_and(|n| n.data.as_deref() == Some(&b"last"[..]))
        })
        .await
    );
    cache.close().await;
    node.close().await;
    fw.close().await;
}

/// Follows Curator's `TestNodeCache.testKilledSession`: after the framework's session is lost
/// the cache still holds the node as it was, and follows its changes on the new session.
#[tokio::test]
async fn node_cache_keeps_following_after_a_lost_session() {
    let connect = server();
    let fw = client(&connect).await;
    let base = unique_path("nckilled");
    let node = format!("{base}/node");
    create(&fw, &node, b"start").await;
    let cache = NodeCache::new(&fw, &node).unwrap();
    let mut events = cache.events();
    cache.start(true).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();

    let info = fw.session().await.unwrap().client().session().clone();
    curator_test::expire_session(&connect, &info).await.unwrap();
    within("lost, then reconnected", async {
        loop {
            if matches!(next(&mut events).await, NodeCacheEvent::ConnectionLost) {
                break;
            }
        }
        loop {
            if matches!(next(&mut events).await, NodeCacheEvent::ConnectionReconnected) {
                break;
            }
        }
    })
    .await;
    assert_eq!(cache.current_data().unwrap().data.as_deref(), Some(&b"start"[..]));
    set(&fw, &node, b"new data").await;
    loop {
        if let NodeCacheEvent::NodeChanged(n) = next(&mut events).await {
            assert_eq!(n.unwrap().data.as_deref(), Some(&b"new data"[..]));
            break;
        }
    }
    cache.close().await;
    fw.close().await;
}

/// Whether `state` says `Closed` within a second (a refusal closes the cache right after
/// reporting it).
async fn closed(state: impl Fn() -> LifeState) -> bool {
    eventually(Duration::from_secs(1), || std::future::ready(state() == LifeState::Closed)).await
}

/// A cache started before its framework says so with the typed `NotStarted` ("the framework is
/// not started"). Before, the first load failed with `ConnectionLoss` ("connection lost during
/// operation on \"\""). A cache started to build its initial state first (`start(true)`,
/// `BuildInitialCache`, whose start returned that error before issue 27) reports it from
/// `wait_initialized` and is closed; one started without keeps trying: once the framework
/// starts, it loads.
#[tokio::test]
async fn a_cache_started_before_its_framework_says_the_framework_is_not_started() {
    let server = TestingServer::shared();
    let fw = tests::builder(&server.connect_string()).build().unwrap();
    let path = unique_path("not-started");
    let node = NodeCache::new(&fw, &path).unwrap();
    node.start(true).unwrap();
    let r = within("node cache load", node.wait_initialized()).await;
    assert!(matches!(r, Err(curator_core::CuratorError::NotStarted { what: "the framework" })), "{r:?}");
    assert!(r.unwrap_err().to_string().contains("not started"));
    assert!(closed(|| node.state()).await, "a refused first load closes the cache");
    let children = PathChildrenCache::new(&fw, &path, true).unwrap();
    children.start(StartMode::BuildInitialCache).unwrap();
    let r = within("children cache load", children.wait_initialized()).await;
    assert!(matches!(r, Err(curator_core::CuratorError::NotStarted { what: "the framework" })), "{r:?}");
    assert!(closed(|| children.state()).await, "a refused first load closes the cache");

    let patient_node = NodeCache::new(&fw, &path).unwrap();
    patient_node.start(false).unwrap();
    let patient_children = PathChildrenCache::new(&fw, &path, true).unwrap();
    patient_children.start(StartMode::Normal).unwrap();
    fw.start().unwrap();
    within("node cache load", patient_node.wait_initialized()).await.unwrap();
    within("children cache load", patient_children.wait_initialized()).await.unwrap();
    for cache in [&node, &patient_node] {
        cache.close().await;
    }
    for cache in [&children, &patient_children] {
        cache.close().await;
    }
    fw.close().await;
}
