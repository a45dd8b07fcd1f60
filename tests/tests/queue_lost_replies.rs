//! Queues when a write's reply is lost (docs/architecture.md sections 4.4 and 17), against a
//! real ZooKeeper, under every combination of error policy and retry policy
//! (`tests::policies::COMBINATIONS`):
//! - a lock node is ours by its data (the take's id), not by its session: a `remove` beside a
//!   consumer on one framework never takes the consumer's lock for its own; a lock create that
//!   never reached the server is sent again once the node is found missing;
//! - the fence's end is decided by the queue handle's write tag after a lost reply: a release
//!   is never sent again, so it never deletes another consumer's lock; a final multi whose
//!   session ended before the connection came back is still decided exactly (consumed, removed);
//! - a lock-safe take costs three requests (lock create, getData, the final multi): the tag rides
//!   in the multi;
//! - a plain take whose delete never reached the server takes the item later, with no alarm; one
//!   whose delete was applied reports the item as maybe lost;
//! - a put or an offer whose create's reply was lost leaves its item once and reports the
//!   outcome unknown, never two items.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{DistributedQueue, QueueEvent, QueuePutEvent, SimpleDistributedQueue, StringSerializer};
use curator_test::{eventually, expire_session, ChaosProxy, RequestKind, TestingServer, Timing};
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::queues::lock_nodes;
use tests::{builder, children, client, connected, init_tracing, unique_path};
use tokio::sync::{mpsc, Semaphore};

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// A framework behind its own proxy, under `policy` and `retry`.
async fn behind_proxy(policy: ErrorPolicy, retry: Retry) -> (ChaosProxy, CuratorFramework) {
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    (proxy, fw)
}

/// Waits until the proxy has read a request of `kind` on a path under `under`, then cuts every
/// connection: with a latency set, the request is dropped before it reaches the server.
async fn cut_once_sent(proxy: &ChaosProxy, kind: RequestKind, under: &str) {
    let seen = eventually(deadline(), || async {
        proxy.take_seen_requests().iter().any(|r| r.is(kind) && r.path.as_deref().is_some_and(|p| p.starts_with(under)))
    });
    assert!(seen.await, "no {kind:?} under {under}");
    proxy.cut();
    proxy.set_latency(Duration::ZERO);
    proxy.record_requests(false);
}

/// A lock-safe id queue on `fw` whose consumer sends each item to the returned receiver, then
/// waits for a permit of `gate`; `done` counts the runs that returned.
fn gated_queue(
    fw: &CuratorFramework,
    path: &str,
    gate: &Arc<Semaphore>,
    done: &Arc<AtomicUsize>,
) -> (curator_recipes::DistributedIdQueue<String>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (gate, done) = (gate.clone(), done.clone());
    let queue = DistributedQueue::builder(fw, path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .consumer(move |item: String| {
            let (tx, gate, done) = (tx.clone(), gate.clone(), done.clone());
            async move {
                let _ = tx.send(item);
                gate.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())?;
                done.fetch_add(1, Ordering::SeqCst);
                Ok::<(), String>(())
            }
        })
        .build_id_queue()
        .expect("queue");
    (queue, rx)
}

