//! Schemas (issue 29 item 2): a framework built with a `SchemaSet` refuses an operation that
//! breaks the schema of its path with `CuratorError::SchemaViolation`, sending nothing; schema
//! sets load from Curator's JSON schema format. The `curator_*` tests port the scenarios of
//! Curator's `TestSchema` (org.apache.curator.framework.schema), with its JSON resources
//! (schema1.json ... schema5.json) written out here. Each runs in a namespace of its own on the
//! shared server, so the schemas' paths ("/a/b/c") are Curator's own: schema paths are relative
//! to the namespace.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use curator_core::{
    Allowance, CreateMode, CuratorError, CuratorFramework, DataValidator, Schema, SchemaSet, SchemaSetLoader,
};
use curator_test::TestingServer;
use tests::{builder, connected, init_tracing, unique_path};

/// schema1.json: one exact path that must be ephemeral and cannot be sequential, with metadata
/// (a number and a string).
const SCHEMA1: &str = r#"[
  {"name": "test", "path": "/a/b/c", "documentation": "one exact path",
   "ephemeral": "must", "sequential": "cannot", "metadata": {"one": 1, "two": "2"}}
]"#;

/// schema2.json: the exact path of schema1, and a pattern below /a that cannot be ephemeral or
/// deleted.
const SCHEMA2: &str = r#"[
  {"name": "test", "path": "/a/b/c", "ephemeral": "must", "sequential": "cannot"},
  {"name": "test2", "path": "/a/.*", "isRegex": true, "ephemeral": "cannot", "canBeDeleted": false}
]"#;

/// schema3.json: one path whose data is checked by the validator named "test".
const SCHEMA3: &str = r#"[{"name": "test", "path": "/test", "schemaValidator": "test"}]"#;

/// schema4.json: /a must be ephemeral and cannot be deleted; /b's data is checked.
const SCHEMA4: &str = r#"[
  {"name": "testa", "path": "/a", "ephemeral": "must", "canBeDeleted": false},
  {"name": "testb", "path": "/b", "schemaValidator": "test"}
]"#;

/// schema5.json: an exact path, then two patterns where the first given wins.
const SCHEMA5: &str = r#"[
  {"name": "1", "path": "/exact/match", "isRegex": false, "ephemeral": "cannot", "sequential": "must"},
  {"name": "2", "path": "/exact/other/.*", "isRegex": true, "ephemeral": "must", "sequential": "can"},
  {"name": "3", "path": "/exact/.*", "isRegex": true, "ephemeral": "can", "sequential": "cannot"}
]"#;

/// The validators of TestSchema: "test" refuses empty data.
fn validators() -> HashMap<String, DataValidator> {
    let non_empty: DataValidator =
        Arc::new(|_: &str, data: &[u8]| if data.is_empty() { Err("empty".to_string()) } else { Ok(()) });
    HashMap::from([("test".to_string(), non_empty)])
}

fn load(json: &str) -> SchemaSet {
    SchemaSetLoader::from_json(json, &validators()).expect("schema JSON").into_schema_set(true).expect("schema set")
}

/// A started framework in a namespace of its own on the shared server, checking `set`.
async fn framework(set: SchemaSet) -> CuratorFramework {
    let namespace = unique_path("schema").trim_start_matches('/').to_string();
    connected(builder(&TestingServer::shared().connect_string()).namespace(namespace).schema_set(set)).await
}

/// A framework without schemas in the namespace of `fw`, to look at what was (not) written.
async fn plain(fw: &CuratorFramework) -> CuratorFramework {
    let namespace = fw.namespace().expect("namespaced").to_string();
    connected(builder(&TestingServer::shared().connect_string()).namespace(namespace)).await
}

#[track_caller]
fn assert_violation<T: std::fmt::Debug>(result: Result<T, CuratorError>, path: &str, schema: &str, reason: &str) {
    match result {
        Err(CuratorError::SchemaViolation { path: p, schema: s, reason: r }) => {
            assert_eq!((p.as_str(), s.as_str()), (path, schema), "{r}");
            assert!(r.contains(reason), "reason {r:?} does not say {reason:?}");
        }
        other => panic!("expected a schema violation of {schema:?} at {path}, got {other:?}"),
    }
}

async fn exists(fw: &CuratorFramework, path: &str) -> bool {
    fw.check_exists().for_path(path).await.expect("exists").is_some()
}

