//! Bad input gets a typed error before anything is sent, never a panic.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::zk::Acls;
use curator_core::DEFAULT_MAX_DATA_LEN;
use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Pending};
use curator_recipes::InterProcessMutex;
use curator_test::TestingServer;
use tests::{builder, connected, init_tracing, unique_path};

const BAD_PATHS: &[&str] = &[
    "",
    "a",
    "no/slash",
    "/trailing/",
    "//",
    "/a//b",
    "/a/./b",
    "/a/../b",
    "/.",
    "/..",
    "/nul\0",
    "/ctl\u{1}",
    "/del\u{7f}",
    "/bad\u{fff0}",
];

#[tokio::test]
async fn invalid_paths_are_typed_errors_for_every_operation() {
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    for &p in BAD_PATHS {
        let is_invalid = |r: &Result<(), CuratorError>| matches!(r, Err(CuratorError::InvalidPath { .. }));
        let results = [
            fw.create().for_path(p, vec![]).await.map(drop),
            fw.create().with_mode(CreateMode::PersistentSequential).for_path(p, vec![]).await.map(drop),
            fw.delete().for_path(p).await,
            fw.check_exists().for_path(p).await.map(drop),
            fw.get_data().for_path(p).await.map(drop),
            fw.set_data().for_path(p, vec![]).await.map(drop),
            fw.get_children().for_path(p).await.map(drop),
            fw.get_acl().for_path(p).await.map(drop),
            fw.set_acl().with_acl(Acls::anyone_all().to_vec()).for_path(p).await.map(drop),
            fw.sync().for_path(p).await,
            fw.watches().add().for_path(p).await.map(drop),
            fw.transaction().create(p, vec![], CreateMode::Persistent).commit().await.map(drop),
        ];
        for (i, r) in results.iter().enumerate() {
            // A sequential create may end with '/', so "/trailing/" is valid there and fails on
            // the server instead (its parent does not exist).
            if i == 1 && p == "/trailing/" {
                assert!(matches!(r, Err(CuratorError::NoNode { .. })), "{p:?}: {r:?}");
                continue;
            }
            assert!(is_invalid(r), "operation {i} on {p:?}: {r:?}");
        }
    }
    let root = fw.create().for_path("/", vec![]).await;
    assert!(matches!(root, Err(CuratorError::InvalidPath { .. })), "{root:?}");
    let root = fw.delete().for_path("/").await;
    assert!(matches!(root, Err(CuratorError::InvalidPath { .. })), "{root:?}");
    fw.close().await;
}

#[tokio::test]
async fn bad_versions_data_and_options_are_typed_errors() {
    let fw = connected(builder(&TestingServer::shared().connect_string()).max_data_len(1024)).await;
    let base = unique_path("bad");
    let arg = |r: Result<(), CuratorError>| assert!(matches!(r, Err(CuratorError::InvalidArgument { .. })), "{r:?}");
    arg(fw.delete().with_version(-2).for_path(&base).await);
    arg(fw.set_data().with_version(-5).for_path(&base, vec![]).await.map(drop));
    arg(fw.set_acl().with_version(i32::MIN).with_acl(Acls::anyone_all().to_vec()).for_path(&base).await.map(drop));
    arg(fw.transaction().check(&base, -3).commit().await.map(drop));
    arg(fw.create().with_ttl(Duration::from_secs(1)).for_path(&base, vec![]).await.map(drop));
    arg(fw
        .create()
        .with_mode(CreateMode::PersistentWithTtl)
        .with_ttl(Duration::ZERO)
        .for_path(&base, vec![])
        .await
        .map(drop));
    let big = fw.create().for_path(&base, vec![0u8; 1025]).await;
    assert!(matches!(big, Err(CuratorError::DataTooLarge { len: 1025, max: 1024, .. })), "{big:?}");
    let big = fw.set_data().for_path(&base, vec![0u8; 4096]).await;
    assert!(matches!(big, Err(CuratorError::DataTooLarge { .. })), "{big:?}");
    // Nothing was created by any of these.
    assert!(fw.check_exists().for_path(&base).await.unwrap().is_none());
    fw.close().await;
}

