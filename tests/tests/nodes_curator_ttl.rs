//! Apache Curator's `TestPersistentTtlNode`, ported to our `PersistentTtlNode` against a real
//! ZooKeeper. Each test runs its own server with a 100 ms container check interval (Curator's
//! tests set `znode.container.checkIntervalMs`), since the server's container manager is what
//! deletes expired TTL nodes; `curator_test::TestingServer` enables TTL nodes. Curator's sleeps
//! of "a bit more than the TTL" are waits for touches (data changes of the touched child), so
//! time passes as it should without being slept away.
//!
//! Our behaviour, on purpose: `set_data` is accepted while the node cannot be created
//! (Curator throws `IllegalStateException`), and kept; a first create refused for good
//! (`NoAuth`) closes the node and is `ready()`'s error (Curator logs it).
//!
//! Not ported:
//! - `testTouchNodeNotCreated`: it overrides `touch()` to do nothing; there is no such hook.
//!   A node whose touching stopped is `dropped_node_stops_touching_and_expires`.
//! - `testInternalExecutorClose` and `testExternalExecutorClose`: there are no executors; the
//!   touching is a task, stopped by close or drop (`dropped_node_stops_touching_and_expires`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::zk;
use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{PersistentTtlNode, TOUCH_NODE_NAME};
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::{builder, client, connected, init_tracing, unique_path};

/// The TTL of the nodes here: small, yet several touches (every TTL / 2) long, so that a busy
/// machine does not miss a touch by a whole TTL.
const TTL: Duration = Duration::from_secs(1);

/// A server of the test's own that reaps expired TTL nodes within 100 ms.
async fn server() -> TestingServer {
    TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

async fn exists(fw: &CuratorFramework, path: &str) -> bool {
    fw.check_exists().for_path(path).await.expect("exists").is_some()
}

fn touch_of(path: &str) -> String {
    format!("{path}/{TOUCH_NODE_NAME}")
}

/// Waits for `n` writes of the touch child of `path` (each seen by a watch), checking after
/// each that `path` is still there; returns how long that took.
async fn through_touches(fw: &CuratorFramework, path: &str, n: usize) -> Duration {
    let touch = touch_of(path);
    assert!(eventually(deadline(), || async { exists(fw, &touch).await }).await, "{touch} never appeared");
    let start = Instant::now();
    let mut seen = 0;
    while seen < n {
        let (stat, watch) = fw.check_exists().for_path_and_watch(&touch).await.unwrap();
        assert!(stat.is_some(), "{touch} expired while touched");
        let event = tokio::time::timeout(deadline(), watch.changed()).await.expect("a touch");
        if event.event_type == zk::EventType::NodeDataChanged {
            seen += 1;
        }
        assert!(exists(fw, path).await, "{path} expired while touched");
    }
    start.elapsed()
}

/// True once `path` is gone (within the deadline).
async fn gone(fw: &CuratorFramework, path: &str) -> bool {
    eventually(deadline(), || async { !exists(fw, path).await }).await
}

/// TestPersistentTtlNode.testBasic: the node outlives several TTLs while it is touched; closed,
/// it is still there, then it expires (its touch child first).
#[tokio::test]
async fn basic() {
    init_tracing();
    let server = server().await;
    let fw = client(&server.connect_string()).await;
    let path = unique_path("ttl-basic");
    let node = PersistentTtlNode::builder(&fw, &path, TTL).build().unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(deadline()).await);
    let took = through_touches(&fw, &path, 4).await;
    assert!(took > TTL, "four touches in {took:?}");
    node.close().await;
    assert!(exists(&fw, &path).await, "a TTL node is left to expire, not deleted");
    assert!(gone(&fw, &path).await, "{path} never expired");
    assert!(!exists(&fw, &touch_of(&path)).await);
    fw.close().await;
}

/// TestPersistentTtlNode.testForcedDeleteOfTouchNode: the touch child is deleted five times;
/// it comes back each time, and so does the node if the server reaped it meanwhile.
#[tokio::test]
async fn forced_delete_of_touch_node() {
    init_tracing();
    let server = server().await;
    let fw = client(&server.connect_string()).await;
    let path = unique_path("ttl-forced");
    let touch = touch_of(&path);
    let node = PersistentTtlNode::builder(&fw, &path, TTL).build().unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(deadline()).await);
    for round in 0..5 {
        assert!(eventually(deadline(), || async { exists(&fw, &touch).await }).await, "round {round}");
        fw.delete().quietly().for_path(&touch).await.unwrap();
    }
    through_touches(&fw, &path, 2).await;
    node.close().await;
    fw.close().await;
}

