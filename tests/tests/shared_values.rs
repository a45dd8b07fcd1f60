//! Our own tests of `SharedValue` and `SharedCount`: the local copy ordered by `mzxid`
//! (CURATOR-688), re-reads after reconnections and new sessions, `try_set` across a cut and a
//! lost reply, bad input and corrupted nodes.

use std::sync::{Arc, Mutex};

use curator_core::CuratorError;
use curator_recipes::{SharedCount, SharedCountEvent, SharedValue};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::fixture::{builder, connected, init_tracing, unique_path, Fixture};

/// The local copy follows the node's `mzxid`, not its version: after the node is deleted and
/// made again (version back to 0), the new value replaces the old one at version 5. Ordered by
/// version (Curator before CURATOR-688 compared versions), the copy would stay at the old value
/// for good; this failed when `SharedValue::update` compared versions.
#[tokio::test]
async fn a_recreated_node_replaces_a_higher_version() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("mzxid");
    let value = SharedValue::new(&f.fw, &path, b"seed".to_vec()).expect("value");
    value.start().expect("start");
    value.ready().await.expect("start");
    for i in 0..5u8 {
        value.set(vec![i]).await.expect("set");
    }
    assert_eq!(value.versioned_value().version, 5);
    // With its children: the handle's write tag is one.
    f.fw.delete().deleting_children_if_needed().for_path(&path).await.expect("delete");
    f.fw.create().for_path(&path, b"again".to_vec()).await.expect("create");
    assert!(
        eventually(Timing::new().deadline(), || async { value.value() == b"again" }).await,
        "the recreated node's value (version 0) replaces the old one (version 5): {:?}",
        value.versioned_value()
    );
    assert_eq!(value.versioned_value().version, 0);
    f.close().await;
}

/// A stale read never replaces a newer value: while another client and this one write in
/// turn, the local copy's version never goes back, and the listener's versions only grow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_copy_never_goes_back() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("ordered");
    let other = f.client().await;
    let value = Arc::new(SharedValue::new(&f.fw, &path, b"0".to_vec()).expect("value"));
    let versions = Arc::new(Mutex::new(Vec::new()));
    let to = versions.clone();
    value.add_listener(move |event| {
        if let curator_recipes::SharedValueEvent::Changed(v) = event {
            to.lock().unwrap().push(v.version);
        }
    });
    value.start().expect("start");
    value.ready().await.expect("start");
    let sampler = {
        let value = value.clone();
        tokio::spawn(async move {
            let mut last = -1;
            for _ in 0..2000 {
                let now = value.versioned_value().version;
                assert!(now >= last, "the local copy went back from version {last} to {now}");
                last = now;
                tokio::task::yield_now().await;
            }
        })
    };
    for i in 0..50 {
        other.set_data().for_path(&path, format!("other {i}").into_bytes()).await.expect("set");
        value.set(format!("ours {i}").into_bytes()).await.expect("set");
        let stat = f.fw.check_exists().for_path(&path).await.expect("exists").expect("node");
        assert!(value.versioned_value().version >= stat.version - 1);
    }
    sampler.await.expect("sampler");
    assert!(eventually(Timing::new().deadline(), || async { versions.lock().unwrap().last() == Some(&100) }).await);
    let seen = versions.lock().unwrap().clone();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "listener versions only grow: {seen:?}");
    other.close().await;
    f.close().await;
}

/// A change made while the session was being replaced (its watch gone with it) is read after
/// the new session's `Reconnected`.
#[tokio::test]
async fn a_new_session_reads_changes_missed_meanwhile() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let path = unique_path("new-session");
    let count = SharedCount::new(&fw, &path, 1).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    let info = fw.session().await.expect("session").client().session().clone();
    proxy.set_reject(true);
    proxy.cut();
    expire_session(&server.connect_string(), &info).await.expect("expire");
    other.set_data().for_path(&path, 2i32.to_be_bytes().to_vec()).await.expect("set");
    proxy.set_reject(false);
    assert!(eventually(Timing::new().deadline(), || async { count.count().unwrap() == 2 }).await);
    count.close().await;
    other.close().await;
    fw.close().await;
}

