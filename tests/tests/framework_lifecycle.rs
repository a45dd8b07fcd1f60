//! The framework's life: building (options checked), starting, connecting (what the connection
//! timeout means, how failed attempts back off and are logged), operations before start and
//! after close, and what `close()` does to operations and locks in flight. Ports of Apache
//! Curator's lifecycle tests from `TestFramework` and `TestFrameworkEdges` are at the end.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorFramework};
use curator_core::{RetryNTimes, RetryOneTime, RetryPolicy};
use curator_recipes::{InterProcessMutex, LockLost};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::logs::{record_events, Events};
use tests::{builder, connected, unique_path, wait_for};

/// How many events of the framework (target `curator_core...`) at `level` contain `text`.
fn count(seen: &Events, level: tracing::Level, text: &str) -> usize {
    seen.at(level, "curator_core").iter().filter(|m| m.contains(text)).count()
}

/// A port that refuses connections (nothing listens on it).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A "server" that accepts every TCP connection and closes it at once, counting them: each
/// accepted connection is one attempt of the client to open a session.
async fn slamming_door() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (addr, accepted)
}

// --- 1. the connection timeout -----------------------------------------------------------------

/// The connection timeout is how long an operation waits for a connection (Curator's meaning),
/// not a bound on each attempt to connect: Curator's own tests use 1 ms and still connect.
/// Before, it was passed to zookeeper-client as its connection timeout and also bounded each
/// attempt to open a session, so with 1 ms the framework never connected (block_until_connected
/// failed after its whole wait with "no session within 1ms").
/// A framework's close sends no RemoveWatches. The session manager's watches (its
/// session-events watch and, with the ensemble tracker on, its watch on `/zookeeper/config`) are
/// dropped after the session ended, when there is nothing to remove: the server drops a closed
/// session's watches itself. Before, the close sent one RemoveWatches for each, just ahead of
/// the CloseSession: 2 requests a framework that Curator does not pay (issue 30's counts).
#[tokio::test]
async fn close_sends_no_remove_watches() {
    const REMOVE_WATCHES: i32 = 18;
    const CLOSE_SESSION: i32 = -11;
    const ADD_WATCH: i32 = 106;
    for tracker in [true, false] {
        let server = TestingServer::shared();
        let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
        proxy.record_requests(true);
        let fw = connected(builder(&proxy.connect_string()).ensemble_tracker(tracker)).await;
        let seen = Mutex::new(Vec::new());
        let watching = || async {
            let mut seen = seen.lock().unwrap();
            seen.extend(proxy.take_seen_requests());
            let config = seen.iter().any(|r| r.path.as_deref() == Some("/zookeeper/config"));
            seen.iter().any(|r| r.opcode == ADD_WATCH) && (config || !tracker)
        };
        assert!(eventually(Timing::new().deadline(), watching).await, "tracker {tracker}: the manager's watches");
        fw.close().await;
        let mut seen = seen.into_inner().unwrap();
        seen.extend(proxy.take_seen_requests());
        let opcodes: Vec<i32> = seen.iter().map(|r| r.opcode).collect();
        assert!(opcodes.contains(&CLOSE_SESSION), "tracker {tracker}: the session was closed: {opcodes:?}");
        assert!(!opcodes.contains(&REMOVE_WATCHES), "tracker {tracker}: RemoveWatches sent on close: {opcodes:?}");
    }
}

#[tokio::test]
async fn a_one_millisecond_connection_timeout_still_connects() {
    let server = TestingServer::shared();
    let fw = builder(&server.connect_string()).connection_timeout(Duration::from_millis(1)).build().unwrap();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.expect("connects despite a 1 ms connection timeout");
    let path = unique_path("one-ms");
    fw.create().for_path(&path, b"x".to_vec()).await.expect("an operation once connected");
    assert_eq!(fw.get_data().for_path(&path).await.unwrap(), b"x");
    // The connection stays up: zookeeper-client's idle timeout is its own default again, not
    // 1 ms (before, the connection was declared dead after a few idle milliseconds).
    let session = fw.session().await.unwrap().id();
    tokio::time::sleep(Duration::from_millis(300)).await; // idle on purpose, not to synchronise
    fw.check_exists().for_path(&path).await.unwrap();
    assert_eq!(fw.session().await.unwrap().id(), session);
    assert_eq!(fw.connection_state(), ConnectionState::Connected, "no suspension while idle");
    fw.close().await;
}

