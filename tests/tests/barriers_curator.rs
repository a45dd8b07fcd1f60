//! Apache Curator's `TestDistributedBarrier` and `TestDistributedDoubleBarrier`, ported to our
//! `DistributedBarrier` and `DistributedDoubleBarrier` against a real ZooKeeper. Every test of
//! both classes is ported; where Curator synchronises with sleeps, these wait on events.
//!
//! Not ported as such: `TestDistributedDoubleBarrier.testOverSubscribed` holds every member
//! inside Curator's `getChildrenForEntering` hook until all six are there; we have no such
//! hook, so the six start their enters together (a `tokio::sync::Barrier`) instead.
//! The faults of issue 16 are in `barriers_faults.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::RetryOneTime;
use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::{builder, children, client, connected, init_tracing, unique_path, wait_for};

/// Members of the double barrier in Curator's tests.
const QTY: usize = 5;

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// Curator's clients in these tests: `RetryOneTime(1)`.
async fn retry_one_time(connect_string: &str) -> CuratorFramework {
    connected(builder(connect_string).retry_policy(RetryOneTime::new(Duration::from_millis(1)))).await
}

/// TestDistributedBarrier.testServerCrash: the server stops while a client waits on a set
/// barrier; the wait fails with a connection error once the retry policy (one retry) gives up,
/// instead of waiting for ever. Ours rides out the suspension and gives up after the session
/// is lost: its check then finds no connection.
#[tokio::test]
async fn barrier_server_crash() {
    init_tracing();
    let mut server = TestingServer::start().await.expect("server");
    let timeout = Duration::from_secs(1);
    let fw = connected(
        builder(&server.connect_string())
            .session_timeout(Duration::from_secs(2))
            .connection_timeout(timeout)
            .retry_policy(RetryOneTime::new(Duration::from_millis(1))),
    )
    .await;
    let barrier = DistributedBarrier::new(&fw, "/barrier").unwrap();
    barrier.set_barrier().await.unwrap();
    let waiting = tokio::spawn(async move { barrier.wait_on_barrier_timeout(timeout * 2000).await });
    server.stop().await.expect("stop the server");
    let result = tokio::time::timeout(deadline(), waiting).await.expect("the wait did not end").unwrap();
    assert!(
        matches!(&result, Err(CuratorError::ConnectionLoss { .. } | CuratorError::NotConnected { .. })),
        "{result:?}"
    );
    fw.close().await;
}

/// TestDistributedBarrier.testMultiClient: a barrier set by one client holds two others
/// waiting; a third client removes it and both waits end.
#[tokio::test]
async fn barrier_multi_client() {
    init_tracing();
    let path = unique_path("barrier-multi");
    let setter = retry_one_time(&shared()).await;
    DistributedBarrier::new(&setter, &path).unwrap().set_barrier().await.unwrap();
    setter.close().await;

    let mut waits = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let fw = retry_one_time(&shared()).await;
        let barrier = DistributedBarrier::new(&fw, &path).unwrap();
        // Curator's clients wait 10 ms, and the barrier stands.
        assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(10)).await.unwrap());
        waits.push(tokio::spawn(async move { barrier.wait_on_barrier().await }));
        clients.push(fw);
    }
    let remover = retry_one_time(&shared()).await;
    DistributedBarrier::new(&remover, &path).unwrap().remove_barrier().await.unwrap();
    remover.close().await;
    for wait in waits {
        tokio::time::timeout(deadline(), wait).await.expect("still waiting").unwrap().unwrap();
    }
    for fw in clients {
        fw.close().await;
    }
}

/// TestDistributedBarrier.testNoBarrier: with no barrier set, a timed wait returns true at once
/// and an untimed one returns.
#[tokio::test]
async fn barrier_no_barrier() {
    init_tracing();
    let fw = retry_one_time(&shared()).await;
    let barrier = DistributedBarrier::new(&fw, &unique_path("barrier-none")).unwrap();
    assert!(barrier.wait_on_barrier_timeout(Duration::from_secs(10)).await.unwrap());
    tokio::time::timeout(Duration::from_secs(10), barrier.wait_on_barrier()).await.expect("waited").unwrap();
    fw.close().await;
}

/// TestDistributedBarrier.testBasic: a set barrier is removed while someone waits on it; the
/// timed wait returns true.
#[tokio::test]
async fn barrier_basic() {
    init_tracing();
    let fw = retry_one_time(&shared()).await;
    let path = unique_path("barrier-basic");
    let barrier = DistributedBarrier::new(&fw, &path).unwrap();
    barrier.set_barrier().await.unwrap();
    // Curator removes it after a second; here the barrier is shown to hold first.
    assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(50)).await.unwrap());
    let waiter = barrier.clone();
    let waiting = tokio::spawn(async move { waiter.wait_on_barrier_timeout(Duration::from_secs(10)).await });
    barrier.remove_barrier().await.unwrap();
    assert!(tokio::time::timeout(deadline(), waiting).await.expect("still waiting").unwrap().unwrap());
    fw.close().await;
}

/// Counts the members inside, and the most ever inside at once.
#[derive(Default)]
struct Inside {
    count: AtomicUsize,
    max: AtomicUsize,
}

