//! PathChildrenCache against a real ZooKeeper: start modes and child events, rebuild and
//! refresh, membership of 50 sessions, slow listeners (shared server); the cost of a change
//! and of the initial load in server requests (a server of its own).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_cache::{NodeCache, PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::CuratorError;
use curator_test::{eventually, TestingServer, Timing};
use tests::caches::{children_events_until, create, create_ephemeral, delete, describe, exists, set, within};
use tests::zk::raw_client;
use tests::{client, packets_received, unique_path, Fixture};

fn server() -> String {
    TestingServer::shared().connect_string()
}

#[tokio::test]
async fn path_children_cache_start_modes_and_child_events() {
    let fw = client(&server()).await;
    for mode in [StartMode::Normal, StartMode::BuildInitialCache, StartMode::PostInitializedEvent] {
        let base = unique_path("pcc");
        create(&fw, &format!("{base}/c1"), b"1").await;
        create(&fw, &format!("{base}/c2/grandchild"), b"g").await;
        let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
        let mut events = cache.events();
        cache.start(mode).unwrap();
        match mode {
            StartMode::Normal => {
                let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
                assert_eq!(got, vec!["added c1", "added c2"]);
            }
            StartMode::BuildInitialCache => {
                // Loaded once wait_initialized returns, without events.
                within("load", cache.wait_initialized()).await.unwrap();
                let names: Vec<_> = cache.current_data().iter().map(|n| n.name().to_string()).collect();
                assert_eq!(names, vec!["c1", "c2"]);
            }
            StartMode::PostInitializedEvent => {
                let got: Vec<_> = children_events_until(&mut events, 3).await.iter().map(describe).collect();
                assert_eq!(got, vec!["added c1", "added c2", r#"initialized ["c1", "c2"]"#]);
            }
            other => panic!("unexpected start mode {other:?}"),
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
        cache.close().await;
    }
    fw.close().await;
}

/// `clear_data_bytes` (Curator's `PathChildrenCache.clearDataBytes`, which Curator's
/// `ServiceCacheImpl` calls once it has parsed an instance): the child stays with its stat and
/// loses its data, only at the version given; a change brings the new data back.
#[tokio::test]
async fn path_children_cache_clear_data_bytes_at_a_version() {
    let fw = client(&server()).await;
    let base = unique_path("pccdb");
    create(&fw, &format!("{base}/a"), b"1").await;
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
    let a = format!("{base}/a");
    assert!(!cache.clear_data_bytes(&a, Some(7)), "another version keeps its data");
    assert_eq!(cache.current_data_for(&a).and_then(|n| n.data.clone()), Some(b"1".to_vec()));
    assert!(cache.clear_data_bytes(&a, Some(0)));
    let node = cache.current_data_for(&a).expect("the child stays");
    assert_eq!((node.data.clone(), node.stat.version), (None, 0));
    assert!(!cache.clear_data_bytes(&a, None), "nothing left to drop");
    assert!(!cache.clear_data_bytes(&format!("{base}/missing"), None));
    assert!(!cache.clear_data_bytes(&base, None), "the root is not a child");
    set(&fw, &a, b"2").await;
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["updated a 2"]);
    assert_eq!(cache.current_data_for(&a).and_then(|n| n.data.clone()), Some(b"2".to_vec()));
    assert!(cache.clear_data_bytes(&a, None));
    assert!(cache.current_data_for(&a).is_some_and(|n| n.data.is_none()));
    cache.close().await;
    fw.close().await;
}

#[tokio::test]
async fn path_children_cache_rebuild_is_silent_and_clear_and_refresh_re_adds() {
    let fw = client(&server()).await;
    let base = unique_path("pccrb");
    create(&fw, &format!("{base}/a"), b"1").await;
    create(&fw, &format!("{base}/b"), b"2").await;
    let cache = PathChildrenCache::builder(&fw, &base).cache_data(false).build().unwrap();
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
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
    cache.close().await;
    assert!(cache.rebuild().await.is_err(), "a closed cache does not rebuild");
    fw.close().await;
}

#[tokio::test]
async fn membership_of_50_ephemeral_members_joining_and_leaving() {
    let connect = server();
    let fw = client(&connect).await;
    let base = unique_path("members");
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
    cache.start(StartMode::PostInitializedEvent).unwrap();

    // 50 members, each its own session, join concurrently.
    let mut members = Vec::new();
    for i in 0..50 {
        members.push(tokio::spawn({
            let (connect, base) = (connect.clone(), base.clone());
            async move {
                let m = client(&connect).await;
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
    cache.close().await;
    fw.close().await;
}

#[tokio::test]
async fn a_slow_listener_neither_blocks_others_nor_loses_events() {
    let fw = client(&server()).await;
    let base = unique_path("slow");
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
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
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
    cache.close().await;
    fw.close().await;
}

/// One request per change, independent of the number of children; a load of many children in
/// a handful of requests. Prints what it measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_per_change_and_a_pipelined_initial_load() {
    let fx = Fixture::own().await;
    let fw = &fx.fw;
    let writer = fx.client().await;
    let base = "/load";
    const CHILDREN: usize = 2000;
    const ADDS: usize = 200;
    create(&writer, base, b"").await;
    let data = vec![7u8; 100];
    let session = writer.session().await.unwrap();
    let client = session.client().clone();
    let acl = curator_core::zk::CreateMode::Persistent.with_acls(curator_core::zk::Acls::anyone_all());
    for chunk in (0..CHILDREN).collect::<Vec<_>>().chunks(500) {
        let paths: Vec<String> = chunk.iter().map(|i| format!("{base}/c-{i:05}")).collect();
        let creates: Vec<_> = paths.iter().map(|p| client.create(p, &data, &acl)).collect();
        for c in futures::future::join_all(creates).await {
            c.unwrap();
        }
    }

    let before = packets_received(&fx.connect_string()).await;
    let started = Instant::now();
    let cache = PathChildrenCache::new(fw, base, true).unwrap();
    let latencies = Arc::new(Mutex::new(Vec::<(String, Instant)>::new()));
    let l = latencies.clone();
    cache.add_listener(move |e: &PathChildrenCacheEvent| {
        if let PathChildrenCacheEvent::ChildAdded(n) = e {
            l.lock().unwrap().push((n.name().to_string(), Instant::now()));
        }
    });
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
    let load = started.elapsed();
    let load_requests = packets_received(&fx.connect_string()).await - before - 1;
    assert_eq!(cache.current_data().len(), CHILDREN);
    eprintln!("initial load of {CHILDREN} children (100 B): {load:?}, {load_requests} requests");
    assert!(load_requests <= 12, "the load took {load_requests} requests");

    let before = packets_received(&fx.connect_string()).await;
    let mut sent = Vec::new();
    for i in 0..ADDS {
        let p = format!("{base}/new-{i:04}");
        sent.push((format!("new-{i:04}"), Instant::now()));
        client.create(&p, &data, &acl).await.unwrap();
    }
    assert!(eventually(Timing::new().deadline(), || async { latencies.lock().unwrap().len() >= ADDS }).await);
    let after = packets_received(&fx.connect_string()).await;
    // The writer's creates and the two mntr connections are not the cache's; pings may add a few.
    let cache_requests = (after - before).saturating_sub(ADDS as u64 + 1);
    let per_change = cache_requests as f64 / ADDS as f64;
    let got = latencies.lock().unwrap().clone();
    let mut lat: Vec<Duration> = sent
        .iter()
        .map(|(name, at)| got.iter().find(|(n, _)| n == name).map(|(_, t)| t.duration_since(*at)).unwrap())
        .collect();
    lat.sort();
    eprintln!(
        "{ADDS} adds with {CHILDREN} children: {per_change:.2} requests per change, add-to-callback p50 {:?} p99 {:?}",
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100]
    );
    assert!(per_change <= 1.1, "{per_change} requests per change");
    // In arrival order.
    let names: Vec<_> = got.iter().map(|(n, _)| n.clone()).collect();
    let wanted: Vec<_> = sent.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, wanted);
    cache.close().await;

    // A NodeCache: on servers before 3.9 each change of its node also registers the watch again
    // (ZOOKEEPER-4466), so two requests: AddWatch and a one-operation multi-read.
    let node = NodeCache::new(fw, base).unwrap();
    node.start(true).unwrap();
    within("start", node.wait_initialized()).await.unwrap();
    let before = packets_received(&fx.connect_string()).await;
    const SETS: usize = 50;
    for i in 0..SETS {
        client.set_data(base, format!("{i}").as_bytes(), None).await.unwrap();
        let want = format!("{i}").into_bytes();
        assert!(
            eventually(Timing::new().deadline(), || async {
                node.current_data().is_some_and(|n| n.data.as_deref() == Some(&want[..]))
            })
            .await
        );
    }
    let after = packets_received(&fx.connect_string()).await;
    let per_change = (after - before).saturating_sub(SETS as u64 + 1) as f64 / SETS as f64;
    eprintln!("NodeCache: {per_change:.2} requests per change");
    assert!(per_change <= 2.2, "{per_change} requests per change");
    node.close().await;
    writer.close().await;
    fw.close().await;
}

/// Follows Curator's `TestPathChildrenCache.testEnsurePath`: a started cache creates its path,
/// and the missing parents, as containers (Curator's `EnsureContainers`), so that children can
/// be created at once; `create_parent_containers(false)` leaves the path alone. Before, the
/// cache never created its path.
#[tokio::test]
async fn the_cache_creates_its_path_as_containers() {
    let fw = client(&server()).await;
    let base = unique_path("pccensure");
    let path = format!("{base}/one/two/three");
    let cache = PathChildrenCache::new(&fw, &path, false).unwrap();
    cache.start(StartMode::Normal).unwrap();
    within("initialized", cache.wait_initialized()).await.unwrap();
    // (ZooKeeper 3.8 shows no container marker in a Stat: this checks that the nodes are
    // there; they are made by core's create with parent containers, tested in framework_ops.)
    for p in [&base, &format!("{base}/one"), &format!("{base}/one/two"), &path] {
        assert!(exists(&fw, p).await, "{p} exists");
    }
    fw.create().for_path(&format!("{path}/four"), Vec::new()).await.expect("the path exists");
    assert!(eventually(Timing::new().deadline(), || async { cache.current_data().len() == 1 }).await);
    cache.close().await;

    let elsewhere = format!("{base}/not/created");
    let cache = PathChildrenCache::builder(&fw, &elsewhere).create_parent_containers(false).build().unwrap();
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();
    assert!(!exists(&fw, &format!("{base}/not")).await, "told not to create it");
    cache.close().await;
    fw.close().await;
}

/// Follows Curator's `TestPathChildrenCache.testParentContainerMissing`: the cache's path (a
/// container it made) is deleted with its children, then made again by someone else; the cache
/// reports the removals and then the new child. (Curator's cache makes the path again itself
/// when a refresh finds it gone; ours makes it at start only, so a path deleted on purpose stays
/// deleted, and follows it when it comes back.)
#[tokio::test]
async fn the_cache_follows_its_path_deleted_and_made_again() {
    let fw = client(&server()).await;
    let base = unique_path("pccmissing");
    let path = format!("{base}/a/b/test");
    let cache = PathChildrenCache::new(&fw, &path, true).unwrap();
    let mut events = cache.events();
    cache.start(StartMode::PostInitializedEvent).unwrap();
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["initialized []"]);
    create(&fw, &format!("{path}/one"), b"").await;
    create(&fw, &format!("{path}/two"), b"").await;
    let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
    assert_eq!(got, vec!["added one", "added two"]);
    delete(&fw, &format!("{path}/one")).await;
    delete(&fw, &format!("{path}/two")).await;
    delete(&fw, &path).await;
    let got: Vec<_> = children_events_until(&mut events, 2).await.iter().map(describe).collect();
    assert_eq!(got, vec!["removed one", "removed two"]);
    fw.create().creating_parent_containers_if_needed().for_path(&format!("{path}/new"), Vec::new()).await.unwrap();
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["added new"]);
    cache.close().await;
    fw.close().await;
}

/// Follows Curator's `TestPathChildrenCache.testRebuildNode`: `rebuild_node` reads one child
/// again from the server and returns once the cache holds it, without events. Here the cache
/// was cleared first, so only a re-read can bring the child back; a child gone on the server is
/// dropped; bad paths are refused with typed errors. (New API: this did not compile before.)
#[tokio::test]
async fn rebuild_node_reads_one_child_again_without_events() {
    let fw = client(&server()).await;
    let base = unique_path("pccrebuildnode");
    create(&fw, &format!("{base}/one"), b"one").await;
    create(&fw, &format!("{base}/two"), b"two").await;
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let idle = PathChildrenCache::new(&fw, &base, true).unwrap();
    assert!(matches!(
        idle.rebuild_node(&format!("{base}/one")).await,
        Err(CuratorError::NotStarted { what: "PathChildrenCache" })
    ));
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache).unwrap();
    within("start", cache.wait_initialized()).await.unwrap();

    cache.clear();
    let one = format!("{base}/one");
    within("rebuild_node", cache.rebuild_node(&one)).await.unwrap();
    let names: Vec<_> = cache.current_data().iter().map(|n| n.name().to_string()).collect();
    assert_eq!(names, vec!["one"], "only that child was read again");
    assert_eq!(cache.current_data_for(&one).unwrap().data.as_deref(), Some(&b"one"[..]));

    // The server's latest, at once after the call (whether or not the change's event was seen).
    set(&fw, &one, b"alt").await;
    within("rebuild_node", cache.rebuild_node(&one)).await.unwrap();
    assert_eq!(cache.current_data_for(&one).unwrap().data.as_deref(), Some(&b"alt"[..]));
    // A child that does not exist is not cached.
    within("rebuild_node", cache.rebuild_node(&format!("{base}/absent"))).await.unwrap();
    assert!(cache.current_data_for(&format!("{base}/absent")).is_none());

    for bad in [base.clone(), format!("{base}/one/deeper"), "/elsewhere/x".to_string()] {
        assert!(matches!(cache.rebuild_node(&bad).await, Err(CuratorError::InvalidArgument { .. })), "{bad}");
    }
    assert!(matches!(cache.rebuild_node("no-slash").await, Err(CuratorError::InvalidPath { .. })));

    // No event for the rebuilt children: the next ones are the change to "alt" (if its read came
    // before the rebuild's) and the marker.
    create(&fw, &format!("{base}/marker"), b"").await;
    let mut got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    if got == ["updated one alt"] {
        got = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    }
    assert_eq!(got, vec!["added marker"]);
    cache.close().await;
    idle.close().await;
    fw.close().await;
}

/// Follows Curator's `TestPathChildrenCache.testPostInitializedForEmpty`: with
/// `PostInitializedEvent`, a cache of a path without children still says `Initialized`.
#[tokio::test]
async fn post_initialized_event_for_an_empty_path() {
    let fw = client(&server()).await;
    let base = unique_path("pccempty");
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let mut events = cache.events();
    cache.start(StartMode::PostInitializedEvent).unwrap();
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["initialized []"]);
    cache.close().await;
    fw.close().await;
}

