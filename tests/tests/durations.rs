//! Every `Duration` a user can hand the library, fed its extremes (`ZERO`, 1 ns, `u64::MAX` ms,
//! `MAX`): each entry point saturates (a wait too long to count is a wait without end) or refuses
//! the value with a typed error, never panics, against a real server where it needs one, and
//! every wait here is bounded.
//!
//! The entry points, found with a grep for public functions taking a `Duration` in the library
//! crates: the builder's `session_timeout`, `connection_timeout` and `max_close_wait`;
//! `block_until_connected`; `create().with_ttl`; every retry policy's constructor (and the
//! `RetryLoop` that sleeps their pauses); every lock's `acquire_timeout`; the barriers' timed
//! waits; `SimpleDistributedQueue::poll`; the queues' `put_timeout`s; `LeaderLatch`'s
//! `await_leadership_timeout`; `PersistentNode`'s `ttl` and `wait_for_initial_create`,
//! `PersistentTtlNode::builder`'s TTL, `GroupMember::wait_for_registration`; the atomics'
//! `write_tag_reap_age` and `PromotedToLock::max_lock_time` (whose wait is an
//! `acquire_timeout` of the mutex, the same function as the locks' rows); and discovery's
//! `DownInstancePolicy::new`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_core::{
    deadline, BoundedExponentialBackoffRetry, ExponentialBackoffForever, ExponentialBackoffRetry, RetryLoop,
    RetryNTimes, RetryOneTime, RetryPolicy, RetryUntilElapsed,
};
use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorEvent, CuratorFramework, ErrorPolicy};
use curator_discovery::{DownInstanceManager, DownInstancePolicy, ServiceInstance};
use curator_recipes::LeaderLatch;
use curator_recipes::{DistributedAtomicLong, PromotedToLock};
use curator_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use curator_recipes::{DistributedQueue, SimpleDistributedQueue, StringSerializer};
use curator_recipes::{GroupMember, PersistentNode, PersistentTtlNode};
use curator_recipes::{
    InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, Lease, LockGuard, MultiLockGuard, QueuedGuard, QueuedMutex,
};
use curator_test::{ChaosProxy, TestingServer, Timing};
use tests::{builder, connected, init_tracing, unique_path, wait_for};

/// The extremes every entry point is fed.
const EXTREMES: [(&str, Duration); 4] = [
    ("ZERO", Duration::ZERO),
    ("1 ns", Duration::from_nanos(1)),
    ("u64::MAX ms", Duration::from_millis(u64::MAX)),
    ("MAX", Duration::MAX),
];

/// Whether an extreme means "wait without end" (the other two mean "do not wait").
fn endless(d: Duration) -> bool {
    d >= Duration::from_secs(3600)
}

/// Awaits `fut` within the test deadline; a hang (or a task that panicked and so never answers)
/// fails the test naming `what`.
async fn bounded<T>(what: &str, fut: impl std::future::IntoFuture<Output = T>) -> T {
    match tokio::time::timeout(Timing::new().deadline(), fut.into_future()).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: no answer within the test deadline"),
    }
}

/// Asserts that `fut` is still waiting after a short while: a wait without end, as asked.
async fn still_waiting<T: std::fmt::Debug>(what: &str, fut: impl std::future::Future<Output = T>) {
    if let Ok(value) = tokio::time::timeout(Duration::from_millis(300), fut).await {
        panic!("{what}: expected to wait, ended with {value:?}");
    }
}

// --- the framework's options -------------------------------------------------------------------

