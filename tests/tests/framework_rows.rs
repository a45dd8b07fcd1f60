//! Issue 31 item 5, the framework's missing rows: `create().or_set_data_with_version`,
//! `create().with_acl_and_parents`, per-operation TTL, ACL and compression inside transactions,
//! and the framework-wide compression of `enable_compression()`. Each test names the Apache
//! Curator test whose scenario it follows.

use std::time::Duration;

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CreateMode, CuratorError};
use curator_test::TestingServer;
use tests::{builder, connected, init_tracing, unique_path};

fn server() -> String {
    TestingServer::shared().connect_string()
}

/// Curator's `TestCreate.testOrSetData`, with `orSetData(version)`: a create of a node that
/// exists sets its data only at the version given, and a stale version is `BadVersion` with the
/// node left as it was; with parents, and a bad version refused before anything is sent.
#[tokio::test]
async fn or_set_data_with_a_version() {
    init_tracing();
    let fw = connected(builder(&server())).await;
    let base = unique_path("or-set-version");
    let p = format!("{base}/node");

    // Missing: created (the version plays no part), parents made.
    let (_, stat) = fw
        .create()
        .creating_parents_if_needed()
        .or_set_data_with_version(7)
        .for_path_with_stat(&p, b"a".to_vec())
        .await
        .unwrap();
    assert_eq!(stat.version, 0);
    // Exists at version 0: set.
    let (_, stat) = fw.create().or_set_data_with_version(0).for_path_with_stat(&p, b"b".to_vec()).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"b");
    // Stale: refused, the data kept.
    let stale = fw.create().or_set_data_with_version(0).for_path(&p, b"c".to_vec()).await;
    assert!(matches!(&stale, Err(CuratorError::BadVersion { path }) if path == &p), "{stale:?}");
    let (data, stat) = fw.get_data().for_path_with_stat(&p).await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"b"[..], 1));
    // -1: any version, as `or_set_data()`.
    let (_, stat) = fw.create().or_set_data_with_version(-1).for_path_with_stat(&p, b"d".to_vec()).await.unwrap();
    assert_eq!(stat.version, 2);
    // A version below -1: a typed error, nothing sent.
    let bad = fw.create().or_set_data_with_version(-2).for_path(&p, b"e".to_vec()).await;
    assert!(matches!(bad, Err(CuratorError::InvalidArgument { .. })), "{bad:?}");
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"d");
    fw.close().await;
}

/// READ and CREATE for anyone: parents with it still let the create below them through.
fn read_create() -> Vec<Acl> {
    vec![Acl::new(Permission::READ | Permission::CREATE, AuthId::anyone())]
}

/// Curator's `TestCreate.testCreateWithParentsWithAcl`, `...WithAclApplyToParents`,
/// `...ApplyToParentsInBackground` and `...ApplyToParentsInNamespace`: the parents a create
/// makes get its ACL only with `apply_to_parents`; otherwise (and for parents that exist, and
/// the namespace's node) the framework's ACL provider's.
#[tokio::test]
async fn with_acl_and_parents_applies_to_the_parents_made() {
    init_tracing();
    let cs = server();
    let open = curator_core::zk::Acls::anyone_all().to_vec();
    let fw = connected(builder(&cs)).await;
    let base = unique_path("acl-parents");

    // Not applied: the parent gets the provider's (open) ACL.
    let plain = format!("{base}/plain/child");
    fw.create()
        .creating_parents_if_needed()
        .with_acl_and_parents(read_create(), false)
        .for_path(&plain, vec![])
        .await
        .unwrap();
    assert_eq!(fw.get_acl().for_path(&plain).await.unwrap().0, read_create());
    assert_eq!(fw.get_acl().for_path(&format!("{base}/plain")).await.unwrap().0, open);

    // Applied: every parent made gets it; the one that existed (`base`) keeps its own.
    let deep = format!("{base}/applied/a/b");
    fw.create()
        .creating_parents_if_needed()
        .with_acl_and_parents(read_create(), true)
        .for_path(&deep, vec![])
        .await
        .unwrap();
    for p in [deep.clone(), format!("{base}/applied/a"), format!("{base}/applied")] {
        assert_eq!(fw.get_acl().for_path(&p).await.unwrap().0, read_create(), "{p}");
    }
    assert_eq!(fw.get_acl().for_path(&base).await.unwrap().0, open);

    // Container parents too, and in the background.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let bg = format!("{base}/bg/child");
    fw.create()
        .creating_parent_containers_if_needed()
        .with_acl_and_parents(read_create(), true)
        .for_path(&bg, vec![])
        .in_background(move |_, event| drop(tx.send(event.error)));
    let error = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
    assert!(error.is_none(), "{error:?}");
    assert_eq!(fw.get_acl().for_path(&format!("{base}/bg")).await.unwrap().0, read_create());

    // In a namespace: the parents below it get the ACL, the namespace's node does not.
    let ns = unique_path("acl-ns").trim_start_matches('/').to_string();
    let in_ns = fw.using_namespace(Some(&ns)).unwrap();
    in_ns
        .create()
        .creating_parents_if_needed()
        .with_acl_and_parents(read_create(), true)
        .for_path("/foo/boo", vec![])
        .await
        .unwrap();
    assert_eq!(fw.get_acl().for_path(&format!("/{ns}/foo/boo")).await.unwrap().0, read_create());
    assert_eq!(fw.get_acl().for_path(&format!("/{ns}/foo")).await.unwrap().0, read_create());
    assert_eq!(fw.get_acl().for_path(&format!("/{ns}")).await.unwrap().0, open);

    // An empty list: a typed error, nothing made.
    let empty = format!("{base}/empty/child");
    let refused =
        fw.create().creating_parents_if_needed().with_acl_and_parents(Vec::new(), true).for_path(&empty, vec![]).await;
    assert!(matches!(refused, Err(CuratorError::InvalidAcl { .. })), "{refused:?}");
    assert!(fw.check_exists().for_path(&format!("{base}/empty")).await.unwrap().is_none());
    fw.close().await;
}