// --- 2. backoff and logging while no server answers --------------------------------------------

/// A framework whose server accepts and drops every connection backs off between attempts
/// (ExponentialBackoffForever from 200 ms, doubling to 5 s: at most 6 attempts in 6 s) and logs
/// one warning for the whole streak. Before, each of its attempts ran zookeeper-client's own
/// cycle over the hosts (from 100 ms, restarting at no delay every time the framework tried
/// again), about 14 attempts in 6 s. Each failed attempt is followed by one TLS probe
/// connection (architecture.md 3.1), so the server accepts at most two connections an attempt.
#[tokio::test]
async fn failed_attempts_back_off_with_one_warning_per_streak() {
    let (seen, _guard) = record_events();
    let (addr, accepted) = slamming_door().await;
    let fw = builder(&addr).build().unwrap();
    fw.start().unwrap();
    let window = Duration::from_secs(6);
    let err = fw.block_until_connected(window).await.expect_err("nothing serves");
    assert!(matches!(err, CuratorError::NotConnected { .. }), "{err:?}");
    let attempts = count(&seen, tracing::Level::DEBUG, "opening a session");
    // Lots of slack: the policy allows 6 in this window; a loaded machine makes fewer.
    assert!((2..=9).contains(&attempts), "{attempts} attempts in {window:?}");
    let connections = accepted.load(Ordering::SeqCst);
    assert!(connections <= 2 * attempts, "{connections} connections for {attempts} attempts and their probes");
    assert_eq!(count(&seen, tracing::Level::WARN, ""), 1, "one warning per streak: {:?}", seen.all());
    fw.close().await;
}

/// The same for a port that refuses connections and a host that does not resolve: the attempts
/// back off, and one warning covers the streak.
#[tokio::test]
async fn refused_and_unresolvable_servers_back_off_with_one_warning() {
    for connect in [format!("127.0.0.1:{}", closed_port()), "no-such-host.invalid:2181".to_string()] {
        let (seen, guard) = record_events();
        let fw = builder(&connect).build().unwrap();
        fw.start().unwrap();
        let started = Instant::now();
        let failed_thrice = eventually(Timing::new().deadline(), || {
            let n = count(&seen, tracing::Level::DEBUG, "could not open a session");
            async move { n >= 2 }
        })
        .await;
        assert!(failed_thrice, "{connect}: the attempts go on: {:?}", seen.all());
        let attempts = count(&seen, tracing::Level::DEBUG, "opening a session");
        let elapsed = started.elapsed();
        // 3 attempts take at least 150 + 300 ms of backoff; a busy loop would make hundreds.
        assert!(attempts <= 3 + (elapsed.as_millis() / 150) as usize, "{connect}: {attempts} attempts in {elapsed:?}");
        assert_eq!(count(&seen, tracing::Level::WARN, ""), 1, "{connect}: {:?}", seen.all());
        fw.close().await;
        drop(guard);
    }
}

/// After a streak of failures, the framework says once that it connected again, with the count
/// of failures, and the next streak gets its own warning.
#[tokio::test]
async fn connecting_after_a_streak_is_logged_once() {
    let (seen, _guard) = record_events();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    proxy.set_reject(true);
    let fw = builder(&proxy.connect_string()).build().unwrap();
    fw.start().unwrap();
    let failing = eventually(Timing::new().deadline(), || {
        let n = count(&seen, tracing::Level::DEBUG, "could not open a session");
        async move { n >= 2 }
    })
    .await;
    assert!(failing, "{:?}", seen.all());
    proxy.set_reject(false);
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    assert_eq!(count(&seen, tracing::Level::WARN, ""), 1, "{:?}", seen.all());
    assert_eq!(count(&seen, tracing::Level::INFO, "after failed attempts"), 1, "{:?}", seen.all());
    fw.close().await;
}

// --- 3. before start ---------------------------------------------------------------------------