/// `session_timeout`: every extreme is refused at `build()` (ZooKeeper takes 1 ms to `i32::MAX`
/// ms). `connection_timeout`: zero is refused, the others are a connection timeout that ends at
/// once or never, for foreground and background operations alike. `max_close_wait` and
/// `block_until_connected` take all four. Before, a background operation on a framework with a
/// `Duration::MAX` connection timeout panicked in the queue that sends background operations
/// (`ops/ordered.rs`: "overflow when adding duration to instant") and never completed.
#[tokio::test]
async fn framework_options_saturate_or_are_refused() {
    init_tracing();
    let cs = TestingServer::shared().connect_string();
    for (name, d) in EXTREMES {
        let built = builder(&cs).session_timeout(d).build();
        assert!(matches!(built, Err(CuratorError::InvalidArgument { .. })), "session_timeout({name}): {built:?}");

        let built = builder(&cs).connection_timeout(d).build();
        if d.is_zero() {
            assert!(
                matches!(built, Err(CuratorError::InvalidArgument { .. })),
                "connection_timeout({name}): {built:?}"
            );
        } else {
            let fw = built.unwrap_or_else(|e| panic!("connection_timeout({name}): {e}"));
            fw.start().unwrap();
            // 1 ns may end before the first connection: NotConnected is its sensible outcome.
            let fine = |r: &Result<(), CuratorError>| r.is_ok() || matches!(r, Err(CuratorError::NotConnected { .. }));
            let path = unique_path("conn-timeout");
            let r = bounded(name, fw.create().for_path(&path, vec![])).await.map(drop);
            assert!(fine(&r), "connection_timeout({name}), foreground: {r:?}");
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = Mutex::new(Some(tx));
            fw.check_exists().for_path(&path).in_background(move |_: &CuratorFramework, e: CuratorEvent| {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(e.result_code);
                }
            });
            let code = bounded(&format!("connection_timeout({name}), background"), rx).await.expect("a result");
            assert!(code == 0 || code == -4, "connection_timeout({name}), background: code {code}");
            fw.close().await;
        }

        let fw = connected(builder(&cs).max_close_wait(d)).await;
        assert!(bounded(name, fw.block_until_connected(d)).await.is_ok(), "block_until_connected({name})");
        bounded(&format!("close with max_close_wait({name})"), fw.close()).await;
    }

    // Waiting for a server that does not answer: ZERO and 1 ns give up at once, the endless ones wait.
    let proxy = ChaosProxy::start(&cs).await.unwrap();
    proxy.set_reject(true);
    let fw = builder(&proxy.connect_string()).build().unwrap();
    fw.start().unwrap();
    for (name, d) in EXTREMES {
        if endless(d) {
            still_waiting(name, fw.block_until_connected(d)).await;
        } else {
            let r = bounded(name, fw.block_until_connected(d)).await;
            assert!(matches!(r, Err(CuratorError::NotConnected { .. })), "block_until_connected({name}): {r:?}");
        }
    }
    fw.close().await;
}

// --- retry policies and the retry loop ---------------------------------------------------------

/// Every retry policy, built with every extreme for each of its durations.
fn policies() -> Vec<(String, Arc<dyn RetryPolicy>)> {
    let mut all: Vec<(String, Arc<dyn RetryPolicy>)> = Vec::new();
    for (a, x) in EXTREMES {
        all.push((format!("ExponentialBackoffRetry({a}, 29)"), Arc::new(ExponentialBackoffRetry::new(x, 29))));
        all.push((format!("RetryNTimes(3, {a})"), Arc::new(RetryNTimes::new(3, x))));
        all.push((format!("RetryOneTime({a})"), Arc::new(RetryOneTime::new(x))));
        all.push((format!("RetryForever({a})"), Arc::new(curator_core::RetryForever::new(x))));
        for (b, y) in EXTREMES {
            all.push((
                format!("ExponentialBackoffRetry::with_max_sleep({a}, 29, {b})"),
                Arc::new(ExponentialBackoffRetry::with_max_sleep(x, 29, y)),
            ));
            all.push((
                format!("BoundedExponentialBackoffRetry({a}, {b}, 29)"),
                Arc::new(BoundedExponentialBackoffRetry::new(x, y, 29)),
            ));
            all.push((format!("RetryUntilElapsed({a}, {b})"), Arc::new(RetryUntilElapsed::new(x, y))));
            all.push((format!("ExponentialBackoffForever({a}, {b})"), Arc::new(ExponentialBackoffForever::new(x, y))));
        }
    }
    all
}

