//! InterProcessMutex against a real ZooKeeper (one shared server for this binary): mutual
//! exclusion across sessions, Curator's node layout, reentrancy, revocation, the lost signal,
//! 1,000 waiting tasks served in FIFO order, cancel safety, bad input, namespaces, and the
//! checker itself. (QueuedMutex: `locks_queued.rs`; failures: `locks_faults.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CuratorError, CuratorFramework};
use curator_recipes::{InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, LockLost, Revoker};
use curator_test::{eventually, RequestKind, TestingServer, Timing};
use tests::locks::{contenders_ahead, framework, line_watchers, Checker};
use tests::logs::record_events;
use tests::policies::COMBINATIONS;
use tests::{children, init_tracing, unique_path};

fn is_curator_lock_name(name: &str) -> bool {
    // _c_ + 36-char UUID + '-' + "lock-" + 10 digits
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    rest.len() == 36 + 1 + 5 + 10
        && uuid_like(&rest[..36])
        && &rest[36..42] == "-lock-"
        && rest[42..].bytes().all(|b| b.is_ascii_digit())
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit() && !c.is_ascii_uppercase()
            }
        })
}

/// 8 sessions x 200 cycles: no overlap, no lost increment, tokens in acquisition order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_excludes_eight_sessions() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("excl");
    let checker = Checker::new();
    let mut tasks = Vec::new();
    for c in 0..8 {
        let fw = framework(&server.connect_string()).await;
        let (path, checker) = (path.clone(), checker.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            for _ in 0..200 {
                let guard = mutex.acquire().await.unwrap();
                assert!(guard.is_held());
                checker.hold(&format!("client{c}"), Some(guard.fencing_token()), Duration::ZERO).await;
                guard.release().await.unwrap();
            }
            fw.close().await;
        }));
    }
    let all = futures::future::join_all(tasks);
    let results = tokio::time::timeout(Duration::from_secs(120), all).await.expect("8 x 200 cycles finish");
    for r in results {
        r.unwrap();
    }
    checker.verify(1600);
}

/// Node names, modes and data are Curator's; participant_nodes lists the holder first.
#[tokio::test]
async fn node_layout_matches_curator() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("layout");
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let guard = mutex.acquire().await.unwrap();
    let other = InterProcessMutex::new(&fw, &path).unwrap();
    let waiting =
        tokio::spawn(async move { other.acquire_timeout(Duration::from_millis(500)).await.map(|g| g.is_some()) });

    assert!(
        eventually(Timing::new().deadline(), || async { mutex.participant_nodes().await.unwrap().len() == 2 }).await
    );
    let nodes = mutex.participant_nodes().await.unwrap();
    assert_eq!(nodes[0], guard.path());
    for node in &nodes {
        let name = node.rsplit('/').next().unwrap();
        assert!(is_curator_lock_name(name), "{name} is not a Curator lock node name");
    }
    let (data, stat) = fw.get_data().for_path_with_stat(guard.path()).await.unwrap();
    assert_eq!(data, fw.default_data(), "data is the creator's address, as Curator's");
    assert_eq!(stat.ephemeral_owner, fw.session().await.unwrap().id(), "ephemeral, owned by our session");
    assert_eq!(guard.fencing_token(), stat.czxid);
    assert_eq!(guard.node().sequence, name_sequence(guard.path()));
    assert_eq!(mutex.lock_path().as_deref(), Some(guard.path()));
    assert!(!waiting.await.unwrap().unwrap(), "the second handle must time out");
    guard.release().await.unwrap();
    assert!(fw.check_exists().for_path(&nodes[0]).await.unwrap().is_none());
    fw.close().await;
}

