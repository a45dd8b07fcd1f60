//! The inspector (`curator-inspect`, issue 18) against real ZooKeeper: Rust holders and
//! waiters of a mutex, a read-write lock and a semaphore; a `LeaderLatch` election; a discovery
//! registration (and a node that is not one); protected nodes left by a killed process; the
//! issue's "must show", a lock path with a Java (Curator 5.4) holder and Rust waiters; and the
//! exit codes. Each runs the program in-process through `curator_inspect::run` with `--json`
//! and checks the document's shape; the binary itself is run by `curator-inspect/tests/cli.rs`.

use std::process::Stdio;
use std::time::Duration;

use curator_core::{CreateMode, CuratorFramework};
use curator_discovery::{ServiceDiscovery, ServiceInstance};
use curator_recipes::LeaderLatch;
use curator_recipes::{InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2};
use curator_test::{eventually, TestingServer, Timing};
use serde_json::Value;
use tests::{builder, client, connected, init_tracing, unique_path, wait_children};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs the program with `args` after the program name; returns (exit code, stdout, stderr).
async fn run(args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["curator-inspect"];
    argv.extend_from_slice(args);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = curator_inspect::run(argv, &mut out, &mut err).await;
    (code, String::from_utf8(out).expect("utf-8 stdout"), String::from_utf8(err).expect("utf-8 stderr"))
}

/// `--json` output of `command path` (plus `extra`), which must exit 0; also checks that the
/// text output of the same command exits 0 and returns it beside the JSON.
async fn inspect(connect: &str, command: &str, path: &str, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["--connect", connect, "--json", command, path];
    args.extend_from_slice(extra);
    let (code, out, err) = run(&args).await;
    assert_eq!(code, 0, "exit code of {args:?}; stderr: {err}");
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    let mut args = vec!["--connect", connect, command, path];
    args.extend_from_slice(extra);
    let (code, text, err) = run(&args).await;
    assert_eq!(code, 0, "exit code of {args:?}; stderr: {err}");
    (json, text)
}

/// A framework whose nodes carry `data` (the recipes' default node data).
async fn labelled(connect: &str, data: &str) -> CuratorFramework {
    connected(builder(connect).default_data(data.as_bytes().to_vec())).await
}

async fn session_hex(fw: &CuratorFramework) -> String {
    format!("{:#x}", fw.session().await.expect("session").id() as u64)
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().expect("an object").keys().map(String::as_str).collect();
    k.sort();
    k
}

/// Checks one contender object's shape and returns (role, kind, data value).
fn contender(c: &Value) -> (String, String, String) {
    assert_eq!(
        keys(c),
        vec![
            "data",
            "fencing_token",
            "kind",
            "name",
            "path",
            "position",
            "protected_id",
            "role",
            "sequence",
            "session"
        ]
    );
    assert_eq!(keys(&c["data"]), vec!["encoding", "len", "value"]);
    assert!(c["fencing_token"].as_i64().is_some_and(|t| t > 0), "{c}");
    assert!(c["session"].as_str().is_some_and(|s| s.starts_with("0x")), "{c}");
    assert_eq!(c["protected_id"].as_str().map(str::len), Some(36), "{c}");
    (
        c["role"].as_str().unwrap().to_string(),
        c["kind"].as_str().unwrap().to_string(),
        c["data"]["value"].as_str().unwrap().to_string(),
    )
}

fn summary(list: &Value) -> Vec<(String, String, String)> {
    list.as_array().expect("a list").iter().map(contender).collect()
}

fn s(role: &str, kind: &str, data: &str) -> (String, String, String) {
    (role.into(), kind.into(), data.into())
}

