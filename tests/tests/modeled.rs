//! The modeled client (issue 29 item 2): Curator's `TestModeledFramework` scenarios, concurrent
//! compare-and-set updates from several sessions, an update whose reply is lost (under both
//! error policies and both retry policies), transactions (one guarded by a lock), background
//! writes and bad input.
//!
//! Of `TestModeledFramework`, `testWatched` is not ported: a modeled client has no watched mode
//! (the framework's `check_exists().for_path_and_watch` is the one way to watch a node), and
//! `testSchema` belongs with the schemas (curator-core). `testBadNode` differs on purpose: the
//! node is made, and reading data that is not the model's JSON is `BadData` with the path
//! (Curator's test ignores that its create fails without parents, and sees `NoNode`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CreateMode, CuratorError, CuratorFramework, ZPath};
use curator_modeled::{CachedModeledFramework, CreateOption, ModelSpec, ModeledFramework, RawModelSerializer};
use curator_recipes::{HeldNode, InterProcessMutex};
use curator_test::{ChaosProxy, TestingServer, Timing};
use serde::{Deserialize, Serialize};
use tests::policies::{framework, COMBINATIONS};
use tests::{builder, client, connected, init_tracing, unique_path};

/// Curator's `TestModel`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TestModel {
    first_name: String,
    last_name: String,
    address: String,
    age: i32,
    salary: u64,
}

/// Curator's `TestNewerModel`: `TestModel` and one more field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TestNewerModel {
    first_name: String,
    last_name: String,
    address: String,
    age: i32,
    salary: u64,
    new_field: i64,
}

fn model(first: &str, last: &str, address: &str, age: i32, salary: u64) -> TestModel {
    TestModel { first_name: first.into(), last_name: last.into(), address: address.into(), age, salary }
}

/// A modeled client of `TestModel` at a unique `/…/test/path` (Curator's base class's path).
fn modeled(fw: &CuratorFramework, base: &str) -> ModeledFramework<TestModel> {
    let path = ZPath::parse(&format!("{base}/test/path")).unwrap();
    ModeledFramework::new(fw, ModelSpec::json(path).build().unwrap())
}

async fn shared_client() -> CuratorFramework {
    init_tracing();
    client(&TestingServer::shared().connect_string()).await
}

/// Curator's `TestModeledFramework.testCrud`.
#[tokio::test]
async fn crud() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-crud"));
    let (first, second) =
        (model("John", "Galt", "1 Galt's Gulch", 42, 1), model("Wayne", "Rooney", "Old Trafford", 10, 1));
    let path = client.set(&first).await.unwrap();
    assert_eq!(path, client.full_path().unwrap());
    assert_eq!(client.read().await.unwrap(), first);
    client.set_existing(&second).await.unwrap();
    let node = client.read_znode().await.unwrap();
    assert_eq!((node.model, node.stat.version, node.path), (second, 1, client.spec().path().clone()));
    client.delete().await.unwrap();
    assert!(client.exists().await.unwrap().is_none());
    assert!(matches!(client.read().await, Err(CuratorError::NoNode { .. })));
    assert!(matches!(client.set_existing(&first).await, Err(CuratorError::NoNode { .. })));
    fw.close().await;
}

/// Curator's `TestModeledFramework.testBackwardCompatibility`: a model with a field fewer reads
/// what a newer model wrote (unknown fields are ignored, as Curator's mapper does).
#[tokio::test]
async fn backward_compatibility() {
    let fw = shared_client().await;
    let base = unique_path("modeled-compat");
    let old = modeled(&fw, &base);
    let newer: ModeledFramework<TestNewerModel> =
        ModeledFramework::new(&fw, ModelSpec::json(old.spec().path().clone()).build().unwrap());
    let written = TestNewerModel {
        first_name: "John".into(),
        last_name: "Galt".into(),
        address: "1 Galt's Gulch".into(),
        age: 42,
        salary: 1,
        new_field: 100,
    };
    newer.set(&written).await.unwrap();
    assert_eq!(old.read().await.unwrap(), model("John", "Galt", "1 Galt's Gulch", 42, 1));
    // The reverse is not compatible: the older data lacks the new field.
    old.set(&model("a", "b", "c", 1, 2)).await.unwrap();
    assert!(matches!(newer.read().await, Err(CuratorError::BadData { .. })));
    fw.close().await;
}

