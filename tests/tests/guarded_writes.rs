//! Guarded writes (issue 29 item 1): every kind of hold (the mutex's guard, both halves of the
//! read/write lock, a semaphore lease, the semaphore mutex, the queued mutex, a leader latch's
//! and a leader selector's leadership) guards a write that commits while the hold is real and is
//! refused, with a typed error and nothing written, once the hold's session was expired from
//! outside or its node deleted; the hold then reports lost. Under both error policies and both
//! retry policies. Curator has no such feature (CURATOR-689); the expiry follows Curator's
//! `TestInterProcessMutexBase.testKilledSession`. Each test starts a server of its own (it
//! expires sessions).

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy, TransactionResult};
use curator_recipes::{
    HeldNode, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
    LeaderLatch, LeaderSelector, Leadership, LockLost, QueuedMutex,
};
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::policies::{framework, Retry, COMBINATIONS};
use tests::{init_tracing, unique_path};

/// The kinds of hold that can guard a write.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Mutex,
    ReadLock,
    WriteLock,
    Lease,
    SemaphoreMutex,
    Queued,
    Latch,
    Selector,
}

/// A hold of `kind` on `path`, and what keeps it (dropped at the end of the test).
async fn take(kind: Kind, fw: &CuratorFramework, path: &str) -> (HeldNode, Box<dyn std::any::Any + Send>) {
    match kind {
        Kind::Mutex => {
            let guard = InterProcessMutex::new(fw, path).unwrap().acquire().await.unwrap();
            (HeldNode::clone(&guard), Box::new(guard))
        }
        Kind::ReadLock | Kind::WriteLock => {
            let lock = InterProcessReadWriteLock::new(fw, path).unwrap();
            let guard = match kind {
                Kind::ReadLock => lock.read_lock().acquire().await.unwrap(),
                _ => lock.write_lock().acquire().await.unwrap(),
            };
            (HeldNode::clone(&guard), Box::new((lock, guard)))
        }
        Kind::Lease => {
            let semaphore = InterProcessSemaphoreV2::new(fw, path, 2).unwrap();
            let lease = semaphore.acquire().await.unwrap();
            (HeldNode::clone(&lease), Box::new((semaphore, lease)))
        }
        Kind::SemaphoreMutex => {
            let mutex = InterProcessSemaphoreMutex::new(fw, path).unwrap();
            mutex.acquire().await.unwrap();
            (mutex.held().expect("held after acquire"), Box::new(mutex))
        }
        Kind::Queued => {
            let guard = QueuedMutex::new(fw, path).unwrap().acquire().await.unwrap();
            (HeldNode::clone(&guard), Box::new(guard))
        }
        Kind::Latch => {
            let latch = LeaderLatch::builder(fw, path).build().unwrap();
            latch.start().unwrap();
            let leadership = latch.await_leadership().await.unwrap();
            (HeldNode::clone(&leadership), Box::new(latch))
        }
        Kind::Selector => {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Leadership>();
            let selector = LeaderSelector::builder(fw, path, move |leadership: Leadership| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(leadership);
                    std::future::pending::<()>().await;
                }
            })
            .build()
            .unwrap();
            selector.start().unwrap();
            let leadership = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.unwrap().unwrap();
            (HeldNode::clone(&leadership), Box::new(selector))
        }
    }
}

/// The data of `path`, read by `fw`.
async fn read(fw: &CuratorFramework, path: &str) -> Vec<u8> {
    fw.get_data().for_path(path).await.unwrap()
}

/// Whether `err` says that `held` is gone and nothing was written: [`CuratorError::OwnNodeLost`]
/// with the hold's node path.
fn says_hold_gone(err: &CuratorError, held: &HeldNode) -> bool {
    matches!(err, CuratorError::OwnNodeLost { path, .. } if path == held.path())
}

/// The guarded write of `data` to `target` after the hold is gone, tried again while it fails
/// with an error that decides nothing (a lost connection, or an outcome unknown because an
/// attempt's reply was lost); the error it ends with.
async fn refused_write(held: &HeldNode, target: &str, data: &[u8]) -> CuratorError {
    let deadline = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        match held.set_data(target, data.to_vec()).await {
            Ok(stat) => panic!("a guarded write after the hold was gone committed: {stat:?}"),
            Err(err) if err.is_retryable() || matches!(err, CuratorError::OutcomeUnknown { .. }) => {
                assert!(tokio::time::Instant::now() < deadline, "the guarded write never decided: {err}");
                tracing::debug!(error = %err, "guarded write undecided; again");
            }
            Err(err) => return err,
        }
    }
}

