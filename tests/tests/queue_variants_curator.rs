//! The id, priority and delay queues against a real ZooKeeper: the scenarios of Apache
//! Curator's `TestDistributedIdQueue`, `TestDistributedPriorityQueue` and
//! `TestDistributedDelayQueue`, their node names as Curator writes them, lock-safe mode for each,
//! and delay items never taken before their time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::{CuratorError, CuratorFramework};
use curator_recipes::{DistributedQueue, QueueBuilder, QueueEvent, StringSerializer};
use curator_test::{eventually, TestingServer, Timing};
use tests::queues::lock_nodes;
use tests::{children, client, init_tracing, unique_path};
use tokio::sync::{mpsc, oneshot, Notify};

async fn fw() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// A builder whose consumer sends every item to the returned receiver.
fn sending(fw: &CuratorFramework, path: &str) -> (QueueBuilder<String>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let builder = DistributedQueue::builder(fw, path, StringSerializer).consumer(move |item: String| {
        let tx = tx.clone();
        async move { tx.send(item).map_err(|e| e.to_string()) }
    });
    (builder, rx)
}

/// A builder whose consumer waits on `gate` before handing over its first item, and sends
/// every item to the returned receiver.
fn gated(
    fw: &CuratorFramework,
    path: &str,
    gate: Arc<Notify>,
) -> (QueueBuilder<String>, mpsc::UnboundedReceiver<String>, oneshot::Receiver<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (in_hand_tx, in_hand) = oneshot::channel();
    let in_hand_tx = Arc::new(Mutex::new(Some(in_hand_tx)));
    let builder = DistributedQueue::builder(fw, path, StringSerializer).consumer(move |item: String| {
        let (tx, gate, first) = (tx.clone(), gate.clone(), in_hand_tx.lock().unwrap().take());
        async move {
            if let Some(first) = first {
                let _ = first.send(());
                gate.notified().await;
            }
            tx.send(item).map_err(|e| e.to_string())
        }
    });
    (builder, rx, in_hand)
}

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(deadline(), rx.recv()).await.expect("an item in time").expect("queue open")
}

/// A producer-only builder (no consumer).
fn producer(fw: &CuratorFramework, path: &str) -> QueueBuilder<String> {
    DistributedQueue::builder(fw, path, StringSerializer)
}

/// A small deterministic generator, for "random" ids and priorities.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

// ---- DistributedIdQueue ---------------------------------------------------------------------

