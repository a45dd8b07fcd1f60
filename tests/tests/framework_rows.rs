//! Issue 31 item 5, the framework's missing rows: `create().or_set_data_with_version`,
//! `create().with_acl_and_parents`, per-operation TTL, ACL and compression inside transactions,
//! and the framework-wide compression of `enable_compression()`. Each test names the Apache
//! Curator test whose scenario it follows.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{
    CreateMode, CuratorError, CuratorFramework, ErrorPolicy, TransactionCreate, TransactionResult, TransactionSetData,
};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::policies::{framework, Retry, COMBINATIONS};
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

/// Gzip's first two bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A server of the test's own that reaps expired TTL nodes within 100 ms (a TTL node's stat
/// does not tell it from a persistent one: the server shows its `ephemeralOwner` as 0).
async fn reaping_server() -> TestingServer {
    TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap()
}

/// True once `path` is gone (within the test deadline).
async fn reaped(fw: &CuratorFramework, path: &str) -> bool {
    eventually(Timing::new().deadline(), || async { fw.check_exists().for_path(path).await.unwrap().is_none() }).await
}

/// Curator's `TestCompressionInTransactionNew.testSimple`, `testCreateCompressedAndUncompressed`
/// and `testSetCompressedAndUncompressed`, and `TestTtlNodes.testBasic` through a transaction
/// (Curator's `transactionOp().create().withTtl(..).withACL(..)`): each operation of one
/// transaction has its own compression, TTL and ACL; the server reaps the TTL node and keeps
/// the others. Bad TTL settings are typed errors and send nothing.
#[tokio::test]
async fn transaction_ops_with_their_own_ttl_acl_and_compression() {
    init_tracing();
    let server = reaping_server().await;
    let fw = connected(builder(&server.connect_string())).await;
    let base = unique_path("txn-opts");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let [zipped, plain, ttl, acl] = ["zipped", "plain", "ttl", "acl"].map(|n| format!("{base}/{n}"));
    let text = "here's a string, ".repeat(20).into_bytes();
    let ttl_len = Duration::from_millis(500);

    let results = fw
        .transaction()
        .create_with(&zipped, text.clone(), TransactionCreate::new(CreateMode::Persistent).compressed())
        .create(&plain, text.clone(), CreateMode::Persistent)
        .create_with(&ttl, b"t".to_vec(), TransactionCreate::new(CreateMode::PersistentWithTtl).with_ttl(ttl_len))
        .create_with(&acl, b"a".to_vec(), TransactionCreate::default().with_acl(read_create()))
        .commit()
        .await
        .unwrap();
    assert_eq!(results[0], TransactionResult::Create { path: zipped.clone() });
    assert_eq!(results.len(), 4);

    // Compressed: gzip on the server, the text read back decompressed; the other as it was.
    let raw = fw.get_data().for_path(&zipped).await.unwrap();
    assert_eq!(raw[..2], GZIP_MAGIC);
    assert!(raw.len() < text.len());
    assert_eq!(fw.get_data().decompressed().for_path(&zipped).await.unwrap(), text);
    assert_eq!(fw.get_data().for_path(&plain).await.unwrap(), text);
    // The ACL given, not the provider's.
    assert_eq!(fw.get_acl().for_path(&acl).await.unwrap().0, read_create());
    assert_eq!(fw.get_acl().for_path(&plain).await.unwrap().0, curator_core::zk::Acls::anyone_all().to_vec());
    // A TTL node: the server reaps it once the TTL has passed.
    assert!(reaped(&fw, &ttl).await, "the TTL node made in a transaction was never reaped");
    assert!(fw.check_exists().for_path(&plain).await.unwrap().is_some());

    // Data writes: one compressed, one not, at their versions.
    let results = fw
        .transaction()
        .set_data_with(&plain, b"now zipped".to_vec(), TransactionSetData::new().with_version(0).compressed())
        .set_data_with(&zipped, b"now plain".to_vec(), TransactionSetData::new().uncompressed())
        .commit()
        .await
        .unwrap();
    assert!(matches!(&results[0], TransactionResult::SetData { stat, .. } if stat.version == 1), "{results:?}");
    assert_eq!(fw.get_data().decompressed().for_path(&plain).await.unwrap(), b"now zipped");
    assert_eq!(fw.get_data().for_path(&zipped).await.unwrap(), b"now plain");

    // Bad TTL settings and ACLs: typed errors, nothing applied (the first create neither).
    let never = format!("{base}/never");
    let bad: [(&str, TransactionCreate); 4] = [
        ("no TTL", TransactionCreate::new(CreateMode::PersistentWithTtl)),
        ("TTL without a TTL mode", TransactionCreate::new(CreateMode::Persistent).with_ttl(ttl_len)),
        ("zero TTL", TransactionCreate::new(CreateMode::PersistentWithTtl).with_ttl(Duration::ZERO)),
        ("TTL on an ephemeral", TransactionCreate::new(CreateMode::Ephemeral).with_ttl(ttl_len)),
    ];
    for (what, options) in bad {
        let refused = fw
            .transaction()
            .create(&never, vec![], CreateMode::Persistent)
            .create_with(&format!("{base}/bad"), vec![], options)
            .commit()
            .await;
        assert!(matches!(refused, Err(CuratorError::InvalidArgument { .. })), "{what}: {refused:?}");
    }
    let empty_acl = fw
        .transaction()
        .create(&never, vec![], CreateMode::Persistent)
        .create_with(&format!("{base}/bad"), vec![], TransactionCreate::default().with_acl(Vec::new()))
        .commit()
        .await;
    assert!(matches!(empty_acl, Err(CuratorError::InvalidAcl { .. })), "{empty_acl:?}");
    let bad_version =
        fw.transaction().set_data_with(&plain, vec![], TransactionSetData::new().with_version(-5)).commit().await;
    assert!(matches!(bad_version, Err(CuratorError::InvalidArgument { .. })), "{bad_version:?}");
    assert!(fw.check_exists().for_path(&never).await.unwrap().is_none(), "nothing sent");
    fw.close().await;
}

