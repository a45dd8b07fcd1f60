//! Recipes and caches under `enable_compression()` (issue 31 item 5): each family works end to
//! end on a framework that compresses by default, and the bytes it stores are gzip where
//! Curator's recipes (whose every operation goes through the client, so through its
//! `compressionEnabled()` default) would store them compressed: read back raw through a plain
//! framework. Curator's `TestCompression` (`testSetDataGlobalCompression`) and
//! `TestCompressionInTransactionNew` have the idea
//! (data written through a compressing client is compressed on the server and read back
//! decompressed); the scenarios follow the recipes' own Curator tests, named on each.
//! No faults are injected here: the recipes' fault handling does not change with the data.

use std::sync::Arc;
use std::time::Duration;

use curator_cache::{CuratorCache, NodeCache, PathChildrenCache, StartMode};
use curator_core::{CuratorFramework, RetryNTimes};
use curator_discovery::{ServiceDiscovery, ServiceInstance};
use curator_recipes::{
    DistributedAtomicLong, DistributedDoubleBarrier, DistributedQueue, ErrorMode, GroupMember, InterProcessMutex,
    LeaderLatch, PersistentNode, QueueEvent, Revoker, SharedCount, SimpleDistributedQueue, StringSerializer,
};
use curator_test::{eventually, TestingServer, Timing};
use tests::{builder, children, client, connected, init_tracing, unique_path};
use tokio::sync::mpsc;

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// A framework that compresses by default, and a plain one that shows the bytes as stored.
async fn frameworks() -> (CuratorFramework, CuratorFramework) {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let compressing = connected(builder(&connect).enable_compression()).await;
    (compressing, client(&connect).await)
}

/// The bytes stored at `path`, as `plain` (no compression) reads them.
async fn stored(plain: &CuratorFramework, path: &str) -> Vec<u8> {
    plain.get_data().for_path(path).await.unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// Asserts that the node at `path` holds gzip (as Curator's `GzipCompressionProvider` writes)
/// whose content is `expected`.
async fn assert_gzip(plain: &CuratorFramework, path: &str, expected: &[u8]) {
    let raw = stored(plain, path).await;
    assert!(raw.starts_with(&[0x1f, 0x8b]), "{path} is not stored compressed: {raw:?}");
    let unpacked = plain.get_data().decompressed().for_path(path).await.expect("decompress");
    assert_eq!(unpacked, expected, "{path}");
}

/// Waits until `check` holds, or fails with `what`.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(eventually(deadline(), &mut check).await, "never: {what}");
}

/// A mutex's lock node holds the framework's default data, compressed (Curator's lock node is
/// created through the client); acquire, release and revocation work (the `Revoker` writes
/// the revoke message compressed, the holder reads it decompressed). Follows
/// `TestInterProcessMutex.testRevoking`.
#[tokio::test]
async fn mutex_node_is_compressed_and_revocation_is_heard() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-mutex");
    let mutex = InterProcessMutex::new(&fw, &path).expect("mutex");
    let (tx, mut rx) = mpsc::unbounded_channel();
    mutex.make_revocable(move |_: &InterProcessMutex| {
        let _ = tx.send(());
    });
    let guard = mutex.acquire().await.expect("acquire");
    let nodes = mutex.participant_nodes().await.expect("nodes");
    assert_eq!(nodes.len(), 1);
    Revoker::attempt_revoke(&fw, &nodes[0]).await.expect("revoke");
    let heard = tokio::time::timeout(deadline(), rx.recv()).await;
    assert!(matches!(heard, Ok(Some(()))), "the holder did not hear the revocation");
    assert_gzip(&plain, &nodes[0], b"__REVOKE__").await;
    guard.release().await.expect("release");
    until("the lock node is gone", || async { children(&plain, &path).await.is_empty() }).await;
    fw.close().await;
    plain.close().await;
}