/// `block_until_connected` and operations before `start()` fail at once with a typed "not
/// started" error. Before, `block_until_connected` waited its whole timeout and then said it
/// could not connect. (Operations already failed at once.)
#[tokio::test]
async fn before_start_everything_fails_at_once_saying_so() {
    let wait = Duration::from_secs(10);
    let fw = builder(&TestingServer::shared().connect_string()).connection_timeout(wait).build().unwrap();
    let not_started = |r: &Result<(), CuratorError>| matches!(r, Err(CuratorError::NotStarted { .. }));
    let started = Instant::now();
    let r = fw.block_until_connected(wait).await;
    assert!(not_started(&r), "{r:?}");
    let r = fw.get_data().for_path("/").await.map(drop);
    assert!(not_started(&r), "{r:?}");
    let r = fw.session().await.map(drop);
    assert!(not_started(&r), "{r:?}");
    // Before, the wait ran out: half of it is room enough for a loaded machine.
    assert!(started.elapsed() < wait / 2, "took {:?} of {wait:?}", started.elapsed());
    // Starting afterwards works as usual.
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    fw.close().await;
}

// --- 4. close ----------------------------------------------------------------------------------

/// An operation that `close()` cuts short ends with `Closed`, whose code is SESSIONEXPIRED
/// (-112), as Curator reports operations cut short by its close (TestFramework,
/// testBackground*WithConcurrentClose). Two cases: one waiting for a connection (before:
/// `Closed` with code -122, REQUESTTIMEOUT), and one whose request was sent but not answered
/// (before: it went on after the close until zookeeper-client gave up on the silent connection,
/// 8 s later, then failed with `ConnectionLoss`, code -4).
#[tokio::test]
async fn operations_cut_short_by_close_report_session_expired() {
    let server = TestingServer::shared();

    // Waiting for a connection.
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let connection_timeout = Duration::from_secs(20);
    let fw = connected(builder(&proxy.connect_string()).connection_timeout(connection_timeout)).await;
    let mut states = fw.connection_state_stream();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    let op = tokio::spawn(fw.get_data().for_path("/").into_future());
    let started = Instant::now();
    fw.close().await;
    let r = op.await.unwrap();
    // Not the connection timeout the operation would have waited out.
    assert!(started.elapsed() < connection_timeout / 2, "{:?}", started.elapsed());
    assert!(matches!(r, Err(CuratorError::Closed)), "{r:?}");
    assert_eq!(r.unwrap_err().code(), -112);

    // In flight: the request reached the server, its reply is held back.
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let session_timeout = Duration::from_secs(20);
    let fw = connected(builder(&proxy.connect_string()).session_timeout(session_timeout)).await;
    let observer = connected(builder(&server.connect_string())).await;
    let path = unique_path("in-flight");
    proxy.pause_replies();
    let op = tokio::spawn(fw.create().for_path(&path, vec![]).into_future());
    let sent = eventually(Timing::new().deadline(), || async {
        observer.check_exists().for_path(&path).await.map(|s| s.is_some()).unwrap_or(false)
    })
    .await;
    assert!(sent, "the create reached the server");
    let started = Instant::now();
    let closing = tokio::spawn({
        let fw = fw.clone();
        async move { fw.close().await }
    });
    let r = op.await.unwrap();
    // Before: 2/5 of the session timeout (8 s), when zookeeper-client gives up on the silence.
    assert!(started.elapsed() < session_timeout / 5, "the cut-short op took {:?}", started.elapsed());
    assert!(matches!(r, Err(CuratorError::Closed)), "{r:?}");
    assert_eq!(r.unwrap_err().code(), -112);
    // close() itself waits (at most 2 s) for the end of the session, whose reply is held.
    closing.await.unwrap();
    observer.close().await;
}

