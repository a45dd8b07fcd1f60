//! Apache Curator's `TestSharedCount`, in Rust.
//!
//! Not ported: `testDisconnectReconnectWithMultipleClients` builds a `SharedValue` with a
//! watcher that ignores every event, which our API has no way to inject; what it checks (a
//! reconnection reads the value again, CURATOR-311) is `reconnection_reads_changes_missed_meanwhile`
//! in `shared_values.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::ConnectionState;
use curator_recipes::{SharedCount, SharedCountEvent, VersionedValue};
use curator_test::{eventually, TestingServer, Timing};
use tests::fixture::{client, init_tracing, unique_path, Fixture};

/// Collects a count's value events.
fn collect(count: &SharedCount) -> Arc<Mutex<Vec<i32>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let to = seen.clone();
    count.add_listener(move |event| {
        if let SharedCountEvent::Changed(v) = event {
            to.lock().unwrap().push(v.value);
        }
    });
    seen
}

/// Follows `TestSharedCount.testMultiClients`: five clients see every value a sixth sets, in
/// order (each set waits until all five saw it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_clients() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("count");
    let mut watchers = Vec::new();
    for _ in 0..5 {
        let fw = f.client().await;
        let count = SharedCount::new(&fw, &path, 10).expect("count");
        let seen = collect(&count);
        count.start().expect("start");
        count.ready().await.expect("start");
        watchers.push((fw, count, seen));
    }
    let count = SharedCount::new(&f.fw, &path, 10).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    let mut expected = Vec::new();
    for i in 0..100 {
        let next = fastrand::i32(0..100) * 1000 + i; // distinct, so that no change merges away
        expected.push(next);
        count.set(next).await.expect("set");
        let all_saw = eventually(Timing::new().deadline(), || async {
            watchers.iter().all(|(_, _, seen)| seen.lock().unwrap().last() == Some(&next))
        })
        .await;
        assert!(all_saw, "every client sees {next}");
    }
    for (fw, count, seen) in watchers {
        assert_eq!(*seen.lock().unwrap(), expected);
        count.close().await;
        fw.close().await;
    }
    f.close().await;
}

/// Follows `TestSharedCount.testSimple`: three compare-and-sets from the local copy succeed,
/// and the listener hears of each.
#[tokio::test]
async fn simple() {
    init_tracing();
    let f = Fixture::shared().await;
    let count = SharedCount::new(&f.fw, &unique_path("count"), 0).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    let seen = collect(&count);
    for next in [1, 2, 10] {
        let current = count.versioned_value().expect("value");
        assert!(count.try_set(&current, next).await.expect("try set"));
        assert!(eventually(Timing::new().deadline(), || async { seen.lock().unwrap().last() == Some(&next) }).await);
    }
    assert_eq!(count.count().expect("count"), 10);
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 10]);
    f.close().await;
}

/// Follows `TestSharedCount.testSimpleVersioned`: versions 0, 1, 2, 3; a wrong value or a
/// wrong version is refused; a change made by someone else makes the old version fail.
#[tokio::test]
async fn simple_versioned() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("count");
    let count = SharedCount::new(&f.fw, &path, 0).expect("count");
    count.start().expect("start");
    count.ready().await.expect("start");
    let mut current = count.versioned_value().expect("value");
    assert_eq!(current.version, 0);
    for (next, version) in [(1, 1), (5, 2), (10, 3)] {
        assert!(count.try_set(&current, next).await.expect("try set"));
        current = count.versioned_value().expect("value");
        assert_eq!((current.version, current.value), (version, next));
    }
    assert!(!count.try_set(&VersionedValue { version: 3, value: 20 }, 7).await.expect("wrong value"));
    assert!(!count.try_set(&VersionedValue { version: 10, value: 10 }, 7).await.expect("wrong version"));
    f.fw.set_data().for_path(&path, SharedCount::to_bytes(88)).await.expect("set behind its back");
    assert!(!count.try_set(&current, 234).await.expect("server changed"));
    assert_eq!(count.count().expect("count"), 88, "a failed try_set reads the node again");
    f.close().await;
}