/// Curator's `TestModeledFramework.testGetChildren`, and the typed children.
#[tokio::test]
async fn children() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-children"));
    let one = model("John", "Galt", "1 Galt's Gulch", 42, 1);
    for (name, age) in [("one", 1), ("two", 2), ("three", 3)] {
        client.child(name).unwrap().set(&TestModel { age, ..one.clone() }).await.unwrap();
    }
    let expected: Vec<ZPath> = ["one", "three", "two"].iter().map(|n| client.spec().path().child(n).unwrap()).collect();
    assert_eq!(client.children().await.unwrap(), expected);
    let ages: Vec<i32> = client.children_as_znodes().await.unwrap().into_iter().map(|n| n.model.age).collect();
    assert_eq!(ages, [1, 3, 2]);
    assert_eq!(client.child("one").unwrap().parent().unwrap().spec().path(), client.spec().path());
    fw.close().await;
}

/// Curator's `TestModeledFramework.testBadNode`, on purpose different (see the file's doc): data
/// that is not the model's JSON is `BadData` with the node's path.
#[tokio::test]
async fn bad_node() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-bad"));
    let path = client.full_path().unwrap();
    fw.create().creating_parents_if_needed().for_path(&path, b"fubar".to_vec()).await.unwrap();
    let read = client.read().await;
    assert!(matches!(&read, Err(CuratorError::BadData { path: p, .. }) if *p == path), "{read:?}");
    // Empty data is not a model either.
    fw.set_data().for_path(&path, Vec::new()).await.unwrap();
    assert!(matches!(client.read().await, Err(CuratorError::BadData { .. })));
    fw.close().await;
}

/// Curator's `TestModeledFramework.testVersioned`: a write at the version read succeeds, one at
/// another version is `BadVersion`.
#[tokio::test]
async fn versioned() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-versioned"));
    let value = model("John", "Galt", "Galt's Gulch", 21, 1_010_101);
    client.set(&value).await.unwrap();
    client.set(&value).await.unwrap(); // so that the version goes to 1
    let read = client.read_znode().await.unwrap();
    assert_eq!(read.stat.version, 1);
    let stat = client.set_version(&read.model, read.stat.version).await.unwrap();
    assert_eq!(stat.version, 2);
    let stale = client.set_version(&value, 100_000).await;
    assert!(matches!(stale, Err(CuratorError::BadVersion { .. })), "{stale:?}");
    fw.close().await;
}

/// Curator's `TestModeledFramework.testAcl`: a spec's ACL lets only `digest:test:test` write.
#[tokio::test]
async fn acl() {
    let fw = shared_client().await;
    // DigestAuthenticationProvider.generateDigest("test:test"): base64 of its SHA-1.
    let acl = vec![Acl::new(Permission::WRITE, AuthId::new("digest", "test:V28q/NynI4JI3Rk54h0r8O5kMug="))];
    let base = unique_path("modeled-acl");
    let path = ZPath::parse(&format!("{base}/test/path")).unwrap();
    let spec = ModelSpec::<TestModel>::json(path).with_acl(acl).build().unwrap();
    let client = ModeledFramework::new(&fw, spec.clone());
    client.set(&model("John", "Galt", "Galt's Gulch", 21, 1_010_101)).await.unwrap();
    let denied = client.set_existing(&model("John", "Galt", "Galt's Gulch", 54, 88)).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");

    let authed =
        connected(builder(&TestingServer::shared().connect_string()).authorization("digest", b"test:test".to_vec()))
            .await;
    ModeledFramework::new(&authed, spec).set_existing(&model("John", "Galt", "Galt's Gulch", 42, 66)).await.unwrap();
    authed.close().await;
    fw.close().await;
}

