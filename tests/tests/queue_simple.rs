//! `SimpleDistributedQueue` against a real ZooKeeper (issue 17).
//!
//! Curator's `TestSimpleDistributedQueue`, in Rust: every test of the class is ported and names
//! the Curator method it follows (`testHangFromContainerLoss` with the container reaped between
//! every item, deterministically). Then ours: order and foreign children, a node written to,
//! peek and element, bad input; many takers on several sessions and producers, every item
//! delivered exactly once; takes dropped while waiting and while their delete is on the wire;
//! a connection cut while takers wait, and while they take, under both error policies and a
//! short retry policy; and what a lost delete reply does (the item may be lost: at most once).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{SimpleDistributedQueue, QUEUE_NODE_PREFIX};
use curator_test::{eventually, four_letter_word, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::policies::{framework, with_policies, Retry, COMBINATIONS};
use tests::{builder, children, connected, init_tracing, packets_received, unique_path, wait_for, Fixture};
use tokio::sync::watch;

fn deadline() -> Duration {
    Timing::new().deadline()
}

fn queue(fw: &CuratorFramework, path: &str) -> SimpleDistributedQueue {
    SimpleDistributedQueue::new(fw, path).expect("valid path")
}

/// The queue items under `path` (children named `qn-...`).
async fn items(fw: &CuratorFramework, path: &str) -> Vec<String> {
    children(fw, path).await.into_iter().filter(|c| c.starts_with(QUEUE_NODE_PREFIX)).collect()
}

/// Whether the server at `connect` holds a watch on exactly `path` (`wchp`).
async fn watched(connect: &str, path: &str) -> bool {
    let out = four_letter_word(connect, "wchp").await.unwrap_or_default();
    out.lines().any(|line| line.trim() == path)
}

/// Waits until the server holds a watch on `path`: a take is waiting on it.
async fn until_watched(connect: &str, path: &str) {
    assert!(eventually(deadline(), || watched(connect, path)).await, "no watch on {path}: no take is waiting");
}

/// The watches the server holds, of every kind (`zk_watch_count` of `mntr`; `wchp` lists data
/// watches only, not children watches).
async fn watch_count(connect: &str) -> u64 {
    tests::zk::mntr_value(&four_letter_word(connect, "mntr").await.expect("mntr"), "zk_watch_count")
}

/// Waits until the server holds more than `baseline` watches: a take is waiting.
async fn until_more_watches(connect: &str, baseline: u64) {
    assert!(eventually(deadline(), || async { watch_count(connect).await > baseline }).await, "no take is waiting");
}

/// Polls the server every 5 ms until `node` is gone.
async fn until_gone(fw: &CuratorFramework, node: &str) {
    let end = tokio::time::Instant::now() + deadline();
    while fw.check_exists().for_path(node).await.expect("exists").is_some() {
        assert!(tokio::time::Instant::now() < end, "{node} is still there");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---- Curator's TestSimpleDistributedQueue ----

/// Follows `TestSimpleDistributedQueue.testPollWithTimeout`: a poll of an empty queue (whose
/// node does not exist) gives nothing once its time is up.
#[tokio::test]
async fn poll_with_timeout() {
    init_tracing();
    let f = Fixture::shared().await;
    let q = queue(&f.fw, &unique_path("testOffer1"));
    let timeout = Duration::from_secs(1);
    let started = tokio::time::Instant::now();
    assert_eq!(q.poll(timeout).await.unwrap(), None);
    assert!(started.elapsed() >= timeout, "the poll waited its time");
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testOffer1`: an item offered and removed on one client.
#[tokio::test]
async fn offer1() {
    init_tracing();
    let f = Fixture::shared().await;
    let q = queue(&f.fw, &unique_path("testOffer1"));
    q.offer(b"Hello World".to_vec()).await.unwrap();
    assert_eq!(q.remove().await.unwrap(), b"Hello World");
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testOffer2`: offered on one client, removed on another.
#[tokio::test]
async fn offer2() {
    init_tracing();
    let f = Fixture::shared().await;
    let other = f.client().await;
    let path = unique_path("testOffer2");
    queue(&f.fw, &path).offer(b"Hello World".to_vec()).await.unwrap();
    assert_eq!(queue(&other, &path).remove().await.unwrap(), b"Hello World");
    other.close().await;
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testTake1`: take returns an item already there.
#[tokio::test]
async fn take1() {
    init_tracing();
    let f = Fixture::shared().await;
    let q = queue(&f.fw, &unique_path("testTake1"));
    q.offer(b"Hello World".to_vec()).await.unwrap();
    assert_eq!(q.take().await.unwrap(), b"Hello World");
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testRemova1`: remove on an empty queue fails. Curator
/// throws `NoSuchElementException`; ours is `CuratorError::NoNode` on `P/qn-`.
#[tokio::test]
async fn remove1() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("testRemove1");
    let removed = queue(&f.fw, &path).remove().await;
    assert!(matches!(&removed, Err(CuratorError::NoNode { path: p }) if *p == format!("{path}/qn-")), "{removed:?}");
    f.close().await;
}

/// Curator's `createNremoveMtest`: `n` items offered on one client, `m` removed on another;
/// the last one removed is item `m - 1`.
async fn create_n_remove_m(dir: &str, n: usize, m: usize) {
    let f = Fixture::shared().await;
    let other = f.client().await;
    let path = unique_path(dir);
    let (producer, consumer) = (queue(&f.fw, &path), queue(&other, &path));
    for i in 0..n {
        producer.offer(format!("Hello World{i}").into_bytes()).await.unwrap();
    }
    let mut data = Vec::new();
    for _ in 0..m {
        data = consumer.remove().await.unwrap();
    }
    assert_eq!(String::from_utf8(data).unwrap(), format!("Hello World{}", m - 1));
    other.close().await;
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testRemove2`.
#[tokio::test]
async fn remove2() {
    init_tracing();
    create_n_remove_m("testRemove2", 10, 2).await;
}

/// Follows `TestSimpleDistributedQueue.testRemove3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove3() {
    init_tracing();
    create_n_remove_m("testRemove3", 1000, 1000).await;
}

/// Curator's `createNremoveMelementTest`: `n` items offered, `m` removed; `element` is then
/// item `m`.
async fn create_n_remove_m_element(dir: &str, n: usize, m: usize) {
    let f = Fixture::shared().await;
    let other = f.client().await;
    let path = unique_path(dir);
    let (producer, consumer) = (queue(&f.fw, &path), queue(&other, &path));
    for i in 0..n {
        producer.offer(format!("Hello World{i}").into_bytes()).await.unwrap();
    }
    for _ in 0..m {
        consumer.remove().await.unwrap();
    }
    assert_eq!(String::from_utf8(consumer.element().await.unwrap()).unwrap(), format!("Hello World{m}"));
    other.close().await;
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testElement1`.
#[tokio::test]
async fn element1() {
    init_tracing();
    create_n_remove_m_element("testElement1", 1, 0).await;
}

/// Follows `TestSimpleDistributedQueue.testElement2`.
#[tokio::test]
async fn element2() {
    init_tracing();
    create_n_remove_m_element("testElement2", 10, 2).await;
}

/// Follows `TestSimpleDistributedQueue.testElement3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn element3() {
    init_tracing();
    create_n_remove_m_element("testElement3", 1000, 500).await;
}

/// Follows `TestSimpleDistributedQueue.testElement4`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn element4() {
    init_tracing();
    create_n_remove_m_element("testElement4", 1000, 999).await;
}

/// Follows `TestSimpleDistributedQueue.testTakeWait1` (and, with `rounds` 2, `testTakeWait2`):
/// a take waits on an empty queue and returns the item offered after it began. Curator sleeps
/// a second before offering; we offer once the server holds the take's watch (a server of the
/// test's own, whose watches are all ours).
async fn take_wait(dir: &str, rounds: usize) {
    let f = Fixture::own().await;
    let baseline = watch_count(&f.connect_string()).await;
    let path = unique_path(dir);
    let q = queue(&f.fw, &path);
    for i in 0..rounds {
        let taker = q.clone();
        let taking = tokio::spawn(async move { taker.take().await });
        until_more_watches(&f.connect_string(), baseline).await;
        assert!(!taking.is_finished(), "the take waits");
        q.offer(format!("Hello World{i}").into_bytes()).await.unwrap();
        let took = tokio::time::timeout(deadline(), taking).await.expect("the take returns").unwrap().unwrap();
        assert_eq!(String::from_utf8(took).unwrap(), format!("Hello World{i}"));
    }
    f.close().await;
}

/// Follows `TestSimpleDistributedQueue.testTakeWait1`.
#[tokio::test]
async fn take_wait1() {
    init_tracing();
    take_wait("testTakeWait1", 1).await;
}

/// Follows `TestSimpleDistributedQueue.testTakeWait2`.
#[tokio::test]
async fn take_wait2() {
    init_tracing();
    take_wait("testTakeWait2", 2).await;
}

/// Follows `TestSimpleDistributedQueue.testHangFromContainerLoss` (CURATOR-308): a producer
/// and a taker share a queue whose node is a container, on a server that reaps containers
/// every 100 ms. Curator sleeps between items so that the container lapses; here every item is
/// offered only once the server has reaped `P` and holds the waiting take's watch again, so
/// each of the 10 takes waits through a reaped parent: it started before the reap (watching
/// `P`'s children) or after it (watching for `P`). All 10 items arrive, in order. Then, while a
/// take waits on a missing `P`, it sends next to nothing (no spin): fewer than 30 requests in
/// a quiet second, session probes and pings of both clients included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_from_container_loss() {
    init_tracing();
    let server = TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap();
    let connect = server.connect_string();
    let (producer_fw, taker_fw) = (tests::client(&connect).await, tests::client(&connect).await);
    let path = unique_path("queue");
    let producer = queue(&producer_fw, &path);
    let taker = queue(&taker_fw, &path);
    let taking = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..10 {
            got.push(taker.take().await.expect("take")[0]);
        }
        got
    });
    for i in 0..10u8 {
        let ready = eventually(deadline(), || async {
            producer_fw.check_exists().for_path(&path).await.unwrap().is_none() && watched(&connect, &path).await
        });
        assert!(ready.await, "item {i}: P was not reaped, or no take waits for it");
        producer.offer(vec![i]).await.unwrap();
    }
    let got = tokio::time::timeout(deadline(), taking).await.expect("every take returned").unwrap();
    assert_eq!(got, (0..10).collect::<Vec<u8>>());

    // No spin while P is missing.
    let q = queue(&taker_fw, &path);
    let waiting = tokio::spawn(async move { q.take().await });
    assert!(
        eventually(deadline(), || async {
            producer_fw.check_exists().for_path(&path).await.unwrap().is_none() && watched(&connect, &path).await
        })
        .await
    );
    let before = packets_received(&connect).await;
    tokio::time::sleep(Duration::from_secs(1)).await; // a measurement window, not a synchronisation
    let sent = packets_received(&connect).await - before;
    assert!(sent < 30, "{sent} requests in a second while a take waits for P");
    producer.offer(b"last".to_vec()).await.unwrap();
    assert_eq!(tokio::time::timeout(deadline(), waiting).await.unwrap().unwrap().unwrap(), b"last");
    producer_fw.close().await;
    taker_fw.close().await;
}

// ---- ours ----

/// Items are taken by sequence number, head first; children of `P` that are not `qn-` nodes
/// are ignored (Curator logs and skips them), also by `peek` and by a waiting take.
#[tokio::test]
async fn order_and_foreign_children() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("order");
    let q = queue(&f.fw, &path);
    f.fw.create().creating_parents_if_needed().for_path(&format!("{path}/other"), b"x".to_vec()).await.unwrap();
    f.fw.create().for_path(&format!("{path}/lock-0000000000"), b"x".to_vec()).await.unwrap();
    for i in 0..5 {
        q.offer(format!("item {i}").into_bytes()).await.unwrap();
    }
    assert_eq!(q.peek().await.unwrap().as_deref(), Some(&b"item 0"[..]));
    for i in 0..5 {
        assert_eq!(q.take().await.unwrap(), format!("item {i}").into_bytes());
    }
    assert_eq!(q.poll(Duration::ZERO).await.unwrap(), None);
    assert_eq!(q.peek().await.unwrap(), None);
    assert_eq!(q.poll(Duration::from_millis(100)).await.unwrap(), None);
    assert_eq!(children(&f.fw, &path).await.len(), 2, "the foreign children stay");
    f.close().await;
}

/// An item node written to since it was made (version 1: the pipelined delete at version 0
/// fails) is still taken once, with the data it holds when deleted.
#[tokio::test]
async fn an_item_written_to_is_taken_with_its_data() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("written");
    let q = queue(&f.fw, &path);
    let node = q.offer(b"old".to_vec()).await.unwrap();
    f.fw.set_data().for_path(&node, b"new".to_vec()).await.unwrap();
    q.offer(b"next".to_vec()).await.unwrap();
    assert_eq!(q.take().await.unwrap(), b"new");
    assert_eq!(q.take().await.unwrap(), b"next");
    assert!(items(&f.fw, &path).await.is_empty());
    f.close().await;
}

