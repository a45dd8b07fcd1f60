//! Every builder option of curator-core against a real ZooKeeper.

use std::time::Duration;

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CreateMode, CuratorError, TransactionResult};
use curator_test::TestingServer;
use tests::{builder, connected, unique_path};

fn server() -> String {
    TestingServer::shared().connect_string()
}

#[tokio::test]
async fn create_modes_parents_and_protection() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("create");

    // Parents, plain and sequential.
    let missing = fw.create().for_path(&format!("{base}/a/b"), b"x".to_vec()).await;
    assert!(matches!(missing, Err(CuratorError::NoNode { .. })), "{missing:?}");
    let p = fw.create().creating_parents_if_needed().for_path(&format!("{base}/a/b"), b"x".to_vec()).await.unwrap();
    assert_eq!(p, format!("{base}/a/b"));
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"x");
    let s1 = fw
        .create()
        .with_mode(CreateMode::PersistentSequential)
        .for_path(&format!("{base}/a/s-"), vec![])
        .await
        .unwrap();
    let s2 = fw
        .create()
        .with_mode(CreateMode::PersistentSequential)
        .for_path(&format!("{base}/a/s-"), vec![])
        .await
        .unwrap();
    assert!(s1.ends_with("0000000001") && s2.ends_with("0000000002"), "{s1} {s2}");

    // Container parents (ZooKeeper 3.8 reports no marker for containers in a Stat, so this
    // checks that the parents are made; the server reaps them only minutes later).
    let c =
        fw.create().creating_parent_containers_if_needed().for_path(&format!("{base}/c/child"), vec![]).await.unwrap();
    let parent_stat = fw.check_exists().for_path(&format!("{base}/c")).await.unwrap().expect("parent exists");
    assert_eq!(parent_stat.num_children, 1);
    fw.delete().for_path(&c).await.unwrap();

    // Protection: `_c_<uuid>-name`, ephemeral sequential, owned by our session.
    let prot = fw
        .create()
        .creating_parents_if_needed()
        .with_protection()
        .with_mode(CreateMode::EphemeralSequential)
        .for_path(&format!("{base}/locks/lock-"), b"me".to_vec())
        .await
        .unwrap();
    let name = curator_core::path::node_name(&prot);
    assert!(curator_core::path::protected_id(name).is_some(), "{name}");
    assert!(name.ends_with("lock-0000000000"), "{name}");
    let (_, stat) = fw.get_data().for_path_with_stat(&prot).await.unwrap();
    assert_eq!(stat.ephemeral_owner, fw.session().await.unwrap().id());

    // Stat out.
    let (_, stat) = fw.create().for_path_with_stat(&format!("{base}/stat"), b"abc".to_vec()).await.unwrap();
    assert_eq!(stat.data_length, 3);

    // Default data.
    let d = fw.create().for_path_with_default_data(&format!("{base}/default")).await.unwrap();
    assert_eq!(fw.get_data().for_path(&d).await.unwrap(), fw.default_data());
    fw.close().await;
}

#[tokio::test]
async fn create_or_set_data_if_missing_compressed_acl_ttl() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("create-opts");
    let p = format!("{base}/node");
    fw.create().creating_parents_if_needed().for_path(&p, b"one".to_vec()).await.unwrap();
    let again = fw.create().for_path(&p, b"two".to_vec()).await;
    assert!(matches!(again, Err(CuratorError::NodeExists { .. })), "{again:?}");
    fw.create().or_set_data().for_path(&p, b"two".to_vec()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"two");
    // if_missing: an existing node is success, whatever it holds, and is left as it is.
    let (kept, stat) =
        fw.create().if_missing().for_path_with_stat(&p, b"three".to_vec()).await.expect("exists: success");
    assert_eq!((kept.as_str(), stat.data_length), (p.as_str(), 3));
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"two", "the existing node is left alone");
    let sequential = fw.create().if_missing().with_mode(CreateMode::PersistentSequential).for_path(&p, vec![]).await;
    assert!(matches!(sequential, Err(CuratorError::InvalidArgument { .. })), "{sequential:?}");

    // Compression round trip; the stored bytes are gzip.
    let z = format!("{base}/zipped");
    let text = "compress me ".repeat(100).into_bytes();
    fw.create().compressed().for_path(&z, text.clone()).await.unwrap();
    let raw = fw.get_data().for_path(&z).await.unwrap();
    assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip magic");
    assert!(raw.len() < text.len());
    assert_eq!(fw.get_data().decompressed().for_path(&z).await.unwrap(), text);
    fw.set_data().compressed().for_path(&z, b"short".to_vec()).await.unwrap();
    assert_eq!(fw.get_data().decompressed().for_path(&z).await.unwrap(), b"short");
    let not_gzip = fw.get_data().decompressed().for_path(&p).await;
    assert!(matches!(not_gzip, Err(CuratorError::BadData { .. })), "{not_gzip:?}");

    // ACLs: read-only for anyone.
    let ro = format!("{base}/readonly");
    let acl = vec![Acl::new(Permission::READ, AuthId::anyone())];
    fw.create().with_acl(acl.clone()).for_path(&ro, b"r".to_vec()).await.unwrap();
    let (got, _) = fw.get_acl().for_path(&ro).await.unwrap();
    assert_eq!(got, acl);
    let denied = fw.set_data().for_path(&ro, b"w".to_vec()).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    let (_, before) = fw.get_acl().for_path(&p).await.unwrap();
    let stat = fw.set_acl().with_version(before.aversion).with_acl(acl.clone()).for_path(&p).await.unwrap();
    assert_eq!(stat.aversion, before.aversion + 1);

    // TTL nodes (the test server enables extended types).
    let ttl = fw
        .create()
        .with_mode(CreateMode::PersistentWithTtl)
        .with_ttl(Duration::from_secs(60))
        .for_path(&format!("{base}/ttl"), vec![])
        .await
        .unwrap();
    assert!(fw.check_exists().for_path(&ttl).await.unwrap().is_some());
    let no_ttl = fw.create().with_mode(CreateMode::PersistentWithTtl).for_path(&format!("{base}/ttl2"), vec![]).await;
    assert!(matches!(no_ttl, Err(CuratorError::InvalidArgument { .. })), "{no_ttl:?}");
    fw.close().await;
}