/// Every policy answers for every retry count and elapsed time without panicking, and a
/// `RetryLoop` under a deadline (a timed acquire's) either retries after a pause that fits or
/// gives up at once with `Timeout`: a pause past the deadline is never slept. Before, a pause of
/// `Duration::MAX` (or `u64::MAX` ms) under a deadline panicked in `RetryLoop::on_error`
/// ("overflow when adding duration to instant").
#[tokio::test]
async fn retry_policies_and_the_retry_loop_take_every_extreme() {
    let lost = || CuratorError::ConnectionLoss { path: "/p".into(), detail: "cut".into() };
    for (name, policy) in policies() {
        for retries in [0, 1, 28, 29, 30, u32::MAX] {
            for (_, elapsed) in EXTREMES {
                let _ = policy.allow_retry(retries, elapsed);
            }
        }
        let mut retry = RetryLoop::new(policy.clone(), None);
        let wait = Duration::from_millis(200);
        let at = tokio::time::Instant::now() + wait;
        let started = Instant::now();
        let r = bounded(&name, deadline::with_deadline(at, retry.on_error(lost()))).await;
        // Ends at the deadline, not after the policy's pause: ten times it is room for load.
        assert!(started.elapsed() < wait * 10, "{name}: took {:?}", started.elapsed());
        match r {
            Ok(()) => {}
            Err(CuratorError::Timeout { path }) => assert_eq!(path, "/p", "{name}"),
            // The policy gave up (RetryUntilElapsed with no time to retry in).
            Err(CuratorError::ConnectionLoss { .. }) => {}
            Err(other) => panic!("{name}: {other:?}"),
        }
    }
}

/// A cache started before its framework, on a framework whose retry policy pauses by every
/// extreme (`RetryNTimes(3, d)`), loads once the framework starts. The cache engine paces its
/// failed loads by the core's own cleanup schedule (`cleanup_retry_loop`: 50 ms doubling to
/// 2 s), not by the framework's policy, so `now + pause` cannot overflow there (checked after
/// the last stop noted it as a possible overflow); this keeps it so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_backs_off_by_every_extreme_retry_pause() {
    init_tracing();
    let cs = TestingServer::shared().connect_string();
    for (name, d) in EXTREMES {
        let fw = builder(&cs).retry_policy(RetryNTimes::new(3, d)).build().unwrap();
        let path = unique_path("extreme-cache");
        let cache = curator_cache::NodeCache::new(&fw, &path).unwrap();
        cache.start(false).unwrap();
        fw.start().unwrap();
        bounded(name, cache.wait_initialized()).await.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        cache.close().await;
        fw.close().await;
    }
}

/// The scenario of issue 26 item 2: a retry policy whose pause is endless (`RetryNTimes(2,
/// Duration::MAX)`, and the other extremes) with `acquire_timeout(2 s)` against a server that
/// does not answer: the acquire gives up by its deadline (`Ok(None)`; with a short pause, the
/// policy may run out first, with `NotConnected`), under both error
/// policies, and with the short retry policy too. Before: a panic in `RetryLoop::on_error` once
/// the first attempt's connection timeout (200 ms) had passed.
#[tokio::test]
async fn an_endless_retry_pause_ends_at_the_acquire_deadline_when_the_server_is_unreachable() {
    init_tracing();
    let cs = TestingServer::shared().connect_string();
    let mut pauses: Vec<(String, Duration, RetryNTimes)> =
        EXTREMES.iter().map(|(name, d)| (format!("RetryNTimes(2, {name})"), *d, RetryNTimes::new(2, *d))).collect();
    let short = Duration::from_millis(100);
    pauses.push(("short: RetryNTimes(1, 100 ms)".into(), short, RetryNTimes::new(1, short)));
    for policy in [ErrorPolicy::Standard, ErrorPolicy::Session] {
        for (name, pause, retry) in pauses.clone() {
            let what = format!("{policy:?}, {name}");
            let proxy = ChaosProxy::start(&cs).await.unwrap();
            let fw = connected(
                builder(&proxy.connect_string())
                    .connection_state_error_policy(policy)
                    .connection_timeout(Duration::from_millis(200))
                    .retry_policy(retry),
            )
            .await;
            let mut states = fw.connection_state_stream();
            proxy.set_reject(true);
            proxy.cut();
            wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
            let mutex = InterProcessMutex::new(&fw, &unique_path("unreachable")).unwrap();
            let started = Instant::now();
            let timeout = Duration::from_secs(2);
            let r = bounded(&what, mutex.acquire_timeout(timeout)).await;
            // An endless pause is never slept: the acquire gives up at its deadline. A short one
            // may run the policy out first, which then gives up with the attempts' error.
            let expected =
                matches!(r, Ok(None)) || (!endless(pause) && matches!(r, Err(CuratorError::NotConnected { .. })));
            assert!(expected, "{what}: {r:?}");
            assert!(started.elapsed() < timeout * 2, "{what}: took {:?} (timeout {timeout:?})", started.elapsed());
            fw.close().await;
        }
    }
}