/// `peek` and `element` leave the head in place; on an empty queue `peek` is `None` and
/// `element` fails with NoNode on `P/qn-` (Curator: `NoSuchElementException`).
#[tokio::test]
async fn peek_and_element_leave_the_head() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("peek");
    let q = queue(&f.fw, &path);
    assert_eq!(q.peek().await.unwrap(), None);
    assert!(matches!(q.element().await, Err(CuratorError::NoNode { .. })));
    q.offer(b"a".to_vec()).await.unwrap();
    q.offer(b"b".to_vec()).await.unwrap();
    for _ in 0..2 {
        assert_eq!(q.peek().await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(q.element().await.unwrap(), b"a");
    }
    assert_eq!(items(&f.fw, &path).await.len(), 2);
    assert_eq!(q.remove().await.unwrap(), b"a");
    assert_eq!(q.element().await.unwrap(), b"b");
    f.close().await;
}

/// Bad input is a typed error, never a panic, and nothing is sent: a relative path, data over
/// the framework's limit.
#[tokio::test]
async fn bad_input() {
    init_tracing();
    let f = Fixture::shared().await;
    assert!(matches!(SimpleDistributedQueue::new(&f.fw, "queue"), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(SimpleDistributedQueue::new(&f.fw, "/a//b"), Err(CuratorError::InvalidPath { .. })));
    let path = unique_path("bad");
    let q = queue(&f.fw, &path);
    let offered = q.offer(vec![0u8; 2 * 1024 * 1024]).await;
    assert!(matches!(offered, Err(CuratorError::DataTooLarge { .. })), "{offered:?}");
    assert!(f.fw.check_exists().for_path(&path).await.unwrap().is_none(), "nothing was created");
    f.close().await;
}

/// What the takers of a run received: (taker, item) in the order each got them.
type Received = Arc<Mutex<Vec<(usize, String)>>>;

/// Takes from `q` until `stop` turns true, recording into `received`; a take still waiting
/// then is dropped. Retryable errors (a cut outlasting a short retry policy) are counted and
/// the taker goes on; any other fails the test.
fn spawn_taker(
    id: usize,
    q: SimpleDistributedQueue,
    received: Received,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut errors = 0;
        loop {
            let took = tokio::select! {
                took = q.take() => took,
                _ = stop.wait_for(|s| *s) => return errors,
            };
            match took {
                Ok(item) => received.lock().unwrap().push((id, String::from_utf8(item).unwrap())),
                Err(err) if err.is_retryable() => errors += 1,
                Err(err) => panic!("taker {id}: {err}"),
            }
        }
    })
}