#[tokio::test]
async fn delete_versions_children_quietly_and_set_data_versions() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("delete");
    let p = format!("{base}/n");
    fw.create().creating_parents_if_needed().for_path(&p, b"0".to_vec()).await.unwrap();
    let stat = fw.set_data().with_version(0).for_path(&p, b"1".to_vec()).await.unwrap();
    assert_eq!(stat.version, 1);
    let stale = fw.set_data().with_version(0).for_path(&p, b"2".to_vec()).await;
    assert!(matches!(stale, Err(CuratorError::BadVersion { .. })), "{stale:?}");
    let bad = fw.delete().with_version(0).for_path(&p).await;
    assert!(matches!(bad, Err(CuratorError::BadVersion { .. })), "{bad:?}");
    fw.delete().with_version(1).for_path(&p).await.unwrap();
    let gone = fw.delete().for_path(&p).await;
    assert!(matches!(gone, Err(CuratorError::NoNode { .. })), "{gone:?}");
    fw.delete().quietly().for_path(&p).await.expect("quietly ignores a missing node");

    for leaf in ["x/y/z", "x/y/w", "x/v"] {
        fw.create().creating_parents_if_needed().for_path(&format!("{base}/{leaf}"), vec![]).await.unwrap();
    }
    let not_empty = fw.delete().for_path(&format!("{base}/x")).await;
    assert!(matches!(not_empty, Err(CuratorError::NotEmpty { .. })), "{not_empty:?}");
    fw.delete().deleting_children_if_needed().for_path(&format!("{base}/x")).await.unwrap();
    assert!(fw.check_exists().for_path(&format!("{base}/x")).await.unwrap().is_none());
    fw.delete().guaranteed().for_path(&base).await.unwrap();
    assert!(fw.check_exists().for_path(&base).await.unwrap().is_none());
    fw.close().await;
}

#[tokio::test]
async fn children_sync_and_watches() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("children");
    fw.create().for_path(&base, vec![]).await.unwrap();
    for c in ["b", "a", "c"] {
        fw.create().for_path(&format!("{base}/{c}"), vec![]).await.unwrap();
    }
    let mut kids = fw.get_children().for_path(&base).await.unwrap();
    kids.sort();
    assert_eq!(kids, ["a", "b", "c"]);
    fw.sync().for_path(&base).await.unwrap();

    // A one-shot watch returned with the data.
    let (_, _, watch) = fw.get_data().for_path_and_watch(&format!("{base}/a")).await.unwrap();
    fw.set_data().for_path(&format!("{base}/a"), b"changed".to_vec()).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), watch.changed()).await.expect("watch fires");
    assert_eq!(event.event_type, curator_core::zk::EventType::NodeDataChanged);
    assert_eq!(event.path, format!("{base}/a"));

    // using_watcher on children.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    fw.get_children().using_watcher(move |e| drop(tx.send(e))).for_path(&base).await.unwrap();
    fw.create().for_path(&format!("{base}/d"), vec![]).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
    assert_eq!(event.event_type, curator_core::zk::EventType::NodeChildrenChanged);

    // exists watch on a node that does not exist yet.
    let (stat, watch) = fw.check_exists().for_path_and_watch(&format!("{base}/later")).await.unwrap();
    assert!(stat.is_none());
    fw.create().for_path(&format!("{base}/later"), vec![]).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), watch.changed()).await.unwrap();
    assert_eq!(event.event_type, curator_core::zk::EventType::NodeCreated);

    // A persistent recursive watch sees creates below it.
    let mut pw = fw.watches().add().for_path(&base).await.unwrap();
    fw.create().for_path(&format!("{base}/a/deep"), vec![]).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), pw.next()).await.unwrap().unwrap();
    assert_eq!(event.event_type, curator_core::zk::EventType::NodeCreated);
    assert_eq!(event.path, format!("{base}/a/deep"));
    fw.watches().remove(pw);
    fw.close().await;
}

