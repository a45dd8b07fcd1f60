//! Apache Curator's `TestInterProcessSemaphore`, `TestInterProcessSemaphoreMutex` and
//! `TestInterProcessMultiMutex`, ported to our `InterProcessSemaphoreV2`,
//! `InterProcessSemaphoreMutex` and `InterProcessMultiLock` against a real ZooKeeper. The two
//! mutex classes run the scenarios of `TestInterProcessMutexBase`, written once in
//! `locks_curator_base/`. Java threads are tokio tasks; Curator's sleeps are waits for what they
//! stood for. Large loop counts are scaled down (each test says so) to keep this binary short.
//!
//! Our behaviour, on purpose: reentrancy is per tokio task (Curator: per thread); tasks sharing
//! a handle exclude each other; `acquire_timeout(Duration::ZERO)` is a try-lock; a dropped lease
//! or guard is returned in the background.
//!
//! Covered by an existing test:
//! - `TestInterProcessSemaphore.testSimple`: `zero_timeout_is_a_try_lock` in `locks_safety.rs`
//!   (it names it).
//!
//! Not ported:
//! - `TestInterProcessSemaphoreMutex.testReentrant`, `testReentrant2Threads` and
//!   `testReentrantSingleLock`: disabled in Curator (the semaphore mutex is not reentrant). Ours
//!   refuses its holder's second acquire at once (`semaphore_mutex_excludes` in
//!   `locks_semaphore.rs`, `tasks_sharing_a_handle_exclude_each_other` in `locks_safety.rs`).
//! - In `testAcquireAfterLostServer`, the debug latches with which Curator makes one acquire
//!   fail its listing during the outage (`debugAcquireLatch`, `debugFailedGetChildrenLatch`):
//!   there are no such hooks, so the outage hits the acquiring tasks wherever they are.
//! - In `testInterruptAcquire`, the `debugWaitLatch` hook: the test waits for the waiter's lease
//!   node instead.

mod locks_curator_base;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{ConnectionState, CreateMode, CuratorError, ErrorPolicy};
use curator_recipes::SharedCount;
use curator_recipes::{InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreV2};
use curator_test::{eventually, TestingServer, Timing};
use locks_curator_base::Kind;
use tests::locks::{framework, framework_with, Checker};
use tests::{children, init_tracing, unique_path};

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Timing::new().deadline(), future).await.unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// How long a timed acquire that must fail waits (Curator waits its full waiting time; the
/// outcome is the same).
const SHORT_WAIT: Duration = Duration::from_millis(500);

fn leases(path: &str) -> String {
    format!("{path}/leases")
}

// ---- TestInterProcessSemaphore ----

/// TestInterProcessSemaphore.testAcquireAfterLostServer (CURATOR-335): 10 tasks of one client
/// take and return the one lease of a semaphore in a loop; the server stops until the client
/// declares the session lost, then restarts; the tasks go on taking the lease (10 more
/// acquisitions after the reconnection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_after_lost_server() {
    init_tracing();
    const TASKS: usize = 10;
    let mut server = TestingServer::start().await.unwrap();
    let fw = framework_with(&server.connect_string(), ErrorPolicy::Standard, Duration::from_secs(2)).await;
    let path = unique_path("curator-sem-lost-server");
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (fw, path, acquired) = (fw.clone(), path.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let semaphore = InterProcessSemaphoreV2::new(&fw, &path, 1).unwrap();
                match semaphore.acquire().await {
                    Ok(lease) => {
                        acquired.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        // Fails during the outage; the node then goes with its session.
                        let _ = lease.release().await;
                    }
                    // The outage: try again after a pause (pacing, not synchronisation).
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }
    assert!(eventually(Timing::new().deadline(), || async { acquired.load(Ordering::SeqCst) >= TASKS }).await);
    server.stop().await.unwrap();
    let lost = eventually(Timing::new().deadline(), || async { fw.connection_state() == ConnectionState::Lost }).await;
    assert!(lost, "the client declared the session lost");
    server.restart().await.unwrap();
    let back = eventually(Timing::new().deadline(), || async { fw.connection_state().is_connected() }).await;
    assert!(back, "the client reconnected");
    let at_restart = acquired.load(Ordering::SeqCst);
    let resumed =
        eventually(Timing::new().deadline(), || async { acquired.load(Ordering::SeqCst) >= at_restart + TASKS }).await;
    assert!(
        resumed,
        "acquires did not resume after the restart: {} since",
        acquired.load(Ordering::SeqCst) - at_restart
    );
    for task in &tasks {
        assert!(!task.is_finished(), "an acquiring task ended (panicked)");
    }
    for task in tasks {
        task.abort();
    }
    fw.close().await;
}