/// After our own `close()`, a held lock says it was lost because the framework closed. Before,
/// a lock that had waited for its turn (its acquire armed a watch on our node, which the monitor
/// started by `lost_watch` took over) heard its node go with the session that close() ended and
/// said "the lock node was deleted", every time.
#[tokio::test]
async fn a_lock_held_at_close_is_lost_because_of_the_close() {
    let server = TestingServer::shared();
    let fw = connected(builder(&server.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let path = unique_path("close-lock");
    let first = InterProcessMutex::new(&other, &path).unwrap().acquire().await.unwrap();
    let mutex = InterProcessMutex::new(&fw, &path).unwrap();
    let waiting = tokio::spawn({
        let mutex = mutex.clone();
        async move { mutex.acquire().await }
    });
    let queued = eventually(Timing::new().deadline(), || async {
        mutex.participant_nodes().await.map(|n| n.len() == 2).unwrap_or(false)
    })
    .await;
    assert!(queued, "our acquire waits behind the first holder");
    first.release().await.unwrap();
    let guard = waiting.await.unwrap().expect("our turn");
    let mut lost = guard.lost_watch(); // the monitor watches the node from now on
    assert!(guard.is_held());

    fw.close().await;
    let reason = tokio::time::timeout(Timing::new().deadline(), lost.wait_for(Option::is_some))
        .await
        .expect("told")
        .map(|r| *r)
        .unwrap_or(Some(LockLost::Released));
    assert_eq!(reason, Some(LockLost::Closed));
    assert_eq!(guard.lost().await, LockLost::Closed);
    assert!(!guard.is_held());
    other.close().await;
}

/// Drops `fw`, its last handle, and returns how long its ephemeral node at `path` outlives it,
/// as `observer` sees it (a watch on the node; at most the test deadline).
async fn ephemeral_outlives_drop(fw: CuratorFramework, observer: &CuratorFramework, path: &str) -> Duration {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Mutex::new(Some(tx));
    let stat = observer
        .check_exists()
        .using_watcher(move |event| {
            if event.event_type == curator_core::zk::EventType::NodeDeleted {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(Instant::now());
                }
            }
        })
        .for_path(path)
        .await
        .unwrap();
    assert!(stat.is_some_and(|s| s.ephemeral_owner != 0), "{path} is an ephemeral node");
    let dropped = Instant::now();
    drop(fw);
    let gone = tokio::time::timeout(Timing::new().deadline(), rx).await.expect("the node went").unwrap();
    gone - dropped
}

/// Dropping every handle of a framework without `close()` ends its session promptly, so that
/// its ephemeral nodes (and the locks they stand for) go at once, with the ensemble tracker on
/// (the default) or off. Before, with the tracker on, the session's clients are detached and
/// the dropped framework sent no CloseSession: the node stayed for a whole session timeout
/// (4.1-4.5 s with the 4 s test session, "dropped: 4.1s"); with the tracker off it went in 5 ms.
#[tokio::test]
async fn dropping_the_last_handle_ends_the_session() {
    let server = TestingServer::shared();
    let observer = connected(builder(&server.connect_string())).await;
    let bound = Timing::new().session_timeout() / 4;
    for tracker in [true, false] {
        let fw = connected(builder(&server.connect_string()).ensemble_tracker(tracker)).await;
        let path = unique_path("dropped");
        fw.create().with_mode(CreateMode::Ephemeral).for_path(&path, vec![]).await.unwrap();
        let other_handle = fw.using_namespace(Some("elsewhere")).unwrap();
        drop(other_handle);
        let lived = ephemeral_outlives_drop(fw, &observer, &path).await;
        assert!(lived < bound, "tracker {tracker}: the node outlived the dropped framework by {lived:?}");
    }
    observer.close().await;
}

/// The last handle dropped on a thread outside any runtime (the framework's runtime still runs)
/// still ends the session promptly, without a panic or a hang; and a framework dropped after
/// its runtime shut down does not panic either (its session then expires on the server).
#[test]
fn dropping_outside_a_runtime_neither_panics_nor_hangs() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let connect = TestingServer::shared().connect_string();
    let observer = runtime.block_on(connected(builder(&connect)));
    let bound = Timing::new().session_timeout() / 4;
    for tracker in [true, false] {
        let fw = runtime.block_on(connected(builder(&connect).ensemble_tracker(tracker)));
        let path = unique_path("dropped-outside");
        runtime.block_on(fw.create().with_mode(CreateMode::Ephemeral).for_path(&path, vec![]).into_future()).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Mutex::new(Some(tx));
        runtime
            .block_on(
                observer
                    .check_exists()
                    .using_watcher(move |event| {
                        if event.event_type == curator_core::zk::EventType::NodeDeleted {
                            if let Some(tx) = tx.lock().unwrap().take() {
                                let _ = tx.send(Instant::now());
                            }
                        }
                    })
                    .for_path(&path)
                    .into_future(),
            )
            .unwrap();
        let dropped = Instant::now();
        std::thread::spawn(move || drop(fw)).join().expect("the drop did not panic");
        let gone = runtime.block_on(async { tokio::time::timeout(Timing::new().deadline(), rx).await });
        let lived = gone.expect("the node went").unwrap() - dropped;
        assert!(lived < bound, "tracker {tracker}: the node outlived the framework dropped outside by {lived:?}");
    }
    let late = runtime.block_on(connected(builder(&connect)));
    runtime.block_on(observer.close());
    drop(runtime);
    drop(late); // after its runtime: no panic
}

