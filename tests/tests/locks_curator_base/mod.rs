//! The scenarios of Apache Curator's `TestInterProcessMutexBase`, written once for every lock
//! Curator runs them with: `InterProcessMutex` (`locks_curator_mutex.rs`),
//! `InterProcessSemaphoreMutex` and `InterProcessMultiLock` (`locks_curator_semaphore.rs`).
//!
//! Curator's base class takes an `InterProcessLock` (acquire, timed acquire, release,
//! `isAcquiredInThisProcess`); [`BaseLock`] is that interface over our locks, Curator style: an
//! acquire leaves its count with the handle (`keep()`) and `release()` gives it back through the
//! handle. Java threads become tokio tasks, and where Curator sleeps to let something happen,
//! these wait for it (the contenders' nodes in ZooKeeper, a connection state, a channel).
//!
//! Our behaviour, where it differs from Curator's on purpose: reentrancy is per tokio task (per
//! thread in Curator), so tasks sharing a handle exclude each other as Curator's threads do.

// Each test binary runs the scenarios with its own lock kinds only.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorFramework, Result};
use curator_recipes::{InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex, MultiLockGuard};
use curator_recipes::{LockGuard, SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT};
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::locks::{framework, Checker};
use tests::{children, init_tracing, unique_path};

/// Which lock a scenario runs with (Curator's `makeLock` of each subclass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `InterProcessMutex` on `BASE/our-lock` (TestInterProcessMutex).
    Mutex,
    /// `InterProcessSemaphoreMutex` on `BASE/our-lock` (TestInterProcessSemaphoreMutex).
    SemaphoreMutex,
    /// `InterProcessMultiLock` of `BASE/our-lock-1` and `BASE/our-lock-2`
    /// (TestInterProcessMultiMutex).
    Multi,
}

impl Kind {
    /// A new handle on the lock under `base` (Curator's `LOCK_BASE_PATH`).
    pub fn make(self, fw: &CuratorFramework, base: &str) -> BaseLock {
        match self {
            Kind::Mutex => BaseLock::Mutex(InterProcessMutex::new(fw, &format!("{base}/our-lock")).unwrap()),
            Kind::SemaphoreMutex => BaseLock::SemaphoreMutex(Arc::new(
                InterProcessSemaphoreMutex::new(fw, &format!("{base}/our-lock")).unwrap(),
            )),
            Kind::Multi => {
                let (one, two) = (format!("{base}/our-lock-1"), format!("{base}/our-lock-2"));
                BaseLock::Multi(InterProcessMultiLock::new(fw, &[one.as_str(), two.as_str()]).unwrap())
            }
        }
    }

    /// The folders the lock's nodes live in.
    fn node_dirs(self, base: &str) -> Vec<String> {
        match self {
            Kind::Mutex => vec![format!("{base}/our-lock")],
            Kind::SemaphoreMutex => vec![
                format!("{base}/our-lock/{SEMAPHORE_LOCK_PARENT}"),
                format!("{base}/our-lock/{SEMAPHORE_LEASE_PARENT}"),
            ],
            Kind::Multi => vec![format!("{base}/our-lock-1"), format!("{base}/our-lock-2")],
        }
    }

    /// How many nodes the lock has in ZooKeeper.
    pub async fn nodes(self, fw: &CuratorFramework, base: &str) -> usize {
        let mut n = 0;
        for dir in self.node_dirs(base) {
            n += children(fw, &dir).await.len();
        }
        n
    }

    /// How many nodes there are when one contender holds and `waiters` wait: a mutex has one
    /// node each; a multi-lock's holder has one in each of its two mutexes and its waiters queue
    /// on the first; a semaphore mutex's first waiter holds the takers' mutex and has a lease
    /// node waiting for room, the others queue on the takers' mutex.
    pub fn nodes_with_waiters(self, waiters: usize) -> usize {
        match self {
            Kind::Mutex => 1 + waiters,
            Kind::Multi => 2 + waiters,
            Kind::SemaphoreMutex if waiters == 0 => 1,
            Kind::SemaphoreMutex => 2 + waiters,
        }
    }

    /// Waits (up to the test deadline) until the lock has `n` nodes.
    pub async fn until_nodes(self, fw: &CuratorFramework, base: &str, n: usize) {
        let reached = eventually(Timing::new().deadline(), || async { self.nodes(fw, base).await == n }).await;
        assert!(reached, "{self:?} under {base}: expected {n} nodes, have {}", self.nodes(fw, base).await);
    }
}

