//! `PersistentWatcher` against a real ZooKeeper: Curator's `TestPersistentWatcher` in Rust, and
//! the faults it must outlive (a connection cut through a `ChaosProxy`, a session expiry), each
//! under the test builder's defaults, under `ErrorPolicy::Session` and with a one-retry policy.
//!
//! Where we differ from Curator on purpose: listeners get node events only, not the session's
//! `Disconnected`/`SyncConnected` events (the resets and the framework's connection states say
//! that), so the port of `internalTest` waits on the framework's `Lost` instead of a
//! `Disconnected` event. `testCuratorListenersNotLeaking` checks what could leak here instead
//! of Curator's listener count: the watch on the server (this recipe adds no framework
//! listener).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::zk::{EventType, SessionState, WatchedEvent};
use curator_core::LifeState;
use curator_core::{ConnectionState, CuratorError, CuratorFramework, CuratorFrameworkBuilder, ErrorPolicy};
use curator_core::{RetryNTimes, RetryOneTime};
use curator_recipes::{PersistentWatcher, Reset, ResetCause};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::caches::{create, next, set, within};
use tests::{builder, client, connected, init_tracing, unique_path, wait_for};

/// The framework options a fault scenario runs under.
#[derive(Debug, Clone, Copy)]
enum Setup {
    /// The test builder's options (`ErrorPolicy::Standard`, 20 retries 100 ms apart).
    Standard,
    /// `ErrorPolicy::Session`.
    SessionPolicy,
    /// A retry policy that gives up after one retry 100 ms later.
    ShortRetry,
}

impl Setup {
    fn apply(self, b: CuratorFrameworkBuilder) -> CuratorFrameworkBuilder {
        match self {
            Setup::Standard => b,
            Setup::SessionPolicy => b.connection_state_error_policy(ErrorPolicy::Session),
            Setup::ShortRetry => b.retry_policy(RetryNTimes::new(1, Duration::from_millis(100))),
        }
    }
}

/// Reads node events until one of `kind` on `path`; returns it.
async fn next_event(events: &mut curator_core::EventStream<WatchedEvent>, kind: EventType, path: &str) {
    within(&format!("{kind:?} on {path}"), async {
        loop {
            let event = next(events).await;
            if event.event_type == kind && event.path == path {
                return;
            }
        }
    })
    .await
}

/// Reads resets until one with `cause`; returns it.
async fn next_reset(resets: &mut curator_core::EventStream<Reset>, cause: ResetCause) -> Reset {
    within(&format!("a reset ({cause:?})"), async {
        loop {
            let reset = next(resets).await;
            if reset.cause == cause {
                return reset;
            }
        }
    })
    .await
}

/// Whether the server at `connect` holds a watch on exactly `path` (`wchp` lists the watched
/// paths, persistent watches included).
async fn server_watches(connect: &str, path: &str) -> bool {
    let out = curator_test::four_letter_word(connect, "wchp").await.unwrap_or_default();
    out.lines().any(|line| line.trim() == path)
}

/// The final event listeners get when the framework closes.
fn is_closed_event(event: &WatchedEvent) -> bool {
    event.event_type == EventType::Session && event.session_state == SessionState::Closed
}

/// Follows Curator's `TestPersistentWatcher.internalTest` (via `testConnectionLostRecursive` and
/// `testConnectionLost`): the server stops until the session is lost, comes back, and the
/// watch is set again on the new session (a `NewSession` reset), recursive or not. Curator's
/// one-retry policy (`RetryOneTime(1)`) is kept.
async fn connection_lost(recursive: bool) {
    init_tracing();
    let mut server = TestingServer::start().await.expect("start a TestingServer");
    let fw =
        connected(builder(&server.connect_string()).retry_policy(RetryOneTime::new(Duration::from_millis(1)))).await;
    let mut states = fw.connection_state_stream();
    let base = format!("{}/main", unique_path("pw-lost"));
    let child = format!("{base}/a");
    let watcher = PersistentWatcher::new(&fw, &base, recursive).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    let first = next_reset(&mut resets, ResetCause::Started).await;

    create(&fw, &child, b"").await;
    let event = next(&mut events).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, base.as_str()));
    let event = next(&mut events).await;
    if recursive {
        assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, child.as_str()));
    } else {
        assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeChildrenChanged, base.as_str()));
    }

    server.stop().await.unwrap();
    wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    server.restart().await.unwrap();
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    // Curator sleeps here; we wait for the watch to be set again.
    let again = next_reset(&mut resets, ResetCause::NewSession).await;
    assert!(again.generation > first.generation, "{again:?} after {first:?}");

    if recursive {
        set(&fw, &child, b"foo").await;
        next_event(&mut events, EventType::NodeDataChanged, &child).await;
    }
    set(&fw, &base, b"bar").await;
    next_event(&mut events, EventType::NodeDataChanged, &base).await;
    watcher.close().await;
    fw.close().await;
}