/// How many times each item was received.
type Counts = BTreeMap<String, usize>;

/// The item numbers each (taker, producer) pair got, in the order the taker got them.
type Orders = BTreeMap<(usize, String), Vec<usize>>;

/// Each item's count, and each taker's items of each producer in the order it got them.
fn tally(received: &Received) -> (Counts, Orders) {
    let mut counts = Counts::new();
    let mut order = Orders::new();
    for (taker, item) in received.lock().unwrap().iter() {
        *counts.entry(item.clone()).or_insert(0) += 1;
        if let Some((producer, n)) = item.split_once('-') {
            order.entry((*taker, producer.to_string())).or_default().push(n.parse().unwrap_or(0));
        }
    }
    (counts, order)
}

const TAKER_SESSIONS: usize = 4;
const TAKERS_PER_SESSION: usize = 2;
const PRODUCERS: usize = 3;
const ITEMS_PER_PRODUCER: usize = 40;

/// Many takers (4 sessions, 2 takers each) and 3 producers (each its own session, 40 items
/// each) on one queue, at once: every item is delivered exactly once, and each taker got each
/// producer's items in the order they were offered (FIFO). No take was uncertain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_takers_and_producers_deliver_every_item_once() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("many");
    let received: Received = Arc::default();
    let (stop_tx, stop) = watch::channel(false);
    let taker_fws = join_all((0..TAKER_SESSIONS).map(|_| tests::client(&connect))).await;
    let mut takers = Vec::new();
    let mut queues = Vec::new();
    for (s, fw) in taker_fws.iter().enumerate() {
        for t in 0..TAKERS_PER_SESSION {
            let q = queue(fw, &path);
            queues.push(q.clone());
            takers.push(spawn_taker(s * TAKERS_PER_SESSION + t, q, received.clone(), stop.clone()));
        }
    }
    let producer_fws = join_all((0..PRODUCERS).map(|_| tests::client(&connect))).await;
    join_all(producer_fws.iter().enumerate().map(|(p, fw)| {
        let q = queue(fw, &path);
        async move {
            for i in 0..ITEMS_PER_PRODUCER {
                q.offer(format!("p{p}-{i:03}").into_bytes()).await.unwrap();
            }
        }
    }))
    .await;
    let total = PRODUCERS * ITEMS_PER_PRODUCER;
    assert!(
        eventually(deadline(), || async { received.lock().unwrap().len() >= total }).await,
        "only {} of {total} items taken",
        received.lock().unwrap().len()
    );
    stop_tx.send_replace(true);
    for taker in join_all(takers).await {
        assert_eq!(taker.unwrap(), 0, "no taker saw an error");
    }
    let (counts, order) = tally(&received);
    assert_eq!(counts.len(), total, "every item delivered");
    assert!(counts.values().all(|&n| n == 1), "an item delivered twice: {counts:?}");
    for ((taker, producer), got) in &order {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "taker {taker} got {producer}'s items out of order: {got:?}");
    }
    assert!(items(&producer_fws[0], &path).await.is_empty());
    assert!(queues.iter().all(|q| q.uncertain_takes() == 0));
    for fw in taker_fws.into_iter().chain(producer_fws) {
        fw.close().await;
    }
}

