//! Puts in the background and their listeners (`DistributedQueue::put_in_background`,
//! `QueuePutEvent`) against a real ZooKeeper: the put-listener scenarios of Apache Curator's
//! `TestDistributedQueue` (testPutListener, the `flushPuts` of testNoDuplicateProcessing), the
//! close and refusal cases, and background puts across a connection cut under every
//! combination of error policy and retry policy (`tests::policies::COMBINATIONS`): every put
//! is heard once, a failure included, and the tree agrees with what was heard.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{framing, DistributedQueue, QueuePutEvent, StringSerializer};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::{builder, children, client, connected, init_tracing, unique_path, wait_for};
use tokio::sync::mpsc;

async fn fw() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// A queue on `path` whose consumer sends every item to the returned receiver.
fn sending_queue(fw: &CuratorFramework, path: &str) -> (DistributedQueue<String>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queue = DistributedQueue::builder(fw, path, StringSerializer)
        .consumer(move |item: String| {
            let tx = tx.clone();
            async move { tx.send(item).map_err(|e| e.to_string()) }
        })
        .build()
        .expect("valid queue");
    (queue, rx)
}

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(deadline(), rx.recv()).await.expect("in time").expect("open")
}

/// The next `n` events of `events`, within the test deadline.
async fn next_events(
    events: &mut curator_core::EventStream<QueuePutEvent<String>>,
    n: usize,
) -> Vec<QueuePutEvent<String>> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let event = tokio::time::timeout(deadline(), events.next()).await.expect("an event in time");
        seen.push(event.expect("the stream is open"));
    }
    seen
}