// --- 5. builder input --------------------------------------------------------------------------

/// Options are checked when the framework is built, with typed errors and never a panic. Before,
/// only an empty connect string was refused: `Duration::MAX` as session timeout built, then made
/// the session manager's task overflow an `Instant` and the framework never connected; a session
/// timeout beyond ZooKeeper's i32 milliseconds was silently truncated; a bad port or a zero
/// timeout built a framework that retried forever.
#[test]
fn bad_options_are_refused_at_build() {
    let ok = "127.0.0.1:2181";
    let bad: Vec<(&str, curator_core::CuratorFrameworkBuilder)> = vec![
        ("empty connect string", CuratorFramework::builder()),
        ("blank connect string", CuratorFramework::builder().connect_string("  ")),
        ("bad port", CuratorFramework::builder().connect_string("nohost:xx")),
        ("port over 65535", CuratorFramework::builder().connect_string("127.0.0.1:65536")),
        ("port 0", CuratorFramework::builder().connect_string("127.0.0.1:0")),
        ("empty host", CuratorFramework::builder().connect_string(":2181")),
        ("empty entry", CuratorFramework::builder().connect_string("127.0.0.1:2181,,127.0.0.1:2182")),
        ("bad chroot", CuratorFramework::builder().connect_string("127.0.0.1:2181/a//b")),
        ("session timeout MAX", CuratorFramework::builder().connect_string(ok).session_timeout(Duration::MAX)),
        (
            "session timeout over i32 ms",
            CuratorFramework::builder().connect_string(ok).session_timeout(Duration::from_millis(i32::MAX as u64 + 1)),
        ),
        ("zero session timeout", CuratorFramework::builder().connect_string(ok).session_timeout(Duration::ZERO)),
        (
            "sub-millisecond session timeout",
            CuratorFramework::builder().connect_string(ok).session_timeout(Duration::from_micros(500)),
        ),
        ("zero connection timeout", CuratorFramework::builder().connect_string(ok).connection_timeout(Duration::ZERO)),
    ];
    for (what, b) in bad {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.build()));
        let r = r.unwrap_or_else(|_| panic!("{what}: build panicked"));
        assert!(matches!(r, Err(CuratorError::InvalidArgument { .. })), "{what}: {r:?}");
    }

    let good: Vec<(&str, curator_core::CuratorFrameworkBuilder)> = vec![
        ("one server", CuratorFramework::builder().connect_string(ok)),
        ("default port", CuratorFramework::builder().connect_string("127.0.0.1")),
        ("unresolvable host", CuratorFramework::builder().connect_string("no-such-host.invalid:2181")),
        ("ensemble", CuratorFramework::builder().connect_string("a:1,b:2,c:65535")),
        ("ipv6", CuratorFramework::builder().connect_string("[::1]:2181,127.0.0.1:2181")),
        ("chroot", CuratorFramework::builder().connect_string("a:1,b:2/x")),
        ("root chroot", CuratorFramework::builder().connect_string("a:1/")),
        (
            "largest session timeout",
            CuratorFramework::builder().connect_string(ok).session_timeout(Duration::from_millis(i32::MAX as u64)),
        ),
        ("1 ms timeouts", {
            let b = CuratorFramework::builder().connect_string(ok);
            b.session_timeout(Duration::from_millis(1)).connection_timeout(Duration::from_millis(1))
        }),
        (
            "endless connection timeout",
            CuratorFramework::builder().connect_string(ok).connection_timeout(Duration::MAX),
        ),
    ];
    for (what, b) in good {
        let r = b.build();
        assert!(r.is_ok(), "{what}: {r:?}");
    }
}