/// A take dropped while it waits (by a timeout around it, or a poll whose time is up) loses
/// nothing and leaves no watch: the server drops the queue's children watch once no take
/// waits (counted on a server of the test's own), and the item offered afterwards is there
/// for the next take.
#[tokio::test]
async fn a_take_dropped_while_waiting_loses_nothing() {
    init_tracing();
    let f = Fixture::own().await;
    let path = unique_path("dropped-wait");
    let connect = f.connect_string();
    let q = queue(&f.fw, &path);
    q.offer(b"make P".to_vec()).await.unwrap();
    q.remove().await.unwrap();
    let baseline = watch_count(&connect).await;
    tokio::select! {
        took = q.take() => panic!("the take of an empty queue returned {took:?}"),
        () = until_more_watches(&connect, baseline) => {}
    }
    let none_left = || async { watch_count(&connect).await == baseline };
    assert!(eventually(deadline(), none_left).await, "the dropped take's watch stays");
    assert_eq!(q.poll(Duration::from_millis(200)).await.unwrap(), None);
    assert!(eventually(deadline(), none_left).await, "the poll's watch stays");
    q.offer(b"item".to_vec()).await.unwrap();
    assert_eq!(q.take().await.unwrap(), b"item");
    assert_eq!(q.uncertain_takes(), 0);
    f.close().await;
}

