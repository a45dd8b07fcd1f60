//! `DistributedQueue` under faults, against a real ZooKeeper, under every combination of error
//! policy and retry policy (`tests::policies::COMBINATIONS`):
//! - 4 lock-safe consumers, each with its own session behind its own proxy; one consumer's
//!   session is expired while its consumer is in the middle of an item, and two others have
//!   their connections cut: no item is lost and none is completed twice (the fenced final
//!   delete, CURATOR-605), and the expired consumer reports the item as `LockLost`, its
//!   function stopped (dropped) before another consumer could take the item;
//! - an item node with bad framing is reported to the listeners and skipped (deleted, as
//!   Curator does), and the queue goes on, in plain and in lock-safe mode.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{
    DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue, QueueEvent, StringSerializer,
};
use curator_test::{eventually, expire_session, ChaosProxy, RequestKind, TestingServer, Timing};
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::queues::lock_nodes;
use tests::{builder, children, client, connected, init_tracing, unique_path, wait_for};
use tokio::sync::{mpsc, Semaphore};

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// Items put before the consumers start.
const ITEMS: usize = 40;

/// What the four consumers' queues reported, by consumer.
type Events = Arc<Mutex<Vec<(usize, QueueEvent)>>>;

/// One consumer: its proxy, framework, state stream and queue.
struct Consumer {
    proxy: ChaosProxy,
    fw: CuratorFramework,
    states: curator_core::ConnectionStateStream,
    queue: DistributedQueue<String>,
    /// Copies the queue's events into the shared log; ends once the queue is closed.
    relay: tokio::task::JoinHandle<()>,
}

/// How the test holds items in the consumers' hands.
#[derive(Clone)]
struct Hands {
    /// Consumer 0 sends its first item here, then waits on `gate`.
    held: mpsc::UnboundedSender<String>,
    gate: Arc<Semaphore>,
    /// Set if consumer 0's function got past `gate`: ran to its end on the item it held.
    held_returned: Arc<std::sync::atomic::AtomicBool>,
    /// The item consumer 0 holds, once known: another consumer that gets it sends it to
    /// `retaken`, then waits on `gate2`.
    held_item: Arc<Mutex<Option<String>>>,
    retaken: mpsc::UnboundedSender<usize>,
    gate2: Arc<Semaphore>,
}

/// A lock-safe consumer `index` behind a proxy of its own, holding items as `hands` says; the
/// others do a little work per item.
async fn consumer(
    index: usize,
    path: &str,
    policy: ErrorPolicy,
    retry: Retry,
    hands: Hands,
    events: Events,
) -> Consumer {
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    let states = fw.connection_state_stream();
    let first = Arc::new(Mutex::new(index == 0));
    let queue = DistributedQueue::builder(&fw, path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .consumer(move |item: String| {
            let (first, hands) = (first.clone(), hands.clone());
            async move {
                let hold = std::mem::replace(&mut *first.lock().unwrap(), false);
                let retaken = hands.held_item.lock().unwrap().as_ref() == Some(&item);
                if hold {
                    *hands.held_item.lock().unwrap() = Some(item.clone());
                    let _ = hands.held.send(item);
                    hands.gate.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())?;
                    hands.held_returned.store(true, std::sync::atomic::Ordering::SeqCst);
                } else if retaken {
                    let _ = hands.retaken.send(index);
                    hands.gate2.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())?;
                } else {
                    // Work, not synchronisation: lets the four consumers share the items.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok::<(), String>(())
            }
        })
        .build()
        .unwrap();
    let mut stream = queue.events();
    let relay = tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            events.lock().unwrap().push((index, event));
        }
    });
    Consumer { proxy, fw, states, queue, relay }
}

/// Cuts the proxy's connections until the client saw the suspension, then lets it reconnect.
async fn cut(c: &mut Consumer) {
    c.proxy.set_reject(true);
    c.proxy.cut();
    wait_for(&mut c.states, ConnectionState::Suspended, |_| true).await;
    c.proxy.pass();
    wait_for(&mut c.states, ConnectionState::Reconnected, |_| true).await;
}

