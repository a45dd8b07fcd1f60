//! Interop with Apache Curator 5.4 (Debian's jars): a Java peer (tests/java/LockPeer.java,
//! compiled here with `javac`) takes Curator's InterProcessMutex, InterProcessReadWriteLock and
//! InterProcessSemaphoreMutex, and InterProcessSemaphoreV2 sized by a SharedCount, on the same
//! paths as Rust clients; the checker sees no overlap either way. Missing `javac`
//! or jars fail the test with a message saying what to install.

use std::process::Stdio;
use std::time::Duration;

use curator_core::CuratorFramework;
use curator_recipes::SharedCount;
use curator_recipes::{
    InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
};
use curator_test::{TestingServer, Timing};
use tests::locks::{framework, Checker, HoldRecord};
use tests::{init_tracing, unique_path};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs the Java peer; `rust_side` runs once the peer is connected and starts its cycles at
/// the same moment. Returns the peer's holds.
async fn with_java_peer<F>(
    connect: &str,
    mode: &str,
    path: &str,
    cycles: usize,
    hold_us: u64,
    rust_side: F,
) -> Vec<HoldRecord>
where
    F: std::future::Future<Output = ()>,
{
    let mut child = tests::java::peer("LockPeer")
        .args([connect, mode, path, &cycles.to_string(), &hold_us.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run java (apt-get install default-jdk-headless)");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready =
        tokio::time::timeout(Timing::new().deadline(), lines.next_line()).await.expect("java peer connects in time");
    assert_eq!(ready.unwrap().as_deref(), Some("READY"));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"GO\n").await.unwrap();
    stdin.flush().await.unwrap();
    let java = async {
        let mut holds = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["HOLD", kind, start, end] => holds.push(HoldRecord {
                    who: format!("java-{kind}"),
                    start_us: start.parse().unwrap(),
                    end_us: end.parse().unwrap(),
                    token: None,
                    shared: *kind == "R",
                }),
                ["DONE"] => break,
                _ => {}
            }
        }
        holds
    };
    let (holds, ()) = tokio::time::timeout(Duration::from_secs(120), futures::future::join(java, rust_side))
        .await
        .expect("both sides finish");
    let status = tokio::time::timeout(Timing::new().deadline(), child.wait()).await.expect("java exits").unwrap();
    assert!(status.success(), "java peer failed: {status}");
    assert_eq!(holds.len(), cycles, "the java peer reported every hold");
    holds
}

/// Panics unless Rust holds happened between the Java peer's first and last holds (the two
/// sides really contended).
fn assert_interleaved(java: &[HoldRecord], checker: &Checker) {
    let first = java.iter().map(|h| h.start_us).min().unwrap();
    let last = java.iter().map(|h| h.end_us).max().unwrap();
    let inside = checker.records().iter().filter(|r| r.start_us > first && r.end_us < last).count();
    assert!(inside > 0, "no Rust hold between the Java peer's first and last: the sides did not contend");
}

/// The Rust side: one task per framework running `client(index, framework)`, all awaited.
async fn rust_clients<F, Fut>(fws: Vec<CuratorFramework>, client: F)
where
    F: Fn(usize, CuratorFramework) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tasks: Vec<_> = fws.into_iter().enumerate().map(|(c, fw)| tokio::spawn(client(c, fw))).collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// The verdict: the sides contended, and no hold of either overlapped another (`holds` in all).