// --- locks -------------------------------------------------------------------------------------

/// The locks with a timed acquire.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore,
    SemaphoreMutex,
    Multi,
    Queued,
}

const KINDS: [Kind; 7] =
    [Kind::Mutex, Kind::Read, Kind::Write, Kind::Semaphore, Kind::SemaphoreMutex, Kind::Multi, Kind::Queued];

/// What a timed acquire got.
enum Held {
    Guard(LockGuard),
    Leases(Vec<Lease>),
    SemaphoreMutex(InterProcessSemaphoreMutex),
    Multi(MultiLockGuard),
    Queued(QueuedGuard),
}

impl Held {
    async fn release(self) {
        match self {
            Held::Guard(g) => g.release().await.unwrap(),
            Held::Leases(leases) => {
                for lease in leases {
                    lease.release().await.unwrap();
                }
            }
            Held::SemaphoreMutex(m) => m.release().await.unwrap(),
            Held::Multi(g) => g.release().await.unwrap(),
            Held::Queued(g) => g.release().await.unwrap(),
        }
    }
}

/// `kind`'s `acquire_timeout(timeout)` on `path` (a new lock object each time).
async fn acquire_timeout(kind: Kind, fw: &CuratorFramework, path: &str, timeout: Duration) -> Option<Held> {
    let result = match kind {
        Kind::Mutex => {
            InterProcessMutex::new(fw, path).unwrap().acquire_timeout(timeout).await.map(|g| g.map(Held::Guard))
        }
        Kind::Read => InterProcessReadWriteLock::new(fw, path)
            .unwrap()
            .read_lock()
            .acquire_timeout(timeout)
            .await
            .map(|g| g.map(Held::Guard)),
        Kind::Write => InterProcessReadWriteLock::new(fw, path)
            .unwrap()
            .write_lock()
            .acquire_timeout(timeout)
            .await
            .map(|g| g.map(Held::Guard)),
        Kind::Semaphore => InterProcessSemaphoreV2::new(fw, path, 1)
            .unwrap()
            .acquire_timeout(1, timeout)
            .await
            .map(|l| l.map(Held::Leases)),
        Kind::SemaphoreMutex => {
            let m = InterProcessSemaphoreMutex::new(fw, path).unwrap();
            m.acquire_timeout(timeout).await.map(|got| got.then_some(Held::SemaphoreMutex(m)))
        }
        Kind::Multi => {
            let paths = [format!("{path}/a"), format!("{path}/b")];
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            InterProcessMultiLock::new(fw, &paths).unwrap().acquire_timeout(timeout).await.map(|g| g.map(Held::Multi))
        }
        Kind::Queued => QueuedMutex::new(fw, path).unwrap().acquire_timeout(timeout).await.map(|g| g.map(Held::Queued)),
    };
    result.unwrap_or_else(|e| panic!("{kind:?}.acquire_timeout({timeout:?}): {e}"))
}

/// What keeps `kind` from being granted: the same lock held elsewhere (the write lock, for a
/// read lock).
async fn blocker(kind: Kind, fw: &CuratorFramework, path: &str) -> Held {
    let kind = if let Kind::Read = kind { Kind::Write } else { kind };
    acquire_timeout(kind, fw, path, Timing::new().deadline()).await.expect("the blocker gets the free lock")
}