fn name_sequence(path: &str) -> i64 {
    path.rsplit("lock-").next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn reentrant_on_the_same_handle() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("reentrant");
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let first = mutex.acquire().await.unwrap();
    let second = mutex.clone().acquire().await.unwrap();
    assert_eq!(first.path(), second.path(), "one node for both counts");
    assert_eq!(first.fencing_token(), second.fencing_token());
    let node = first.path().to_string();
    first.release().await.unwrap();
    assert!(mutex.is_acquired_in_this_process());
    assert!(fw.check_exists().for_path(&node).await.unwrap().is_some(), "one count left: still held");
    // Curator's style: keep the guard's count and release through the handle.
    mutex.acquire().await.unwrap().keep();
    mutex.release().await.unwrap();
    assert!(mutex.is_acquired_in_this_process());
    second.release().await.unwrap();
    assert!(!mutex.is_acquired_in_this_process());
    assert!(fw.check_exists().for_path(&node).await.unwrap().is_none());
    // A release without an acquire is a typed error, not a panic.
    let not_held = mutex.release().await;
    assert!(matches!(&not_held, Err(CuratorError::NotHeld { path: p, .. }) if *p == path), "{not_held:?}");
    // A dropped guard releases in the background.
    let guard = mutex.acquire().await.unwrap();
    let node = guard.path().to_string();
    drop(guard);
    assert!(
        eventually(Timing::new().deadline(), || async { fw.check_exists().for_path(&node).await.unwrap().is_none() })
            .await
    );
    fw.close().await;
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_garbage_is_ignored() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    for bad in ["", "no-slash", "/trailing/", "/a//b", "/a/./b", "/nul\u{0}"] {
        assert!(
            matches!(InterProcessMutex::new(&fw, bad), Err(CuratorError::InvalidPath { .. })),
            "{bad:?} should be refused"
        );
    }
    let path = unique_path("garbage");
    // Garbage under the lock path: other names, and other data.
    for junk in ["junk", "lock-", "lock-abc", "_c_nope-lock-", "zzz-lock-12x", "0"] {
        fw.create()
            .creating_parents_if_needed()
            .for_path(&format!("{path}/{junk}"), b"\xff\x00garbage".to_vec())
            .await
            .unwrap();
    }
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let guard =
        tokio::time::timeout(Timing::new().deadline(), mutex.acquire()).await.expect("not blocked by garbage").unwrap();
    assert_eq!(mutex.participant_nodes().await.unwrap(), vec![guard.path().to_string()], "garbage is not a contender");
    // A second contender waits for us only.
    let other = InterProcessMutex::new(&fw, &path).unwrap();
    let waiter = tokio::spawn(async move { other.acquire().await.map(|g| g.fencing_token()) });
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    let next = tokio::time::timeout(Timing::new().deadline(), waiter).await.unwrap().unwrap().unwrap();
    assert!(next > token);
    // A Revoker on a node that does not exist is fine.
    Revoker::attempt_revoke(&fw, &format!("{path}/missing")).await.unwrap();
    fw.close().await;
}

#[tokio::test]
async fn revocation_reaches_the_holder() {
    init_tracing();
    let server = TestingServer::shared();
    let holder_fw = framework(&server.connect_string()).await;
    let other_fw = framework(&server.connect_string()).await;
    let path = unique_path("revoke");
    let mutex = InterProcessMutex::new(&holder_fw, &path).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    mutex.make_revocable(move |m: &InterProcessMutex| {
        let _ = tx.send(m.lock_path());
    });
    let guard = mutex.acquire().await.unwrap();
    assert!(holder_fw.get_data().for_path(guard.path()).await.unwrap().is_empty(), "revocable nodes have empty data");

    let contender = InterProcessMutex::new(&other_fw, &path).unwrap();
    let waiting = tokio::spawn(async move { contender.acquire().await.map(|g| g.fencing_token()) });
    let nodes = InterProcessMutex::new(&other_fw, &path).unwrap().participant_nodes().await.unwrap();
    Revoker::attempt_revoke(&other_fw, &nodes[0]).await.unwrap();
    let asked = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.expect("listener called").unwrap();
    assert_eq!(asked.as_deref(), Some(guard.path()));
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    let next = tokio::time::timeout(Timing::new().deadline(), waiting).await.unwrap().unwrap().unwrap();
    assert!(next > token);
    holder_fw.close().await;
    other_fw.close().await;
}

#[tokio::test]
async fn lost_fires_when_the_node_is_deleted() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let admin = framework(&server.connect_string()).await;
    let path = unique_path("deleted");
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let guard = mutex.acquire().await.unwrap();
    let mut lost = guard.lost_watch();
    assert!(lost.borrow().is_none());
    assert!(guard.is_held());
    // Wait for the monitor's watch to be set (it is one request), then delete the node.
    assert!(
        eventually(Timing::new().deadline(), || async {
            let out = curator_test::four_letter_word(&server.connect_string(), "wchp").await.unwrap_or_default();
            out.contains(guard.path())
        })
        .await
    );
    admin.delete().for_path(guard.path()).await.unwrap();
    let reason = tokio::time::timeout(Timing::new().deadline(), guard.lost()).await.expect("lost fires");
    assert_eq!(reason, LockLost::NodeDeleted);
    assert!(!guard.is_held());
    lost.changed().await.unwrap();
    // Releasing a lost lock is fine.
    guard.release().await.unwrap();
    fw.close().await;
    admin.close().await;
}