#[tokio::test]
async fn connection_lost_recursive() {
    connection_lost(true).await;
}

#[tokio::test]
async fn connection_lost_not_recursive() {
    connection_lost(false).await;
}

/// Follows Curator's `TestPersistentWatcher.testNamespacedWatching`: a watcher on a namespaced
/// handle sees paths relative to the namespace, and when the framework closes its listeners get
/// a final `Closed` session event, then the stream ends.
#[tokio::test]
async fn namespaced_watching() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = connected(builder(&connect).retry_policy(RetryOneTime::new(Duration::from_millis(1)))).await;
    let ns = unique_path("pw-ns").trim_start_matches('/').to_string();
    let top = fw.using_namespace(Some(&ns)).unwrap();
    let watcher = PersistentWatcher::new(&top, "/main", true).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    next_reset(&mut resets, ResetCause::Started).await;

    create(&fw, &format!("/{ns}/main"), b"").await;
    create(&fw, &format!("/{ns}/main/a"), b"").await;
    let event = next(&mut events).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/main"));
    let event = next(&mut events).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/main/a"));

    fw.close().await;
    let event = next(&mut events).await;
    assert!(is_closed_event(&event), "{event:?}");
    assert!(within("the stream ends", events.next()).await.is_none());
}

/// Follows Curator's `TestPersistentWatcher.testConcurrentClientClose`: the framework closes
/// right after the watcher starts (before it may have connected); listeners get the final
/// `Closed` event.
#[tokio::test]
async fn concurrent_client_close() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = builder(&connect).retry_policy(RetryOneTime::new(Duration::from_millis(1))).build().unwrap();
    fw.start().unwrap();
    let watcher = PersistentWatcher::new(&fw, &format!("{}/main", unique_path("pw-conc")), true).unwrap();
    let mut events = watcher.events();
    watcher.start().unwrap();
    fw.close().await;
    let event = next(&mut events).await;
    assert!(is_closed_event(&event), "{event:?}");
    assert!(within("the stream ends", events.next()).await.is_none());
}

/// Follows Curator's `TestPersistentWatcher.testAfterClientClose`: a watcher started on a closed
/// framework and closed at once gives its listeners the `Closed` event, a callback and a
/// stream alike. The event is queued inside `start()`, as Curator sends it there; before, a task
/// sent it, and a close right after `start()` ended the listeners first (issue 27, item 2).
#[tokio::test]
async fn after_client_close() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = builder(&connect).retry_policy(RetryOneTime::new(Duration::from_millis(1))).build().unwrap();
    fw.start().unwrap();
    fw.close().await;
    let watcher = PersistentWatcher::new(&fw, &format!("{}/main", unique_path("pw-after")), true).unwrap();
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = heard.clone();
    watcher.add_listener(move |event| {
        if is_closed_event(event) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut events = watcher.events();
    watcher.start().unwrap();
    watcher.close().await;
    assert!(events.next().await.as_ref().is_some_and(is_closed_event), "the stream gets the final event");
    assert!(events.next().await.is_none(), "and then ends");
    assert!(eventually(Timing::new().deadline(), || async { heard.load(Ordering::SeqCst) == 1 }).await);
}

/// Follows Curator's `TestPersistentWatcher.testCuratorListenersNotLeaking` (GH-1292): 100
/// watchers started and closed on one framework leave nothing behind. Curator counted its
/// framework listeners; this recipe adds none, so what could leak is the watch itself: the
/// server must hold no watch on the path once they are closed.
#[tokio::test]
async fn closed_watchers_leave_no_watch() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = client(&connect).await;
    let base = format!("{}/main", unique_path("pw-leak"));
    for _ in 0..100 {
        let watcher = PersistentWatcher::new(&fw, &base, true).unwrap();
        watcher.start().unwrap();
        watcher.close().await;
    }
    // One that did get its watch in place, to show that the check below can see a watch.
    let watcher = PersistentWatcher::new(&fw, &base, true).unwrap();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    next_reset(&mut resets, ResetCause::Started).await;
    assert!(server_watches(&connect, &base).await, "wchp lists the watch while it is set");
    drop(watcher);
    assert!(
        eventually(Timing::new().deadline(), || async { !server_watches(&connect, &base).await }).await,
        "the server still holds a watch on {base}"
    );
    fw.close().await;
}