impl Inside {
    fn enter(&self) {
        let now = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
}

/// One member of Curator's testBasic and testMultiClient: enter (timed), count in, wait until
/// all have counted in, check that all are in, leave (timed), count out, wait for all.
async fn member(
    fw: CuratorFramework,
    path: String,
    inside: Arc<Inside>,
    entered: Arc<tokio::sync::Barrier>,
    left: Arc<tokio::sync::Barrier>,
) {
    let timing = Timing::new();
    let mut barrier = DistributedDoubleBarrier::new(&fw, &path, QTY).unwrap();
    assert!(barrier.enter_timeout(timing.deadline()).await.unwrap());
    inside.enter();
    tokio::time::timeout(timing.deadline(), entered.wait()).await.expect("the others entered");
    assert_eq!(inside.count.load(Ordering::SeqCst), QTY);
    assert!(barrier.leave_timeout(Duration::from_secs(10)).await.unwrap());
    inside.count.fetch_sub(1, Ordering::SeqCst);
    tokio::time::timeout(timing.deadline(), left.wait()).await.expect("the others left");
}

/// Runs [`member`] for `QTY` members on `frameworks` (one each, or all the same).
async fn members(frameworks: Vec<CuratorFramework>, path: &str) {
    let inside = Arc::new(Inside::default());
    let entered = Arc::new(tokio::sync::Barrier::new(QTY));
    let left = Arc::new(tokio::sync::Barrier::new(QTY));
    let tasks: Vec<_> = frameworks
        .into_iter()
        .map(|fw| tokio::spawn(member(fw, path.to_string(), inside.clone(), entered.clone(), left.clone())))
        .collect();
    for task in join_all(tasks).await {
        task.expect("a member failed");
    }
    assert_eq!(inside.count.load(Ordering::SeqCst), 0);
    assert_eq!(inside.max.load(Ordering::SeqCst), QTY);
}

/// TestDistributedDoubleBarrier.testMultiClient: five members, each with its own client, enter
/// together (all five are inside before any leaves) and leave together. Nothing is left under
/// the barrier's path afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_multi_client() {
    init_tracing();
    let path = unique_path("double-multi");
    let connect_string = shared();
    let frameworks = join_all((0..QTY).map(|_| retry_one_time(&connect_string))).await;
    members(frameworks.clone(), &path).await;
    let observer = client(&shared()).await;
    assert_eq!(children(&observer, &path).await, Vec::<String>::new());
    for fw in frameworks {
        fw.close().await;
    }
    observer.close().await;
}

/// TestDistributedDoubleBarrier.testBasic: as testMultiClient, the five members on one client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_basic() {
    init_tracing();
    let path = unique_path("double-basic");
    let fw = retry_one_time(&shared()).await;
    members(vec![fw.clone(); QTY], &path).await;
    assert_eq!(children(&fw, &path).await, Vec::<String>::new());
    fw.close().await;
}

/// TestDistributedDoubleBarrier.testOverSubscribed: six members on a barrier for five, starting
/// their enters together, all enter and all leave (the threshold is not a limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_over_subscribed() {
    init_tracing();
    let path = unique_path("double-over");
    let fw = retry_one_time(&shared()).await;
    let start = Arc::new(tokio::sync::Barrier::new(QTY + 1));
    let tasks: Vec<_> = (0..=QTY)
        .map(|_| {
            let (fw, path, start) = (fw.clone(), path.clone(), start.clone());
            tokio::spawn(async move {
                let timing = Timing::new();
                let mut barrier = DistributedDoubleBarrier::new(&fw, &path, QTY).unwrap();
                start.wait().await;
                assert!(barrier.enter_timeout(timing.deadline()).await.unwrap());
                assert!(barrier.leave_timeout(timing.deadline()).await.unwrap());
            })
        })
        .collect();
    for task in join_all(tasks).await {
        task.expect("a member failed");
    }
    assert_eq!(children(&fw, &path).await, Vec::<String>::new());
    fw.close().await;
}

/// TestDistributedDoubleBarrier.testSpuriousWakeup (Curator GH-1290): a member alone in a
/// barrier for two is woken ten times without the barrier filling (Curator calls `notifyAll`
/// on it; ours is woken by ten suspensions and reconnections of its connection, which make it
/// check again, under the Session error policy, which rides them out). It must still be
/// waiting after them; the second member's enter then lets both in. Before Curator's fix the
/// first member passed the barrier at the first wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_spurious_wakeup() {
    init_tracing();
    let path = unique_path("double-spurious");
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    // The fixture's patient retry policy (not Curator's RetryOneTime): a cut may also catch
    // the member's check in flight, and ten of them in a row would spend one retry.
    let first_fw =
        connected(builder(&proxy.connect_string()).connection_state_error_policy(ErrorPolicy::Session)).await;
    let mut states = first_fw.connection_state_stream();
    let mut first = DistributedDoubleBarrier::new(&first_fw, &path, 2).unwrap();
    let entering = tokio::spawn(async move {
        let entered = first.enter_timeout(Timing::new().deadline()).await;
        (first, entered)
    });
    let observer = client(&shared()).await;
    assert!(eventually(deadline(), || async { children(&observer, &path).await.len() == 1 }).await);

    for _ in 0..10 {
        proxy.cut();
        wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
        // The next cut only once the connection is whole again (a reply came through it): a
        // cut during the reconnection handshake makes the client back off.
        first_fw.check_exists().for_path("/").await.expect("connected again");
    }
    assert!(!entering.is_finished(), "the first member passed a barrier that was not full");
    assert_eq!(children(&observer, &path).await.len(), 1, "{:?}", children(&observer, &path).await);

    let second_fw = retry_one_time(&shared()).await;
    let mut second = DistributedDoubleBarrier::new(&second_fw, &path, 2).unwrap();
    assert!(second.enter_timeout(deadline()).await.unwrap());
    let (mut first, entered) = tokio::time::timeout(deadline(), entering).await.expect("still waiting").unwrap();
    assert!(entered.unwrap());
    let (a, b) = tokio::join!(first.leave(), second.leave());
    a.unwrap();
    b.unwrap();
    assert_eq!(children(&observer, &path).await, Vec::<String>::new());
    for fw in [first_fw, second_fw, observer] {
        fw.close().await;
    }
}