/// A task whose lock node was deleted by someone else (the hold is lost) cannot take the lock
/// again on top of it: the reentrant acquire fails at once with `OwnNodeLost` naming the node
/// (before: `IllegalState`, which no caller could tell from a bug). Released, the lock is
/// acquired afresh on a new node. Under every error and retry policy. No Curator counterpart
/// (Curator's reentrant acquire counts on whatever node it held).
#[tokio::test]
async fn reentering_a_lost_lock_is_own_node_lost() {
    init_tracing();
    let server = TestingServer::shared();
    let admin = framework(&server.connect_string()).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let fw = tests::policies::framework(&server.connect_string(), policy, retry).await;
        let path = unique_path("reenter-lost");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        let node = guard.path().to_string();
        admin.delete().for_path(&node).await.unwrap();
        let reason = tokio::time::timeout(Timing::new().deadline(), guard.lost()).await.expect("lost fires");
        assert_eq!(reason, LockLost::NodeDeleted, "{case}");
        let again = mutex.acquire().await;
        assert!(matches!(&again, Err(CuratorError::OwnNodeLost { path: p, .. }) if *p == node), "{case}: {again:?}");
        assert!(again.as_ref().is_err_and(|e| !e.is_retryable() && !e.is_permanent()), "{case}");
        guard.release().await.unwrap();
        let fresh = mutex.acquire().await.unwrap();
        assert_ne!(fresh.path(), node, "{case}: a new node");
        fresh.release().await.unwrap();
        fw.close().await;
    }
    admin.close().await;
}

/// 1,000 tasks on one framework wait on one lock and get it in the order of their nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_waiting_tasks_in_fifo_order() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("fifo");
    let first = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
    let checker = Checker::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicUsize::new(0));
    const N: usize = 1000;
    let mut tasks = Vec::new();
    for i in 0..N {
        let (fw, path, checker, order, started) =
            (fw.clone(), path.clone(), checker.clone(), order.clone(), started.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            started.fetch_add(1, Ordering::SeqCst);
            let guard = mutex.acquire().await.unwrap();
            order.lock().unwrap().push(guard.node().sequence);
            checker.hold(&format!("task{i}"), Some(guard.fencing_token()), Duration::ZERO).await;
            guard.release().await.unwrap();
        }));
    }
    let probe = InterProcessMutex::new(&fw, &path).unwrap();
    assert!(
        eventually(Duration::from_secs(60), || async {
            probe.participant_nodes().await.map(|n| n.len()).unwrap_or(0) == N + 1
        })
        .await,
        "all 1,000 waiters queued"
    );
    first.release().await.unwrap();
    let results =
        tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks)).await.expect("all acquire");
    for r in results {
        r.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), N);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "holds follow node order (FIFO)");
    checker.verify(N);
    assert!(probe.participant_nodes().await.unwrap().is_empty());
    fw.close().await;
}

/// Dropped acquire futures (at random points) and timeouts leave no node, and the waiter
/// queued behind them still gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_and_timed_out_acquires_leave_no_orphans() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let other = framework(&server.connect_string()).await;
    let path = unique_path("cancel");
    let holder = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..60u64 {
        let (fw, path) = (if i % 2 == 0 { fw.clone() } else { other.clone() }, path.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            let wait = Duration::from_micros(fastrand::u64(0..20_000));
            if i % 3 == 0 {
                assert!(mutex.acquire_timeout(wait).await.unwrap().is_none());
            } else {
                // Dropped wherever it happens to be: before the create, before its reply,
                // while watching.
                tokio::select! {
                    _ = mutex.acquire() => panic!("the lock is held elsewhere"),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // A real waiter behind all of that.
    let waiter_mutex = InterProcessMutex::new(&other, &path).unwrap();
    let waiter = tokio::spawn(async move { waiter_mutex.acquire().await.map(|g| (g.fencing_token(), g)) });
    let probe = InterProcessMutex::new(&fw, &path).unwrap();
    assert!(
        eventually(Timing::new().deadline(), || async { probe.participant_nodes().await.unwrap().len() == 2 }).await,
        "only the holder and the live waiter remain: {:?}",
        probe.participant_nodes().await
    );
    let token = holder.fencing_token();
    holder.release().await.unwrap();
    let (next, guard) =
        tokio::time::timeout(Timing::new().deadline(), waiter).await.expect("next waiter proceeds").unwrap().unwrap();
    assert!(next > token);
    guard.release().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    fw.close().await;
    other.close().await;
}

/// A lock path whose parents do not exist gets them (container parents, as Curator's).
#[tokio::test]
async fn missing_parents_are_created() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string()).await;
    let path = format!("{}/deep/er", unique_path("containers"));
    let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
    let stat = fw.check_exists().for_path(&path).await.unwrap().expect("parent created");
    assert_eq!(stat.ephemeral_owner, 0, "the parent is not ephemeral");
    guard.release().await.unwrap();
    fw.close().await;
}

/// A lock creates its missing parents as containers, which the server deletes once they are
/// empty (issue 26 item 11; Curator: TestInterProcessMutexBase.testContainerCleanup): data a
/// user stored on such a lock path goes with it after the lock is freed, while a node the user
/// created before the lock keeps its data. Tried with the mutex, the read-write lock and the
/// semaphore, on a server that checks containers every 100 ms (60 s by default).
#[tokio::test]
async fn a_lock_path_it_created_is_a_container_and_takes_its_data_along() {
    init_tracing();
    let server = TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let base = unique_path("lock-containers");
    let kept = format!("{base}/kept");
    fw.create().creating_parents_if_needed().for_path(&kept, b"user data".to_vec()).await.unwrap();
    let mutex = InterProcessMutex::new(&fw, &kept).unwrap();
    mutex.acquire().await.unwrap().release().await.unwrap();

    let (made, rw_made, semaphore_made) = (format!("{base}/made"), format!("{base}/rw"), format!("{base}/semaphore"));
    let guard = InterProcessMutex::new(&fw, &made).unwrap().acquire().await.unwrap();
    fw.set_data().for_path(&made, b"lost with the lock".to_vec()).await.unwrap();
    guard.release().await.unwrap();
    let rw = InterProcessReadWriteLock::new(&fw, &rw_made).unwrap();
    rw.write_lock().acquire().await.unwrap().release().await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&fw, &semaphore_made, 1).unwrap();
    semaphore.acquire().await.unwrap().release().await.unwrap();

    for reaped in [&made, &rw_made, &semaphore_made] {
        let gone = eventually(Timing::new().deadline(), || async {
            fw.check_exists().for_path(reaped).await.unwrap().is_none()
        })
        .await;
        assert!(gone, "{reaped}, created by the lock, is a container: reaped once empty");
    }
    let data = fw.get_data().for_path(&kept).await.expect("the user's node stays");
    assert_eq!(data, b"user data");
    fw.close().await;
}