/// TestSchema.testBasics: the metadata and raw path of a loaded schema; a persistent create of
/// a must-be-ephemeral path is refused, an ephemeral one made (its parents are not checked).
#[tokio::test]
async fn curator_basics() {
    init_tracing();
    let set = load(SCHEMA1);
    let schema = set.named_schema("test").expect("named test");
    let metadata = BTreeMap::from([("one".to_string(), "1".to_string()), ("two".to_string(), "2".to_string())]);
    assert_eq!(schema.metadata(), &metadata);
    assert_eq!(schema.raw_path(), "/a/b/c");
    let fw = framework(set.clone()).await;
    let refused = fw.create().creating_parents_if_needed().for_path("/a/b/c", Vec::new()).await;
    assert_violation(refused, "/a/b/c", "test", "must be ephemeral");
    assert!(!exists(&fw, "/a").await, "a refused create made its parents");
    fw.create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path("/a/b/c", Vec::new())
        .await
        .unwrap();
    assert!(exists(&fw, "/a/b/c").await);
    fw.close().await;
}

/// TestSchema.testSchemaValidator: the data validator named in the JSON refuses empty data.
#[tokio::test]
async fn curator_schema_validator() {
    init_tracing();
    let fw = framework(load(SCHEMA3)).await;
    assert_violation(fw.create().for_path("/test", Vec::new()).await, "/test", "test", "data is not valid: empty");
    assert!(!exists(&fw, "/test").await);
    fw.create().for_path("/test", b"good".to_vec()).await.unwrap();
    // A data write is checked as well (Curator's validateGeneral in setData).
    assert_violation(fw.set_data().for_path("/test", Vec::new()).await, "/test", "test", "data is not valid");
    assert_eq!(fw.get_data().for_path("/test").await.unwrap(), b"good");
    fw.close().await;
}

/// TestSchema.testMulti: an exact path wins over a pattern that matches it too; a path only the
/// pattern matches gets the pattern's schema.
#[tokio::test]
async fn curator_multi() {
    init_tracing();
    let fw = framework(load(SCHEMA2)).await;
    let refused = fw.create().creating_parents_if_needed().for_path("/a/b/c", Vec::new()).await;
    assert_violation(refused, "/a/b/c", "test", "must be ephemeral");
    let refused = fw
        .create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path("/a/b/c/d/e", Vec::new())
        .await;
    assert_violation(refused, "/a/b/c/d/e", "test2", "cannot be ephemeral");
    assert!(!exists(&fw, "/a").await);
    fw.close().await;
}

/// TestSchema.testTransaction: every operation of a transaction is checked before the multi is
/// sent; one violation refuses the whole transaction.
#[tokio::test]
async fn curator_transaction() {
    init_tracing();
    let fw = framework(load(SCHEMA4)).await;
    let refused = fw
        .transaction()
        .create("/a", Vec::new(), CreateMode::Persistent)
        .create("/a", Vec::new(), CreateMode::Ephemeral)
        .commit()
        .await;
    assert_violation(refused, "/a", "testa", "must be ephemeral");
    assert!(!exists(&fw, "/a").await);
    fw.transaction().create("/a", Vec::new(), CreateMode::Ephemeral).commit().await.unwrap();
    assert_violation(fw.transaction().delete("/a", None).commit().await, "/a", "testa", "cannot be deleted");
    assert!(exists(&fw, "/a").await);
    let refused = fw.transaction().create("/b", Vec::new(), CreateMode::Persistent).commit().await;
    assert_violation(refused, "/b", "testb", "data is not valid");
    assert!(!exists(&fw, "/b").await);
    fw.transaction().create("/b", vec![0; 10], CreateMode::Persistent).commit().await.unwrap();
    assert_violation(
        fw.transaction().set_data("/b", Vec::new(), None).commit().await,
        "/b",
        "testb",
        "data is not valid",
    );
    assert_eq!(fw.get_data().for_path("/b").await.unwrap(), vec![0; 10]);
    fw.transaction().set_data("/b", vec![1; 10], None).commit().await.unwrap();
    assert_eq!(fw.get_data().for_path("/b").await.unwrap(), vec![1; 10]);
    fw.close().await;
}

