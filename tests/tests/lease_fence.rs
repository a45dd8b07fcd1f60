//! Issue 40 item 4: a timed lease's fence. A grant's guarded writes, renewals and release must
//! never commit under a later grant, whatever happened to the lease node in between: taken over
//! and released (deleted) by another holder, or deleted by an operator, and then made again by
//! a third (docs/architecture.md section 20). Before, every one of them was fenced by the lease
//! node's version, which a node made again has again (0), and a write of an earlier grant held
//! up in the network committed under the new one.
//!
//! A request "in flight" is the holder's request read by curator-test's `ChaosProxy` and held
//! there (`pause_requests`) while the others act, then delivered: what a slow network does.
//! Under every error and retry policy. Time bounds are multiples of the lease duration the
//! test sets, or the test deadline; nothing sleeps to synchronise.

use std::future::{Future, IntoFuture};
use std::time::Duration;

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{LeaseGrant, TimedLease};
use curator_test::{eventually, ChaosProxy, RequestKind, TestingServer, Timing};
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::{init_tracing, unique_path};
use tokio::time::Instant;

/// The lease the holder takes: short, so that a contender takes it over soon.
const SHORT: Duration = Duration::from_millis(300);
/// The later holder's lease: long enough to outlast each test.
const LONG: Duration = Duration::from_secs(60);

/// The holder's framework, through `proxy`, with a session long enough (40 leases) that holding
/// its requests for a takeover does not end its connection.
async fn holder_framework(proxy: &ChaosProxy, policy: ErrorPolicy, retry: Retry) -> CuratorFramework {
    framework_with(&proxy.connect_string(), policy, retry, SHORT * 40).await
}

fn lease(fw: &CuratorFramework, path: &str, duration: Duration, holder: &str) -> TimedLease {
    TimedLease::new(fw, path, duration, holder).expect("lease")
}

/// Polls `attempt` until it grants, within the test deadline.
async fn poll_grant<F, Fut>(what: &str, attempt: F) -> LeaseGrant
where
    F: Fn() -> Fut,
    Fut: Future<Output = curator_core::Result<Option<LeaseGrant>>>,
{
    let deadline = Instant::now() + Timing::new().deadline();
    loop {
        if let Some(grant) = attempt().await.expect("try_acquire") {
            return grant;
        }
        assert!(Instant::now() < deadline, "{what}: no grant within the deadline");
        tokio::time::sleep(SHORT / 30).await;
    }
}

/// Runs `write` (through `proxy`) with its request held in the proxy: once the request has left
/// the client (the proxy read it), `meanwhile` runs; then the request reaches the server.
async fn in_flight<T>(
    proxy: &ChaosProxy,
    write: impl IntoFuture<Output = T>,
    meanwhile: impl Future<Output = ()>,
) -> T {
    proxy.record_requests(true);
    proxy.take_seen_requests();
    proxy.pause_requests();
    let (result, ()) = tokio::join!(write.into_future(), async {
        let left = eventually(Timing::new().deadline(), || async { !proxy.take_seen_requests().is_empty() }).await;
        assert!(left, "the write never left the client");
        meanwhile.await;
        proxy.pass();
    });
    proxy.record_requests(false);
    result
}

/// What the lease node holds now: its record's holder line, or `None` when it is missing.
async fn holder_of(fw: &CuratorFramework, path: &str) -> Option<String> {
    match fw.get_data().for_path(path).await {
        Ok(data) => String::from_utf8_lossy(&data).lines().find_map(|l| l.strip_prefix("holder=").map(str::to_string)),
        Err(CuratorError::NoNode { .. }) => None,
        Err(e) => panic!("read {path}: {e}"),
    }
}

/// The lease was taken over by `b` (after `a`'s grant ran out) and released, then granted to
/// `c` (a create, as the first grant was): the defect's sequence.
async fn take_over_release_and_regrant(observer: &CuratorFramework, path: &str, b: &TimedLease) -> LeaseGrant {
    let taken = poll_grant("b takes the lease over", || b.try_acquire()).await;
    taken.release().await.expect("b releases");
    let c = lease(observer, path, LONG, "c");
    c.try_acquire().await.expect("try").expect("c: the lease was released")
}