/// TestPersistentTtlNode.testRecreationOfParentNodeWithParentCreationOff: with parent creation
/// off, the node and its touch child cannot come back once their parent is deleted, and
/// `last_error` says `NoNode`. Ours: `set_data` is accepted (Curator throws) and kept.
#[tokio::test]
async fn recreation_of_parent_node_with_parent_creation_off() {
    init_tracing();
    let server = server().await;
    let fw = client(&server.connect_string()).await;
    let base = unique_path("ttl-noparent");
    let parent = format!("{base}/one");
    let path = format!("{parent}/two");
    let touch = touch_of(&path);
    fw.create().creating_parents_if_needed().for_path(&parent, Vec::new()).await.unwrap();
    let node =
        PersistentTtlNode::builder(&fw, &path, TTL).data(b"hey".to_vec()).creating_parents(false).build().unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(deadline()).await);
    through_touches(&fw, &path, 1).await;

    // At once: one by one, the node (and its touch) would be back before the parent goes.
    fw.transaction().delete(&touch, None).delete(&path, None).delete(&parent, None).commit().await.unwrap();
    assert!(eventually(deadline(), || async { matches!(node.last_error(), Some(CuratorError::NoNode { .. })) }).await);
    assert!(!exists(&fw, &path).await && !exists(&fw, &touch).await && !exists(&fw, &parent).await);
    assert_eq!(node.data(), b"hey");
    node.set_data(b"later".to_vec()).unwrap();
    assert_eq!(node.data(), b"later");
    node.close().await;
    fw.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
    fw.close().await;
}

/// TestPersistentTtlNode.testEventsOnParent: touches change the touch child, not the node, so a
/// cache of the node's parent sees no update of the node until its data is set.
#[tokio::test]
async fn events_on_parent() {
    init_tracing();
    let server = server().await;
    let fw = client(&server.connect_string()).await;
    let base = unique_path("ttl-events");
    let path = format!("{base}/test");
    let node = PersistentTtlNode::builder(&fw, &path, TTL).build().unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(deadline()).await);
    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let updates = Arc::new(AtomicUsize::new(0));
    let counted = updates.clone();
    let watched = path.clone();
    cache.add_listener(move |event: &PathChildrenCacheEvent| {
        if let PathChildrenCacheEvent::ChildUpdated(child) = event {
            if child.path() == watched {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    cache.start(StartMode::BuildInitialCache).unwrap();
    cache.wait_initialized().await.unwrap();

    through_touches(&fw, &path, 3).await;
    assert_eq!(updates.load(Ordering::SeqCst), 0);
    fw.set_data().for_path(&path, b"changed".to_vec()).await.unwrap();
    assert!(eventually(deadline(), || async { updates.load(Ordering::SeqCst) == 1 }).await);
    through_touches(&fw, &path, 2).await;
    assert_eq!(updates.load(Ordering::SeqCst), 1);
    cache.close().await;
    node.close().await;
    assert!(gone(&fw, &path).await);
    fw.close().await;
}

/// In place of TestPersistentTtlNode.testInternalExecutorClose: dropping the node stops its
/// touching task; the touch child is written no more, and the node expires.
#[tokio::test]
async fn dropped_node_stops_touching_and_expires() {
    init_tracing();
    let server = server().await;
    let fw = client(&server.connect_string()).await;
    let path = unique_path("ttl-dropped");
    let node = PersistentTtlNode::builder(&fw, &path, TTL).build().unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(deadline()).await);
    through_touches(&fw, &path, 1).await;
    drop(node);
    assert!(gone(&fw, &touch_of(&path)).await, "the touch child was still touched");
    assert!(gone(&fw, &path).await);
    fw.close().await;
}

/// A TTL node is not tied to a session: after its framework's session expires (under every
/// error policy and retry policy) the node is still there and touched on the new session.
#[tokio::test]
async fn survives_session_expiry() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let rounds = [
        (ErrorPolicy::Standard, false),
        (ErrorPolicy::Standard, true),
        (ErrorPolicy::Session, false),
        (ErrorPolicy::Session, true),
    ]
    .map(|(policy, short)| {
        let connect = connect.clone();
        async move {
            let b = builder(&connect).connection_state_error_policy(policy);
            let b = if short { b.retry_policy(RetryNTimes::new(1, Duration::from_millis(100))) } else { b };
            let fw = connected(b).await;
            let path = unique_path("ttl-expiry");
            let node = PersistentTtlNode::builder(&fw, &path, TTL).build().unwrap();
            node.start().unwrap();
            assert!(node.wait_for_initial_create(deadline()).await);
            through_touches(&fw, &path, 1).await;
            let info = fw.session().await.unwrap().client().session().clone();
            expire_session(&connect, &info).await.unwrap();
            through_touches(&fw, &path, 3).await;
            assert!(node.last_error().is_none(), "{policy:?} short={short}: {:?}", node.last_error());
            node.close().await;
            fw.close().await;
        }
    });
    futures::future::join_all(rounds).await;
}

/// Bad input is a typed error from `start`, and nothing is created: a zero TTL or touch factor,
/// an invalid path, a child name that is not one node name, data over the framework's limit.
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    init_tracing();
    let fw = connected(builder(&TestingServer::shared().connect_string()).max_data_len(16)).await;
    let base = unique_path("ttl-bad");
    let path = format!("{base}/node");
    let err = PersistentTtlNode::builder(&fw, &path, Duration::ZERO).build().unwrap_err();
    assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{err:?}");
    let err = PersistentTtlNode::builder(&fw, &path, TTL).touch_factor(0).build().unwrap_err();
    assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{err:?}");
    for bad in ["relative", "/a//b", "/trailing/"] {
        let err = PersistentTtlNode::builder(&fw, bad, TTL).build().unwrap_err();
        assert!(matches!(err, CuratorError::InvalidPath { .. }), "{bad:?}: {err:?}");
    }
    for child in ["", "a/b", "..", "/"] {
        let err = PersistentTtlNode::builder(&fw, &path, TTL).child_name(child).build().unwrap_err();
        assert!(matches!(err, CuratorError::InvalidPath { .. }), "{child:?}: {err:?}");
    }
    let err = PersistentTtlNode::builder(&fw, &path, TTL).data(vec![0u8; 17]).build().unwrap_err();
    assert!(matches!(err, CuratorError::DataTooLarge { .. }), "{err:?}");
    assert!(!exists(&fw, &base).await, "nothing may be created");
    fw.close().await;
}