/// TestSchema.testYaml, in JSON: the loader keeps the schemas in the order written, with their
/// metadata as text. (It differs on purpose: the loader reads Curator's JSON format only; YAML
/// converted to the same tree means the same.)
#[test]
fn curator_yaml_as_json() {
    let json = r#"[
      {"name": "test", "path": "/a/b/c", "ephemeral": "must", "sequential": "cannot"},
      {"name": "test2", "path": "/a/.*", "isRegex": true, "ephemeral": "cannot", "canBeDeleted": false,
       "metadata": {"one": 1, "two": 2}}
    ]"#;
    let loader = SchemaSetLoader::from_json(json, &HashMap::new()).unwrap();
    let schemas = loader.schemas();
    assert_eq!(schemas.len(), 2);
    assert_eq!((schemas[0].name(), schemas[0].metadata().len()), ("test", 0));
    assert_eq!((schemas[1].name(), schemas[1].metadata().len()), ("test2", 2));
    assert_eq!(schemas[1].metadata().get("two").map(String::as_str), Some("2"));
    assert_eq!(schemas[1].pattern(), Some("/a/.*"));
    // canBeDeleted is false unless given, as Curator's loader reads it.
    assert!(!schemas[0].can_be_deleted());
}

/// TestSchema.testOrdering: an exact path first, then the patterns in the order given.
#[tokio::test]
async fn curator_ordering() {
    init_tracing();
    let fw = framework(load(SCHEMA5)).await;
    let create = |mode: CreateMode, path: &'static str| {
        fw.create().creating_parents_if_needed().with_mode(mode).for_path(path, Vec::new())
    };
    assert_violation(create(CreateMode::Ephemeral, "/exact/match").await, "/exact/match", "1", "cannot be ephemeral");
    assert_violation(
        create(CreateMode::EphemeralSequential, "/exact/foo/bar").await,
        "/exact/foo/bar",
        "3",
        "cannot be sequential",
    );
    assert_violation(
        create(CreateMode::PersistentSequential, "/exact/other/bar").await,
        "/exact/other/bar",
        "2",
        "must be ephemeral",
    );
    create(CreateMode::PersistentSequential, "/exact/match").await.unwrap();
    create(CreateMode::EphemeralSequential, "/exact/other/thing").await.unwrap();
    create(CreateMode::Ephemeral, "/exact/foo/bar").await.unwrap();
    assert_eq!(fw.schema_set().unwrap().schema_for("/exact/other/x").unwrap().name(), "2");
    fw.close().await;
}

/// A violating create, data write, delete, one-shot watch and persistent watch send nothing:
/// the server's request counter does not move (beyond the counter's own reading and the
/// framework's liveness probes), no node appears, no data changes, nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn violations_send_nothing() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let base = unique_path("schema-nothing");
    let keep = Schema::builder_for_path(&format!("{base}/keep"))
        .name("keep")
        .can_be_deleted(false)
        .watched(Allowance::Cannot)
        .data_validator(|_, data| if data.starts_with(b"v") { Ok(()) } else { Err("not a version".into()) })
        .build()
        .unwrap();
    let set = SchemaSet::new(vec![keep], true).unwrap();
    let fw = connected(builder(&server.connect_string()).schema_set(set)).await;
    let keep = format!("{base}/keep");
    fw.create().creating_parents_if_needed().for_path(&keep, b"v1".to_vec()).await.unwrap();
    let before = tests::packets_received(&server.connect_string()).await;
    for _ in 0..5 {
        assert_violation(fw.delete().for_path(&keep).await, &keep, "keep", "cannot be deleted");
        assert_violation(fw.delete().guaranteed().for_path(&keep).await, &keep, "keep", "cannot be deleted");
        assert_violation(fw.set_data().for_path(&keep, b"x".to_vec()).await, &keep, "keep", "data is not valid");
        assert_violation(fw.get_data().watched().for_path(&keep).await, &keep, "keep", "cannot be watched");
        assert_violation(fw.check_exists().for_path_and_watch(&keep).await, &keep, "keep", "cannot be watched");
        assert_violation(fw.get_children().for_path_and_watch(&keep).await, &keep, "keep", "cannot be watched");
        assert_violation(fw.watches().add().for_path(&keep).await, &keep, "keep", "cannot be watched");
        assert_violation(fw.transaction().delete(&keep, None).commit().await, &keep, "keep", "cannot be deleted");
    }
    let after = tests::packets_received(&server.connect_string()).await;
    assert!(after - before <= 3, "40 refused operations: {} packets", after - before);
    assert_eq!(fw.get_data().for_path(&keep).await.unwrap(), b"v1");
    // A create of the path after it is deleted from outside the schema: refused, not made.
    let other = plain_on(&server.connect_string()).await;
    other.delete().for_path(&keep).await.unwrap();
    assert_violation(fw.create().for_path(&keep, b"x".to_vec()).await, &keep, "keep", "data is not valid");
    assert!(!exists(&fw, &keep).await);
    // An operation in the background gets the same error in its event.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    fw.create().for_path(&keep, b"x".to_vec()).in_background(move |_, event| {
        let _ = tx.send(event.error);
    });
    let error = rx.recv().await.expect("event");
    assert_violation::<()>(error.map_or(Ok(()), Err), &keep, "keep", "data is not valid");
    other.close().await;
    fw.close().await;
}