/// Follows Curator's `TestDistributedQueue.testPutListener`: ten items put in the background
/// by one producer are consumed in order, and the put listener is called once for each.
#[tokio::test]
async fn put_listener_hears_every_background_put() {
    let fw = fw().await;
    let path = unique_path("queue-put-listener");
    let (queue, mut rx) = sending_queue(&fw, &path);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    queue.add_put_listener(move |event| {
        if let QueuePutEvent::Completed { .. } = event {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut events = queue.put_events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..10 {
        queue.put_in_background(i.to_string()).unwrap();
    }
    for i in 0..10 {
        assert_eq!(recv(&mut rx).await, i.to_string(), "one producer's background puts keep their order");
    }
    for (i, event) in next_events(&mut events, 10).await.into_iter().enumerate() {
        match event {
            QueuePutEvent::Completed { items, node } => {
                assert_eq!(&*items, [i.to_string()]);
                assert!(node.starts_with(&format!("{path}/queue-")), "{node}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(eventually(deadline(), || async { calls.load(Ordering::SeqCst) == 10 }).await);
    queue.close().await;
    fw.close().await;
}

/// The put listeners hear a producer's background puts in the order they were made (as
/// Curator's, told on its one event thread), whatever order the creates' callbacks finish in.
#[tokio::test]
async fn put_events_come_in_the_order_of_the_puts() {
    const PUTS: usize = 200;
    let fw = fw().await;
    let path = unique_path("queue-put-order");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    let mut events = queue.put_events();
    queue.start().unwrap();
    for i in 0..PUTS {
        queue.put_in_background(i.to_string()).unwrap();
    }
    let heard: Vec<String> = next_events(&mut events, PUTS).await.iter().map(|e| e.items()[0].clone()).collect();
    assert_eq!(heard, (0..PUTS).map(|i| i.to_string()).collect::<Vec<_>>());
    queue.close().await;
    fw.close().await;
}

/// Curator's `putMultiCompleted`: the items of one background `put_multi` are one node, heard
/// as one event with all of them.
#[tokio::test]
async fn put_multi_in_background_is_heard_once_with_its_items() {
    let fw = fw().await;
    let path = unique_path("queue-put-multi-listener");
    let (queue, mut rx) = sending_queue(&fw, &path);
    let mut events = queue.put_events();
    queue.start().unwrap();
    let items: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    queue.put_multi_in_background(items.clone()).unwrap();
    match next_events(&mut events, 1).await.remove(0) {
        QueuePutEvent::Completed { items: heard, .. } => assert_eq!(&*heard, &items[..]),
        other => panic!("{other:?}"),
    }
    for item in &items {
        assert_eq!(&recv(&mut rx).await, item);
    }
    queue.close().await;
    fw.close().await;
}

/// Follows the producer of Curator's `TestDistributedQueue.testNoDuplicateProcessing`: a
/// producer-only queue puts many items in the background, `flush_puts` waits for them all,
/// and then every node is there.
#[tokio::test]
async fn flush_puts_waits_for_every_background_put() {
    let fw = fw().await;
    let path = unique_path("queue-flush-puts");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..100 {
        queue.put_in_background(i.to_string()).unwrap();
    }
    assert!(queue.flush_puts(deadline()).await, "the puts are done in time");
    assert_eq!(children(&fw, &path).await.len(), 100);
    queue.close().await;
    fw.close().await;
}

/// `close` waits for the background puts in flight: the stream of their outcomes has one
/// event per put, then ends, and every node is there.
#[tokio::test]
async fn close_waits_for_background_puts_and_ends_their_stream() {
    let fw = fw().await;
    let path = unique_path("queue-close-puts");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    let mut events = queue.put_events();
    queue.start().unwrap();
    for i in 0..50 {
        queue.put_in_background(i.to_string()).unwrap();
    }
    queue.close().await;
    let mut completed = 0;
    while let Some(event) = tokio::time::timeout(deadline(), events.next()).await.expect("the stream ends in time") {
        assert!(matches!(event, QueuePutEvent::Completed { .. }), "{event:?}");
        completed += 1;
    }
    assert_eq!(completed, 50);
    assert_eq!(children(&fw, &path).await.len(), 50);
    fw.close().await;
}

/// Bad input and calls out of the queue's life are refused at once with a typed error, nothing
/// sent: before start, after close, an item past the data limit.
#[tokio::test]
async fn background_puts_refuse_at_once_what_cannot_go() {
    let fw = fw().await;
    let path = unique_path("queue-put-refused");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    assert!(matches!(queue.put_in_background("early".into()), Err(CuratorError::NotStarted { .. })));
    queue.start().unwrap();
    queue.ready().await.unwrap();
    let huge = "x".repeat(2 * 1024 * 1024);
    assert!(matches!(queue.put_in_background(huge), Err(CuratorError::DataTooLarge { .. })));
    queue.close().await;
    assert!(matches!(queue.put_multi_in_background(vec!["late".into()]), Err(CuratorError::AlreadyClosed { .. })));
    assert!(children(&fw, &path).await.is_empty(), "nothing was put");
    fw.close().await;
}

/// A bounded queue: a background put waiting for room gives up when the queue closes, heard as
/// `Failed` with `AlreadyClosed`, and nothing is sent; `close` does not wait for room.
#[tokio::test]
async fn bounded_background_put_waiting_for_room_gives_up_at_close() {
    let fw = fw().await;
    let path = unique_path("queue-bounded-put-close");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).max_items(1).build().unwrap();
    let mut events = queue.put_events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    queue.put(&"fills it".to_string()).await.unwrap();
    queue.put_in_background("waits".into()).unwrap();
    assert!(!queue.flush_puts(Duration::from_millis(300)).await, "the put waits for room");
    tokio::time::timeout(deadline(), queue.close()).await.expect("close does not wait for room");
    match next_events(&mut events, 1).await.remove(0) {
        QueuePutEvent::Failed { items, error: CuratorError::AlreadyClosed { .. } } => assert_eq!(&*items, ["waits"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(children(&fw, &path).await.len(), 1, "the waiting put sent nothing");
    fw.close().await;
}

/// Background puts made while the connection is cut, under `policy` and `retry` (with the
/// short retry policy, the cut lasts until a put made during it is heard to fail): each put is
/// heard exactly once; every `Completed` node holds its item; every item is in the queue
/// exactly once if its put was heard `Completed`, at most once if heard `Failed` with an
/// outcome unknown, and not at all if heard `Failed` otherwise: never twice (before the core
/// decided lost replies, a create resent after one could leave its item twice, and this test
/// compared sets of items to tolerate it).
async fn background_puts_across_a_cut(policy: ErrorPolicy, retry: Retry) {
    const PUTS: usize = 20;
    let case = format!("{policy:?}/{retry:?}");
    let proxy = ChaosProxy::start(&TestingServer::shared().connect_string()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    let mut states = fw.connection_state_stream();
    let path = unique_path("queue-put-cut");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    let mut events = queue.put_events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    for i in 0..PUTS / 2 {
        queue.put_in_background(format!("before-{i}")).unwrap();
    }
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    for i in 0..PUTS / 2 {
        queue.put_in_background(format!("during-{i}")).unwrap();
    }
    let mut heard = Vec::new();
    if retry == Retry::Short {
        // The short policy gives up while the connection is still cut: a failure is heard.
        loop {
            let event = next_events(&mut events, 1).await.remove(0);
            let during = event.items()[0].starts_with("during-");
            heard.push(event);
            if during {
                break;
            }
        }
        let last = heard.last().unwrap();
        assert!(matches!(last, QueuePutEvent::Failed { .. }), "{case}: {last:?}");
    }
    proxy.pass();
    heard.extend(next_events(&mut events, PUTS - heard.len()).await);
    let (mut completed, mut unknown) = (BTreeSet::new(), BTreeSet::new());
    let observer = client(&TestingServer::shared().connect_string()).await;
    for event in &heard {
        let item = event.items()[0].clone();
        match event {
            QueuePutEvent::Completed { node, .. } => {
                let data = observer.get_data().for_path(node).await.expect("a completed put's node exists");
                assert_eq!(framing::decode(node, &data).unwrap(), vec![item.clone().into_bytes()], "{case}: {node}");
                completed.insert(item);
            }
            QueuePutEvent::Failed { error, .. } => {
                if error.outcome_unknown() {
                    unknown.insert(item);
                }
            }
            other => panic!("{case}: {other:?}"),
        }
    }
    let all: BTreeSet<String> = heard.iter().map(|e| e.items()[0].clone()).collect();
    assert_eq!(all.len(), PUTS, "{case}: each put heard once");
    assert!(queue.flush_puts(deadline()).await, "{case}");
    assert_eq!(events.try_next().map(|e| format!("{e:?}")), None, "{case}: no second event for a put");
    // A put is made at most once: a create whose reply was lost is not sent again (the core
    // ends it OutcomeUnknown, docs/architecture.md section 4.4). So each item is in the tree
    // exactly once if its put was heard `Completed`, at most once if heard `Failed` with an
    // outcome unknown, and not at all otherwise.
    let mut in_tree: BTreeMap<String, usize> = BTreeMap::new();
    for name in children(&observer, &path).await {
        let node = format!("{path}/{name}");
        let data = observer.get_data().for_path(&node).await.unwrap();
        let items = framing::decode(&node, &data).unwrap();
        *in_tree.entry(String::from_utf8(items[0].clone()).unwrap()).or_default() += 1;
    }
    for item in &all {
        let n = in_tree.get(item).copied().unwrap_or(0);
        let allowed = if completed.contains(item) {
            1..=1
        } else if unknown.contains(item) {
            0..=1
        } else {
            0..=0
        };
        assert!(allowed.contains(&n), "{case}: {item} is in the tree {n} times: {in_tree:?}");
    }
    assert!(in_tree.keys().all(|item| all.contains(item)), "{case}: an item no put made: {in_tree:?}");
    queue.close().await;
    fw.close().await;
    observer.close().await;
}

/// `background_puts_across_a_cut` under the four combinations of policies, side by side (each
/// has its own proxy, session and path).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_puts_across_a_cut_are_each_heard_once() {
    init_tracing();
    futures::future::join_all(COMBINATIONS.map(|(policy, retry)| background_puts_across_a_cut(policy, retry))).await;
}

/// The framework closes while background puts wait for a connection (the proxy refuses it):
/// each put is still heard once, as `Failed`, and the queue's close returns.
#[tokio::test]
async fn framework_close_fails_the_background_puts_waiting_for_it() {
    init_tracing();
    let proxy = ChaosProxy::start(&TestingServer::shared().connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string())).await;
    let mut states = fw.connection_state_stream();
    let path = unique_path("queue-put-fw-close");
    let queue = DistributedQueue::builder(&fw, &path, StringSerializer).build().unwrap();
    let mut events = queue.put_events();
    queue.start().unwrap();
    queue.ready().await.unwrap();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    for i in 0..5 {
        queue.put_in_background(i.to_string()).unwrap();
    }
    fw.close().await;
    for event in next_events(&mut events, 5).await {
        assert!(matches!(event, QueuePutEvent::Failed { .. }), "{event:?}");
    }
    tokio::time::timeout(deadline(), queue.close()).await.expect("the queue closes");
    assert_eq!(
        tokio::time::timeout(deadline(), events.next()).await.expect("the stream ends").map(|e| format!("{e:?}")),
        None
    );
}

/// The id, priority and delay queues put in the background too, with their own node names
/// (`|<id>|`, the priority's sign and digits, `|<epoch ms>|`), heard by their put listeners;
/// the id queue's bad id is refused at once.
#[tokio::test]
async fn variants_put_in_background_with_their_names() {
    let fw = fw().await;
    let builder = |name: &str| DistributedQueue::builder(&fw, &unique_path(name), StringSerializer);

    let ids = builder("queue-id-background").build_id_queue().unwrap();
    let mut id_events = ids.put_events();
    ids.start().unwrap();
    assert!(matches!(ids.put_in_background("x".into(), "a|b"), Err(CuratorError::InvalidArgument { .. })));
    ids.put_in_background("order".into(), "order-12").unwrap();
    assert!(ids.flush_puts(deadline()).await);

    let priorities = builder("queue-priority-background").build_priority_queue(0).unwrap();
    let mut priority_events = priorities.put_events();
    priorities.start().unwrap();
    priorities.put_multi_in_background(vec!["p1".into(), "p2".into()], 5).unwrap();

    let delays = builder("queue-delay-background").build_delay_queue().unwrap();
    let mut delay_events = delays.put_events();
    delays.start().unwrap();
    let at = std::time::UNIX_EPOCH + Duration::from_millis(0x0123_4567_89AB);
    delays.put_in_background("later".into(), at).unwrap();

    let node = |event: QueuePutEvent<String>| match event {
        QueuePutEvent::Completed { node, .. } => node.rsplit('/').next().unwrap().to_string(),
        other => panic!("{other:?}"),
    };
    assert!(node(next_events(&mut id_events, 1).await.remove(0)).starts_with("queue-|order-12|"));
    assert!(node(next_events(&mut priority_events, 1).await.remove(0)).starts_with("queue-100000005"));
    assert!(node(next_events(&mut delay_events, 1).await.remove(0)).starts_with("queue-|123456789AB|"));
    ids.close().await;
    priorities.close().await;
    delays.close().await;
    fw.close().await;
}