/// The scenario of the module docs; returns (items lost, items completed twice).
async fn expiry_and_cuts(policy: ErrorPolicy, retry: Retry) -> (usize, usize) {
    let case = format!("{policy:?}/{retry:?}");
    let path = unique_path("queue-faults");
    let producer_fw = client(&shared()).await;
    let producer = DistributedQueue::builder(&producer_fw, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.ready().await.unwrap();
    for i in 0..ITEMS {
        producer.put(&i.to_string()).await.unwrap();
    }
    let put_nodes = children(&producer_fw, &path).await;
    assert_eq!(put_nodes.len(), ITEMS);

    let events: Events = Arc::default();
    let (held_tx, mut held_rx) = mpsc::unbounded_channel();
    let (retaken_tx, mut retaken_rx) = mpsc::unbounded_channel();
    let hands = Hands {
        held: held_tx,
        gate: Arc::new(Semaphore::new(0)),
        held_returned: Arc::default(),
        held_item: Arc::default(),
        retaken: retaken_tx,
        gate2: Arc::new(Semaphore::new(0)),
    };
    let mut consumers = Vec::new();
    // Consumer 0 first, so that it holds an item when the others start.
    consumers.push(consumer(0, &path, policy, retry, hands.clone(), events.clone()).await);
    consumers[0].queue.start().unwrap();
    consumers[0].queue.ready().await.unwrap();
    let held = tokio::time::timeout(deadline(), held_rx.recv()).await.expect("consumer 0 holds an item");
    for index in 1..4 {
        let c = consumer(index, &path, policy, retry, hands.clone(), events.clone()).await;
        c.queue.start().unwrap();
        c.queue.ready().await.unwrap();
        consumers.push(c);
    }

    // Consumer 0's session expires in the middle of its item.
    let old = consumers[0].fw.session().await.unwrap();
    let (generation, info) = (old.generation(), old.client().session().clone());
    drop(old);
    expire_session(&shared(), &info).await.expect("expire");
    let fw0 = consumers[0].fw.clone();
    let renewed =
        eventually(deadline(), || async { fw0.session().await.map(|s| s.generation() > generation).unwrap_or(false) });
    assert!(renewed.await, "{case}: consumer 0 got no new session");
    // Its lock went with the session: another consumer takes the item and holds it.
    let taker =
        tokio::time::timeout(deadline(), retaken_rx.recv()).await.expect("the item is taken again").expect("open");
    // Consumer 0's consumer now returns success, too late: its fence must refuse to finish the
    // item that the other consumer holds.
    hands.gate.add_permits(1);
    let lock_lost = eventually(deadline(), || async {
        events.lock().unwrap().iter().any(|(i, e)| *i == 0 && matches!(e, QueueEvent::LockLost { .. }))
    });
    assert!(lock_lost.await, "{case}: consumer 0 did not report its item {held:?} as LockLost");
    assert!(
        !hands.held_returned.load(std::sync::atomic::Ordering::SeqCst),
        "{case}: consumer 0's function ran to its end on {held:?}, which another consumer holds"
    );
    hands.gate2.add_permits(1);
    // Connection cuts for two others while they consume. Not the taker: cut while its function
    // ends, it would be stopped and let the item go (the lock may be lost), and the item's next
    // taker would wait on `gate2` for ever.
    for index in (1..4).filter(|&i| i != taker).take(2) {
        cut(&mut consumers[index]).await;
    }

    let locks = format!("{path}-locks");
    let drained = eventually(deadline(), || async {
        children(&producer_fw, &path).await.is_empty() && lock_nodes(&producer_fw, &locks).await.is_empty()
    });
    assert!(drained.await, "{case}: items left: {:?}", children(&producer_fw, &path).await);
    // The item consumer 0 held was finished by the consumer that took it again. Its node is
    // gone before its `Consumed` event is out (the event follows the fenced multi), and the
    // event reaches this log through a relay task: so it is waited for.
    let by_taker = || {
        let events = events.lock().unwrap();
        let lost_node = events.iter().find_map(|(i, e)| match e {
            QueueEvent::LockLost { node } if *i == 0 => Some(node.clone()),
            _ => None,
        });
        events
            .iter()
            .any(|(i, e)| *i == taker && matches!(e, QueueEvent::Consumed { node } if Some(node) == lost_node.as_ref()))
    };
    let finished = eventually(deadline(), || async { by_taker() }).await;
    assert!(finished, "{case}: consumer {taker} did not finish {held:?}");
    // Closing a queue ends its event stream after the events already queued; once each relay
    // has ended, the log holds every event (a count made before could miss the last ones).
    let mut consumers_left = Vec::new();
    for c in consumers {
        c.queue.close().await;
        tokio::time::timeout(deadline(), c.relay).await.expect("the relay ends").unwrap();
        consumers_left.push((c.fw, c.proxy));
    }

    let mut completions: BTreeMap<String, usize> = BTreeMap::new();
    for (_, event) in events.lock().unwrap().iter() {
        if let QueueEvent::Consumed { node } = event {
            *completions.entry(node.clone()).or_default() += 1;
        }
    }
    let lost = put_nodes.iter().filter(|n| !completions.contains_key(*n)).count();
    let twice = completions.values().filter(|&&n| n > 1).count();
    tracing::warn!(case, lost, twice, completed = completions.len(), "queue fault report");
    eprintln!("queue faults {case}: items lost {lost}, items completed twice {twice}, completed {}", completions.len());
    for (fw, _proxy) in consumers_left {
        fw.close().await;
    }
    producer.close().await;
    producer_fw.close().await;
    (lost, twice)
}

/// 4 lock-safe consumers; one's session expires in the middle of an item; another consumer
/// takes that item and holds it, and only then is the first one's function let go; two
/// consumers have their connections cut. Under both error policies and both retry policies, no
/// item is lost and none is completed twice. The first consumer reports `LockLost` and its
/// function never returns: it is dropped as soon as the session ends, before anyone else can
/// take the item (when it was let run, it returned success on an item another consumer held:
/// the test failed on `held_returned`). Without the fence as well (Curator's plain delete of the
/// item, CURATOR-605), the late consumer deleted the item under the other's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_safe_no_loss_no_double_completion_under_expiry_and_cuts() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        let (lost, twice) = expiry_and_cuts(policy, retry).await;
        assert_eq!((lost, twice), (0, 0), "{policy:?}/{retry:?}: items lost, items completed twice");
    }
}