/// A framework behind its own proxy, with a session long enough (20 s) that a proxy latency of
/// 700 ms each way does not look like a dead connection to zookeeper-client.
async fn slow_link() -> (ChaosProxy, CuratorFramework) {
    let proxy = ChaosProxy::start(&TestingServer::shared().connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string()).session_timeout(Duration::from_secs(20))).await;
    (proxy, fw)
}

const LATENCY: Duration = Duration::from_millis(700);

/// A take dropped after its delete was applied but before its reply came (the reply held
/// 700 ms by the proxy) loses nothing: the item is offered again, at the tail, and the next take
/// gets it. This lost the item when a dropped take's requests were simply dropped (checked
/// with `InFlight`'s drop made a no-op).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_dropped_while_its_delete_is_on_the_wire_loses_nothing() {
    init_tracing();
    let f = Fixture::shared().await;
    let (proxy, slow) = slow_link().await;
    let path = unique_path("dropped-claim");
    let node = queue(&f.fw, &path).offer(b"precious".to_vec()).await.unwrap();
    let q = queue(&slow, &path);
    proxy.set_latency(LATENCY);
    tokio::select! {
        took = q.take() => panic!("the take returned before the drop: {took:?}"),
        () = until_gone(&f.fw, &node) => {}
    }
    proxy.set_latency(Duration::ZERO);
    assert!(
        eventually(deadline(), || async { items(&f.fw, &path).await.len() == 1 }).await,
        "the item was not offered again"
    );
    assert_ne!(items(&f.fw, &path).await[0], curator_core::path::node_name(&node), "a new node, at the tail");
    assert_eq!(queue(&f.fw, &path).take().await.unwrap(), b"precious");
    assert_eq!(q.uncertain_takes(), 0);
    slow.close().await;
    f.close().await;
}

