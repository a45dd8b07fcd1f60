//! The demo, run as a user runs it: embedded, against a named server, and against a port where
//! nothing listens.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use curator_core::CuratorFramework;
use curator_test::TestingServer;

fn demo(env: &[(&str, &str)]) -> (Output, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_demo"));
    cmd.env_remove("ZK_CONNECT").env("RUST_LOG", "info").env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the demo runs");
    (out, started.elapsed())
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn embedded_demo_passes_every_check() {
    let (out, took) = demo(&[]);
    let log = text(&out);
    assert!(out.status.success(), "exit {:?}\n{log}", out.status);
    for part in ["1. locking", "2. membership", "3. configuration", "started an embedded ZooKeeper"] {
        assert!(log.contains(part), "missing {part:?}\n{log}");
    }
    assert!(log.contains("checks held") && !log.contains('✘'), "{log}");
    assert!(took < Duration::from_secs(120), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_server_is_used_and_left_clean() {
    let server = TestingServer::start().await.expect("server");
    let connect = server.connect_string();
    let (out, _) = tokio::task::spawn_blocking({
        let connect = connect.clone();
        move || demo(&[("ZK_CONNECT", &connect)])
    })
    .await
    .expect("demo thread");
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains(&format!("using the ZooKeeper at {connect}")), "{log}");
    let fw = CuratorFramework::builder().connect_string(&connect).build().expect("builder");
    fw.start().expect("start");
    fw.block_until_connected(Duration::from_secs(10)).await.expect("connected");
    let mut left = fw.get_children().for_path("/").await.expect("list /");
    left.retain(|n| n != "zookeeper");
    assert!(left.is_empty(), "the demo left {left:?} behind");
    fw.close().await;
}

#[test]
fn nothing_listening_fails_fast_with_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let (out, took) = demo(&[("ZK_CONNECT", &format!("127.0.0.1:{port}"))]);
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains(&format!("cannot reach ZooKeeper at 127.0.0.1:{port}")), "{log}");
    assert!(took < Duration::from_secs(15), "took {took:?}: the connection timeout is 5 s");
}
