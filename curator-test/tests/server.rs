//! TestingServer against real clients: start, stop, restart with data, kill, pause until the
//! session expires, expire_session, the shared server, builder options, four-letter words.

mod common;

use std::time::{Duration, Instant};

use common::{connect, ephemeral, init_tracing, persistent, unique_path};
use curator_test::{eventually, expire_session, four_letter_word, wait_for_state, TestingServer, Timing};
use zookeeper_client::{Acls, CreateMode, Error, SessionState};

fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn stop_and_restart_keep_data_and_port() {
    init_tracing();
    let timing = Timing::new();
    let mut server = TestingServer::start().await.unwrap();
    let port = server.port();
    assert_eq!(server.connect_string(), format!("127.0.0.1:{port}"));
    assert!(server.data_dir().join("version-2").exists());

    let client = connect(&server.connect_string(), timing.session_timeout()).await;
    client.create("/kept", b"data", &persistent()).await.unwrap();
    drop(client);

    let pid = server.pid().unwrap();
    server.stop().await.unwrap();
    assert!(!server.is_running());
    assert!(!process_exists(pid), "stop() returned while java still exists");
    assert!(four_letter_word(&server.connect_string(), "ruok").await.is_err());
    server.stop().await.unwrap(); // idempotent

    server.restart().await.unwrap();
    assert_eq!(server.port(), port);
    assert_eq!(four_letter_word(&server.connect_string(), "ruok").await.unwrap(), "imok");
    let client = connect(&server.connect_string(), timing.session_timeout()).await;
    assert_eq!(client.get_data("/kept").await.unwrap().0, b"data");

    // restart() of a running server: stop + start, data kept again.
    client.create("/kept/child", b"", &persistent()).await.unwrap();
    drop(client);
    server.restart().await.unwrap();
    let client = connect(&server.connect_string(), timing.session_timeout()).await;
    assert_eq!(client.list_children("/kept").await.unwrap(), vec!["child".to_string()]);
}

#[tokio::test]
async fn kill_then_restart_keeps_data_and_client_reconnects_to_same_session() {
    init_tracing();
    let timing = Timing::new();
    let mut server = TestingServer::start().await.unwrap();
    // A long session so it survives the server's absence.
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    client.create("/survivor", b"1", &persistent()).await.unwrap();
    let session = client.session_id();
    let mut states = client.state_watcher();

    let pid = server.pid().unwrap();
    server.kill().await.unwrap();
    assert!(!process_exists(pid), "kill() returned while java still exists");
    assert!(wait_for_state(&mut states, SessionState::Disconnected, timing.deadline()).await);

    server.restart().await.unwrap();
    assert!(wait_for_state(&mut states, SessionState::SyncConnected, timing.deadline()).await);
    assert_eq!(client.session_id(), session);
    assert_eq!(client.get_data("/survivor").await.unwrap().0, b"1");
}

#[tokio::test]
async fn pause_until_the_client_declares_its_session_expired() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::start().await.unwrap();
    let client = connect(&server.connect_string(), Duration::from_secs(1)).await;
    assert_eq!(client.session_timeout(), Duration::from_secs(1));
    client.create("/paused-ephemeral", b"", &ephemeral()).await.unwrap();
    let mut states = client.state_watcher();

    server.pause().unwrap();
    let paused_at = Instant::now();
    let deadline = timing.deadline();
    let expiry = tokio::spawn(async move {
        let expired = wait_for_state(&mut states, SessionState::Expired, deadline).await;
        (expired, paused_at.elapsed())
    });
    // A paused server accepts connections but answers nothing.
    let answer = tokio::time::timeout(Duration::from_secs(1), four_letter_word(&server.connect_string(), "ruok")).await;
    assert!(!matches!(answer, Ok(Ok(_))), "a paused server answered: {answer:?}");
    let (expired, took) = expiry.await.unwrap();
    server.resume().unwrap();
    assert!(expired, "client never declared its session expired; state {:?}", client.state());
    eprintln!("client declared Expired {took:?} after the server was paused (session timeout 1 s)");
    assert!(matches!(client.get_data("/").await, Err(Error::SessionExpired)));

    // Once resumed, the server expires the session too and the ephemeral node goes.
    let observer = connect(&server.connect_string(), timing.session_timeout()).await;
    assert!(
        eventually(timing.deadline(), || async { matches!(observer.check_stat("/paused-ephemeral").await, Ok(None)) })
            .await
    );
}