/// Takes a hold of `kind`, writes under it, expires its session from outside, and shows the
/// guarded write refused with nothing written, and the hold lost; under every policy. The write
/// is sent at once after the expiry; the framework has always learnt of it by the time the write
/// has a connection (the server closes the old one), so the refusal seen here is the client's
/// (nothing sent). The server's own check is shown by
/// [`refused_by_the_server_once_the_node_is_deleted`].
async fn committed_while_held_refused_after_expiry(kind: Kind) {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let reader = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let base = unique_path("guarded");
        let target = format!("{base}-config");
        reader.create().for_path(&target, b"v0".to_vec()).await.unwrap();
        let (held, keep) = take(kind, &fw, &format!("{base}/hold")).await;

        let stat = held.set_data(&target, b"v1".to_vec()).await.unwrap();
        assert_eq!(read(&reader, &target).await, b"v1", "{kind:?} {policy:?} {retry:?}");
        assert_eq!(stat.version, 1);

        let lost = {
            let held = held.clone();
            tokio::spawn(async move { held.lost().await })
        };
        let info = fw.session().await.unwrap().client().session().clone();
        expire_session(&server.connect_string(), &info).await.unwrap();
        // At once, while the holder may not know yet: the close was applied, so no write of the
        // old session can be, whether the client refuses it or the server does.
        let err = refused_write(&held, &target, b"v2").await;
        assert!(says_hold_gone(&err, &held), "{kind:?} {policy:?} {retry:?}: {err:?}");
        // The server has ended the hold: its node is gone, and nothing was written.
        let node = held.path().to_string();
        assert!(
            eventually(Timing::new().deadline(), || async {
                reader.check_exists().for_path(&node).await.unwrap().is_none()
            })
            .await,
            "{kind:?} {policy:?} {retry:?}: the expired hold's node stayed"
        );
        assert_eq!(read(&reader, &target).await, b"v1", "{kind:?} {policy:?} {retry:?}: written after expiry");
        let reason = tokio::time::timeout(Timing::new().deadline(), lost).await.unwrap().unwrap();
        assert_ne!(reason, LockLost::Released, "{kind:?} {policy:?} {retry:?}");
        assert!(!held.is_held());
        drop(keep);
        fw.close().await;
        reader.close().await;
    }
}

/// Takes a hold of `kind`, deletes its node from outside (the holder is not told: no watch is
/// asked for), and shows the server refuse the guarded write: the check is the server's, not
/// only the client's view. The hold then reports [`LockLost::NodeDeleted`].
async fn refused_by_the_server_once_the_node_is_deleted(kind: Kind) {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let base = unique_path("guarded-deleted");
        let target = format!("{base}-config");
        other.create().for_path(&target, b"v0".to_vec()).await.unwrap();
        let (held, keep) = take(kind, &fw, &format!("{base}/hold")).await;
        held.set_data(&target, b"v1".to_vec()).await.unwrap();

        other.delete().for_path(held.path()).await.unwrap();
        let err = held.set_data(&target, b"v2".to_vec()).await.unwrap_err();
        assert!(says_hold_gone(&err, &held), "{kind:?} {policy:?} {retry:?}: {err:?}");
        assert_eq!(read(&other, &target).await, b"v1", "{kind:?} {policy:?} {retry:?}");
        assert!(!held.is_held(), "{kind:?} {policy:?} {retry:?}: the refusal left the hold held");
        let reason = tokio::time::timeout(Timing::new().deadline(), held.lost()).await.unwrap();
        assert_eq!(reason, LockLost::NodeDeleted, "{kind:?} {policy:?} {retry:?}");
        // Refused from now on without a request.
        let again = held.set_data(&target, b"v3".to_vec()).await.unwrap_err();
        assert!(says_hold_gone(&again, &held), "{again:?}");
        drop(keep);
        fw.close().await;
        other.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_guard_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::Mutex).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::Mutex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lock_guard_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::ReadLock).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::ReadLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_lock_guard_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::WriteLock).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::WriteLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_lease_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::Lease).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::Lease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::SemaphoreMutex).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::SemaphoreMutex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_mutex_guard_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::Queued).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::Queued).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_leadership_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::Latch).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::Latch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_leadership_guards_writes() {
    committed_while_held_refused_after_expiry(Kind::Selector).await;
    refused_by_the_server_once_the_node_is_deleted(Kind::Selector).await;
}

/// After `release()`, a guarded write is refused with [`CuratorError::NotHeld`] and nothing is
/// sent or written, even though the session lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_write_after_release_is_refused() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let base = unique_path("guarded-released");
        let target = format!("{base}-config");
        fw.create().for_path(&target, b"v0".to_vec()).await.unwrap();
        let guard = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap().acquire().await.unwrap();
        let held = HeldNode::clone(&guard);
        held.set_data(&target, b"v1".to_vec()).await.unwrap();
        guard.release().await.unwrap();
        let before = tests::packets_received(&server.connect_string()).await;
        for err in [
            held.set_data(&target, b"v2".to_vec()).await.unwrap_err(),
            held.create(&format!("{target}-new"), b"x".to_vec(), CreateMode::Persistent).await.unwrap_err(),
            held.delete(&target).await.unwrap_err(),
        ] {
            assert!(
                matches!(&err, CuratorError::NotHeld { path, .. } if path == held.path()),
                "{policy:?} {retry:?}: {err:?}"
            );
        }
        // Our three refusals sent nothing (the counter's reading and the framework's liveness
        // probes, one every session timeout / 10, are all the server may have received).
        let after = tests::packets_received(&server.connect_string()).await;
        assert!(after - before <= 3, "{policy:?} {retry:?}: {} packets", after - before);
        assert_eq!(read(&fw, &target).await, b"v1");
        assert!(fw.check_exists().for_path(&format!("{target}-new")).await.unwrap().is_none());
        fw.close().await;
    }
}

