//! InterProcessReadWriteLock against a real ZooKeeper: readers and writers of several
//! sessions mixed for a while (no deadlock, no overlap), the kazoo 2.8 interleaving, writers
//! not starved, downgrade with Curator 5.5's node, upgrade refused, reentrancy, cancel safety.

use std::time::{Duration, Instant};

use curator_core::CuratorError;
use curator_recipes::InterProcessReadWriteLock;
use curator_test::{eventually, expire_session, TestingServer, Timing};
use tests::locks::{framework, Checker};
use tests::policies::COMBINATIONS;
use tests::{children, init_tracing, unique_path};

/// 6 sessions take read (80%) and write locks at random for 200 operations each: nobody
/// deadlocks, writers exclude everyone, readers share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_mixed_do_not_deadlock() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-mixed");
    let checker = Checker::new();
    const CLIENTS: usize = 6;
    const OPS: usize = 200;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let fw = framework(&server.connect_string()).await;
        let (path, checker) = (path.clone(), checker.clone());
        tasks.push(tokio::spawn(async move {
            let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let mut rng = fastrand::Rng::with_seed(c as u64);
            for _ in 0..OPS {
                let work = Duration::from_micros(rng.u64(0..500));
                if rng.u8(0..10) < 8 {
                    let g = rw.read_lock().acquire().await.unwrap();
                    checker.hold_shared(&format!("r{c}"), Some(g.fencing_token()), work).await;
                    g.release().await.unwrap();
                } else {
                    let g = rw.write_lock().acquire().await.unwrap();
                    checker.hold(&format!("w{c}"), Some(g.fencing_token()), work).await;
                    g.release().await.unwrap();
                }
            }
            fw.close().await;
        }));
    }
    let results =
        tokio::time::timeout(Duration::from_secs(90), futures::future::join_all(tasks)).await.expect("no deadlock");
    for r in results {
        r.unwrap();
    }
    checker.verify(CLIENTS * OPS);
}

/// The interleaving kazoo 2.8 deadlocks on: W0 holds, reader R queues, then writer W1 queues
/// after R. When W0 releases, R must hold at once (it must not wait for W1, which waits for
/// R); W1 holds after R releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_never_waits_for_a_writer_queued_after_it() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-kazoo");
    let (f0, f1, f2) = (
        framework(&server.connect_string()).await,
        framework(&server.connect_string()).await,
        framework(&server.connect_string()).await,
    );
    let w0 = InterProcessReadWriteLock::new(&f0, &path).unwrap().write_lock().acquire().await.unwrap();
    let reader = InterProcessReadWriteLock::new(&f1, &path).unwrap();
    let r = tokio::spawn(async move { reader.read_lock().acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&f0, &path).await.len() == 2 }).await);
    let writer = InterProcessReadWriteLock::new(&f2, &path).unwrap();
    let w1 = tokio::spawn(async move { writer.write_lock().acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&f0, &path).await.len() == 3 }).await);

    w0.release().await.unwrap();
    let r = tokio::time::timeout(Timing::new().deadline(), r)
        .await
        .expect("the reader holds (no deadlock)")
        .unwrap()
        .unwrap();
    assert!(!w1.is_finished(), "the later writer waits for the reader");
    let token = r.fencing_token();
    r.release().await.unwrap();
    let w1 = tokio::time::timeout(Timing::new().deadline(), w1).await.expect("the writer follows").unwrap().unwrap();
    assert!(w1.fencing_token() > token);
    w1.release().await.unwrap();
    for f in [f0, f1, f2] {
        f.close().await;
    }
}