/// The largest connection timeout is a wait without end, not an overflow: an operation waits
/// for the connection. Before, `Duration::MAX` panicked when an operation computed its deadline.
#[tokio::test]
async fn an_endless_connection_timeout_waits_without_panicking() {
    let fw = connected(builder(&TestingServer::shared().connect_string()).connection_timeout(Duration::MAX)).await;
    fw.get_children().for_path("/").await.expect("an operation");
    fw.close().await;
}

// --- 6. Apache Curator's lifecycle tests -------------------------------------------------------

/// Follows Curator's TestFrameworkEdges.testQuickClose: start and close at once (with a 1 ms
/// connection timeout and no retries) ends promptly and cleanly.
#[tokio::test]
async fn quick_close() {
    let fw = builder(&TestingServer::shared().connect_string())
        .connection_timeout(Duration::from_millis(1))
        .retry_policy(RetryNTimes::new(0, Duration::ZERO))
        .build()
        .unwrap();
    fw.start().unwrap();
    tokio::time::timeout(Duration::from_secs(5), fw.close()).await.expect("close is prompt");
    assert!(fw.is_closed());
    assert_eq!(fw.connection_state(), ConnectionState::Closed);
}

/// A framework on the shared server with a 1 ms connection timeout and `retry`, started but
/// not yet connected.
fn started_with_one_ms(retry: impl RetryPolicy + 'static) -> CuratorFramework {
    let fw = builder(&TestingServer::shared().connect_string())
        .connection_timeout(Duration::from_millis(1))
        .retry_policy(retry)
        .build()
        .unwrap();
    fw.start().unwrap();
    fw
}

/// Follows Curator's TestFrameworkEdges.testProtectedCreateNodeDeletion: a 1 ms connection
/// timeout, no retries, and creates (plain, then protected) issued right after `start()`, before
/// the first connection is up, on the framework and on a namespace of it; each succeeds. The
/// connection timeout bounds the wait for a connection; the request then waits, as Curator's
/// waits in its ZooKeeper handle, until the session being opened is up. Before, each failed
/// with NotConnected ("no connection ... within the connection timeout (1ms)") 1 ms after it
/// was issued.
#[tokio::test]
async fn operations_right_after_start_wait_for_the_first_connection() {
    let base = unique_path("right-after-start");
    for namespace in [None, Some("nm")] {
        let fw = started_with_one_ms(RetryNTimes::new(0, Duration::ZERO));
        let handle = fw.using_namespace(namespace).unwrap();
        assert!(!fw.connection_state().is_connected(), "issued before the first connection");
        let parent = format!("{base}/parent");
        handle
            .create()
            .creating_parents_if_needed()
            .for_path(&parent, vec![])
            .await
            .expect("created right after start");
        let fresh = started_with_one_ms(RetryNTimes::new(0, Duration::ZERO)).using_namespace(namespace).unwrap();
        let protected = fresh
            .create()
            .with_protection()
            .with_mode(CreateMode::EphemeralSequential)
            .for_path(&format!("{parent}/test"), vec![])
            .await
            .expect("a protected create right after start");
        assert!(protected.starts_with(&format!("{parent}/_c_")), "{protected}");
        assert_eq!(handle.get_children().for_path(&parent).await.unwrap().len(), 1);
        fresh.close().await;
        handle.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
        fw.close().await;
    }
}