/// An item node whose data is not Curator's framing is reported (`BadItem`, with its data),
/// deleted, and the queue goes on with the next item, in plain and in lock-safe mode.
#[tokio::test]
async fn bad_data_item_is_reported_and_skipped() {
    init_tracing();
    for lock_safe in [false, true] {
        let fw = client(&shared()).await;
        let path = unique_path("queue-bad-data");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut builder = DistributedQueue::builder(&fw, &path, StringSerializer).consumer(move |item: String| {
            let tx = tx.clone();
            async move { tx.send(item).map_err(|e| e.to_string()) }
        });
        if lock_safe {
            builder = builder.lock_path(&format!("{path}-locks"));
        }
        let queue = builder.build().unwrap();
        let mut events = queue.events();
        let bad = fw
            .create()
            .creating_parent_containers_if_needed()
            .with_mode(CreateMode::PersistentSequential)
            .for_path(&format!("{path}/queue-"), b"not a queue item".to_vec())
            .await
            .unwrap();
        queue.put(&"good".to_string()).await.unwrap();
        queue.start().unwrap();
        queue.ready().await.unwrap();
        let good = tokio::time::timeout(deadline(), rx.recv()).await.expect("the good item").unwrap();
        assert_eq!(good, "good");
        match tokio::time::timeout(deadline(), events.next()).await.expect("an event") {
            Some(QueueEvent::BadItem { node, error: CuratorError::BadData { .. }, data }) => {
                assert_eq!(format!("{path}/{node}"), bad);
                assert_eq!(data, b"not a queue item");
            }
            other => panic!("lock_safe {lock_safe}: expected BadItem, got {other:?}"),
        }
        assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
        queue.close().await;
        fw.close().await;
    }
}

