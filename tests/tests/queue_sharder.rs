//! `QueueSharder` against a real ZooKeeper: the scenarios of Apache Curator's
//! `TestQueueSharder` (testDistribution, testSharderWatchSync, testSimpleDistributedQueue),
//! Curator's node layout (`Q/queue-<uuid>` shards, the leader's latch outside `Q`), and the
//! checks of its options. Where Curator's tests sleep to let the leader add shards, these wait
//! for the shards to appear (with the test deadline).

use std::collections::BTreeSet;
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, LifeState};
use curator_recipes::{DistributedQueue, QueueSharder, QueueSharderPolicies, StringSerializer, QUEUE_SHARD_PREFIX};
use curator_test::{eventually, TestingServer, Timing};
use tests::{children, client, init_tracing, unique_path};
use tokio::sync::{mpsc, watch};

async fn fw() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

fn policies(threshold: usize) -> QueueSharderPolicies {
    QueueSharderPolicies::builder()
        .new_queue_threshold(threshold)
        .threshold_check(Duration::from_millis(5))
        .build()
        .expect("valid policies")
}

/// A consumer's gate: closed, every consumer waits before it hands its item on.
struct Gate(watch::Sender<bool>);

impl Gate {
    fn closed() -> Self {
        Self(watch::channel(false).0)
    }

    fn open(&self) {
        self.0.send_replace(true);
    }
}

/// A sharder on `queue_path`, led on `leader_path`, whose shards' consumers wait for `gate`,
/// then send their items to the returned receiver.
fn sharder(
    fw: &CuratorFramework,
    queue_path: &str,
    leader_path: &str,
    policies: QueueSharderPolicies,
    gate: &Gate,
) -> (QueueSharder<String>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let gate = gate.0.subscribe();
    let sharder = QueueSharder::new(fw, queue_path, leader_path, policies, move |fw, path| {
        let (tx, gate) = (tx.clone(), gate.clone());
        DistributedQueue::builder(fw, path, StringSerializer)
            .consumer(move |item: String| {
                let (tx, mut gate) = (tx.clone(), gate.clone());
                async move {
                    gate.wait_for(|open| *open).await.map_err(|e| e.to_string())?;
                    tx.send(item).map_err(|e| e.to_string())
                }
            })
            .build()
    })
    .expect("valid sharder");
    (sharder, rx)
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(deadline(), rx.recv()).await.expect("an item in time").expect("open")
}

/// Follows Curator's `TestQueueSharder.testDistribution`: with consumers that hold their items,
/// ten times the threshold put through the sharder are spread over the shards the leader adds,
/// every shard holds items (at least a tenth of the threshold) and the mean is at least 90 % of
/// it. Curator sleeps 5 ms after each put to let the shards come; here, once a put finds its
/// shard full, the test waits for the leader to add every shard (`max_queues`).
#[tokio::test]
async fn distribution() {
    const THRESHOLD: usize = 20;
    const FACTOR: usize = 10;
    let fw = fw().await;
    let (queues, leader) = (unique_path("sharder-distribution"), unique_path("sharder-distribution-leader"));
    let gate = Gate::closed();
    let (sharder, _rx) = sharder(&fw, &queues, &leader, policies(THRESHOLD), &gate);
    sharder.start().unwrap();
    sharder.ready().await.unwrap();
    let max = QueueSharderPolicies::DEFAULT_MAX_QUEUES;
    for i in 0..THRESHOLD * FACTOR {
        let queue = sharder.queue().unwrap();
        queue.put(&i.to_string()).await.unwrap();
        if sharder.shard_qty() < max && children(&fw, queue.path()).await.len() >= THRESHOLD {
            assert!(eventually(deadline(), || async { sharder.shard_qty() == max }).await, "the leader adds shards");
        }
    }
    let paths = sharder.queue_paths();
    assert_eq!(paths.len(), max);
    let mut sizes = Vec::new();
    for path in &paths {
        let size = children(&fw, path).await.len();
        assert!(size > 0, "{path} is empty");
        assert!(size as f64 >= THRESHOLD as f64 * 0.1, "{path} holds {size}");
        sizes.push(size);
    }
    let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
    assert!(mean >= THRESHOLD as f64 * 0.9, "mean {mean} of {sizes:?}");
    gate.open();
    sharder.close().await;
    fw.close().await;
}