/// Issue 27: a first create the server refuses for good (a read-only parent) is reported
/// promptly: `start()` returns `Ok`, `ready()` gives `NoAuth` within a second, and the node is
/// closed (state `Closed`, a second start and `set_data` `AlreadyClosed`), its child never
/// touched into being. Before, the node only logged the refusal and waited for ever. Under
/// every error and retry policy.
#[tokio::test]
async fn a_refused_first_create_is_reported_by_ready_and_closes_the_node() {
    use curator_core::LifeState;
    use tests::policies::{framework, COMBINATIONS};
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let what = format!("{policy:?}/{retry:?}");
        let fw = framework(&server.connect_string(), policy, retry).await;
        let dir = unique_path("ttl-refused");
        tests::zk::read_only_node(&fw, &dir).await;
        let node = PersistentTtlNode::builder(&fw, &format!("{dir}/node"), TTL).touch_factor(10).build().unwrap();
        let began = Instant::now();
        node.start().expect("start only spawns the node's tasks");
        let r = tokio::time::timeout(deadline(), node.ready()).await.expect("ready returns");
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{what}: {r:?}");
        assert!(began.elapsed() < tests::at_once(&fw), "{what}: took {:?}", began.elapsed());
        assert_eq!(node.state(), LifeState::Closed, "{what}");
        assert!(matches!(node.start(), Err(CuratorError::AlreadyClosed { what: "PersistentTtlNode" })), "{what}");
        assert!(matches!(node.set_data(b"x".to_vec()), Err(CuratorError::AlreadyClosed { .. })), "{what}");
        node.close().await;
        assert!(fw.get_children().for_path(&dir).await.unwrap().is_empty(), "{what}: nothing created");
        fw.close().await;
    }
}

/// A touch whose reply is lost (the core ends such a data write with `OutcomeUnknown` and does
/// not send it again) is tried again as soon as the client is connected, not a whole interval
/// later: had it not been applied, the child would go untouched for twice the interval, the
/// whole TTL with the default factor, and could expire. The next touch comes within half an
/// interval of the lost one. Failed before: it came at the next interval. Under every error
/// and retry policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_touch_whose_reply_is_lost_is_tried_again_at_once() {
    use curator_test::{ChaosProxy, RequestKind};
    use std::sync::Mutex;
    use tests::policies::{framework, COMBINATIONS};
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let ttl = timing.session_timeout() * 2;
    let every = ttl / 2;
    let rounds = COMBINATIONS.map(|(policy, retry)| async move {
        let what = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let path = unique_path("ttl-lost-touch");
        let touch = touch_of(&path);
        let node = PersistentTtlNode::builder(&fw, &path, ttl).build().unwrap();
        proxy.record_requests(true);
        // The node's create is no data write: the first one is the first touch.
        proxy.swallow_next_reply_to(RequestKind::SetData);
        node.start().unwrap();
        node.ready().await.unwrap();
        assert!(eventually(deadline(), || async { !proxy.swallow_pending() }).await, "{what}: no touch");
        let lost = Instant::now();
        let touches = Mutex::new(0usize);
        let again = eventually(every / 2, || {
            let seen = proxy
                .take_seen_requests()
                .iter()
                .filter(|r| r.is(RequestKind::SetData) && r.path.as_deref() == Some(touch.as_str()))
                .count();
            let mut total = touches.lock().unwrap();
            *total += seen;
            std::future::ready(*total >= 2)
        })
        .await;
        assert!(again, "{what}: no touch within {:?} of the lost one ({:?} since)", every / 2, lost.elapsed());
        node.close().await;
        fw.close().await;
    });
    futures::future::join_all(rounds).await;
}

/// Issue 27, item 5: started outside a tokio runtime, a `PersistentTtlNode` is refused with the
/// lifecycle's typed error, as every started thing is; it panicked before.
#[test]
fn start_outside_a_runtime_is_a_typed_error() {
    let fw = curator_core::CuratorFramework::builder().connect_string("127.0.0.1:1").build().unwrap();
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        PersistentTtlNode::builder(&fw, "/ttl-outside", Duration::from_secs(10)).build().expect("built").start()
    }));
    let r = started.expect("no panic");
    assert!(matches!(r, Err(curator_core::CuratorError::NoRuntime { .. })), "{r:?}");
}