/// Issue 27: the queue's lifecycle is the core's, with typed variants naming the type the caller
/// holds (before: `IllegalState("the queue was already started")`), and a start whose path the
/// server refuses (a read-only parent) is reported promptly: `start()` returns `Ok` (it only
/// spawns the queue's task), `ready()` gives `NoAuth` within a second, and the queue is closed
/// (state `Closed`, a second start `AlreadyClosed`, its event stream ended, a close a no-op).
/// Before the one convention, the refused start returned `NoAuth` and left the queue latent.
/// Every queue kind, under every error and retry policy.
#[tokio::test]
async fn lifecycle_errors_are_typed_and_a_refused_start_closes_the_queue() {
    use curator_core::LifeState;
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        let fw = connected(with_policies(builder(&shared()), policy, retry)).await;
        let queue = DistributedQueue::builder(&fw, &unique_path("queue-life"), StringSerializer).build().unwrap();
        queue.start().unwrap();
        queue.ready().await.unwrap();
        let again = queue.start();
        assert!(matches!(again, Err(CuratorError::AlreadyStarted { what: "DistributedQueue" })), "{again:?}");
        queue.close().await;
        queue.close().await;
        let closed = queue.start();
        assert!(matches!(closed, Err(CuratorError::AlreadyClosed { what: "DistributedQueue" })), "{closed:?}");
        let ids =
            DistributedQueue::builder(&fw, &unique_path("queue-life"), StringSerializer).build_id_queue().unwrap();
        ids.close().await;
        assert!(matches!(ids.start(), Err(CuratorError::AlreadyClosed { what: "DistributedIdQueue" })));

        let parent = unique_path("queue-noauth");
        tests::zk::read_only_node(&fw, &parent).await;
        let path = format!("{parent}/q");
        let consume = |_item: String| async { Ok::<(), String>(()) };
        let builder = || DistributedQueue::builder(&fw, &path, StringSerializer);
        let kinds = [
            ("DistributedQueue", RefusedQueue::Plain(builder().build().unwrap())),
            ("DistributedIdQueue", RefusedQueue::Id(builder().consumer(consume).build_id_queue().unwrap())),
            (
                "DistributedPriorityQueue",
                RefusedQueue::Priority(builder().lock_path(&format!("{parent}/l")).build_priority_queue(0).unwrap()),
            ),
            ("DistributedDelayQueue", RefusedQueue::Delay(builder().consumer(consume).build_delay_queue().unwrap())),
        ];
        for (what, refused) in kinds {
            let mut events = refused.events();
            let started = std::time::Instant::now();
            refused.start().expect("start only spawns the task");
            let r = tokio::time::timeout(deadline(), refused.ready()).await.expect("ready returns");
            assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{what} {policy:?}/{retry:?}: {r:?}");
            assert!(started.elapsed() < tests::at_once(&fw), "{what} {policy:?}/{retry:?}: slow");
            assert_eq!(refused.state(), LifeState::Closed, "{what}");
            let again = refused.start();
            assert!(matches!(again, Err(CuratorError::AlreadyClosed { what: w }) if w == what), "{again:?}");
            let ended = tokio::time::timeout(deadline(), async { while events.next().await.is_some() {} }).await;
            assert!(ended.is_ok(), "{what}: the event stream ends");
            refused.close().await;
        }
        fw.close().await;
    }
}