/// One framework holds a consumer and an id queue for `remove` on the same path (so their
/// takes share a session). The consumer holds the item; the remove's lock create is dropped
/// before it reaches the server (a latency, then a cut), and its retry meets the consumer's
/// lock node, an ephemeral of the same session. The remove must not take it for its own: before
/// lock nodes held the take's id, it did (`NodeExists` after a retry, owner our session: "ours"),
/// deleted the item from the consumer's hands and returned 1 while the consumer went on with it.
/// Under `Session` the consumer holds its lock across the cut, so the remove finds it held (0);
/// under `Standard` the consumer lets go at the suspension and either may have the item: it is
/// removed or consumed, once.
async fn remove_beside_a_consumer(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-one-session");
    let locks = format!("{path}-locks");
    let (gate, done) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
    let (consumer, mut taken) = gated_queue(&fw, &path, &gate, &done);
    let remover = DistributedQueue::builder(&fw, &path, StringSerializer).lock_path(&locks).build_id_queue().unwrap();
    remover.start().unwrap();
    remover.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build_id_queue().unwrap();
    producer.start().unwrap();
    producer.put(&"item".to_string(), "x").await.expect("put");
    consumer.start().unwrap();
    tokio::time::timeout(deadline(), taken.recv()).await.expect("the consumer holds the item").expect("open");

    proxy.record_requests(true);
    proxy.set_latency(Duration::from_millis(200));
    let removing = tokio::spawn(async move {
        let removed = remover.remove("x").await;
        (remover, removed)
    });
    cut_once_sent(&proxy, RequestKind::Create, &format!("{locks}/")).await;
    let (remover, removed) = tokio::time::timeout(deadline(), removing).await.expect("remove returns").unwrap();
    let removed = removed.unwrap_or_else(|e| panic!("{case}: remove failed: {e}"));
    if policy == ErrorPolicy::Session {
        assert_eq!(removed, 0, "{case}: the remove took the consumer's lock on the same session for its own");
    }
    gate.add_permits(100);
    let settled = eventually(deadline(), || async {
        children(&other, &path).await.is_empty() && (removed == 1 || done.load(Ordering::SeqCst) == 1)
    });
    assert!(settled.await, "{case}: the item was neither removed nor consumed");
    consumer.close().await;
    assert_eq!(removed + done.load(Ordering::SeqCst), 1, "{case}: removed {removed}, consumed {done:?}");
    remover.close().await;
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remove_beside_a_consumer_on_one_session_never_takes_its_lock() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        remove_beside_a_consumer(policy, retry).await;
    }
}

/// A lock-safe take whose lock create is dropped before it reaches the server (a latency, then
/// a cut). The core cannot tell that from a create applied and gone since (the node is missing)
/// and ends it with `OutcomeUnknown`; the queue then reads the lock node, finds none, so no lock
/// of ours stands, and creates it again: the item is consumed once, with no error reported.
async fn lock_create_dropped(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-lock-dropped");
    let locks = format!("{path}-locks");
    let (tx, mut consumed) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&locks)
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move { tx.send(item).map_err(|e| e.to_string()) }
        })
        .build()
        .unwrap();
    let log: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let sink = log.clone();
    queue.add_listener(move |event| sink.lock().unwrap().push(event.clone()));
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();

    proxy.record_requests(true);
    proxy.set_latency(Duration::from_millis(200));
    producer.put(&"item".to_string()).await.expect("put");
    cut_once_sent(&proxy, RequestKind::Create, &format!("{locks}/")).await;
    let item = tokio::time::timeout(deadline(), consumed.recv()).await.expect("consumed").expect("open");
    assert_eq!(item, "item", "{case}");
    assert!(eventually(deadline(), || async { children(&other, &path).await.is_empty() }).await, "{case}");
    let errors: Vec<_> =
        log.lock().unwrap().iter().filter(|e| matches!(e, QueueEvent::Error { .. })).cloned().collect();
    assert!(errors.is_empty(), "{case}: errors reported: {errors:?}");
    queue.close().await;
    assert!(consumed.try_recv().is_err(), "{case}: consumed twice");
    assert!(lock_nodes(&other, &locks).await.is_empty(), "{case}: a lock node left");
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_create_dropped_before_the_server_is_sent_again() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        lock_create_dropped(policy, retry).await;
    }
}