/// An acquire the server refuses with `NoAuth` (no CREATE, no READ on the lock path) fails
/// with that typed error and logs no error of its own (issue 26 item 13): the refused create
/// made no node, so there is nothing to clean up. Before, the acquire's cleanup went looking
/// for an abandoned node, was refused too, and logged ERROR "could not delete an abandoned
/// recipe node". Tried with both error policies and both retry policies.
#[tokio::test]
async fn a_refused_acquire_has_nothing_to_clean_up() {
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let (events, _recording) = record_events();
        let fw = tests::policies::framework(&server.connect_string(), policy, retry).await;
        let path = unique_path("refused-lock");
        let admin_only = vec![Acl::new(Permission::ADMIN, AuthId::anyone())];
        fw.create().with_acl(admin_only).for_path(&path, vec![]).await.unwrap();
        let refused = InterProcessMutex::new(&fw, &path).unwrap().acquire().await;
        assert!(matches!(refused, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {refused:?}");
        // close() waits for the background cleanups, so whatever they log is logged by now.
        fw.close().await;
        let errors = events.at(tracing::Level::ERROR, "curator");
        assert!(errors.is_empty(), "{policy:?}/{retry:?}: {errors:?}");
        let other = framework(&server.connect_string()).await;
        other.delete().for_path(&path).await.unwrap();
        other.close().await;
    }
}

/// The checker itself: holds that overlap (no lock at all) are caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_catches_overlapping_holds() {
    let checker = Checker::new();
    let (a, b) = (checker.clone(), checker.clone());
    let ta = tokio::spawn(async move { a.hold("a", Some(2), Duration::from_millis(50)).await });
    let tb = tokio::spawn(async move { b.hold("b", Some(1), Duration::from_millis(50)).await });
    ta.await.unwrap();
    tb.await.unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| checker.verify(2)));
    assert!(caught.is_err(), "overlapping holds must fail verification");
}

/// Under a namespace the nodes live below it, and acquire, release and cleanup stay inside it.
/// Covers Curator's TestInterProcessMutexBase.testWithNamespace (a timed acquire and a release
/// under a namespace).
#[tokio::test]
async fn works_under_a_namespace() {
    init_tracing();
    let server = TestingServer::shared();
    let root = framework(&server.connect_string()).await;
    let ns = unique_path("ns").trim_start_matches('/').replace('/', "-");
    let fw = root.using_namespace(Some(&ns)).unwrap();
    let mutex = InterProcessMutex::new(&fw, "/lock").unwrap();
    let guard = mutex.acquire().await.unwrap();
    let under_root = root.get_children().for_path(&format!("/{ns}/lock")).await.unwrap();
    assert_eq!(under_root.len(), 1);
    assert_eq!(format!("/lock/{}", under_root[0]), guard.path());
    let again = mutex.acquire_timeout(Duration::from_millis(100)).await.unwrap().expect("reentrant");
    assert_eq!(again.path(), guard.path());
    drop(again); // gives its count back at once; the node stays (one count left)
    assert!(mutex.is_acquired_in_this_process());
    let other = InterProcessMutex::new(&fw, "/lock").unwrap();
    assert!(other.acquire_timeout(Duration::from_millis(200)).await.unwrap().is_none());
    guard.release().await.unwrap();
    assert!(
        eventually(Timing::new().deadline(), || async {
            root.get_children().for_path(&format!("/{ns}/lock")).await.map(|c| c.is_empty()).unwrap_or(true)
        })
        .await
    );
    root.close().await;
}

