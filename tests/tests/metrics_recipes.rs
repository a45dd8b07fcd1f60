//! Metrics of the queues, atomic values, barriers and service discovery, and the connection
//! gauge labelled per framework (issue 28 item 6; `curator_core::metrics`, docs/operations.md
//! section 6), against real ZooKeeper: a recorder installed in this process sees each metric
//! move by exactly the amount its events define.
//!
//! The recorder is global to the process (`tests::metrics`): these tests run one at a time
//! (`SERIAL`) and assert on the differences their own events made.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::metrics::{self as m, queue};
use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework, ErrorPolicy};
use curator_discovery::{DownInstancePolicy, ServiceDiscovery, ServiceInstance, ServiceProvider};
use curator_recipes::{DistributedAtomicLong, PromotedToLock};
use curator_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use curator_recipes::{DistributedQueue, ErrorMode, SimpleDistributedQueue, StringSerializer};
use curator_test::{eventually, TestingServer, Timing};
use tests::metrics::{counter, counter_sum, gauge, recorder, settles, SERIAL};
use tests::policies::{framework, Retry, COMBINATIONS};
use tests::{builder, children, connected, init_tracing, unique_path};

fn connect() -> String {
    TestingServer::shared().connect_string()
}

/// Each framework's transitions move its own series of `curator_connection_state`, labelled
/// with its `metrics_name`: the default (connect string and namespace) and one given to the
/// builder. Closing one shows 6 on its series only. A bad name is refused at `build()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_framework_has_its_own_connection_gauge() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = connect();
    let namespace = unique_path("metrics-ns").trim_start_matches('/').to_string();
    let named = format!("orders-{namespace}");
    let a = connected(builder(&connect).namespace(namespace.as_str())).await;
    let b = connected(builder(&connect).metrics_name(named.as_str())).await;
    assert_eq!(a.metrics_name(), format!("{connect}/{namespace}"), "the default: connect string and namespace");
    assert_eq!(b.metrics_name(), named);
    let (of_a, of_b) = ([("framework", a.metrics_name())], [("framework", b.metrics_name())]);
    assert_eq!(gauge(m::CONNECTION_STATE, &of_a), 1.0);
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 1.0);

    a.close().await;
    assert_eq!(gauge(m::CONNECTION_STATE, &of_a), 6.0, "a is closed");
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 1.0, "b is still connected");
    b.close().await;
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 6.0);

    for bad in ["", "  ", "a\nb"] {
        match builder(&connect).metrics_name(bad).build() {
            Err(CuratorError::InvalidArgument { reason, .. }) => assert!(reason.contains("metrics name"), "{reason}"),
            other => panic!("metrics name {bad:?}: not InvalidArgument: {other:?}"),
        }
    }
}

/// Follows Curator's TestSimpleDistributedQueue.testOffer1 and TestDistributedQueue.testSimple:
/// three offers and three takes of a simple queue count three puts and three takes; two puts
/// and a put of two items on a `DistributedQueue` count four puts, and its consumer being
/// handed the four items counts four takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_puts_and_takes_count_items() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&connect())).await;
    let simple = [("queue", queue::SIMPLE)];
    let (puts, takes) = (counter(m::QUEUE_PUTS, &simple), counter(m::QUEUE_TAKES, &simple));
    let q = SimpleDistributedQueue::new(&fw, &unique_path("metrics-simple")).unwrap();
    for item in ["1", "2", "3"] {
        q.offer(item.as_bytes().to_vec()).await.unwrap();
    }
    assert_eq!(counter(m::QUEUE_PUTS, &simple), puts + 3);
    assert_eq!(counter(m::QUEUE_TAKES, &simple), takes, "nothing taken yet");
    assert_eq!(q.take().await.unwrap(), b"1");
    assert_eq!(q.poll(Duration::ZERO).await.unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(q.remove().await.unwrap(), b"3");
    assert!(q.poll(Duration::ZERO).await.unwrap().is_none());
    assert_eq!(counter(m::QUEUE_TAKES, &simple), takes + 3, "an empty poll takes nothing");

    let plain = [("queue", queue::DISTRIBUTED)];
    let (puts, takes) = (counter(m::QUEUE_PUTS, &plain), counter(m::QUEUE_TAKES, &plain));
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    let dq = DistributedQueue::builder(&fw, &unique_path("metrics-dq"), StringSerializer)
        .consumer(move |item: String| {
            seen.lock().unwrap().push(item);
            async { Ok::<(), String>(()) }
        })
        .build()
        .unwrap();
    dq.start().unwrap();
    dq.ready().await.unwrap();
    dq.put(&"a".to_string()).await.unwrap();
    dq.put(&"b".to_string()).await.unwrap();
    dq.put_multi(&["c".to_string(), "d".to_string()]).await.unwrap();
    assert_eq!(counter(m::QUEUE_PUTS, &plain), puts + 4, "one per item");
    settles("the consumer has the four items", || got.lock().unwrap().len() == 4).await;
    settles("four takes", || counter(m::QUEUE_TAKES, &plain) == takes + 4).await;
    dq.close().await;
    fw.close().await;
}