/// Two latches' participants are read with their ids (stored compressed). Follows
/// `TestLeaderLatch.testBasic` (its participants and leader).
#[tokio::test]
async fn leader_latch_participants_have_their_ids() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-latch");
    let first = LeaderLatch::new(&fw, &path, "first").expect("latch");
    first.start().expect("start");
    first.await_leadership().await.expect("leader");
    let second = LeaderLatch::new(&fw, &path, "second").expect("latch");
    second.start().expect("start");
    until("two participants", || async { children(&plain, &path).await.len() == 2 }).await;
    let ids: Vec<(String, bool)> =
        second.participants().await.expect("participants").into_iter().map(|p| (p.id, p.is_leader)).collect();
    assert_eq!(ids, vec![("first".to_string(), true), ("second".to_string(), false)]);
    let mut names = children(&plain, &path).await;
    names.sort_by_key(|n| n.rsplit('-').next().map(str::to_string));
    assert_gzip(&plain, &format!("{path}/{}", names[0]), b"first").await;
    second.close().await;
    first.close().await;
    fw.close().await;
    plain.close().await;
}

/// A `DistributedQueue` item whose consumer fails once is requeued and consumed again with
/// its data (the requeued node is written compressed, as the item was). Follows
/// `TestDistributedQueue.testErrorMode`.
#[tokio::test]
async fn distributed_queue_requeue_keeps_the_data() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-queue");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .error_mode(ErrorMode::Requeue)
        .consumer(move |item: String| {
            let (calls, tx) = (calls.clone(), tx.clone());
            async move {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = tx.send(item);
                if n == 0 {
                    Err("first call fails".to_string())
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .expect("queue");
    let mut events = queue.events();
    queue.start().expect("start");
    queue.ready().await.expect("ready");
    queue.put(&"item".to_string()).await.expect("put");
    for _ in 0..2 {
        let got = tokio::time::timeout(deadline(), rx.recv()).await.expect("consumed in time");
        assert_eq!(got.as_deref(), Some("item"));
    }
    let event = tokio::time::timeout(deadline(), events.next()).await.expect("an event");
    assert!(matches!(event, Some(QueueEvent::ConsumerFailed { .. })), "{event:?}");
    let event = tokio::time::timeout(deadline(), events.next()).await.expect("an event");
    assert!(matches!(event, Some(QueueEvent::Consumed { .. })), "{event:?}");
    until("the queue is empty", || async { children(&plain, &path).await.is_empty() }).await;
    queue.close().await;
    fw.close().await;
    plain.close().await;
}

/// A `DistributedQueue`'s items and lock nodes are stored compressed (the lock node with the
/// default data, as Curator's). Follows `TestDistributedQueue.testSimple`'s put.
#[tokio::test]
async fn distributed_queue_nodes_are_compressed() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-queue-raw");
    let locks = format!("{path}-locks");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).lock_path(&locks).build().expect("queue");
    queue.start().expect("start");
    queue.ready().await.expect("ready");
    queue.put(&"x".to_string()).await.expect("put");
    let items = children(&plain, &path).await;
    assert_eq!(items.len(), 1);
    let raw = stored(&plain, &format!("{path}/{}", items[0])).await;
    assert!(raw.starts_with(&[0x1f, 0x8b]), "item not compressed: {raw:?}");
    queue.close().await;
    fw.close().await;
    plain.close().await;
}

/// `SimpleDistributedQueue` offer/take gives back the data offered, stored compressed. Follows
/// `TestSimpleDistributedQueue.testOffer1`.
#[tokio::test]
async fn simple_queue_offer_take() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-simple");
    let queue = SimpleDistributedQueue::new(&fw, &path).expect("queue");
    let node = queue.offer(b"hello".to_vec()).await.expect("offer");
    assert_gzip(&plain, &node, b"hello").await;
    assert_eq!(queue.peek().await.expect("peek"), Some(b"hello".to_vec()));
    assert_eq!(queue.take().await.expect("take"), b"hello");
    queue.offer(b"again".to_vec()).await.expect("offer");
    assert_eq!(queue.poll(deadline()).await.expect("poll"), Some(b"again".to_vec()));
    fw.close().await;
    plain.close().await;
}