/// A guard bound to `_` is dropped at once, and the lock goes with it (as `let _ =
/// std_mutex.lock()`): the rustdoc and the `#[must_use]` message say to bind it to a name. This
/// shows the behaviour they warn about: another session takes the lock while the first task
/// still thinks it is inside its critical section.
#[tokio::test]
async fn guard_bound_to_underscore_releases_at_once() {
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let (fw, other_fw) = (framework(&connect).await, framework(&connect).await);
    let path = unique_path("underscore");
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    #[allow(clippy::let_underscore_must_use)]
    let _ = mutex.acquire().await.unwrap();
    let other = InterProcessMutex::new(&other_fw, &path).unwrap();
    let guard = tokio::time::timeout(Timing::new().deadline(), other.acquire())
        .await
        .expect("the dropped guard released the lock")
        .unwrap();
    let kept = mutex.acquire_timeout(Duration::ZERO).await.unwrap();
    assert!(kept.is_none(), "the lock is the other session's now");
    guard.release().await.unwrap();
    fw.close().await;
    other_fw.close().await;
}

/// The three ways `InterProcessMutex::acquire`'s rustdoc, the README and the mutex example
/// show (issue 26 item 10): a bound guard holds until its `release()`; Curator's
/// `acquire(); try { .. } finally { release(); }` written as `acquire().await?.keep()` and the
/// handle's `release()` holds until that release; and the literal translation, the statement
/// `mutex.acquire().await?;`, holds nothing (the guard is dropped at once; rustc's
/// `unused_must_use` note on the guard type says to bind it). Held means: another session's
/// try-lock is refused.
#[tokio::test]
async fn bound_and_kept_guards_hold_and_a_bare_acquire_does_not() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let (fw, other_fw) = (framework(&connect).await, framework(&connect).await);
    let path = unique_path("bound-guard");
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let other = InterProcessMutex::new(&other_fw, &path).unwrap();
    let refused = || async { other.acquire_timeout(Duration::ZERO).await.unwrap().is_none() };
    // The other session's refused attempt deletes its own node, in the background: polled.
    let none_left = || eventually(Timing::new().deadline(), || async { children(&fw, &path).await.is_empty() });

    let guard = mutex.acquire().await.unwrap();
    assert!(refused().await, "a bound guard holds");
    guard.release().await.unwrap();
    assert!(none_left().await, "release() deleted the node");

    mutex.acquire().await.unwrap().keep();
    assert!(refused().await, "a kept guard's count holds until the handle's release()");
    assert!(mutex.is_acquired_in_this_process());
    mutex.release().await.unwrap();
    assert!(!mutex.is_acquired_in_this_process());
    assert!(none_left().await, "the handle's release() deleted the node");

    #[allow(unused_must_use)]
    {
        mutex.acquire().await.unwrap();
    }
    let taken = tokio::time::timeout(Timing::new().deadline(), other.acquire())
        .await
        .expect("a bare acquire holds nothing: the other session gets the lock")
        .unwrap();
    assert!(!mutex.is_acquired_in_this_process());
    taken.release().await.unwrap();
    fw.close().await;
    other_fw.close().await;
}

/// Total watches the server holds (`wchs`: "... Total watches:N").
async fn server_watches(connect_string: &str) -> u64 {
    let wchs = curator_test::four_letter_word(connect_string, "wchs").await.expect("wchs");
    wchs.rsplit(':').next().and_then(|n| n.trim().parse().ok()).expect("Total watches in wchs")
}

/// Requests the server received for `release`, plus one read on `fw` after it so that
/// everything the release sent has reached the server (the `mntr` readings counted out).
async fn requests_for(
    server: &TestingServer,
    fw: &curator_core::CuratorFramework,
    release: impl std::future::Future,
) -> u64 {
    let before = tests::packets_received(&server.connect_string()).await;
    release.await;
    fw.check_exists().for_path("/").await.expect("a read after the release");
    let after = tests::packets_received(&server.connect_string()).await;
    // One `mntr` reading is counted between the two, and the read after the release.
    after - before - 2
}

