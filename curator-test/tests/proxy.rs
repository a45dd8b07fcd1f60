//! ChaosProxy, observed by real clients: pause (both ways and one way), latency, cut, reject,
//! swallow-next-reply and its disarming. The proxies stand in front of the binary's shared
//! server; each test uses its own proxy and paths.

mod common;

use std::time::{Duration, Instant};

use common::{connect, init_tracing, persistent, unique_path};
use curator_test::{eventually, four_letter_word, wait_for_state, ChaosProxy, TestingServer, Timing};
use zookeeper_client::{AddWatchMode, Error, EventType, SessionState};

#[tokio::test]
async fn pause_holds_requests_until_pass() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    // A 10 s session: 4 s of silence before the client gives up on the connection.
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    assert_eq!(proxy.connections(), 1);
    let path = unique_path("paused");

    proxy.pause();
    let mut create = Box::pin(client.create(&path, b"x", &persistent()));
    let held = tokio::time::timeout(Duration::from_millis(500), &mut create).await;
    assert!(held.is_err(), "a request completed through a paused proxy: {held:?}");
    let direct = connect(&server.connect_string(), timing.session_timeout()).await;
    assert_eq!(direct.check_stat(&path).await.unwrap(), None, "a paused proxy forwarded the request");
    assert_eq!(proxy.connections(), 1, "pause must keep the connection open");

    let resumed = Instant::now();
    proxy.pass();
    tokio::time::timeout(timing.deadline(), create).await.unwrap().unwrap();
    eprintln!("held create completed {:?} after pass()", resumed.elapsed());
    assert_eq!(client.get_data(&path).await.unwrap().0, b"x");
    assert_eq!(client.state(), SessionState::SyncConnected);
}

#[tokio::test]
async fn cut_disconnects_and_the_client_reconnects_to_the_same_session() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
    let session = client.session_id();
    let path = unique_path("cut");
    client.create(&path, b"", &persistent()).await.unwrap();
    // Session events reach watchers in order, so Disconnected cannot be missed here.
    let mut watcher = client.watch(&path, AddWatchMode::Persistent).await.unwrap();

    let cut_at = Instant::now();
    proxy.cut();
    let mut seen = Vec::new();
    let saw_both = tokio::time::timeout(timing.deadline(), async {
        loop {
            let event = watcher.changed().await;
            if event.event_type == EventType::Session {
                seen.push((event.session_state, cut_at.elapsed()));
                if event.session_state == SessionState::SyncConnected {
                    return;
                }
                assert!(!event.session_state.is_terminated(), "session ended: {seen:?}");
            }
        }
    })
    .await;
    assert!(saw_both.is_ok(), "no reconnect; session events {seen:?}");
    eprintln!("session events after cut(): {seen:?}");
    assert_eq!(seen.first().map(|s| s.0), Some(SessionState::Disconnected));
    assert_eq!(client.session_id(), session);
    assert!(eventually(timing.deadline(), || async { proxy.connections() == 1 }).await);
    client.set_data(&path, b"after", None).await.unwrap();
}

#[tokio::test]
async fn reject_keeps_the_client_out_until_lifted() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
    let mut states = client.state_watcher();

    proxy.set_reject(true);
    proxy.cut();
    assert!(wait_for_state(&mut states, SessionState::Disconnected, timing.deadline()).await);
    // Reconnect attempts are closed at once.
    assert!(!eventually(Duration::from_millis(300), || async { proxy.connections() > 0 }).await);
    assert_eq!(client.state(), SessionState::Disconnected);

    proxy.set_reject(false);
    assert!(wait_for_state(&mut states, SessionState::SyncConnected, timing.deadline()).await);
    client.get_data("/").await.unwrap();
}

#[tokio::test]
async fn swallowed_reply_is_a_connection_loss_with_the_request_applied() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
    let session = client.session_id();
    let path = unique_path("swallowed");

    proxy.swallow_next_reply();
    assert!(proxy.swallow_pending());
    let started = Instant::now();
    let result =
        tokio::time::timeout(timing.deadline(), client.create(&path, b"applied", &persistent())).await.unwrap();
    eprintln!("create whose reply was swallowed returned {result:?} after {:?}", started.elapsed());
    assert!(result.is_err(), "the create's reply was supposed to be lost");
    assert!(!proxy.swallow_pending());

    // Yet the server applied it.
    let direct = connect(&server.connect_string(), timing.session_timeout()).await;
    assert_eq!(direct.get_data(&path).await.unwrap().0, b"applied");

    // And the client is back, same session, and sees it too (a retry would get NodeExists).
    let mut states = client.state_watcher();
    assert!(wait_for_state(&mut states, SessionState::SyncConnected, timing.deadline()).await);
    assert_eq!(client.session_id(), session);
    assert_eq!(client.create(&path, b"again", &persistent()).await.unwrap_err(), zookeeper_client::Error::NodeExists);
}

#[tokio::test]
async fn four_letter_words_pass_through_the_proxy() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    assert_eq!(proxy.upstream(), server.connect_string());
    assert_eq!(four_letter_word(&proxy.connect_string(), "ruok").await.unwrap(), "imok");
}