/// Follows Curator's TestDistributedQueue.testErrorMode: a lock-safe consumer that fails on its
/// first item under `ErrorMode::Requeue` has it requeued (one redelivery, reason `requeued`) and
/// is handed it again: one put, two takes, no fence failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeued_item_counts_one_redelivery() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&connect())).await;
    let path = unique_path("metrics-requeue");
    let safe = [("queue", queue::LOCK_SAFE)];
    let requeued = [("queue", queue::LOCK_SAFE), ("reason", "requeued")];
    let (puts, takes, redeliveries) =
        (counter(m::QUEUE_PUTS, &safe), counter(m::QUEUE_TAKES, &safe), counter(m::QUEUE_REDELIVERIES, &requeued));
    let fences = counter_sum(m::QUEUE_FENCE_FAILURES, &[]);
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let dq = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&format!("{path}-locks"))
        .error_mode(ErrorMode::Requeue)
        .consumer(move |_item: String| {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                match first {
                    true => Err("the first try fails".to_string()),
                    false => Ok(()),
                }
            }
        })
        .build()
        .unwrap();
    dq.start().unwrap();
    dq.ready().await.unwrap();
    dq.put(&"x".to_string()).await.unwrap();
    settles("handed over twice", || calls.load(Ordering::SeqCst) == 2).await;
    settles("one requeue", || counter(m::QUEUE_REDELIVERIES, &requeued) == redeliveries + 1).await;
    settles("two takes", || counter(m::QUEUE_TAKES, &safe) == takes + 2).await;
    assert_eq!(counter(m::QUEUE_PUTS, &safe), puts + 1, "a requeue is not a put");
    assert_eq!(counter_sum(m::QUEUE_FENCE_FAILURES, &[]), fences);
    dq.close().await;
    fw.close().await;
}

/// The fault: while a lock-safe consumer holds an item, its lock node `L/<item>` is deleted by
/// another client. The fenced finish is refused: one fence failure (reason `lock_deleted`) and
/// one redelivery (reason `released`), the item node left in place. Under every error and
/// retry policy. (Curator's CURATOR-605 scenario, as queue_faults.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lock_node_counts_one_fence_failure() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    for (policy, retry) in COMBINATIONS {
        deleted_lock_node(policy, retry).await;
    }
}

async fn deleted_lock_node(policy: ErrorPolicy, retry: Retry) {
    let connect = connect();
    let fw = framework(&connect, policy, retry).await;
    let other = connected(builder(&connect)).await;
    let path = unique_path("metrics-fence");
    let locks = format!("{path}-locks");
    let deleted = [("reason", "lock_deleted")];
    let released = [("queue", queue::LOCK_SAFE), ("reason", "released")];
    let (fences, redeliveries) =
        (counter(m::QUEUE_FENCE_FAILURES, &deleted), counter(m::QUEUE_REDELIVERIES, &released));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (held_tx, mut held) = tokio::sync::mpsc::unbounded_channel();
    let consumer_gate = gate.clone();
    let dq = DistributedQueue::builder(&fw, &path, StringSerializer)
        .lock_path(&locks)
        .consumer(move |item: String| {
            let (gate, held) = (consumer_gate.clone(), held_tx.clone());
            async move {
                let _ = held.send(item);
                gate.acquire().await.map(|p| p.forget()).map_err(|e| e.to_string())
            }
        })
        .build()
        .unwrap();
    dq.start().unwrap();
    dq.ready().await.unwrap();
    dq.put(&"x".to_string()).await.unwrap();
    let item = tokio::time::timeout(Timing::new().deadline(), held.recv()).await.expect("handed over");
    assert_eq!(item.as_deref(), Some("x"));
    let lock_nodes = children(&other, &locks).await;
    assert_eq!(lock_nodes.len(), 1, "{policy:?}/{retry:?}: one lock node: {lock_nodes:?}");
    other.delete().for_path(&format!("{locks}/{}", lock_nodes[0])).await.unwrap();
    gate.add_permits(1);

    settles("one fence failure", || counter(m::QUEUE_FENCE_FAILURES, &deleted) == fences + 1).await;
    settles("one release", || counter(m::QUEUE_REDELIVERIES, &released) == redeliveries + 1).await;
    assert_eq!(children(&other, &path).await.len(), 1, "{policy:?}/{retry:?}: the item node stays");
    // The item is handed over again (its node stays): let that consumer finish.
    gate.add_permits(100);
    dq.close().await;
    fw.close().await;
    other.close().await;
}

