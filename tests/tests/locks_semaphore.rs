//! InterProcessSemaphoreV2 and InterProcessSemaphoreMutex against a real ZooKeeper: the lease
//! bound across sessions, all-or-nothing acquires, Curator's `locks/` + `leases/` layout, and
//! mutual exclusion, and a semaphore sized by a `SharedCount`. (InterProcessMultiLock:
//! `locks_multi.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::CuratorError;
use curator_recipes::SharedCount;
use curator_recipes::{InterProcessSemaphoreMutex, InterProcessSemaphoreV2};
use curator_test::{eventually, TestingServer, Timing};
use tests::locks::{framework, Checker};
use tests::{children, init_tracing, unique_path};

/// 6 sessions share 3 leases: never more than 3 holders at once, everyone finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_bounds_holders_across_sessions() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("sem");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let fw = framework(&server.connect_string()).await;
        let (path, inside, most) = (path.clone(), inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let sem = InterProcessSemaphoreV2::new(&fw, &path, 3).unwrap();
            for _ in 0..15 {
                let lease = sem.acquire().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                lease.release().await.unwrap();
            }
            fw.close().await;
        }));
    }
    let results =
        tokio::time::timeout(Duration::from_secs(90), futures::future::join_all(tasks)).await.expect("all finish");
    for r in results {
        r.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "at most 3 holders, saw {most}");
}

/// Curator's layout: `P/leases/_c_<uuid>-lease-<seq>` with the default data, `P/locks` for
/// the takers' mutex; acquire(n) is all or nothing and a timeout leaves no lease behind.
#[tokio::test]
async fn semaphore_layout_and_all_or_nothing() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("sem-layout");
    let sem = InterProcessSemaphoreV2::new(&fw, &path, 3).unwrap();
    let two = sem.acquire_many(2).await.unwrap();
    let names = sem.participant_nodes().await.unwrap();
    assert_eq!(names.len(), 2);
    for lease in &two {
        let name = lease.node_name();
        assert!(name.starts_with("_c_") && name.len() == 3 + 36 + 1 + "lease-".len() + 10, "{name}");
        assert_eq!(&name[39..46], "-lease-");
        assert!(lease.path().starts_with(&format!("{path}/leases/")));
        assert_eq!(lease.data().await.unwrap(), fw.default_data());
    }
    assert!(children(&fw, &format!("{path}/locks")).await.is_empty(), "the takers' mutex is free");
    // 2 more do not fit: all or nothing.
    assert!(sem.acquire_timeout(2, Duration::from_millis(500)).await.unwrap().is_none());
    assert!(
        eventually(Timing::new().deadline(), || async { sem.participant_nodes().await.unwrap().len() == 2 }).await,
        "the partial lease was returned"
    );
    let one = sem.acquire().await.unwrap();
    assert!(one.fencing_token() > two[1].fencing_token());
    for lease in two {
        lease.release().await.unwrap();
    }
    drop(one); // returned in the background
    assert!(eventually(Timing::new().deadline(), || async { sem.participant_nodes().await.unwrap().is_empty() }).await);
    assert!(matches!(InterProcessSemaphoreV2::new(&fw, &path, 0), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(sem.acquire_many(0).await, Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(InterProcessSemaphoreV2::new(&fw, "nope", 1), Err(CuratorError::InvalidPath { .. })));
    fw.close().await;
}

/// InterProcessSemaphoreMutex: mutual exclusion across 4 sessions, not reentrant, typed
/// errors for misuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_excludes() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("sem-mutex");
    let checker = Checker::new();
    let mut tasks = Vec::new();
    for c in 0..4 {
        let fw = framework(&server.connect_string()).await;
        let (path, checker) = (path.clone(), checker.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
            for _ in 0..25 {
                mutex.acquire().await.unwrap();
                assert!(mutex.is_acquired_in_this_process());
                checker.hold(&format!("c{c}"), mutex.fencing_token(), Duration::ZERO).await;
                mutex.release().await.unwrap();
            }
            fw.close().await;
        }));
    }
    let results =
        tokio::time::timeout(Duration::from_secs(90), futures::future::join_all(tasks)).await.expect("all finish");
    for r in results {
        r.unwrap();
    }
    checker.verify(100);

    let fw = framework(&server.connect_string()).await;
    let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
    let not_held = mutex.release().await;
    assert!(matches!(&not_held, Err(CuratorError::NotHeld { path: p, .. }) if *p == path), "{not_held:?}");
    assert!(mutex.acquire_timeout(Timing::new().deadline()).await.unwrap());
    let again = mutex.acquire().await;
    assert!(matches!(&again, Err(CuratorError::AlreadyHeld { path: p, .. }) if *p == path), "not reentrant: {again:?}");
    mutex.release().await.unwrap();
    fw.close().await;
}

/// How long a timed acquire that must fail waits.
const SHORT_WAIT: Duration = Duration::from_millis(300);