/// A release costs one request, the delete, whether the holder's monitor watches its node
/// (`lost()` was used) or the acquire left a watch on it (a grant after a wait confirms itself
/// with one): the deletion fires those watches. Before, they were dropped unfired, and
/// zookeeper-client sends a RemoveWatches request for such a watch: 2 or 3 requests per release
/// (found measuring leader handoffs, issue 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_costs_one_request() {
    init_tracing();
    let server = TestingServer::start().await.expect("server");
    let (fw1, fw2) = (framework(&server.connect_string()).await, framework(&server.connect_string()).await);
    let path = unique_path("release-requests");
    let (m1, m2) = (InterProcessMutex::new(&fw1, &path).unwrap(), InterProcessMutex::new(&fw2, &path).unwrap());

    // A holder whose monitor watches its node.
    let guard = m1.acquire().await.unwrap();
    let _lost = guard.lost_watch();
    let armed =
        eventually(Timing::new().deadline(), || async { server_watches(&server.connect_string()).await >= 1 }).await;
    assert!(armed, "the monitor never watched the node");
    assert_eq!(requests_for(&server, &fw1, guard.release()).await, 1, "a monitored hold's release");

    // A holder granted after a wait, which armed a watch on its own node.
    let first = m1.acquire().await.unwrap();
    let waiting = tokio::spawn(async move { m2.acquire().await.map(|g| (m2, g)) });
    let queued = eventually(Timing::new().deadline(), || async { children(&fw1, &path).await.len() == 2 }).await;
    assert!(queued, "the waiter never queued");
    // Its watches (getData on the holder's node, exists on its own) are set once both are listed.
    let watching =
        eventually(Timing::new().deadline(), || async { server_watches(&server.connect_string()).await >= 2 }).await;
    assert!(watching, "the waiter never watched");
    first.release().await.unwrap();
    let (_m2, second) = waiting.await.unwrap().unwrap();
    assert_eq!(requests_for(&server, &fw2, second.release()).await, 1, "a release after a granted wait");
    fw1.close().await;
    fw2.close().await;
}

/// A release lets the waiter it woke on the same session send its request first (ours;
/// docs/architecture.md section 8.3, "A release yields once"). Three lock objects on one
/// framework: `a` holds, `x` waits next in line, `b` behind `x` (it lists again when `x`'s node
/// goes). `x` takes the lock, releases it and at once acquires again. `x`'s delete reply and the
/// notification that wakes `b` arrive together; tokio (on one worker here, where nothing runs in
/// parallel) runs the task woken last first, so without the release's yield `x`'s create went out
/// ahead of `b`'s listing (in 7 or 8 of 8 rounds, in each of 8 runs), which a server answers only
/// after that create is written. A yield is tokio's preference, not a promise (`yield_now`: the runtime may poll the
/// task again first): with it, `b` went first in all 20 runs alone and in 19 of 20 runs of this
/// whole binary (each one round), so the test asks for most of 8 rounds. The proxy records the
/// session's requests in the order they were sent (and shows when `b` watches).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_release_lets_the_waiter_it_woke_send_first() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = curator_test::ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string()).await;
    const ROUNDS: usize = 8;
    let mut late = Vec::new();
    for _ in 0..ROUNDS {
        if let Err(order) = release_order_round(&proxy, &fw).await {
            late.push(order);
        }
    }
    assert!(
        late.len() < ROUNDS / 2,
        "b's listing went out after x's next create in {} of {ROUNDS} rounds: {late:?}",
        late.len()
    );
    fw.close().await;
}

/// One round of [`a_release_lets_the_waiter_it_woke_send_first`] on a fresh path: `Ok` if `b`'s
/// listing went out before `x`'s next create, else the requests sent after `a`'s release.
async fn release_order_round(proxy: &curator_test::ChaosProxy, fw: &CuratorFramework) -> Result<(), Vec<String>> {
    let path = unique_path("release-order");
    let mutex = || InterProcessMutex::new(fw, &path).unwrap();
    let (a, x, b) = (mutex(), mutex(), mutex());
    let held = a.acquire().await.unwrap();
    let relay = tokio::spawn(async move {
        let first = x.acquire().await?;
        first.release().await?;
        let again = x.acquire().await?;
        again.release().await
    });
    assert!(eventually(Timing::new().deadline(), || async { children(fw, &path).await.len() == 2 }).await);
    proxy.record_requests(true);
    let behind = tokio::spawn(async move {
        let guard = b.acquire().await?;
        guard.release().await
    });
    // b waits once its getData+watch on x's node (the path's second, sequence 1) has gone out:
    // released before that, its getData would find x's node gone and it would list without a
    // notification, in a race with x's next create.
    let x_watched = || async {
        proxy
            .take_seen_requests()
            .iter()
            .any(|r| r.is(RequestKind::GetData) && r.path.as_deref().is_some_and(|p| p.ends_with("-lock-0000000001")))
    };
    assert!(eventually(Timing::new().deadline(), x_watched).await, "b never watched x's node");
    proxy.take_seen_requests();
    held.release().await.unwrap();
    tokio::time::timeout(Timing::new().deadline(), behind).await.expect("b holds").unwrap().unwrap();
    tokio::time::timeout(Timing::new().deadline(), relay).await.expect("x holds again").unwrap().unwrap();
    proxy.record_requests(false);
    let seen = proxy.take_seen_requests();
    let kinds: Vec<String> = seen.iter().map(|r| format!("{} {}", r.opcode, r.path.as_deref().unwrap_or(""))).collect();
    // The deletes in order: a's node, x's first node, ...
    let deletes: Vec<usize> = (0..seen.len()).filter(|&i| seen[i].is(RequestKind::Delete)).collect();
    assert!(deletes.len() >= 2, "two releases: {kinds:?}");
    let after = &seen[deletes[1] + 1..];
    let listing = after.iter().position(|r| r.is(RequestKind::GetChildren));
    let create = after.iter().position(|r| r.is(RequestKind::Create));
    assert!(listing.is_some() && create.is_some(), "b lists and x creates after x's release: {kinds:?}");
    if listing < create {
        Ok(())
    } else {
        Err(kinds)
    }
}