/// A transaction of a compressed TTL create with its own ACL and a compressed data write, whose
/// reply is lost after the server applied it (the proxy swallows it and drops the
/// connection), under both error policies and a patient and a short retry policy: the retry
/// finds the create applied (`NodeExists`) or the outcome stays unknown, never a panic or a
/// hang; and what the server holds is each option applied once: the data compressed once (it
/// decompresses to the text, not to gzip), the TTL and the ACL as given.
#[tokio::test]
async fn transaction_with_options_whose_reply_is_lost() {
    init_tracing();
    let server = reaping_server().await;
    let runs = COMBINATIONS.map(|(policy, retry)| reply_lost(&server, policy, retry));
    futures::future::join_all(runs).await;
}

async fn reply_lost(server: &TestingServer, policy: ErrorPolicy, retry: Retry) {
    {
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let reader = connected(builder(&server.connect_string())).await;
        let base = unique_path("txn-lost");
        let (node, doc) = (format!("{base}/ttl"), format!("{base}/doc"));
        fw.create().creating_parents_if_needed().for_path(&doc, vec![]).await.unwrap();
        let ttl = Duration::from_secs(3);
        let text = b"some text, some text, some text".to_vec();

        proxy.swallow_next_reply();
        let commit = fw
            .transaction()
            .create_with(
                &node,
                text.clone(),
                TransactionCreate::new(CreateMode::PersistentWithTtl)
                    .with_ttl(ttl)
                    .with_acl(read_create())
                    .compressed(),
            )
            .set_data_with(&doc, text.clone(), TransactionSetData::new().compressed())
            .commit();
        let outcome = tokio::time::timeout(Timing::new().deadline() * 3, commit.into_future()).await.expect("no hang");
        match &outcome {
            Ok(results) => assert_eq!(results.len(), 2, "{policy:?}/{retry:?}"),
            Err(CuratorError::NodeExists { path }) => assert_eq!(path, &node, "{policy:?}/{retry:?}"),
            Err(err) => assert!(err.outcome_unknown(), "{policy:?}/{retry:?}: {err:?}"),
        }
        assert!(!proxy.swallow_pending(), "{policy:?}/{retry:?}: the commit never reached the server");

        // Applied once, with every option.
        assert_eq!(reader.get_data().decompressed().for_path(&node).await.unwrap(), text, "{policy:?}/{retry:?}");
        assert_eq!(reader.get_data().decompressed().for_path(&doc).await.unwrap(), text, "{policy:?}/{retry:?}");
        assert_eq!(reader.get_acl().for_path(&node).await.unwrap().0, read_create(), "{policy:?}/{retry:?}");
        assert!(reaped(&reader, &node).await, "{policy:?}/{retry:?}: the TTL node was never reaped");
        fw.close().await;
        reader.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
        reader.close().await;
    }
}