#[tokio::test]
async fn bad_framework_options_and_lifecycle_misuse() {
    assert!(matches!(CuratorFramework::builder().build(), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(
        CuratorFramework::builder().connect_string("127.0.0.1:1").namespace("a//b").build(),
        Err(CuratorError::InvalidPath { .. })
    ));
    let fw = builder(&TestingServer::shared().connect_string()).build().unwrap();
    let early = fw.get_data().for_path("/").await;
    assert!(matches!(early, Err(CuratorError::NotStarted { .. })), "{early:?}");
    fw.start().unwrap();
    assert!(matches!(fw.start(), Err(CuratorError::AlreadyStarted { .. })));
    fw.close().await;
    fw.close().await; // idempotent
    assert!(matches!(fw.start(), Err(CuratorError::Closed)));
    assert!(matches!(fw.get_data().for_path("/").await, Err(CuratorError::Closed)));
}

/// Awaits `op` for at most a second and returns its error: a request refused before sending
/// fails at once, where one the server rejects by closing the connection would be retried.
async fn refused<T: std::fmt::Debug + Send + 'static>(what: &str, op: Pending<T>) -> CuratorError {
    match tokio::time::timeout(Duration::from_secs(1), op).await {
        Ok(Err(err)) => err,
        Ok(Ok(value)) => panic!("{what}: succeeded with {value:?}"),
        Err(_) => panic!("{what}: not refused within 1 s: it was sent"),
    }
}

/// A request larger than the server accepts (its `jute.maxbuffer`, 0xfffff bytes by default)
/// fails at once with `DataTooLarge`, or `InvalidPath` for a path longer than any request may
/// carry, and the connection, the session and a lock held on the same framework are untouched.
///
/// Before, data under the data limit with a 4 KB path, a transaction of two writes each under
/// it, and a 1 MB path were all sent: the server closed the connection on each, the retry loop
/// sent them again, and the lock reported lost at the first `Suspended`.
#[tokio::test]
async fn oversized_requests_fail_before_sending_and_keep_the_connection() {
    init_tracing();
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let base = unique_path("big");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let lock = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap();
    let guard = lock.acquire().await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_listener = seen.clone();
    fw.add_connection_state_listener(move |_, e| seen_by_listener.lock().unwrap().push(e.state));
    let before = fw.connection_state_watch().borrow().seq;
    let session = fw.session().await.unwrap().id();

    let data = vec![7u8; DEFAULT_MAX_DATA_LEN - 100];
    let long = format!("{base}/{}", "n".repeat(4096));
    let half = vec![1u8; DEFAULT_MAX_DATA_LEN / 2 + 1024];
    let too_large = |what: &str, err: CuratorError| {
        assert!(matches!(err, CuratorError::DataTooLarge { .. }), "{what}: {err:?}");
    };
    too_large("create", refused("create", fw.create().for_path(&long, data.clone())).await);
    let protected = fw.create().with_protection().with_mode(CreateMode::EphemeralSequential);
    too_large("protected create", refused("protected create", protected.for_path(&long, data.clone())).await);
    too_large("set_data", refused("set_data", fw.set_data().for_path(&long, data.clone())).await);
    let tx = fw
        .transaction()
        .create(&format!("{base}/a"), half.clone(), CreateMode::Persistent)
        .set_data(&base, half.clone(), None)
        .commit();
    too_large("transaction", refused("transaction", tx).await);
    // The namespace is part of every path sent.
    let namespace = format!("{}/{}", base.trim_start_matches('/'), "s".repeat(4096));
    let in_namespace = fw.using_namespace(Some(&namespace)).unwrap();
    let err = refused("create in a namespace", in_namespace.create().for_path("/x", data.clone())).await;
    too_large("create in a namespace", err);

    // A path of 1 MB, whatever the operation.
    let huge = format!("{base}/{}", "p".repeat(1024 * 1024));
    let typed = |what: &str, err: CuratorError| {
        let ok = matches!(&err, CuratorError::InvalidPath { .. } | CuratorError::DataTooLarge { .. });
        assert!(ok && err.path() == Some(huge.as_str()), "{what}: {err}");
    };
    typed("create", refused("create", fw.create().for_path(&huge, vec![])).await);
    typed("set_data", refused("set_data", fw.set_data().for_path(&huge, vec![])).await);
    typed("get_data", refused("get_data", fw.get_data().for_path(&huge)).await);
    typed("exists", refused("exists", fw.check_exists().for_path(&huge)).await);
    typed("children", refused("children", fw.get_children().for_path(&huge)).await);
    typed("delete", refused("delete", fw.delete().for_path(&huge)).await);
    typed("set_acl", refused("set_acl", fw.set_acl().with_acl(Acls::anyone_all().to_vec()).for_path(&huge)).await);
    let tx = fw.transaction().check(&huge, 0).commit();
    typed("transaction", refused("transaction", tx).await);

    // A request just under the limit goes through.
    fw.create().for_path(&format!("{base}/fits"), data.clone()).await.unwrap();
    assert_eq!(fw.connection_state_watch().borrow().seq, before, "no connection-state transition");
    assert_eq!(fw.session().await.unwrap().id(), session, "same session");
    assert!(guard.is_held(), "the lock is still held");
    assert!(seen.lock().unwrap().is_empty(), "the listener saw {:?}", seen.lock().unwrap());
    guard.release().await.unwrap();
    fw.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
    fw.close().await;
}