/// Follows what `TestSharedCount.testDisconnectReconnectWithMultipleClients` checks
/// (CURATOR-311): a change made while a client was disconnected is seen once it is back.
#[tokio::test]
async fn reconnection_reads_changes_missed_meanwhile() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let path = unique_path("reconnect");
    let count = SharedCount::new(&fw, &path, 1).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    for next in 2i32..5 {
        proxy.set_reject(true);
        proxy.cut();
        other.set_data().for_path(&path, next.to_be_bytes().to_vec()).await.expect("set");
        proxy.set_reject(false);
        assert!(eventually(Timing::new().deadline(), || async { count.count().unwrap() == next }).await);
    }
    count.close().await;
    other.close().await;
    fw.close().await;
}

/// `try_set` after a cut (it waits for the connection) and with its reply swallowed (the
/// write was applied: the framework's idempotent set reports it made, not a failure).
#[tokio::test]
async fn try_set_after_a_reconnection_and_a_lost_reply() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string())).await;
    let path = unique_path("try-set");
    let count = SharedCount::new(&fw, &path, 0).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    let seen = count.versioned_value().unwrap();
    proxy.cut();
    assert!(count.try_set(&seen, 1).await.expect("try set after a cut"));
    let seen = count.versioned_value().unwrap();
    assert_eq!(seen.version, 1);
    proxy.swallow_next_reply();
    assert!(count.try_set(&seen, 2).await.expect("try set with a lost reply"), "the write was applied");
    let observer = connected(builder(&server.connect_string())).await;
    let (data, stat) = observer.get_data().for_path_with_stat(&path).await.expect("read");
    assert_eq!((data, stat.version), (2i32.to_be_bytes().to_vec(), 2), "applied once");
    assert_eq!(count.versioned_value().unwrap().value, 2);
    count.close().await;
    observer.close().await;
    fw.close().await;
}

/// Bad input is a typed error; so is using a value before `start` or starting it twice.
#[tokio::test]
async fn bad_input() {
    init_tracing();
    let f = Fixture::shared().await;
    assert!(matches!(SharedValue::new(&f.fw, "bad", vec![]), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(SharedCount::new(&f.fw, "/a/", 0), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(
        SharedValue::new(&f.fw, &unique_path("big"), vec![0; 2 << 20]),
        Err(CuratorError::DataTooLarge { .. })
    ));
    let value = SharedValue::new(&f.fw, &unique_path("latent"), b"x".to_vec()).expect("value");
    assert!(matches!(value.set(b"y".to_vec()).await, Err(CuratorError::NotStarted { what: "SharedValue" })));
    assert!(matches!(
        value.try_set(&value.versioned_value(), b"y".to_vec()).await,
        Err(CuratorError::NotStarted { what: "SharedValue" })
    ));
    value.start().expect("start");
    value.ready().await.expect("start");
    assert!(matches!(value.start(), Err(CuratorError::AlreadyStarted { what: "SharedValue" })));
    value.close().await;
    value.close().await;
    assert!(matches!(value.set(b"y".to_vec()).await, Err(CuratorError::AlreadyClosed { what: "SharedValue" })));
    assert!(matches!(value.start(), Err(CuratorError::AlreadyClosed { what: "SharedValue" })));
    let never = SharedCount::new(&f.fw, &unique_path("never"), 0).expect("count");
    never.close().await;
    assert!(matches!(never.start(), Err(CuratorError::AlreadyClosed { .. })));
    f.close().await;
}

/// Issue 27: a value whose node the server refuses (the parent allows reading only, so the
/// seed's create is refused; or the node exists and may not be read) reports `NoAuth`
/// promptly, under every error and retry policy: `start()` returns `Ok` (it only spawns the
/// value's task), `ready()` gives `NoAuth` within a second, and the value is closed: state
/// `Closed`, a write and a second start `AlreadyClosed`, its event stream ended. Before the one
/// convention, `start()` itself returned `NoAuth` and left the value latent. For `SharedValue`
/// and `SharedCount` alike.
#[tokio::test]
async fn a_refused_start_is_reported_and_closes_the_value() {
    use curator_core::zk::{Acl, AuthId, Permission};
    use curator_core::LifeState;
    use tests::policies::{framework, COMBINATIONS};
    init_tracing();
    let f = Fixture::shared().await;
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&f.connect_string(), policy, retry).await;
        let parent = unique_path("value-noauth");
        tests::zk::read_only_node(&fw, &parent).await;
        let unreadable = unique_path("value-unreadable");
        let write_only = vec![Acl::new(Permission::WRITE | Permission::DELETE, AuthId::anyone())];
        fw.create().with_acl(write_only).for_path(&unreadable, vec![]).await.unwrap();
        for path in [format!("{parent}/value"), unreadable] {
            let value = SharedValue::new(&fw, &path, b"seed".to_vec()).expect("value");
            let mut events = value.events();
            let started = std::time::Instant::now();
            value.start().expect("start only spawns the task");
            let r = tokio::time::timeout(Timing::new().deadline(), value.ready()).await.expect("ready returns");
            assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?} {path}: {r:?}");
            assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: slow");
            assert_eq!(value.state(), LifeState::Closed);
            assert!(matches!(value.set(b"y".to_vec()).await, Err(CuratorError::AlreadyClosed { .. })));
            assert!(matches!(value.start(), Err(CuratorError::AlreadyClosed { what: "SharedValue" })));
            let ended =
                tokio::time::timeout(Timing::new().deadline(), async { while events.next().await.is_some() {} });
            assert!(ended.await.is_ok(), "the value's event stream ends");
            value.close().await;

            let count = SharedCount::new(&fw, &path, 7).expect("count");
            let mut events = count.events();
            let started = std::time::Instant::now();
            count.start().expect("start only spawns the task");
            let r = tokio::time::timeout(Timing::new().deadline(), count.ready()).await.expect("ready returns");
            assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?} {path}: {r:?}");
            assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: slow");
            assert_eq!(count.state(), LifeState::Closed);
            assert!(matches!(count.start(), Err(CuratorError::AlreadyClosed { what: "SharedCount" })));
            let ended =
                tokio::time::timeout(Timing::new().deadline(), async { while events.next().await.is_some() {} });
            assert!(ended.await.is_ok(), "the count's event stream ends");
            count.close().await;
        }
        fw.close().await;
    }
    f.close().await;
}