/// An `InterProcessMutex` with one holder and two waiters: the holder first, then the
/// waiters in the order they queued, each with its token, session and data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_holder_and_waiters_in_order() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-mutex");
    let fws =
        [labelled(&connect, "rust-0").await, labelled(&connect, "rust-1").await, labelled(&connect, "rust-2").await];
    let observer = client(&connect).await;
    let guard = InterProcessMutex::new(&fws[0], &path).unwrap().acquire().await.unwrap();
    let mut waiters = Vec::new();
    for (i, fw) in fws.iter().enumerate().skip(1) {
        let lock = InterProcessMutex::new(fw, &path).unwrap();
        waiters.push(tokio::spawn(async move { lock.acquire().await.map(|g| (lock, g)) }));
        wait_children(&observer, &path, i + 1).await;
    }

    let (json, text) = inspect(&connect, "lock", &path, &[]).await;
    assert_eq!(keys(&json), vec!["holders", "kind", "layout", "notes", "others", "path", "waiters"]);
    assert_eq!((json["kind"].as_str(), json["layout"].as_str()), (Some("lock"), Some("mutex")));
    assert_eq!(summary(&json["holders"]), vec![s("holder", "mutex", "rust-0")]);
    assert_eq!(summary(&json["waiters"]), vec![s("waiter", "mutex", "rust-1"), s("waiter", "mutex", "rust-2")]);
    assert_eq!(json["holders"][0]["fencing_token"].as_i64(), Some(guard.fencing_token()));
    for (i, c) in json["holders"].as_array().unwrap().iter().chain(json["waiters"].as_array().unwrap()).enumerate() {
        assert_eq!(c["position"].as_u64(), Some(i as u64 + 1));
        assert_eq!(c["session"].as_str().unwrap(), session_hex(&fws[i]).await);
    }
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("mutex") && lines[0].contains("1 holder, 2 waiters"), "{text}");
    assert!(lines[1].contains("holder") && lines[1].contains("\"rust-0\""), "{text}");
    assert!(lines[1].contains(&format!("token {:#x}", guard.fencing_token())), "{text}");
    assert!(lines[2].contains("waiter") && lines[2].contains("\"rust-1\""), "{text}");
    assert!(lines[3].contains("waiter") && lines[3].contains("\"rust-2\""), "{text}");

    guard.release().await.unwrap();
    for w in waiters {
        let (_lock, g) = w.await.unwrap().unwrap();
        g.release().await.unwrap();
    }
    for fw in fws {
        fw.close().await;
    }
    observer.close().await;
}

/// An `InterProcessReadWriteLock`: two readers hold, then a writer waits, and a reader
/// queued after the writer waits too; each says whether it reads or writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_readers_and_writers() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-rw");
    let observer = client(&connect).await;
    let a = labelled(&connect, "reader-a").await;
    let b = labelled(&connect, "reader-b").await;
    let w = labelled(&connect, "writer-c").await;
    let d = labelled(&connect, "reader-d").await;
    let ga = InterProcessReadWriteLock::new(&a, &path).unwrap().read_lock().acquire().await.unwrap();
    let gb = InterProcessReadWriteLock::new(&b, &path).unwrap().read_lock().acquire().await.unwrap();
    let lock_w = InterProcessReadWriteLock::new(&w, &path).unwrap();
    let writer = tokio::spawn(async move { lock_w.write_lock().acquire().await.map(|g| (lock_w, g)) });
    wait_children(&observer, &path, 3).await;
    let lock_d = InterProcessReadWriteLock::new(&d, &path).unwrap();
    let reader = tokio::spawn(async move { lock_d.read_lock().acquire().await.map(|g| (lock_d, g)) });
    wait_children(&observer, &path, 4).await;

    let (json, text) = inspect(&connect, "lock", &path, &[]).await;
    assert_eq!(json["layout"].as_str(), Some("read_write"));
    assert_eq!(summary(&json["holders"]), vec![s("holder", "read", "reader-a"), s("holder", "read", "reader-b")]);
    assert_eq!(summary(&json["waiters"]), vec![s("waiter", "write", "writer-c"), s("waiter", "read", "reader-d")]);
    assert!(text.contains("read-write lock") && text.contains("2 holders, 2 waiters"), "{text}");

    ga.release().await.unwrap();
    gb.release().await.unwrap();
    let (_l, gw) = writer.await.unwrap().unwrap();
    gw.release().await.unwrap();
    let (_l, gd) = reader.await.unwrap().unwrap();
    gd.release().await.unwrap();
    for fw in [a, b, w, d, observer] {
        fw.close().await;
    }
}