async fn plain_on(connect_string: &str) -> CuratorFramework {
    connected(builder(connect_string)).await
}

/// The watched allowance: a must-be-watched path refuses a read without a watch (as Curator's
/// reads check) and takes one with; a path a schema does not cover takes anything.
#[tokio::test]
async fn watched_allowance() {
    init_tracing();
    let watched = Schema::builder_for_pattern("/watched/.*").name("watched").watched(Allowance::Must).build().unwrap();
    let fw = framework(SchemaSet::new(vec![watched], true).unwrap()).await;
    fw.create().creating_parents_if_needed().for_path("/watched/x", b"1".to_vec()).await.unwrap();
    assert_violation(fw.get_data().for_path("/watched/x").await, "/watched/x", "watched", "must be watched");
    assert_violation(fw.check_exists().for_path("/watched/x").await, "/watched/x", "watched", "must be watched");
    assert_violation(fw.get_children().for_path("/watched/x").await, "/watched/x", "watched", "must be watched");
    let (data, _, watch) = fw.get_data().for_path_and_watch("/watched/x").await.unwrap();
    assert_eq!(data, b"1");
    watch.remove();
    assert!(fw.get_data().watched().for_path("/watched/x").await.is_ok());
    let persistent = fw.watches().add().for_path("/watched/x").await.unwrap();
    drop(persistent);
    // "/watched" itself is not matched by "/watched/.*": the default schema allows all.
    assert!(fw.get_children().for_path("/watched").await.is_ok());
    // get_acl is not a watch-setting read: not checked.
    assert!(fw.get_acl().for_path("/watched/x").await.is_ok());
    fw.close().await;
}

/// Without a default schema, a path no schema matches is refused (schema ""), reads included.
#[tokio::test]
async fn no_default_schema_refuses_unknown_paths() {
    init_tracing();
    let known = Schema::builder_for_path("/known").name("known").build().unwrap();
    let set = SchemaSet::new(vec![known], false).unwrap();
    assert!(!set.uses_default_schema());
    let fw = framework(set).await;
    fw.create().for_path("/known", Vec::new()).await.unwrap();
    assert_violation(fw.create().for_path("/unknown", Vec::new()).await, "/unknown", "", "no schema");
    assert_violation(fw.get_data().for_path("/unknown").await, "/unknown", "", "no schema");
    let viewer = plain(&fw).await;
    assert!(!exists(&viewer, "/unknown").await);
    viewer.close().await;
    fw.close().await;
}