/// Follows Curator's TestFrameworkEdges.testPathsFromProtectingInBackground: a 1 ms connection
/// timeout, `RetryOneTime(1 ms)`, and right after `start()` a create of the parents followed by
/// a protected create in the background, in every create mode; the callback gets the created
/// name and path under the parent. Before, the first create failed with NotConnected after its
/// two 1 ms waits.
#[tokio::test]
async fn background_protected_creates_right_after_start_succeed() {
    let base = unique_path("protecting-in-background");
    let modes = [
        CreateMode::Persistent,
        CreateMode::PersistentSequential,
        CreateMode::Ephemeral,
        CreateMode::EphemeralSequential,
        CreateMode::Container,
        CreateMode::PersistentWithTtl,
        CreateMode::PersistentSequentialWithTtl,
    ];
    for mode in modes {
        let parent = format!("{base}/{mode:?}/a/b/c");
        let setup = started_with_one_ms(RetryOneTime::new(Duration::from_millis(1)));
        setup.create().creating_parents_if_needed().for_path(&parent, vec![]).await.expect("parents right after start");
        setup.close().await;
        let fw = started_with_one_ms(RetryOneTime::new(Duration::from_millis(1)));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Mutex::new(Some(tx));
        let create = fw.create().with_protection().with_mode(mode);
        let create = if matches!(mode, CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl) {
            create.with_ttl(Duration::from_secs(600))
        } else {
            create
        };
        create.for_path(&format!("{parent}/test-"), vec![]).in_background(move |_: &CuratorFramework, event| {
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(event);
            }
        });
        let event = tokio::time::timeout(Timing::new().deadline(), rx).await.expect("called back").unwrap();
        assert_eq!(event.result_code, 0, "{mode:?}: {event:?}");
        let name = event.name.clone().unwrap_or_default();
        assert_eq!(name.rsplit_once('/').map(|(p, _)| p), Some(parent.as_str()), "{mode:?}: {event:?}");
        assert!(name[parent.len()..].starts_with("/_c_"), "{mode:?}: {event:?}");
        assert_eq!(event.path.rsplit_once('/').map(|(p, _)| p), Some(parent.as_str()), "{mode:?}: {event:?}");
        fw.close().await;
    }
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    fw.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testNotStarted and testStopped: an operation before
/// `start()` or after `close()` fails. Curator throws IllegalStateException for both; ours are
/// typed: NotStarted before, Closed after.
#[tokio::test]
async fn not_started_and_stopped() {
    let fw = builder(&TestingServer::shared().connect_string()).build().unwrap();
    let r = fw.get_data().for_path("/").await;
    assert!(matches!(&r, Err(CuratorError::NotStarted { .. })), "{r:?}");
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    fw.get_data().for_path("/").await.unwrap();
    fw.close().await;
    let r = fw.get_data().for_path("/").await;
    assert!(matches!(r, Err(CuratorError::Closed)), "{r:?}");
    let r = fw.block_until_connected(Duration::from_secs(10)).await;
    assert!(matches!(r, Err(CuratorError::Closed)), "{r:?}");
}

