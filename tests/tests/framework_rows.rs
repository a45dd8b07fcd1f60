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