/// A connection cut through a proxy: the watch is added again on the same session (a
/// `Reconnected` reset on the same generation) and later changes are seen.
async fn keeps_watching_after_a_cut(setup: Setup) {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = connected(setup.apply(builder(&proxy.connect_string()))).await;
    let admin = client(&server.connect_string()).await;
    let base = unique_path("pw-cut");
    let watcher = PersistentWatcher::new(&fw, &base, true).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    let first = next_reset(&mut resets, ResetCause::Started).await;
    create(&admin, &base, b"").await;
    next_event(&mut events, EventType::NodeCreated, &base).await;

    proxy.cut();
    let again = next_reset(&mut resets, ResetCause::Reconnected).await;
    assert_eq!(again.generation, first.generation, "same session");
    set(&admin, &base, b"after the cut").await;
    next_event(&mut events, EventType::NodeDataChanged, &base).await;
    let child = format!("{base}/child");
    create(&admin, &child, b"").await;
    next_event(&mut events, EventType::NodeCreated, &child).await;
    watcher.close().await;
    fw.close().await;
    admin.close().await;
}

#[tokio::test]
async fn keeps_watching_after_a_cut_standard() {
    keeps_watching_after_a_cut(Setup::Standard).await;
}

#[tokio::test]
async fn keeps_watching_after_a_cut_session_policy() {
    keeps_watching_after_a_cut(Setup::SessionPolicy).await;
}

#[tokio::test]
async fn keeps_watching_after_a_cut_short_retry() {
    keeps_watching_after_a_cut(Setup::ShortRetry).await;
}

/// A session expiry: the watch is added on the new session (a `NewSession` reset on a later
/// generation) and a change made after that is seen.
async fn keeps_watching_after_expiry(setup: Setup) {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = connected(setup.apply(builder(&connect))).await;
    let base = unique_path("pw-expiry");
    let watcher = PersistentWatcher::new(&fw, &base, false).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    let first = next_reset(&mut resets, ResetCause::Started).await;
    create(&fw, &base, b"").await;
    next_event(&mut events, EventType::NodeCreated, &base).await;

    let info = fw.session().await.unwrap().client().session().clone();
    curator_test::expire_session(&connect, &info).await.unwrap();
    let again = next_reset(&mut resets, ResetCause::NewSession).await;
    assert!(again.generation > first.generation, "{again:?} after {first:?}");
    set(&fw, &base, b"on the new session").await;
    next_event(&mut events, EventType::NodeDataChanged, &base).await;
    watcher.close().await;
    fw.close().await;
}

#[tokio::test]
async fn keeps_watching_after_expiry_standard() {
    keeps_watching_after_expiry(Setup::Standard).await;
}

#[tokio::test]
async fn keeps_watching_after_expiry_session_policy() {
    keeps_watching_after_expiry(Setup::SessionPolicy).await;
}

#[tokio::test]
async fn keeps_watching_after_expiry_short_retry() {
    keeps_watching_after_expiry(Setup::ShortRetry).await;
}

