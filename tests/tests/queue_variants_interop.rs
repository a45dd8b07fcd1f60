//! Interop with Apache Curator 5.4's `DistributedPriorityQueue`, `DistributedDelayQueue` and
//! `DistributedIdQueue` (Debian's jars, driven by tests/java/QueuePeer.java): items put by one
//! side are consumed by the other, both ways, on one queue path.
//! - Priority: items put with mixed priorities (extremes and ties included) before any consumer
//!   starts are consumed lowest priority first, ties in put order, each once; with two
//!   lock-safe consumers on each side at once, each item exactly once.
//! - Delay: items put with times in the past and 1-2 s ahead are consumed earliest first, none
//!   before its time (against the consumer's clock when it was handed the item; both sides run
//!   on this machine's clock); with two lock-safe consumers a side, each exactly once.
//! - Id: one side puts items with ids, the other removes an id's items (`remove(id)`) and
//!   consumes the rest first in, first out.
//!
//! The plain queue's interop is `queue_interop.rs`. Missing `javac` or jars fail the test with
//! a message saying what to install.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::CuratorFramework;
use curator_recipes::{DistributedDelayQueue, DistributedPriorityQueue, DistributedQueue, StringSerializer};
use curator_test::eventually;
use tests::fixture::{init_tracing, unique_path, Fixture};
use tests::queues::{
    bad_items_to, deadline, drained, locks_released, logging_builder, now_ms, numbered, wait_rust_items, JavaPeer, Log,
    Tally,
};

/// How much earlier than its time an item may be seen without counting as early: the clocks'
/// millisecond granularity (both sides read this machine's clock in whole milliseconds).
const CLOCK_TOLERANCE_MS: u64 = 2;

/// Items with mixed priorities, in the order they are put: extremes, negatives (whose names
/// start `queue-0`), zero, and ties (taken in put order).
fn prioritized() -> Vec<(i32, String)> {
    let priorities = [5, -3, 0, 5, i32::MAX, -3, i32::MIN, 1, -1, 0, 16, -16];
    priorities.iter().enumerate().map(|(i, &p)| (p, format!("item-{i}"))).collect()
}

/// The items of [`prioritized`] in Curator's priority order: lowest priority first, ties in
/// put order (their sequence numbers).
fn in_priority_order(items: &[(i32, String)]) -> Vec<String> {
    let mut sorted = items.to_vec();
    sorted.sort_by_key(|(priority, _)| *priority); // stable: ties stay in put order
    sorted.into_iter().map(|(_, item)| item).collect()
}

/// Curator's producer puts items with mixed priorities before any consumer starts; our
/// priority queue's consumer takes them all, each once, in Curator's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_priority_producer_rust_consumer_in_priority_order() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-priority-j2r");
    let log: Log = Arc::default();
    let bad = Arc::default();
    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.produce("p", "priority", &path).await;
    let items = prioritized();
    for (priority, item) in &items {
        java.put("p", &priority.to_string(), item).await;
    }

    let queue = logging_builder(&f.fw, &path, None, ("rust", Duration::ZERO), &log)
        .build_priority_queue(0)
        .expect("valid queue");
    queue.add_listener(bad_items_to(&bad));
    queue.start().expect("start");
    queue.ready().await.expect("start");
    assert_eq!(wait_rust_items(&log, items.len()).await, in_priority_order(&items), "Curator's priority order");
    drained(&f.fw, &path).await;
    queue.close().await;
    assert_eq!(log.lock().unwrap().len(), items.len(), "nothing consumed twice");
    assert!(bad.lock().unwrap().is_empty(), "no bad items: {:?}", bad.lock().unwrap());
    java.quit().await;
    f.close().await;
}

/// The reverse: our priority queue puts items with mixed priorities; Curator's consumer takes
/// them all, each once, lowest priority first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_priority_producer_curator_consumer_in_priority_order() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-priority-r2j");
    let log: Log = Arc::default();
    let producer = DistributedQueue::builder(&f.fw, &path, StringSerializer).build_priority_queue(0).expect("queue");
    producer.start().expect("start");
    producer.ready().await.expect("start");
    let items = prioritized();
    for (priority, item) in &items {
        producer.put(item, *priority).await.expect("put");
    }

    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.consume("c", "priority", &path, None).await;
    assert_eq!(java.wait_items(items.len()).await, in_priority_order(&items), "Curator's consumer, in priority order");
    drained(&f.fw, &path).await;
    java.command("STOP c").await;
    assert_eq!(java.items().len(), items.len(), "nothing consumed twice");
    producer.close().await;
    java.quit().await;
    f.close().await;
}