/// Concurrent compare-and-set updates from several sessions lose no update: each of 4 sessions
/// adds 1 to the age 15 times; the age ends at 60.
#[tokio::test]
async fn concurrent_updates_from_several_sessions_lose_nothing() {
    let fw = shared_client().await;
    let base = unique_path("modeled-concurrent");
    modeled(&fw, &base).set(&TestModel::default()).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let own = client(&TestingServer::shared().connect_string()).await;
        let client = modeled(&own, &base);
        tasks.push(tokio::spawn(async move {
            let mut calls = 0;
            for _ in 0..15 {
                client
                    .update(|mut m| {
                        calls += 1;
                        m.age += 1;
                        m
                    })
                    .await
                    .unwrap();
            }
            own.close().await;
            calls
        }));
    }
    let mut calls = 0;
    for task in tasks {
        calls += task.await.unwrap();
    }
    let end = modeled(&fw, &base).read_znode().await.unwrap();
    assert_eq!((end.model.age, end.stat.version), (60, 60));
    assert!(calls >= 60, "{calls} calls of the change");
    fw.close().await;
}

/// An update whose write reply is lost (the connection cut behind the request) is applied once:
/// the retried write's `BadVersion` finds the update's own data at the next version. Under both
/// error policies and both retry policies; with the short policy the retry may give up, and the
/// error then says the outcome is unknown.
#[tokio::test]
async fn update_whose_reply_is_lost_is_applied_once() {
    init_tracing();
    let server = TestingServer::shared();
    let observer = client(&server.connect_string()).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let base = unique_path("modeled-lost-reply");
        let client = modeled(&fw, &base);
        client.set(&TestModel::default()).await.unwrap();
        let swallowed = AtomicBool::new(false);
        let outcome = client
            .update(|mut m| {
                // Between the read and the write: the write's reply is the next one.
                if !swallowed.swap(true, Ordering::SeqCst) {
                    proxy.swallow_next_reply();
                }
                m.age += 1;
                m
            })
            .await;
        assert!(!proxy.swallow_pending(), "{case}: the reply was not swallowed");
        match &outcome {
            Ok(node) => assert_eq!(node.model.age, 1, "{case}"),
            Err(err) => assert!(err.outcome_unknown() || err.is_retryable(), "{case}: {err:?}"),
        }
        let end = modeled(&observer, &base).read_znode().await.unwrap();
        assert_eq!((end.model.age, end.stat.version), (1, 1), "{case}: {outcome:?}");
        fw.close().await;
    }
    observer.close().await;
}

/// Modeled operations in a transaction: creates, a write at a version and a delete commit
/// together, and a failed check fails them all. (Curator's `ModeledFramework.inTransaction`.)
#[tokio::test]
async fn transaction() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-tx"));
    client.set(&model("p", "", "", 0, 0)).await.unwrap();
    let (a, b) = (client.child("a").unwrap(), client.child("b").unwrap());
    let tx = a.create_in(fw.transaction(), &model("a", "", "", 1, 0)).unwrap();
    let tx = b.create_in(tx, &model("b", "", "", 2, 0)).unwrap();
    let tx = client.set_in(tx, &model("p", "", "", 1, 0), Some(0)).unwrap();
    tx.commit().await.unwrap();
    assert_eq!((a.read().await.unwrap().age, b.read().await.unwrap().age), (1, 2));
    assert_eq!(client.read().await.unwrap().age, 1);

    // A check at a stale version fails the whole transaction: a is not deleted.
    let tx = a.delete_in(fw.transaction(), None).unwrap();
    let failed = client.check_in(tx, 0).unwrap().commit().await;
    assert!(matches!(failed, Err(CuratorError::BadVersion { .. })), "{failed:?}");
    assert!(a.exists().await.unwrap().is_some());
    let tx = a.delete_in(fw.transaction(), None).unwrap();
    client.check_in(tx, 1).unwrap().commit().await.unwrap();
    assert!(a.exists().await.unwrap().is_none());
    fw.close().await;
}

