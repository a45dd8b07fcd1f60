//! Issue 16's "must show" for `DistributedAtomicLong`: sessions incrementing one counter while
//! their connections are cut, replies are swallowed (the write is applied, its client sees a
//! connection loss) and one session is expired: the final value equals the number of
//! increments reported successful, and no two successes report the same value (none counted
//! twice). Under every error/retry policy combination.
//!
//! CI runs a scaled-down version (4 sessions x 150 increments per combination, well under the
//! 2 minutes on 2 cores); `full_8_sessions_x_500_increments` (ignored) runs the 8 x
//! 500 under one combination: `cargo test -p tests --test atomic_faults -- --ignored`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{DistributedAtomicLong, PromotedToLock, WRITE_TAG_PREFIX};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::fixture::{init_tracing, unique_path};
use tests::policies::{framework, Retry, COMBINATIONS};
use tests::zk::server_clock_past;
use tokio::sync::Mutex;

/// What one session saw.
#[derive(Debug, Default)]
struct Tally {
    succeeded: Vec<i64>,
    not_succeeded: u32,
    errors: Vec<String>,
}

/// The counter of one worker under the combination's policies: with `Retry::Default`, a
/// patient recipe policy and promotion to a mutex; with `Retry::Short`, one retry and no
/// promotion (many increments then do not succeed, which is allowed: they must not count).
fn counter(fw: &CuratorFramework, path: &str, retry: Retry) -> DistributedAtomicLong {
    match retry {
        Retry::Default => DistributedAtomicLong::with_promotion(
            fw,
            path,
            RetryNTimes::new(30, Duration::from_millis(5)),
            PromotedToLock::new(&format!("{path}-lock"))
                .expect("lock path")
                .max_lock_time(Duration::from_secs(5))
                .retry_policy(RetryNTimes::new(5, Duration::from_millis(10))),
        ),
        Retry::Short => DistributedAtomicLong::new(fw, path, RetryNTimes::new(1, Duration::from_millis(100))),
    }
    .expect("counter")
}

async fn run(policy: ErrorPolicy, retry: Retry, sessions: usize, increments: usize) {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let path = format!("{}/counter", unique_path("atomic-faults"));
    let mut proxies = Vec::new();
    let mut frameworks = Vec::new();
    for _ in 0..sessions {
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        frameworks.push(framework(&proxy.connect_string(), policy, retry).await);
        proxies.push(Arc::new(proxy));
    }
    let tallies: Vec<Arc<Mutex<Tally>>> = (0..sessions).map(|_| Arc::default()).collect();
    let mut workers = Vec::new();
    for (fw, tally) in frameworks.iter().zip(&tallies) {
        let (counter, tally) = (counter(fw, &path, retry), tally.clone());
        workers.push(tokio::spawn(async move {
            for _ in 0..increments {
                let outcome = counter.increment().await;
                let mut tally = tally.lock().await;
                match outcome {
                    Ok(v) if v.succeeded() => tally.succeeded.push(v.post_value),
                    Ok(_) => tally.not_succeeded += 1,
                    Err(err) => tally.errors.push(err.to_string()),
                }
            }
        }));
    }

    // Faults while they run: cuts and swallowed replies at random, and one expiry early on.
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let injector = {
        let (proxies, fws, server_cs) = (proxies.clone(), frameworks.clone(), server.connect_string());
        tokio::spawn(async move {
            let (mut faults, mut expired) = (0u32, false);
            loop {
                let pause = tokio::time::sleep(Duration::from_millis(fastrand::u64(10..40)));
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => break,
                    _ = pause => {}
                }
                let victim = fastrand::usize(..proxies.len());
                if !expired && faults == 5 {
                    let info = fws[victim].session().await.expect("session").client().session().clone();
                    expire_session(&server_cs, &info).await.expect("expire");
                    expired = true;
                    continue;
                }
                match fastrand::u8(..3) {
                    0 => proxies[victim].cut(),
                    _ => proxies[victim].swallow_next_reply(),
                }
                faults += 1;
            }
            (faults, expired)
        })
    };
    let all = async {
        for worker in workers {
            worker.await.expect("worker");
        }
    };
    let finished = tokio::time::timeout(timing.deadline() * 6, all).await;
    stop_tx.send_replace(true);
    let (faults, expired) = injector.await.expect("injector");
    for proxy in &proxies {
        proxy.disarm_swallow();
        proxy.pass();
    }
    assert!(expired, "{policy:?}/{retry:?}: the run ended before the expiry");
    assert!(finished.is_ok(), "{policy:?}/{retry:?}: the workers did not finish");

    let mut successes = Vec::new();
    let (mut not_succeeded, mut errors) = (0, Vec::new());
    for tally in &tallies {
        let tally = tally.lock().await;
        successes.extend(&tally.succeeded);
        not_succeeded += tally.not_succeeded;
        errors.extend(tally.errors.iter().cloned());
    }
    let observer = framework(&server.connect_string(), policy, retry).await;
    let final_value = DistributedAtomicLong::new(&observer, &path, RetryNTimes::new(3, Duration::from_millis(50)))
        .expect("observer")
        .get()
        .await
        .expect("read the counter")
        .post_value;
    let distinct: HashSet<i64> = successes.iter().copied().collect();
    tracing::info!(
        ?policy,
        ?retry,
        faults,
        final_value,
        successes = successes.len(),
        not_succeeded,
        errors = errors.len(),
        "atomic faults run"
    );
    assert_eq!(
        distinct.len(),
        successes.len(),
        "{policy:?}/{retry:?}: two successful increments reported the same value (one counted twice)"
    );
    assert_eq!(
        final_value,
        successes.len() as i64,
        "{policy:?}/{retry:?}: final value {final_value} but {} increments reported successful ({not_succeeded} did not succeed, errors: {errors:?})",
        successes.len()
    );
    assert!(!successes.is_empty(), "{policy:?}/{retry:?}: nothing succeeded");
    observer.close().await;
    for fw in frameworks {
        fw.close().await;
    }
}