/// (a) A guarded write of a grant, in flight while the lease is taken over, released and
/// granted again (made again by a create), is refused: nothing it wrote is on the server, and
/// the later grant stands. Before, its `check(lease, 0)` passed on the node made again and the
/// write committed under the later grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_write_in_flight_across_a_release_and_regrant_is_refused() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let (path, target) = (unique_path("fence-regrant"), unique_path("fence-regrant-target"));
        let grant = lease(&fw, &path, SHORT, "a").try_acquire().await.expect("try").expect("a");
        // b's wait for the takeover starts with this read.
        let b = lease(&observer, &path, SHORT, "b");
        assert!(b.try_acquire().await.expect("try").is_none(), "{case}");
        let stale = grant.transaction().expect("held").create(&target, b"stale".to_vec(), CreateMode::Persistent);
        let mut later = None;
        let committed = in_flight(&proxy, stale.commit(), async {
            later = Some(take_over_release_and_regrant(&observer, &path, &b).await);
        })
        .await;
        let later = later.expect("c's grant");
        assert!(committed.is_err(), "{case}: a write of an earlier grant committed under a later one");
        assert!(observer.check_exists().for_path(&target).await.expect("exists").is_none(), "{case}: written");
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}");
        later
            .transaction()
            .expect("held")
            .create(&target, b"c".to_vec(), CreateMode::Persistent)
            .commit()
            .await
            .expect("c writes");
        later.renew().await.expect("c renews");
        fw.close().await;
    }
    observer.close().await;
}

/// (b) The same across an operator's delete of the whole lease (children first, as
/// `deleteall`), then another's grant: the earlier grant's write is refused, and so are its
/// renewal (it lost the lease) and its release (a no-op that leaves the later grant alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_write_in_flight_across_an_operator_delete_is_refused() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let (path, target) = (unique_path("fence-operator"), unique_path("fence-operator-target"));
        let grant = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("a");
        let stale = grant.transaction().expect("held").set_data(&path, b"overwritten".to_vec(), None).create(
            &target,
            b"stale".to_vec(),
            CreateMode::Persistent,
        );
        let mut later = None;
        let committed = in_flight(&proxy, stale.commit(), async {
            observer.delete().deleting_children_if_needed().for_path(&path).await.expect("operator's delete");
            later = lease(&observer, &path, LONG, "c").try_acquire().await.expect("try");
        })
        .await;
        let later = later.expect("c: the lease was deleted");
        assert!(committed.is_err(), "{case}: a write of an earlier grant committed under a later one");
        assert!(observer.check_exists().for_path(&target).await.expect("exists").is_none(), "{case}: written");
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}");
        assert!(grant.renew().await.is_err(), "{case}: renewed a lease deleted under it");
        grant.release().await.expect("release: nothing to give back");
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}: the release took c's node");
        later.renew().await.expect("c renews");
        fw.close().await;
    }
    observer.close().await;
}

/// (c) A release in flight while the lease is taken over, released and granted again never
/// deletes the later grant's node. Before, its delete at the grant's version (0) deleted the
/// node made again (version 0), and a third contender could be granted under the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_in_flight_never_deletes_a_later_grant() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-release");
        let grant = lease(&fw, &path, SHORT, "a").try_acquire().await.expect("try").expect("a");
        let b = lease(&observer, &path, SHORT, "b");
        assert!(b.try_acquire().await.expect("try").is_none(), "{case}");
        let mut later = None;
        let released = in_flight(&proxy, grant.release(), async {
            later = Some(take_over_release_and_regrant(&observer, &path, &b).await);
        })
        .await;
        let later = later.expect("c's grant");
        if let Err(err) = &released {
            assert!(err.outcome_unknown(), "{case}: {err}");
        }
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}: the release took c's node");
        later.renew().await.expect("c renews");
        assert!(lease(&observer, &path, SHORT, "d").try_acquire().await.expect("try").is_none(), "{case}: d too");
        fw.close().await;
    }
    observer.close().await;
}