/// Follows Curator's TestFramework.testConnectionState: Connected, then (the server stopped)
/// Suspended, then Lost.
#[tokio::test]
async fn connection_state() {
    let mut server = TestingServer::start().await.unwrap();
    let fw =
        builder(&server.connect_string()).retry_policy(RetryNTimes::new(1, Duration::from_millis(1))).build().unwrap();
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    wait_for(&mut states, ConnectionState::Connected, |_| true).await;
    server.stop().await.unwrap();
    let seen = wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    let kinds: Vec<_> = seen.iter().map(|e| e.state).collect();
    assert_eq!(kinds, [ConnectionState::Suspended, ConnectionState::Lost]);
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testReconnectAfterLoss: after Lost (the server stopped),
/// an operation fails with a connection error; once the server is back the framework opens a new
/// session by itself and operations work. (Curator's is ConnectionLossException; ours is
/// NotConnected, also retryable, as nothing was sent.)
#[tokio::test]
async fn reconnect_after_loss() {
    let mut server = TestingServer::start().await.unwrap();
    let fw =
        connected(builder(&server.connect_string()).retry_policy(RetryNTimes::new(1, Duration::from_millis(1)))).await;
    let mut states = fw.connection_state_stream();
    fw.check_exists().for_path("/").await.unwrap();
    server.stop().await.unwrap();
    wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    let r = fw.check_exists().for_path("/").await;
    assert!(r.as_ref().is_err_and(CuratorError::is_retryable), "{r:?}");
    server.restart().await.unwrap();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    fw.check_exists().for_path("/").await.expect("works on the new session");
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testFailure: tiny timeouts (100 ms session and
/// connection), the server stops, and the next operation fails with a connection or session
/// error (Curator accepts ConnectionLoss or SessionExpired, by ZooKeeper version). Ours: a
/// retryable error, well within the test's deadline. The server raises the session timeout to
/// its minimum (2 ticks).
#[tokio::test]
async fn failure() {
    let mut server = TestingServer::start().await.unwrap();
    let fw = connected(
        builder(&server.connect_string())
            .session_timeout(Duration::from_millis(100))
            .connection_timeout(Duration::from_millis(100))
            .retry_policy(RetryNTimes::new(1, Duration::from_millis(1))),
    )
    .await;
    fw.check_exists().for_path("/hey").await.unwrap();
    server.stop().await.unwrap();
    let started = Instant::now();
    let r = fw.check_exists().for_path("/hey").await;
    assert!(r.as_ref().is_err_and(CuratorError::is_retryable), "{r:?}");
    assert!(started.elapsed() < Timing::new().deadline(), "{:?}", started.elapsed());
    fw.close().await;
}

/// A retry policy that counts how often it is asked and always allows another try after 100 ms.
#[derive(Debug, Default)]
struct Counting(Arc<AtomicU32>);

impl RetryPolicy for Counting {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Some(Duration::from_millis(100))
    }
}

/// Follows Curator's TestFrameworkEdges.testRetry: with the server stopped, an operation keeps
/// consulting the retry policy; once the server is back (Curator restarts it from the third
/// call of the policy; here the test does once it has seen three) the operation succeeds.
#[tokio::test]
async fn retry() {
    let mut server = TestingServer::start().await.unwrap();
    let asked = Arc::new(AtomicU32::new(0));
    let fw = connected(
        builder(&server.connect_string())
            .connection_timeout(Duration::from_millis(200))
            .retry_policy(Counting(asked.clone())),
    )
    .await;
    server.stop().await.unwrap();
    let op = tokio::spawn(fw.check_exists().for_path("/hey").into_future());
    let retried = eventually(Timing::new().deadline(), || {
        let n = asked.load(Ordering::SeqCst);
        async move { n >= 3 }
    })
    .await;
    assert!(retried, "the policy is consulted while the server is down");
    server.restart().await.unwrap();
    let r = tokio::time::timeout(Timing::new().deadline(), op).await.expect("ends").unwrap();
    assert!(matches!(r, Ok(None)), "{r:?}");
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testCreateContainersForBadConnect: the server cannot be
/// reached when the framework starts (Curator's is closed and started again on its port 3 s
/// later; ours refuses connections through a proxy for that long) and creating a path of
/// containers waits, retries and succeeds once it can be reached.
#[tokio::test]
async fn create_containers_for_bad_connect() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    proxy.set_reject(true);
    let fw = builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(500)))
        .build()
        .unwrap();
    fw.start().unwrap();
    let base = unique_path("containers");
    let path = format!("{base}/this/does/not/exist");
    let create = tokio::spawn(
        fw.create()
            .creating_parent_containers_if_needed()
            .with_mode(CreateMode::Container)
            .for_path(&path, vec![])
            .into_future(),
    );
    let fw_states = fw.clone();
    let refused =
        eventually(Duration::from_secs(3), || async { fw_states.connection_state() == ConnectionState::Connected })
            .await;
    assert!(!refused, "not connected while refused");
    proxy.set_reject(false);
    tokio::time::timeout(Timing::new().deadline(), create).await.expect("ends").unwrap().expect("created");
    assert!(fw.check_exists().for_path(&path).await.unwrap().is_some());
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testSessionKilled: a watch set on the session sees it
/// expire, and the framework carries on with a new session where the (persistent) node is still
/// there.
#[tokio::test]
async fn session_killed() {
    let server = TestingServer::shared();
    let fw = connected(builder(&server.connect_string())).await;
    let path = unique_path("session-test");
    fw.create().for_path(&path, vec![]).await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Mutex::new(Some(tx));
    fw.check_exists()
        .using_watcher(move |event| {
            if event.session_state == curator_core::zk::SessionState::Expired {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
            }
        })
        .for_path(&path)
        .await
        .unwrap();
    let session = fw.session().await.unwrap();
    curator_test::expire_session(&server.connect_string(), session.client().session()).await.unwrap();
    drop(session);
    tokio::time::timeout(Timing::new().deadline(), rx).await.expect("the watch saw the expiry").unwrap();
    assert!(fw.check_exists().for_path(&path).await.unwrap().is_some());
    fw.close().await;
}
