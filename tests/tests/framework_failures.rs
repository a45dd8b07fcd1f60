//! Connection loss, lost replies, session expiry: what the framework reports and survives, with a
//! real ZooKeeper and a fault-injecting proxy.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use curator_core::RetryNTimes;
use curator_core::{ConnectionState, CreateMode, CuratorError};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::{builder, connected, unique_path, wait_for};

#[tokio::test]
async fn protected_create_whose_reply_is_lost_finds_its_own_node() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = connected(builder(&proxy.connect_string())).await;
    let base = unique_path("swallow");
    fw.create().for_path(&base, vec![]).await.unwrap();

    proxy.swallow_next_reply();
    let path = fw
        .create()
        .with_protection()
        .with_mode(CreateMode::EphemeralSequential)
        .for_path(&format!("{base}/lock-"), b"x".to_vec())
        .await
        .expect("the retry finds the node the lost reply was about");
    assert!(!proxy.swallow_pending(), "the reply was really swallowed");
    let children = fw.get_children().for_path(&base).await.unwrap();
    assert_eq!(children.len(), 1, "exactly one node: {children:?}");
    assert_eq!(format!("{base}/{}", children[0]), path);
    fw.close().await;
}

#[tokio::test]
async fn protected_create_that_finally_fails_leaves_no_orphan() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = connected(builder(&proxy.connect_string()).retry_policy(RetryNTimes::new(0, Duration::ZERO))).await;
    let observer = connected(builder(&server.connect_string())).await;
    let base = unique_path("orphan");
    fw.create().for_path(&base, vec![]).await.unwrap();

    proxy.swallow_next_reply();
    let result =
        fw.create().with_protection().with_mode(CreateMode::Persistent).for_path(&format!("{base}/node"), vec![]).await;
    // No retry allowed: the create's name could not be looked for, so its outcome is unknown,
    // and said so (docs/architecture.md section 4.4).
    assert!(matches!(result, Err(CuratorError::OutcomeUnknown { .. })), "no retries allowed: {result:?}");
    let clean = eventually(Timing::new().deadline(), || async {
        observer.get_children().for_path(&base).await.map(|c| c.is_empty()).unwrap_or(false)
    })
    .await;
    assert!(clean, "the orphan of the failed create is deleted in the background");

    // Unprotected and undisturbed: exactly the node asked for, nothing else.
    fw.create().for_path(&format!("{base}/plain"), vec![]).await.unwrap();
    assert_eq!(observer.get_children().for_path(&base).await.unwrap(), ["plain"]);
    fw.close().await;
    observer.close().await;
}

#[tokio::test]
async fn dropped_protected_create_leaves_no_orphan() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = connected(builder(&proxy.connect_string())).await;
    let observer = connected(builder(&server.connect_string())).await;
    let base = unique_path("dropped");
    fw.create().for_path(&base, vec![]).await.unwrap();

    // The reply is lost and the future dropped while the retry waits: nobody learns the path.
    proxy.swallow_next_reply();
    let create = fw.create().with_protection().for_path(&format!("{base}/node"), vec![]).into_future();
    let applied = tokio::select! {
        _ = create => false,
        applied = eventually(Timing::new().deadline(), || async {
            observer.get_children().for_path(&base).await.map(|c| c.len() == 1).unwrap_or(false)
        }) => applied,
    };
    assert!(applied, "the create reached the server before the future was dropped");
    let clean = eventually(Timing::new().deadline(), || async {
        observer.get_children().for_path(&base).await.map(|c| c.is_empty()).unwrap_or(false)
    })
    .await;
    assert!(clean, "dropping the future deletes the node in the background");
    fw.close().await;
    observer.close().await;
}

#[tokio::test]
async fn expiry_on_demand_gives_lost_then_a_new_session() {
    let server = TestingServer::shared();
    let observer = connected(builder(&server.connect_string())).await;
    let fw = builder(&server.connect_string()).build().unwrap();
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    let base = unique_path("expiry");
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&base, vec![]).await.unwrap();
    let old = fw.session().await.unwrap();

    expire_session(&server.connect_string(), old.client().session()).await.unwrap();
    let seen = wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    // Attaching the killer's connection to the session bounces ours first (Suspended, then
    // Reconnected on the same session); past those, the sequence is the one a user must see.
    let kinds: Vec<_> = seen
        .iter()
        .filter(|e| {
            !(e.state == ConnectionState::Suspended || e.state == ConnectionState::Reconnected && !e.new_session)
        })
        .map(|e| e.state)
        .collect();
    assert_eq!(kinds, [ConnectionState::Connected, ConnectionState::Lost, ConnectionState::Reconnected], "{seen:?}");
    let last = seen.last().unwrap();
    assert!(last.generation == old.generation() + 1 && last.session_id != old.id());

    assert!(observer.check_exists().for_path(&base).await.unwrap().is_none(), "ephemeral of the old session is gone");
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&base, vec![]).await.expect("works on the new session");
    let (_, stat) = observer.get_data().for_path_with_stat(&base).await.unwrap();
    assert_eq!(stat.ephemeral_owner, fw.session().await.unwrap().id());
    fw.close().await;
    observer.close().await;
}