/// A reader arriving after a queued writer waits for it: writers are not starved.
#[tokio::test]
async fn writers_are_not_starved_by_later_readers() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-starve");
    let (f0, f1, f2) = (
        framework(&server.connect_string()).await,
        framework(&server.connect_string()).await,
        framework(&server.connect_string()).await,
    );
    let r0 = InterProcessReadWriteLock::new(&f0, &path).unwrap().read_lock().acquire().await.unwrap();
    let writer = InterProcessReadWriteLock::new(&f1, &path).unwrap();
    let w = tokio::spawn(async move { writer.write_lock().acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&f0, &path).await.len() == 2 }).await);
    let late = InterProcessReadWriteLock::new(&f2, &path).unwrap();
    assert!(
        late.read_lock().acquire_timeout(Duration::from_millis(300)).await.unwrap().is_none(),
        "the late reader queues behind the writer"
    );
    r0.release().await.unwrap();
    let w = tokio::time::timeout(Timing::new().deadline(), w).await.unwrap().unwrap().unwrap();
    w.release().await.unwrap();
    let r = late.read_lock().acquire_timeout(Timing::new().deadline()).await.unwrap().expect("then the reader");
    r.release().await.unwrap();
    for f in [f0, f1, f2] {
        f.close().await;
    }
}

/// Write -> read downgrade creates Curator 5.5's ephemeral `..-__READ__<write seq>`; the read
/// lock survives the write's release and excludes other writers but not other readers. Read ->
/// write upgrade fails at once. Covers Curator's TestInterProcessReadWriteLock.testDowngrading
/// and testThatUpgradingIsDisallowed (ours refuses the upgrade at once, Curator's times out).
#[tokio::test]
async fn downgrade_works_and_upgrade_is_refused() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-grade");
    let fw = framework(&server.connect_string()).await;
    let other = framework(&server.connect_string()).await;
    let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let write = rw.write_lock().acquire().await.unwrap();
    let read = rw.read_lock().acquire().await.unwrap();
    let write_name = write.path().rsplit('/').next().unwrap().to_string();
    let read_name = read.path().rsplit('/').next().unwrap().to_string();
    let write_seq = write_name.rsplit("__WRIT__").next().unwrap().to_string();
    assert!(write_name.starts_with("_c_") && write_name.contains("-__WRIT__") && write_seq.len() == 10);
    assert!(read_name.starts_with("_c_") && read_name.ends_with(&format!("-__READ__{write_seq}")), "{read_name}");
    let (_, stat) = fw.get_data().for_path_with_stat(read.path()).await.unwrap();
    assert_ne!(stat.ephemeral_owner, 0, "the read node is ephemeral");
    assert_eq!(rw.read_lock().participant_nodes().await.unwrap(), vec![read.path().to_string()]);
    assert_eq!(rw.write_lock().participant_nodes().await.unwrap(), vec![write.path().to_string()]);

    write.release().await.unwrap();
    let rw2 = InterProcessReadWriteLock::new(&other, &path).unwrap();
    assert!(
        rw2.write_lock().acquire_timeout(Duration::from_millis(300)).await.unwrap().is_none(),
        "the read lock still excludes writers"
    );
    let shared = rw2.read_lock().acquire_timeout(Timing::new().deadline()).await.unwrap().expect("readers share");
    shared.release().await.unwrap();

    // Upgrade: refused at once.
    let started = Instant::now();
    let upgrade = rw.write_lock().acquire().await;
    assert!(matches!(&upgrade, Err(CuratorError::AlreadyHeld { path: p, .. }) if *p == path), "{upgrade:?}");
    assert!(started.elapsed() < tests::at_once(&fw));
    read.release().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    fw.close().await;
    other.close().await;
}