/// Follows `TestSharedCount.testMultiClientVersioned`: two clients alternate; the one with a
/// stale version fails, then succeeds with the fresh one; the first hears both changes.
#[tokio::test]
async fn multi_client_versioned() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("count");
    let fw2 = f.client().await;
    let count1 = SharedCount::new(&f.fw, &path, 0).expect("count");
    let count2 = SharedCount::new(&fw2, &path, 0).expect("count");
    count1.start().expect("start");
    count1.ready().await.expect("start");
    count2.start().expect("start");
    count2.ready().await.expect("start");
    assert!(count1.try_set(&count1.versioned_value().unwrap(), 10).await.unwrap());
    assert!(eventually(Timing::new().deadline(), || async { count2.count().unwrap() == 10 }).await);
    assert!(count2.try_set(&count2.versioned_value().unwrap(), 20).await.unwrap());
    assert!(eventually(Timing::new().deadline(), || async { count1.count().unwrap() == 20 }).await);
    let seen = collect(&count1);
    let (v1, v2) = (count1.versioned_value().unwrap(), count2.versioned_value().unwrap());
    assert!(count2.try_set(&v2, 30).await.unwrap());
    assert!(!count1.try_set(&v1, 40).await.unwrap());
    let v1 = count1.versioned_value().unwrap();
    assert!(count1.try_set(&v1, 40).await.unwrap());
    assert!(eventually(Timing::new().deadline(), || async { seen.lock().unwrap().last() == Some(&40) }).await);
    fw2.close().await;
    f.close().await;
}

/// Follows `TestSharedCount.testMultiClientDifferentSeed`: the first seed wins.
#[tokio::test]
async fn multi_client_different_seed() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("count");
    let fw2 = f.client().await;
    let count1 = SharedCount::new(&f.fw, &path, 10).expect("count");
    let count2 = SharedCount::new(&fw2, &path, 20).expect("count");
    count1.start().expect("start");
    count1.ready().await.expect("start");
    count2.start().expect("start");
    count2.ready().await.expect("start");
    assert_eq!(count1.count().unwrap(), 10);
    assert_eq!(count2.count().unwrap(), 10);
    fw2.close().await;
    f.close().await;
}

/// Follows `TestSharedCount.testDisconnectEventOnWatcherDoesNotRetry`: with a patient retry
/// policy (10 x 1 s), stopping the server still gives `Suspended` to the count's listeners
/// within 5 s (its re-read never stands in the way).
#[tokio::test]
async fn disconnect_event_does_not_wait_for_retries() {
    init_tracing();
    let mut server = TestingServer::start().await.expect("server");
    let fw = tests::fixture::connected(
        tests::fixture::builder(&server.connect_string())
            .retry_policy(curator_core::RetryNTimes::new(10, Duration::from_secs(1))),
    )
    .await;
    let count = SharedCount::new(&fw, "/count", 10).expect("count");
    let mut events = count.events();
    count.start().expect("start");
    count.ready().await.expect("start");
    server.stop().await.expect("stop");
    let suspended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.next().await {
            if matches!(event, SharedCountEvent::State(ConnectionState::Suspended)) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(matches!(suspended, Ok(true)));
    count.close().await;
    fw.close().await;
}

/// Follows `TestSharedCount.testDisconnectReconnectEventDoesNotFireValueWatcher`: a set, the
/// server stopped and restarted, a try_set: the listener hears `Suspended` and `Reconnected`,
/// and of the value changes only (Curator 5.x also calls it back on the reconnection itself,
/// CURATOR-311, with an unchanged value; ours re-reads then too, but reports a value only when
/// the node changed: 2 changes here).
#[tokio::test]
async fn disconnect_reconnect_reports_changes_only() {
    init_tracing();
    let mut server = TestingServer::start().await.expect("server");
    let fw = client(&server.connect_string()).await;
    let count = SharedCount::new(&fw, "/count", 10).expect("count");
    let events = Arc::new(Mutex::new(Vec::new()));
    let to = events.clone();
    count.add_listener(move |event| to.lock().unwrap().push(event.clone()));
    count.start().expect("start");
    count.ready().await.expect("start");
    let changes = || events.lock().unwrap().iter().filter(|e| matches!(e, SharedCountEvent::Changed(_))).count();
    let has = |state: ConnectionState| {
        events.lock().unwrap().iter().any(|e| matches!(e, SharedCountEvent::State(s) if *s == state))
    };
    count.set(11).await.expect("set");
    assert!(eventually(Timing::new().deadline(), || async { changes() == 1 }).await);
    server.stop().await.expect("stop");
    assert!(eventually(Timing::new().deadline(), || async { has(ConnectionState::Suspended) }).await);
    server.restart().await.expect("restart");
    assert!(eventually(Timing::new().deadline(), || async { has(ConnectionState::Reconnected) }).await);
    assert_eq!(changes(), 1);
    assert!(count.try_set(&count.versioned_value().unwrap(), 12).await.expect("try set"));
    assert!(eventually(Timing::new().deadline(), || async { changes() == 2 }).await);
    assert!(!eventually(Duration::from_millis(300), || async { changes() > 2 }).await, "no spurious change");
    count.close().await;
    fw.close().await;
}
