//! `DistributedQueue` against a real ZooKeeper: the scenarios of Apache Curator's
//! `TestDistributedQueue` and `TestBoundedDistributedQueue` that apply, and the node layout
//! Curator reads (framing, names), and a take that survives the queue's container being reaped
//! (CURATOR-308).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::CuratorFramework;
use curator_recipes::{DistributedQueue, ErrorMode, QueueEvent, StringSerializer};
use curator_test::{eventually, TestingServer, Timing};
use tests::queues::lock_nodes;
use tests::{children, client, init_tracing, unique_path};
use tokio::sync::mpsc;

async fn fw() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// A queue on `path` whose consumer sends every item to the returned receiver.
fn sending_queue(
    fw: &CuratorFramework,
    path: &str,
    lock_path: Option<&str>,
) -> (DistributedQueue<String>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut builder = DistributedQueue::builder(fw, path, StringSerializer).consumer(move |item: String| {
        let tx = tx.clone();
        async move { tx.send(item).map_err(|e| e.to_string()) }
    });
    if let Some(lock_path) = lock_path {
        builder = builder.lock_path(lock_path);
    }
    (builder.build().expect("valid queue"), rx)
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(deadline(), rx.recv()).await.expect("an item in time").expect("queue open")
}

/// Follows Curator's `TestDistributedQueue.testSimple`: ten items put are consumed in order.
#[tokio::test]
async fn simple_items_are_consumed_in_order() {
    let fw = fw().await;
    let (queue, mut rx) = sending_queue(&fw, &unique_path("queue-simple"), None);
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..10 {
        queue.put(&i.to_string()).await.unwrap();
    }
    for i in 0..10 {
        assert_eq!(recv(&mut rx).await, i.to_string());
    }
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testSafetyBasic`: the same in lock-safe mode; once consumed,
/// no item node and no lock node is left.
#[tokio::test]
async fn lock_safe_items_are_consumed_in_order() {
    let fw = fw().await;
    let path = unique_path("queue-safety");
    let locks = format!("{path}-locks");
    let (queue, mut rx) = sending_queue(&fw, &path, Some(&locks));
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..10 {
        queue.put(&i.to_string()).await.unwrap();
    }
    for i in 0..10 {
        assert_eq!(recv(&mut rx).await, i.to_string());
    }
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    assert!(eventually(deadline(), || async { lock_nodes(&fw, &locks).await.is_empty() }).await);
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testPutMulti`: 100 items in one node, consumed in order.
#[tokio::test]
async fn put_multi_items_are_consumed_in_order() {
    let fw = fw().await;
    let path = unique_path("queue-multi");
    let (queue, mut rx) = sending_queue(&fw, &path, None);
    let items: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    // Put before start: one node holds them all.
    let producer = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.ready().await.unwrap();
    producer.put_multi(&items).await.unwrap();
    assert_eq!(children(&fw, &path).await.len(), 1);
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for item in &items {
        assert_eq!(&recv(&mut rx).await, item);
    }
    producer.close().await;
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testMultiPutterSingleGetter`: two producers put at once; every
/// item is consumed once.
#[tokio::test]
async fn two_producers_one_consumer_no_duplicates() {
    let fw = fw().await;
    let path = unique_path("queue-two-producers");
    let (queue, mut rx) = sending_queue(&fw, &path, None);
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let producer = Arc::new(DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap());
    let puts = (0..2).map(|p| {
        let producer = producer.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                producer.put(&format!("{p}-{i}")).await.unwrap();
            }
        })
    });
    for put in futures::future::join_all(puts).await {
        put.unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..100 {
        got.push(recv(&mut rx).await);
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 100);
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testErrorMode`: in lock-safe mode a failed item is requeued
/// and consumed again (Requeue, the default); under Delete it is consumed once only. Each
/// failure is reported to the listeners.
#[tokio::test]
async fn error_mode_requeue_then_delete() {
    let fw = fw().await;
    let path = unique_path("queue-error-mode");
    let calls = Arc::new(Mutex::new(0u32));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let counted = calls.clone();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .consumer(move |item: String| {
            let (calls, tx) = (counted.clone(), tx.clone());
            async move {
                let n = {
                    let mut calls = calls.lock().unwrap();
                    *calls += 1;
                    *calls
                };
                let _ = tx.send(item);
                if n < 2 {
                    Err("first call fails".to_string())
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let mut events = queue.events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"1".to_string()).await.unwrap();
    assert_eq!(recv(&mut rx).await, "1");
    assert_eq!(recv(&mut rx).await, "1"); // requeued, consumed again
    assert!(matches!(events.next().await, Some(QueueEvent::ConsumerFailed { mode: ErrorMode::Requeue, .. })));
    assert!(matches!(events.next().await, Some(QueueEvent::Consumed { .. })));

    queue.set_error_mode(ErrorMode::Delete);
    *calls.lock().unwrap() = 0;
    queue.put(&"2".to_string()).await.unwrap();
    assert_eq!(recv(&mut rx).await, "2");
    assert!(matches!(events.next().await, Some(QueueEvent::ConsumerFailed { mode: ErrorMode::Delete, .. })));
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    assert!(rx.try_recv().is_err(), "a deleted item was consumed again");
    assert_eq!(*calls.lock().unwrap(), 1);
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testRetryAfterFailure_Curator56`: a requeued item's node name
/// does not grow (CURATOR-56: it used to get the old name appended).
#[tokio::test]
async fn requeued_node_name_does_not_grow() {
    let fw = fw().await;
    let path = unique_path("queue-curator56");
    let names = Arc::new(Mutex::new(Vec::new()));
    let (fw2, path2, seen) = (fw.clone(), path.clone(), names.clone());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .consumer(move |item: String| {
            let (fw, path, seen, tx) = (fw2.clone(), path2.clone(), seen.clone(), tx.clone());
            async move {
                let listed = fw.get_children().for_path(&path).await?;
                let first = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(listed[0].clone());
                    seen.len() == 1
                };
                let _ = tx.send(item);
                if first {
                    Err("something went wrong".into())
                } else {
                    Ok::<(), curator_recipes::ConsumerError>(())
                }
            }
        })
        .build()
        .unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"test".to_string()).await.unwrap();
    recv(&mut rx).await;
    recv(&mut rx).await;
    let names = names.lock().unwrap().clone();
    assert_eq!(names.len(), 2);
    assert_eq!(names[0].len(), names[1].len(), "{names:?}");
    assert_ne!(names[0], names[1]);
    queue.close().await;
    fw.close().await;
}

/// Follows `TestDistributedQueue.testNoDuplicateProcessing` (200 items rather than 1,000): 4
/// lock-safe consumers, each with its own session; every item consumed exactly once.
#[tokio::test]
async fn four_lock_safe_consumers_no_duplicates() {
    const ITEMS: usize = 200;
    let fw = fw().await;
    let path = unique_path("queue-no-dup");
    let producer = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    producer.start().unwrap();
    producer.ready().await.unwrap();
    for i in 0..ITEMS {
        producer.put(&i.to_string()).await.unwrap();
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for _ in 0..4 {
        let own = client(&TestingServer::shared().connect_string()).await;
        let tx = tx.clone();
        let queue = DistributedQueue::builder(&own, &path, StringSerializer)
            .lock_path(&format!("{path}-a/locks"))
            .consumer(move |item: String| {
                let tx = tx.clone();
                async move { tx.send(item).map_err(|e| e.to_string()) }
            })
            .build()
            .unwrap();
        queue.start().unwrap();
        queue.ready().await.unwrap();
        consumers.push((own, queue));
    }
    let mut got = Vec::new();
    for _ in 0..ITEMS {
        got.push(recv(&mut rx).await);
    }
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    while let Ok(extra) = rx.try_recv() {
        got.push(extra);
    }
    let total = got.len();
    got.sort();
    got.dedup();
    assert_eq!((total, got.len()), (ITEMS, ITEMS), "duplicates or missing items");
    for (own, queue) in consumers {
        queue.close().await;
        own.close().await;
    }
    producer.close().await;
    fw.close().await;
}

/// Follows `TestBoundedDistributedQueue.testSimple`: with `max_items(1)` and a consumer that
/// holds on to its first item, a second put goes in (the first node is gone: plain mode
/// deletes before consuming), a third times out; once the consumer goes on, the rest go in
/// and everything is consumed in order.
#[tokio::test]
async fn bounded_put_waits_for_room() {
    let fw = fw().await;
    let path = unique_path("queue-bounded");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let held = gate.clone();
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer)
        .max_items(1)
        .consumer(move |item: String| {
            let (gate, tx) = (held.clone(), tx.clone());
            async move {
                let _ = tx.send(item);
                gate.acquire().await.map(|permit| permit.forget()).map_err(|e| e.to_string())
            }
        })
        .build()
        .unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let wait = Timing::new().deadline();
    assert!(queue.put_timeout(&"1".to_string(), wait).await.unwrap());
    assert_eq!(recv(&mut rx).await, "1"); // the consumer holds it
    assert!(queue.put_timeout(&"2".to_string(), wait).await.unwrap());
    assert!(!queue.put_timeout(&"3".to_string(), Duration::from_millis(500)).await.unwrap());
    assert_eq!(children(&fw, &path).await.len(), 1);
    gate.add_permits(100);
    for item in ["3", "4", "5"] {
        assert!(queue.put_timeout(&item.to_string(), wait).await.unwrap());
    }
    for item in ["2", "3", "4", "5"] {
        assert_eq!(recv(&mut rx).await, item);
    }
    queue.close().await;
    fw.close().await;
}

/// The node a put makes is Curator's: `P/queue-<10 digits>`, persistent sequential, with
/// `ItemSerializer`'s bytes (version 0x00010001, 0x01 + length + bytes per item, 0x02).
#[tokio::test]
async fn item_nodes_are_curators() {
    let fw = fw().await;
    let path = unique_path("queue-layout");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put_multi(&["ab".to_string(), "c".to_string()]).await.unwrap();
    let names = children(&fw, &path).await;
    assert_eq!(names.len(), 1);
    assert_eq!(names[0], "queue-0000000000");
    let (data, stat) = fw.get_data().for_path_with_stat(&format!("{path}/{}", names[0])).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!(data, [0, 1, 0, 1, 1, 0, 0, 0, 2, b'a', b'b', 1, 0, 0, 0, 1, b'c', 2]);
    queue.close().await;
    fw.close().await;
}

/// CURATOR-308: when the queue's path and lock path go (here: deleted, as the reaper would take
/// them were they containers, or their container parents), the consumer creates them again and
/// goes on taking items.
#[tokio::test]
async fn take_survives_the_container_being_reaped() {
    let fw = fw().await;
    let path = unique_path("queue-reaped");
    let locks = format!("{path}-locks");
    let (queue, mut rx) = sending_queue(&fw, &path, Some(&locks));
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"before".to_string()).await.unwrap();
    assert_eq!(recv(&mut rx).await, "before");
    assert!(eventually(deadline(), || async { lock_nodes(&fw, &locks).await.is_empty() }).await);
    // With its children: the queue handle's write tag (section 5), made by its first take.
    fw.delete().deleting_children_if_needed().for_path(&locks).await.unwrap();
    fw.delete().for_path(&path).await.unwrap();
    // A producer of its own puts (creating the path again if the consumer has not yet).
    let producer = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    producer.put(&"after".to_string()).await.unwrap();
    assert_eq!(recv(&mut rx).await, "after");
    queue.close().await;
    fw.close().await;
}

/// Bad options are typed errors, never a panic.
#[tokio::test]
async fn bad_options_are_errors() {
    let fw = fw().await;
    assert!(DistributedQueue::builder(&fw, "no-slash", StringSerializer).build().is_err());
    assert!(DistributedQueue::builder(&fw, "/q", StringSerializer).max_items(0).build().is_err());
    assert!(DistributedQueue::builder(&fw, "/q", StringSerializer).lock_path("/q").build().is_err());
    let queue = DistributedQueue::builder(&fw, &unique_path("queue-twice"), StringSerializer).build().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    assert!(queue.start().is_err());
    queue.close().await;
    fw.close().await;
}

/// A lock-safe consumer that finds its only item held by another consumer waits for that
/// consumer's lock to go (an exists watch) instead of listing and trying the lock again at
/// once: before, it sent a getChildren and a create every millisecond or so for as long as the
/// other held the item. Once the holder lets the item go (here: its queue closes mid-item),
/// the waiting consumer takes it. Past Curator, whose consumer waits for the queue's children
/// to change, so an item let go without a change is taken only at the next put.
#[tokio::test(flavor = "current_thread")]
async fn a_consumer_waits_for_an_item_held_elsewhere_without_polling() {
    let (events, _recording) = tests::logs::record_events();
    let server = TestingServer::shared();
    let (fw_a, fw_b) = (client(&server.connect_string()).await, client(&server.connect_string()).await);
    let path = unique_path("queue-held-elsewhere");
    let locks = format!("{path}-locks");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (held_tx, mut held) = mpsc::unbounded_channel();
    let holder = DistributedQueue::builder(&fw_a, &path, StringSerializer)
        .lock_path(&locks)
        .consumer({
            let gate = gate.clone();
            move |item: String| {
                let (gate, held_tx) = (gate.clone(), held_tx.clone());
                async move {
                    let _ = held_tx.send(item);
                    gate.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())
                }
            }
        })
        .build()
        .unwrap();
    holder.start().unwrap();
    holder.ready().await.unwrap();
    holder.put(&"only".to_string()).await.unwrap();
    assert_eq!(tokio::time::timeout(deadline(), held.recv()).await.expect("held"), Some("only".to_string()));

    let (waiter, mut taken) = sending_queue(&fw_b, &path, Some(&locks));
    let lock_tries = || events.all().iter().filter(|e| e.ends_with("queue: create lock node (ephemeral)")).count();
    waiter.start().unwrap();
    // The holder's try, then the waiter's.
    assert!(eventually(deadline(), || async { lock_tries() >= 2 }).await, "the waiter never tried the lock");
    let tries = lock_tries();
    // A measurement window, not a synchronisation: the waiter must not try again during it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lock_tries(), tries, "the waiter tried the lock again while it was held");

    // The holder's queue closes mid-item: its lock goes, and the waiter takes the item.
    holder.close().await;
    assert_eq!(recv(&mut taken).await, "only");
    waiter.close().await;
    fw_a.close().await;
    fw_b.close().await;
}