/// Follows Curator's TestDistributedAtomicLong.testSimulation: clients incrementing one value
/// at once, with no optimistic retry, so that conflicts promote some increments to the mutex.
/// The tries counted by phase equal the sums of the results' `AtomicStats`, and the promotions
/// the number of results that made tries under the mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_tries_and_promotions_match_the_stats() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = connect();
    let path = unique_path("metrics-atomic");
    let lock = format!("{path}-lock");
    let optimistic = [("phase", "optimistic")];
    let promoted = [("phase", "promoted")];
    let before = (counter(m::ATOMIC_TRIES, &optimistic), counter(m::ATOMIC_TRIES, &promoted));
    let promotions = counter(m::ATOMIC_PROMOTIONS, &[]);
    let (mut sum_optimistic, mut sum_promoted, mut promoted_ops) = (0u64, 0u64, 0u64);
    let mut frameworks: Vec<CuratorFramework> = Vec::new();
    for _ in 0..3 {
        frameworks.push(connected(builder(&connect)).await);
    }
    let deadline = tokio::time::Instant::now() + Timing::new().deadline();
    while promoted_ops == 0 && tokio::time::Instant::now() < deadline {
        let mut runs = Vec::new();
        for fw in &frameworks {
            let (fw, path, lock) = (fw.clone(), path.clone(), lock.clone());
            runs.push(tokio::spawn(async move {
                let no_retry = || RetryNTimes::new(0, Duration::ZERO);
                let promotion = PromotedToLock::new(&lock).unwrap().retry_policy(RetryNTimes::new(3, Duration::ZERO));
                let dal = DistributedAtomicLong::with_promotion(&fw, &path, no_retry(), promotion).unwrap();
                let mut stats = Vec::new();
                for _ in 0..10 {
                    stats.push(dal.increment().await.expect("increment").stats);
                }
                stats
            }));
        }
        for run in runs {
            for stats in run.await.expect("client") {
                sum_optimistic += u64::from(stats.optimistic_tries);
                sum_promoted += u64::from(stats.promoted_lock_tries);
                promoted_ops += u64::from(stats.promoted_lock_tries > 0);
            }
        }
    }
    assert!(promoted_ops > 0, "no increment was promoted before the deadline");
    assert_eq!(counter(m::ATOMIC_TRIES, &optimistic), before.0 + sum_optimistic);
    assert_eq!(counter(m::ATOMIC_TRIES, &promoted), before.1 + sum_promoted);
    assert_eq!(counter(m::ATOMIC_PROMOTIONS, &[]), promotions + promoted_ops);
    for fw in frameworks {
        fw.close().await;
    }
}

/// Follows Curator's TestDistributedBarrier.testBasic and TestDistributedDoubleBarrier.testBasic:
/// a timed wait on a set barrier times out, a wait on a removed one passes, a wait on a closed
/// framework fails; a double barrier of one member enters and leaves, one of two members that
/// stays alone times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_waits_count_by_call_and_outcome() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&connect())).await;
    let waits =
        |call: &'static str, outcome: &'static str| counter(m::BARRIER_WAITS, &[("call", call), ("outcome", outcome)]);
    let before = [
        waits("wait", "passed"),
        waits("wait", "timed_out"),
        waits("wait", "failed"),
        waits("enter", "passed"),
        waits("enter", "timed_out"),
        waits("leave", "passed"),
    ];

    let barrier = DistributedBarrier::new(&fw, &unique_path("metrics-barrier")).unwrap();
    barrier.set_barrier().await.unwrap();
    assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(200)).await.unwrap());
    barrier.remove_barrier().await.unwrap();
    barrier.wait_on_barrier().await.unwrap();

    let mut one = DistributedDoubleBarrier::new(&fw, &unique_path("metrics-double"), 1).unwrap();
    one.enter().await.unwrap();
    one.leave().await.unwrap();
    let mut alone = DistributedDoubleBarrier::new(&fw, &unique_path("metrics-double"), 2).unwrap();
    assert!(!alone.enter_timeout(Duration::from_millis(200)).await.unwrap());

    let after = [
        waits("wait", "passed"),
        waits("wait", "timed_out"),
        waits("wait", "failed"),
        waits("enter", "passed"),
        waits("enter", "timed_out"),
        waits("leave", "passed"),
    ];
    let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved, vec![1, 1, 0, 1, 1, 1], "wait passed/timed_out/failed, enter passed/timed_out, leave passed");

    let gate = DistributedBarrier::new(&fw, &unique_path("metrics-barrier")).unwrap();
    gate.set_barrier().await.unwrap();
    fw.close().await;
    assert!(gate.wait_on_barrier().await.is_err(), "a closed framework");
    assert_eq!(waits("wait", "failed"), before[2] + 1);
}