/// Follows Curator's `TestQueueSharder.testSharderWatchSync`: two sharders on one queue path;
/// items put through the first make the leader add shards, and both end up with the same
/// shards, those in the tree. (Curator's consumers take the items at once and it sleeps while
/// the shards come; these hold them, so that the shards fill whatever the timing.)
#[tokio::test]
async fn sharder_watch_sync() {
    let fw = fw().await;
    let (queues, leader) = (unique_path("sharder-sync"), unique_path("sharder-sync-leader"));
    let gate = Gate::closed();
    let (sharder1, _rx1) = sharder(&fw, &queues, &leader, policies(2), &gate);
    let (sharder2, _rx2) = sharder(&fw, &queues, &leader, policies(2), &gate);
    sharder1.start().unwrap();
    sharder2.start().unwrap();
    sharder1.ready().await.unwrap();
    sharder2.ready().await.unwrap();
    for i in 0..20 {
        sharder1.queue().unwrap().put(&i.to_string()).await.unwrap();
    }
    assert!(eventually(deadline(), || async { sharder1.shard_qty() > 1 || sharder2.shard_qty() > 1 }).await);
    assert!(
        eventually(deadline(), || async {
            let in_tree = children(&fw, &queues).await.len();
            sharder1.shard_qty() == sharder2.shard_qty() && sharder1.shard_qty() == in_tree
        })
        .await,
        "{} vs {}",
        sharder1.shard_qty(),
        sharder2.shard_qty()
    );
    assert_eq!(sharder1.queue_paths(), sharder2.queue_paths());
    assert_eq!([sharder1.has_leadership(), sharder2.has_leadership()].iter().filter(|l| **l).count(), 1, "one leader");
    gate.open();
    sharder1.close().await;
    sharder2.close().await;
    fw.close().await;
}

/// Follows Curator's `TestQueueSharder.testSimpleDistributedQueue`: eight items put through a
/// sharder with a threshold of 2 are each consumed, over more than one shard; a sharder
/// started again on the same paths finds the same shards. (Curator sleeps before opening its
/// consumers' latch; here the latch opens once the leader added a shard.)
#[tokio::test]
async fn simple_distributed_queue() {
    let fw = fw().await;
    let (queues, leader) = (unique_path("sharder-simple"), unique_path("sharder-simple-leader"));
    let gate = Gate::closed();
    let (sharder, mut rx) = sharder(&fw, &queues, &leader, policies(2), &gate);
    sharder.start().unwrap();
    sharder.ready().await.unwrap();
    let items = ["one", "two", "three", "four", "five", "six", "seven", "eight"];
    for item in &items[..4] {
        sharder.queue().unwrap().put(&item.to_string()).await.unwrap();
    }
    assert!(eventually(deadline(), || async { sharder.shard_qty() > 1 }).await, "the leader adds a shard");
    gate.open();
    for item in &items[4..] {
        sharder.queue().unwrap().put(&item.to_string()).await.unwrap();
    }
    assert!(sharder.shard_qty() > 1);
    let mut consumed = BTreeSet::new();
    for _ in 0..items.len() {
        consumed.insert(recv(&mut rx).await);
    }
    assert_eq!(consumed, items.iter().map(|s| s.to_string()).collect());
    sharder.close().await;
    let shard_qty = sharder.shard_qty();
    assert_eq!(sharder.state(), LifeState::Closed);

    // Started again on the same paths: the same shards.
    let (again, _rx) = sharder_again(&fw, &queues, &leader);
    again.start().unwrap();
    again.ready().await.unwrap();
    assert_eq!(again.shard_qty(), shard_qty);
    assert_eq!(again.queue_paths(), sharder.queue_paths());
    again.close().await;
    fw.close().await;
}

fn sharder_again(
    fw: &CuratorFramework,
    queues: &str,
    leader: &str,
) -> (QueueSharder<String>, mpsc::UnboundedReceiver<String>) {
    let gate = Gate::closed();
    gate.open();
    sharder(fw, queues, leader, policies(2), &gate)
}