/// `DistributedAtomicLong` increments and compare-and-sets (decoded values), its value stored
/// compressed. Follows `TestDistributedAtomicLong.testBasic` and `testCompareAndSet`.
#[tokio::test]
async fn atomic_long_increments() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-atomic");
    let retry = RetryNTimes::new(3, Duration::from_millis(50));
    let long = DistributedAtomicLong::new(&fw, &path, retry).expect("atomic");
    for expected in 1..=3 {
        let value = long.increment().await.expect("increment");
        assert!(value.succeeded, "{value:?}");
        assert_eq!(value.post_value, expected);
    }
    assert_eq!(long.get().await.expect("get").post_value, 3);
    assert!(long.compare_and_set(3, 10).await.expect("cas").succeeded);
    assert!(!long.compare_and_set(3, 11).await.expect("cas").succeeded);
    assert_eq!(long.get().await.expect("get").post_value, 10);
    assert_gzip(&plain, &path, &10i64.to_be_bytes()).await;
    fw.close().await;
    plain.close().await;
}

/// `SharedCount` set/get, stored compressed. Follows `TestSharedCount.testSimple`.
#[tokio::test]
async fn shared_count_set_get() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-count");
    let count = SharedCount::new(&fw, &path, 1).expect("count");
    count.start().expect("start");
    count.ready().await.expect("ready");
    count.set(7).await.expect("set");
    assert_eq!(count.count().expect("count"), 7);
    let other = SharedCount::new(&fw, &path, 0).expect("count");
    other.start().expect("start");
    other.ready().await.expect("ready");
    until("the other count sees 7", || async { other.count().ok() == Some(7) }).await;
    assert_gzip(&plain, &path, &7i32.to_be_bytes()).await;
    other.close().await;
    count.close().await;
    fw.close().await;
    plain.close().await;
}

/// `PersistentNode` creates its node and writes new data, both compressed: a compressing
/// reader sees each. Follows `TestPersistentNode.testBasic` and `testQuickSetData`.
#[tokio::test]
async fn persistent_node_create_and_set_data() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-pnode");
    let node = PersistentNode::builder(&fw, &path).data(b"one".to_vec()).build().expect("node");
    node.start().expect("start");
    assert!(node.wait_for_initial_create(deadline()).await, "not created");
    assert_eq!(fw.get_data().for_path(&path).await.expect("read"), b"one");
    node.set_data(b"two".to_vec()).expect("set_data");
    until("the node holds `two`", || async { fw.get_data().for_path(&path).await.ok().as_deref() == Some(b"two") })
        .await;
    assert_gzip(&plain, &path, b"two").await;
    node.close().await;
    fw.close().await;
    plain.close().await;
}

/// A `PersistentNode` that finds its path taken by a node holding its own data (compressed)
/// adopts it without writing: the comparison is of decoded data. A node in the way, as in
/// `TestPersistentNode.testQuickCloseNodeExists`.
#[tokio::test]
async fn persistent_node_adopts_a_node_with_its_data() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-pnode-adopt");
    fw.create().for_path(&path, b"same".to_vec()).await.expect("create");
    let node = PersistentNode::builder(&fw, &path).data(b"same".to_vec()).build().expect("node");
    node.start().expect("start");
    assert!(node.wait_for_initial_create(deadline()).await, "not adopted");
    let (_, stat) = plain.get_data().for_path_with_stat(&path).await.expect("read");
    assert_eq!(stat.version, 0, "the node was written although it held our data");
    node.close().await;
    fw.close().await;
    plain.close().await;
}

/// `GroupMember` members are seen with their payloads. Follows `TestGroupMember.testBasic`.
#[tokio::test]
async fn group_member_payloads() {
    let (fw, _plain) = frameworks().await;
    let path = unique_path("comp-group");
    let one = GroupMember::builder(&fw, &path, "one").payload(b"p1".to_vec()).build().expect("member");
    let two = GroupMember::builder(&fw, &path, "two").payload(b"p2".to_vec()).build().expect("member");
    one.start().expect("start");
    two.start().expect("start");
    one.ready().await.expect("ready");
    two.ready().await.expect("ready");
    until("both members with their payloads", || async {
        let members = one.current_members();
        members.get("one").map(Vec::as_slice) == Some(b"p1") && members.get("two").map(Vec::as_slice) == Some(b"p2")
    })
    .await;
    two.close().await;
    one.close().await;
    fw.close().await;
    _plain.close().await;
}