/// A decompressing read with a watch (`decompressed().for_path_and_watch`) of data that is not
/// compressed fails as the read without a watch does: `BadData` with the node's path, at once
/// (not a retried `Zk` error), as Curator's `getData().decompressed().usingWatcher(..)` throws
/// its `ZipException`; of compressed data, the data and a watch that fires.
#[tokio::test]
async fn decompressing_watched_read_of_plain_data_is_bad_data() {
    init_tracing();
    let fw = connected(builder(&server())).await;
    let base = unique_path("watch-gunzip");
    let (plain, zipped) = (format!("{base}-plain"), format!("{base}-zipped"));
    fw.create().for_path(&plain, b"not gzip".to_vec()).await.unwrap();
    fw.create().compressed().for_path(&zipped, b"gzip".to_vec()).await.unwrap();

    let started = std::time::Instant::now();
    let read = fw.get_data().decompressed().for_path_and_watch(&plain).await;
    assert!(matches!(&read, Err(CuratorError::BadData { path, .. }) if path == &plain), "{read:?}");
    assert!(started.elapsed() < fw.connection_timeout(), "retried: {:?}", started.elapsed());

    let (data, _, watch) = fw.get_data().decompressed().for_path_and_watch(&zipped).await.unwrap();
    assert_eq!(data, b"gzip");
    fw.set_data().for_path(&zipped, b"x".to_vec()).await.unwrap();
    let event = tokio::time::timeout(Timing::new().deadline(), watch.changed()).await.expect("watch fires");
    assert_eq!(event.path, zipped);
    fw.close().await;
}

/// Gzip of `data` as the default provider writes it.
fn gzipped(data: &[u8]) -> Vec<u8> {
    use curator_core::CompressionProvider;
    curator_core::GzipCompressionProvider.compress("/", data).unwrap()
}

/// Curator's `TestCompression.testSetDataGlobalCompression`: with `enable_compression()`,
/// creates and data writes compress and reads decompress unless the operation says
/// `uncompressed()` / `undecompressed()`; explicit `compressed()` / `decompressed()` agree with
/// the default; plain data read through the default is `BadData` (Curator's `ZipException`).
/// The stored length is gzip's.
#[tokio::test]
async fn enable_compression_compresses_every_operation_by_default() {
    init_tracing();
    let fw = connected(builder(&server()).enable_compression()).await;
    assert!(fw.compression_enabled());
    let base = unique_path("global-gzip");
    let p = format!("{base}/a/b/c");
    let data = b"here's a string".to_vec();
    let stored_len = |stat: curator_core::zk::Stat| usize::try_from(stat.data_length).unwrap();

    // Create: explicit compression, then none, then the default.
    fw.create().compressed().creating_parents_if_needed().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().decompressed().for_path(&p).await.unwrap(), data);
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), data);
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), gzipped(&data));
    assert_eq!(stored_len(fw.check_exists().for_path(&p).await.unwrap().unwrap()), gzipped(&data).len());

    fw.delete().for_path(&p).await.unwrap();
    fw.create().uncompressed().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), data);
    for read in [fw.get_data().decompressed().for_path(&p).await, fw.get_data().for_path(&p).await] {
        assert!(matches!(&read, Err(CuratorError::BadData { path, .. }) if path == &p), "{read:?}");
    }
    assert_eq!(stored_len(fw.check_exists().for_path(&p).await.unwrap().unwrap()), data.len());

    fw.delete().for_path(&p).await.unwrap();
    fw.create().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), data);
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), gzipped(&data));

    // set_data: explicit, none, default.
    fw.set_data().compressed().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), data);
    fw.set_data().uncompressed().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), data);
    assert!(matches!(fw.get_data().for_path(&p).await, Err(CuratorError::BadData { .. })));
    fw.set_data().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), data);
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), gzipped(&data));

    // A watched read decompresses too.
    let (read, _, _watch) = fw.get_data().for_path_and_watch(&p).await.unwrap();
    assert_eq!(read, data);

    // A framework without it reads the gzip as stored.
    let plain = connected(builder(&server())).await;
    assert!(!plain.compression_enabled());
    assert_eq!(plain.get_data().for_path(&p).await.unwrap(), gzipped(&data));
    assert_eq!(plain.get_data().decompressed().for_path(&p).await.unwrap(), data);
    plain.close().await;
    fw.close().await;
}