/// Follows Curator's `TestDistributedIdQueue.testDeletingWithLock`: in lock-safe mode an item
/// a consumer holds is not removed (`remove` returns 0).
#[tokio::test]
async fn id_deleting_with_lock() {
    let fw = fw().await;
    let path = unique_path("idq-deleting");
    let gate = Arc::new(Notify::new());
    let (builder, mut rx, in_hand) = gated(&fw, &path, gate.clone());
    let queue = builder.lock_path(&format!("{path}-locks")).build_id_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"test".to_string(), "id").await.unwrap();
    tokio::time::timeout(deadline(), in_hand).await.expect("consumer has it in time").unwrap();
    assert_eq!(queue.remove("id").await.unwrap(), 0);
    gate.notify_one();
    assert_eq!(recv(&mut rx).await, "test");
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedIdQueue.testOrdering`: 100 items with random ids come out in the
/// order they were put, whatever their ids; the nodes are `queue-|<id>|<seq>`.
#[tokio::test]
async fn id_ordering() {
    let fw = fw().await;
    let path = unique_path("idq-ordering");
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let ids: Vec<String> = (0..100).map(|_| format!("0.{}", random.next() % 1_000_000_007)).collect();
    // Put first, so that one listing holds them all and the sort alone decides the order.
    let put = producer(&fw, &path).build_id_queue().unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    for id in &ids {
        put.put(id, id).await.unwrap();
    }
    let names = children(&fw, &path).await;
    assert_eq!(names.len(), 100);
    for name in &names {
        let id = name.strip_prefix("queue-|").and_then(|rest| rest.rsplit_once('|')).expect("queue-|<id>|<seq>");
        assert!(ids.contains(&id.0.to_string()) && id.1.len() == 10 && id.1.bytes().all(|b| b.is_ascii_digit()));
    }
    let (builder, mut rx) = sending(&fw, &path);
    let queue = builder.build_id_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for id in &ids {
        assert_eq!(&recv(&mut rx).await, id);
    }
    queue.close().await;
    put.close().await;
    fw.close().await;
}

/// Follows `TestDistributedIdQueue.testRequeuingWithLock`: in lock-safe mode an item whose
/// consumer fails is requeued with its id (`debugIsQueued("id")` in Curator: here a node
/// `queue-|id|<seq>` is there after the queue is closed).
#[tokio::test]
async fn id_requeuing_with_lock() {
    let fw = fw().await;
    let path = unique_path("idq-requeue");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let queue = producer(&fw, &path)
        .lock_path(&format!("{path}-locks"))
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(item);
                Err::<(), _>("consumer failed")
            }
        })
        .build_id_queue()
        .unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"test".to_string(), "id").await.unwrap();
    assert_eq!(recv(&mut rx).await, "test");
    assert_eq!(recv(&mut rx).await, "test"); // requeued and taken again
    queue.close().await;
    let names = children(&fw, &path).await;
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("queue-|id|"), "{names:?}");
    fw.close().await;
}

/// Ours: `remove` counts the items of an id and leaves the others; an empty id, or one holding
/// `|` or `/`, is a typed error (Curator turns `|` and `/` into `_`); a queue path holding `|`
/// is refused, as Curator refuses it.
#[tokio::test]
async fn id_remove_counts_and_bad_ids_are_refused() {
    let fw = fw().await;
    let path = unique_path("idq-remove");
    let queue = producer(&fw, &path).build_id_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for (item, id) in [("1", "a"), ("2", "b"), ("3", "a")] {
        queue.put(&item.to_string(), id).await.unwrap();
    }
    assert_eq!(queue.remove("a").await.unwrap(), 2);
    assert_eq!(queue.remove("c").await.unwrap(), 0);
    let names = children(&fw, &path).await;
    assert!(names.len() == 1 && names[0].starts_with("queue-|b|"), "{names:?}");
    for bad in ["", "a|b", "a/b"] {
        assert!(matches!(queue.put(&"x".to_string(), bad).await, Err(CuratorError::InvalidArgument { .. })), "{bad:?}");
        assert!(matches!(queue.remove(bad).await, Err(CuratorError::InvalidArgument { .. })), "{bad:?}");
    }
    assert_eq!(children(&fw, &path).await.len(), 1);
    let piped = producer(&fw, &format!("{path}|x")).build_id_queue();
    assert!(matches!(piped, Err(CuratorError::InvalidArgument { .. })));
    queue.close().await;
    fw.close().await;
}

/// Ours: lock-safe mode works for the id queue: items are consumed in put order, a `remove`
/// of an item no consumer holds goes through the lock and the fenced delete, and no item node
/// or lock node is left.
#[tokio::test]
async fn id_lock_safe() {
    let fw = fw().await;
    let path = unique_path("idq-lock-safe");
    let locks = format!("{path}-locks");
    let put = producer(&fw, &path).lock_path(&locks).build_id_queue().unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    for i in 0..10 {
        put.put(&i.to_string(), &format!("id-{}", 9 - i)).await.unwrap();
    }
    put.put(&"cancelled".to_string(), "gone").await.unwrap();
    assert_eq!(put.remove("gone").await.unwrap(), 1);
    let (builder, mut rx) = sending(&fw, &path);
    let queue = builder.lock_path(&locks).build_id_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..10 {
        assert_eq!(recv(&mut rx).await, i.to_string());
    }
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    assert!(eventually(deadline(), || async { lock_nodes(&fw, &locks).await.is_empty() }).await);
    assert!(rx.try_recv().is_err(), "a removed item was consumed");
    queue.close().await;
    put.close().await;
    fw.close().await;
}

// ---- DistributedPriorityQueue ---------------------------------------------------------------

/// Follows Curator's `TestDistributedPriorityQueue.testMinItemsBeforeRefresh`: with
/// `min_items_before_refresh` 3, an item put with a lower priority while the first listing is
/// being consumed comes out after about 3 items (Curator allows `|3 - count| < 3`). The first
/// item is held until the new one is put, so the count is exactly 2 here: items 1 and 2 are
/// taken unconditionally, the refresh is before the fourth of the listing.
#[tokio::test]
async fn priority_min_items_before_refresh() {
    let fw = fw().await;
    let path = unique_path("prq-refresh");
    let put = producer(&fw, &path).build_priority_queue(3).unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    for i in 0..10 {
        put.put(&i.to_string(), 10 + i).await.unwrap();
    }
    let gate = Arc::new(Notify::new());
    let (builder, mut rx, in_hand) = gated(&fw, &path, gate.clone());
    let queue = builder.build_priority_queue(3).unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    tokio::time::timeout(deadline(), in_hand).await.expect("consumer has it in time").unwrap();
    put.put(&"1000".to_string(), 1).await.unwrap();
    gate.notify_one();
    assert_eq!(recv(&mut rx).await, "0");
    let mut count = 0;
    while recv(&mut rx).await != "1000" {
        count += 1;
    }
    assert!(3i32.abs_diff(count) < 3, "{count}");
    assert_eq!(count, 2);
    queue.close().await;
    put.close().await;
    fw.close().await;
}

/// Follows `TestDistributedPriorityQueue.testSortingWhileTaking`: with
/// `min_items_before_refresh` 0, an item put with a lower priority while the consumer holds an
/// item comes right after it. Curator hands items over through a `SynchronousQueue`; here the
/// consumer waits for the test to acknowledge each item, and the new item is put while item 1
/// is in the consumer's hands.
#[tokio::test]
async fn priority_sorting_while_taking() {
    let fw = fw().await;
    let path = unique_path("prq-sorting");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, oneshot::Sender<()>)>();
    let queue = producer(&fw, &path)
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move {
                let (ack_tx, ack) = oneshot::channel();
                tx.send((item, ack_tx)).map_err(|e| e.to_string())?;
                ack.await.map_err(|e| e.to_string())
            }
        })
        .build_priority_queue(0)
        .unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..10 {
        queue.put(&i.to_string(), 10).await.unwrap();
    }
    let (item, ack) = recv(&mut rx).await;
    assert_eq!(item, "0");
    ack.send(()).unwrap();
    let (item, ack) = recv(&mut rx).await;
    assert_eq!(item, "1"); // in the consumer already
    queue.put(&"1000".to_string(), 1).await.unwrap();
    ack.send(()).unwrap();
    let (item, ack) = recv(&mut rx).await;
    assert_eq!(item, "1000");
    ack.send(()).unwrap();
    for i in 2..10 {
        let (item, ack) = recv(&mut rx).await;
        assert_eq!(item, i.to_string());
        ack.send(()).unwrap();
    }
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedPriorityQueue.testAdditions` (`min_items_before_refresh` 1): items
/// put while the first is being consumed are sorted in, the lower priority first. Curator
/// holds the first item in its serializer; here the consumer holds it (a serializer is
/// synchronous).
#[tokio::test]
async fn priority_additions() {
    let fw = fw().await;
    let path = unique_path("prq-additions");
    let gate = Arc::new(Notify::new());
    let (builder, mut rx, in_hand) = gated(&fw, &path, gate.clone());
    let queue = builder.build_priority_queue(1).unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"10".to_string(), 10).await.unwrap();
    tokio::time::timeout(deadline(), in_hand).await.expect("consumer has it in time").unwrap();
    queue.put(&"1".to_string(), 1).await.unwrap();
    for _ in 0..9 {
        queue.put(&"10".to_string(), 10).await.unwrap();
    }
    gate.notify_one();
    assert_eq!(recv(&mut rx).await, "10"); // the one in hand
    assert_eq!(recv(&mut rx).await, "1");
    for _ in 0..9 {
        assert_eq!(recv(&mut rx).await, "10");
    }
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedPriorityQueue.testSimple`: the consumer holds an item of priority
/// `i32::MIN` while 100 items of random priorities, negative ones included, are put; then they
/// come out in priority order. Their names are Curator's `priorityToString`.
#[tokio::test]
async fn priority_simple() {
    let fw = fw().await;
    let path = unique_path("prq-simple");
    let gate = Arc::new(Notify::new());
    let (builder, mut rx, in_hand) = gated(&fw, &path, gate.clone());
    let queue = builder.build_priority_queue(0).unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&i32::MIN.to_string(), i32::MIN).await.unwrap();
    tokio::time::timeout(deadline(), in_hand).await.expect("consumer has it in time").unwrap();
    let mut random = XorShift(0x2545_f491_4f6c_dd1d);
    let mut priorities: Vec<i32> = (0..100).map(|_| random.next() as i32).collect();
    priorities.extend([-1, 0, 1, i32::MAX]);
    for p in &priorities {
        queue.put(&p.to_string(), *p).await.unwrap();
    }
    let names = children(&fw, &path).await;
    assert_eq!(names.len(), priorities.len());
    for p in &priorities {
        let curator = format!("queue-{}{:08X}", if *p >= 0 { "1" } else { "0" }, (i64::from(*p) & 0xFFFF_FFFF));
        assert!(names.iter().any(|n| n.len() == curator.len() + 10 && n.starts_with(&curator)), "{p}: {curator}");
    }
    gate.notify_one();
    assert_eq!(recv(&mut rx).await, i32::MIN.to_string());
    let mut previous = i32::MIN;
    for _ in 0..priorities.len() {
        let value: i32 = recv(&mut rx).await.parse().unwrap();
        assert!(value >= previous, "{value} after {previous}");
        previous = value;
    }
    queue.close().await;
    fw.close().await;
}

/// Ours: lock-safe mode works for the priority queue: items put before the consumer starts
/// come out in priority order (ties first in, first out), and no item or lock node is left.
#[tokio::test]
async fn priority_lock_safe() {
    let fw = fw().await;
    let path = unique_path("prq-lock-safe");
    let locks = format!("{path}-locks");
    let put = producer(&fw, &path).lock_path(&locks).build_priority_queue(0).unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    let items = [("c", 5), ("a", -5), ("d", 5), ("b", 0)];
    for (item, priority) in items {
        put.put(&item.to_string(), priority).await.unwrap();
    }
    put.put_multi(&["z1".to_string(), "z2".to_string()], i32::MAX).await.unwrap();
    let (builder, mut rx) = sending(&fw, &path);
    let queue = builder.lock_path(&locks).build_priority_queue(0).unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for expected in ["a", "b", "c", "d", "z1", "z2"] {
        assert_eq!(recv(&mut rx).await, expected);
    }
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    assert!(eventually(deadline(), || async { lock_nodes(&fw, &locks).await.is_empty() }).await);
    queue.close().await;
    put.close().await;
    fw.close().await;
}

// ---- DistributedDelayQueue ------------------------------------------------------------------

/// A delay queue builder whose consumer sends each item with the time it saw it.
fn timed(fw: &CuratorFramework, path: &str) -> (QueueBuilder<String>, mpsc::UnboundedReceiver<(String, SystemTime)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let builder = DistributedQueue::builder(fw, path, StringSerializer).consumer(move |item: String| {
        let tx = tx.clone();
        async move { tx.send((item, SystemTime::now())).map_err(|e| e.to_string()) }
    });
    (builder, rx)
}

/// Follows Curator's `TestDistributedDelayQueue.testLateAddition`: an item due in 24 days does
/// not hold back one put after it that is due now. (Curator also waits a second to see nothing
/// come out first; here the late item is checked to be still in the queue.)
#[tokio::test]
async fn delay_late_addition() {
    let fw = fw().await;
    let path = unique_path("dlq-late");
    let (builder, mut rx) = timed(&fw, &path);
    let queue = builder.build_delay_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let never = SystemTime::now() + Duration::from_millis(i32::MAX as u64);
    queue.put(&"1".to_string(), never).await.unwrap();
    queue.put(&"2".to_string(), SystemTime::now()).await.unwrap();
    assert_eq!(recv(&mut rx).await.0, "2");
    let names = children(&fw, &path).await;
    assert_eq!(names.len(), 1, "{names:?}");
    let hex = names[0].strip_prefix("queue-|").and_then(|r| r.split_once('|')).expect("queue-|<time>|<seq>").0;
    assert_eq!(u64::from_str_radix(hex, 16).unwrap(), epoch_ms(never) + 1); // rounded up
    assert!(rx.try_recv().is_err());
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedDelayQueue.testBasic`: an item due in a second is taken, and not
/// before its time (Curator checks nothing came out after 100 ms; here the consumer's clock
/// when it saw the item is compared with the item's time).
#[tokio::test]
async fn delay_basic() {
    let fw = fw().await;
    let path = unique_path("dlq-basic");
    let (builder, mut rx) = timed(&fw, &path);
    let queue = builder.build_delay_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let at = SystemTime::now() + Duration::from_secs(1);
    queue.put(&"1".to_string(), at).await.unwrap();
    let (item, seen) = recv(&mut rx).await;
    assert_eq!(item, "1");
    assert!(seen >= at, "seen {seen:?}, due {at:?}");
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedDelayQueue.testSimple`: 10 items due within 100 ms (values: their
/// times) come out in time order. Put before the consumer starts, so that no item due earlier
/// can arrive after a later one was taken.
#[tokio::test]
async fn delay_simple() {
    let fw = fw().await;
    let path = unique_path("dlq-simple");
    let put = producer(&fw, &path).build_delay_queue().unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    let mut random = XorShift(0x1234_5678_9abc_def1);
    for _ in 0..10 {
        let at = UNIX_EPOCH + Duration::from_millis(epoch_ms(SystemTime::now()) + random.next() % 100);
        put.put(&epoch_ms(at).to_string(), at).await.unwrap();
    }
    let (builder, mut rx) = timed(&fw, &path);
    let queue = builder.build_delay_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let mut last = 0;
    for _ in 0..10 {
        let (item, seen) = recv(&mut rx).await;
        let at: u64 = item.parse().unwrap();
        assert!(at >= last, "{at} after {last}");
        assert!(epoch_ms(seen) >= at);
        last = at;
    }
    queue.close().await;
    put.close().await;
    fw.close().await;
}

/// Follows `TestDistributedDelayQueue.testSorting`: 1000 items due a millisecond apart, put in
/// random order by one queue, come out in time order from another started afterwards.
#[tokio::test]
async fn delay_sorting() {
    let fw = fw().await;
    let path = unique_path("dlq-sorting");
    let put = producer(&fw, &path).build_delay_queue().unwrap();
    put.start().unwrap();
    put.ready().await.unwrap();
    let first = epoch_ms(SystemTime::now()) + Timing::new().multiple(0.1).deadline().as_millis() as u64;
    let mut order: Vec<u64> = (0..1000).collect();
    let mut random = XorShift(0xdead_beef_cafe_f00d);
    for i in (1..order.len()).rev() {
        order.swap(i, (random.next() % (i as u64 + 1)) as usize);
    }
    for i in &order {
        put.put(&i.to_string(), UNIX_EPOCH + Duration::from_millis(first + i)).await.unwrap();
    }
    let (builder, mut rx) = timed(&fw, &path);
    let queue = builder.build_delay_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..1000u64 {
        let (item, seen) = recv(&mut rx).await;
        assert_eq!(item, i.to_string());
        assert!(epoch_ms(seen) >= first + i);
    }
    queue.close().await;
    put.close().await;
    fw.close().await;
}

/// Ours: lock-safe mode works for the delay queue, and no item is consumed before its time:
/// items due over the next second, put out of order, come out in time order, each seen by
/// the consumer no earlier than its time; no item or lock node is left.
#[tokio::test]
async fn delay_lock_safe_never_before_its_time() {
    let fw = fw().await;
    let path = unique_path("dlq-lock-safe");
    let locks = format!("{path}-locks");
    let (builder, mut rx) = timed(&fw, &path);
    let queue = builder.lock_path(&locks).build_delay_queue().unwrap();
    let mut events = queue.events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let now = SystemTime::now();
    let due: Vec<(String, SystemTime)> =
        [700u64, 100, 400, 1000, 250].iter().map(|ms| (ms.to_string(), now + Duration::from_millis(*ms))).collect();
    for (item, at) in &due {
        queue.put(item, *at).await.unwrap();
    }
    let mut sorted = due.clone();
    sorted.sort_by_key(|(_, at)| *at);
    for (item, at) in &sorted {
        let (got, seen) = recv(&mut rx).await;
        assert_eq!(&got, item);
        assert!(seen >= *at, "{item}: seen {seen:?}, due {at:?}");
    }
    for _ in 0..sorted.len() {
        let event = tokio::time::timeout(deadline(), events.next()).await.expect("an event in time");
        assert!(matches!(event, Some(QueueEvent::Consumed { .. })), "{event:?}");
    }
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    assert!(eventually(deadline(), || async { lock_nodes(&fw, &locks).await.is_empty() }).await);
    queue.close().await;
    fw.close().await;
}

/// Ours: a time not after the Unix epoch is a typed error (Curator refuses `delayUntilEpoch`
/// <= 0), and nothing is put.
#[tokio::test]
async fn delay_bad_times_are_refused() {
    let fw = fw().await;
    let path = unique_path("dlq-bad-time");
    let queue = producer(&fw, &path).build_delay_queue().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for bad in [UNIX_EPOCH, UNIX_EPOCH - Duration::from_secs(1)] {
        assert!(matches!(queue.put(&"x".to_string(), bad).await, Err(CuratorError::InvalidArgument { .. })));
    }
    assert!(children(&fw, &path).await.is_empty());
    queue.close().await;
    fw.close().await;
}
