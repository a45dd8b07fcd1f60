//! Cache events against a real ZooKeeper (the shared server; each test under its own path):
//! create / update / delete / re-create in order for each cache, start modes, membership,
//! bad input, slow listeners.

mod cache_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_support::*;
use curator_cache::{
    CuratorCache, CuratorCacheEvent, CuratorCacheListenerBuilder, CuratorCacheOption, NodeCache, NodeCacheEvent,
    PathChildrenCache, PathChildrenCacheEvent, StartMode, TreeCache, TreeCacheEvent, TreeCacheSelector,
};
use curator_core::CuratorError;
use curator_test::{eventually, TestingServer, Timing};

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
    let fw = connected(&server()).await;
    let base = unique("cc");
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
    cache.close();
    assert_eq!(cache.size(), 0, "cleared on close by default");
    fw.close().await;
}

#[tokio::test]
async fn curator_cache_listener_builder_and_options() {
    let fw = connected(&server()).await;
    let base = unique("ccopt");
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
    single.close();
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
    cache.close();
    fw.close().await;
}

async fn children_events_until(
    events: &mut curator_cache::EventStream<PathChildrenCacheEvent>,
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

fn describe(e: &PathChildrenCacheEvent) -> String {
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

#[tokio::test]
async fn path_children_cache_start_modes_and_child_events() {
    let fw = connected(&server()).await;
    for mode in [StartMode::Normal, StartMode::BuildInitialCache, StartMode::PostInitializedEvent] {
        let base = unique("pcc");
        create(&fw, &format!("{base}/c1"), b"1").await;
        create(&fw, &format!("{base}/c2/grandchild"), b"g").await;
        let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
        let mut events = cache.events();
        within("start", cache.start(mode)).await.unwrap();
        match mode {
            StartMode::Normal => {
                let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
                assert_eq!(got, vec!["added c1", "added c2"]);
            }
            StartMode::BuildInitialCache => {
                // Loaded before start returned, without events.
                let names: Vec<_> = cache.current_data().iter().map(|n| n.name().to_string()).collect();
                assert_eq!(names, vec!["c1", "c2"]);
            }
            StartMode::PostInitializedEvent => {
                let got: Vec<_> = children_events_until(&mut events, 3).await.iter().map(describe).collect();
                assert_eq!(got, vec!["added c1", "added c2", r#"initialized ["c1", "c2"]"#]);
            }
        }
        // Changes below a child are not the cache's business; changes of children are.
        set(&fw, &format!("{base}/c2/grandchild"), b"h").await;
        // Each step waits for its event, so that no read can see the next step's change.
        let c3 = format!("{base}/c3");
        let mut got = Vec::new();
        create(&fw, &c3, b"x").await;
        got.extend(children_events_until(&mut events, 1).await.iter().map(describe));
        set(&fw, &c3, b"y").await;
        got.extend(children_events_until(&mut events, 1).await.iter().map(describe));
        delete(&fw, &c3).await;
        got.extend(children_events_until(&mut events, 1).await.iter().map(describe));
        create(&fw, &c3, b"z").await;
        got.extend(children_events_until(&mut events, 1).await.iter().map(describe));
        assert_eq!(got, vec!["added c3", "updated c3 y", "removed c3", "added c3"], "mode {mode:?}");
        assert_eq!(cache.current_data_for(&c3).unwrap().data.as_deref(), Some(&b"z"[..]));
        assert!(cache.current_data_for(&format!("{base}/c2/grandchild")).is_none());
        assert_eq!(cache.current_data().len(), 3);
        cache.close();
    }
    fw.close().await;
}

#[tokio::test]
async fn path_children_cache_rebuild_is_silent_and_clear_and_refresh_re_adds() {
    let fw = connected(&server()).await;
    let base = unique("pccrb");
    create(&fw, &format!("{base}/a"), b"1").await;
    create(&fw, &format!("{base}/b"), b"2").await;
    let cache = PathChildrenCache::builder(&fw, &base).cache_data(false).build().unwrap();
    let mut events = cache.events();
    within("start", cache.start(StartMode::BuildInitialCache)).await.unwrap();
    assert!(cache.current_data().iter().all(|n| n.data.is_none()), "no data cached");

    within("rebuild", cache.rebuild()).await.unwrap();
    assert_eq!(cache.current_data().len(), 2);
    cache.clear();
    assert!(cache.current_data().is_empty());
    within("clear_and_refresh", cache.clear_and_refresh()).await.unwrap();
    assert_eq!(cache.current_data().len(), 2);
    // Rebuild said nothing; clear_and_refresh re-added both.
    let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
    assert_eq!(got, vec!["added a", "added b"]);
    // and nothing else is pending before the next change.
    create(&fw, &format!("{base}/marker"), b"").await;
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["added marker"]);
    cache.close();
    assert!(cache.rebuild().await.is_err(), "a closed cache does not rebuild");
    fw.close().await;
}

#[tokio::test]
async fn node_cache_follows_a_node_that_comes_and_goes() {
    let fw = connected(&server()).await;
    let base = unique("nc");
    let node = format!("{base}/config");
    let cache = NodeCache::new(&fw, &node).unwrap();
    let mut events = cache.events();
    within("start", cache.start(true)).await.unwrap();
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
    second.start(false).await.unwrap();
    match next(&mut events).await {
        NodeCacheEvent::NodeChanged(Some(n)) => assert_eq!(n.data.as_deref(), Some(&b"v3"[..])),
        e => panic!("expected the initial state, got {e:?}"),
    }
    cache.close();
    second.close();
    fw.close().await;
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
    let fw = connected(&server()).await;
    let base = unique("tc");
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

#[tokio::test]
async fn membership_of_50_ephemeral_members_joining_and_leaving() {
    let connect = server();
    let fw = connected(&connect).await;
    let base = unique("members");
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let view = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let v = view.clone();
    cache.add_listener(move |e: &PathChildrenCacheEvent| match e {
        PathChildrenCacheEvent::ChildAdded(n) => {
            v.lock().unwrap().insert(n.name().to_string());
        }
        PathChildrenCacheEvent::ChildRemoved(n) => {
            v.lock().unwrap().remove(n.name());
        }
        _ => {}
    });
    within("start", cache.start(StartMode::PostInitializedEvent)).await.unwrap();

    // 50 members, each its own session, join concurrently.
    let mut members = Vec::new();
    for i in 0..50 {
        members.push(tokio::spawn({
            let (connect, base) = (connect.clone(), base.clone());
            async move {
                let m = connected(&connect).await;
                create_ephemeral(&m, &format!("{base}/member-{i:02}"), format!("10.0.0.{i}").as_bytes()).await;
                m
            }
        }));
    }
    let mut sessions = Vec::new();
    for m in members {
        sessions.push(m.await.unwrap());
    }
    let raw = raw_client(&connect).await;
    let matches = || async {
        let server: std::collections::BTreeSet<String> = raw.list_children(&base).await.unwrap().into_iter().collect();
        let cached: std::collections::BTreeSet<String> =
            cache.current_data().iter().map(|n| n.name().to_string()).collect();
        server == cached && *view.lock().unwrap() == server
    };
    assert!(eventually(Timing::new().deadline(), matches).await, "all 50 joined");
    assert_eq!(cache.current_data().len(), 50);
    assert_eq!(cache.current_data_for(&format!("{base}/member-07")).unwrap().data.as_deref(), Some(&b"10.0.0.7"[..]));

    // Half leave by closing their session (the server deletes their nodes), some re-join.
    let mut leaving = Vec::new();
    for (i, m) in sessions.iter().enumerate() {
        if i % 2 == 0 {
            leaving.push(m.clone());
        }
    }
    futures::future::join_all(leaving.iter().map(|m| m.close())).await;
    for i in [0, 10, 20] {
        create_ephemeral(&sessions[i + 1], &format!("{base}/rejoined-{i:02}"), b"back").await;
    }
    assert!(eventually(Timing::new().deadline(), matches).await, "the view follows leaves and joins");
    assert_eq!(cache.current_data().len(), 28);
    for m in &sessions {
        m.close().await;
    }
    assert!(eventually(Timing::new().deadline(), matches).await, "everyone left");
    assert!(cache.current_data().is_empty());
    cache.close();
    fw.close().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_typed_errors_and_never_panics() {
    let fw = connected(&server()).await;
    for bad in ["", "no-slash", "/a//b", "/a/", "/a/./b", "/a/../b", "/a\u{0}b"] {
        assert!(matches!(CuratorCache::build(&fw, bad, &[]), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(PathChildrenCache::new(&fw, bad, true), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(NodeCache::new(&fw, bad), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(TreeCache::new(&fw, bad), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
    }

    // A cache on a path that does not exist yet: empty, then it appears.
    let base = unique("later");
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
    assert!(matches!(idle.rebuild().await, Err(CuratorError::IllegalState(_))));
    idle.close();
    assert!(idle.start(StartMode::Normal).await.is_err(), "no start after close");
    cache.close();
    again.close();
    fw.close().await;
}

#[tokio::test]
async fn a_slow_listener_neither_blocks_others_nor_loses_events() {
    let fw = connected(&server()).await;
    let base = unique("slow");
    create(&fw, &base, b"").await;
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let slow = Arc::new(Mutex::new(Vec::<String>::new()));
    let fast = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s, f) = (slow.clone(), fast.clone());
    cache.add_listener(move |e: &PathChildrenCacheEvent| {
        if let PathChildrenCacheEvent::ChildAdded(n) = e {
            // Blocks its thread, as a careless user would.
            std::thread::sleep(Duration::from_millis(50));
            s.lock().unwrap().push(n.name().to_string());
        }
    });
    cache.add_listener(move |e: &PathChildrenCacheEvent| {
        if let PathChildrenCacheEvent::ChildAdded(n) = e {
            f.lock().unwrap().push(n.name().to_string());
        }
    });
    within("start", cache.start(StartMode::BuildInitialCache)).await.unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("n-{i:03}")).collect();
    for n in &names {
        create(&fw, &format!("{base}/{n}"), b"").await;
    }
    assert!(eventually(Timing::new().deadline(), || async { *fast.lock().unwrap() == names }).await);
    assert!(slow.lock().unwrap().len() < names.len(), "the slow listener is still behind when the fast one is done");
    assert!(
        eventually(Timing::new().deadline(), || async { *slow.lock().unwrap() == names }).await,
        "and loses nothing"
    );
    cache.close();
    fw.close().await;
}

#[tokio::test]
async fn caches_work_under_a_namespace() {
    let ns = unique("ns");
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
    let plain = connected(&server()).await;
    assert_eq!(plain.get_data().for_path(&format!("{ns}/app/x")).await.unwrap(), b"1");
    cache.close();
    plain.close().await;
    fw.close().await;
}

/// ZOOKEEPER-4466 (servers before 3.9): one connection holds one watch mode per path, so a
/// one-shot data watch that another recipe on the same session sets on a cache's root replaces
/// the cache's persistent watch and is consumed by the next change of the root. The caches
/// register again after every change of their root: they keep following, and the one-shot
/// watches still fire.
#[tokio::test]
async fn one_shot_data_watches_on_the_same_path_and_session_do_not_silence_caches() {
    let fw = connected(&server()).await;
    let base = unique("oneshot");
    create(&fw, &base, b"").await;
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let node = NodeCache::new(&fw, &base).unwrap();
    let mut events = cache.events();
    let mut node_events = node.events();
    within("start", cache.start(StartMode::BuildInitialCache)).await.unwrap();
    within("start", node.start(true)).await.unwrap();
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
    cache.close();
    node.close();
    fw.close().await;
}