/// Two sessions size their semaphores by their own `SharedCount`s on one count node. Raising
/// the count through one lets the other's waiter in; lowering it takes no lease back but holds
/// new takers until enough leases are returned; a count of 0 or below grants none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_sized_by_a_shared_count_follows_it() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("sem-count");
    let count_path = format!("{path}-count");
    let (fw_a, fw_b) = (framework(&server.connect_string()).await, framework(&server.connect_string()).await);
    let (count_a, count_b) =
        (SharedCount::new(&fw_a, &count_path, 1).unwrap(), SharedCount::new(&fw_b, &count_path, 1).unwrap());
    count_a.start().unwrap();
    count_a.ready().await.unwrap();
    count_b.start().unwrap();
    count_b.ready().await.unwrap();
    let sem_a = Arc::new(InterProcessSemaphoreV2::with_shared_count(&fw_a, &path, &count_a).unwrap());
    let sem_b = InterProcessSemaphoreV2::with_shared_count(&fw_b, &path, &count_b).unwrap();
    let deadline = Timing::new().deadline();

    let held_b = sem_b.acquire_timeout(1, deadline).await.unwrap().expect("the one lease");
    let waiter = {
        let sem_a = sem_a.clone();
        tokio::spawn(async move { sem_a.acquire_timeout(1, deadline).await })
    };
    let waiting = eventually(deadline, || async { children(&fw_a, &format!("{path}/leases")).await.len() == 2 });
    assert!(waiting.await, "A's waiter made no lease node");
    count_b.set(2).await.unwrap();
    let mut held =
        tokio::time::timeout(deadline, waiter).await.expect("A's waiter").unwrap().unwrap().expect("a lease at 2");
    held.extend(held_b);
    assert_eq!(sem_a.max_leases().unwrap(), 2);

    // Lowered to 1 with two leases out: nobody new gets in until both are back.
    count_a.set(1).await.unwrap();
    let lowered = eventually(deadline, || async { sem_b.max_leases().unwrap() == 1 });
    assert!(lowered.await, "B's semaphore never saw the count lowered");
    assert_eq!(held.len(), 2, "lowering the count took a lease back");
    held.pop().unwrap().release().await.unwrap();
    assert!(sem_b.acquire_timeout(1, SHORT_WAIT).await.unwrap().is_none(), "a second lease at a count of 1");
    held.pop().unwrap().release().await.unwrap();
    let lease = sem_b.acquire_timeout(1, deadline).await.unwrap().expect("the one lease once all are back");
    let mut lease = lease;
    lease.pop().unwrap().release().await.unwrap();

    // 0 and below grant none, and the waiters' lease nodes are gone after their timeouts.
    for size in [0, -3] {
        count_a.set(size).await.unwrap();
        let seen = eventually(deadline, || async { sem_a.max_leases().unwrap() == 0 });
        assert!(seen.await, "A's semaphore never saw the count {size}");
        assert!(sem_a.acquire_timeout(1, SHORT_WAIT).await.unwrap().is_none(), "a lease at a count of {size}");
    }
    let cleared = eventually(deadline, || async { children(&fw_a, &format!("{path}/leases")).await.is_empty() });
    assert!(cleared.await, "a timed-out acquire left its lease node");
    count_a.close().await;
    count_b.close().await;
    fw_a.close().await;
    fw_b.close().await;
}

/// A count node holding something else than 4 bytes fails the acquire with a typed error,
/// leaving no lease node; once the count is whole again, acquires succeed.
#[tokio::test]
async fn semaphore_sized_by_a_corrupted_count_fails_typed() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string()).await;
    let path = unique_path("sem-bad-count");
    let count_path = format!("{path}-count");
    let count = SharedCount::new(&fw, &count_path, 1).unwrap();
    count.start().unwrap();
    count.ready().await.unwrap();
    let sem = InterProcessSemaphoreV2::with_shared_count(&fw, &path, &count).unwrap();
    fw.set_data().for_path(&count_path, b"bad".to_vec()).await.unwrap();
    let seen = eventually(Timing::new().deadline(), || async { count.count().is_err() });
    assert!(seen.await, "the count never saw the bad data");
    match sem.acquire_timeout(1, Timing::new().deadline()).await {
        Err(CuratorError::BadData { path, .. }) => assert_eq!(path, count_path),
        other => panic!("expected BadData for the count node, got {other:?}"),
    }
    assert!(sem.max_leases().is_err());
    assert!(children(&fw, &format!("{path}/leases")).await.is_empty(), "the failed acquire left its lease node");
    count.set(1).await.unwrap();
    let mut lease =
        sem.acquire_timeout(1, Timing::new().deadline()).await.unwrap().expect("a lease once the count is whole");
    lease.pop().unwrap().release().await.unwrap();
    count.close().await;
    fw.close().await;
}
