//! The framework's one listener queue (`curator_core::listeners`) as its users see it: events
//! reach a `CuratorListener` in the order they were delivered even when the listener is slow,
//! a panicking listener keeps receiving, and a removed listener receives nothing more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{CuratorEvent, CuratorFramework};
use curator_test::{eventually, TestingServer, Timing};
use tests::{builder, connected, unique_path};
use tokio::sync::mpsc;

fn server() -> String {
    TestingServer::shared().connect_string()
}

/// Before the one queue, each event went to its own blocking task: a listener slow on the first
/// event saw the later ones first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_listener_still_sees_events_in_order() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("listener-order");
    fw.create().for_path(&base, Vec::new()).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let record = seen.clone();
    fw.add_listener(move |_: &CuratorFramework, e: CuratorEvent| {
        if record.lock().unwrap().is_empty() && started_tx.send(()).is_ok() {
            // The scenario: the listener is slow on the first event only.
            std::thread::sleep(Duration::from_millis(300));
        }
        record.lock().unwrap().push(e.path.clone());
    });
    let paths: Vec<String> = (0..10).map(|i| format!("{base}/n{i}")).collect();
    fw.create().for_path(&paths[0], Vec::new()).in_background_to_listeners();
    tokio::time::timeout(Timing::new().deadline(), started.recv()).await.expect("first event delivered");
    // The others are delivered while the listener is still busy with the first.
    for p in &paths[1..] {
        fw.create().for_path(p, Vec::new()).in_background_to_listeners();
        assert!(
            eventually(Timing::new().deadline(), || async { fw.check_exists().for_path(p).await.unwrap().is_some() })
                .await
        );
    }
    assert!(eventually(Timing::new().deadline(), || async { seen.lock().unwrap().len() == paths.len() }).await);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], paths[0], "the slow first event was overtaken: {seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    let mut expected = paths.clone();
    expected.sort();
    assert_eq!(sorted, expected, "every event exactly once");
    fw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_listener_keeps_receiving_and_a_removed_one_stops() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("listener-panic");
    let (tx, mut rx) = mpsc::unbounded_channel();
    fw.add_listener(move |_: &CuratorFramework, e: CuratorEvent| {
        let _ = tx.send(e.path.clone());
        panic!("listener bug on {}", e.path);
    });
    let (removed_tx, mut removed_rx) = mpsc::unbounded_channel();
    let removed = fw.add_listener(move |_: &CuratorFramework, e: CuratorEvent| drop(removed_tx.send(e.path)));
    fw.create().for_path(&base, Vec::new()).in_background_to_listeners();
    let first = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.expect("in time");
    assert_eq!(first.as_deref(), Some(base.as_str()));
    assert_eq!(
        tokio::time::timeout(Timing::new().deadline(), removed_rx.recv()).await.expect("in time"),
        Some(base.clone())
    );
    assert!(fw.remove_listener(removed));
    assert!(!fw.remove_listener(removed), "already removed");
    let second = format!("{base}/after-panic");
    fw.create().for_path(&second, Vec::new()).in_background_to_listeners();
    let next = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.expect("in time");
    assert_eq!(next.as_deref(), Some(second.as_str()), "the panicking listener still receives");
    assert!(removed_rx.try_recv().is_err(), "the removed listener got nothing more");
    fw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_state_listeners_can_be_removed() {
    let fw = builder(&server()).build().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = fw.add_connection_state_listener(move |_, e| {
        let _ = tx.send(e.state);
    });
    fw.start().unwrap();
    let first = tokio::time::timeout(Timing::new().deadline(), rx.recv()).await.expect("in time");
    assert_eq!(
        first,
        Some(curator_core::ConnectionState::Connected),
        "added before start, it hears the first connection"
    );
    assert!(fw.remove_connection_state_listener(id));
    fw.close().await;
    assert_eq!(rx.recv().await, None, "removed: it never hears Closed, and its queue ends");
}

/// Every event stream the crates hand out is a `futures::Stream` (issue 28 item 4): `StreamExt`
/// combinators and `select!` over streams work on the framework's connection states and on a
/// cache's events as on any stream, and a stream ends when its source closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_futures_streams() {
    use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
    use curator_core::ConnectionState;
    use futures::StreamExt;

    let server = TestingServer::shared();
    let fw = builder(&server.connect_string()).build().unwrap();
    let states = fw.connection_state_stream();
    fw.start().unwrap();
    let mut connected =
        states.map(|event| event.state).filter(|s| std::future::ready(*s == ConnectionState::Connected));
    let first = tokio::time::timeout(Timing::new().deadline(), connected.next()).await.expect("a Connected event");
    assert_eq!(first, Some(ConnectionState::Connected));

    let path = unique_path("streams");
    let cache = PathChildrenCache::new(&fw, &path, true).unwrap();
    let mut added = Box::pin(cache.events().filter_map(|event| async move {
        match event {
            PathChildrenCacheEvent::ChildAdded(child) => Some(child.name().to_string()),
            _ => None,
        }
    }));
    let mut ended = Box::pin(cache.events().count());
    cache.start(StartMode::Normal).unwrap();
    cache.wait_initialized().await.unwrap();
    fw.create().creating_parents_if_needed().for_path(&format!("{path}/a"), Vec::new()).await.unwrap();
    let name = tokio::select! {
        name = added.next() => name,
        _ = &mut ended => panic!("the stream ended before the child was added"),
        _ = tokio::time::sleep(Timing::new().deadline()) => panic!("no ChildAdded event"),
    };
    assert_eq!(name.as_deref(), Some("a"));
    cache.close().await;
    let seen = tokio::time::timeout(Timing::new().deadline(), ended).await.expect("the stream ends with the cache");
    assert!(seen >= 1, "the second stream saw the add too ({seen} events)");
    fw.close().await;
}