/// Curator's `TestCompressionInTransactionNew.testGlobalCompression`: with
/// `enable_compression()`, a transaction's create and data write compress unless told
/// `uncompressed()`.
#[tokio::test]
async fn enable_compression_in_transactions() {
    init_tracing();
    let fw = connected(builder(&server()).enable_compression()).await;
    let base = unique_path("global-gzip-txn");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let (p1, p2) = (format!("{base}/a"), format!("{base}/b"));
    let (d1, d2) = (b"here's a string".to_vec(), b"here's another string".to_vec());

    fw.transaction()
        .create(&p1, d1.clone(), CreateMode::Persistent)
        .create_with(&p2, d2.clone(), TransactionCreate::default().uncompressed())
        .commit()
        .await
        .unwrap();
    assert_eq!(fw.get_data().undecompressed().for_path(&p1).await.unwrap(), gzipped(&d1));
    assert_eq!(fw.get_data().for_path(&p1).await.unwrap(), d1);
    assert_eq!(fw.get_data().undecompressed().for_path(&p2).await.unwrap(), d2);
    assert!(matches!(fw.get_data().for_path(&p2).await, Err(CuratorError::BadData { .. })));

    fw.transaction()
        .set_data_with(&p1, d1.clone(), TransactionSetData::new().uncompressed())
        .set_data(&p2, d2.clone(), None)
        .commit()
        .await
        .unwrap();
    assert_eq!(fw.get_data().undecompressed().for_path(&p1).await.unwrap(), d1);
    assert_eq!(fw.get_data().undecompressed().for_path(&p2).await.unwrap(), gzipped(&d2));
    assert_eq!(fw.get_data().for_path(&p2).await.unwrap(), d2);
    fw.close().await;
}

/// A provider that stores data twice over and counts its calls.
#[derive(Debug, Clone, Default)]
struct Doubling {
    compressed: Arc<AtomicUsize>,
    decompressed: Arc<AtomicUsize>,
}

impl curator_core::CompressionProvider for Doubling {
    fn compress(&self, _path: &str, data: &[u8]) -> curator_core::Result<Vec<u8>> {
        self.compressed.fetch_add(1, Ordering::SeqCst);
        Ok([data, data].concat())
    }
    fn decompress(&self, path: &str, data: &[u8]) -> curator_core::Result<Vec<u8>> {
        self.decompressed.fetch_add(1, Ordering::SeqCst);
        let (a, b) = data.split_at(data.len() / 2);
        match a == b {
            true => Ok(a.to_vec()),
            false => Err(CuratorError::BadData { path: path.into(), reason: "not doubled".into() }),
        }
    }
}

/// Curator's `TestCompression.testCompressionProvider`: the framework's own provider does the
/// compression, once per write and once per decompressing read; also under
/// `enable_compression()` and in transactions.
#[tokio::test]
async fn compression_provider_is_used_for_every_compressed_operation() {
    init_tracing();
    let provider = Doubling::default();
    let fw = connected(builder(&server()).compression_provider(provider.clone())).await;
    let base = unique_path("provider");
    let p = format!("{base}/a/b/c");
    let data = b"here's a string".to_vec();
    fw.create().compressed().creating_parents_if_needed().for_path(&p, data.clone()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), [data.clone(), data.clone()].concat());
    assert_eq!(fw.get_data().decompressed().for_path(&p).await.unwrap(), data);
    let count = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    assert_eq!((count(&provider.compressed), count(&provider.decompressed)), (1, 1));
    fw.close().await;

    let fw = connected(builder(&server()).compression_provider(provider.clone()).enable_compression()).await;
    fw.transaction().set_data(&p, b"x".to_vec(), None).commit().await.unwrap();
    assert_eq!(fw.get_data().undecompressed().for_path(&p).await.unwrap(), b"xx");
    assert_eq!(fw.get_data().for_path(&p).await.unwrap(), b"x");
    assert_eq!((count(&provider.compressed), count(&provider.decompressed)), (2, 2));
    fw.close().await;
}