fn verify_with_java(java: Vec<HoldRecord>, checker: &Checker, holds: usize) {
    assert_interleaved(&java, checker);
    for h in java {
        checker.record_external(h);
    }
    checker.verify(holds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_mutexes_exclude_each_other() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("interop-mutex");
    let checker = Checker::new();
    const RUST_CLIENTS: usize = 3;
    const RUST_CYCLES: usize = 80;
    const JAVA_CYCLES: usize = 150;
    let mut fws = Vec::new();
    for _ in 0..RUST_CLIENTS {
        fws.push(framework(&server.connect_string()).await);
    }
    let rust_side = rust_clients(fws.clone(), |c, fw| {
        let (path, checker) = (path.clone(), checker.clone());
        async move {
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            for _ in 0..RUST_CYCLES {
                let g = mutex.acquire().await.unwrap();
                checker.hold(&format!("rust{c}"), Some(g.fencing_token()), Duration::from_micros(200)).await;
                g.release().await.unwrap();
            }
        }
    });
    let java = with_java_peer(&server.connect_string(), "mutex", &path, JAVA_CYCLES, 200, rust_side).await;
    verify_with_java(java, &checker, RUST_CLIENTS * RUST_CYCLES + JAVA_CYCLES);
    for fw in fws {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_read_write_locks_exclude_each_other() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("interop-rw");
    let checker = Checker::new();
    const RUST_CLIENTS: usize = 3;
    const RUST_OPS: usize = 80;
    const JAVA_OPS: usize = 150;
    let mut fws = Vec::new();
    for _ in 0..RUST_CLIENTS {
        fws.push(framework(&server.connect_string()).await);
    }
    let rust_side = rust_clients(fws.clone(), |c, fw| {
        let (path, checker) = (path.clone(), checker.clone());
        async move {
            let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let mut rng = fastrand::Rng::with_seed(100 + c as u64);
            for _ in 0..RUST_OPS {
                if rng.u8(0..10) < 7 {
                    let g = rw.read_lock().acquire().await.unwrap();
                    checker
                        .hold_shared(&format!("rust-r{c}"), Some(g.fencing_token()), Duration::from_micros(200))
                        .await;
                    g.release().await.unwrap();
                } else {
                    let g = rw.write_lock().acquire().await.unwrap();
                    checker.hold(&format!("rust-w{c}"), Some(g.fencing_token()), Duration::from_micros(200)).await;
                    g.release().await.unwrap();
                }
            }
        }
    });
    let java = with_java_peer(&server.connect_string(), "rw", &path, JAVA_OPS, 200, rust_side).await;
    assert!(java.iter().any(|h| h.shared) && java.iter().any(|h| !h.shared), "the peer took both kinds");
    verify_with_java(java, &checker, RUST_CLIENTS * RUST_OPS + JAVA_OPS);
    for fw in fws {
        fw.close().await;
    }
}

/// Curator's InterProcessSemaphoreMutex (a semaphore of one lease: a mutex under `P/locks`
/// serialising takers, leases under `P/leases`) and ours on one path exclude each other, and
/// leave no lease behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_semaphores_exclude_each_other() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("interop-semaphore");
    let checker = Checker::new();
    const RUST_CLIENTS: usize = 3;
    const RUST_CYCLES: usize = 40;
    const JAVA_CYCLES: usize = 80;
    let mut fws = Vec::new();
    for _ in 0..RUST_CLIENTS {
        fws.push(framework(&server.connect_string()).await);
    }
    let rust_side = rust_clients(fws.clone(), |c, fw| {
        let (path, checker) = (path.clone(), checker.clone());
        async move {
            let semaphore = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
            for _ in 0..RUST_CYCLES {
                semaphore.acquire().await.unwrap();
                checker.hold(&format!("rust{c}"), None, Duration::from_micros(200)).await;
                semaphore.release().await.unwrap();
            }
        }
    });
    let java = with_java_peer(&server.connect_string(), "semaphore", &path, JAVA_CYCLES, 200, rust_side).await;
    verify_with_java(java, &checker, RUST_CLIENTS * RUST_CYCLES + JAVA_CYCLES);
    let leases = tests::children(&fws[0], &format!("{path}/leases")).await;
    assert!(leases.is_empty(), "leases left behind: {leases:?}");
    for fw in fws {
        fw.close().await;
    }
}

/// Curator's `InterProcessSemaphoreV2` sized by a `SharedCountReader` and ours sized by a
/// `SharedCount` (`with_shared_count`), on one semaphore path and one count node holding 1:
/// each side reads the count the other seeded or found, and their leases exclude each other
/// (issue 16's semaphore sized from a count; Curator's `testThreadedLeaseIncrease` in
/// `locks_curator_semaphore.rs` covers resizing on our side alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_semaphores_sized_by_one_count_exclude_each_other() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("interop-semaphore-count");
    let count_path = format!("{path}-count");
    let checker = Checker::new();
    const RUST_CLIENTS: usize = 3;
    const RUST_CYCLES: usize = 30;
    const JAVA_CYCLES: usize = 60;
    let mut fws = Vec::new();
    for _ in 0..RUST_CLIENTS {
        fws.push(framework(&server.connect_string()).await);
    }
    let rust_side = rust_clients(fws.clone(), |c, fw| {
        let (path, count_path, checker) = (path.clone(), count_path.clone(), checker.clone());
        async move {
            let count = SharedCount::new(&fw, &count_path, 1).unwrap();
            count.start().unwrap();
            count.ready().await.unwrap();
            assert_eq!(count.count().unwrap(), 1, "the count node holds 1, whoever seeded it");
            let semaphore = InterProcessSemaphoreV2::with_shared_count(&fw, &path, &count).unwrap();
            for _ in 0..RUST_CYCLES {
                let lease = semaphore.acquire().await.unwrap();
                checker.hold(&format!("rust{c}"), None, Duration::from_micros(200)).await;
                lease.release().await.unwrap();
            }
        }
    });
    let java = with_java_peer(&server.connect_string(), "semaphore-count", &path, JAVA_CYCLES, 200, rust_side).await;
    verify_with_java(java, &checker, RUST_CLIENTS * RUST_CYCLES + JAVA_CYCLES);
    let leases = tests::children(&fws[0], &format!("{path}/leases")).await;
    assert!(leases.is_empty(), "leases left behind: {leases:?}");
    let data = fws[0].get_data().for_path(&count_path).await.unwrap();
    assert_eq!(data, 1i32.to_be_bytes(), "the count node is Curator's 4-byte big-endian 1");
    for fw in fws {
        fw.close().await;
    }
}