/// A take let go by `close` (its consumer holds the item) releases its lock with a delete whose
/// reply is lost (applied; the connection closed); another consumer makes the lock name again
/// before the take's session is back. The take must not send its release again: it would delete
/// the other consumer's lock. The handle's write tag decides that the release was applied.
/// Before the lock's id decided it, the release was resent (it deleted the other's lock).
async fn release_lost_then_lock_taken(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-release-lost");
    let locks = format!("{path}-locks");
    let (gate, done) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
    let (queue, mut taken) = gated_queue(&fw, &path, &gate, &done);
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build_id_queue().unwrap();
    producer.start().unwrap();
    producer.put(&"item".to_string(), "x").await.expect("put");
    tokio::time::timeout(deadline(), taken.recv()).await.expect("taken").expect("open");
    let names = lock_nodes(&other, &locks).await;
    let [name] = names.as_slice() else { panic!("{case}: one lock expected: {names:?}") };
    let lock = format!("{locks}/{name}");

    proxy.swallow_next_reply_to(RequestKind::Multi);
    proxy.set_reject(true);
    let closing = tokio::spawn(async move { queue.close().await });
    assert!(eventually(deadline(), || async { !proxy.swallow_pending() }).await, "{case}: no release");
    let gone = || async { other.check_exists().for_path(&lock).await.expect("exists").is_none() };
    assert!(eventually(deadline(), gone).await, "{case}: the release was not applied");
    other.create().with_mode(CreateMode::Ephemeral).for_path(&lock, Vec::new()).await.expect("the other's lock");
    proxy.pass();
    tokio::time::timeout(deadline(), closing).await.expect("close returns").unwrap();

    let stat = other.check_exists().for_path(&lock).await.expect("exists");
    let other_session = other.session().await.expect("session").id();
    assert_eq!(stat.map(|s| s.ephemeral_owner), Some(other_session), "{case}: the other consumer's lock was deleted");
    assert_eq!(children(&other, &path).await.len(), 1, "{case}: a released item stays");
    assert_eq!(done.load(Ordering::SeqCst), 0, "{case}: the consumer ran to its end");
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_lost_leaves_anothers_lock() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        release_lost_then_lock_taken(policy, retry).await;
    }
}

/// A fenced final multi (a take's, then a `remove`'s) is applied, its reply lost, and the
/// session expires before the connection is back. The queue handle's write tag, a persistent
/// node bumped by the same multi, still tells on the new session: the take reports the item
/// `Consumed` (neither `LockLost` nor an unknown outcome), and the remove returns 1. Before the
/// tag (the lock's id decided, and it went with the session) the take reported an error whose
/// `outcome_unknown()` holds and the remove failed with one; before that, the take reported
/// `LockLost` and the remove returned 0.
async fn final_multi_lost_then_session_ends(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-final-lost");
    let (gate, done) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
    let (queue, mut taken) = gated_queue(&fw, &path, &gate, &done);
    let mut events = queue.events();
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build_id_queue().unwrap();
    producer.start().unwrap();
    producer.put(&"taken".to_string(), "x").await.expect("put");
    tokio::time::timeout(deadline(), taken.recv()).await.expect("taken").expect("open");
    let [item] = children(&other, &path).await.try_into().expect("one item");

    let info = fw.session().await.expect("session").client().session().clone();
    proxy.swallow_next_reply_to(RequestKind::Multi);
    proxy.set_reject(true);
    gate.add_permits(1);
    assert!(eventually(deadline(), || async { !proxy.swallow_pending() }).await, "{case}: no final multi");
    assert!(eventually(deadline(), || async { children(&other, &path).await.is_empty() }).await, "{case}");
    expire_session(&shared(), &info).await.expect("expire");
    proxy.pass();
    let outcome = tokio::time::timeout(deadline(), async {
        while let Some(event) = events.next().await {
            match event {
                QueueEvent::Error { ref error } if error.path() == Some(&format!("{path}/{item}")) => {
                    return Some(event)
                }
                QueueEvent::Consumed { .. } | QueueEvent::LockLost { .. } => return Some(event),
                _ => {}
            }
        }
        None
    })
    .await
    .expect("an outcome");
    assert!(
        matches!(&outcome, Some(QueueEvent::Consumed { node }) if *node == item),
        "{case}: the take's outcome: {outcome:?}"
    );
    queue.close().await;

    // The same for a remove.
    producer.put(&"removed".to_string(), "y").await.expect("put");
    let remover = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .build_id_queue()
        .unwrap();
    let info = fw.session().await.expect("session").client().session().clone();
    proxy.swallow_next_reply_to(RequestKind::Multi);
    proxy.set_reject(true);
    let removing = tokio::spawn(async move { remover.remove("y").await });
    assert!(eventually(deadline(), || async { !proxy.swallow_pending() }).await, "{case}: no fenced delete");
    assert!(eventually(deadline(), || async { children(&other, &path).await.is_empty() }).await, "{case}");
    expire_session(&shared(), &info).await.expect("expire");
    proxy.pass();
    let removed = tokio::time::timeout(deadline(), removing).await.expect("remove returns").unwrap();
    assert!(matches!(removed, Ok(1)), "{case}: the remove's outcome: {removed:?}");
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_multi_lost_with_its_session_is_decided_by_the_write_tag() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        final_multi_lost_then_session_ends(policy, retry).await;
    }
}

