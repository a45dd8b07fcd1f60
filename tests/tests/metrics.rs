//! Metrics (issue 18; `curator_core::metrics`, docs/operations.md section 6): a recorder
//! installed in this process sees the counters and histograms move, by exactly the amounts
//! each event defines, for a lock cycle, a forced session expiry, a `PathChildrenCache` event
//! and a hold lost to an expiry.
//!
//! The facade's recorder is global to the process (`tests::metrics`), so this binary's tests
//! run one at a time (`SERIAL`), each closing what it started; the recipes' metrics are tested
//! in `metrics_recipes.rs`, a process of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use curator_cache::{PathChildrenCache, StartMode};
use curator_core::metrics::{self as m, cache, recipe};
use curator_core::{ConnectionState, ErrorPolicy};
use curator_recipes::{InterProcessMutex, LockLost};
use curator_recipes::{LeaderLatch, LeaderSelector, Leadership};
use curator_test::{expire_session, TestingServer, Timing};
use tests::caches::{children_events_until, create, describe};
use tests::metrics::{counter, counter_sum, gauge, recorder, samples, settles, SERIAL};
use tests::{builder, connected, init_tracing, proxied_with_states, unique_path, wait_for};

/// A lock cycle records one wait and one hold of the mutex, the hold no longer than the cycle;
/// the release is one `delete` operation, without error; a read of a missing node counts one
/// `get_data` error of kind `no_node`; a leader latch's first term counts one leader change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_cycle_moves_wait_hold_and_operation_metrics() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let path = unique_path("metrics-lock");
    let mutex_label = [("recipe", recipe::MUTEX)];
    let (waits, holds) = (samples(m::LOCK_WAIT, &mutex_label).len(), samples(m::LOCK_HOLD, &mutex_label).len());
    let deletes = samples(m::OPERATION_DURATION, &[("op", "delete")]).len();
    let delete_errors = counter_sum(m::OPERATION_ERRORS, &[("op", "delete")]);
    let lost = counter_sum(m::LOCK_LOST, &mutex_label);

    let cycle = Instant::now();
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let guard = mutex.acquire().await.unwrap();
    guard.release().await.unwrap();
    let cycle = cycle.elapsed().as_secs_f64();

    let waited = samples(m::LOCK_WAIT, &mutex_label);
    assert_eq!(waited.len(), waits + 1, "one wait");
    assert!(waited[waits] >= 0.0 && waited[waits] <= cycle);
    let held = samples(m::LOCK_HOLD, &mutex_label);
    assert_eq!(held.len(), holds + 1, "one hold");
    assert!(held[holds] >= 0.0 && held[holds] <= cycle, "hold {} within the cycle {cycle}", held[holds]);
    assert_eq!(counter_sum(m::LOCK_LOST, &mutex_label), lost, "a release is not a loss");
    assert_eq!(samples(m::OPERATION_DURATION, &[("op", "delete")]).len(), deletes + 1, "the release's delete");
    assert_eq!(counter_sum(m::OPERATION_ERRORS, &[("op", "delete")]), delete_errors);

    let no_node = [("op", "get_data"), ("error", "no_node")];
    let before = counter(m::OPERATION_ERRORS, &no_node);
    assert!(fw.get_data().for_path(&format!("{path}/missing")).await.is_err());
    assert_eq!(counter(m::OPERATION_ERRORS, &no_node), before + 1);

    let latch_label = [("recipe", recipe::LEADER_LATCH)];
    let terms = counter(m::LEADER_CHANGES, &latch_label);
    let latch = LeaderLatch::new(&fw, &unique_path("metrics-latch"), "a").unwrap();
    latch.start().unwrap();
    latch.ready().await.unwrap();
    latch.await_leadership().await.unwrap();
    assert_eq!(counter(m::LEADER_CHANGES, &latch_label), terms + 1);
    latch.close().await;
    fw.close().await;
}