#[tokio::test]
async fn transactions_commit_all_or_nothing() {
    let fw = connected(builder(&server())).await;
    let base = unique_path("txn");
    fw.create().for_path(&base, vec![]).await.unwrap();
    fw.create().for_path(&format!("{base}/old"), b"o".to_vec()).await.unwrap();
    let results = fw
        .transaction()
        .create(&format!("{base}/new"), b"n".to_vec(), CreateMode::Persistent)
        .create(&format!("{base}/seq-"), vec![], CreateMode::PersistentSequential)
        .set_data(&format!("{base}/old"), b"o2".to_vec(), Some(0))
        .check(&base, 0)
        .commit()
        .await
        .unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0], TransactionResult::Create { path: format!("{base}/new") });
    assert!(
        matches!(&results[1], TransactionResult::Create { path } if path.ends_with("seq-0000000002")),
        "{:?}",
        results[1]
    );
    assert!(matches!(&results[2], TransactionResult::SetData { stat, .. } if stat.version == 1));

    let failed = fw
        .transaction()
        .create(&format!("{base}/never"), vec![], CreateMode::Persistent)
        .delete(&format!("{base}/old"), Some(0))
        .commit()
        .await;
    assert!(matches!(&failed, Err(CuratorError::BadVersion { path }) if path.ends_with("/old")), "{failed:?}");
    assert!(fw.check_exists().for_path(&format!("{base}/never")).await.unwrap().is_none(), "nothing applied");
    fw.close().await;
}

#[tokio::test]
async fn namespaces_isolate_two_frameworks() {
    let cs = server();
    let ns1 = unique_path("ns1").trim_start_matches('/').to_string();
    let ns2 = unique_path("ns2").trim_start_matches('/').to_string();
    let a = connected(builder(&cs).namespace(ns1.clone())).await;
    let b = connected(builder(&cs).namespace(ns2.clone())).await;
    assert_eq!(a.create().for_path("/shared", b"a".to_vec()).await.unwrap(), "/shared");
    b.create().for_path("/shared", b"b".to_vec()).await.unwrap();
    assert_eq!(a.get_data().for_path("/shared").await.unwrap(), b"a");
    assert_eq!(b.get_data().for_path("/shared").await.unwrap(), b"b");
    // A protected create directly under the namespace root.
    let top = a.create().with_protection().for_path("/top", vec![]).await.unwrap();
    assert!(top.starts_with("/_c_") && top.ends_with("-top"), "{top}");
    let root = a.using_namespace(None).unwrap();
    assert_eq!(root.get_data().for_path(&format!("/{ns1}/shared")).await.unwrap(), b"a");
    assert_eq!(root.get_data().for_path(&format!("/{ns2}/shared")).await.unwrap(), b"b");
    let again = a.using_namespace(Some(&ns2)).unwrap();
    assert_eq!(again.get_data().for_path("/shared").await.unwrap(), b"b");
    // Watch event paths are relative to the namespace.
    let (_, _, w) = a.get_data().for_path_and_watch("/shared").await.unwrap();
    a.delete().for_path("/shared").await.unwrap();
    assert_eq!(w.changed().await.path, "/shared");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn authorization_and_acl_provider() {
    let cs = server();
    let base = unique_path("auth");
    let creator = vec![Acl::new(Permission::ALL, AuthId::new("auth", ""))];
    let fw = connected(
        builder(&cs)
            .authorization("digest", b"alice:secret".to_vec())
            .acl_provider(curator_core::FixedAclProvider(creator)),
    )
    .await;
    fw.create().for_path(&base, b"private".to_vec()).await.unwrap();
    let (acl, _) = fw.get_acl().for_path(&base).await.unwrap();
    assert_eq!(acl[0].scheme(), "digest");
    let stranger = connected(builder(&cs)).await;
    let denied = stranger.get_data().for_path(&base).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    let friend = connected(builder(&cs).authorization("digest", b"alice:secret".to_vec())).await;
    assert_eq!(friend.get_data().for_path(&base).await.unwrap(), b"private");
    for f in [fw, stranger, friend] {
        f.close().await;
    }
}

#[tokio::test]
async fn close_ends_the_session_at_once() {
    let cs = server();
    let base = unique_path("close");
    let watcher = connected(builder(&cs)).await;
    let fw = connected(builder(&cs)).await;
    fw.create().with_mode(CreateMode::Ephemeral).for_path(&base, vec![]).await.unwrap();
    fw.close().await;
    assert!(
        watcher.check_exists().for_path(&base).await.unwrap().is_none(),
        "ephemeral gone as soon as close() returns"
    );
    assert!(matches!(fw.get_data().for_path("/").await, Err(CuratorError::Closed)));
    assert_eq!(fw.connection_state(), curator_core::ConnectionState::Closed);
    watcher.close().await;
}