#[tokio::test]
async fn expire_session_expires_the_client() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let path = unique_path("expire");
    let client = connect(&server.connect_string(), timing.session_timeout()).await;
    client.create(&path, b"", &ephemeral()).await.unwrap();
    let mut states = client.state_watcher();

    let started = Instant::now();
    expire_session(&server.connect_string(), client.session()).await.unwrap();
    assert!(wait_for_state(&mut states, SessionState::Expired, timing.deadline()).await);
    eprintln!("expire_session: client saw Expired after {:?}", started.elapsed());

    let other = connect(&server.connect_string(), timing.session_timeout()).await;
    assert_eq!(other.check_stat(&path).await.unwrap(), None, "the ephemeral node outlived its session");
    // Expiring a session that is already gone fails.
    assert!(expire_session(&server.connect_string(), client.session()).await.is_err());
}

#[tokio::test]
async fn shared_server_is_one_server() {
    init_tracing();
    let a = TestingServer::shared();
    let b = tokio::task::spawn_blocking(TestingServer::shared).await.unwrap();
    assert!(std::ptr::eq(a, b));
    assert_eq!(four_letter_word(&a.connect_string(), "ruok").await.unwrap(), "imok");
    let srvr = four_letter_word(&a.connect_string(), "srvr").await.unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
}

#[tokio::test]
async fn ttl_and_container_nodes_work_on_the_default_server() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let client = connect(&server.connect_string(), timing.session_timeout()).await;
    let path = unique_path("ttl");
    let ttl = CreateMode::Persistent.with_acls(Acls::anyone_all()).with_ttl(Duration::from_millis(500));
    client.create(&path, b"", &ttl).await.unwrap();
    let container = unique_path("container");
    client.create(&container, b"", &CreateMode::Container.with_acls(Acls::anyone_all())).await.unwrap();
    assert!(client.check_stat(&container).await.unwrap().is_some());
}

#[tokio::test]
async fn builder_options_reach_the_server() {
    init_tracing();
    let server = TestingServer::builder()
        .tick_time(Duration::from_millis(200))
        .force_sync(true)
        .min_session_timeout(Duration::from_millis(600))
        .max_session_timeout(Duration::from_secs(3))
        .start()
        .await
        .unwrap();
    let conf = four_letter_word(&server.connect_string(), "conf").await.unwrap();
    for line in ["tickTime=200", "minSessionTimeout=600", "maxSessionTimeout=3000"] {
        assert!(conf.lines().any(|l| l == line), "{line} not in\n{conf}");
    }
    let client = connect(&server.connect_string(), Duration::from_secs(30)).await;
    assert_eq!(client.session_timeout(), Duration::from_secs(3), "max session timeout not applied");
}

/// The server's listen backlog takes a burst of connections: ZooKeeper's default (50) made the
/// kernel drop SYNs when 64 frameworks connected at once (issue 30's `sessions` benchmark: 13 of
/// 1,000 connects counted in `TcpExtListenOverflows`, each then waiting out the 1 s SYN
/// retransmission, which was the connect time's p99).
#[tokio::test]
async fn the_listen_backlog_takes_a_burst_of_connections() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let conf = four_letter_word(&server.connect_string(), "conf").await.unwrap();
    let backlog = conf
        .lines()
        .find_map(|l| l.strip_prefix("clientPortListenBacklog="))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or_else(|| panic!("no clientPortListenBacklog in\n{conf}"));
    assert!(backlog >= 1024, "listen backlog {backlog}, not at least 1024");
}

/// Every server curator-test starts carries `-Dcurator.test.run=<the CURATOR_TEST_RUN
/// environment variable, or "none">` on its command line, so that `scripts/test` checks for
/// leftovers among the servers its own run started only, not a ZooKeeper the tests did not
/// start (issue 26 item 14).
#[tokio::test]
async fn the_server_is_marked_with_the_test_run() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let pid = server.pid().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let run = std::env::var(curator_test::RUN_ENV).ok().filter(|r| !r.is_empty()).unwrap_or_else(|| "none".into());
    let marker = format!("-Dcurator.test.run={run}");
    assert!(args.contains(&marker), "{marker} not in {args:?}");
    let main = args.iter().position(|a| a.ends_with("QuorumPeerMain")).expect("a ZooKeeper server");
    assert!(args.iter().position(|a| *a == marker) < Some(main), "a JVM option, before the main class: {args:?}");
}

#[tokio::test]
async fn pause_and_resume_need_a_running_server() {
    init_tracing();
    let mut server = TestingServer::start().await.unwrap();
    server.kill().await.unwrap();
    assert!(server.pause().is_err());
    assert!(server.resume().is_err());
    server.kill().await.unwrap(); // idempotent
}