/// A forced expiry counts one expiration (reason `expired`), one lost state and one new
/// session; the gauge shows `Reconnected` (3) afterwards and `Closed` (6) after the close.
/// (Reconnections are not defined here: `expire_session` attaching to the session cuts the
/// victim's connection, which may come back on the old session before the close is applied.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_expiry_moves_the_session_metrics() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = TestingServer::shared().connect_string();
    let fw = builder(&connect).build().unwrap();
    let mut states = fw.connection_state_stream();
    let sessions = counter(m::SESSIONS, &[]);
    fw.start().unwrap();
    wait_for(&mut states, ConnectionState::Connected, |_| true).await;
    assert_eq!(counter(m::SESSIONS, &[]), sessions + 1, "the first session");
    assert_eq!(gauge(m::CONNECTION_STATE, &[("framework", fw.metrics_name())]), 1.0);

    let expired = [("reason", "expired")];
    let (expirations, all_expirations) =
        (counter(m::SESSION_EXPIRATIONS, &expired), counter_sum(m::SESSION_EXPIRATIONS, &[]));
    let lost = counter(m::CONNECTION_STATE_CHANGES, &[("state", "lost")]);
    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;

    assert_eq!(counter(m::SESSION_EXPIRATIONS, &expired), expirations + 1);
    assert_eq!(counter_sum(m::SESSION_EXPIRATIONS, &[]), all_expirations + 1, "one expiration in all");
    assert_eq!(counter(m::CONNECTION_STATE_CHANGES, &[("state", "lost")]), lost + 1);
    assert_eq!(counter(m::SESSIONS, &[]), sessions + 2, "the session after the expiry");
    assert_eq!(gauge(m::CONNECTION_STATE, &[("framework", fw.metrics_name())]), 3.0);
    fw.close().await;
    assert_eq!(gauge(m::CONNECTION_STATE, &[("framework", fw.metrics_name())]), 6.0);
}

/// A `PathChildrenCache`'s first load counts one load; a child created afterwards is one
/// watch event whose lag is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_children_cache_event_moves_the_cache_metrics() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let base = unique_path("metrics-cache");
    let label = [("cache", cache::PATH_CHILDREN_CACHE)];
    let (loads, lags) = (counter(m::CACHE_LOADS, &label), samples(m::CACHE_EVENT_LAG, &label).len());
    let durations = samples(m::CACHE_LOAD_DURATION, &label).len();

    let cache = PathChildrenCache::new(&fw, &base, true).unwrap();
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache).unwrap();
    cache.wait_initialized().await.unwrap();
    assert_eq!(counter(m::CACHE_LOADS, &label), loads + 1, "the first load");
    assert_eq!(samples(m::CACHE_LOAD_DURATION, &label).len(), durations + 1);
    assert_eq!(samples(m::CACHE_EVENT_LAG, &label).len(), lags, "a load is not a watch event");

    let changed = Instant::now();
    create(&fw, &format!("{base}/child"), b"x").await;
    let got: Vec<_> = children_events_until(&mut events, 1).await.iter().map(describe).collect();
    assert_eq!(got, vec!["added child"]);
    let within = changed.elapsed().as_secs_f64();
    settles("the event's lag is recorded", || samples(m::CACHE_EVENT_LAG, &label).len() == lags + 1).await;
    let lag = samples(m::CACHE_EVENT_LAG, &label)[lags];
    assert!((0.0..=within).contains(&lag), "lag {lag} within the {within} s from the create to the event");
    assert_eq!(counter(m::CACHE_LOADS, &label), loads + 1, "no load for an event");
    cache.close().await;
    fw.close().await;
}

/// A hold whose session is expired ends as one lost hold (reason `session_lost` under the
/// Session error policy) and one hold sample; its release afterwards counts nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_while_holding_counts_one_lost_hold() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = TestingServer::shared().connect_string();
    let fw = connected(builder(&connect).connection_state_error_policy(ErrorPolicy::Session)).await;
    let path = unique_path("metrics-lost");
    let mutex_label = [("recipe", recipe::MUTEX)];
    let session_lost = [("recipe", recipe::MUTEX), ("reason", "session_lost")];
    let (lost, all_lost) = (counter(m::LOCK_LOST, &session_lost), counter_sum(m::LOCK_LOST, &mutex_label));
    let holds = samples(m::LOCK_HOLD, &mutex_label).len();

    let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    let reason = tokio::time::timeout(Timing::new().deadline(), guard.lost()).await.expect("told of the loss");
    assert_eq!(reason, LockLost::SessionLost);
    assert_eq!(counter(m::LOCK_LOST, &session_lost), lost + 1);
    assert_eq!(counter_sum(m::LOCK_LOST, &mutex_label), all_lost + 1, "one lost hold in all");
    assert_eq!(samples(m::LOCK_HOLD, &mutex_label).len(), holds + 1);

    guard.release().await.unwrap();
    assert_eq!(counter_sum(m::LOCK_LOST, &mutex_label), all_lost + 1, "the release ends nothing more");
    assert_eq!(samples(m::LOCK_HOLD, &mutex_label).len(), holds + 1);
    fw.close().await;
}