/// Curator's `InterProcessLock` over our locks: counts are kept by the handle.
#[derive(Debug, Clone)]
pub enum BaseLock {
    Mutex(InterProcessMutex),
    SemaphoreMutex(Arc<InterProcessSemaphoreMutex>),
    Multi(InterProcessMultiLock),
}

/// A hold taken with a guard, where the lock has guards (Curator's `Locker`).
#[derive(Debug)]
pub enum Held {
    Guard(LockGuard),
    Multi(MultiLockGuard),
    /// `InterProcessSemaphoreMutex` has no guard: its handle holds.
    Handle(Arc<InterProcessSemaphoreMutex>),
}

impl Held {
    /// Ends the hold as leaving a `try (Locker ...)` block does: guards are dropped (the lock is
    /// released in the background), the semaphore mutex is released.
    pub async fn close(self) {
        match self {
            Held::Guard(guard) => drop(guard),
            Held::Multi(guard) => drop(guard),
            Held::Handle(mutex) => mutex.release().await.unwrap(),
        }
    }
}

impl BaseLock {
    /// Waits until held; the count stays with the handle.
    pub async fn acquire(&self) -> Result<()> {
        match self {
            BaseLock::Mutex(m) => m.acquire().await.map(LockGuard::keep),
            BaseLock::SemaphoreMutex(m) => m.acquire().await,
            BaseLock::Multi(m) => m.acquire().await.map(MultiLockGuard::keep),
        }
    }

    /// As [`acquire`](Self::acquire), for at most `timeout`: `Ok(false)` when it ran out.
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        match self {
            BaseLock::Mutex(m) => Ok(m.acquire_timeout(timeout).await?.map(LockGuard::keep).is_some()),
            BaseLock::SemaphoreMutex(m) => m.acquire_timeout(timeout).await,
            BaseLock::Multi(m) => Ok(m.acquire_timeout(timeout).await?.map(MultiLockGuard::keep).is_some()),
        }
    }

    /// A timed acquire that returns the guard instead of leaving the count with the handle.
    pub async fn acquire_held(&self, timeout: Duration) -> Result<Option<Held>> {
        Ok(match self {
            BaseLock::Mutex(m) => m.acquire_timeout(timeout).await?.map(Held::Guard),
            BaseLock::SemaphoreMutex(m) => m.acquire_timeout(timeout).await?.then(|| Held::Handle(m.clone())),
            BaseLock::Multi(m) => m.acquire_timeout(timeout).await?.map(Held::Multi),
        })
    }

    /// Gives back one count held through the handle.
    pub async fn release(&self) -> Result<()> {
        match self {
            BaseLock::Mutex(m) => m.release().await,
            BaseLock::SemaphoreMutex(m) => m.release().await,
            BaseLock::Multi(m) => m.release().await,
        }
    }

    pub fn is_acquired_in_this_process(&self) -> bool {
        match self {
            BaseLock::Mutex(m) => m.is_acquired_in_this_process(),
            BaseLock::SemaphoreMutex(m) => m.is_acquired_in_this_process(),
            BaseLock::Multi(m) => m.is_acquired_in_this_process(),
        }
    }
}

/// How long a timed acquire that must fail waits (Curator waits 10 s; the outcome is the same).
const SHORT_WAIT: Duration = Duration::from_millis(500);

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Timing::new().deadline(), future).await.unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// testLocker: a hold taken for a block is held inside it and not after it.
pub async fn locker(kind: Kind) {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-locker");
    let lock = kind.make(&fw, &base);
    let held = lock.acquire_held(Timing::new().deadline()).await.unwrap().expect("a free lock is taken");
    assert!(lock.is_acquired_in_this_process());
    held.close().await;
    // A dropped guard gives its count back at once; its node goes in the background.
    assert!(!lock.is_acquired_in_this_process());
    kind.until_nodes(&fw, &base, 0).await;
    fw.close().await;
}