/// Requests the server received on the connections of `sessions`, from `cons` (pings and the
/// framework's session probes included: the sessions here have a 10-minute timeout, so that
/// these come once a minute, not within a test this short).
async fn session_requests(connect_string: &str, sessions: &[i64]) -> u64 {
    let cons = curator_test::four_letter_word(connect_string, "cons").await.expect("cons");
    let sids: Vec<String> = sessions.iter().map(|id| format!("sid=0x{id:x},")).collect();
    cons.lines()
        .filter(|line| sids.iter().any(|sid| line.contains(sid.as_str())))
        .map(|line| {
            let recved = line.split("recved=").nth(1).and_then(|rest| rest.split(',').next());
            recved.and_then(|n| n.parse::<u64>().ok()).expect("recved in cons")
        })
        .sum()
}

/// What the request-counting tests below share: a server of their own whose sessions may live
/// 10 minutes, `fws` on sessions with that timeout (the framework probes its session every tenth
/// of it, so no probe falls within a count) and their ids, an observer, and a fresh lock `path`
/// (made by the observer). `_server` keeps the server up.
struct Counted {
    _server: TestingServer,
    connect: String,
    fws: Vec<CuratorFramework>,
    sessions: Vec<i64>,
    observer: CuratorFramework,
    path: String,
}

/// [`Counted`] with `n` frameworks, the path named after `name`.
async fn counted(name: &str, n: usize) -> Counted {
    let long = Duration::from_secs(600);
    let server = TestingServer::builder().max_session_timeout(long).start().await.expect("server");
    let connect = server.connect_string();
    let mut fws = Vec::new();
    let mut sessions = Vec::new();
    for _ in 0..n {
        let fw = tests::locks::framework_with(&connect, curator_core::ErrorPolicy::Standard, long).await;
        sessions.push(fw.session().await.expect("session").id());
        fws.push(fw);
    }
    let observer = framework(&connect).await;
    let path = unique_path(name);
    observer.create().creating_parents_if_needed().for_path(&path, Vec::new()).await.unwrap();
    Counted { _server: server, connect, fws, sessions, observer, path }
}

/// A wait over the line's limit (more than 16 nodes ahead) is today's and costs what Curator's
/// does: 5 requests (issue 30): create + getChildren, getData+watch on the predecessor,
/// getChildren when it goes, and the delete. 33 nodes stand ahead of the waiter (made by an
/// observer, deleted in order); only the waiter's session is counted. (A waiter with 16 or fewer
/// nodes ahead waits on the line once its group's watch is on: the test below. Curator's
/// `TestInterProcessMutexBase` has no request count; the scenario is its contended mutex,
/// counted on the server.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_cycle_over_the_line_limit_costs_five_requests() {
    init_tracing();
    let Counted { _server, connect, fws, sessions, observer, path } = counted("contended-requests", 1).await;
    let mutex = InterProcessMutex::new(&fws[0], &path).unwrap();
    // A session's first probe goes out as the framework starts following it: an uncontended
    // cycle lets it arrive before the count starts.
    mutex.acquire().await.unwrap().release().await.unwrap();
    let ahead = contenders_ahead(&observer, &path, 33).await;
    let before = session_requests(&connect, &sessions).await;
    let waiting = tokio::spawn({
        let mutex = mutex.clone();
        async move { mutex.acquire().await?.release().await }
    });
    let queued = eventually(Timing::new().deadline(), || async { children(&observer, &path).await.len() == 34 }).await;
    assert!(queued, "the waiter never queued");
    let watching = eventually(Timing::new().deadline(), || async { server_watches(&connect).await >= 1 }).await;
    assert!(watching, "the waiter never watched");
    for node in &ahead {
        observer.delete().for_path(node).await.unwrap();
    }
    waiting.await.unwrap().unwrap();
    let requests = session_requests(&connect, &sessions).await - before;
    assert_eq!(requests, 5, "requests for a contended cycle over the line's limit");
    assert!(!line_watched(&connect, &path).await, "no line watch for a wait over the limit");
    fws[0].close().await;
    observer.close().await;
}

/// Whether some session holds a watch on exactly `path` (`wchp` lists persistent watches too):
/// the line's.
async fn line_watched(connect: &str, path: &str) -> bool {
    !line_watchers(connect, path).await.is_empty()
}