/// An `InterProcessSemaphoreV2` with 2 leases and 4 takers: two leases held, the third
/// lease waiting for room (its taker holds the takers' lock), the fourth taker in line for
/// that lock. Without `--max-leases` the inspector says it cannot tell the waiting lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_leases_and_takers() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-semaphore");
    let observer = client(&connect).await;
    let mut fws = Vec::new();
    let mut held = Vec::new();
    let mut waiting = Vec::new();
    for i in 0..4 {
        let fw = labelled(&connect, &format!("taker-{i}")).await;
        let semaphore = InterProcessSemaphoreV2::new(&fw, &path, 2).unwrap();
        if i < 2 {
            held.push(semaphore.acquire().await.unwrap());
        } else {
            waiting.push(tokio::spawn(async move { semaphore.acquire().await.map(|l| (semaphore, l)) }));
            wait_children(&observer, &format!("{path}/locks"), i - 1).await;
        }
        fws.push(fw);
    }
    wait_children(&observer, &format!("{path}/leases"), 3).await;

    let (json, _) = inspect(&connect, "lock", &path, &["--max-leases", "2"]).await;
    assert_eq!(json["layout"].as_str(), Some("semaphore"));
    assert_eq!(summary(&json["holders"]), vec![s("holder", "lease", "taker-0"), s("holder", "lease", "taker-1")]);
    assert_eq!(
        summary(&json["waiters"]),
        vec![s("waiter", "lease", "taker-2"), s("waiter", "taker", "taker-2"), s("waiter", "taker", "taker-3")]
    );
    let (json, text) = inspect(&connect, "lock", &path, &[]).await;
    assert_eq!(json["holders"].as_array().map(Vec::len), Some(3), "every lease shows as held without --max-leases");
    assert!(json["notes"][0].as_str().is_some_and(|n| n.contains("--max-leases")), "{json}");
    assert!(text.contains("note:") && text.contains("semaphore"), "{text}");

    for lease in held {
        lease.release().await.unwrap();
    }
    for w in waiting {
        let (_s, lease) = w.await.unwrap().unwrap();
        lease.release().await.unwrap();
    }
    for fw in fws {
        fw.close().await;
    }
    observer.close().await;
}

/// A `LeaderLatch` election of three: the leader is the first participant, the others
/// follow in order, each with its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_latch_leader_and_participants() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-latch");
    let observer = client(&connect).await;
    let mut fws = Vec::new();
    let mut latches = Vec::new();
    for id in ["alpha", "beta", "gamma"] {
        let fw = client(&connect).await;
        let latch = LeaderLatch::new(&fw, &path, id).unwrap();
        latch.start().unwrap();
        latch.ready().await.unwrap();
        latches.push(latch);
        fws.push(fw);
        wait_children(&observer, &path, fws.len()).await;
    }
    latches[0].await_leadership_timeout(Timing::new().deadline()).await.unwrap().expect("alpha leads");

    let (json, text) = inspect(&connect, "election", &path, &[]).await;
    assert_eq!(keys(&json), vec!["kind", "leader", "others", "participants", "path", "recipe"]);
    assert_eq!((json["recipe"].as_str(), json["leader"].as_str()), (Some("leader_latch"), Some("alpha")));
    assert_eq!(
        summary(&json["participants"]),
        vec![s("holder", "latch", "alpha"), s("waiter", "latch", "beta"), s("waiter", "latch", "gamma")]
    );
    let leadership = latches[0].leadership().expect("leads");
    assert_eq!(json["participants"][0]["fencing_token"].as_i64(), Some(leadership.fencing_token()));
    assert!(text.lines().next().unwrap().contains("LeaderLatch; leader \"alpha\"; 3 participants"), "{text}");

    for latch in latches {
        latch.close().await;
    }
    for fw in fws {
        fw.close().await;
    }
    observer.close().await;
}

