//! InterProcessMultiLock against a real ZooKeeper: its mutexes are taken all or none, and
//! released together.

use std::time::Duration;

use curator_core::CuratorError;
use curator_recipes::{InterProcessMultiLock, InterProcessMutex};
use curator_test::{eventually, TestingServer, Timing};
use tests::locks::framework;
use tests::{children, init_tracing, unique_path};

/// A multi-lock takes all its mutexes or none, and releases them.
#[tokio::test]
async fn multi_lock_all_or_none() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let other = framework(&server.connect_string()).await;
    let (a, b) = (unique_path("multi-a"), unique_path("multi-b"));
    let multi = InterProcessMultiLock::new(&fw, &[a.as_str(), b.as_str()]).unwrap();
    let guard = multi.acquire().await.unwrap();
    assert!(multi.is_acquired_in_this_process() && guard.is_held());
    assert_eq!(children(&fw, &a).await.len(), 1);
    assert_eq!(children(&fw, &b).await.len(), 1);
    guard.release().await.unwrap();
    assert!(!multi.is_acquired_in_this_process());

    // b is held elsewhere: the multi-lock gives up and does not keep a.
    let held_b = InterProcessMutex::new(&other, &b).unwrap().acquire().await.unwrap();
    assert!(multi.acquire_timeout(Duration::from_millis(500)).await.unwrap().is_none());
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &a).await.is_empty() }).await,
        "a was released"
    );
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &b).await.len() == 1 }).await,
        "our node under b is gone"
    );
    // Curator's style: the owner (here a task) keeps its counts and gives them back through the
    // handle.
    let waiting = {
        let multi = multi.clone();
        tokio::spawn(async move {
            let guard = multi.acquire().await?;
            assert_eq!(guard.fencing_tokens().len(), 2);
            guard.keep();
            multi.release().await
        })
    };
    held_b.release().await.unwrap();
    tokio::time::timeout(Timing::new().deadline(), waiting).await.unwrap().unwrap().unwrap();
    assert!(children(&fw, &a).await.is_empty() && children(&fw, &b).await.is_empty());
    assert!(matches!(multi.release().await, Err(CuratorError::NotHeld { .. })));
    fw.close().await;
    other.close().await;
}
