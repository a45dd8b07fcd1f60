//! QueuedMutex against a real ZooKeeper: one node per process at a time, local waiters served
//! in FIFO order, mutual exclusion across processes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_recipes::QueuedMutex;
use curator_test::TestingServer;
use tests::locks::{framework, Checker};
use tests::{init_tracing, unique_path};

/// 10,000 tasks on one framework through a QueuedMutex (one node per process at a time),
/// contending with a second framework's 1,000: all get it, in FIFO order locally, with mutual
/// exclusion across both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_local_waiters_through_a_queued_mutex() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("queued");
    let checker = Checker::new();
    let mut tasks = Vec::new();
    let mut orders = Vec::new();
    for (p, n) in [(0, 10_000usize), (1, 1_000)] {
        let fw = framework(&server.connect_string()).await;
        let mutex = QueuedMutex::new(&fw, &path).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        orders.push(order.clone());
        // Spawned in order, each after the previous one queued (FIFO is then checkable).
        for i in 0..n {
            let (mutex, checker, order) = (mutex.clone(), checker.clone(), order.clone());
            let queued = Arc::new(tokio::sync::Notify::new());
            let q = queued.clone();
            tasks.push(tokio::spawn(async move {
                let acquire = mutex.acquire();
                tokio::pin!(acquire);
                // Poll once so that this task has joined the local queue, then let the next spawn.
                let first = futures::poll!(&mut acquire);
                q.notify_one();
                let guard = match first {
                    std::task::Poll::Ready(r) => r.unwrap(),
                    std::task::Poll::Pending => acquire.await.unwrap(),
                };
                order.lock().unwrap().push(i);
                checker.hold(&format!("p{p}-{i}"), Some(guard.fencing_token()), Duration::ZERO).await;
                guard.release().await.unwrap();
            }));
            queued.notified().await;
        }
    }
    let results =
        tokio::time::timeout(Duration::from_secs(150), futures::future::join_all(tasks)).await.expect("all acquire");
    for r in results {
        r.unwrap();
    }
    for order in orders {
        let order = order.lock().unwrap().clone();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "local waiters are served in FIFO order");
    }
    checker.verify(11_000);
}