/// `election` on a mutex's path (issue 26 item 12): an `InterProcessMutex` and a
/// `LeaderSelector` make the same `lock-` nodes, so the report does not claim either: the
/// recipe is "mutex or LeaderSelector", and the first in line is shown as such, not as a
/// leader. A `LeaderSelector`'s path reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_on_lock_nodes_says_mutex_or_leader_selector() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-ambiguous");
    let observer = client(&connect).await;
    let (holder_fw, waiter_fw) = (labelled(&connect, "holder").await, labelled(&connect, "waiter").await);
    let guard = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
    let waiter = InterProcessMutex::new(&waiter_fw, &path).unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire().await.map(|g| g.keep()) });
    wait_children(&observer, &path, 2).await;

    let (json, text) = inspect(&connect, "election", &path, &[]).await;
    assert_eq!(json["recipe"].as_str(), Some("mutex_or_leader_selector"), "{json}");
    assert_eq!(json["leader"].as_str(), Some("holder"), "the first in line's data");
    assert_eq!(summary(&json["participants"]), vec![s("holder", "mutex", "holder"), s("waiter", "mutex", "waiter")]);
    let first = text.lines().next().unwrap();
    assert!(first.contains("mutex or LeaderSelector"), "{text}");
    assert!(!first.contains("leader \""), "no leader is claimed: {text}");
    assert!(first.contains("first in line \"holder\""), "{text}");

    guard.release().await.unwrap();
    waiting.await.unwrap().unwrap();
    for fw in [holder_fw, waiter_fw, observer] {
        fw.close().await;
    }
}

/// A discovery registration is shown with its address, port, type and payload; a node under
/// the service that is not an instance is shown with its data, not a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_services_and_instances() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let base = unique_path("inspect-discovery");
    let fw = client(&connect).await;
    let discovery = ServiceDiscovery::<Value>::builder(&fw, &base).build().unwrap();
    discovery.start().unwrap();
    discovery.ready().await.unwrap();
    let instance = ServiceInstance::builder("search")
        .id("one")
        .address("10.0.0.7")
        .port(8081)
        .payload(serde_json::json!({"zone": "eu-1"}))
        .build();
    discovery.register(instance).await.unwrap();
    fw.create().for_path(&format!("{base}/search/garbage"), vec![0xff, 0x00, 0x01]).await.unwrap();

    let (json, text) = inspect(&connect, "services", &base, &[]).await;
    assert_eq!(keys(&json), vec!["base", "exists", "kind", "services"]);
    assert_eq!(json["services"][0]["name"].as_str(), Some("search"));
    let instances = json["services"][0]["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{json}");
    let garbage = &instances[0];
    assert_eq!(garbage["id"].as_str(), Some("garbage"));
    assert!(garbage["error"].as_str().is_some(), "{garbage}");
    assert_eq!(garbage["data"]["value"].as_str(), Some("ff0001"));
    let one = &instances[1];
    assert_eq!(
        keys(one),
        vec![
            "address",
            "data",
            "enabled",
            "error",
            "id",
            "path",
            "payload",
            "port",
            "registration_time_utc",
            "service_type",
            "session",
            "ssl_port"
        ]
    );
    assert_eq!((one["address"].as_str(), one["port"].as_i64()), (Some("10.0.0.7"), Some(8081)));
    assert_eq!(one["service_type"].as_str(), Some("DYNAMIC"));
    assert_eq!(one["payload"], serde_json::json!({"zone": "eu-1"}));
    assert_eq!(one["session"].as_str().unwrap(), session_hex(&fw).await);
    assert!(one["error"].is_null());
    assert!(text.contains("search: 2 instances") && text.contains("10.0.0.7:8081") && text.contains("eu-1"), "{text}");
    assert!(text.contains("garbage") && text.contains("hex ff0001"), "{text}");

    discovery.close().await;
    fw.close().await;
}

const CHILD_ENV: &str = "CURATOR_RS_INSPECT_CHILD";

/// The process whose protected node is orphaned: creates `<path>/worker-` protected and
/// ephemeral sequential, writes its path to the file named in the environment, and waits to be
/// killed. Does nothing when run by hand.
#[test]
#[ignore = "run by orphans_of_a_killed_process"]
fn child_with_protected_node() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let [connect, path, out] = spec.split('|').collect::<Vec<_>>()[..] else { panic!("bad {CHILD_ENV}: {spec}") };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    runtime.block_on(async {
        // A session that outlives the test's checks once its process is killed.
        let fw = connected(builder(connect).session_timeout(Duration::from_secs(20))).await;
        let created = fw
            .create()
            .creating_parents_if_needed()
            .with_protection()
            .with_mode(CreateMode::EphemeralSequential)
            .for_path(&format!("{path}/worker-"), b"child".to_vec())
            .await
            .expect("create");
        let tmp = format!("{out}.tmp");
        std::fs::write(&tmp, &created).expect("write the path");
        std::fs::rename(&tmp, out).expect("publish the path");
        std::future::pending::<()>().await;
    });
}