/// (c') A release whose reply is lost (applied, the connection closed before the answer) while
/// another grants the lease meanwhile, then released again by its caller after the unknown
/// outcome: the later grant's node stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_lost_never_deletes_a_later_grant() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-release-lost");
        let grant = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("a");
        let c = lease(&observer, &path, LONG, "c");
        // The holder cannot reconnect until c holds.
        proxy.set_reject(true);
        proxy.swallow_next_reply();
        let (released, later) = tokio::join!(grant.release(), async {
            let later = poll_grant("c takes the released lease", || c.try_acquire()).await;
            proxy.set_reject(false);
            later
        });
        assert!(!proxy.swallow_pending(), "{case}: the release never reached the server");
        // The core cannot tell who deleted the fence; the grant is over either way, which is
        // what a release promises. A short retry policy may give up before it can read.
        if let Err(err) = &released {
            assert!(retry == Retry::Short && err.outcome_unknown(), "{case}: {err}");
        }
        // The caller does not know; it releases again.
        let again = grant.release().await;
        if let Err(err) = &again {
            assert!(retry == Retry::Short && err.outcome_unknown(), "{case}: {err}");
        }
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}: the release took c's node");
        later.renew().await.expect("c renews");
        fw.close().await;
    }
    observer.close().await;
}

/// A renewal in flight while the lease is taken over, released and granted again does not
/// overwrite the later grant's record. Before, its write at the grant's version (0) landed on
/// the node made again: the node named the earlier holder while the later one held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_in_flight_never_overwrites_a_later_grant() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-renew");
        let grant = lease(&fw, &path, SHORT, "a").try_acquire().await.expect("try").expect("a");
        let b = lease(&observer, &path, SHORT, "b");
        assert!(b.try_acquire().await.expect("try").is_none(), "{case}");
        let mut later = None;
        let renewed = in_flight(&proxy, grant.renew(), async {
            later = Some(take_over_release_and_regrant(&observer, &path, &b).await);
        })
        .await;
        let later = later.expect("c's grant");
        assert!(renewed.is_err(), "{case}: renewed under a later grant");
        assert_eq!(holder_of(&observer, &path).await.as_deref(), Some("c"), "{case}: c's record overwritten");
        later.renew().await.expect("c renews");
        fw.close().await;
    }
    observer.close().await;
}

/// The fence costs no request: a grant is one read and one write (whether it creates the node
/// or takes it over), a renewal, a guarded write and a release one request each.
#[tokio::test]
async fn the_fence_costs_no_request() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let (path, target) = (unique_path("fence-cost"), unique_path("fence-cost-target"));
    // The framework's own reads (its ensemble tracker's, its session events') are not the lease's.
    let counted = |what: &'static str, expected: usize| {
        let mut seen = proxy.take_seen_requests();
        seen.retain(|r| r.path.as_deref().is_none_or(|p| !p.starts_with("/zookeeper/")));
        assert_eq!(seen.len(), expected, "{what}: {seen:?}");
    };
    proxy.record_requests(true);
    let grant = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("granted");
    counted("a grant that creates the node", 2);
    grant.renew().await.expect("renew");
    counted("a renewal", 1);
    grant
        .transaction()
        .expect("held")
        .create(&target, Vec::new(), CreateMode::Persistent)
        .commit()
        .await
        .expect("write");
    counted("a guarded write", 1);
    let again = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("by identity");
    counted("a grant that takes the node over", 2);
    again.release().await.expect("release");
    counted("a release", 1);
    fw.close().await;
}

/// The children of the lease node.
async fn children(fw: &CuratorFramework, path: &str) -> Vec<String> {
    fw.get_children().for_path(path).await.expect("children")
}

/// The lease node's one fence is `grant`'s, made by the granting multi: its czxid is the
/// grant's fencing token (what a release's lost reply is decided by).
async fn assert_one_fence_of(fw: &CuratorFramework, path: &str, grant: &LeaseGrant, case: &str) {
    let fences = children(fw, path).await;
    assert_eq!(fences.len(), 1, "{case}: one fence: {fences:?}");
    let fence = format!("{path}/{}", fences[0]);
    let stat = fw.check_exists().for_path(&fence).await.expect("stat").expect("fence");
    assert_eq!(stat.czxid, grant.fencing_token(), "{case}: the fence's czxid is the token");
}

