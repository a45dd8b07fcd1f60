//! Migrations and Apache Curator 5.4: the hash recorded for a migration is the one Curator's
//! `MigrationManager` records for the same operations (`CuratorMultiTransactionRecord
//! .addToDigest`: the namespaced path, the operation code, jute's text of the request), so a
//! set applied by Java reads here as applied and unchanged, and the reverse. The Java side is
//! `tests/java/MigrationHashPeer.java`, built on Debian's curator-framework jar (the x-async jar
//! with `MigrationManager` itself is not packaged; the digest it calls is curator-framework's).

use curator_core::{CreateMode, CuratorFramework};
use curator_recipes::{Migration, MigrationOp};
use curator_test::TestingServer;
use tests::{builder, init_tracing};

/// The operations `MigrationHashPeer` hashes, in its order.
fn ops() -> Vec<MigrationOp> {
    vec![
        MigrationOp::create("/a/b", b"hello".to_vec()),
        MigrationOp::create_with_mode("/a/x,y%z}", vec![0, 0x80, 0x7f, 10], CreateMode::PersistentSequential),
        MigrationOp::create_with_mode("/a/e", Vec::new(), CreateMode::Ephemeral),
        MigrationOp::create_with_mode("/a/es-", vec![1], CreateMode::EphemeralSequential),
        MigrationOp::create_with_mode("/a/c", vec![2], CreateMode::Container),
        MigrationOp::delete("/a/b"),
        MigrationOp::Delete { path: "/a/d".to_string(), version: Some(3) },
        MigrationOp::set_data("/a/f", b"x".to_vec()),
        MigrationOp::SetData { path: "/a/g".to_string(), data: Vec::new(), version: Some(7) },
        MigrationOp::check("/a/h", -1),
        MigrationOp::check("/a/i", 2),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn java_hashes(namespace: &str, connect: &str) -> Vec<String> {
    let out =
        tests::java::peer("MigrationHashPeer").args([namespace, connect]).output().await.expect("run the Java peer");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// Curator's hashes of each operation and of all of them as one migration equal ours, without
/// and with a namespace. (Curator's TestMigrationManager checks its own hashes only; this is
/// the interop check the wire promise asks for.)
#[tokio::test]
async fn migration_hashes_are_curators() {
    init_tracing();
    let server = TestingServer::start().await.expect("server");
    for namespace in [None, Some("ns")] {
        let mut b = builder(&server.connect_string());
        if let Some(ns) = namespace {
            b = b.namespace(ns);
        }
        let fw: CuratorFramework = b.build().expect("build");
        let java = java_hashes(namespace.unwrap_or("-"), &server.connect_string()).await;
        let ops = ops();
        assert_eq!(java.len(), ops.len() + 1, "{java:?}");
        for (i, op) in ops.iter().enumerate() {
            let ours = hex(&Migration::new(format!("op-{i}"), vec![op.clone()]).hash(&fw));
            assert_eq!(ours, java[i], "namespace {namespace:?}, op {i}: {op:?}");
        }
        let all = hex(&Migration::new("all", ops).hash(&fw));
        assert_eq!(format!("all {all}"), java[ops_len()], "namespace {namespace:?}: the whole migration");
    }
}

fn ops_len() -> usize {
    ops().len()
}