/// A modeled create in a transaction takes the spec's ACL, TTL and compression, as Curator's
/// `createOp` (`transactionOp().create().withTtl(..).withACL(..)`, compressed for a
/// `compress` spec): the node has the ACL, holds gzip that reads back as the model, and is a
/// TTL node (a TTL mode without the TTL would be refused).
#[tokio::test]
async fn transaction_create_with_the_specs_acl_ttl_and_compression() {
    let fw = shared_client().await;
    let base = unique_path("modeled-tx-opts");
    fw.create().for_path(&base, vec![]).await.unwrap();
    let acl = vec![Acl::new(Permission::READ | Permission::WRITE, AuthId::anyone())];
    let spec = ModelSpec::<TestModel>::json(ZPath::parse(&format!("{base}/node")).unwrap())
        .with_create_mode(CreateMode::PersistentWithTtl)
        .with_ttl(std::time::Duration::from_secs(60))
        .with_acl(acl.clone())
        .with_create_options([CreateOption::Compress])
        .build()
        .unwrap();
    let client = ModeledFramework::new(&fw, spec);
    let value = model("t", "", "", 7, 0);
    client.create_in(fw.transaction(), &value).unwrap().commit().await.unwrap();
    let path = client.full_path().unwrap();
    assert_eq!(fw.get_acl().for_path(&path).await.unwrap().0, acl);
    assert_eq!(&fw.get_data().for_path(&path).await.unwrap()[..2], [0x1f, 0x8b], "gzip");
    assert_eq!(client.read().await.unwrap(), value);
    fw.close().await;
}

/// A modeled write in a transaction guarded by a lock commits while the lock is held, and is
/// refused (`OwnNodeLost`, nothing written) once the lock's node is gone.
#[tokio::test]
async fn transaction_guarded_by_a_lock() {
    let fw = shared_client().await;
    let base = unique_path("modeled-guarded");
    let client = modeled(&fw, &base);
    client.set(&model("v", "", "", 1, 0)).await.unwrap();
    let guard = InterProcessMutex::new(&fw, &format!("{base}/lock")).unwrap().acquire().await.unwrap();
    client.set_in(guard.transaction(), &model("v", "", "", 2, 0), None).unwrap().commit().await.unwrap();
    assert_eq!(client.read().await.unwrap().age, 2);

    fw.delete().for_path(HeldNode::path(&guard)).await.unwrap(); // the hold is lost
    let refused = client.set_in(guard.transaction(), &model("v", "", "", 3, 0), None).unwrap().commit().await;
    assert!(matches!(refused, Err(CuratorError::OwnNodeLost { .. })), "{refused:?}");
    assert_eq!(client.read().await.unwrap().age, 2, "nothing written");
    drop(guard);
    fw.close().await;
}

/// Modeled writes run in the background: the futures are `Send`, spawned on the framework.
#[tokio::test]
async fn background() {
    let fw = shared_client().await;
    let client = modeled(&fw, &unique_path("modeled-background"));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let writer = client.clone();
    fw.spawn_background(async move {
        let _ = tx.send(writer.set(&model("bg", "", "", 7, 0)).await);
    });
    let written = tokio::time::timeout(Timing::new().deadline(), rx).await.unwrap().unwrap();
    assert_eq!(written.unwrap(), client.full_path().unwrap());
    assert_eq!(client.read().await.unwrap().age, 7);
    fw.close().await;
}