/// Every kind of queue, for the refused-start table above.
enum RefusedQueue {
    Plain(DistributedQueue<String>),
    Id(DistributedIdQueue<String>),
    Priority(DistributedPriorityQueue<String>),
    Delay(DistributedDelayQueue<String>),
}

macro_rules! each_queue {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            RefusedQueue::Plain($q) => $e,
            RefusedQueue::Id($q) => $e,
            RefusedQueue::Priority($q) => $e,
            RefusedQueue::Delay($q) => $e,
        }
    };
}

impl RefusedQueue {
    fn start(&self) -> curator_core::Result<()> {
        each_queue!(self, q => q.start())
    }
    async fn ready(&self) -> curator_core::Result<()> {
        each_queue!(self, q => q.ready().await)
    }
    fn state(&self) -> curator_core::LifeState {
        each_queue!(self, q => q.state())
    }
    fn events(&self) -> curator_core::EventStream<curator_recipes::QueueEvent> {
        each_queue!(self, q => q.events())
    }
    async fn close(&self) {
        each_queue!(self, q => q.close().await)
    }
}

/// A lock-safe take whose lock create is applied but whose reply is lost, and then the replies
/// of the reads that would decide it: `lost` replies to requests under the lock path in all
/// (the create's first; each read is a sync and a getData on one connection, the sync's reply
/// swallowed). The core decides the create by its data (the take's id); with the patient policy
/// it reads again until it has decided (applied: held). With the short policy it gives up after
/// one read (`OutcomeUnknown`), and the queue reads the node itself: ours on this session, held
/// (`lost` 2); when both tries of that read are lost too (`lost` 4), our lock node, which would
/// keep the item from every consumer (ours included: its next try meets NodeExists) for as long
/// as our session lives, is deleted first, and the take is reported failed with the unknown
/// outcome. Either way the item is consumed, once. Curator's DistributedQueue leaves such a
/// lock node (its lock create is not protected). Before, the second swallow of this test, armed
/// for "the next getData", hit the ensemble tracker's read of `/zookeeper/config` after the
/// reconnection, not the decision.
async fn lock_create_lost_twice(policy: ErrorPolicy, retry: Retry, lost: usize) {
    let case = format!("{policy:?}/{retry:?}, {lost} replies lost");
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    let producer_fw = connected(with_policies(builder(&shared()), policy, retry)).await;
    let path = unique_path("queue-lock-lost");
    let lock_path = format!("{path}-locks");
    // Both parents exist, so that the only create the consumer sends is its lock's.
    producer_fw.create().creating_parents_if_needed().for_path(&lock_path, Vec::new()).await.expect("lock path");
    producer_fw.create().creating_parents_if_needed().for_path(&path, Vec::new()).await.expect("queue path");
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&lock_path)
        .consumer(move |item: String| {
            let done_tx = done_tx.clone();
            async move {
                let _ = done_tx.send(item);
                Ok::<(), String>(())
            }
        })
        .build()
        .unwrap();
    let unknown = Arc::new(Mutex::new(Vec::new()));
    let heard = unknown.clone();
    queue.add_listener(move |event| {
        if let QueueEvent::Error { error } = event {
            if error.outcome_unknown() {
                heard.lock().unwrap().push(error.to_string());
            }
        }
    });
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    proxy.swallow_replies_under(RequestKind::Any, &format!("{lock_path}/"), lost);
    let producer = DistributedQueue::builder(&producer_fw, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.put(&"only".to_string()).await.expect("put");
    let consumed = tokio::time::timeout(deadline(), done.recv()).await;
    assert!(
        matches!(consumed, Ok(Some(ref item)) if item == "only"),
        "{case}: the item was not consumed: lock nodes {:?}",
        lock_nodes(&producer_fw, &lock_path).await
    );
    assert!(!proxy.disarm_swallow(), "{case}: fewer requests under the lock path than replies to lose");
    let cleaned = retry == Retry::Short && lost == 4;
    assert_eq!(!unknown.lock().unwrap().is_empty(), cleaned, "{case}: unknown outcomes reported: {unknown:?}");
    producer.close().await;
    queue.close().await;
    assert!(lock_nodes(&producer_fw, &lock_path).await.is_empty(), "{case}: a lock node left");
    fw.close().await;
    producer_fw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_create_whose_outcome_stays_unknown_leaves_no_lock_behind() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        for lost in [2, 4] {
            lock_create_lost_twice(policy, retry, lost).await;
        }
    }
}