/// A contended cycle on the line costs 3 requests: create + getChildren, and the delete. One
/// mutex object per session (the line is its group's): contended rounds start each waiter's
/// watch (their waits are today's; a group's second starts it); once the server shows the
/// watches, a holder and three waiters that join one after another cost 4 x 3 = 12, against 18
/// with today's waits (the tests around, and docs/architecture.md section 8.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_cycle_on_the_line_costs_three_requests() {
    init_tracing();
    let Counted { _server, connect, fws, sessions, observer, path } = counted("line-requests", 4).await;
    let mutexes: Vec<InterProcessMutex> = fws.iter().map(|fw| InterProcessMutex::new(fw, &path).unwrap()).collect();
    // Rounds until the waiters' watches are on (a group's second wait starts its watch; a
    // waiter whose listing reaches a loaded server after the holder's delete holds without a
    // wait, so a round may not count), then one counted round.
    let mut on = false;
    for round in 0..8 {
        contended_round(&mutexes, &observer, &path).await;
        let watching = || async { line_watchers(&connect, &path).await.len() == 3 };
        if round > 0 && eventually(Duration::from_secs(2), watching).await {
            on = true;
            break;
        }
    }
    assert!(on, "the waiters' line watches never came on");
    let before = session_requests(&connect, &sessions).await;
    contended_round(&mutexes, &observer, &path).await;
    let requests = session_requests(&connect, &sessions).await - before;
    assert_eq!(requests, 12, "requests for 4 contended cycles (3 waits on the line)");
    for fw in fws {
        fw.close().await;
    }
    observer.close().await;
}

/// One contended round: `mutexes[0]` holds while the others queue behind it one after another,
/// then each acquires and releases in turn.
async fn contended_round(mutexes: &[InterProcessMutex], observer: &CuratorFramework, path: &str) {
    let holder = mutexes[0].acquire().await.unwrap();
    let mut waiters = Vec::new();
    for (i, mutex) in mutexes.iter().enumerate().skip(1) {
        let mutex = mutex.clone();
        waiters.push(tokio::spawn(async move { mutex.acquire().await?.release().await }));
        let queued =
            eventually(Timing::new().deadline(), || async { children(observer, path).await.len() == i + 1 }).await;
        assert!(queued, "waiter {i} never queued");
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
}

/// A new mutex object per acquire (common) never pays for a line it will not use: a group
/// starts its watch only on its second wait, so these contended cycles cost what Curator's do,
/// 5 requests (issue 30), with no addWatch and no RemoveWatches. Each round, a holder and three
/// waiters that join one after another, each on a new object: the next in line watches the
/// holder and its own node (2; it holds on the deletion without listing again), each one
/// further back watches its predecessor (1) and lists again when it goes (1); with create +
/// getChildren and the delete, 3 + 5 + 5 + 5 = 18 a round. No session ever watches the lock's
/// path. (Curator's `TestInterProcessMutexBase` has no request count; the scenario is its
/// contended mutex, counted on the server.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_cycle_with_a_new_object_each_costs_five_requests() {
    init_tracing();
    let Counted { _server, connect, fws, sessions, observer, path } = counted("per-use-requests", 4).await;
    // A session's first probe goes out as the framework starts following it: an uncontended
    // cycle on each lets it arrive before the count starts.
    for fw in &fws {
        InterProcessMutex::new(fw, &path).unwrap().acquire().await.unwrap().release().await.unwrap();
    }
    for round in 0..3 {
        let before = session_requests(&connect, &sessions).await;
        let holder = InterProcessMutex::new(&fws[0], &path).unwrap().acquire().await.unwrap();
        let mut waiters = Vec::new();
        for (i, fw) in fws.iter().enumerate().skip(1) {
            let mutex = InterProcessMutex::new(fw, &path).unwrap();
            waiters.push(tokio::spawn(async move { mutex.acquire().await?.release().await }));
            let queued =
                eventually(Timing::new().deadline(), || async { children(&observer, &path).await.len() == i + 1 })
                    .await;
            assert!(queued, "round {round}: waiter {i} never queued");
        }
        // The next in line watches two nodes, the others one each.
        let watching = eventually(Timing::new().deadline(), || async { server_watches(&connect).await >= 4 }).await;
        assert!(watching, "round {round}: the waiters never watched");
        assert!(!line_watched(&connect, &path).await, "round {round}: a line watch for a per-use object");
        holder.release().await.unwrap();
        for waiter in waiters {
            waiter.await.unwrap().unwrap();
        }
        let requests = session_requests(&connect, &sessions).await - before;
        assert_eq!(requests, 18, "round {round}: requests for 4 contended cycles (3 waits), new objects");
    }
    assert!(!line_watched(&connect, &path).await, "a line watch for a per-use object");
    for fw in fws {
        fw.close().await;
    }
    observer.close().await;
}