/// Items put with delays `offsets_ms` (from now; negative: already due), named `<prefix>-<i>`:
/// `(item, epoch ms due)` in put order.
fn delayed(prefix: &str, offsets_ms: &[i64]) -> Vec<(String, u64)> {
    let now = now_ms() as i64;
    offsets_ms.iter().enumerate().map(|(i, offset)| (format!("{prefix}-{i}"), (now + offset) as u64)).collect()
}

/// Delays of the single-consumer tests: some past, some 1-2 s ahead, all distinct (Curator
/// orders equal times as its listing happens to come, so ties would have no defined order).
const OFFSETS_MS: [i64; 8] = [1500, -3000, 1000, -1000, 2000, -2000, 1250, 0];

/// The items of [`delayed`] earliest first.
fn in_delay_order(items: &[(String, u64)]) -> Vec<String> {
    let mut sorted = items.to_vec();
    sorted.sort_by_key(|(_, due)| *due);
    sorted.into_iter().map(|(item, _)| item).collect()
}

/// Asserts that no item of `items` was handed over before its time (`seen` gives when it was).
fn none_early(items: &[(String, u64)], seen: impl Fn(&str) -> Option<u64>) {
    for (item, due) in items {
        let at = seen(item).unwrap_or_else(|| panic!("{item} never handed over"));
        assert!(at + CLOCK_TOLERANCE_MS >= *due, "{item} handed over {} ms before its time", due - at);
    }
}

/// Our delay queue with a consumer that notes each item and when (epoch ms) it was handed it.
fn timed_delay_consumer(
    fw: &CuratorFramework,
    path: &str,
    seen: &Arc<Mutex<Vec<(String, u64)>>>,
) -> DistributedDelayQueue<String> {
    let seen = seen.clone();
    DistributedQueue::builder(fw, path, StringSerializer)
        .consumer(move |item: String| {
            let at = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64;
            seen.lock().unwrap().push((item, at));
            async { Ok::<(), String>(()) }
        })
        .build_delay_queue()
        .expect("valid queue")
}

/// Curator's producer puts items with delays, some past and some 1-2 s ahead, before any
/// consumer starts; our delay queue's consumer is handed each once, none before its time,
/// earliest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_delay_producer_rust_consumer_not_before_time() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-delay-j2r");
    let log: Log = Arc::default();
    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.produce("p", "delay", &path).await;
    let items = delayed("java", &OFFSETS_MS);
    for (item, due) in &items {
        java.put("p", &due.to_string(), item).await;
    }

    let seen: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let queue = timed_delay_consumer(&f.fw, &path, &seen);
    queue.start().expect("start");
    queue.ready().await.expect("start");
    let all = eventually(deadline(), || async { seen.lock().unwrap().len() >= items.len() }).await;
    assert!(all, "handed over only {:?}", seen.lock().unwrap());
    drained(&f.fw, &path).await;
    queue.close().await;
    let seen = seen.lock().unwrap().clone();
    let order: Vec<String> = seen.iter().map(|(item, _)| item.clone()).collect();
    assert_eq!(order, in_delay_order(&items), "earliest first, each once");
    none_early(&items, |item| seen.iter().find(|(i, _)| i == item).map(|(_, at)| *at));
    java.quit().await;
    f.close().await;
}

/// The reverse: our delay queue puts the items; Curator's consumer is handed each once, none
/// before its time (by Java's clock when its consumer was handed it), earliest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_delay_producer_curator_consumer_not_before_time() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-delay-r2j");
    let log: Log = Arc::default();
    let producer = DistributedQueue::builder(&f.fw, &path, StringSerializer).build_delay_queue().expect("queue");
    producer.start().expect("start");
    producer.ready().await.expect("start");
    let items = delayed("rust", &OFFSETS_MS);
    for (item, due) in &items {
        producer.put(item, UNIX_EPOCH + Duration::from_millis(*due)).await.expect("put");
    }

    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.consume("c", "delay", &path, None).await;
    assert_eq!(java.wait_items(items.len()).await, in_delay_order(&items), "Curator's consumer, earliest first");
    drained(&f.fw, &path).await;
    java.command("STOP c").await;
    assert_eq!(java.items().len(), items.len(), "nothing consumed twice");
    none_early(&items, |item| java.handed_at(item));
    producer.close().await;
    java.quit().await;
    f.close().await;
}

/// The variants [`two_consumers_on_each_side`] runs.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Priority,
    Delay,
}

/// One of our consumers in [`two_consumers_on_each_side`].
enum Consumer {
    Priority(DistributedPriorityQueue<String>),
    Delay(DistributedDelayQueue<String>),
}