/// Issue 26 item 1: `acquire_timeout` with every extreme on every lock. A free lock is granted
/// whatever the timeout (ZERO is a try-lock); a lock held elsewhere is refused at once
/// (`Ok(None)`) for ZERO and 1 ns, and waited for without end for the others, until the holder
/// lets go. Before: `Duration::MAX` and `u64::MAX` ms panicked in `locks::within` ("overflow
/// when adding duration to instant") on every lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_takes_every_extreme_acquire_timeout() {
    init_tracing();
    let cs = TestingServer::shared().connect_string();
    let fw = connected(builder(&cs)).await;
    let other = connected(builder(&cs)).await;
    for kind in KINDS {
        for (name, d) in EXTREMES {
            let what = format!("{kind:?}.acquire_timeout({name})");
            let path = unique_path("extreme-lock");
            let held = bounded(&what, acquire_timeout(kind, &fw, &path, d)).await;
            bounded(&what, held.expect("a free lock is granted").release()).await;

            let blocking = blocker(kind, &other, &path).await;
            if endless(d) {
                let waiting = tokio::spawn({
                    let (fw, path) = (fw.clone(), path.clone());
                    async move { acquire_timeout(kind, &fw, &path, d).await.map(|h| async move { h.release().await }) }
                });
                blocking.release().await;
                let release = bounded(&what, waiting).await.unwrap().expect("granted once the holder let go");
                bounded(&what, release).await;
            } else {
                assert!(bounded(&what, acquire_timeout(kind, &fw, &path, d)).await.is_none(), "{what}: held elsewhere");
                blocking.release().await;
            }
        }
    }
    fw.close().await;
    other.close().await;
}

// --- other recipes' waits ----------------------------------------------------------------------

/// The barriers' timed waits, `SimpleDistributedQueue::poll`, a bounded queue's `put_timeout`,
/// `LeaderLatch::await_leadership_timeout`, `PersistentNode::wait_for_initial_create` and
/// `GroupMember::wait_for_registration`: what is there at once is had with every extreme; what
/// is not there ends the wait at once for ZERO and 1 ns, and is waited for with the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_waits_take_every_extreme() {
    init_tracing();
    let cs = TestingServer::shared().connect_string();
    let fw = connected(builder(&cs)).await;
    for (name, d) in EXTREMES {
        // Barrier: not set (through), then set.
        let path = unique_path("extreme-barrier");
        let barrier = DistributedBarrier::new(&fw, &path).unwrap();
        assert!(bounded(name, barrier.wait_on_barrier_timeout(d)).await.unwrap(), "barrier({name}) not set");
        barrier.set_barrier().await.unwrap();
        if endless(d) {
            let waiting = tokio::spawn({
                let barrier = DistributedBarrier::new(&fw, &path).unwrap();
                async move { barrier.wait_on_barrier_timeout(d).await }
            });
            barrier.remove_barrier().await.unwrap();
            assert!(bounded(name, waiting).await.unwrap().unwrap(), "barrier({name}) removed");
        } else {
            assert!(!bounded(name, barrier.wait_on_barrier_timeout(d)).await.unwrap(), "barrier({name}) set");
            barrier.remove_barrier().await.unwrap();
        }

        // Double barrier of one: entered and left at once.
        let mut double = DistributedDoubleBarrier::new(&fw, &unique_path("extreme-double"), 1).unwrap();
        assert!(bounded(name, double.enter_timeout(d)).await.unwrap(), "enter_timeout({name})");
        assert!(bounded(name, double.leave_timeout(d)).await.unwrap(), "leave_timeout({name})");

        // Simple queue: empty, then an item offered while polling.
        let path = unique_path("extreme-queue");
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        if endless(d) {
            let polling = tokio::spawn({
                let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
                async move { queue.poll(d).await }
            });
            queue.offer(b"item".to_vec()).await.unwrap();
            assert_eq!(bounded(name, polling).await.unwrap().unwrap().as_deref(), Some(&b"item"[..]), "poll({name})");
        } else {
            assert_eq!(bounded(name, queue.poll(d)).await.unwrap(), None, "poll({name}) of an empty queue");
        }

        // A queue with room: put at once.
        let queue: DistributedQueue<String> =
            DistributedQueue::builder(&fw, &unique_path("extreme-put"), StringSerializer)
                .max_items(10)
                .build()
                .unwrap();
        queue.start().unwrap();
        queue.ready().await.unwrap();
        assert!(bounded(name, queue.put_timeout(&"x".to_string(), d)).await.unwrap(), "put_timeout({name})");
        assert!(
            bounded(name, queue.put_multi_timeout(&["y".to_string()], d)).await.unwrap(),
            "put_multi_timeout({name})"
        );
        queue.close().await;

        // A latch alone is the leader.
        let latch = LeaderLatch::new(&fw, &unique_path("extreme-latch"), "me").unwrap();
        latch.start().unwrap();
        latch.ready().await.unwrap();
        bounded(name, latch.await_leadership()).await.unwrap();
        let r = bounded(name, latch.await_leadership_timeout(d)).await.unwrap();
        assert!(r.is_some(), "await_leadership_timeout({name}) of the leader");
        latch.close().await;

        // A node and a member, once created.
        let node = PersistentNode::builder(&fw, &unique_path("extreme-node")).build().unwrap();
        node.start().unwrap();
        assert!(node.wait_for_initial_create(Timing::new().deadline()).await);
        assert!(bounded(name, node.wait_for_initial_create(d)).await, "wait_for_initial_create({name})");
        node.close().await;
        let member = GroupMember::builder(&fw, &unique_path("extreme-group"), "me").build().unwrap();
        member.start().unwrap();
        member.ready().await.unwrap();
        assert!(member.wait_for_registration(Timing::new().deadline()).await);
        assert!(bounded(name, member.wait_for_registration(d)).await, "wait_for_registration({name})");
        member.close().await;
    }
    fw.close().await;
}