/// TestInterProcessSemaphore.testClientClose: a client holding the only lease closes; another
/// client's acquire then gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_close() {
    init_tracing();
    let server = TestingServer::shared();
    let (fw1, fw2) = (framework(&server.connect_string()).await, framework(&server.connect_string()).await);
    let path = unique_path("curator-sem-close");
    let semaphore1 = InterProcessSemaphoreV2::new(&fw1, &path, 1).unwrap();
    let semaphore2 = InterProcessSemaphoreV2::new(&fw2, &path, 1).unwrap();
    let lease = semaphore2.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a free lease");
    for lease in lease {
        lease.release().await.unwrap();
    }
    let held = semaphore1.acquire_timeout(1, Duration::from_secs(10)).await.unwrap().expect("a free lease");
    fw1.close().await; // returns the held lease (its session's nodes go)
    let lease = semaphore2.acquire_timeout(1, Timing::new().deadline()).await.unwrap();
    assert!(lease.is_some(), "the closed client's lease was not returned");
    drop(held);
    drop(lease);
    fw2.close().await;
}

/// TestInterProcessSemaphore.testMaxPerSession: 10 clients take random numbers of leases (as
/// many as a local count says are free) from a semaphore of 5 to 15: never more than its
/// count are held at once. Scaled down from 100 loops per client to 10, and from 25 to 100
/// leases to 5 to 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_per_session() {
    init_tracing();
    const CLIENTS: usize = 10;
    const LOOPS: usize = 10;
    let max = fastrand::usize(5..=15);
    let server = TestingServer::shared();
    let path = unique_path("curator-sem-max");
    let available = Arc::new(Mutex::new(max));
    let freed = Arc::new(tokio::sync::Notify::new());
    let counter = Arc::new(Mutex::new((0usize, 0usize))); // (current, most)
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let fw = framework(&server.connect_string()).await;
        let (path, available, freed, counter) = (path.clone(), available.clone(), freed.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let semaphore = InterProcessSemaphoreV2::new(&fw, &path, max).unwrap();
            let mut rng = fastrand::Rng::new();
            for _ in 0..LOOPS {
                let qty = loop {
                    let notified = freed.notified();
                    {
                        let mut available = available.lock().unwrap();
                        if *available > 0 {
                            let qty = rng.usize(1..=*available);
                            *available -= qty;
                            break qty;
                        }
                    }
                    within("leases counted free", notified).await;
                };
                let leases = semaphore.acquire_timeout(qty, Timing::new().deadline()).await.unwrap().expect("leases");
                assert_eq!(leases.len(), qty);
                {
                    let mut c = counter.lock().unwrap();
                    c.0 += qty;
                    c.1 = c.1.max(c.0);
                }
                tokio::time::sleep(Duration::from_millis(rng.u64(0..10))).await; // the work
                counter.lock().unwrap().0 -= qty;
                for lease in leases {
                    lease.release().await.unwrap();
                }
                *available.lock().unwrap() += qty;
                freed.notify_waiters();
            }
            fw.close().await;
        }));
    }
    for task in within("every client finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    let (current, most) = *counter.lock().unwrap();
    eprintln!("{most} of {max} leases held at most");
    assert_eq!(current, 0);
    assert!(most > 0 && most <= max, "{most} leases held at once, of {max}");
}