/// Closing a framework with a cache still running ends its session within the close: its
/// ephemeral nodes are gone when `close()` returns. Before, the cache kept a clone of the
/// session's client for its pipelined reads, so `close()` gave up waiting after 2 s with the
/// session still open, and the nodes went only when the cache was dropped (the GroupMember
/// benchmark saw every leave by session end 2 s late).
#[tokio::test]
async fn closing_the_framework_with_a_cache_running_ends_the_session() {
    tests::init_tracing();
    let server = TestingServer::shared();
    let fw = client(&server.connect_string()).await;
    let observer = client(&server.connect_string()).await;
    let path = unique_path("pcc-close");
    let cache = PathChildrenCache::new(&fw, &path, true).expect("cache");
    cache.start(StartMode::BuildInitialCache).expect("start");
    cache.wait_initialized().await.expect("start");
    let member = format!("{path}/member");
    fw.create().with_mode(curator_core::CreateMode::Ephemeral).for_path(&member, Vec::new()).await.expect("create");
    let mut session = fw.session().await.expect("session").client().state_watcher();
    fw.close().await;
    let state = session.state();
    assert!(state.is_terminated(), "the session outlived close(): {state:?}");
    assert!(!exists(&observer, &member).await, "its ephemeral node outlived close()");
    drop(cache);
    observer.close().await;
}