/// A lock-safe take whose fenced final multi is applied but whose reply is lost, and whose lock
/// name another consumer takes before the take's connection is back (the item is gone, so that
/// consumer finds nothing to do): a check resent would pass on the other consumer's lock
/// (version 0 too). The take sends nothing before the queue handle's write tag, bumped by the
/// same multi, decides: applied. The item was finished by our first attempt: the take reports
/// it `Consumed`, and leaves the other consumer's lock alone. Before the fence decided, it took the
/// item for gone (no event: `queue_faults`' rare "items lost 1" under every policy) and deleted
/// the other consumer's lock. Curator's plain delete after the consumer has no such retry.
async fn finish_lost_then_lock_taken(policy: ErrorPolicy, retry: Retry) {
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    let other = connected(with_policies(builder(&shared()), policy, retry)).await;
    let path = unique_path("queue-finish-lost");
    let lock_path = format!("{path}-locks");
    let gate = Arc::new(Semaphore::new(0));
    let (taken_tx, mut taken) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&lock_path)
        .consumer({
            let gate = gate.clone();
            move |item: String| {
                let (gate, taken_tx) = (gate.clone(), taken_tx.clone());
                async move {
                    let _ = taken_tx.send(item);
                    gate.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())
                }
            }
        })
        .build()
        .unwrap();
    let mut events = queue.events();
    queue.start().unwrap();
    queue.ready().await.expect("ready");
    let producer = DistributedQueue::builder(&other, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.put(&"only".to_string()).await.expect("put");
    tokio::time::timeout(deadline(), taken.recv()).await.expect("taken").expect("open");
    let names = lock_nodes(&other, &lock_path).await;
    let [name] = names.as_slice() else { panic!("{policy:?}/{retry:?}: one lock expected: {names:?}") };
    let lock = format!("{lock_path}/{name}");

    // The final multi is applied, its reply swallowed and the connection closed; no new one
    // is let in until the other consumer holds the lock name.
    proxy.swallow_next_reply_to(RequestKind::Multi);
    proxy.set_reject(true);
    gate.add_permits(1);
    assert!(eventually(deadline(), || async { !proxy.swallow_pending() }).await, "{policy:?}/{retry:?}: no multi");
    let item_gone = || async { children(&other, &path).await.is_empty() };
    assert!(eventually(deadline(), item_gone).await, "{policy:?}/{retry:?}: the multi was not applied");
    other.create().with_mode(CreateMode::Ephemeral).for_path(&lock, Vec::new()).await.expect("the other's lock");
    proxy.pass();

    let consumed = tokio::time::timeout(deadline(), async {
        while let Some(event) = events.next().await {
            match event {
                QueueEvent::Consumed { node } => return Some(node),
                QueueEvent::LockLost { .. } => return None,
                _ => {}
            }
        }
        None
    })
    .await
    .expect("an outcome");
    assert_eq!(consumed.as_deref(), Some(name.as_str()), "{policy:?}/{retry:?}: the item's outcome");
    let stat = other.check_exists().for_path(&lock).await.expect("exists");
    let other_session = other.session().await.expect("session").id();
    assert_eq!(
        stat.map(|s| s.ephemeral_owner),
        Some(other_session),
        "{policy:?}/{retry:?}: the other consumer's lock was deleted"
    );
    queue.close().await;
    producer.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_whose_reply_is_lost_counts_the_item_and_keeps_anothers_lock() {
    init_tracing();
    for (policy, retry) in COMBINATIONS {
        finish_lost_then_lock_taken(policy, retry).await;
    }
}