/// A read lock asked for under a write lock whose session expired (the write node went with
/// it) fails at once with `OwnNodeLost` (before: `IllegalState`): the downgrade's read node
/// would continue a hold that is gone. Released, the write lock is taken again on the new
/// session, and the read lock under it. Under every error and retry policy. No Curator
/// counterpart (Curator's downgrade would make its read node on the new session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lock_under_an_expired_write_lock_is_own_node_lost() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let fw = tests::policies::framework(&server.connect_string(), policy, retry).await;
        let path = unique_path("rw-expired-write");
        let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = rw.write_lock().acquire().await.unwrap();
        let old = fw.session().await.unwrap();
        let (generation, info) = (old.generation(), old.client().session().clone());
        drop(old);
        expire_session(&server.connect_string(), &info).await.expect("expire");
        let renewed = eventually(Timing::new().deadline(), || async {
            fw.session().await.map(|s| s.generation() > generation).unwrap_or(false)
        })
        .await;
        assert!(renewed, "{case}: no new session");
        let read = rw.read_lock().acquire().await;
        assert!(matches!(&read, Err(CuratorError::OwnNodeLost { .. })), "{case}: {read:?}");
        write.release().await.unwrap();
        let write = rw.write_lock().acquire().await.unwrap();
        let read = rw.read_lock().acquire().await.unwrap();
        read.release().await.unwrap();
        write.release().await.unwrap();
        assert!(eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() }).await);
        fw.close().await;
    }
}

#[tokio::test]
async fn reentrancy_and_releases() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-reentrant");
    let fw = framework(&server.connect_string()).await;
    let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let r1 = rw.read_lock().acquire().await.unwrap();
    let r2 = rw.read_lock().acquire().await.unwrap();
    assert_eq!(r1.path(), r2.path());
    r1.release().await.unwrap();
    assert!(rw.read_lock().is_acquired_in_this_process());
    r2.release().await.unwrap();
    assert!(!rw.read_lock().is_acquired_in_this_process());
    let w1 = rw.write_lock().acquire().await.unwrap();
    let w2 = rw.write_lock().acquire().await.unwrap();
    assert_eq!(w1.path(), w2.path());
    w2.release().await.unwrap();
    w1.release().await.unwrap();
    assert!(matches!(rw.write_lock().release().await, Err(CuratorError::NotHeld { .. })));
    assert!(matches!(rw.read_lock().release().await, Err(CuratorError::NotHeld { .. })));
    assert!(matches!(InterProcessReadWriteLock::new(&fw, "bad//path"), Err(CuratorError::InvalidPath { .. })));
    fw.close().await;
}

/// Dropped and timed-out read and write acquires leave no nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_rw_acquires_leave_no_orphans() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-cancel");
    let fw = framework(&server.connect_string()).await;
    let holder = InterProcessReadWriteLock::new(&fw, &path).unwrap().write_lock().acquire().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let (fw, path) = (fw.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let wait = Duration::from_micros(fastrand::u64(0..20_000));
            if i % 2 == 0 {
                assert!(rw.read_lock().acquire_timeout(wait).await.unwrap().is_none());
            } else {
                assert!(rw.write_lock().acquire_timeout(wait).await.unwrap().is_none());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &path).await.len() == 1 }).await,
        "{:?}",
        children(&fw, &path).await
    );
    holder.release().await.unwrap();
    fw.close().await;
}

/// A writer queued behind a write lock must not take the lock when that write lock is released
/// after a downgrade: the downgrade's read node has the write node's (lower) sequence number,
/// so "lower nodes never come back" does not hold for writers, which must list again.
/// Covers Curator's TestInterProcessReadWriteLock.testContendingDowngrading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writer_waits_for_a_downgraded_reader() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("rw-downgrade-queued");
    let fw = framework(&server.connect_string()).await;
    let other = framework(&server.connect_string()).await;
    let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let write = rw.write_lock().acquire().await.unwrap();
    let writer = InterProcessReadWriteLock::new(&other, &path).unwrap();
    let mut queued = tokio::spawn(async move { writer.write_lock().acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &path).await.len() == 2 }).await);
    let read = rw.read_lock().acquire().await.unwrap(); // downgrade
    write.release().await.unwrap();
    // The scenario needs a wait: the queued writer must still be waiting after it.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut queued).await.is_err(),
        "the queued writer took the lock while the downgraded read lock was held"
    );
    let token = read.fencing_token();
    read.release().await.unwrap();
    let w = tokio::time::timeout(Timing::new().deadline(), queued).await.expect("then the writer").unwrap().unwrap();
    assert!(w.fencing_token() > token);
    w.release().await.unwrap();
    fw.close().await;
    other.close().await;
}