/// A recursive watcher sees a grandchild's changes, a non-recursive one on the same path does
/// not (it sees the node's own changes and its children list). Each has its own framework: one
/// session keeps one watch mode per path on servers before 3.9.
#[tokio::test]
async fn recursive_sees_grandchildren_and_plain_does_not() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let (fw_rec, fw_plain) = (client(&connect).await, client(&connect).await);
    let base = unique_path("pw-depth");
    let child = format!("{base}/child");
    let grandchild = format!("{child}/grandchild");
    create(&fw_rec, &child, b"").await;
    let recursive = PersistentWatcher::new(&fw_rec, &base, true).unwrap();
    let plain = PersistentWatcher::new(&fw_plain, &base, false).unwrap();
    assert!(recursive.is_recursive() && !plain.is_recursive());
    let (mut rec_events, mut plain_events) = (recursive.events(), plain.events());
    let (mut rec_resets, mut plain_resets) = (recursive.resets(), plain.resets());
    recursive.start().unwrap();
    plain.start().unwrap();
    next_reset(&mut rec_resets, ResetCause::Started).await;
    next_reset(&mut plain_resets, ResetCause::Started).await;

    create(&fw_rec, &grandchild, b"").await;
    set(&fw_rec, &grandchild, b"changed").await;
    set(&fw_rec, &base, b"marker").await;
    let seen = |e: &WatchedEvent| (e.event_type, e.path.clone());
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(seen(&next(&mut rec_events).await));
    }
    assert_eq!(
        got,
        vec![
            (EventType::NodeCreated, grandchild.clone()),
            (EventType::NodeDataChanged, grandchild.clone()),
            (EventType::NodeDataChanged, base.clone()),
        ]
    );
    // The first event the plain watcher gets is the marker: nothing of the grandchild.
    assert_eq!(seen(&next(&mut plain_events).await), (EventType::NodeDataChanged, base.clone()));
    create(&fw_rec, &format!("{base}/second"), b"").await;
    assert_eq!(seen(&next(&mut plain_events).await), (EventType::NodeChildrenChanged, base.clone()));
    recursive.close().await;
    plain.close().await;
    fw_rec.close().await;
    fw_plain.close().await;
}

/// Bad input is a typed error, and the lifecycle is checked: `ready` before a start is
/// `NotStarted`, after it `Ok` once the watch is in place.
#[tokio::test]
async fn bad_paths_and_lifecycle_are_typed_errors() {
    init_tracing();
    let fw = client(&TestingServer::shared().connect_string()).await;
    for bad in ["", "relative", "/trailing/", "/a//b", "/a/./b", "/nul\u{0}"] {
        let err = PersistentWatcher::new(&fw, bad, true).expect_err(bad);
        assert!(matches!(err, CuratorError::InvalidPath { .. }), "{bad:?}: {err:?}");
    }
    let watcher = PersistentWatcher::new(&fw, &unique_path("pw-life"), true).unwrap();
    let mut resets = watcher.resets();
    assert!(matches!(watcher.ready().await, Err(CuratorError::NotStarted { what: "PersistentWatcher" })));
    assert_eq!(watcher.state(), LifeState::Latent);
    watcher.start().unwrap();
    within("ready", watcher.ready()).await.unwrap();
    // Ready means the first attempt is done: here the watch is in place, its reset queued.
    assert_eq!(resets.try_next().map(|r| r.cause), Some(ResetCause::Started));
    assert!(matches!(watcher.start(), Err(CuratorError::AlreadyStarted { what: "PersistentWatcher" })));
    watcher.close().await;
    watcher.close().await;
    assert_eq!(watcher.state(), LifeState::Closed);
    assert!(matches!(watcher.start(), Err(CuratorError::AlreadyClosed { .. })));
    let never_started = PersistentWatcher::new(&fw, &unique_path("pw-life"), true).unwrap();
    never_started.close().await;
    assert!(matches!(never_started.start(), Err(CuratorError::AlreadyClosed { .. })));
    fw.close().await;
}