/// Curator's layout: the first shard is `Q/queue-<uuid>` (a Java `QueueSharder` reads it),
/// `Q` is a container, and the leader's latch node is on the leader path, outside `Q`.
#[tokio::test]
async fn node_layout_is_curators() {
    let fw = fw().await;
    let (queues, leader) = (unique_path("sharder-layout"), unique_path("sharder-layout-leader"));
    let gate = Gate::closed();
    let (sharder, _rx) = sharder(&fw, &queues, &leader, policies(100), &gate);
    sharder.start().unwrap();
    sharder.ready().await.unwrap();
    let shards = children(&fw, &queues).await;
    assert_eq!(shards.len(), 1);
    let name = shards[0].strip_prefix(QUEUE_SHARD_PREFIX).expect("queue- prefix");
    assert_eq!(name.len(), 36, "a UUID: {name}");
    assert_eq!(sharder.queue_paths(), vec![format!("{queues}/{}", shards[0])]);
    let (_, stat) = fw.get_data().for_path_with_stat(&queues).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0);
    assert!(eventually(deadline(), || async { children(&fw, &leader).await.len() == 1 }).await, "the latch's node");
    assert!(eventually(deadline(), || async { sharder.has_leadership() }).await);
    sharder.close().await;
    fw.close().await;
}

/// Bad options and calls out of the sharder's life get typed errors, never a panic or a hang.
#[tokio::test]
async fn bad_options_and_calls_out_of_life_are_refused() {
    let fw = fw().await;
    let bad = |b: curator_recipes::QueueSharderPoliciesBuilder| {
        matches!(b.build(), Err(CuratorError::InvalidArgument { .. }))
    };
    assert!(bad(QueueSharderPolicies::builder().new_queue_threshold(0)));
    assert!(bad(QueueSharderPolicies::builder().max_queues(0)));
    assert!(bad(QueueSharderPolicies::builder().threshold_check(Duration::ZERO)));
    assert!(bad(QueueSharderPolicies::builder().threshold_check(Duration::MAX)));
    assert!(bad(QueueSharderPolicies::builder()
        .threshold_check(QueueSharderPolicies::MAX_THRESHOLD_CHECK + Duration::from_millis(1))));
    assert!(QueueSharderPolicies::builder().threshold_check(QueueSharderPolicies::MAX_THRESHOLD_CHECK).build().is_ok());
    assert_eq!(QueueSharderPolicies::default().new_queue_threshold(), 10_000);

    let allocator = |fw: &CuratorFramework, path: &str| DistributedQueue::builder(fw, path, StringSerializer).build();
    let make = |queues: &str, leader: &str| QueueSharder::new(&fw, queues, leader, policies(2), allocator);
    let queues = unique_path("sharder-bad");
    assert!(matches!(make(&queues, &queues), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(make(&queues, &format!("{queues}/leader")), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(make("/", "/leader"), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(make("no-slash", "/leader"), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(make(&queues, "/leader/"), Err(CuratorError::InvalidPath { .. })));
    let sharder = make(&queues, &format!("{queues}-leader")).unwrap();
    assert!(matches!(sharder.queue(), Err(CuratorError::NotStarted { .. })));
    sharder.start().unwrap();
    assert!(matches!(sharder.start(), Err(CuratorError::AlreadyStarted { .. })));
    sharder.ready().await.unwrap();
    assert!(sharder.queue().is_ok());
    sharder.close().await;
    assert!(matches!(sharder.queue(), Err(CuratorError::AlreadyClosed { .. })));
    assert!(matches!(sharder.start(), Err(CuratorError::AlreadyClosed { .. })));

    // An allocator that refuses, or makes a queue elsewhere: the first step is refused, the
    // sharder closes.
    let refusing =
        QueueSharder::new(&fw, &unique_path("sharder-refuse"), &unique_path("l"), policies(2), |_, path: &str| {
            Err::<DistributedQueue<String>, _>(CuratorError::InvalidArgument { path: path.into(), reason: "no".into() })
        })
        .unwrap();
    refusing.start().unwrap();
    assert!(matches!(refusing.ready().await, Err(CuratorError::InvalidArgument { .. })));
    assert_eq!(refusing.state(), LifeState::Closed);
    let elsewhere =
        QueueSharder::new(&fw, &unique_path("sharder-elsewhere"), &unique_path("l"), policies(2), |fw, _| {
            DistributedQueue::builder(fw, "/somewhere-else", StringSerializer).build()
        })
        .unwrap();
    elsewhere.start().unwrap();
    assert!(matches!(elsewhere.ready().await, Err(CuratorError::InvalidArgument { .. })));
    fw.close().await;
}