/// Every policy combination, 4 sessions x 150 increments each (the CI size of the 8 x 500).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn increments_under_cuts_lost_replies_and_expiry_are_exact() {
    for (policy, retry) in COMBINATIONS {
        run(policy, retry, 4, 150).await;
    }
}

/// The full size: 8 sessions x 500 increments, under the patient policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the issue's full 8 x 500 run (about 8 s here); CI runs the scaled-down version"]
async fn full_8_sessions_x_500_increments() {
    run(ErrorPolicy::Standard, Retry::Default, 8, 500).await;
}

/// The reap age of the outcome test's handle: short, so that its first write reaps a stale tag.
const REAP_AGE: Duration = Duration::from_millis(200);

/// An increment whose reply is lost while someone else changes its write tag cannot be
/// decided: it fails with `OutcomeUnknown` naming the counter (before: `IllegalState`), whose
/// `outcome_unknown()` is true and which no retry loop retries; the write had in fact been
/// applied, as a read shows. New connections are refused from before the lost reply until the
/// tag was changed, so the decision (which reads the tag once reconnected) sees the change.
/// Under every error and retry policy. No Curator counterpart (Curator's
/// DistributedAtomicValue has no write tag: it retries blindly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_whose_tag_someone_else_changed_is_outcome_unknown() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let path = format!("{}/counter", unique_path("atomic-unknown"));
        // The handle's first write makes its tag and reaps, in the background, the tags older
        // than its reap age. A stale tag made by hand shows when that is over (its delete is
        // the reaper's last request), so that the reply swallowed below is the increment's.
        let stale = format!("{path}/{WRITE_TAG_PREFIX}stale");
        observer.create().creating_parents_if_needed().for_path(&path, 0i64.to_be_bytes().to_vec()).await.unwrap();
        observer.create().for_path(&stale, Vec::new()).await.expect("stale tag");
        let mtime = observer.check_exists().for_path(&stale).await.expect("exists").expect("node").mtime;
        server_clock_past(&observer, &format!("{path}-clock"), mtime, REAP_AGE).await;
        let counter = DistributedAtomicLong::new(&fw, &path, RetryNTimes::new(0, Duration::ZERO))
            .expect("counter")
            .write_tag_reap_age(REAP_AGE);
        assert_eq!(counter.increment().await.expect("first increment").post_value, 1, "{case}");
        let reaped = eventually(Timing::new().deadline(), || async {
            observer.check_exists().for_path(&stale).await.expect("exists").is_none()
        })
        .await;
        assert!(reaped, "{case}: the stale tag was not reaped");
        let tags: Vec<String> = observer
            .get_children()
            .for_path(&path)
            .await
            .expect("children")
            .into_iter()
            .filter(|c| c.starts_with(WRITE_TAG_PREFIX))
            .collect();
        assert_eq!(tags.len(), 1, "{case}: {tags:?}");
        let tag = format!("{path}/{}", tags[0]);

        proxy.set_reject(true);
        proxy.swallow_next_reply();
        let (outcome, ()) = tokio::join!(counter.increment(), async {
            let swallowed = eventually(Timing::new().deadline(), || async { !proxy.swallow_pending() }).await;
            assert!(swallowed, "{case}: the increment was not sent");
            // The swallow is taken when the proxy reads the request, which may be before the
            // server applies it: the tag is changed only once the increment was applied (else
            // the increment meets the change, writes nothing and goes again, successfully).
            let applied = eventually(Timing::new().deadline(), || async {
                observer.get_data().for_path(&path).await.is_ok_and(|d| d == 2i64.to_be_bytes())
            })
            .await;
            assert!(applied, "{case}: the increment was not applied");
            observer.set_data().for_path(&tag, b"someone else".to_vec()).await.expect("change the tag");
            proxy.set_reject(false);
        });
        assert!(
            matches!(&outcome, Err(CuratorError::OutcomeUnknown { path: p, .. }) if *p == path),
            "{case}: {outcome:?}"
        );
        assert!(outcome.as_ref().is_err_and(|e| e.outcome_unknown() && !e.is_retryable()), "{case}");
        let value = DistributedAtomicLong::new(&observer, &path, RetryNTimes::new(3, Duration::from_millis(50)))
            .expect("observer's counter")
            .get()
            .await
            .expect("read the counter");
        assert_eq!(value.post_value, 2, "{case}: the lost write was applied");
        fw.close().await;
    }
    observer.close().await;
}