type Instance = ServiceInstance<String>;

fn instance(name: &str, port: i32) -> Instance {
    ServiceInstance::builder(name).port(port).payload("p".to_string()).build()
}

/// Follows Curator's TestServiceDiscovery.testBasic, TestServiceCache.testCache and
/// TestServiceProvider/TestDownInstanceManager: two registers, an update and an unregister
/// count one each by op (an unknown id's unregister nothing); a service cache's gauge follows
/// its instances (2, then 1, then 0 once closed); three picks count three, a pick from an
/// empty service counts one `none`; two errors noted with an instance under a threshold of two
/// note it down once, a third error does not again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_counts_registrations_cache_size_picks_and_errors() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&connect())).await;
    let base = unique_path("metrics-discovery");
    let service = format!("svc-{}", base.rsplit('/').next().unwrap_or("x"));
    let registrations = |op: &'static str| counter(m::DISCOVERY_REGISTRATIONS, &[("op", op)]);
    let before = [registrations("register"), registrations("update"), registrations("unregister")];
    let discovery: ServiceDiscovery<String> = ServiceDiscovery::builder(&fw, &base).build().unwrap();
    discovery.start().unwrap();
    discovery.ready().await.unwrap();
    let (first, second) = (instance(&service, 9001), instance(&service, 9002));
    discovery.register(first.clone()).await.unwrap();
    discovery.register(second.clone()).await.unwrap();

    let size = [("service", service.as_str())];
    let cache = discovery.service_cache_builder(&service).build().unwrap();
    cache.start().unwrap();
    cache.ready().await.unwrap();
    assert_eq!(gauge(m::DISCOVERY_CACHE_INSTANCES, &size), 2.0, "the first load's two instances");

    let mut changed = second.clone();
    changed.payload = Some("q".to_string());
    discovery.update(changed).unwrap();
    discovery.unregister(&first).await;
    discovery.unregister_id("nobody").await;
    let after = [registrations("register"), registrations("update"), registrations("unregister")];
    let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved, vec![2, 1, 1], "register, update, unregister");
    settles("the cache forgot the first", || gauge(m::DISCOVERY_CACHE_INSTANCES, &size) == 1.0).await;

    let picks = |outcome: &'static str| counter(m::DISCOVERY_PICKS, &[("outcome", outcome)]);
    let (picked, none) = (picks("picked"), picks("none"));
    let provider = discovery
        .service_provider(
            &service,
            ServiceProvider::builder().down_instance_policy(DownInstancePolicy::new(Duration::from_secs(60), 2)),
        )
        .unwrap();
    provider.start().unwrap();
    provider.ready().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { provider.all_instances().len() == 1 }).await);
    let chosen: Vec<Instance> = (0..3).filter_map(|_| provider.instance()).collect();
    assert_eq!(chosen.len(), 3);
    assert_eq!((picks("picked"), picks("none")), (picked + 3, none));

    let (errors, down) = (counter(m::DISCOVERY_INSTANCE_ERRORS, &[]), counter(m::DISCOVERY_INSTANCES_DOWN, &[]));
    provider.note_error(&chosen[0]);
    assert_eq!(counter(m::DISCOVERY_INSTANCES_DOWN, &[]), down, "one error is under the threshold");
    provider.note_error(&chosen[0]);
    assert_eq!(counter(m::DISCOVERY_INSTANCES_DOWN, &[]), down + 1, "the second reaches it");
    provider.note_error(&chosen[0]);
    assert_eq!(counter(m::DISCOVERY_INSTANCE_ERRORS, &[]), errors + 3);
    assert_eq!(counter(m::DISCOVERY_INSTANCES_DOWN, &[]), down + 1, "down already");
    assert!(provider.instance().is_none(), "the only instance is down");
    assert_eq!((picks("picked"), picks("none")), (picked + 3, none + 1));

    provider.close().await;
    cache.close().await;
    settles("a closed cache holds nothing", || gauge(m::DISCOVERY_CACHE_INSTANCES, &size) == 0.0).await;
    discovery.close().await;
    fw.close().await;
}