/// A release whose request is lost on its way (the connection cut under it, the request never
/// applied) is decided by the grant's fence, which still stands, and sent again: the lease is
/// given back. Before, the delete was left `OutcomeUnknown` and a release called again did
/// nothing: the node stayed until the lease ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_request_is_lost_is_decided_by_its_fence() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-release-request-lost");
        let grant = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("a");
        proxy.record_requests(true);
        proxy.take_seen_requests();
        // Held long enough for the cut below to come first.
        proxy.set_latency(SHORT);
        let (released, ()) = tokio::join!(grant.release(), async {
            let left = eventually(Timing::new().deadline(), || async { !proxy.take_seen_requests().is_empty() }).await;
            assert!(left, "{case}: the release never left");
            proxy.cut();
            proxy.set_latency(Duration::ZERO);
        });
        match released {
            Ok(()) => {}
            Err(err) => {
                assert!(retry == Retry::Short && err.outcome_unknown(), "{case}: {err}");
                grant.release().await.expect("released again");
            }
        }
        assert_eq!(holder_of(&observer, &path).await, None, "{case}: the lease was not given back");
        let next = lease(&observer, &path, LONG, "b").try_acquire().await.expect("try");
        assert!(next.is_some(), "{case}: released, taken at once");
        fw.close().await;
    }
    observer.close().await;
}

/// A grant whose reply is lost (the multi applied, its answer dropped) is decided by its unique
/// write id: granted, with one fence; never a second grant or a stray fence. A short retry
/// policy may give up before it can read: the node then names the holder, whose next attempt
/// takes it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_reply_is_lost_is_decided_by_its_write_id() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-grant-lost");
        let target = format!("{path}-target");
        let holder = lease(&fw, &path, LONG, "a");
        // A create, then a takeover (the same holder id, at once), each with its reply lost.
        for what in ["create", "takeover"] {
            proxy.swallow_next_reply_to(RequestKind::Multi);
            let granted = holder.try_acquire().await;
            assert!(!proxy.swallow_pending(), "{case}: the {what} never reached the server");
            let grant = match granted {
                Ok(Some(grant)) => grant,
                Ok(None) => panic!("{case}: an applied {what} reported as no grant"),
                Err(err) => {
                    assert!(retry == Retry::Short && err.outcome_unknown(), "{case}: {what}: {err}");
                    holder.try_acquire().await.expect("try again").expect("the node names the holder")
                }
            };
            let stat = observer.check_exists().for_path(&path).await.expect("stat").expect("node");
            assert_eq!(grant.fencing_token(), stat.mzxid, "{case}: {what}");
            assert_one_fence_of(&observer, &path, &grant, &format!("{case}: {what}")).await;
            grant
                .transaction()
                .expect("held")
                .create(&target, Vec::new(), CreateMode::Persistent)
                .commit()
                .await
                .expect("write");
            observer.delete().for_path(&target).await.expect("clean");
        }
        fw.close().await;
    }
    observer.close().await;
}

/// A grant whose reply is lost and whose node an operator deletes (with its fence) before the
/// write can be decided: the core cannot tell (the node is gone), and the lease, asked whether
/// a grant of its holder stands, reads the node: none does (`None`, not an error), nothing of
/// the grant is left, and the next attempt creates the lease. For a create and a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_of_unknown_outcome_that_no_longer_stands_is_none() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = holder_framework(&proxy, policy, retry).await;
        let path = unique_path("fence-grant-unknown");
        let holder = lease(&fw, &path, LONG, "a");
        for what in ["create", "takeover"] {
            let before = observer.check_exists().for_path(&path).await.expect("stat").map(|s| s.mzxid);
            // The holder cannot reconnect until the operator is done.
            proxy.set_reject(true);
            proxy.swallow_next_reply_to(RequestKind::Multi);
            let (granted, ()) = tokio::join!(holder.try_acquire(), async {
                let applied = eventually(Timing::new().deadline(), || async {
                    let now = observer.check_exists().for_path(&path).await.expect("stat");
                    now.is_some_and(|s| Some(s.mzxid) != before)
                })
                .await;
                assert!(applied, "{case}: the {what} was never applied");
                observer.delete().deleting_children_if_needed().for_path(&path).await.expect("operator's delete");
                proxy.set_reject(false);
            });
            match granted {
                Ok(None) => {}
                Ok(Some(_)) => panic!("{case}: a {what} on a node deleted since reported granted"),
                Err(err) => assert!(retry == Retry::Short && err.outcome_unknown(), "{case}: {what}: {err}"),
            }
            assert!(observer.check_exists().for_path(&path).await.expect("exists").is_none(), "{case}: {what}");
            let grant = holder.try_acquire().await.expect("try").expect("the lease is free");
            assert_one_fence_of(&observer, &path, &grant, &format!("{case}: {what}")).await;
        }
        fw.close().await;
    }
    observer.close().await;
}

