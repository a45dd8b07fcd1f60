//! CuratorCache against a real ZooKeeper (the shared server; each test under its own path):
//! create / update / delete / re-create in order, listener builder and options, bad input for
//! every cache, data of every shape, panicking listeners, namespaces.

use std::sync::{Arc, Mutex};

use curator_cache::{
    CuratorCache, CuratorCacheEvent, CuratorCacheListenerBuilder, CuratorCacheOption, NodeCache, PathChildrenCache,
    StartMode, TreeCache,
};
use curator_core::CuratorError;
use curator_test::{eventually, TestingServer, Timing};
use tests::caches::{create, delete, exists, next, set, within};
use tests::{builder, client, unique_path};

fn server() -> String {
    TestingServer::shared().connect_string()
}

fn path_of(e: &CuratorCacheEvent) -> (&'static str, String) {
    match e {
        CuratorCacheEvent::Created(n) => ("created", n.path.clone()),
        CuratorCacheEvent::Changed { new, .. } => ("changed", new.path.clone()),
        CuratorCacheEvent::Deleted(n) => ("deleted", n.path.clone()),
        CuratorCacheEvent::Initialized => ("initialized", String::new()),
        CuratorCacheEvent::ConnectionStateChanged(_) => ("connection", String::new()),
        other => panic!("unexpected event {other:?}"),
    }
}

/// Skips connection events (the first Connected may or may not be seen, depending on timing).
async fn next_node_event(events: &mut curator_cache::EventStream<CuratorCacheEvent>) -> CuratorCacheEvent {
    loop {
        let e = next(events).await;
        if !matches!(e, CuratorCacheEvent::ConnectionStateChanged(_)) {
            return e;
        }
    }
}

#[tokio::test]
async fn curator_cache_reports_create_update_delete_recreate_in_order() {
    let fw = client(&server()).await;
    let base = unique_path("cc");
    create(&fw, &format!("{base}/pre/deep"), b"d").await;
    let cache = CuratorCache::build(&fw, &base, &[]).unwrap();
    let mut events = cache.events();
    cache.start().unwrap();

    // Nodes present before start: parents first, then initialized.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(path_of(&next_node_event(&mut events).await));
    }
    assert_eq!(
        seen,
        vec![
            ("created", base.clone()),
            ("created", format!("{base}/pre")),
            ("created", format!("{base}/pre/deep")),
            ("initialized", String::new())
        ]
    );
    assert_eq!(cache.size(), 3);
    assert_eq!(cache.get(&format!("{base}/pre/deep")).unwrap().data.as_deref(), Some(&b"d"[..]));

    let a = format!("{base}/a");
    create(&fw, &a, b"1").await;
    match next_node_event(&mut events).await {
        CuratorCacheEvent::Created(n) => {
            assert_eq!((n.path.as_str(), n.data.as_deref()), (a.as_str(), Some(&b"1"[..])))
        }
        e => panic!("expected created, got {e:?}"),
    }
    set(&fw, &a, b"2").await;
    match next_node_event(&mut events).await {
        CuratorCacheEvent::Changed { old, new } => {
            assert_eq!((old.data.as_deref(), new.data.as_deref()), (Some(&b"1"[..]), Some(&b"2"[..])));
            assert_eq!((old.stat.version, new.stat.version), (0, 1));
        }
        e => panic!("expected changed, got {e:?}"),
    }
    delete(&fw, &a).await;
    match next_node_event(&mut events).await {
        CuratorCacheEvent::Deleted(n) => {
            assert_eq!((n.path.as_str(), n.data.as_deref()), (a.as_str(), Some(&b"2"[..])))
        }
        e => panic!("expected deleted, got {e:?}"),
    }
    assert!(cache.get(&a).is_none());
    create(&fw, &a, b"3").await;
    match next_node_event(&mut events).await {
        CuratorCacheEvent::Created(n) => assert_eq!(n.data.as_deref(), Some(&b"3"[..])),
        e => panic!("expected created, got {e:?}"),
    }
    // Deep nodes are followed too.
    set(&fw, &format!("{base}/pre/deep"), b"e").await;
    assert_eq!(path_of(&next_node_event(&mut events).await), ("changed", format!("{base}/pre/deep")));
    assert_eq!(cache.entries().len(), cache.size());
    assert!(cache.stream().all(|n| n.path.starts_with(&base)));
    cache.close().await;
    assert_eq!(cache.size(), 0, "cleared on close by default");
    fw.close().await;
}