/// Which half of the read/write lock a revocation test holds.
#[derive(Debug, Clone, Copy)]
enum Half {
    Read,
    Write,
}

/// Revocation of one half (issue 31 item 6b), Curator's `TestInterProcessMutex.testRevoking`
/// applied to each half of `InterProcessReadWriteLock` (Curator's `readLock()` and `writeLock()`
/// are `InterProcessMutex`es, both `makeRevocable`): the revocable holder's node has empty data;
/// a `Revoker` writing `__REVOKE__` into it calls the half's listener with the half, which
/// names the node; the holder releases and a writer on another session takes the lock; no node
/// is left. The other half stays unrevocable: its node keeps the default data and a revoke
/// request calls nobody.
async fn revoking(half: Half) {
    use curator_recipes::{ReadLock, Revoker, WriteLock};

    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let other = framework(&server.connect_string()).await;
    let path = unique_path("rw-revoking");
    let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
    let (asked, mut revoked) = tokio::sync::mpsc::unbounded_channel();
    match half {
        Half::Read => rw.read_lock().make_revocable(move |read: &ReadLock| {
            let _ = asked.send(read.lock_path());
        }),
        Half::Write => rw.write_lock().make_revocable(move |write: &WriteLock| {
            let _ = asked.send(write.lock_path());
        }),
    }
    let guard = match half {
        Half::Read => rw.read_lock().acquire().await.unwrap(),
        Half::Write => rw.write_lock().acquire().await.unwrap(),
    };
    assert!(
        fw.get_data().for_path(guard.path()).await.unwrap().is_empty(),
        "{half:?}: revocable nodes have empty data"
    );
    let contender = InterProcessReadWriteLock::new(&other, &path).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = contender.write_lock().acquire().await?;
        let token = guard.fencing_token();
        guard.release().await?;
        Ok::<_, CuratorError>(token)
    });

    Revoker::attempt_revoke(&other, guard.path()).await.unwrap();
    let named = tokio::time::timeout(Timing::new().deadline(), revoked.recv()).await.expect("listener called").unwrap();
    assert_eq!(named.as_deref(), Some(guard.path()), "{half:?}");
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    let next = tokio::time::timeout(Timing::new().deadline(), waiting).await.unwrap().unwrap().unwrap();
    assert!(next > token, "{half:?}");
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() }).await,
        "{half:?}: nodes left"
    );

    // The other half was not made revocable: default data, and nobody is called.
    let unrevocable = match half {
        Half::Read => rw.write_lock().acquire().await.unwrap(),
        Half::Write => rw.read_lock().acquire().await.unwrap(),
    };
    assert!(!fw.get_data().for_path(unrevocable.path()).await.unwrap().is_empty(), "{half:?}");
    Revoker::attempt_revoke(&other, unrevocable.path()).await.unwrap();
    // A revocable half's listener runs within a few ms; nothing must come for this one. The
    // holder's own revocable half is re-asked as a control, so the wait is an event, not a sleep.
    unrevocable.release().await.unwrap();
    let control = match half {
        Half::Read => rw.read_lock().acquire().await.unwrap(),
        Half::Write => rw.write_lock().acquire().await.unwrap(),
    };
    Revoker::attempt_revoke(&other, control.path()).await.unwrap();
    let named = tokio::time::timeout(Timing::new().deadline(), revoked.recv()).await.expect("control").unwrap();
    assert_eq!(named.as_deref(), Some(control.path()), "{half:?}: a call for the unrevocable half came first");
    control.release().await.unwrap();
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lock_revoking() {
    revoking(Half::Read).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_lock_revoking() {
    revoking(Half::Write).await;
}