/// Protected nodes in a subtree: one of a killed process (an orphan: its session has no
/// connection left), one of a live session (alive), one persistent (no owner to judge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_a_killed_process() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let root = unique_path("inspect-orphans");
    let fw = client(&connect).await;
    fw.create().for_path(&root, Vec::new()).await.unwrap();
    let out = std::env::temp_dir().join(format!("curator-rs-inspect-child-{:016x}", fastrand::u64(..)));
    let mut command = curator_test::child_test_command("child_with_protected_node");
    command.env(CHILD_ENV, format!("{connect}|{root}/jobs|{}", out.display()));
    let mut child = tokio::process::Command::from(command).kill_on_drop(true).spawn().expect("spawn the child");
    let mut orphan = String::new();
    let created = eventually(Timing::new().deadline(), || {
        orphan = std::fs::read_to_string(&out).unwrap_or_default();
        let found = !orphan.is_empty();
        async move { found }
    })
    .await;
    assert!(created, "the child never made its node");
    let _ = std::fs::remove_file(&out);
    let live = fw
        .create()
        .creating_parents_if_needed()
        .with_protection()
        .with_mode(CreateMode::EphemeralSequential)
        .for_path(&format!("{root}/jobs/worker-"), b"live".to_vec())
        .await
        .unwrap();
    let persistent = fw.create().with_protection().for_path(&format!("{root}/kept"), b"kept".to_vec()).await.unwrap();

    // While the child lives, its node is alive.
    let (json, _) = inspect(&connect, "orphans", &root, &[]).await;
    assert_eq!(json["orphans"].as_u64(), Some(0), "{json}");
    child.kill().await.expect("kill the child");
    let orphaned = eventually(Timing::new().deadline(), || {
        let (connect, root) = (connect.clone(), root.clone());
        async move { inspect(&connect, "orphans", &root, &[]).await.0["orphans"].as_u64() == Some(1) }
    })
    .await;
    assert!(orphaned, "the killed process's node never showed as an orphan");
    let (json, text) = inspect(&connect, "orphans", &root, &[]).await;
    assert_eq!(
        keys(&json),
        vec!["exists", "kind", "liveness_determined", "nodes", "orphans", "path", "servers", "truncated", "visited"]
    );
    assert_eq!(json["orphans"].as_u64(), Some(1), "the killed process's node is an orphan: {json}");
    assert_eq!(json["liveness_determined"].as_bool(), Some(true));
    assert_eq!(keys(&json["servers"][0]), vec!["answered", "error", "server", "sessions"]);
    let status_of = |p: &str| {
        let node = json["nodes"].as_array().unwrap().iter().find(|n| n["path"].as_str() == Some(p));
        node.and_then(|n| n["status"].as_str()).map(str::to_string)
    };
    assert_eq!(status_of(&orphan).as_deref(), Some("orphan"), "{json}");
    assert_eq!(status_of(&live).as_deref(), Some("alive"), "{json}");
    assert_eq!(status_of(&persistent).as_deref(), Some("persistent"), "{json}");
    assert_eq!(keys(&json["nodes"][0]), vec!["ctime", "czxid", "data", "path", "protected_id", "session", "status"]);
    assert!(text.contains("1 orphan of 3 protected nodes") && text.contains(&orphan), "{text}");
    fw.close().await;
}

