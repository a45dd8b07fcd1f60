//! Issue 31 item 9: `TimedLease` and `MultiTimedLease`, kazoo's `NonBlockingLease` and
//! `MultiNonBlockingLease` without clock agreement (docs/architecture.md section 20). kazoo's
//! scenarios (kazoo/tests/test_lease.py) move a mock clock; ours run on real time with short
//! durations, polling with a deadline where kazoo moves its clock past the end. Then ours: the
//! holder is told before anyone else is granted, contenders never both hold, faults (a stalled
//! holder behind a cut proxy, an expired session, a lost reply) under every error and retry
//! policy, guarded writes, bad input and garbage in the node.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{LeaseGrant, LeaseLost, MultiTimedLease, TimedLease};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::fixture::{init_tracing, unique_path, Fixture};
use tests::policies::{framework, Retry, COMBINATIONS};
use tokio::time::Instant;

/// A short lease, so that expiries come quickly.
const SHORT: Duration = Duration::from_millis(300);

fn lease(fw: &CuratorFramework, path: &str, duration: Duration, holder: &str) -> TimedLease {
    TimedLease::new(fw, path, duration, holder).expect("lease")
}

/// Polls `try` until it grants, within the test deadline: the grant and when it came back.
async fn poll_grant<F, Fut>(what: &str, attempt: F) -> (LeaseGrant, Instant)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = curator_core::Result<Option<LeaseGrant>>>,
{
    let deadline = Instant::now() + Timing::new().deadline();
    loop {
        if let Some(grant) = attempt().await.expect("try_acquire") {
            return (grant, Instant::now());
        }
        assert!(Instant::now() < deadline, "{what}: no grant within the deadline");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Follows kazoo's `test_renew`: a grant, renewed (its end moves on), and the same holder id
/// from another handle takes it at once (kazoo's renewal by identity).
#[tokio::test]
async fn renew() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("lease-renew");
    let duration = Duration::from_secs(3);
    let first = lease(&f.fw, &path, duration, "me");
    let asked = Instant::now();
    let grant = first.try_acquire().await.expect("try").expect("granted");
    assert!(grant.is_held());
    let end = grant.expires_at();
    // The grant ends its duration after its write was sent, so after the ask: no wall-clock bound.
    assert!(end >= asked + duration && grant.remaining() <= duration, "ends at {end:?}, asked at {asked:?}");
    let renewed_at = Instant::now();
    grant.renew().await.expect("renew");
    assert!(grant.expires_at() >= renewed_at + duration && grant.expires_at() > end);
    let again = lease(&f.fw, &path, duration, "me").try_acquire().await.expect("try");
    let again = again.expect("the same holder id takes its own lease at once");
    assert!(again.fencing_token() > grant.fencing_token());
    f.close().await;
}

/// Follows kazoo's `test_busy`: another holder id gets nothing while the lease holds.
#[tokio::test]
async fn busy() {
    init_tracing();
    let f = Fixture::shared().await;
    let other_fw = f.client().await;
    let path = unique_path("lease-busy");
    let grant = lease(&f.fw, &path, Duration::from_secs(3), "me").try_acquire().await.expect("try").expect("granted");
    let foreigner = lease(&other_fw, &path, Duration::from_secs(3), "some.other.host");
    for _ in 0..3 {
        assert!(foreigner.try_acquire().await.expect("try").is_none());
    }
    let takeover = foreigner.takeover_at().await.expect("seen");
    assert!(takeover >= grant.expires_at(), "a contender's takeover comes after the holder's end");
    other_fw.close().await;
    f.close().await;
}

/// Follows kazoo's `test_overtake` and `test_overtaker_renews`: a lease not renewed is taken
/// by another once it ran out; the holder was told before, the new grant's fencing token is
/// larger, and the new holder renews.
#[tokio::test]
async fn overtake_then_overtaker_renews() {
    init_tracing();
    let f = Fixture::shared().await;
    let other_fw = f.client().await;
    let path = unique_path("lease-overtake");
    let grant = lease(&f.fw, &path, SHORT, "me").try_acquire().await.expect("try").expect("granted");
    let notice = {
        let grant = grant.clone();
        tokio::spawn(async move { (grant.lost().await, Instant::now()) })
    };
    let foreigner = lease(&other_fw, &path, SHORT, "some.other.host");
    let (taken, taken_at) = poll_grant("overtake", || foreigner.try_acquire()).await;
    assert!(!grant.is_held());
    assert!(grant.expires_at() < taken_at);
    let (reason, told_at) = notice.await.expect("notice task");
    assert_eq!(reason, LeaseLost::Expired);
    assert!(told_at <= taken_at, "the holder was told {:?} after the takeover", told_at - taken_at);
    assert!(taken.fencing_token() > grant.fencing_token());
    taken.renew().await.expect("the overtaker renews");
    assert!(taken.is_held());
    other_fw.close().await;
    f.close().await;
}

/// Follows kazoo's `test_renew_no_overtake`: a holder that keeps renewing is never taken over,
/// even by a contender that has watched for longer than the duration.
#[tokio::test]
async fn renew_no_overtake() {
    init_tracing();
    let f = Fixture::shared().await;
    let other_fw = f.client().await;
    let path = unique_path("lease-renew-no-overtake");
    let duration = Duration::from_millis(600);
    let grant = lease(&f.fw, &path, duration, "me").try_acquire().await.expect("try").expect("granted");
    let foreigner = lease(&other_fw, &path, duration, "some.other.host");
    assert!(foreigner.try_acquire().await.expect("try").is_none());
    let first_chance = foreigner.takeover_at().await.expect("seen");
    while Instant::now() < first_chance + duration / 2 {
        grant.renew().await.expect("renew while held");
        assert!(foreigner.try_acquire().await.expect("try").is_none(), "taken over while renewed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(grant.is_held());
    other_fw.close().await;
    f.close().await;
}

/// Follows kazoo's `test_overtake_refuse_first`: once taken over, the first holder's id gets
/// nothing, and its old grant can neither renew nor guard a write.
#[tokio::test]
async fn overtake_refuse_first() {
    init_tracing();
    let f = Fixture::shared().await;
    let other_fw = f.client().await;
    let path = unique_path("lease-refuse-first");
    let first = lease(&f.fw, &path, SHORT, "me");
    let grant = first.try_acquire().await.expect("try").expect("granted");
    let foreigner = lease(&other_fw, &path, SHORT, "some.other.host");
    let (_taken, _) = poll_grant("overtake", || foreigner.try_acquire()).await;
    assert!(first.try_acquire().await.expect("try").is_none(), "the first holder is refused");
    assert!(matches!(grant.renew().await, Err(CuratorError::NotHeld { .. })));
    assert!(matches!(grant.transaction(), Err(CuratorError::NotHeld { .. })));
    assert_eq!(grant.lost().await, LeaseLost::Expired);
    other_fw.close().await;
    f.close().await;
}

/// Follows kazoo's `test_old_version`: a lease written by a newer format is not taken (ours:
/// `BadData` saying so), and neither is garbage; the node is left as it was.
#[tokio::test]
async fn newer_format_and_garbage_are_left_alone() {
    init_tracing();
    let f = Fixture::shared().await;
    let newer = unique_path("lease-newer");
    let text = "curator-rs timed lease 3\nholder=future\nduration_ms=1\nwrite=x\nmore=1\n";
    f.fw.create().for_path(&newer, text.as_bytes().to_vec()).await.expect("create");
    let err = lease(&f.fw, &newer, SHORT, "me").try_acquire().await.expect_err("newer");
    assert!(matches!(&err, CuratorError::BadData { reason, .. } if reason.contains("format 3")), "{err}");
    for garbage in [&b"foo"[..], b"", b"\xff\x00\x01"] {
        let path = unique_path("lease-garbage");
        f.fw.create().for_path(&path, garbage.to_vec()).await.expect("create");
        let err = lease(&f.fw, &path, SHORT, "me").try_acquire().await.expect_err("garbage");
        assert!(matches!(err, CuratorError::BadData { .. }), "{err}");
        assert_eq!(f.fw.get_data().for_path(&path).await.expect("read"), garbage, "left alone");
    }
    f.close().await;
}

/// Follows kazoo's `MultiNonBlockingLeaseTest`: `test_1_renew`, `test_1_reject`,
/// `test_2_renew` and `test_2_reject`: each holder keeps its slot, a third is refused.
#[tokio::test]
async fn multi_renew_and_reject() {
    init_tracing();
    let f = Fixture::shared().await;
    let (fw2, fw3) = (f.client().await, f.client().await);
    let one = unique_path("multi-1");
    let d = Duration::from_secs(4);
    let a = MultiTimedLease::new(&f.fw, &one, 1, d, "a").expect("multi");
    let first = a.try_acquire().await.expect("try").expect("test_1_renew: granted");
    let renewed = a.try_acquire().await.expect("try").expect("test_1_renew: renewed by identity");
    assert_eq!((first.path(), renewed.path()), (renewed.path(), format!("{one}/0").as_str()));
    let b = MultiTimedLease::new(&fw2, &one, 1, d, "b").expect("multi");
    assert!(b.try_acquire().await.expect("try").is_none(), "test_1_reject");

    let two = unique_path("multi-2");
    let a = MultiTimedLease::new(&f.fw, &two, 2, d, "a").expect("multi");
    let b = MultiTimedLease::new(&fw2, &two, 2, d, "host2").expect("multi");
    let c = MultiTimedLease::new(&fw3, &two, 2, d, "host3").expect("multi");
    assert_eq!(a.try_acquire().await.expect("try").expect("a").path(), format!("{two}/0"));
    assert_eq!(b.try_acquire().await.expect("try").expect("b").path(), format!("{two}/1"));
    assert_eq!(a.try_acquire().await.expect("try").expect("a renews").path(), format!("{two}/0"));
    assert_eq!(b.try_acquire().await.expect("try").expect("b renews").path(), format!("{two}/1"));
    assert!(c.try_acquire().await.expect("try").is_none(), "test_2_reject");
    for (fw, _) in [(fw2, 0), (fw3, 0)] {
        fw.close().await;
    }
    f.close().await;
}

/// Follows kazoo's `MultiNonBlockingLeaseTest.test_2_handover`: of two slots, the one not
/// renewed goes to a third holder once it ran out, then the other to the first holder.
#[tokio::test]
async fn multi_handover() {
    init_tracing();
    let f = Fixture::shared().await;
    let (fw2, fw3) = (f.client().await, f.client().await);
    let path = unique_path("multi-handover");
    // Long enough that a renewal every tenth of it keeps up on a busy machine.
    let d = Duration::from_secs(1);
    let a = MultiTimedLease::new(&f.fw, &path, 2, d, "a").expect("multi");
    let b = MultiTimedLease::new(&fw2, &path, 2, d, "host2").expect("multi");
    let c = MultiTimedLease::new(&fw3, &path, 2, d, "host3").expect("multi");
    let first = a.try_acquire().await.expect("try").expect("a");
    let second = b.try_acquire().await.expect("try").expect("b");
    assert_eq!(first.path(), format!("{path}/0"));
    // b keeps renewing slot 1 while c waits for slot 0, which a does not renew.
    let keep = async {
        loop {
            if let Err(e) = second.renew().await {
                break e;
            }
            tokio::time::sleep(d / 10).await;
        }
    };
    let (third, _) = tokio::select! {
        got = poll_grant("c takes slot 0", || c.try_acquire()) => got,
        e = keep => panic!("b stopped holding slot 1: {e}"),
    };
    assert_eq!(third.path(), format!("{path}/0"));
    assert!(second.is_held() && !first.is_held());
    // Now b stops; c keeps slot 0; a takes slot 1 (after it ran out).
    let keep = async {
        loop {
            if let Err(e) = third.renew().await {
                break e;
            }
            tokio::time::sleep(d / 10).await;
        }
    };
    let (fourth, _) = tokio::select! {
        got = poll_grant("a takes slot 1", || a.try_acquire()) => got,
        e = keep => panic!("c stopped holding slot 0: {e}"),
    };
    assert_eq!(fourth.path(), format!("{path}/1"));
    assert!(fourth.fencing_token() > second.fencing_token());
    fw2.close().await;
    fw3.close().await;
    f.close().await;
}

/// Ours: contenders on two sessions, each trying all the time, never both hold, and each grant
/// finds every earlier one told of its loss: at every grant, the earlier grants are not held
/// (by their clock) and their `lost()` notice was given. Tokens grow with each grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_never_both_hold() {
    init_tracing();
    let f = Fixture::shared().await;
    let other_fw = f.client().await;
    let path = unique_path("lease-contenders");
    let duration = Duration::from_millis(200);
    let grants: Arc<Mutex<Vec<LeaseGrant>>> = Arc::default();
    let stop_at = Instant::now() + Duration::from_millis(2500);
    let mut tasks = Vec::new();
    for (i, fw) in [&f.fw, &other_fw, &f.fw, &other_fw].into_iter().enumerate() {
        let lease = lease(fw, &path, duration, &format!("holder-{i}"));
        let grants = grants.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < stop_at {
                if let Some(grant) = lease.try_acquire().await.expect("try") {
                    {
                        let mut all = grants.lock().unwrap();
                        for earlier in all.iter() {
                            assert!(!earlier.is_held(), "two holders at once");
                            assert!(earlier.lost_watch().borrow().is_some(), "an earlier holder not told yet");
                            assert!(earlier.fencing_token() < grant.fencing_token());
                        }
                        all.push(grant.clone());
                    }
                    // Renew once, sometimes release: the others see both.
                    let _ = grant.renew().await;
                    if i % 2 == 0 {
                        grant.release().await.expect("release");
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("contender");
    }
    let count = grants.lock().unwrap().len();
    assert!(count >= 3, "only {count} grants: the contenders did not take over");
    other_fw.close().await;
    f.close().await;
}

/// Ours: a holder stalled behind a cut proxy cannot renew; it is told at its end, and only
/// then does a contender take over; back on line, its grant can neither renew nor guard a
/// write. Under every error and retry policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_holder_is_told_before_takeover() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let holder_fw = framework(&proxy.connect_string(), policy, retry).await;
        let other_fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let path = unique_path("lease-stalled");
        let grant = lease(&holder_fw, &path, SHORT, "stalled").try_acquire().await.expect("try").expect("granted");
        let stale_tx = grant.transaction().expect("held").set_data(&path, b"stale".to_vec(), None);
        proxy.pause();
        proxy.cut();
        let notice = {
            let grant = grant.clone();
            tokio::spawn(async move { (grant.lost().await, Instant::now()) })
        };
        let renewing = tokio::time::timeout(SHORT, grant.renew()).await;
        assert!(!matches!(renewing, Ok(Ok(()))), "{case}: renewed through a cut proxy");
        // The contender waits the holder's duration (the node's); its own grant lasts long
        // enough to outlive the holder's reconnection below.
        let contender = lease(&other_fw, &path, Duration::from_secs(30), "contender");
        let (taken, taken_at) = poll_grant(&case, || contender.try_acquire()).await;
        let (reason, told_at) = notice.await.expect("notice");
        assert_eq!(reason, LeaseLost::Expired, "{case}");
        assert!(told_at <= taken_at, "{case}: told after the takeover");
        proxy.pass();
        holder_fw.block_until_connected(Timing::new().deadline()).await.expect("reconnected");
        assert!(matches!(grant.renew().await, Err(CuratorError::NotHeld { .. })), "{case}");
        assert!(matches!(grant.transaction(), Err(CuratorError::NotHeld { .. })), "{case}");
        // A transaction built while held is refused by the server: its grant's fence is gone.
        assert!(stale_tx.commit().await.is_err(), "{case}: a stale write committed");
        assert!(taken.is_held(), "{case}");
        let data = other_fw.get_data().for_path(&path).await.expect("read");
        assert!(String::from_utf8_lossy(&data).contains("holder=contender"), "{case}");
        holder_fw.close().await;
        other_fw.close().await;
    }
}

/// Ours: the lease has no tie to a session. The holder's session expires; no contender can
/// take the lease before its end, and the holder renews it on its new session. A renewal whose
/// reply is lost is settled by its write id (not taken for someone else's write). Under every
/// error and retry policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_and_lost_reply_keep_the_lease() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let holder_fw = framework(&proxy.connect_string(), policy, retry).await;
        let other_fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let path = unique_path("lease-expired-session");
        // Longer than a new session can take to open under any policy: the renewal below must
        // come before the end (no contender waits it out here).
        let duration = Duration::from_secs(10);
        let grant = lease(&holder_fw, &path, duration, "holder").try_acquire().await.expect("try").expect("granted");
        let info = holder_fw.session().await.expect("session").client().session().clone();
        expire_session(&server.connect_string(), &info).await.expect("expire");
        let contender = lease(&other_fw, &path, duration, "contender");
        assert!(contender.try_acquire().await.expect("try").is_none(), "{case}: taken after a session expiry");
        let renewed = eventually(Timing::new().deadline(), || async { grant.renew().await.is_ok() }).await;
        assert!(renewed, "{case}: no renewal on the new session");
        assert!(grant.is_held(), "{case}");

        // A renewal's reply swallowed: the write applied, the client saw a connection loss.
        proxy.swallow_next_reply();
        let outcome = grant.renew().await;
        proxy.disarm_swallow();
        assert!(
            outcome.as_ref().is_ok_and(|()| grant.is_held())
                || outcome.as_ref().is_err_and(|e| !matches!(e, CuratorError::OwnNodeLost { .. })),
            "{case}: {outcome:?}"
        );
        let renewed = eventually(Timing::new().deadline(), || async { grant.renew().await.is_ok() }).await;
        assert!(renewed, "{case}: our own write taken for someone else's");
        assert!(contender.try_acquire().await.expect("try").is_none(), "{case}");
        grant.release().await.expect("release");
        assert_eq!(grant.lost().await, LeaseLost::Released, "{case}");
        assert!(contender.try_acquire().await.expect("try").is_some(), "{case}: released, taken at once");
        holder_fw.close().await;
        other_fw.close().await;
    }
}

/// Ours: a guarded transaction commits while the lease holds, its first result the lease
/// node's check; once another holder has taken the node, a transaction built earlier is
/// refused and writes nothing.
#[tokio::test]
async fn guarded_transaction() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("lease-guarded");
    let target = unique_path("lease-guarded-target");
    let grant = lease(&f.fw, &path, Duration::from_secs(30), "a").try_acquire().await.expect("try").expect("granted");
    let results = grant
        .transaction()
        .expect("held")
        .create(&target, b"one".to_vec(), CreateMode::Persistent)
        .commit()
        .await
        .expect("commit while held");
    assert_eq!(results.len(), 2);
    let stale = grant.transaction().expect("held").set_data(&target, b"two".to_vec(), None);
    // Another grant of the same holder id (another handle) changes the node.
    let _next = lease(&f.fw, &path, Duration::from_secs(30), "a").try_acquire().await.expect("try").expect("own");
    assert!(stale.commit().await.is_err(), "a stale guarded write committed");
    assert_eq!(f.fw.get_data().for_path(&target).await.expect("read"), b"one");
    assert!(matches!(grant.renew().await, Err(CuratorError::OwnNodeLost { .. })));
    assert_eq!(grant.lost().await, LeaseLost::Superseded);
    f.close().await;
}

