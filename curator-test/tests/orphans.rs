//! No java process outlives the test binary: this binary runs copies of itself that hold
//! servers, ends them abruptly or normally, and checks that java is gone.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::init_tracing;
use curator_test::{eventually, TestingServer, Timing};

const PID_FILE_ENV: &str = "CURATOR_TEST_ORPHAN_PID_FILE";

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes: it holds no port and no memory.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Runs `test` of this binary in a child process with a pid file to report java's pid.
fn spawn_child(test: &str, pid_file: &Path) -> std::process::Child {
    curator_test::child_test_command(test).env(PID_FILE_ENV, pid_file).spawn().unwrap()
}

/// Reads `pid data_dir` lines that the child wrote.
async fn read_servers(pid_file: &Path, n: usize, timing: &Timing) -> Vec<(u32, PathBuf)> {
    let mut servers = Vec::new();
    let found = eventually(timing.deadline(), || {
        let text = std::fs::read_to_string(pid_file).unwrap_or_default();
        servers = text
            .lines()
            .filter_map(|l| {
                let (pid, dir) = l.split_once(' ')?;
                Some((pid.parse().ok()?, PathBuf::from(dir)))
            })
            .collect();
        let ok = servers.len() >= n && text.ends_with('\n');
        async move { ok }
    })
    .await;
    assert!(found, "the child never reported {n} servers");
    servers
}

fn line(server: &TestingServer) -> String {
    format!("{} {}\n", server.pid().unwrap(), server.data_dir().display())
}

/// Child: starts a server of its own and the shared one, reports both pids, then waits to be
/// killed.
#[test]
#[ignore = "run by java_dies_when_the_test_binary_is_killed"]
fn child_holds_servers_until_killed() {
    let Some(pid_file) = std::env::var_os(PID_FILE_ENV) else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let own = runtime.block_on(TestingServer::start()).unwrap();
    let shared = TestingServer::shared();
    std::fs::write(&pid_file, line(&own) + &line(shared)).unwrap();
    loop {
        std::thread::park();
    }
}

/// Child: uses the shared server (never dropped) and returns normally.
#[test]
#[ignore = "run by shared_server_dies_when_the_test_binary_exits"]
fn child_uses_the_shared_server_and_exits() {
    let Some(pid_file) = std::env::var_os(PID_FILE_ENV) else { return };
    let shared = TestingServer::shared();
    std::fs::write(&pid_file, line(shared)).unwrap();
}

#[tokio::test]
async fn java_dies_when_the_test_binary_is_killed() {
    init_tracing();
    let timing = Timing::new();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = spawn_child("child_holds_servers_until_killed", &pid_file);
    let servers = read_servers(&pid_file, 2, &timing).await;
    assert!(servers.iter().all(|(p, d)| alive(*p) && d.exists()));

    child.kill().unwrap(); // SIGKILL: no Drop, no atexit
    child.wait().unwrap();
    let gone =
        eventually(Duration::from_secs(10), || async { servers.iter().all(|(p, d)| !alive(*p) && !d.exists()) }).await;
    assert!(gone, "java or its directory outlived a SIGKILLed test binary: {servers:?}");
}

#[tokio::test]
async fn shared_server_dies_when_the_test_binary_exits() {
    init_tracing();
    let timing = Timing::new();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = spawn_child("child_uses_the_shared_server_and_exits", &pid_file);
    let status = child.wait().unwrap();
    assert!(status.success());
    let servers = read_servers(&pid_file, 1, &timing).await;
    let (pid, dir) = &servers[0];
    // The atexit hook kills and reaps java, and removes its directory, before the binary is gone.
    assert!(!alive(*pid), "java {pid} outlived the test binary's exit");
    assert!(!dir.exists(), "{} outlived the test binary's exit", dir.display());
}