/// A count node holding something else than 4 bytes: `count()` is `BadData`, listeners get
/// `Corrupted`, and a good value afterwards is a `Changed` again.
#[tokio::test]
async fn corrupted_count() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("corrupted-count");
    f.fw.create().for_path(&path, b"foo".to_vec()).await.expect("create");
    let count = SharedCount::new(&f.fw, &path, 0).expect("count");
    let events = Arc::new(Mutex::new(Vec::new()));
    let to = events.clone();
    count.add_listener(move |event| to.lock().unwrap().push(event.clone()));
    count.start().expect("start");
    count.ready().await.expect("start");
    assert!(matches!(count.count(), Err(CuratorError::BadData { .. })));
    assert!(matches!(count.versioned_value(), Err(CuratorError::BadData { .. })));
    f.fw.set_data().for_path(&path, b"12345".to_vec()).await.expect("set");
    assert!(
        eventually(Timing::new().deadline(), || async {
            events
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, SharedCountEvent::Corrupted(CuratorError::BadData { .. })))
        })
        .await
    );
    f.fw.set_data().for_path(&path, 7i32.to_be_bytes().to_vec()).await.expect("set");
    assert!(eventually(Timing::new().deadline(), || async { count.count().ok() == Some(7) }).await);
    // The listener runs after the local copy changed (on the blocking pool): polled too.
    assert!(
        eventually(Timing::new().deadline(), || async {
            events.lock().unwrap().iter().any(|e| matches!(e, SharedCountEvent::Changed(v) if v.value == 7))
        })
        .await
    );
    f.close().await;
}

/// A `try_set` against a value not read yet (version -1: the value is started, its first read
/// has not come, here because the framework is not started) is a typed `InvalidArgument`: ZooKeeper
/// would read version -1 as "any version" and overwrite whatever is there (IllegalState before).
/// Curator's `trySetValue` has no such case: its `start` reads the value before it returns.
#[tokio::test]
async fn a_try_set_before_the_first_read_is_invalid_argument() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = builder(&server.connect_string()).build().unwrap();
    let value = SharedValue::new(&fw, &unique_path("value-unread"), b"seed".to_vec()).unwrap();
    value.start().expect("starts: its task waits for the framework");
    let unread = value.versioned_value();
    assert_eq!(unread.version, -1, "not read yet");
    let r = value.try_set(&unread, b"x".to_vec()).await;
    assert!(matches!(r, Err(CuratorError::InvalidArgument { .. })), "{r:?}");
    value.close().await;
    fw.close().await;
}