/// Issue 18's "must show": Curator 5.4's `InterProcessMutex` (tests/java/LockPeer.java)
/// holds the lock and two Rust `InterProcessMutex`es wait: the inspector shows the Java
/// holder first (a session that is none of the Rust ones, with Curator's default data), then
/// the Rust waiters in the order they queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_holder_and_rust_waiters() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let path = unique_path("inspect-interop");
    let observer = client(&connect).await;
    // One cycle, held for a minute: killed once inspected.
    let mut java = tests::java::peer("LockPeer")
        .args([connect.as_str(), "mutex", &path, "1", "60000000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run java (apt-get install default-jdk-headless)");
    let mut lines = BufReader::new(java.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(Timing::new().deadline() * 3, lines.next_line()).await.expect("java connects");
    assert_eq!(ready.unwrap().as_deref(), Some("READY"));
    let mut stdin = java.stdin.take().expect("stdin");
    stdin.write_all(b"GO\n").await.unwrap();
    stdin.flush().await.unwrap();
    wait_children(&observer, &path, 1).await;

    let rust = [labelled(&connect, "rust-waiter-1").await, labelled(&connect, "rust-waiter-2").await];
    let mut waiters = Vec::new();
    for (i, fw) in rust.iter().enumerate() {
        let lock = InterProcessMutex::new(fw, &path).unwrap();
        waiters.push(tokio::spawn(async move { lock.acquire().await.map(|g| (lock, g)) }));
        wait_children(&observer, &path, i + 2).await;
    }

    let (json, text) = inspect(&connect, "lock", &path, &[]).await;
    assert_eq!(json["layout"].as_str(), Some("mutex"));
    let holders = summary(&json["holders"]);
    assert_eq!(holders.len(), 1, "{json}");
    let java_session = json["holders"][0]["session"].as_str().unwrap().to_string();
    let rust_sessions = [session_hex(&rust[0]).await, session_hex(&rust[1]).await];
    assert!(!rust_sessions.contains(&java_session), "the holder is the Java peer's session: {json}");
    assert_eq!(holders[0].2, curator_core::local_address(), "Curator's default data: the host's address");
    assert_eq!(
        summary(&json["waiters"]),
        vec![s("waiter", "mutex", "rust-waiter-1"), s("waiter", "mutex", "rust-waiter-2")]
    );
    let waiter_sessions: Vec<&str> =
        json["waiters"].as_array().unwrap().iter().map(|w| w["session"].as_str().unwrap()).collect();
    assert_eq!(waiter_sessions, rust_sessions.iter().map(String::as_str).collect::<Vec<_>>());
    // The text names both, in order: the Java holder's session, then the Rust waiters.
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].contains("holder") && lines[1].contains(&java_session), "{text}");
    assert!(lines[2].contains(&rust_sessions[0]) && lines[2].contains("rust-waiter-1"), "{text}");
    assert!(lines[3].contains(&rust_sessions[1]) && lines[3].contains("rust-waiter-2"), "{text}");

    java.kill().await.expect("kill the java peer");
    for w in waiters {
        let (_lock, g) = tokio::time::timeout(Duration::from_secs(60), w).await.expect("acquired").unwrap().unwrap();
        g.release().await.unwrap();
    }
    for fw in rust {
        fw.close().await;
    }
    observer.close().await;
}

/// A path with no node is a report (exit 0), with `layout` `missing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_path_is_reported() {
    init_tracing();
    let server = TestingServer::shared();
    let path = unique_path("inspect-missing");
    let (json, text) = inspect(&server.connect_string(), "lock", &path, &[]).await;
    assert_eq!(json["layout"].as_str(), Some("missing"));
    assert!(text.contains("no node"), "{text}");
}

/// Exit codes: 2 for bad arguments (clap's, and an invalid path), 1 with a message when no
/// server answers, 0 for `--help`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes() {
    init_tracing();
    let (code, _, err) = run(&["--connect", "127.0.0.1:1", "frobnicate", "/x"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["lock", "/x"]).await;
    assert_eq!(code, 2, "--connect is required: {err}");
    let (code, _, err) = run(&["--connect", "127.0.0.1:1", "lock", "no-slash"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad arguments"), "{err}");
    let (code, out, _) = run(&["--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("lock") && out.contains("orphans"), "{out}");
    // Nothing listens on port 1.
    let timeout = Duration::from_secs(1);
    let started = std::time::Instant::now();
    let given = timeout.as_secs().to_string();
    let (code, out, err) = run(&["--connect", "127.0.0.1:1", "--timeout", &given, "lock", "/x"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty() && err.contains("cannot connect to 127.0.0.1:1"), "{err}");
    // Ten times the timeout given: a run that ignored it would wait its default (or for ever).
    assert!(started.elapsed() < timeout * 10, "gave up in time: {:?}", started.elapsed());
}
