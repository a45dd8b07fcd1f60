//! InterProcessSemaphoreV2 and InterProcessSemaphoreMutex against a real ZooKeeper: the lease
//! bound across sessions, all-or-nothing acquires, Curator's `locks/` + `leases/` layout, and
//! mutual exclusion. (InterProcessMultiLock: `locks_multi.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::CuratorError;
use curator_recipes::locks::{InterProcessSemaphoreMutex, InterProcessSemaphoreV2};
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
    assert!(matches!(mutex.release().await, Err(CuratorError::IllegalState(_))));
    assert!(mutex.acquire_timeout(Timing::new().deadline()).await.unwrap());
    assert!(matches!(mutex.acquire().await, Err(CuratorError::IllegalState(_))), "not reentrant");
    mutex.release().await.unwrap();
    fw.close().await;
}