#[tokio::test]
async fn curator_cache_listener_builder_and_options() {
    let fw = client(&server()).await;
    let base = unique_path("ccopt");
    create(&fw, &format!("{base}/child"), b"c").await;
    set(&fw, &base, b"root").await;

    // Single node, no data, kept on close.
    let single = CuratorCache::build(
        &fw,
        &base,
        &[
            CuratorCacheOption::SingleNodeCache,
            CuratorCacheOption::DoNotCacheData,
            CuratorCacheOption::DoNotClearOnClose,
        ],
    )
    .unwrap();
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let l = log.clone();
    let l2 = log.clone();
    let l3 = log.clone();
    let l4 = log.clone();
    single.add_listener(
        CuratorCacheListenerBuilder::new()
            .for_creates(move |n| l.lock().unwrap().push(format!("create {}", n.path)))
            .for_changes(move |o, n| {
                l2.lock().unwrap().push(format!("change {} {}->{}", n.path, o.stat.version, n.stat.version))
            })
            .for_deletes(move |n| l3.lock().unwrap().push(format!("delete {}", n.path)))
            .for_initialized(move || l4.lock().unwrap().push("init".into()))
            .build(),
    );
    single.start().unwrap();
    within("initialized", single.wait_initialized()).await.unwrap();
    assert_eq!(single.size(), 1, "only the node itself");
    assert_eq!(single.get(&base).unwrap().data, None, "no data kept");
    set(&fw, &format!("{base}/child"), b"ignored").await;
    set(&fw, &base, b"root2").await;
    let expect = vec![format!("create {base}"), "init".to_string(), format!("change {base} 1->2")];
    assert!(
        eventually(Timing::new().deadline(), || async { *log.lock().unwrap() == expect }).await,
        "got {:?}",
        log.lock().unwrap()
    );
    single.close().await;
    assert_eq!(single.size(), 1, "DoNotClearOnClose keeps the nodes");

    // after_initialized skips the initial creates; for_all sees everything.
    let cache = CuratorCache::build(&fw, &base, &[]).unwrap();
    let after = Arc::new(Mutex::new(Vec::<String>::new()));
    let all = Arc::new(Mutex::new(0usize));
    let (a, b) = (after.clone(), all.clone());
    cache.add_listener(
        CuratorCacheListenerBuilder::new()
            .for_creates_and_changes(move |old, n| a.lock().unwrap().push(format!("{} {}", old.is_some(), n.path)))
            .for_all(move |_: &CuratorCacheEvent| *b.lock().unwrap() += 1)
            .after_initialized()
            .build(),
    );
    cache.start().unwrap();
    within("initialized", cache.wait_initialized()).await.unwrap();
    create(&fw, &format!("{base}/late"), b"").await;
    let want = vec![format!("false {base}/late")];
    assert!(eventually(Timing::new().deadline(), || async { *after.lock().unwrap() == want }).await);
    // after_initialized applies to the whole listener: for_all sees initialized and the late create.
    assert!(eventually(Timing::new().deadline(), || async { *all.lock().unwrap() >= 2 }).await);

    // A listener added after initialization hears "initialized" first, so after_initialized works.
    let late = Arc::new(Mutex::new(Vec::<String>::new()));
    let (l1, l2) = (late.clone(), late.clone());
    cache.add_listener(
        CuratorCacheListenerBuilder::new()
            .for_initialized(move || l1.lock().unwrap().push("init".into()))
            .for_creates(move |n| l2.lock().unwrap().push(n.name().to_string()))
            .after_initialized()
            .build(),
    );
    create(&fw, &format!("{base}/later"), b"").await;
    let want = vec!["init".to_string(), "later".to_string()];
    assert!(eventually(Timing::new().deadline(), || async { *late.lock().unwrap() == want }).await);
    cache.close().await;
    fw.close().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_typed_errors_and_never_panics() {
    let fw = client(&server()).await;
    for bad in ["", "no-slash", "/a//b", "/a/", "/a/./b", "/a/../b", "/a\u{0}b"] {
        assert!(matches!(CuratorCache::build(&fw, bad, &[]), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(PathChildrenCache::new(&fw, bad, true), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(NodeCache::new(&fw, bad), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(TreeCache::new(&fw, bad), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
    }

    // A cache on a path that does not exist yet: empty, then it appears.
    let base = unique_path("later");
    let root = format!("{base}/x/y");
    let cache = CuratorCache::build(&fw, &root, &[]).unwrap();
    let mut events = cache.events();
    cache.start().unwrap();
    assert!(cache.start().is_err(), "a second start is refused");
    within("initialized", cache.wait_initialized()).await.unwrap();
    assert_eq!(cache.size(), 0);
    create(&fw, &format!("{root}/z"), b"text").await;
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(path_of(&next_node_event(&mut events).await));
    }
    assert_eq!(got, vec![("initialized", String::new()), ("created", root.clone()), ("created", format!("{root}/z"))]);

    // Data that changes type: text, then binary, then empty, then large.
    let z = format!("{root}/z");
    let binary = vec![0u8, 0xff, 0xfe, 0x80, 0x00, 0x01];
    let large = vec![0xabu8; 600 * 1024];
    for data in [binary.clone(), Vec::new(), large.clone(), b"text again".to_vec()] {
        set(&fw, &z, &data).await;
        match next_node_event(&mut events).await {
            CuratorCacheEvent::Changed { new, .. } => assert_eq!(new.data.as_deref(), Some(&data[..])),
            e => panic!("expected changed, got {e:?}"),
        }
    }
    // A large node and a binary one are loaded by a new cache as well.
    set(&fw, &root, &large).await;
    create(&fw, &format!("{root}/bin"), &binary).await;
    let again = CuratorCache::build(&fw, &base, &[]).unwrap();
    again.start().unwrap();
    within("initialized", again.wait_initialized()).await.unwrap();
    assert_eq!(again.get(&root).unwrap().data.as_deref(), Some(&large[..]));
    assert_eq!(again.get(&format!("{root}/bin")).unwrap().data.as_deref(), Some(&binary[..]));

    // Deleting the root and its subtree, then re-creating it.
    fw.delete().deleting_children_if_needed().for_path(&root).await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { cache.size() == 0 }).await);
    create(&fw, &root, b"back").await;
    assert!(eventually(Timing::new().deadline(), || async { cache.size() == 1 }).await);

    // A listener that panics does not stop the others or the cache.
    let ok = Arc::new(Mutex::new(0usize));
    let o = ok.clone();
    cache.add_listener(|_: &CuratorCacheEvent| panic!("listener bug"));
    cache.add_listener(move |e: &CuratorCacheEvent| {
        if matches!(e, CuratorCacheEvent::Created(_)) {
            *o.lock().unwrap() += 1;
        }
    });
    create(&fw, &format!("{root}/after-panic"), b"").await;
    create(&fw, &format!("{root}/after-panic-2"), b"").await;
    assert!(eventually(Timing::new().deadline(), || async { *ok.lock().unwrap() == 2 }).await);
    assert_eq!(cache.size(), 3);

    // Operations on a cache that never started.
    let idle = PathChildrenCache::new(&fw, &base, true).unwrap();
    assert!(matches!(idle.rebuild().await, Err(CuratorError::NotStarted { what: "PathChildrenCache" })));
    idle.close().await;
    assert!(matches!(idle.start(StartMode::Normal), Err(CuratorError::AlreadyClosed { .. })), "no start after close");
    cache.close().await;
    again.close().await;
    fw.close().await;
}

#[tokio::test]
async fn caches_work_under_a_namespace() {
    let ns = unique_path("ns");
    let fw = builder(&server()).namespace(ns.trim_start_matches('/')).build().unwrap();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    let cache = CuratorCache::build(&fw, "/app", &[]).unwrap();
    let mut events = cache.events();
    cache.start().unwrap();
    within("initialized", cache.wait_initialized()).await.unwrap();
    create(&fw, "/app/x", b"1").await;
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(path_of(&next_node_event(&mut events).await));
    }
    assert_eq!(
        got,
        vec![("initialized", String::new()), ("created", "/app".to_string()), ("created", "/app/x".to_string())]
    );
    // The same node, seen without the namespace, is under it.
    let plain = client(&server()).await;
    assert_eq!(plain.get_data().for_path(&format!("{ns}/app/x")).await.unwrap(), b"1");
    cache.close().await;
    plain.close().await;
    fw.close().await;
}

/// `CuratorCacheOption::CreateParentContainers` makes the cache's path and its missing parents
/// as containers at start (Curator's CuratorCache has no such option; its TreeCache has
/// `setCreateParentNodes`, its PathChildrenCache always does it). Without the option the path
/// is left alone. Before, there was no such option.
#[tokio::test]
async fn create_parent_containers_option_makes_the_path() {
    let fw = client(&server()).await;
    let base = unique_path("ccparents");
    let path = format!("{base}/x/y");
    let plain = CuratorCache::build(&fw, &path, &[]).unwrap();
    plain.start().unwrap();
    within("initialized", plain.wait_initialized()).await.unwrap();
    assert!(!exists(&fw, &base).await);
    assert_eq!(plain.size(), 0);

    let cache = CuratorCache::build(&fw, &path, &[CuratorCacheOption::CreateParentContainers]).unwrap();
    let mut events = cache.events();
    cache.start().unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(path_of(&next_node_event(&mut events).await));
    }
    assert_eq!(got, vec![("created", path.clone()), ("initialized", String::new())]);
    for p in [&base, &format!("{base}/x"), &path] {
        assert!(exists(&fw, p).await, "{p} exists");
    }
    // The first cache sees it appear too.
    assert!(eventually(Timing::new().deadline(), || async { plain.size() == 1 }).await);
    plain.close().await;
    cache.close().await;
    fw.close().await;
}