// --- TTLs, atomics, discovery ------------------------------------------------------------------

/// A TTL is counted in milliseconds by ZooKeeper, from 1 ms to 2^40 - 1 ms: every extreme is
/// refused with `InvalidArgument` before anything is sent, by `create().with_ttl`,
/// `PersistentNode`'s `ttl` and `PersistentTtlNode::builder`. Before: a 1 ns TTL was sent as 0
/// ms, which zookeeper-client sends as a plain create (a persistent node that never expires);
/// `PersistentNode` took `Duration::MAX` and failed only later, in the background; and
/// `PersistentTtlNode` started with 1 ns (its toucher then panicked: a zero interval) and with
/// `Duration::MAX` (its toucher panicked adding the interval to now).
#[tokio::test]
async fn every_extreme_ttl_is_refused_before_sending() {
    init_tracing();
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let refused = |what: &str, r: Result<(), CuratorError>| {
        assert!(matches!(r, Err(CuratorError::InvalidArgument { .. })), "{what}: {r:?}");
    };
    for (name, d) in EXTREMES {
        let path = unique_path("extreme-ttl");
        for mode in [CreateMode::PersistentWithTtl, CreateMode::PersistentSequentialWithTtl] {
            let r = bounded(name, fw.create().with_mode(mode).with_ttl(d).for_path(&path, vec![])).await;
            refused(&format!("create {mode:?} with_ttl({name})"), r.map(drop));
        }
        assert!(fw.check_exists().for_path(&path).await.unwrap().is_none(), "{name}: nothing created");
        let node = PersistentNode::builder(&fw, &path).mode(CreateMode::PersistentWithTtl).ttl(d).build();
        refused(&format!("PersistentNode ttl({name})"), node.map(drop));
        let node = PersistentTtlNode::builder(&fw, &path, d).build();
        refused(&format!("PersistentTtlNode::builder({name})"), node.map(drop));
    }
    fw.close().await;
}

/// `write_tag_reap_age` of every extreme: increments work (ZERO reaps every other tag at once,
/// the endless ones never). `PromotedToLock::max_lock_time` takes every extreme (its wait is
/// the mutex's `acquire_timeout`, the locks' rows above). `DownInstancePolicy` of every
/// extreme: an instance with errors is down for ever (endless), or up again at once (ZERO, 1 ns).
#[tokio::test]
async fn atomics_and_discovery_take_every_extreme() {
    init_tracing();
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    for (name, d) in EXTREMES {
        let path = unique_path("extreme-atomic");
        let long = DistributedAtomicLong::new(&fw, &path, RetryNTimes::new(3, Duration::from_millis(10)))
            .unwrap()
            .write_tag_reap_age(d);
        for _ in 0..2 {
            let v = bounded(name, long.increment()).await.unwrap();
            assert!(v.succeeded(), "write_tag_reap_age({name})");
        }
        let _promoted = PromotedToLock::new(&format!("{path}-lock")).unwrap().max_lock_time(d);

        let down = DownInstanceManager::new(DownInstancePolicy::new(d, 1));
        let instance = ServiceInstance::<String>::builder("svc").build();
        down.note_error(&instance);
        assert_eq!(down.is_up(&instance), !endless(d), "DownInstancePolicy::new({name})");
    }
    fw.close().await;
}