#[tokio::test]
async fn a_proxy_in_front_of_nothing_closes_connections() {
    init_tracing();
    let timing = Timing::new();
    let proxy = ChaosProxy::start("127.0.0.1:1").await.unwrap();
    let addr = proxy.connect_string();
    let connect = zookeeper_client::Client::connector().with_fail_eagerly().connect(&addr);
    let result = tokio::time::timeout(timing.deadline(), connect).await.unwrap();
    assert!(result.is_err());
}

#[tokio::test]
async fn latency_delays_every_round_trip_until_turned_off() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
    let path = unique_path("latency");
    client.create(&path, b"", &persistent()).await.unwrap();

    let latency = Duration::from_millis(200);
    proxy.set_latency(latency);
    assert_eq!(proxy.latency(), latency);
    assert!(!proxy.is_passing());
    let started = Instant::now();
    client.get_data(&path).await.unwrap();
    let one = started.elapsed();
    eprintln!("one round trip with {latency:?} latency each way took {one:?}");
    assert!(one >= 2 * latency, "a round trip took {one:?}, less than twice the latency");

    // Pipelined requests keep their order (the client checks each reply's xid) and each one
    // still waits out the latency.
    let started = Instant::now();
    let writes: Vec<_> = (0..8u8).map(|i| client.set_data(&path, &[i], None)).collect();
    for write in writes {
        write.await.unwrap();
    }
    assert!(started.elapsed() >= 2 * latency);
    assert_eq!(client.get_data(&path).await.unwrap().0, [7]);

    // pass() ends pauses, not latency.
    proxy.pass();
    assert_eq!(proxy.latency(), latency);
    let started = Instant::now();
    client.get_data(&path).await.unwrap();
    assert!(started.elapsed() >= 2 * latency, "pass() turned latency off");

    proxy.set_latency(Duration::ZERO);
    assert!(proxy.is_passing());
    client.get_data(&path).await.unwrap();
    assert_eq!(client.state(), SessionState::SyncConnected);
}

#[tokio::test]
async fn pause_requests_holds_writes_while_notifications_still_arrive() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    // A 10 s session: the client waits over 6 s for a reply before it drops the connection.
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let direct = connect(&server.connect_string(), timing.session_timeout()).await;
    let path = unique_path("held-requests");
    direct.create(&path, b"before", &persistent()).await.unwrap();
    let (_, _, watcher) = client.get_and_watch_data(&path).await.unwrap();

    proxy.pause_requests();
    assert!(!proxy.is_passing());
    let child = format!("{path}/child");
    let mut create = Box::pin(client.create(&child, b"", &persistent()));
    // Server-to-client traffic still flows: a change made elsewhere is notified.
    direct.set_data(&path, b"after", None).await.unwrap();
    let event = tokio::time::timeout(timing.deadline(), watcher.changed()).await.unwrap();
    assert_eq!(event.event_type, EventType::NodeDataChanged);
    // But the create has not reached the server.
    assert!(tokio::time::timeout(Duration::ZERO, &mut create).await.is_err(), "the create completed");
    assert_eq!(direct.check_stat(&child).await.unwrap(), None, "a held request reached the server");

    proxy.pass();
    tokio::time::timeout(timing.deadline(), create).await.unwrap().unwrap();
    assert!(direct.check_stat(&child).await.unwrap().is_some());
    assert_eq!(client.state(), SessionState::SyncConnected);
}

#[tokio::test]
async fn pause_replies_lets_the_server_apply_what_the_client_does_not_hear_of() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let direct = connect(&server.connect_string(), timing.session_timeout()).await;
    let path = unique_path("held-replies");

    proxy.pause_replies();
    let mut create = Box::pin(client.create(&path, b"applied", &persistent()));
    // The server applies it...
    assert!(
        eventually(timing.deadline(), || async { matches!(direct.check_stat(&path).await, Ok(Some(_))) }).await,
        "the create never reached the server"
    );
    // ...while the client has heard nothing.
    assert!(tokio::time::timeout(Duration::ZERO, &mut create).await.is_err(), "the client got a reply");

    proxy.pass();
    let result = tokio::time::timeout(timing.deadline(), create).await.unwrap();
    eprintln!("create after pause_replies + pass: {result:?}");
    assert!(matches!(result, Ok(_) | Err(Error::ConnectionLoss)), "{result:?}");
    let mut states = client.state_watcher();
    assert!(wait_for_state(&mut states, SessionState::SyncConnected, timing.deadline()).await);
    assert_eq!(client.get_data(&path).await.unwrap().0, b"applied");
}

#[tokio::test]
async fn disarmed_swallow_lets_the_next_reply_through() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), timing.session_timeout()).await;
    let session = client.session_id();
    let path = unique_path("disarmed");

    proxy.swallow_next_reply();
    assert!(proxy.disarm_swallow(), "an armed swallow was not pending");
    assert!(!proxy.disarm_swallow(), "a disarmed swallow was still pending");
    assert!(!proxy.swallow_pending());
    client.create(&path, b"", &persistent()).await.unwrap();
    assert_eq!(client.session_id(), session);
    assert_eq!(client.state(), SessionState::SyncConnected);
    assert_eq!(proxy.connections(), 1, "the connection was closed");
    assert!(proxy.is_passing());
}