impl Consumer {
    /// Starts the queue; its `BadItem` node names go to `bad`.
    async fn start(&self, bad: &Arc<Mutex<Vec<String>>>) {
        match self {
            Consumer::Priority(queue) => {
                queue.add_listener(bad_items_to(bad));
                queue.start().expect("start");
                queue.ready().await.expect("start");
            }
            Consumer::Delay(queue) => {
                queue.add_listener(bad_items_to(bad));
                queue.start().expect("start");
                queue.ready().await.expect("start");
            }
        }
    }

    async fn close(&self) {
        match self {
            Consumer::Priority(queue) => queue.close().await,
            Consumer::Delay(queue) => queue.close().await,
        }
    }
}

/// Items per producer in [`two_consumers_on_each_side`].
const ITEMS: usize = 60;

/// The priority (of `Kind::Priority`) or the due time in epoch ms (of `Kind::Delay`) of the
/// `i`th item a producer puts: priorities from -3 to 3; times from 1 s ago to 1 s ahead.
fn arg(kind: Kind, i: usize, start_ms: u64) -> i64 {
    match kind {
        Kind::Priority => (i % 7) as i64 - 3,
        Kind::Delay => start_ms as i64 - 1000 + ((i * 37) % 2000) as i64,
    }
}

/// Two Curator consumers and two of ours (a session each) on one priority or delay queue,
/// lock-safe under one lock path; Curator's producer and ours each put `ITEMS` items at once.
/// Counts items consumed twice and items never consumed, and asserts both are 0.
async fn two_consumers_on_each_side(kind: Kind) {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path(&format!("interop-{kind:?}-four").to_lowercase());
    let locks = format!("{path}-locks");
    let java_kind = match kind {
        Kind::Priority => "priority",
        Kind::Delay => "delay",
    };
    let log: Log = Arc::default();
    let bad = Arc::default();

    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.consume("0", java_kind, &path, Some(&locks)).await;
    java.consume("1", java_kind, &path, Some(&locks)).await;
    java.produce("p", java_kind, &path).await;
    let mut ours = Vec::new();
    for i in 0..2 {
        let fw = f.client().await;
        let builder = logging_builder(&fw, &path, Some(&locks), (&format!("rust-{i}"), Duration::from_millis(3)), &log);
        let queue = match kind {
            Kind::Priority => Consumer::Priority(builder.build_priority_queue(0).expect("valid queue")),
            Kind::Delay => Consumer::Delay(builder.build_delay_queue().expect("valid queue")),
        };
        queue.start(&bad).await;
        ours.push((fw, queue));
    }

    let start_ms = now_ms();
    let fw = f.fw.clone();
    let rust_path = path.clone();
    let rust_puts = tokio::spawn(async move {
        let builder = DistributedQueue::builder(&fw, &rust_path, StringSerializer);
        match kind {
            Kind::Priority => {
                let producer = builder.build_priority_queue(0).expect("queue");
                producer.start().expect("start");
                producer.ready().await.expect("start");
                for (i, item) in numbered("rust", ITEMS).iter().enumerate() {
                    producer.put(item, arg(kind, i, start_ms) as i32).await.expect("put");
                }
                producer.close().await;
            }
            Kind::Delay => {
                let producer = builder.build_delay_queue().expect("queue");
                producer.start().expect("start");
                producer.ready().await.expect("start");
                for (i, item) in numbered("rust", ITEMS).iter().enumerate() {
                    let due = UNIX_EPOCH + Duration::from_millis(arg(kind, i, start_ms) as u64);
                    producer.put(item, due).await.expect("put");
                }
                producer.close().await;
            }
        }
    });
    for (i, item) in numbered("java", ITEMS).iter().enumerate() {
        java.put("p", &arg(kind, i, start_ms).to_string(), item).await;
    }
    rust_puts.await.expect("rust producer");

    let all = eventually(deadline(), || async { log.lock().unwrap().len() >= 2 * ITEMS }).await;
    drained(&f.fw, &path).await;
    locks_released(&f.fw, &locks).await;
    for (fw, queue) in ours {
        queue.close().await;
        fw.close().await;
    }
    for id in ["0", "1"] {
        java.command(&format!("STOP {id}")).await;
    }

    let consumed = log.lock().unwrap().clone();
    let expected: Vec<String> = numbered("java", ITEMS).into_iter().chain(numbered("rust", ITEMS)).collect();
    let tally = Tally::of(&consumed, &expected);
    tracing::info!(?kind, "{tally}");
    assert!(all, "not all consumed: {tally}");
    assert_eq!((tally.twice, tally.missing), (0, 0), "items consumed twice, items never consumed ({tally})");
    assert_eq!(consumed.len(), 2 * ITEMS, "{tally}");
    let [jj, jr, rj, rr] = tally.cross;
    assert!(jj + jr > 0 && rj + rr > 0, "both sides' consumers took items: {tally}");
    assert!(bad.lock().unwrap().is_empty(), "no bad items: {:?}", bad.lock().unwrap());
    java.quit().await;
    f.close().await;
}