#[tokio::test]
async fn short_cut_is_suspended_then_reconnected_on_the_same_session() {
    tests::init_tracing();
    let (proxy, fw, mut states) = tests::proxied_with_states().await;
    let before = fw.session().await.unwrap().id();

    proxy.cut();
    let seen = wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    let kinds: Vec<_> = seen.iter().map(|e| e.state).collect();
    assert_eq!(kinds, [ConnectionState::Connected, ConnectionState::Suspended, ConnectionState::Reconnected]);
    assert!(!seen[2].new_session);
    assert_eq!(fw.session().await.unwrap().id(), before);
    fw.get_children().for_path("/").await.expect("usable after the cut");
    fw.close().await;
}

/// Under `ErrorPolicy::Session` a disconnection makes the framework ask the servers whether
/// the session still lives, by resuming it on a connection of its own (architecture 3.2); a
/// server hands a resumed session to the newest connection and closes the others. Once the
/// framework's own client is back, that question must not be asked any more: asked after the
/// reconnection it took the connection the client had just won, a second Suspended and
/// Reconnected nobody caused, which cost a persistent watch the events of that second gap and
/// failed operations under a short retry policy (found as two flaky tests in CI:
/// `keeps_watching_after_a_cut_session_policy`, `double_barrier_connection_cut_during_enter`).
/// A proxy latency of 10 ms each way makes the reconnection (and the framework's check that it
/// works) slower than the 20 ms after which the first question used to be asked, every time:
/// before the fix the question and the client took the session from each other until it was
/// presumed lost ("round 0, op 0: session expired"). Now the first question waits four of the
/// probes' round trips, is dropped at the reconnection, and is asked again only if no probe
/// confirms the connection in time.
#[tokio::test]
async fn session_policy_reconnection_is_not_taken_back_by_the_liveness_question() {
    tests::init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = builder(&proxy.connect_string())
        .connection_state_error_policy(curator_core::ErrorPolicy::Session)
        .retry_policy(RetryNTimes::new(0, Duration::ZERO))
        .build()
        .expect("valid options");
    let mut states = fw.connection_state_stream();
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    wait_for(&mut states, ConnectionState::Connected, |_| true).await;
    proxy.set_latency(Duration::from_millis(10));
    // Round trips for longer than the framework's probe interval (a tenth of the session
    // timeout), so that it has measured the latency, as it would have on a real network.
    let negotiated = fw.session().await.unwrap().client().session_timeout();
    let measured = Instant::now() + negotiated / 5;
    while Instant::now() < measured {
        fw.get_children().for_path("/").await.expect("before the cuts");
    }
    for round in 0..3 {
        proxy.cut();
        wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
        // Ten round trips of at least 20 ms each: well past the moments a question would be
        // asked, and each would fail (no retries) if the connection were taken.
        for op in 0..10 {
            fw.get_children().for_path("/").await.unwrap_or_else(|e| panic!("round {round}, op {op}: {e}"));
        }
        let extra: Vec<_> = std::iter::from_fn(|| states.try_next()).map(|e| e.state).collect();
        assert!(extra.is_empty(), "round {round}: after the reconnection: {extra:?}");
    }
    fw.close().await;
}

#[tokio::test]
async fn long_partition_reports_lost_within_the_session_timeout() {
    let (proxy, fw, mut states) = tests::proxied_with_states().await;
    let negotiated = fw.session().await.unwrap().client().session_timeout();

    proxy.pause();
    let seen = wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    let suspended = seen.iter().find(|e| e.state == ConnectionState::Suspended).expect("suspended first");
    let lost = seen.last().unwrap();
    let gap = lost.at.duration_since(suspended.at);
    assert!(
        gap <= negotiated + Duration::from_millis(500),
        "Lost {gap:?} after Suspended; session timeout {negotiated:?}"
    );

    proxy.pass();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    fw.get_children().for_path("/").await.expect("usable on the new session");
    fw.close().await;
}