/// Bad schema JSON, and bad schemas, are typed errors (InvalidArgument saying what and where),
/// never a panic.
#[test]
fn bad_schema_json_is_a_typed_error() {
    let cases: &[(&str, &str)] = &[
        ("[", "does not parse"),
        (r#"{"name": "x", "path": "/x"}"#, "array"),
        ("[1]", "not an object"),
        (r#"[{"path": "/x"}]"#, "no \"name\""),
        (r#"[{"name": "x"}]"#, "no \"path\""),
        (r#"[{"name": "x", "path": "/x", "ephemeral": "sometimes"}]"#, "\"ephemeral\" must be one of"),
        (r#"[{"name": "x", "path": "/x", "watched": 3}]"#, "\"watched\" must be one of"),
        (r#"[{"name": "x", "path": "/x", "schemaValidator": "nope"}]"#, "no data validator named \"nope\""),
        (r#"[{"name": "x", "path": "/x(", "isRegex": true}]"#, "does not compile"),
        (r#"[{"name": "x", "path": "/x", "metadata": [1]}]"#, "\"metadata\" must be an object"),
        (r#"[{"name": "", "path": "/x"}]"#, "name cannot be empty"),
    ];
    for (json, says) in cases {
        match SchemaSetLoader::from_json(json, &validators()) {
            Err(CuratorError::InvalidArgument { reason, .. }) => assert!(reason.contains(says), "{json}: {reason}"),
            other => panic!("{json}: {other:?}"),
        }
    }
    let twice = r#"[{"name": "x", "path": "/x"}, {"name": "x", "path": "/y"}]"#;
    let loader = SchemaSetLoader::from_json(twice, &HashMap::new()).unwrap();
    assert!(
        matches!(loader.into_schema_set(true), Err(CuratorError::InvalidArgument { reason, .. }) if reason.contains("name"))
    );
    let same_path = vec![
        Schema::builder_for_path("/x").name("one").build().unwrap(),
        Schema::builder_for_path("/x/").name("two").build().unwrap(),
    ];
    assert!(
        matches!(SchemaSet::new(same_path, true), Err(CuratorError::InvalidArgument { reason, .. }) if reason.contains("path"))
    );
}

/// The recipe builders (Curator's builderForRecipeParent and builderForRecipe): the parent is
/// neither ephemeral nor sequential; its children must be all three of ephemeral, sequential and
/// watched; a parent with regex characters is matched literally.
#[test]
fn recipe_schemas() {
    let parent = Schema::builder_for_recipe_parent("/locks/a.b").name("parent").build().unwrap();
    let children = Schema::builder_for_recipe("/locks/a.b").name("children").build().unwrap();
    assert!(parent.matches("/locks/a.b") && !parent.matches("/locks/a.b/x"));
    assert!(children.matches("/locks/a.b/lock-0000000001"));
    assert!(!children.matches("/locks/aXb/lock-0000000001"), "the dot of the parent is literal");
    assert!(parent.validate_create("/locks/a.b", CreateMode::Persistent, b"").is_ok());
    assert!(parent.validate_create("/locks/a.b", CreateMode::Ephemeral, b"").is_err());
    let child = "/locks/a.b/lock-";
    assert!(children.validate_create(child, CreateMode::EphemeralSequential, b"").is_ok());
    assert!(children.validate_create(child, CreateMode::PersistentSequential, b"").is_err());
    assert!(children.validate_watch(child, false).is_err() && children.validate_watch(child, true).is_ok());
    assert!(children.validate_delete(child).is_ok());
    let set = SchemaSet::new(vec![parent, children], true).unwrap();
    assert!(set.to_documentation().contains("Name: children"));
    assert_eq!(set.schema_for("/elsewhere").unwrap().name(), curator_core::DEFAULT_SCHEMA_NAME);
    assert!(CuratorError::SchemaViolation { path: "/x".into(), schema: "s".into(), reason: "r".into() }.is_permanent());
}

/// Awaits `fut` within the test deadline: a hang fails the test naming `what`.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    let deadline = curator_test::Timing::new().deadline();
    tokio::time::timeout(deadline, fut).await.unwrap_or_else(|_| panic!("{what}: no answer within the deadline"))
}

/// What a recipe's call gave, short: `Ok`, or the error.
fn brief<T>(result: &Result<T, CuratorError>) -> String {
    result.as_ref().map_or_else(|e| format!("{e:?}"), |_| "Ok".to_string())
}

/// Whether `result` is the violation of a set without a default schema at a path under `base`.
fn unmatched_under<T: std::fmt::Debug>(result: &Result<T, CuratorError>, base: &str) -> bool {
    matches!(result, Err(CuratorError::SchemaViolation { path, schema, .. }) if path.starts_with(base) && schema.is_empty())
}

/// Issue 40 item 9: the recipes' writes go through the framework's schema set as the fluent
/// builders' do. With a set that has no default schema, a recipe on a path no schema matches is
/// refused with the `SchemaViolation` a plain create there gets, and its node is never sent: a
/// lock, a semaphore (both kinds), the write half of a read/write lock, a latch, a kept node, a
/// double barrier, a queue and an atomic. Before, the locks, the latch, the barrier and the
/// atomic wrote on the raw session: the latch reported ready and the mutex was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipes_are_checked_against_the_schema_set() {
    use curator_recipes::{
        DistributedAtomicLong, DistributedDoubleBarrier, InterProcessMutex, InterProcessReadWriteLock,
        InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LeaderLatch, PersistentNode, SimpleDistributedQueue,
    };
    init_tracing();
    let known = Schema::builder_for_path("/known").name("known").build().unwrap();
    let fw = framework(SchemaSet::new(vec![known], false).unwrap()).await;
    assert_violation(fw.create().for_path("/recipes/plain", Vec::new()).await, "/recipes/plain", "", "no schema");

    let mut refused: Vec<(&str, bool, String)> = Vec::new();
    let mut note =
        |what: &'static str, base: &str, ok: bool, seen: String| refused.push((what, ok, format!("{base}: {seen}")));

    let base = "/recipes/mutex";
    let r = within("mutex", InterProcessMutex::new(&fw, base).unwrap().acquire()).await;
    note("InterProcessMutex", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/rw";
    let rw = InterProcessReadWriteLock::new(&fw, base).unwrap();
    let r = within("write lock", rw.write_lock().acquire()).await;
    note("InterProcessReadWriteLock", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/semaphore";
    let r = within("semaphore", InterProcessSemaphoreV2::new(&fw, base, 2).unwrap().acquire()).await;
    note("InterProcessSemaphoreV2", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/semaphore-mutex";
    let r = within("semaphore mutex", InterProcessSemaphoreMutex::new(&fw, base).unwrap().acquire()).await;
    note("InterProcessSemaphoreMutex", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/latch";
    let latch = LeaderLatch::new(&fw, base, "a").unwrap();
    latch.start().unwrap();
    let r = within("latch", latch.ready()).await;
    note("LeaderLatch", base, unmatched_under(&r, base) && !latch.has_leadership(), brief(&r));
    latch.close().await;
    let base = "/recipes/node";
    let node = PersistentNode::builder(&fw, base).build().unwrap();
    node.start().unwrap();
    let r = within("node", node.ready()).await;
    note("PersistentNode", base, unmatched_under(&r, base), brief(&r));
    node.close().await;
    let base = "/recipes/barrier";
    let mut barrier = DistributedDoubleBarrier::new(&fw, base, 1).unwrap();
    let r = within("barrier", barrier.enter()).await;
    note("DistributedDoubleBarrier", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/queue";
    let r = within("queue", SimpleDistributedQueue::new(&fw, base).unwrap().offer(b"x".to_vec())).await;
    note("SimpleDistributedQueue", base, unmatched_under(&r, base), brief(&r));
    let base = "/recipes/atomic";
    let atomic = DistributedAtomicLong::new(&fw, base, curator_core::RetryNTimes::new(0, Duration::ZERO)).unwrap();
    let r = within("atomic", atomic.increment()).await;
    note("DistributedAtomicLong", base, unmatched_under(&r, base), brief(&r));

    let viewer = plain(&fw).await;
    let mut wrong = Vec::new();
    for (what, ok, seen) in refused {
        let base = seen.split(':').next().unwrap_or_default().to_string();
        if !ok || exists(&viewer, &base).await {
            wrong.push(format!("{what} at {seen} (made: {})", exists(&viewer, &base).await));
        }
    }
    assert!(wrong.is_empty(), "recipes not refused by the schema set, or that sent their node:\n{}", wrong.join("\n"));
    viewer.close().await;
    fw.close().await;
}

/// TestInterProcessMutex.testWithSchema: a set without a default schema whose only schemas are
/// the recipe builders' for the lock's path (the parent, and its ephemeral sequential children)
/// lets the mutex acquire and release.
#[tokio::test]
async fn curator_mutex_with_recipe_schemas() {
    init_tracing();
    let root = Schema::builder_for_recipe_parent("/foo").name("root").build().unwrap();
    let locks = Schema::builder_for_recipe("/foo").name("locks").build().unwrap();
    let fw = framework(SchemaSet::new(vec![root, locks], false).unwrap()).await;
    let mutex = curator_recipes::InterProcessMutex::new(&fw, "/foo").unwrap();
    let guard = mutex.acquire().await.expect("acquired under the recipe schemas");
    guard.release().await.expect("released");
    // A node of the wrong kind under the lock is still refused.
    assert_violation(fw.create().for_path("/foo/lock-", Vec::new()).await, "/foo/lock-", "locks", "ephemeral");
    fw.close().await;
}