/// A guarded transaction of several operations commits all of them while held, with one result
/// per operation added (the guard's check is not among them), and none of them once the hold's
/// node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_transaction_commits_all_or_none() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Session, Retry::Default).await;
    let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("guarded-multi");
    let (a, b, c) = (format!("{base}-a"), format!("{base}-b"), format!("{base}-c"));
    fw.create().for_path(&a, b"a0".to_vec()).await.unwrap();
    fw.create().for_path(&c, b"c0".to_vec()).await.unwrap();
    let guard = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap().acquire().await.unwrap();

    let results = guard
        .transaction()
        .set_data(&a, b"a1".to_vec(), None)
        .create(&b, b"b1".to_vec(), CreateMode::Persistent)
        .delete(&c, None)
        .commit()
        .await
        .unwrap();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(matches!(&results[0], TransactionResult::SetData { path, .. } if *path == a));
    assert!(matches!(&results[1], TransactionResult::Create { path } if *path == b));
    assert!(matches!(&results[2], TransactionResult::Delete { path } if *path == c));
    assert_eq!(read(&other, &a).await, b"a1");
    assert_eq!(read(&other, &b).await, b"b1");

    // A failing operation of the user's keeps its own error and path; nothing else is applied.
    let err = guard.transaction().set_data(&a, b"a2".to_vec(), None).delete(&c, None).commit().await.unwrap_err();
    assert!(matches!(&err, CuratorError::NoNode { path } if *path == c), "{err:?}");
    assert_eq!(read(&other, &a).await, b"a1");
    assert!(guard.is_held(), "a failure of the user's operation is not the hold's");

    other.delete().for_path(guard.path()).await.unwrap();
    let err = guard
        .transaction()
        .set_data(&a, b"a3".to_vec(), None)
        .create(&c, b"c3".to_vec(), CreateMode::Persistent)
        .commit()
        .await
        .unwrap_err();
    assert!(matches!(&err, CuratorError::OwnNodeLost { path, .. } if path == guard.path()), "{err:?}");
    assert_eq!(read(&other, &a).await, b"a1");
    assert!(other.check_exists().for_path(&c).await.unwrap().is_none());
    drop(guard);
    fw.close().await;
    other.close().await;
}

/// Bad input: a hold guards only transactions of its own framework and namespace
/// ([`CuratorError::InvalidArgument`]), and a guarded write of a bad path is
/// [`CuratorError::InvalidPath`]; nothing is sent and the hold stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_write_bad_input() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let stranger = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("guarded-bad");
    let guard = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap().acquire().await.unwrap();
    let held = std::sync::Arc::new(HeldNode::clone(&guard));
    for tx in [
        stranger.transaction().guarded_by(held.clone()),
        fw.using_namespace(Some("elsewhere")).unwrap().transaction().guarded_by(held.clone()),
    ] {
        let err = tx.set_data(&format!("{base}-x"), b"x".to_vec(), None).commit().await.unwrap_err();
        assert!(matches!(&err, CuratorError::InvalidArgument { path, .. } if path == guard.path()), "{err:?}");
    }
    let err = guard.set_data("no-slash", b"x".to_vec()).await.unwrap_err();
    assert!(matches!(err, CuratorError::InvalidPath { .. }), "{err:?}");
    let err = guard.create(&format!("{base}-ttl"), b"x".to_vec(), CreateMode::PersistentWithTtl).await.unwrap_err();
    assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{err:?}");
    assert!(guard.is_held());
    guard.release().await.unwrap();
    fw.close().await;
    stranger.close().await;
}

/// The guarded write's multi is one request, as a plain set_data is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_write_costs_one_request() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let fw = framework(&server.connect_string(), ErrorPolicy::Session, Retry::Default).await;
    let base = unique_path("guarded-cost");
    let target = format!("{base}-config");
    fw.create().for_path(&target, b"v0".to_vec()).await.unwrap();
    let guard = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap().acquire().await.unwrap();
    let writes = 20;
    let before = tests::packets_received(&server.connect_string()).await;
    for i in 0..writes {
        guard.set_data(&target, vec![i]).await.unwrap();
    }
    let after = tests::packets_received(&server.connect_string()).await;
    // One packet per write, plus the counter's reading and at most a few of the framework's
    // liveness probes (one every session timeout / 10).
    let extra = (after - before).saturating_sub(writes as u64);
    assert!(after - before >= writes as u64 && extra <= 5, "{} packets for {writes} guarded writes", after - before);
    guard.release().await.unwrap();
    fw.close().await;
}