/// testWaitingProcessKilledServer: two tasks of one client contend; the holder stops the
/// server, waits until the client sees the connection go, and restarts it. Both tasks get the
/// lock and release it.
pub async fn waiting_process_killed_server(kind: Kind) {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let connect = server.connect_string();
    let server = Arc::new(tokio::sync::Mutex::new(server));
    let fw = framework(&connect).await;
    let base = unique_path("curator-killed-server");
    let first = Arc::new(AtomicBool::new(true));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (fw, base, first, server) = (fw.clone(), base.clone(), first.clone(), server.clone());
        tasks.push(tokio::spawn(async move {
            let lock = kind.make(&fw, &base);
            lock.acquire().await.unwrap();
            if first.swap(false, Ordering::SeqCst) {
                // The other task waits while the server is away (Curator sleeps a bit here).
                kind.until_nodes(&fw, &base, kind.nodes_with_waiters(1)).await;
                server.lock().await.stop().await.unwrap();
                let gone =
                    eventually(Timing::new().deadline(), || async { !fw.connection_state().is_connected() }).await;
                assert!(gone, "the client saw the connection go");
                server.lock().await.restart().await.unwrap();
            }
            lock.release().await.unwrap();
        }));
    }
    for task in within("both tasks hold and release", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    fw.close().await;
}

/// testKilledSession: two handles of one client, each acquired in a task that then holds for
/// good; when the session is expired, the waiting one gets the lock on the new session.
pub async fn killed_session(kind: Kind) {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let base = unique_path("curator-killed-session");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (lock, tx) = (kind.make(&fw, &base), tx.clone());
        tasks.push(tokio::spawn(async move {
            lock.acquire().await.unwrap();
            tx.send(()).unwrap();
            std::future::pending::<()>().await;
        }));
    }
    within("the first acquire", rx.recv()).await.unwrap();
    kind.until_nodes(&fw, &base, kind.nodes_with_waiters(1)).await;
    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&server.connect_string(), &info).await.unwrap();
    within("the second acquire, after the expiry", rx.recv()).await.unwrap();
    for task in tasks {
        task.abort();
    }
    fw.close().await;
}

/// testContainerCleanup: once 10 tasks have taken and released the lock, its parents (created
/// as containers) are reaped by the server.
pub async fn container_cleanup(kind: Kind) {
    init_tracing();
    let server = TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let base = unique_path("curator-containers");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let lock = kind.make(&fw, &base);
        tasks.push(tokio::spawn(async move {
            lock.acquire().await.unwrap();
            tokio::task::yield_now().await;
            lock.release().await.unwrap();
        }));
    }
    for task in within("10 holds", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    let reaped =
        eventually(Timing::new().deadline(), || async { fw.check_exists().for_path(&base).await.unwrap().is_none() })
            .await;
    assert!(reaped, "{base} was not reaped: {:?}", children(&fw, &base).await);
    fw.close().await;
}