/// A hold lost while nobody asked (no `lost()`, no `is_held()`) and then released counts as
/// one lost hold, not as a release. Before, the release marked the hold released first, so an
/// expiry that went unobserved never reached `curator_lock_lost_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_nobody_asked_about_counts_at_the_release() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = TestingServer::shared().connect_string();
    let fw = builder(&connect).connection_state_error_policy(ErrorPolicy::Session).build().unwrap();
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    wait_for(&mut states, ConnectionState::Connected, |_| true).await;
    let path = unique_path("metrics-unnoticed");
    let session_lost = [("recipe", recipe::MUTEX), ("reason", "session_lost")];
    let lost = counter(m::LOCK_LOST, &session_lost);

    let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
    let info = fw.session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    assert_eq!(counter(m::LOCK_LOST, &session_lost), lost, "nobody asked yet");
    guard.release().await.unwrap();
    assert_eq!(counter(m::LOCK_LOST, &session_lost), lost + 1);
    fw.close().await;
}

/// A short cut through a proxy is one suspension and one reconnection on the same session: no
/// new session, no expiration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_cut_counts_one_reconnection() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let (proxy, fw, mut states) = proxied_with_states().await;
    let suspended = counter(m::CONNECTION_STATE_CHANGES, &[("state", "suspended")]);
    let (reconnections, sessions) = (counter(m::RECONNECTIONS, &[]), counter(m::SESSIONS, &[]));
    let expirations = counter_sum(m::SESSION_EXPIRATIONS, &[]);

    proxy.cut();
    let seen = wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    assert!(!seen.last().unwrap().new_session);
    assert_eq!(counter(m::CONNECTION_STATE_CHANGES, &[("state", "suspended")]), suspended + 1);
    assert_eq!(counter(m::RECONNECTIONS, &[]), reconnections + 1);
    assert_eq!(counter(m::SESSIONS, &[]), sessions, "the same session");
    assert_eq!(counter_sum(m::SESSION_EXPIRATIONS, &[]), expirations);
    assert_eq!(gauge(m::CONNECTION_STATE, &[("framework", fw.metrics_name())]), 3.0);
    fw.close().await;
}

/// A `LeaderSelector` whose leadership function panics, auto-requeuing under
/// `RetryNTimes(1, 100ms)`: two terms begin, both fail, and each failure counts once in
/// `curator_leader_term_failures_total` (issue 26 item 9); the policy then gives up and no
/// further term begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_leader_counts_its_failed_terms() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let short = curator_core::RetryNTimes::new(1, std::time::Duration::from_millis(100));
    let fw = connected(builder(&TestingServer::shared().connect_string()).retry_policy(short)).await;
    let label = [("recipe", recipe::LEADER_SELECTOR)];
    let (failures, terms) = (counter(m::LEADER_TERM_FAILURES, &label), counter(m::LEADER_CHANGES, &label));
    let reported = Arc::new(AtomicU64::new(0));
    let seen = reported.clone();
    fw.add_unhandled_error_listener(move |_: &str, _: &curator_core::CuratorError| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let path = unique_path("metrics-selector");
    let s = LeaderSelector::builder(&fw, &path, |_leadership: Leadership| async { panic!("the leader fails") })
        .auto_requeue(true)
        .build()
        .unwrap();
    s.start().unwrap();
    s.ready().await.unwrap();
    settles("the policy gives up", || reported.load(Ordering::SeqCst) == 1).await;
    assert_eq!(counter(m::LEADER_CHANGES, &label), terms + 2, "a term and one retry");
    assert_eq!(counter(m::LEADER_TERM_FAILURES, &label), failures + 2, "both failed");
    s.close().await;
    fw.close().await;
}