#[tokio::test]
async fn guaranteed_delete_issued_during_a_cut_completes_after_it() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let timing = Timing::new();
    let fw = connected(
        builder(&proxy.connect_string())
            .session_timeout(timing.session_timeout() * 2)
            .connection_timeout(Duration::from_millis(300))
            .retry_policy(RetryNTimes::new(1, Duration::from_millis(50))),
    )
    .await;
    let observer = connected(builder(&server.connect_string())).await;
    let base = unique_path("guaranteed");
    fw.create().for_path(&base, vec![]).await.unwrap();

    let mut states = fw.connection_state_stream();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    let started = Instant::now();
    let foreground = fw.delete().guaranteed().for_path(&base).await;
    assert!(foreground.as_ref().is_err_and(CuratorError::is_retryable), "{foreground:?}");
    assert!(observer.check_exists().for_path(&base).await.unwrap().is_some(), "not deleted during the cut");

    proxy.set_reject(false);
    let deleted =
        eventually(timing.deadline(), || async { observer.check_exists().for_path(&base).await.unwrap().is_none() })
            .await;
    assert!(deleted, "deleted in the background after the cut ({:?})", started.elapsed());
    fw.close().await;
    observer.close().await;
}

/// Nothing listens on the port: waiting for a connection gives up in time with an error naming
/// the address, and an operation fails with a retryable error. The operation's retries are few
/// (one, after 1 ms): with the test builder's 20, each waiting out the 1 s connection timeout, it
/// took 22 s to give the same error.
#[tokio::test]
async fn nothing_listening_is_a_clear_error_within_the_connection_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let fw = builder(&format!("127.0.0.1:{port}"))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(1, Duration::from_millis(1)))
        .build()
        .unwrap();
    fw.start().unwrap();
    let started = Instant::now();
    let wait = Duration::from_secs(2);
    let err = fw.block_until_connected(wait).await.expect_err("nothing listens");
    assert!(started.elapsed() < wait * 2, "took {:?} of {wait:?}", started.elapsed());
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    let op = fw.get_data().for_path("/x").await;
    assert!(op.as_ref().is_err_and(CuratorError::is_retryable), "{op:?}");
    fw.close().await;
}

/// A persistent watch read as a `futures::Stream` (issue 28 item 4): `StreamExt` combinators
/// apply, and the stream adds the watch again after a reconnection exactly as `next()` does
/// (it is the same reading), so node events after the reconnection still arrive; the stream
/// ends with the session.
#[tokio::test]
async fn persistent_watch_is_a_stream_through_a_reconnection() {
    use curator_core::zk::{EventType, SessionState};
    use futures::StreamExt;
    let (proxy, fw, mut states) = tests::proxied_with_states().await;
    let base = unique_path("pwatch-stream");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let watch = fw.watches().add().for_path(&base).await.unwrap();
    let mut events = watch.map(|e| (e.event_type, e.session_state, e.path));
    fw.create().for_path(&format!("{base}/before"), vec![]).await.unwrap();
    let first = tokio::time::timeout(Timing::new().deadline(), events.next()).await.unwrap();
    assert_eq!(first, Some((EventType::NodeCreated, SessionState::SyncConnected, format!("{base}/before"))));

    proxy.cut();
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    let reconnected = (&mut events).skip_while(|(kind, state, _)| {
        std::future::ready(!(*kind == EventType::Session && *state == SessionState::SyncConnected))
    });
    let mut reconnected = std::pin::pin!(reconnected);
    let seen = tokio::time::timeout(Timing::new().deadline(), reconnected.next()).await.unwrap();
    assert!(seen.is_some(), "the stream ended at the reconnection");
    fw.create().for_path(&format!("{base}/after"), vec![]).await.unwrap();
    let after = tokio::time::timeout(Timing::new().deadline(), reconnected.next()).await.unwrap();
    assert_eq!(after, Some((EventType::NodeCreated, SessionState::SyncConnected, format!("{base}/after"))));
    fw.close().await;
}

#[tokio::test]
async fn persistent_watch_keeps_firing_after_a_reconnection() {
    let (proxy, fw, mut states) = tests::proxied_with_states().await;
    let base = unique_path("pwatch");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let mut watch = fw.watches().add().for_path(&base).await.unwrap();

    proxy.cut();
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    // The watch sees the session events, adds itself again, then hears later changes.
    let mut seen_reconnect = false;
    while !seen_reconnect {
        let event = tokio::time::timeout(Timing::new().deadline(), watch.next()).await.unwrap().unwrap();
        seen_reconnect = event.session_state == curator_core::zk::SessionState::SyncConnected
            && event.event_type == curator_core::zk::EventType::Session;
    }
    fw.create().for_path(&format!("{base}/after"), vec![]).await.unwrap();
    let event = tokio::time::timeout(Timing::new().deadline(), watch.next()).await.unwrap().unwrap();
    assert_eq!(event.event_type, curator_core::zk::EventType::NodeCreated);
    assert_eq!(event.path, format!("{base}/after"));
    fw.close().await;
}