/// TestInterProcessSemaphore.testRelease1AtATime: 10 clients, 5 leases: each client takes one
/// once; exactly 5 are held at once at most. (Curator holds each lease for a while and hopes 5
/// overlap; here the first holders keep theirs until 5 are held.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_1_at_a_time() {
    init_tracing();
    const CLIENTS: usize = 10;
    const MAX: usize = CLIENTS / 2;
    let server = TestingServer::shared();
    let path = unique_path("curator-sem-one-at-a-time");
    let (active, most, uses) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let fw = framework(&server.connect_string()).await;
        let (path, active, most, uses) = (path.clone(), active.clone(), most.clone(), uses.clone());
        tasks.push(tokio::spawn(async move {
            let semaphore = InterProcessSemaphoreV2::new(&fw, &path, MAX).unwrap();
            let lease = semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a lease");
            uses.fetch_add(1, Ordering::SeqCst);
            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            let full = eventually(Timing::new().deadline(), || async { most.load(Ordering::SeqCst) >= MAX }).await;
            assert!(full, "never {MAX} leases held at once");
            active.fetch_sub(1, Ordering::SeqCst);
            for lease in lease {
                lease.release().await.unwrap();
            }
            fw.close().await;
        }));
    }
    for task in within("every client finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    assert_eq!(uses.load(Ordering::SeqCst), CLIENTS);
    assert_eq!(most.load(Ordering::SeqCst), MAX);
}

/// TestInterProcessSemaphore.testReleaseInChunks: tasks of one client take leases of a
/// semaphore of 11 and hold them until released in random chunks of 1 to 5: never more than
/// 11 at once. Here each chunk is released once the semaphore is full (Curator sleeps at
/// random), so exactly 11 are held at once at most. Scaled down from 100 tasks to 30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_in_chunks() {
    init_tracing();
    const MAX: usize = 11;
    const TASKS: usize = 30;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-sem-chunks");
    let stepper = Arc::new(tokio::sync::Semaphore::new(0));
    let (current, most, done) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (fw, path, stepper) = (fw.clone(), path.clone(), stepper.clone());
        let (current, most, done) = (current.clone(), most.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let semaphore = InterProcessSemaphoreV2::new(&fw, &path, MAX).unwrap();
            let lease = semaphore.acquire().await.unwrap();
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            stepper.acquire().await.unwrap().forget();
            current.fetch_sub(1, Ordering::SeqCst);
            lease.release().await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    let mut released = 0;
    while released < TASKS {
        let full = eventually(Timing::new().deadline(), || async {
            done.load(Ordering::SeqCst) == released && current.load(Ordering::SeqCst) == MAX.min(TASKS - released)
        })
        .await;
        assert!(
            full,
            "{} leases held, {} tasks done, {released} released",
            current.load(Ordering::SeqCst),
            done.load(Ordering::SeqCst)
        );
        let chunk = fastrand::usize(1..=5).min(TASKS - released);
        stepper.add_permits(chunk);
        released += chunk;
    }
    for task in within("every task finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    assert_eq!(current.load(Ordering::SeqCst), 0);
    assert_eq!(most.load(Ordering::SeqCst), MAX);
    assert!(children(&fw, &leases(&path)).await.is_empty());
    fw.close().await;
}

/// TestInterProcessSemaphore.testThreads: 10 tasks share one handle of a semaphore of one
/// lease; each takes and returns it, alone, within the deadline (Curator: 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads() {
    init_tracing();
    const TASKS: usize = 10;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let semaphore = Arc::new(InterProcessSemaphoreV2::new(&fw, &unique_path("curator-sem-threads"), 1).unwrap());
    let checker = Checker::new();
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (semaphore, checker) = (semaphore.clone(), checker.clone());
        tasks.push(tokio::spawn(async move {
            let lease = semaphore.acquire().await.unwrap();
            checker.hold(&format!("task{i}"), Some(lease.fencing_token()), Duration::from_millis(1)).await;
            lease.release().await.unwrap();
        }));
    }
    for task in within("every task finishes", futures::future::join_all(tasks)).await {
        task.unwrap();
    }
    checker.verify(TASKS);
    fw.close().await;
}