/// Lock-safe priority queues, two Curator consumers and two of ours on one queue and lock path,
/// items with priorities put by both sides at once: each consumed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_lock_safe_two_consumers_on_each_side_exactly_once() {
    two_consumers_on_each_side(Kind::Priority).await;
}

/// Lock-safe delay queues, two Curator consumers and two of ours, items due from 1 s ago to 1 s
/// ahead put by both sides at once: each consumed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_lock_safe_two_consumers_on_each_side_exactly_once() {
    two_consumers_on_each_side(Kind::Delay).await;
}

/// Items with ids, in put order: `(id, item)`; the id `twice` has two items.
fn with_ids(prefix: &str) -> Vec<(&'static str, String)> {
    let ids = ["twice", "one", "twice", "two", "three"];
    ids.iter().enumerate().map(|(i, &id)| (id, format!("{prefix}-{i}"))).collect()
}

/// The items of [`with_ids`] left once the id `twice` is removed, in put order.
fn without_twice(items: &[(&str, String)]) -> Vec<String> {
    items.iter().filter(|(id, _)| *id != "twice").map(|(_, item)| item.clone()).collect()
}

/// Curator's `DistributedIdQueue` puts items with ids (`queue-|<id>|<seq>`); our id queue
/// removes the two items of one id (`remove` says 2, then 0 for that id again and for an id no
/// item has) and our consumer takes the rest, first in, first out, each once. Lock-safe, so our
/// `remove` goes through the lock path as a consumer would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_id_producer_rust_removes_by_id_and_consumes() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-id-j2r");
    let locks = format!("{path}-locks");
    let log: Log = Arc::default();
    let bad = Arc::default();
    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.produce("p", "id", &path).await;
    let items = with_ids("java");
    for (id, item) in &items {
        java.put("p", id, item).await;
    }

    let remover = DistributedQueue::builder(&f.fw, &path, StringSerializer).lock_path(&locks).build_id_queue();
    let remover = remover.expect("queue");
    remover.start().expect("start");
    remover.ready().await.expect("start");
    assert_eq!(remover.remove("twice").await.expect("remove"), 2);
    assert_eq!(remover.remove("twice").await.expect("remove"), 0);
    assert_eq!(remover.remove("none").await.expect("remove"), 0);
    remover.close().await;

    let queue =
        logging_builder(&f.fw, &path, Some(&locks), ("rust", Duration::ZERO), &log).build_id_queue().expect("queue");
    queue.add_listener(bad_items_to(&bad));
    queue.start().expect("start");
    queue.ready().await.expect("start");
    let rest = without_twice(&items);
    assert_eq!(wait_rust_items(&log, rest.len()).await, rest, "first in, first out");
    drained(&f.fw, &path).await;
    locks_released(&f.fw, &locks).await;
    queue.close().await;
    assert_eq!(log.lock().unwrap().len(), rest.len(), "nothing consumed twice, nothing removed consumed");
    assert!(bad.lock().unwrap().is_empty(), "no bad items: {:?}", bad.lock().unwrap());
    java.quit().await;
    f.close().await;
}

/// The reverse: our id queue puts items with ids; Curator's `remove` removes the two items of
/// one id (it says 2, then 0) and Curator's lock-safe consumer takes the rest in put order,
/// each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_id_producer_curator_removes_by_id_and_consumes() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-id-r2j");
    let locks = format!("{path}-locks");
    let log: Log = Arc::default();
    let producer = DistributedQueue::builder(&f.fw, &path, StringSerializer).build_id_queue().expect("queue");
    producer.start().expect("start");
    producer.ready().await.expect("start");
    let items = with_ids("rust");
    for (id, item) in &items {
        producer.put(item, id).await.expect("put");
    }

    let mut java = JavaPeer::start(&f.connect_string(), &log).await;
    java.produce("p", "id", &path).await;
    assert_eq!(java.remove("p", "twice").await, 2);
    assert_eq!(java.remove("p", "twice").await, 0);
    assert_eq!(java.remove("p", "none").await, 0);
    java.consume("c", "id", &path, Some(&locks)).await;
    let rest = without_twice(&items);
    assert_eq!(java.wait_items(rest.len()).await, rest, "Curator's consumer, first in, first out");
    drained(&f.fw, &path).await;
    drained(&f.fw, &locks).await;
    java.command("STOP c").await;
    assert_eq!(java.items().len(), rest.len(), "nothing consumed twice, nothing removed consumed");
    producer.close().await;
    java.quit().await;
    f.close().await;
}