/// Revocation of both halves across languages (issue 31 item 6b): Curator's `Revoker` (Java,
/// tests/java/RevokePeer.java) asks our revocable read or write holder to give the lock up, and
/// ours asks Curator's revocable `readLock()`/`writeLock()` holder; each side's listener is
/// called and its holder releases, after which the other side takes the write lock. Both sides
/// write the same `__REVOKE__` into the holder's node. Curator's revocation scenario is
/// `TestInterProcessMutex.testRevoking`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_revoke_each_others_read_write_holders() {
    use std::sync::{Arc, Mutex};

    use curator_recipes::{ReadLock, Revoker, WriteLock};
    use curator_test::eventually;
    use tests::java::LinePeer;

    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let fw = framework(&connect).await;
    for half in ["read", "write"] {
        let path = unique_path("interop-revoke");
        let events: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = events.clone();
        let mut java = LinePeer::with_events("RevokePeer", &[&connect, &path], move |line| {
            let event = line.starts_with("ASKED") || line.starts_with("RELEASED") || line.starts_with("FAILED");
            if event {
                seen.lock().unwrap().push(line.to_string());
            }
            event
        })
        .await;

        // Curator revokes our holder.
        let rw = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let (asked, mut revoked) = tokio::sync::mpsc::unbounded_channel();
        let guard = if half == "read" {
            rw.read_lock().make_revocable(move |read: &ReadLock| {
                let _ = asked.send(read.lock_path());
            });
            rw.read_lock().acquire().await.unwrap()
        } else {
            rw.write_lock().make_revocable(move |write: &WriteLock| {
                let _ = asked.send(write.lock_path());
            });
            rw.write_lock().acquire().await.unwrap()
        };
        let node = guard.path().to_string();
        assert_eq!(java.command(&format!("REVOKE {node}")).await, format!("REVOKED {node}"));
        let named = tokio::time::timeout(Timing::new().deadline(), revoked.recv()).await.expect("asked").unwrap();
        assert_eq!(named.as_deref(), Some(node.as_str()), "{half}: Curator's Revoker reached our holder");
        guard.release().await.unwrap();

        // We revoke Curator's holder.
        let answer = java.command(&format!("HOLD {half}")).await;
        let java_node = answer.rsplit(' ').next().expect("a node").to_string();
        assert!(answer.starts_with(&format!("HELD {half} {path}/")), "{answer}");
        let other = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        Revoker::attempt_revoke(&fw, &java_node).await.unwrap();
        let released = format!("RELEASED {half}");
        assert!(
            eventually(Timing::new().deadline(), || async { events.lock().unwrap().contains(&released) }).await,
            "{half}: Curator's holder was not revoked: {:?}",
            events.lock().unwrap()
        );
        assert_eq!(*events.lock().unwrap(), vec![format!("ASKED {half}"), released.clone()]);
        let write = other.write_lock().acquire_timeout(Timing::new().deadline()).await.unwrap();
        write.expect("the write lock is free once Curator's holder released").release().await.unwrap();
        java.quit().await;
    }
    fw.close().await;
}