/// TestInterProcessSemaphore.testThreadedLeaseIncrease: a semaphore sized by a `SharedCount`
/// of 1; a task takes the lease and waits for a second; once the waiter's lease node is there,
/// the count is raised to 2 and the waiter gets its lease without any lease being returned
/// (before the count was followed, it waited out its timeout and got none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_lease_increase() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-sem-increase");
    let count = SharedCount::new(&fw, &format!("{path}-count"), 1).unwrap();
    count.start().unwrap();
    count.ready().await.unwrap();
    let semaphore = Arc::new(InterProcessSemaphoreV2::with_shared_count(&fw, &path, &count).unwrap());
    let first = semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("the one lease");
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire_timeout(1, Timing::new().deadline()).await })
    };
    // The waiter's lease node is made before it waits for room.
    let waiting = eventually(Timing::new().deadline(), || async { children(&fw, &leases(&path)).await.len() == 2 });
    assert!(waiting.await, "the waiter made no lease node");
    let seen = count.versioned_value().unwrap();
    assert!(count.try_set(&seen, 2).await.unwrap(), "nobody else writes the count");
    let second = within("the waiter", waiter).await.unwrap().unwrap().expect("a lease once the count is 2");
    assert_eq!(semaphore.max_leases().unwrap(), 2);
    for lease in first.into_iter().chain(second) {
        lease.release().await.unwrap();
    }
    count.close().await;
    fw.close().await;
}

/// TestInterProcessSemaphore.testSimple2: three handles take the three leases; a fourth gets
/// none within its timeout, and one once a lease is returned.
#[tokio::test]
async fn simple2() {
    init_tracing();
    const MAX: usize = 3;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-sem-simple2");
    let mut held = Vec::new();
    for _ in 0..MAX {
        let semaphore = InterProcessSemaphoreV2::new(&fw, &path, MAX).unwrap();
        held.extend(semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a free lease"));
    }
    let semaphore = InterProcessSemaphoreV2::new(&fw, &path, MAX).unwrap();
    assert!(semaphore.acquire_timeout(1, SHORT_WAIT).await.unwrap().is_none(), "a fourth lease");
    held.remove(0).release().await.unwrap();
    let lease = semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap();
    assert!(lease.is_some(), "no lease after one was returned");
    for lease in held.into_iter().chain(lease.into_iter().flatten()) {
        lease.release().await.unwrap();
    }
    fw.close().await;
}

/// TestInterProcessSemaphore.testGetParticipantNodes: three leases taken through one handle
/// are its three participant nodes.
#[tokio::test]
async fn get_participant_nodes() {
    init_tracing();
    const LEASES: usize = 3;
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let semaphore = InterProcessSemaphoreV2::new(&fw, &unique_path("curator-sem-participants"), LEASES).unwrap();
    let mut held = Vec::new();
    for _ in 0..LEASES {
        held.push(semaphore.acquire().await.unwrap());
    }
    let nodes = semaphore.participant_nodes().await.unwrap();
    assert_eq!(nodes.len(), LEASES);
    assert_eq!(nodes.into_iter().collect::<HashSet<_>>(), held.iter().map(|l| l.node_name().to_string()).collect());
    for lease in held {
        lease.release().await.unwrap();
    }
    fw.close().await;
}

/// TestInterProcessSemaphore.testNoOrphanedNodes: the lease node of a waiting acquire is
/// deleted by someone else; the acquire takes a new one, gets the lease when the holder returns
/// it, and once that is returned too no lease node is left; a new acquire succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_orphaned_nodes() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-sem-orphans");
    let semaphore = Arc::new(InterProcessSemaphoreV2::new(&fw, &path, 1).unwrap());
    let lease = semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a free lease");
    let first = children(&fw, &leases(&path)).await;
    assert_eq!(first.len(), 1);
    let waiting = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire_timeout(1, Timing::new().multiple(2.0).deadline()).await })
    };
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &leases(&path)).await.len() == 2 }).await);
    let new_node = children(&fw, &leases(&path)).await.into_iter().find(|c| !first.contains(c)).unwrap();
    fw.delete().for_path(&format!("{}/{new_node}", leases(&path))).await.unwrap();
    for lease in lease {
        lease.release().await.unwrap();
    }
    let second = within("the waiting acquire", waiting).await.unwrap().unwrap().expect("the lease");
    assert_ne!(second[0].node_name(), new_node, "the acquire took a new lease node");
    for lease in second {
        lease.release().await.unwrap();
    }
    assert_eq!(children(&fw, &leases(&path)).await, Vec::<String>::new(), "an orphaned lease node");
    let again = semaphore.acquire_timeout(1, Timing::new().deadline()).await.unwrap();
    assert!(again.is_some());
    drop(again);
    fw.close().await;
}