/// `delete_if_ours`: the cleanup of a create at a known path whose outcome stayed unknown
/// deletes a node of ours (an ephemeral of the current session, a persistent node when asked)
/// and leaves another session's, also when called during a cut (it goes on once connected).
#[tokio::test]
async fn delete_if_ours_deletes_only_a_node_a_create_of_ours_may_have_made() {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = connected(builder(&proxy.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let base = unique_path("delete-if-ours");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let exists = |path: String| {
        let other = other.clone();
        async move { other.check_exists().for_path(&path).await.unwrap().is_some() }
    };

    // An ephemeral of ours goes; so does a persistent node when asked, and only then.
    let ours = format!("{base}/ours");
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&ours, vec![]).await.unwrap();
    let persistent = format!("{base}/persistent");
    fw.create().for_path(&persistent, vec![]).await.unwrap();
    fw.delete_if_ours(&ours, false).await.unwrap();
    fw.delete_if_ours(&persistent, false).await.unwrap();
    assert!(!exists(ours.clone()).await, "our ephemeral is deleted");
    assert!(exists(persistent.clone()).await, "a persistent node is left unless asked");
    fw.delete_if_ours(&persistent, true).await.unwrap();
    assert!(!exists(persistent).await, "asked, a persistent node is deleted");

    // Another session's ephemeral stays, and a missing node is no error.
    let theirs = format!("{base}/theirs");
    other.create().with_mode(CreateMode::Ephemeral).for_path(&theirs, vec![]).await.unwrap();
    fw.delete_if_ours(&theirs, true).await.unwrap();
    assert!(exists(theirs).await, "another session's ephemeral is left");
    fw.delete_if_ours(&format!("{base}/missing"), true).await.unwrap();

    // Called while the connection is cut, it finishes once connected again.
    let later = format!("{base}/later");
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&later, vec![]).await.unwrap();
    proxy.set_reject(true);
    proxy.cut();
    let deleting = tokio::spawn({
        let (fw, later) = (fw.clone(), later.clone());
        async move { fw.delete_if_ours(&later, false).await }
    });
    assert!(exists(later.clone()).await, "nothing is deleted while cut off");
    proxy.pass();
    tokio::time::timeout(Timing::new().deadline(), deleting).await.expect("done once connected").unwrap().unwrap();
    assert!(!exists(later).await, "deleted once connected");
    fw.close().await;
    other.close().await;
}

/// `delete().if_created_at(czxid)`: deletes the node at the path only if it is the one created
/// at the given zxid, whoever's it is (a persistent node, another session's ephemeral), also
/// after it was written; a node made again at the path is left (`NoNode`: the node named is
/// gone), and so is a missing node (quietly: no error).
#[tokio::test]
async fn a_delete_if_created_at_deletes_that_node_and_no_other() {
    let server = TestingServer::shared();
    let fw = connected(builder(&server.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let base = unique_path("delete-if-created-at");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let czxid = |path: String| {
        let other = other.clone();
        async move { other.check_exists().for_path(&path).await.unwrap().map(|stat| stat.czxid) }
    };

    let theirs = format!("{base}/theirs");
    other.create().with_mode(CreateMode::Ephemeral).for_path(&theirs, vec![]).await.unwrap();
    let made = czxid(theirs.clone()).await.expect("made");
    other.set_data().for_path(&theirs, b"written since".to_vec()).await.unwrap();
    fw.delete().if_created_at(made).for_path(&theirs).await.unwrap();
    assert_eq!(czxid(theirs.clone()).await, None, "the node created at that zxid is deleted, written or not");

    let again = format!("{base}/again");
    fw.create().for_path(&again, vec![]).await.unwrap();
    let first = czxid(again.clone()).await.expect("made");
    fw.delete().for_path(&again).await.unwrap();
    fw.create().for_path(&again, vec![]).await.unwrap();
    let second = czxid(again.clone()).await.expect("made again");
    let other_node = fw.delete().if_created_at(first).for_path(&again).await;
    assert!(matches!(other_node, Err(CuratorError::NoNode { .. })), "{other_node:?}");
    assert_eq!(czxid(again.clone()).await, Some(second), "a node made again at the path is left");
    fw.delete().guaranteed().quietly().if_created_at(first).for_path(&again).await.unwrap();
    assert_eq!(czxid(again.clone()).await, Some(second), "also by a guaranteed delete");
    fw.delete().quietly().if_created_at(first).for_path(&format!("{base}/missing")).await.unwrap();
    fw.close().await;
    other.close().await;
}