/// The message of an error shows a long path shortened (its head, its tail and its length),
/// while `path()` keeps all of it. Before, a 1 MB path made a 1 MB message.
#[tokio::test]
async fn error_messages_shorten_long_paths() {
    for long in [format!("/{}", "x".repeat(1024 * 1024)), format!("/{}", "\u{fc}".repeat(300_000))] {
        let errors = [
            CuratorError::NoNode { path: long.clone() },
            CuratorError::InvalidPath { path: long.clone(), reason: "too long" },
            CuratorError::DataTooLarge { path: long.clone(), len: 2_000_000, max: 1_000_000 },
            CuratorError::ConnectionLoss { path: long.clone(), detail: "cut".into() },
        ];
        for err in errors {
            let message = err.to_string();
            assert!(message.len() < 600, "{} bytes: {}", message.len(), &message[..600]);
            assert!(message.contains(&format!("{} bytes", long.len())), "{message}");
            assert_eq!(err.path(), Some(long.as_str()));
        }
    }
    // Short paths are shown whole, as before.
    assert_eq!(CuratorError::NoNode { path: "/a".into() }.to_string(), "no node \"/a\"");

    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let huge = format!("/{}", "y".repeat(1024 * 1024));
    let err = refused("get_data", fw.get_data().for_path(&huge)).await;
    assert!(err.to_string().len() < 600);
    assert_eq!(err.path(), Some(huge.as_str()));
    fw.close().await;
}

/// As Curator (`CreateBuilderImpl.adjustPath`, `ProtectedUtils.toProtectedZNodePath`): a
/// protected create of `/` splits it into parent `/` and an empty name, so it creates
/// `/_c_<uuid>-` (with the sequence number for a sequential mode) under the root; in a
/// namespace, under the namespace node. A plain create of `/` is still refused. Before, the
/// protected create failed with `InvalidPath` ("cannot create the root").
#[tokio::test]
async fn protected_create_of_the_root_makes_a_child_of_the_root() {
    let cs = TestingServer::shared().connect_string();
    let fw = connected(builder(&cs)).await;
    let created =
        fw.create().with_protection().with_mode(CreateMode::EphemeralSequential).for_path("/", vec![]).await.unwrap();
    let name = created.strip_prefix('/').expect("a child of the root");
    assert!(path::protected_id(name).is_some(), "{created}");
    let sequence = path::strip_protected_prefix(name);
    assert!(sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit()), "{created}");
    assert!(fw.check_exists().for_path(&created).await.unwrap().is_some());
    fw.delete().for_path(&created).await.unwrap();

    let namespace = unique_path("rootns").trim_start_matches('/').to_string();
    let in_namespace = fw.using_namespace(Some(&namespace)).unwrap();
    let created = in_namespace.create().with_protection().for_path("/", vec![]).await.unwrap();
    assert!(created.starts_with("/_c_") && created.len() == 1 + path::PROTECTED_PREFIX_LEN, "{created}");
    assert!(fw.check_exists().for_path(&format!("/{namespace}{created}")).await.unwrap().is_some());
    fw.delete().deleting_children_if_needed().for_path(&format!("/{namespace}")).await.unwrap();

    let plain = fw.create().for_path("/", vec![]).await;
    assert!(matches!(plain, Err(CuratorError::InvalidPath { .. })), "{plain:?}");
    let plain = fw.create().with_mode(CreateMode::Ephemeral).for_path("/", vec![]).await;
    assert!(matches!(plain, Err(CuratorError::InvalidPath { .. })), "{plain:?}");
    fw.close().await;
}