/// TestInterProcessSemaphore.testInterruptAcquire (CURATOR-462): an acquire waiting for room
/// is cancelled (its task aborted, Java's interrupt); its lease node goes, and once the holder
/// returns its lease a third handle gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_acquire() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("curator-sem-interrupt");
    let s1 = InterProcessSemaphoreV2::new(&fw, &path, 1).unwrap();
    let s2 = InterProcessSemaphoreV2::new(&fw, &path, 1).unwrap();
    let s3 = InterProcessSemaphoreV2::new(&fw, &path, 1).unwrap();
    let lease = s1.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a free lease");
    let waiting = tokio::spawn(async move { s2.acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &leases(&path)).await.len() == 2 }).await);
    waiting.abort();
    assert!(within("the aborted task ends", waiting).await.unwrap_err().is_cancelled());
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &leases(&path)).await.len() == 1 }).await,
        "the cancelled acquire's lease node is left: {:?}",
        children(&fw, &leases(&path)).await
    );
    for lease in lease {
        lease.release().await.unwrap();
    }
    let third = s3.acquire_timeout(1, Timing::new().deadline()).await.unwrap();
    assert!(third.is_some());
    drop(third);
    fw.close().await;
}

// ---- TestInterProcessSemaphoreMutex (TestInterProcessMutexBase's scenarios) ----

/// TestInterProcessSemaphoreMutex.testLocker: held inside the block, not after it.
#[tokio::test]
async fn semaphore_mutex_locker() {
    locks_curator_base::locker(Kind::SemaphoreMutex).await;
}

/// TestInterProcessSemaphoreMutex.testWaitingProcessKilledServer: the holder stops and
/// restarts the server while another task waits; both get the mutex and release it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_waiting_process_killed_server() {
    locks_curator_base::waiting_process_killed_server(Kind::SemaphoreMutex).await;
}

/// TestInterProcessSemaphoreMutex.testKilledSession: after the session of a holder and a
/// waiter expires, the waiter gets the mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_killed_session() {
    locks_curator_base::killed_session(Kind::SemaphoreMutex).await;
}

/// TestInterProcessSemaphoreMutex.testContainerCleanup: after 10 holds, the server reaps the
/// container parents (`locks`, `leases` and above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_container_cleanup() {
    locks_curator_base::container_cleanup(Kind::SemaphoreMutex).await;
}

/// TestInterProcessSemaphoreMutex.testWithNamespace: a timed acquire and a release under a
/// namespace.
#[tokio::test]
async fn semaphore_mutex_with_namespace() {
    locks_curator_base::with_namespace(Kind::SemaphoreMutex).await;
}

/// TestInterProcessSemaphoreMutex.test2Clients: of two clients exactly one holds, then the
/// other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_two_clients() {
    locks_curator_base::two_clients(Kind::SemaphoreMutex).await;
}

// ---- TestInterProcessMultiMutex (TestInterProcessMutexBase's scenarios, and its own) ----

