//! The `curator-inspect` binary itself, against a real ZooKeeper: its output on a held lock,
//! as text and as JSON, and its exit codes. (The layouts are covered in depth, in-process, by
//! the `tests` crate's `inspect` tests.)

use std::process::{Command, Output};
use std::time::Duration;

use curator_core::CuratorFramework;
use curator_recipes::InterProcessMutex;
use curator_test::{TestingServer, Timing};

fn inspector(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_curator-inspect")).args(args).output().expect("run curator-inspect")
}

/// A lock holder as the binary prints it: text by default, one JSON document with `--json`,
/// exit code 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_shows_a_lock_holder() {
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let fw = CuratorFramework::builder()
        .connect_string(&connect)
        .default_data(b"cli-holder".to_vec())
        .build()
        .expect("options");
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let path = format!("/inspect-cli-{}-{nanos}", std::process::id());
    let guard = InterProcessMutex::new(&fw, &path).expect("lock").acquire().await.expect("acquired");

    let (c, p) = (connect.clone(), path.clone());
    let text = tokio::task::spawn_blocking(move || inspector(&["--connect", &c, "lock", &p])).await.unwrap();
    assert_eq!(text.status.code(), Some(0), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("1 holder, 0 waiters") && text.contains("\"cli-holder\""), "{text}");

    let (c, p) = (connect.clone(), path.clone());
    let json = tokio::task::spawn_blocking(move || inspector(&["--connect", &c, "--json", "lock", &p])).await.unwrap();
    assert_eq!(json.status.code(), Some(0), "{}", String::from_utf8_lossy(&json.stderr));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!(json["kind"], "lock");
    assert_eq!(json["holders"][0]["fencing_token"].as_i64(), Some(guard.fencing_token()));
    assert_eq!(json["holders"][0]["data"]["value"], "cli-holder");

    guard.release().await.expect("release");
    fw.close().await;
}

/// Exit code 2 for bad arguments, 1 with a message on stderr when no server answers.
#[test]
fn binary_exit_codes() {
    let bad = inspector(&["--connect", "127.0.0.1:1", "nonsense"]);
    assert_eq!(bad.status.code(), Some(2));
    let started = std::time::Instant::now();
    let refused = inspector(&["--connect", "127.0.0.1:1", "--timeout", "1", "election", "/x"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("cannot connect to 127.0.0.1:1"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}
