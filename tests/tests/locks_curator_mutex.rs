//! Apache Curator's `TestInterProcessMutexBase` and `TestInterProcessMutex`, ported to our
//! `InterProcessMutex` against a real ZooKeeper. The base scenarios are written once in
//! `locks_curator_base/` (also run with the semaphore mutex and the multi-lock in
//! `locks_curator_semaphore.rs`); Java threads are tokio tasks, and Curator's sleeps are waits
//! for what they stood for.
//!
//! Our behaviour, on purpose: reentrancy is per tokio task (Curator: per thread), and tasks
//! sharing a handle exclude each other as Curator's threads do.
//!
//! Covered by an existing test:
//! - `TestInterProcessMutexBase.testWithNamespace`: `works_under_a_namespace` in `locks_mutex.rs`.
//!
//! Not ported:
//! - `TestInterProcessMutex.testWithSchema`: there are no schema sets (`SchemaSet`) in
//!   curator-rs.
//! - `TestInterProcessMutex.testPersistentLock`: it replaces the lock's node creation through a
//!   `LockInternalsDriver` (persistent nodes); that Java extension point has no counterpart.

mod locks_curator_base;

use curator_recipes::{InterProcessMutex, Revoker};
use curator_test::{TestingServer, Timing};
use locks_curator_base::Kind;
use tests::locks::framework;
use tests::{children, init_tracing, unique_path};

/// TestInterProcessMutexBase.testLocker: a guard taken for a block holds the lock inside it;
/// dropped at its end, the lock is no longer held (the node goes in the background).
#[tokio::test]
async fn locker() {
    locks_curator_base::locker(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testWaitingProcessKilledServer: the holder stops and restarts the
/// server while another task of the same client waits; both get the lock and release it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_process_killed_server() {
    locks_curator_base::waiting_process_killed_server(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testKilledSession: the session of a holder and a waiter (two
/// handles of one client) expires; the waiter gets the lock on the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_session() {
    locks_curator_base::killed_session(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testContainerCleanup: after 10 tasks took and released the lock,
/// the server reaps its container parents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_cleanup() {
    locks_curator_base::container_cleanup(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testReentrantSingleLock: 10 tasks sharing one handle each hold
/// the lock alone, in turn (tasks sharing a handle exclude each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_single_lock() {
    locks_curator_base::reentrant_single_lock(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testReentrant2Threads: while one task holds nested counts, another
/// task with the same handle does not get the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_2_threads() {
    locks_curator_base::reentrant_2_threads(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.testReentrant: three nested acquires on one handle share one node;
/// the lock is held until the last release.
#[tokio::test]
async fn reentrant() {
    locks_curator_base::reentrant(Kind::Mutex).await;
}

/// TestInterProcessMutexBase.test2Clients: of two clients, exactly one holds; the other holds
/// once it releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients() {
    locks_curator_base::two_clients(Kind::Mutex).await;
}

/// TestInterProcessMutex.testRevoking: a revocable holder is asked through `Revoker` (its one
/// participant node) and releases; a new handle on the same client then takes the lock (Curator
/// gives it 5 s; we give the test deadline), and no node is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = format!("{}/our-lock", unique_path("curator-revoking"));
    let lock = InterProcessMutex::new(&fw, &path).unwrap();
    let (revoke_tx, mut revoke_rx) = tokio::sync::mpsc::unbounded_channel();
    lock.make_revocable(move |_: &InterProcessMutex| {
        let _ = revoke_tx.send(());
    });
    let (locked_tx, locked_rx) = tokio::sync::oneshot::channel();
    let holder = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            locked_tx.send(()).unwrap();
            revoke_rx.recv().await.expect("revocation requested");
            guard.release().await.unwrap();
        })
    };
    tokio::time::timeout(Timing::new().deadline(), locked_rx).await.unwrap().unwrap();
    let nodes = lock.participant_nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    Revoker::attempt_revoke(&fw, &nodes[0]).await.unwrap();
    let second = InterProcessMutex::new(&fw, &path).unwrap();
    let guard = second.acquire_timeout(Timing::new().deadline()).await.unwrap();
    guard.expect("the revoked holder released").release().await.unwrap();
    tokio::time::timeout(Timing::new().deadline(), holder).await.unwrap().unwrap();
    assert!(children(&fw, &path).await.is_empty(), "no node left");
    fw.close().await;
}