/// A plain queue on `fw` whose consumer sends each item to the returned receiver, and the log
/// of its events.
fn plain_queue(
    fw: &CuratorFramework,
    path: &str,
) -> (DistributedQueue<String>, mpsc::UnboundedReceiver<String>, Arc<Mutex<Vec<QueueEvent>>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(fw, path, StringSerializer)
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move { tx.send(item).map_err(|e| e.to_string()) }
        })
        .build()
        .expect("queue");
    let log: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let sink = log.clone();
    queue.add_listener(move |event| sink.lock().unwrap().push(event.clone()));
    (queue, rx, log)
}

/// Whether `log` holds an error on `node` whose outcome is unknown.
fn reported_unknown(log: &Mutex<Vec<QueueEvent>>, node: &str) -> bool {
    log.lock().unwrap().iter().any(|e| {
        matches!(e, QueueEvent::Error { error: error @ CuratorError::OutcomeUnknown { .. } } if error.path() == Some(node))
    })
}

/// A plain take's delete is dropped before it reaches the server (a latency, then a cut): the
/// core ends it with `OutcomeUnknown`, but the item's node is still there, so the take knows
/// its delete was not applied: the item is taken again and consumed once, and no item is
/// reported maybe lost. Before, the take reported an `OutcomeUnknown` error for an item it
/// then consumed. Then a take whose delete is applied and its reply lost: the item is not
/// consumed and is reported maybe lost (an `OutcomeUnknown` error on its path).
async fn plain_take_delete_lost(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-plain-lost");
    let (queue, mut consumed, log) = plain_queue(&fw, &path);
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();

    proxy.record_requests(true);
    proxy.set_latency(Duration::from_millis(200));
    producer.put(&"kept".to_string()).await.expect("put");
    let [node] = children(&other, &path).await.try_into().expect("one item");
    cut_once_sent(&proxy, RequestKind::Delete, &format!("{path}/")).await;
    let item = tokio::time::timeout(deadline(), consumed.recv()).await.expect("consumed").expect("open");
    assert_eq!(item, "kept", "{case}");
    assert!(
        !reported_unknown(&log, &format!("{path}/{node}")),
        "{case}: a delete never applied reported as maybe lost"
    );

    proxy.swallow_next_reply_to(RequestKind::Delete);
    producer.put(&"lost".to_string()).await.expect("put");
    // The second node of a new queue (the consumer may have taken it already).
    let node = format!("{path}/queue-0000000001");
    assert!(eventually(deadline(), || async { reported_unknown(&log, &node) }).await, "{case}: not reported");
    assert!(children(&other, &path).await.is_empty(), "{case}");
    queue.close().await;
    assert!(consumed.try_recv().is_err(), "{case}: an item whose delete's reply was lost was consumed");
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_take_whose_delete_reply_is_lost_is_decided_by_the_node() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        plain_take_delete_lost(policy, retry).await;
    }
}