/// What at most once means when a delete's reply is lost: the connection is cut after the
/// server applied the take's delete and before its reply came. Tried again, the node is gone,
/// and the take cannot tell whether its own delete or another taker's removed it: it moves on
/// and waits for the next item. The first item is lost, the take is counted in
/// `uncertain_takes` (and logged), and no item is delivered twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_delete_reply_may_lose_the_item_and_is_counted() {
    init_tracing();
    let f = Fixture::shared().await;
    let (proxy, slow) = slow_link().await;
    let path = unique_path("lost-reply");
    let node = queue(&f.fw, &path).offer(b"first".to_vec()).await.unwrap();
    let q = queue(&slow, &path);
    proxy.set_latency(LATENCY);
    let taker = q.clone();
    let taking = tokio::spawn(async move { taker.take().await });
    until_gone(&f.fw, &node).await;
    proxy.cut();
    proxy.set_latency(Duration::ZERO);
    assert!(eventually(deadline(), || async { q.uncertain_takes() == 1 }).await, "the uncertain take was not counted");
    assert!(!taking.is_finished(), "the take waits for the next item");
    queue(&f.fw, &path).offer(b"second".to_vec()).await.unwrap();
    assert_eq!(tokio::time::timeout(deadline(), taking).await.unwrap().unwrap().unwrap(), b"second");
    assert!(items(&f.fw, &path).await.is_empty(), "the first item is gone, not delivered");
    slow.close().await;
    f.close().await;
}

