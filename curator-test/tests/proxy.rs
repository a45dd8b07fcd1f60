//! ChaosProxy, observed by real clients: pause, cut, reject, swallow-next-reply. The proxies
//! stand in front of the binary's shared server; each test uses its own proxy and paths.

mod common;

use std::time::{Duration, Instant};

use common::{connect, init_tracing, persistent, unique_path};
use curator_test::{eventually, four_letter_word, wait_for_state, ChaosProxy, TestingServer, Timing};
use zookeeper_client::{AddWatchMode, EventType, SessionState};

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