/// `close()` (and dropping) stops the watcher: the streams end without a final event, callbacks
/// hear nothing of later changes, and the server no longer holds the watch. Listeners can be
/// removed, and reset callbacks run.
#[tokio::test]
async fn close_stops_events() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw = client(&connect).await;
    let base = unique_path("pw-close");
    create(&fw, &base, b"").await;
    let watcher = PersistentWatcher::new(&fw, &base, false).unwrap();
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = heard.clone();
    watcher.add_listener(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let removed = watcher.add_listener(|_| panic!("removed before any event"));
    assert!(watcher.remove_listener(removed));
    assert!(!watcher.remove_listener(removed));
    let reset_calls = Arc::new(AtomicUsize::new(0));
    let calls = reset_calls.clone();
    let reset_id = watcher.add_reset_listener(move || {
        calls.fetch_add(1, Ordering::SeqCst);
    });
    let mut events = watcher.events();
    watcher.start().unwrap();
    assert!(eventually(Timing::new().deadline(), || async { reset_calls.load(Ordering::SeqCst) == 1 }).await);
    assert!(watcher.remove_reset_listener(reset_id));
    set(&fw, &base, b"one").await;
    next_event(&mut events, EventType::NodeDataChanged, &base).await;
    assert!(eventually(Timing::new().deadline(), || async { heard.load(Ordering::SeqCst) == 1 }).await);

    watcher.close().await;
    assert!(within("the stream ends", events.next()).await.is_none(), "no final event after close()");
    assert!(
        eventually(Timing::new().deadline(), || async { !server_watches(&connect, &base).await }).await,
        "the watch is removed from the server"
    );
    // A change after the close: another watcher sees it, the closed one's callback does not.
    let witness = PersistentWatcher::new(&fw, &base, false).unwrap();
    let mut witness_events = witness.events();
    let mut witness_resets = witness.resets();
    witness.start().unwrap();
    next_reset(&mut witness_resets, ResetCause::Started).await;
    set(&fw, &base, b"two").await;
    next_event(&mut witness_events, EventType::NodeDataChanged, &base).await;
    drop(witness);
    assert!(within("the witness's stream ends", witness_events.next()).await.is_none(), "dropping closes");
    assert_eq!(heard.load(Ordering::SeqCst), 1, "the closed watcher heard nothing more");
    fw.close().await;
}

/// A watcher started before its framework waits for it: the watch is set once the framework
/// connects.
#[tokio::test]
async fn started_before_the_framework() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let fw: CuratorFramework = builder(&connect).build().unwrap();
    let base = unique_path("pw-early");
    let watcher = PersistentWatcher::new(&fw, &base, true).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    fw.start().unwrap();
    next_reset(&mut resets, ResetCause::Started).await;
    create(&fw, &base, b"").await;
    next_event(&mut events, EventType::NodeCreated, &base).await;
    watcher.close().await;
    fw.close().await;
}

/// The framework declares its session lost (replies stop; requests still reach the server, so
/// the server keeps the session) while a clone of the old session's client is still held: that
/// client reconnects to its live session when replies flow again, and `PersistentWatch::next`
/// would add the watch again there. The watcher must follow the framework to its new session
/// (a `NewSession` reset, on a later generation) instead of staying on the session the
/// framework abandoned; a change is then seen through the new session's watch. (The watcher
/// leaves on the framework's `Lost`; without that check it still leaves, later, because core's
/// `register_again` refuses a session of an older generation: checked by removing the check.)
#[tokio::test]
async fn follows_the_framework_when_an_abandoned_session_lingers() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = connected(builder(&proxy.connect_string())).await;
    let mut states = fw.connection_state_stream();
    let admin = client(&server.connect_string()).await;
    let base = unique_path("pw-linger");
    let watcher = PersistentWatcher::new(&fw, &base, true).unwrap();
    let mut events = watcher.events();
    let mut resets = watcher.resets();
    watcher.start().unwrap();
    let first = next_reset(&mut resets, ResetCause::Started).await;
    // Keeps the first session's client alive after the framework drops it.
    let lingering = fw.session().await.unwrap();

    proxy.pause_replies();
    let lost = wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    proxy.pass();
    let lost_generation = lost.last().map(|e| e.generation).unwrap_or_default();
    let again = next_reset(&mut resets, ResetCause::NewSession).await;
    assert!(again.generation > lost_generation && again.generation > first.generation, "{again:?} after {first:?}");
    create(&admin, &base, b"").await;
    next_event(&mut events, EventType::NodeCreated, &base).await;
    drop(lingering);
    watcher.close().await;
    fw.close().await;
    admin.close().await;
}