/// A parameterized path: each resolved value is its own node; an unresolved one sends nothing.
#[tokio::test]
async fn parameterized_path() {
    let fw = shared_client().await;
    let base = unique_path("modeled-params");
    let template = ZPath::parse_with_ids(&format!("{base}/{{group}}/{{id}}")).unwrap();
    let client: ModeledFramework<TestModel> = ModeledFramework::new(&fw, ModelSpec::json(template).build().unwrap());
    client.resolved(["g1", "x"]).unwrap().set(&model("x", "", "", 1, 0)).await.unwrap();
    client.resolved(["g1"]).unwrap().resolved(["y"]).unwrap().set(&model("y", "", "", 2, 0)).await.unwrap();
    let group = client.resolved(["g1"]).unwrap();
    let unresolved = group.set(&TestModel::default()).await;
    assert!(matches!(unresolved, Err(CuratorError::InvalidArgument { .. })), "{unresolved:?}");
    let names = fw.get_children().for_path(&format!("{base}/g1")).await.unwrap();
    assert_eq!(names.len(), 2, "{names:?}");
    let listed = client.with_path(ZPath::parse(&format!("{base}/g1")).unwrap()).children_as_znodes().await.unwrap();
    assert_eq!(listed.iter().map(|n| n.model.age).collect::<Vec<_>>(), [1, 2]);
    fw.close().await;
}