/// TestInterProcessMultiMutex.testLocker: a multi-lock guard holds both mutexes inside the
/// block; dropped, neither is held.
#[tokio::test]
async fn multi_locker() {
    locks_curator_base::locker(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testWaitingProcessKilledServer: the holder stops and restarts the
/// server while another task waits; both get both mutexes and release them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_waiting_process_killed_server() {
    locks_curator_base::waiting_process_killed_server(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testKilledSession: after the session of a holder and a waiter
/// expires, the waiter gets both mutexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_killed_session() {
    locks_curator_base::killed_session(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testContainerCleanup: after 10 holds, the server reaps both
/// mutexes' container parents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_container_cleanup() {
    locks_curator_base::container_cleanup(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testWithNamespace: a timed acquire and a release under a
/// namespace.
#[tokio::test]
async fn multi_with_namespace() {
    locks_curator_base::with_namespace(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testReentrantSingleLock: 10 tasks sharing one multi-lock handle
/// each hold it alone, in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_reentrant_single_lock() {
    locks_curator_base::reentrant_single_lock(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testReentrant2Threads: while one task holds nested counts,
/// another task with the same handle does not get the multi-lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_reentrant_2_threads() {
    locks_curator_base::reentrant_2_threads(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testReentrant: three nested acquires of the multi-lock in one
/// task share one node per mutex; held until the last release.
#[tokio::test]
async fn multi_reentrant() {
    locks_curator_base::reentrant(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.test2Clients: of two clients exactly one holds the multi-lock,
/// then the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_two_clients() {
    locks_curator_base::two_clients(Kind::Multi).await;
}

/// TestInterProcessMultiMutex.testSomeReleasesFail: releasing a multi-lock when one of its
/// mutexes cannot be released (Curator: a lock whose release throws; here the server refuses
/// the delete, as the mutex's parent no longer grants DELETE). The release reports the error
/// and still releases the other mutex. The refused mutex's handle has given its count back,
/// and its node stays until its session ends (Curator's failing lock stays acquired).
#[tokio::test]
async fn multi_some_releases_fail() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-multi-release-fails");
    let (one, two) = (format!("{base}/our-lock-1"), format!("{base}/our-lock-2"));
    let good = InterProcessMutex::new(&fw, &one).unwrap();
    let refused = InterProcessMutex::new(&fw, &two).unwrap();
    let multi = InterProcessMultiLock::from_mutexes(vec![good.clone(), refused.clone()]);
    let guard = multi.acquire().await.unwrap();
    let no_delete = Permission::READ | Permission::WRITE | Permission::CREATE | Permission::ADMIN;
    fw.set_acl().with_acl(vec![Acl::new(no_delete, AuthId::anyone())]).for_path(&two).await.unwrap();
    let released = guard.release().await;
    assert!(matches!(released, Err(CuratorError::NoAuth { .. })), "{released:?}");
    assert!(!good.is_acquired_in_this_process(), "the other mutex was not released");
    assert!(children(&fw, &one).await.is_empty(), "the other mutex's node is left");
    assert_eq!(children(&fw, &two).await.len(), 1, "the refused delete happened");
    fw.close().await; // the refused node is ephemeral: it goes with the session
}

/// TestInterProcessMultiMutex.testSomeLocksFailToLock: the second mutex of a multi-lock cannot
/// be taken (Curator: a lock whose acquire throws; here its parent is an ephemeral node, which
/// cannot have children). The acquire fails with that error, after the first mutex was taken,
/// and the first is released.
#[tokio::test]
async fn multi_some_locks_fail_to_lock() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let base = unique_path("curator-multi-lock-fails");
    let (one, ephemeral) = (format!("{base}/our-lock-1"), format!("{base}/ephemeral"));
    fw.create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path(&ephemeral, Vec::new())
        .await
        .unwrap();
    let good = InterProcessMutex::new(&fw, &one).unwrap();
    let bad = InterProcessMutex::new(&fw, &format!("{ephemeral}/our-lock-2")).unwrap();
    let multi = InterProcessMultiLock::from_mutexes(vec![good.clone(), bad]);
    let acquired = multi.acquire().await;
    assert!(matches!(acquired, Err(CuratorError::NoChildrenForEphemerals { .. })), "{acquired:?}");
    assert!(!good.is_acquired_in_this_process(), "the first mutex is still held");
    assert!(children(&fw, &one).await.is_empty(), "the first mutex's node is left");
    // The first mutex was taken before the second was tried: its node was made (and deleted).
    let stat = fw.check_exists().for_path(&one).await.unwrap().expect("the first mutex's parent");
    assert!(stat.cversion >= 2, "the first mutex was never taken (cversion {})", stat.cversion);
    fw.close().await;
}