/// An empty ACL list is refused before anything is sent, for `set_acl` and `create`. Before,
/// both were sent (here: on a framework that is not started, which failed with
/// `IllegalState` instead).
#[tokio::test]
async fn empty_acl_lists_are_refused_before_sending() {
    let fw = builder(&TestingServer::shared().connect_string()).build().unwrap();
    let set = fw.set_acl().with_acl(vec![]).for_path("/x").await;
    assert!(matches!(&set, Err(CuratorError::InvalidAcl { path }) if path == "/x"), "{set:?}");
    let create = fw.create().with_acl(vec![]).for_path("/x", vec![]).await;
    assert!(matches!(&create, Err(CuratorError::InvalidAcl { path }) if path == "/x"), "{create:?}");
}

/// A plain sequential create of `/` (no protection) makes a sequential child of the root, as
/// ZooKeeper and Curator do (`create -s /` makes `/0000000001`); in a namespace, the namespace's
/// node plays the root's part: the node is a sequential child of it, `/0000000001` relative to
/// the namespace. A non-sequential create of `/` is still refused. Before, every sequential
/// create of `/` was refused with `InvalidPath` ("cannot create the root").
#[tokio::test]
async fn sequential_create_of_the_root_makes_a_sequential_child_of_the_root() {
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    let is_sequence = |created: &str| {
        let digits = created.strip_prefix('/').unwrap_or_default();
        digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit())
    };
    for mode in [CreateMode::PersistentSequential, CreateMode::EphemeralSequential] {
        let created = fw.create().with_mode(mode).for_path("/", b"d".to_vec()).await.unwrap();
        assert!(is_sequence(&created), "{mode:?}: {created}");
        assert_eq!(fw.get_data().for_path(&created).await.unwrap(), b"d", "{mode:?}: {created}");
        fw.delete().for_path(&created).await.unwrap();
    }

    let namespace = unique_path("rootseq").trim_start_matches('/').to_string();
    let in_namespace = fw.using_namespace(Some(&namespace)).unwrap();
    let (created, stat) = in_namespace
        .create()
        .with_mode(CreateMode::PersistentSequential)
        .for_path_with_stat("/", vec![])
        .await
        .unwrap();
    assert!(is_sequence(&created), "{created}");
    let full = format!("/{namespace}{created}");
    assert_eq!(fw.check_exists().for_path(&full).await.unwrap().map(|s| s.czxid), Some(stat.czxid), "{full}");
    assert_eq!(fw.get_children().for_path(&format!("/{namespace}")).await.unwrap().len(), 1);
    fw.delete().deleting_children_if_needed().for_path(&format!("/{namespace}")).await.unwrap();

    let plain = fw.create().with_mode(CreateMode::Persistent).for_path("/", vec![]).await;
    assert!(matches!(plain, Err(CuratorError::InvalidPath { .. })), "{plain:?}");
    fw.close().await;
}

/// Deleting ZooKeeper's own nodes (`/zookeeper`, `/zookeeper/config`, `/zookeeper/quota`) is
/// refused by the server with BADARGUMENTS (-8): the error is `InvalidArgument` with that code,
/// and its message says the server refused it and why. Before, the message was "invalid
/// argument for \"/zookeeper\": server error", as if the client had found the argument bad, or
/// the server had failed.
#[tokio::test]
async fn deleting_zookeepers_own_nodes_says_the_server_refused_it() {
    let fw = connected(builder(&TestingServer::shared().connect_string())).await;
    for p in ["/zookeeper", "/zookeeper/config", "/zookeeper/quota"] {
        let r = fw.delete().for_path(p).await;
        let Err(err @ CuratorError::InvalidArgument { path, .. }) = &r else { panic!("{p}: {r:?}") };
        assert_eq!((path.as_str(), err.code()), (p, -8));
        let message = err.to_string();
        assert!(message.contains("refused by the server") && message.contains("ZooKeeper's own"), "{message}");
        assert!(!message.contains("server error"), "{message}");
    }
    assert!(fw.check_exists().for_path("/zookeeper/config").await.unwrap().is_some());
    fw.close().await;
}
