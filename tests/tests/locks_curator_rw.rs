//! Apache Curator's `TestInterProcessReadWriteLock`, ported to our `InterProcessReadWriteLock`
//! against a real ZooKeeper. Java threads are tokio tasks; Curator's sleeps and latches are
//! waits for the nodes they stood for.
//!
//! Our behaviour, on purpose: reentrancy (and so a downgrade) is per tokio task, Curator's per
//! thread; tasks sharing a handle each have their own node, as Curator's threads do.
//!
//! Covered by existing tests in `locks_rw.rs` (their doc comments name them):
//! - `testThatUpgradingIsDisallowed` and `testDowngrading`: `downgrade_works_and_upgrade_is_refused`
//!   (an upgrade fails at once with `AlreadyHeld`, where Curator's timed acquire returns false
//!   after its 5 s).
//! - `testContendingDowngrading`: `queued_writer_waits_for_a_downgraded_reader`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::CuratorError;
use curator_recipes::InterProcessReadWriteLock;
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::locks::{framework, lock_retry, Checker};
use tests::{builder, children, connected, init_tracing, unique_path};

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Timing::new().deadline(), future).await.unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// TestInterProcessReadWriteLock.testGetParticipantNodes: 20 reader tasks hold at once and 8
/// writer tasks queue behind them, all sharing one handle; the participant nodes of each half
/// count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_participant_nodes() {
    init_tracing();
    const READERS: usize = 20;
    const WRITERS: usize = 8;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-rw-participants");
    let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let (exit_tx, exit_rx) = tokio::sync::watch::channel(false);
    let reading = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..READERS {
        let (lock, mut exit, reading) = (lock.clone(), exit_rx.clone(), reading.clone());
        tasks.push(tokio::spawn(async move {
            let guard = lock.read_lock().acquire().await.unwrap();
            reading.fetch_add(1, Ordering::SeqCst);
            exit.wait_for(|e| *e).await.unwrap();
            guard.release().await.unwrap();
        }));
    }
    assert!(eventually(Timing::new().deadline(), || async { reading.load(Ordering::SeqCst) == READERS }).await);
    for _ in 0..WRITERS {
        let (lock, mut exit) = (lock.clone(), exit_rx.clone());
        tasks.push(tokio::spawn(async move {
            let guard = lock.write_lock().acquire().await.unwrap();
            exit.wait_for(|e| *e).await.unwrap();
            guard.release().await.unwrap();
        }));
    }
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &path).await.len() == READERS + WRITERS }).await
    );
    assert_eq!(lock.read_lock().participant_nodes().await.unwrap().len(), READERS);
    assert_eq!(lock.write_lock().participant_nodes().await.unwrap().len(), WRITERS);
    exit_tx.send(true).unwrap();
    for task in within("every reader and writer finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    assert!(children(&fw, &path).await.is_empty());
    fw.close().await;
}

/// TestInterProcessReadWriteLock.testThatDowngradingRespectsThreads: while one task holds the
/// write lock, another task with the same handle does not get the read lock (it is no
/// downgrade: reentrancy is per task); it gives up after its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrading_respects_threads() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-rw-downgrade-tasks");
    let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let writer = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.write_lock().acquire().await.unwrap();
            held_tx.send(()).unwrap();
            release_rx.await.unwrap();
            guard.release().await.unwrap();
        })
    };
    within("the write lock", held_rx).await.unwrap();
    let reader = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.read_lock().acquire_timeout(Duration::from_millis(500)).await })
    };
    let read = within("the timed read acquire", reader).await.unwrap().unwrap();
    assert!(read.is_none(), "another task's read lock was granted as a downgrade");
    release_tx.send(()).unwrap();
    within("the writer", writer).await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    fw.close().await;
}