/// A lease node without a fence is deleted and made again by its next taker (after the wait,
/// or at once by its holder id): one whose fence an operator deleted (its grant ends at once:
/// its writes are refused), one written by format 1, and one with a fence its record does not
/// name (swept first). A child the recipe did not make is `BadData`.
#[tokio::test]
async fn leases_without_a_fence_are_replaced() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let path = unique_path("fence-replaced");
    let target = format!("{path}-target");
    // The fence deleted from outside.
    let a = lease(&fw, &path, SHORT, "a").try_acquire().await.expect("try").expect("a");
    for fence in children(&fw, &path).await {
        fw.delete().for_path(&format!("{path}/{fence}")).await.expect("operator's delete");
    }
    let refused = a.transaction().expect("held").create(&target, Vec::new(), CreateMode::Persistent).commit().await;
    assert!(matches!(&refused, Err(CuratorError::NoNode { path: p }) if p.contains("/grant-")), "{refused:?}");
    assert!(matches!(a.renew().await, Err(CuratorError::OwnNodeLost { .. })));
    let b = lease(&fw, &path, SHORT, "b");
    let taken = poll_grant("b replaces a fenceless lease", || b.try_acquire()).await;
    assert!(taken.fencing_token() > a.fencing_token());
    assert_eq!(children(&fw, &path).await.len(), 1);
    taken.release().await.expect("release");

    // A node of format 1 (no fence).
    let old = "curator-rs timed lease 1\nholder=old\nduration_ms=300\nwrite=5a0e3c1e-6f43-4c3f-9d0c-5d5f1f3a9a01\n";
    fw.create().for_path(&path, old.as_bytes().to_vec()).await.expect("format 1");
    let c = lease(&fw, &path, SHORT, "c");
    assert!(c.try_acquire().await.expect("try").is_none(), "held by its format 1 holder");
    let taken = poll_grant("c replaces a format 1 lease", || c.try_acquire()).await;
    assert_eq!(children(&fw, &path).await.len(), 1);

    // A fence nobody names: the release leaves the node (it cannot delete it), the next taker
    // sweeps it.
    let stray = format!("{path}/grant-00000000-0000-4000-8000-000000000000");
    fw.create().for_path(&stray, Vec::new()).await.expect("stray fence");
    taken.release().await.expect("release");
    assert_eq!(children(&fw, &path).await, vec!["grant-00000000-0000-4000-8000-000000000000".to_string()]);
    let d = lease(&fw, &path, SHORT, "d");
    let taken = poll_grant("d replaces the lease", || d.try_acquire()).await;
    let fences = children(&fw, &path).await;
    assert!(fences.len() == 1 && !stray.ends_with(&fences[0]), "{fences:?}");

    // A child of someone else's under a fenceless node.
    fw.delete().for_path(&format!("{path}/{}", fences[0])).await.expect("operator's delete");
    fw.create().for_path(&format!("{path}/notes"), Vec::new()).await.expect("foreign child");
    drop(taken);
    let e = lease(&fw, &path, SHORT, "e");
    let refused = eventually(Timing::new().deadline(), || async {
        matches!(e.try_acquire().await, Err(CuratorError::BadData { .. }))
    })
    .await;
    assert!(refused, "a foreign child left in place is BadData");
    assert!(children(&fw, &path).await.contains(&"notes".to_string()), "left alone");
    fw.close().await;
}

/// A renewal that finds the node written from outside (an operator's write, over a grant that
/// still stands) gives the grant up and ends its fence: a write built before is refused.
#[tokio::test]
async fn a_renewal_over_an_outside_write_ends_the_fence() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let path = unique_path("fence-outside-write");
    let target = format!("{path}-target");
    let grant = lease(&fw, &path, LONG, "a").try_acquire().await.expect("try").expect("a");
    let stale = grant.transaction().expect("held").create(&target, Vec::new(), CreateMode::Persistent);
    let data = fw.get_data().for_path(&path).await.expect("read");
    fw.set_data().for_path(&path, data).await.expect("operator's write");
    assert!(matches!(grant.renew().await, Err(CuratorError::OwnNodeLost { .. })));
    assert_eq!(grant.lost().await, curator_recipes::LeaseLost::Superseded);
    assert!(children(&fw, &path).await.is_empty(), "the fence stayed");
    assert!(matches!(stale.commit().await, Err(CuratorError::NoNode { .. })));
    assert!(fw.check_exists().for_path(&target).await.expect("exists").is_none());
    fw.close().await;
}