/// Ours: bad input is a typed error before anything is sent.
#[tokio::test]
async fn bad_input() {
    init_tracing();
    let f = Fixture::shared().await;
    let ok = Duration::from_secs(1);
    let invalid_argument = |r: curator_core::Result<TimedLease>| matches!(r, Err(CuratorError::InvalidArgument { .. }));
    assert!(invalid_argument(TimedLease::new(&f.fw, "/l", Duration::ZERO, "me")));
    assert!(invalid_argument(TimedLease::new(&f.fw, "/l", Duration::from_secs(400 * 24 * 3600), "me")));
    assert!(invalid_argument(TimedLease::new(&f.fw, "/l", Duration::MAX, "me")));
    assert!(invalid_argument(TimedLease::new(&f.fw, "/l", ok, "")));
    assert!(invalid_argument(TimedLease::new(&f.fw, "/l", ok, "two\nlines")));
    for path in ["no-slash", "/a//b", "/trailing/", "/"] {
        assert!(matches!(TimedLease::new(&f.fw, path, ok, "me"), Err(CuratorError::InvalidPath { .. })), "{path}");
    }
    assert!(matches!(MultiTimedLease::new(&f.fw, "/m", 0, ok, "me"), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(
        MultiTimedLease::new(&f.fw, "/m", 1, Duration::ZERO, "me"),
        Err(CuratorError::InvalidArgument { .. })
    ));
    f.close().await;
}