/// testWithNamespace: a timed acquire and a release under a namespace; the nodes live below it.
pub async fn with_namespace(kind: Kind) {
    init_tracing();
    let root = framework(&TestingServer::shared().connect_string()).await;
    let ns = unique_path("curator-ns").trim_start_matches('/').to_string();
    let fw = root.using_namespace(Some(&ns)).unwrap();
    let lock = kind.make(&fw, "/locks");
    assert!(lock.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    assert_eq!(kind.nodes(&root, &format!("/{ns}/locks")).await, kind.nodes_with_waiters(0), "under the namespace");
    lock.release().await.unwrap();
    assert!(!lock.is_acquired_in_this_process());
    kind.until_nodes(&root, &format!("/{ns}/locks"), 0).await;
    root.close().await;
}

/// testReentrantSingleLock: 10 tasks share one handle. The first holds until the 9 others wait
/// (Curator: until its 9 threads are past a semaphore); then each holds in turn, alone.
pub async fn reentrant_single_lock(kind: Kind) {
    init_tracing();
    const TASKS: usize = 10;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-single-lock");
    let lock = kind.make(&fw, &base);
    let checker = Checker::new();
    lock.acquire().await.unwrap();
    let mut tasks = Vec::new();
    for i in 1..TASKS {
        let (lock, checker) = (lock.clone(), checker.clone());
        tasks.push(tokio::spawn(async move {
            lock.acquire().await.unwrap();
            checker.hold(&format!("task{i}"), None, Duration::from_millis(2)).await;
            lock.release().await.unwrap();
        }));
    }
    kind.until_nodes(&fw, &base, kind.nodes_with_waiters(TASKS - 1)).await;
    checker.hold("task0", None, Duration::ZERO).await;
    lock.release().await.unwrap();
    for task in within("every task holds once", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    checker.verify(TASKS);
    assert!(!lock.is_acquired_in_this_process());
    fw.close().await;
}

/// Curator's `foo`: a count held while `bar` takes and gives back more.
async fn foo(lock: &BaseLock, in_bar: impl AsyncFnOnce()) {
    assert!(lock.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    assert!(lock.is_acquired_in_this_process());
    bar(lock, in_bar).await;
    assert!(lock.is_acquired_in_this_process());
    lock.release().await.unwrap();
}

async fn bar(lock: &BaseLock, in_bar: impl AsyncFnOnce()) {
    assert!(lock.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    assert!(lock.is_acquired_in_this_process());
    in_bar().await;
    snafu(lock).await;
    assert!(lock.is_acquired_in_this_process());
    lock.release().await.unwrap();
}

async fn snafu(lock: &BaseLock) {
    assert!(lock.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    assert!(lock.is_acquired_in_this_process());
    lock.release().await.unwrap();
    assert!(lock.is_acquired_in_this_process());
}

/// testReentrant: three nested acquires on one handle in one task, each given back; the lock
/// is held until the outermost release.
pub async fn reentrant(kind: Kind) {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-reentrant");
    let lock = kind.make(&fw, &base);
    foo(&lock, async || {
        assert_eq!(kind.nodes(&fw, &base).await, kind.nodes_with_waiters(0), "one node for every count");
    })
    .await;
    assert!(!lock.is_acquired_in_this_process());
    kind.until_nodes(&fw, &base, 0).await;
    fw.close().await;
}

/// testReentrant2Threads: while one task holds two counts, another task with the same handle
/// cannot get the lock (it does not re-enter another task's hold); the first task goes on.
pub async fn reentrant_2_threads(kind: Kind) {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-reentrant-2");
    let lock = kind.make(&fw, &base);
    foo(&lock, async || {
        let other = lock.clone();
        let tried = tokio::spawn(async move { other.acquire_timeout(SHORT_WAIT).await });
        let got = within("the other task's timed acquire", tried).await.unwrap().unwrap();
        assert!(!got, "another task sharing the handle got the lock while it was held");
    })
    .await;
    assert!(!lock.is_acquired_in_this_process());
    kind.until_nodes(&fw, &base, 0).await;
    fw.close().await;
}

/// test2Clients: two clients contend; exactly one holds while the other waits, and when the
/// holder releases, the other holds.
pub async fn two_clients(kind: Kind) {
    init_tracing();
    let server = TestingServer::shared();
    let (fw1, fw2) = (framework(&server.connect_string()).await, framework(&server.connect_string()).await);
    let base = unique_path("curator-2-clients");
    let (lock1, lock2) = (kind.make(&fw1, &base), kind.make(&fw2, &base));
    let mut releases = Vec::new();
    let mut acquired = Vec::new();
    let mut tasks = Vec::new();
    for lock in [lock1.clone(), lock2.clone()] {
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let (acquired_tx, acquired_rx) = tokio::sync::oneshot::channel::<()>();
        releases.push(release_tx);
        acquired.push(acquired_rx);
        tasks.push(tokio::spawn(async move {
            assert!(lock.acquire_timeout(Timing::new().deadline()).await.unwrap());
            acquired_tx.send(()).unwrap();
            release_rx.await.unwrap();
            lock.release().await.unwrap();
        }));
    }
    let one_holds = eventually(Timing::new().deadline(), || async {
        lock1.is_acquired_in_this_process() || lock2.is_acquired_in_this_process()
    })
    .await;
    assert!(one_holds);
    kind.until_nodes(&fw1, &base, kind.nodes_with_waiters(1)).await;
    assert_ne!(lock1.is_acquired_in_this_process(), lock2.is_acquired_in_this_process(), "exactly one holds");
    let (holder, other) = if lock1.is_acquired_in_this_process() { (0, 1) } else { (1, 0) };
    let mut releases = releases.into_iter().map(Some).collect::<Vec<_>>();
    releases[holder].take().unwrap().send(()).unwrap();
    within("the other client holds", acquired.remove(other)).await.unwrap();
    let other_lock = if other == 0 { &lock1 } else { &lock2 };
    assert!(other_lock.is_acquired_in_this_process());
    releases[other].take().unwrap().send(()).unwrap();
    for task in tasks {
        within("both finish", task).await.unwrap();
    }
    kind.until_nodes(&fw1, &base, 0).await;
    fw1.close().await;
    fw2.close().await;
}