/// `DistributedDoubleBarrier` enter/leave with two members; the member nodes are stored
/// compressed (Curator's are created through the client with the default data). Follows
/// `TestDistributedDoubleBarrier.testBasic`.
#[tokio::test]
async fn double_barrier_enter_leave() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-barrier");
    let mut a = DistributedDoubleBarrier::new(&fw, &path, 2).expect("barrier");
    let mut b = DistributedDoubleBarrier::new(&fw, &path, 2).expect("barrier");
    let (ea, eb) = tokio::join!(a.enter(), b.enter());
    ea.expect("enter a");
    eb.expect("enter b");
    let members: Vec<String> = children(&plain, &path).await.into_iter().filter(|c| c != "ready").collect();
    assert_eq!(members.len(), 2, "{members:?}");
    for m in &members {
        assert_gzip(&plain, &format!("{path}/{m}"), fw.default_data()).await;
    }
    let (la, lb) = tokio::join!(a.leave(), b.leave());
    la.expect("leave a");
    lb.expect("leave b");
    fw.close().await;
    plain.close().await;
}

/// The caches show decompressed data, at their load and after a change. Follows Curator's
/// `TestPathChildrenCache.testBasics` and `TestNodeCache.testBasics` (and the same for a
/// `CuratorCache`), on a compressing client.
#[tokio::test]
async fn caches_show_decompressed_data() {
    let (fw, plain) = frameworks().await;
    let path = unique_path("comp-cache");
    let child = format!("{path}/a");
    fw.create().creating_parents_if_needed().for_path(&child, b"first".to_vec()).await.expect("create");

    let tree = CuratorCache::builder(&fw, &path).build().expect("cache");
    tree.start().expect("start");
    tree.wait_initialized().await.expect("initialized");
    let children_cache = PathChildrenCache::new(&fw, &path, true).expect("cache");
    children_cache.start(StartMode::BuildInitialCache).expect("start");
    children_cache.wait_initialized().await.expect("initialized");
    let node = NodeCache::new(&fw, &child).expect("cache");
    node.start(true).expect("start");
    node.wait_initialized().await.expect("initialized");

    let data = |d: Option<Arc<curator_cache::ChildData>>| d.and_then(|d| d.data.clone());
    assert_eq!(data(tree.get(&child)), Some(b"first".to_vec()));
    assert_eq!(data(children_cache.current_data_for(&child)), Some(b"first".to_vec()));
    assert_eq!(data(node.current_data()), Some(b"first".to_vec()));

    fw.set_data().for_path(&child, b"second".to_vec()).await.expect("set");
    let second = Some(b"second".to_vec());
    until("the caches see `second`", || async {
        data(tree.get(&child)) == second
            && data(children_cache.current_data_for(&child)) == second
            && data(node.current_data()) == second
    })
    .await;
    assert_gzip(&plain, &child, b"second").await;
    node.close().await;
    children_cache.close().await;
    tree.close().await;
    fw.close().await;
    plain.close().await;
}

/// A registered instance is read back by a `ServiceCache` (through the cache engine) and by
/// the discovery's queries, stored compressed. Follows `TestServiceCache.testCache`.
#[tokio::test]
async fn discovery_register_and_cache() {
    let (fw, plain) = frameworks().await;
    let base = unique_path("comp-discovery");
    let discovery: ServiceDiscovery<String> = ServiceDiscovery::builder(&fw, &base).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready");
    let cache = discovery.service_cache_builder("svc").build().expect("cache");
    cache.start().expect("start");
    cache.ready().await.expect("ready");
    let instance = ServiceInstance::builder("svc").port(8080).payload("payload".to_string()).build();
    discovery.register(instance.clone()).await.expect("register");
    until("the cache sees the instance", || async { cache.instances() == vec![instance.clone()] }).await;
    let raw = stored(&plain, &format!("{base}/svc/{}", instance.id)).await;
    assert!(raw.starts_with(&[0x1f, 0x8b]), "instance not compressed");
    cache.close().await;
    discovery.close().await;
    fw.close().await;
    plain.close().await;
}