/// A put, a put in the background and a `SimpleDistributedQueue` offer whose create is applied
/// and its reply lost: each reports an outcome unknown (the background put as `Failed`), and
/// its item is in the queue once. The core ends an unprotected sequential create so
/// (docs/architecture.md section 4.4); before, the create was sent again and the item was there
/// twice.
async fn puts_whose_reply_is_lost(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let (proxy, fw) = behind_proxy(policy, retry).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-put-lost");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    let mut puts = queue.put_events();
    queue.start().unwrap();
    queue.ready().await.expect("ready");

    proxy.swallow_next_reply_to(RequestKind::Create);
    let put = queue.put(&"foreground".to_string()).await;
    assert!(matches!(&put, Err(e) if e.outcome_unknown()), "{case}: {put:?}");
    assert_eq!(children(&other, &path).await.len(), 1, "{case}: the foreground put's item");

    proxy.swallow_next_reply_to(RequestKind::Create);
    queue.put_in_background("background".to_string()).expect("put");
    let heard = tokio::time::timeout(deadline(), puts.next()).await.expect("heard").expect("open");
    assert!(matches!(&heard, QueuePutEvent::Failed { error, .. } if error.outcome_unknown()), "{case}: {heard:?}");
    assert!(queue.flush_puts(deadline()).await, "{case}");
    assert_eq!(children(&other, &path).await.len(), 2, "{case}: the background put's item");
    queue.close().await;

    let simple_path = unique_path("queue-offer-lost");
    let simple = SimpleDistributedQueue::new(&fw, &simple_path).unwrap();
    simple.offer(b"first".to_vec()).await.expect("offer");
    proxy.swallow_next_reply_to(RequestKind::Create);
    let offered = simple.offer(b"second".to_vec()).await;
    assert!(matches!(&offered, Err(e) if e.outcome_unknown()), "{case}: {offered:?}");
    assert_eq!(children(&other, &simple_path).await.len(), 2, "{case}: the offer's item");
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_whose_reply_is_lost_is_there_once_and_reported_unknown() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        puts_whose_reply_is_lost(policy, retry).await;
    }
}

/// The requests of lock-safe takes, counted at a proxy: the items are put before the consumer
/// starts, so that one listing finds them all; each take then sends its lock create, its
/// getData and its one fenced multi, and nothing else. Whatever decides a lost reply must ride
/// in those requests (docs/architecture.md section 17.2): a per-take read or write of its own
/// would show here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_safe_take_sends_three_requests() {
    const ITEMS: usize = 20;
    init_tracing();
    let (proxy, fw) = behind_proxy(ErrorPolicy::Standard, Retry::Default).await;
    let other = client(&shared()).await;
    let path = unique_path("queue-requests");
    let locks = format!("{path}-locks");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.ready().await.expect("ready");
    for i in 0..ITEMS {
        producer.put(&i.to_string()).await.expect("put");
    }
    let (tx, mut consumed) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&locks)
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move { tx.send(item).map_err(|e| e.to_string()) }
        })
        .build()
        .unwrap();
    proxy.record_requests(true);
    queue.start().unwrap();
    for _ in 0..ITEMS {
        tokio::time::timeout(deadline(), consumed.recv()).await.expect("consumed").expect("open");
    }
    assert!(eventually(deadline(), || async { children(&other, &path).await.is_empty() }).await);
    queue.close().await;
    proxy.record_requests(false);
    let seen = proxy.take_seen_requests();
    let under = |prefix: &str| {
        let prefix = format!("{prefix}/");
        move |r: &&curator_test::SeenRequest| r.path.as_deref().is_some_and(|p| p.starts_with(&prefix))
    };
    let lock_creates = seen.iter().filter(|r| r.is(RequestKind::Create)).filter(under(&locks)).count();
    let item_reads = seen.iter().filter(|r| r.is(RequestKind::GetData)).filter(under(&path)).count();
    let multis = seen.iter().filter(|r| r.is(RequestKind::Multi)).count();
    let others: Vec<_> = seen
        .iter()
        .filter(|r| {
            !(r.is(RequestKind::Multi)
                || r.is(RequestKind::Create) && under(&locks)(r)
                || r.is(RequestKind::GetData) && under(&path)(r))
        })
        .collect();
    tracing::info!(lock_creates, item_reads, multis, ?others, "requests of {ITEMS} lock-safe takes");
    assert_eq!((lock_creates, item_reads, multis), (ITEMS, ITEMS, ITEMS), "per take: {others:?}");
    assert!(others.len() < 10, "requests besides the takes' own: {others:?}");
    producer.close().await;
    fw.close().await;
    other.close().await;
}