/// TestInterProcessReadWriteLock.testBasic: 8 clients each take the write lock (10%) or the
/// read lock (90%) at random: writers exclude everyone, readers share (more than one reader
/// held at once), both kinds were taken. Scaled down from 100 to 25 operations per client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic() {
    init_tracing();
    const CLIENTS: usize = 8;
    const ITERATIONS: usize = 25;
    let server = TestingServer::shared();
    let path = unique_path("curator-rw-basic");
    let checker = Checker::new();
    let (reading, most_reading) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (writes, reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let fw = framework(&server.connect_string()).await;
        let (path, checker) = (path.clone(), checker.clone());
        let (reading, most_reading, writes, reads) =
            (reading.clone(), most_reading.clone(), writes.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let mut rng = fastrand::Rng::new();
            for _ in 0..ITERATIONS {
                let work = Duration::from_millis(rng.u64(1..10));
                if rng.u8(0..100) < 10 {
                    let guard = lock.write_lock().acquire_timeout(Duration::from_secs(10)).await.unwrap().unwrap();
                    checker.hold(&format!("w{c}"), Some(guard.fencing_token()), work).await;
                    guard.release().await.unwrap();
                    writes.fetch_add(1, Ordering::SeqCst);
                } else {
                    let guard = lock.read_lock().acquire_timeout(Duration::from_secs(10)).await.unwrap().unwrap();
                    let now = reading.fetch_add(1, Ordering::SeqCst) + 1;
                    most_reading.fetch_max(now, Ordering::SeqCst);
                    checker.hold_shared(&format!("r{c}"), Some(guard.fencing_token()), work).await;
                    reading.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                    reads.fetch_add(1, Ordering::SeqCst);
                }
            }
            fw.close().await;
        }));
    }
    for task in within("every client finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    checker.verify(CLIENTS * ITERATIONS);
    let (writes, reads, most) =
        (writes.load(Ordering::SeqCst), reads.load(Ordering::SeqCst), most_reading.load(Ordering::SeqCst));
    eprintln!("writes: {writes}, reads: {reads}, most readers at once: {most}");
    assert!(writes > 0 && reads > 0);
    assert!(most > 1, "readers never shared the lock");
}

/// TestInterProcessReadWriteLock.testSetNodeData: the lock node's data is the data given (ours:
/// the framework's default data; Curator's lock copies the array it is given, which Rust's
/// ownership makes moot).
#[tokio::test]
async fn set_node_data() {
    init_tracing();
    let fw =
        connected(lock_retry(builder(&TestingServer::shared().connect_string())).default_data(vec![1, 2, 3, 4])).await;
    let path = unique_path("curator-rw-data");
    let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let guard = lock.write_lock().acquire().await.unwrap();
    let nodes = children(&fw, &path).await;
    assert_eq!(nodes.len(), 1);
    let data = fw.get_data().for_path(&format!("{path}/{}", nodes[0])).await.unwrap();
    assert_eq!(data, vec![1, 2, 3, 4]);
    guard.release().await.unwrap();
    fw.close().await;
}

/// TestInterProcessReadWriteLock.testLockPath: a client holds the write lock and its session is
/// expired; another client then gets the read lock, and the first client's write node is gone.
/// Releasing the lost write lock afterwards is harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_path() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let (fw1, fw2) = (framework(&server.connect_string()).await, framework(&server.connect_string()).await);
    let path = unique_path("curator-rw-lock-path");
    let (lock1, lock2) =
        (InterProcessReadWriteLock::new(&fw1, &path).unwrap(), InterProcessReadWriteLock::new(&fw2, &path).unwrap());
    let write = lock1.write_lock().acquire().await.unwrap();
    let info = fw1.session().await.unwrap().client().session().clone();
    expire_session(&server.connect_string(), &info).await.unwrap();
    let read = within("the read lock after the expiry", lock2.read_lock().acquire()).await.unwrap();
    let gone = fw1.get_data().for_path(write.path()).await;
    assert!(matches!(gone, Err(CuratorError::NoNode { .. })), "the expired write node is still there: {gone:?}");
    read.release().await.unwrap();
    write.release().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { children(&fw2, &path).await.is_empty() }).await);
    fw1.close().await;
    fw2.close().await;
}