/// Two takers (each its own session) behind one proxy, under `policy` and `retry`.
/// Round 1: both wait on an empty queue when their connections are cut; 10 items are offered
/// while they are suspended; once back, they take all 10, each exactly once. Round 2: 30 items
/// are queued and the connections are cut while the takers take them: no item is delivered
/// twice, and every item missing is one of the takes counted uncertain (a delete applied whose
/// reply the cut lost).
async fn cut_while_takers_wait(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("cut");
    let proxy = ChaosProxy::start(&connect).await.expect("proxy");
    let mut fws = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..2 {
        let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
        streams.push(fw.connection_state_stream());
        fws.push(fw);
    }
    let producer = framework(&connect, policy, retry).await;
    let p = queue(&producer, &path);
    let received: Received = Arc::default();
    let (stop_tx, stop) = watch::channel(false);
    let queues: Vec<_> = fws.iter().map(|fw| queue(fw, &path)).collect();
    let takers: Vec<_> =
        queues.iter().enumerate().map(|(i, q)| spawn_taker(i, q.clone(), received.clone(), stop.clone())).collect();
    until_watched(&connect, &path).await;

    // Round 1: cut while waiting.
    proxy.set_reject(true);
    proxy.cut();
    for states in &mut streams {
        wait_for(states, ConnectionState::Suspended, |_| true).await;
    }
    for i in 0..10 {
        p.offer(format!("a-{i:03}").into_bytes()).await.unwrap();
    }
    proxy.pass();
    for states in &mut streams {
        wait_for(states, ConnectionState::Reconnected, |_| true).await;
    }
    assert!(
        eventually(deadline(), || async { received.lock().unwrap().len() >= 10 }).await,
        "{case}: {} of 10 taken after the cut",
        received.lock().unwrap().len()
    );
    let (counts, _) = tally(&received);
    assert_eq!(counts.len(), 10, "{case}: {counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{case}: delivered twice: {counts:?}");
    assert!(queues.iter().all(|q| q.uncertain_takes() == 0), "{case}");

    // Round 2: cut while taking (a 20 ms latency slows the takers down, so that the cut finds
    // them in the middle of the 30 items).
    proxy.set_latency(Duration::from_millis(20));
    for i in 0..30 {
        p.offer(format!("b-{i:03}").into_bytes()).await.unwrap();
    }
    assert!(eventually(deadline(), || async { received.lock().unwrap().len() >= 15 }).await, "{case}");
    proxy.cut();
    proxy.set_latency(Duration::ZERO);
    let settled = eventually(deadline(), || async {
        let uncertain: u64 = queues.iter().map(SimpleDistributedQueue::uncertain_takes).sum();
        items(&producer, &path).await.is_empty() && received.lock().unwrap().len() as u64 + uncertain >= 40
    });
    assert!(settled.await, "{case}: items left {:?}", items(&producer, &path).await);
    stop_tx.send_replace(true);
    for taker in join_all(takers).await {
        taker.expect("taker task"); // retryable errors during the cut are allowed
    }
    let (counts, _) = tally(&received);
    let uncertain: u64 = queues.iter().map(SimpleDistributedQueue::uncertain_takes).sum();
    assert!(counts.values().all(|&n| n == 1), "{case}: delivered twice: {counts:?}");
    let lost = 40 - counts.len() as u64;
    assert!(lost <= uncertain, "{case}: {lost} items lost, {uncertain} takes uncertain");
    tracing::info!(case, lost, uncertain, "cut while taking");
    for fw in fws.into_iter().chain([producer]) {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cut_while_takers_wait_and_take() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| cut_while_takers_wait(policy, retry))).await;
}