/// Bad input is a typed error and sends nothing.
#[tokio::test]
async fn bad_input() {
    let fw = shared_client().await;
    let base = unique_path("modeled-bad-input");
    let client = modeled(&fw, &base);
    // A child name is one node.
    assert!(matches!(client.child("a/b"), Err(CuratorError::InvalidPath { .. })));
    // A TTL needs a TTL mode, and the reverse; an ACL is not empty.
    let path = client.spec().path().clone();
    let ttl = ModelSpec::<TestModel>::json(path.clone()).with_ttl(std::time::Duration::from_secs(1)).build();
    assert!(matches!(ttl, Err(CuratorError::InvalidArgument { .. })));
    let mode = ModelSpec::<TestModel>::json(path.clone()).with_create_mode(CreateMode::PersistentWithTtl).build();
    assert!(matches!(mode, Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(
        ModelSpec::<TestModel>::json(path.clone()).with_acl(Vec::new()).build(),
        Err(CuratorError::InvalidArgument { .. })
    ));
    // A model that JSON cannot write (a map whose keys are not strings).
    let maps: ModeledFramework<HashMap<(i32, i32), i32>> =
        ModeledFramework::new(&fw, ModelSpec::json(path.clone()).build().unwrap());
    let unwritable = maps.set(&HashMap::from([((1, 2), 3)])).await;
    assert!(matches!(&unwritable, Err(CuratorError::InvalidArgument { path: p, .. }) if p.ends_with("/test/path")));
    // A cache at an unresolved path.
    let template: ModeledFramework<TestModel> = ModeledFramework::new(
        &fw,
        ModelSpec::json(ZPath::parse_with_ids(&format!("{base}/{{id}}")).unwrap()).build().unwrap(),
    );
    assert!(matches!(CachedModeledFramework::new(template), Err(CuratorError::InvalidArgument { .. })));
    // Issue 40 item 13: a path from `parse` whose node is written as a parameter is a literal
    // `{id}` node there (Curator's `parse` too): the spec refuses it, naming `parse_with_ids`.
    // Before, the spec was built and a `set` made a node named "{id}".
    let literal = ModelSpec::<TestModel>::json(ZPath::parse(&format!("{base}/{{id}}")).unwrap()).build();
    assert!(
        matches!(&literal, Err(CuratorError::InvalidArgument { reason, .. }) if reason.contains("parse_with_ids")),
        "{:?}",
        literal.map(|s| s.path().to_string())
    );
    assert!(fw.check_exists().for_path(&base).await.unwrap().is_none(), "nothing was sent");
    fw.close().await;
}

/// The raw serializer: the model is the bytes (Curator's `ModelSerializer.raw`).
#[tokio::test]
async fn raw_serializer() {
    let fw = shared_client().await;
    let path = ZPath::parse(&unique_path("modeled-raw")).unwrap();
    let client = ModeledFramework::new(&fw, ModelSpec::builder(path, RawModelSerializer).build().unwrap());
    client.set(&vec![1, 2, 3]).await.unwrap();
    assert_eq!(fw.get_data().for_path(&client.full_path().unwrap()).await.unwrap(), [1, 2, 3]);
    assert_eq!(client.read().await.unwrap(), [1, 2, 3]);
    fw.close().await;
}

/// A spec with `Compress`: the node holds gzip, not JSON, and reads give the model back, also
/// when a transaction writes it.
#[tokio::test]
async fn compressed() {
    let fw = shared_client().await;
    let path = ZPath::parse(&format!("{}/test/path", unique_path("modeled-compressed"))).unwrap();
    let options = [CreateOption::CreateParentsIfNeeded, CreateOption::SetDataIfExists, CreateOption::Compress];
    let spec = ModelSpec::<TestModel>::json(path).with_create_options(options).build().unwrap();
    let client = ModeledFramework::new(&fw, spec);
    let value = model("John", "Galt", "1 Galt's Gulch", 42, 1);
    client.set(&value).await.unwrap();
    let raw = fw.get_data().for_path(&client.full_path().unwrap()).await.unwrap();
    assert_eq!(&raw[..2], [0x1f, 0x8b], "gzip's magic number");
    assert_eq!(client.read().await.unwrap(), value);
    client
        .update(|mut m| {
            m.age += 1;
            m
        })
        .await
        .unwrap();
    assert_eq!(client.read().await.unwrap().age, 43);
    let stat = fw.check_exists().for_path(&client.full_path().unwrap()).await.unwrap().expect("node");
    client.set_in(fw.transaction(), &value, Some(stat.version)).unwrap().commit().await.unwrap();
    let raw = fw.get_data().for_path(&client.full_path().unwrap()).await.unwrap();
    assert_eq!(&raw[..2], [0x1f, 0x8b], "a transaction's write is compressed too");
    assert_eq!(client.read().await.unwrap(), value);
    fw.close().await;
}

/// Curator's `ModelSpec.schema()` (used by `TestModeledFramework.testSchema` with a framework's
/// schema set): the spec's schema refuses, before sending, data the model cannot read and a
/// create mode the spec does not use, and accepts what the modeled client writes.
#[tokio::test]
async fn spec_schema_refuses_data_the_model_cannot_read() {
    init_tracing();
    let base = unique_path("modeled-schema");
    let spec = ModelSpec::<TestModel>::json(ZPath::parse_with_ids(&format!("{base}/{{id}}")).unwrap()).build().unwrap();
    let schema = spec.schema().unwrap();
    let set = curator_core::SchemaSet::new(vec![schema], true).unwrap();
    let fw = connected(builder(&TestingServer::shared().connect_string()).schema_set(set)).await;
    let people = ModeledFramework::new(&fw, spec);
    let john = people.resolved(["john"]).unwrap();
    john.set(&model("John", "Galt", "1 Galt's Gulch", 42, 1)).await.unwrap();
    assert_eq!(john.read().await.unwrap().age, 42);

    let path = format!("{base}/john");
    let refused = fw.set_data().for_path(&path, b"not json".to_vec()).await;
    assert!(matches!(refused, Err(CuratorError::SchemaViolation { .. })), "{refused:?}");
    let ephemeral =
        fw.create().with_mode(CreateMode::Ephemeral).for_path(&format!("{base}/jane"), b"{}".to_vec()).await;
    assert!(matches!(ephemeral, Err(CuratorError::SchemaViolation { .. })), "{ephemeral:?}");
    assert!(fw.check_exists().for_path(&format!("{base}/jane")).await.unwrap().is_none(), "nothing was sent");
    assert_eq!(john.read().await.unwrap().first_name, "John", "the model is unchanged");
    // A path outside the spec's pattern (one more level) falls to the default schema.
    fw.create()
        .creating_parents_if_needed()
        .for_path(&format!("{base}/john/extra"), b"anything".to_vec())
        .await
        .unwrap();
    fw.close().await;
}
