//! Migrations (issue 29 item 2): `MigrationManager` applies each migration of a set once, across
//! processes, under the set's lock, recording each in a `meta-` node with its hash. The scenarios
//! of Curator's `TestMigrationManager` (curator-x-async, package `...x.async.migrations`), each
//! named in its doc comment; then 4 frameworks (4 sessions, standing in for 4 processes)
//! migrating at once, and a session expired in the middle of a migration, under both error
//! policies and both retry policies.
//!
//! Curator's test models are JSON documents under `/test/it` written with a `ModeledFramework`;
//! here the same JSON is written as bytes. Its `debugCount` (how many times a transaction was
//! built) is read here from [`MigrationReport::applied`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{AppliedMigrations, Migration, MigrationManager, MigrationOp, MigrationReport, MigrationSet};
use curator_test::{expire_session, TestingServer, Timing};
use tests::policies::{framework, Retry, COMBINATIONS};
use tests::{children, init_tracing, unique_path, Fixture};
use tokio::sync::oneshot;

const V1: &[u8] = br#"{"name":"Test"}"#;
const V2: &[u8] = br#"{"name":"Test 2","age":10}"#;
const V3: &[u8] = br#"{"firstName":"One","lastName":"Two","age":30}"#;

/// A test's own paths under one unique base: the managers' lock and meta paths, and `data`
/// under which the migrations write.
struct Paths {
    lock: String,
    meta: String,
    data: String,
}

impl Paths {
    fn new(name: &str) -> Self {
        let base = unique_path(name);
        Self { lock: format!("{base}/locks"), meta: format!("{base}/metadata"), data: format!("{base}/data") }
    }

    fn manager(&self, fw: &CuratorFramework) -> MigrationManager {
        MigrationManager::new(fw, &self.lock, &self.meta, Timing::new().deadline()).unwrap()
    }

    /// `rel` under the data path.
    fn at(&self, rel: &str) -> String {
        format!("{}{rel}", self.data)
    }

    /// The meta nodes of set `id`.
    async fn meta_nodes(&self, fw: &CuratorFramework, id: &str) -> Vec<String> {
        children(fw, &format!("{}/{id}", self.meta)).await
    }
}

/// Curator's v1opA and v1opB, v2op, v3op: create the model's parent and the model at V1, then
/// update it to V2, then to V3.
fn model_migrations(p: &Paths) -> [Migration; 3] {
    let parent = p.at("/test");
    let it = p.at("/test/it");
    [
        Migration::new(
            "v1",
            vec![
                MigrationOp::create(&p.data, Vec::new()),
                MigrationOp::create(&parent, Vec::new()),
                MigrationOp::create(&it, V1),
            ],
        ),
        Migration::new("v2", vec![MigrationOp::set_data(&it, V2)]),
        Migration::new("v3", vec![MigrationOp::set_data(&it, V3)]),
    ]
}

async fn read(fw: &CuratorFramework, path: &str) -> Vec<u8> {
    fw.get_data().for_path(path).await.unwrap()
}

/// Follows `TestMigrationManager.testBasic`: a set of three migrations is applied in order, and a
/// second migrate does nothing.
#[tokio::test]
async fn basic() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-basic");
    let manager = p.manager(&fx.fw);
    let set = MigrationSet::new("1", model_migrations(&p).to_vec()).unwrap();

    let report = manager.migrate(&set).await.unwrap();
    assert_eq!(report.applied, ["v1", "v2", "v3"]);
    assert_eq!(report.already_applied, 0);
    assert_eq!(read(&fx.fw, &p.at("/test/it")).await, V3);
    assert_eq!(p.meta_nodes(&fx.fw, "1").await.len(), 3);

    let again = manager.migrate(&set).await.unwrap();
    assert!(again.applied.is_empty(), "a second migrate applied {:?}", again.applied);
    assert_eq!(again.already_applied, 3);
    fx.close().await;
}

/// Follows `TestMigrationManager.testStaged`: the set grows by one migration at a time; each
/// migrate applies only the new one.
#[tokio::test]
async fn staged() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-staged");
    let manager = p.manager(&fx.fw);
    let [m1, m2, m3] = model_migrations(&p);
    let it = p.at("/test/it");

    let report = manager.migrate(&MigrationSet::new("1", vec![m1.clone()]).unwrap()).await.unwrap();
    assert_eq!(report.applied, ["v1"]);
    assert_eq!(read(&fx.fw, &it).await, V1);

    let report = manager.migrate(&MigrationSet::new("1", vec![m1.clone(), m2.clone()]).unwrap()).await.unwrap();
    assert_eq!((report.applied.as_slice(), report.already_applied), (&["v2".to_string()][..], 1));
    assert_eq!(read(&fx.fw, &it).await, V2);

    let report = manager.migrate(&MigrationSet::new("1", vec![m1, m2, m3]).unwrap()).await.unwrap();
    assert_eq!((report.applied.as_slice(), report.already_applied), (&["v3".to_string()][..], 2));
    assert_eq!(read(&fx.fw, &it).await, V3);
    let mut meta = p.meta_nodes(&fx.fw, "1").await;
    meta.sort();
    assert_eq!(meta, ["meta-0000000000", "meta-0000000001", "meta-0000000002"]);
    fx.close().await;
}

/// Follows `TestMigrationManager.testDocExample`: an initial migration of five creates, then a
/// second that creates one node and deletes another.
#[tokio::test]
async fn doc_example() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-doc");
    let manager = p.manager(&fx.fw);
    let (parent, main) = (p.at("/parent"), p.at("/main"));
    let initial = Migration::new(
        "initial",
        vec![
            MigrationOp::create(&p.data, Vec::new()),
            MigrationOp::create(&parent, Vec::new()),
            MigrationOp::create(&format!("{parent}/one"), Vec::new()),
            MigrationOp::create(&format!("{parent}/two"), Vec::new()),
            MigrationOp::create(&format!("{parent}/three"), Vec::new()),
            MigrationOp::create(&main, b"hey".to_vec()),
        ],
    );
    manager.migrate(&MigrationSet::new("main", vec![initial.clone()]).unwrap()).await.unwrap();
    assert!(fx.fw.check_exists().for_path(&format!("{parent}/three")).await.unwrap().is_some());
    assert_eq!(read(&fx.fw, &main).await, b"hey");

    let newer =
        Migration::new("newer", vec![MigrationOp::create(&p.at("/new"), Vec::new()), MigrationOp::delete(&main)]);
    let report = manager.migrate(&MigrationSet::new("main", vec![initial, newer]).unwrap()).await.unwrap();
    assert_eq!(report.applied, ["newer"]);
    assert!(fx.fw.check_exists().for_path(&main).await.unwrap().is_none());
    assert!(fx.fw.check_exists().for_path(&p.at("/new")).await.unwrap().is_some());
    fx.close().await;
}

/// Applies `first`, then migrates a set whose only migration is `changed`: the change is
/// refused with [`CuratorError::BadData`] on the set's meta path, and nothing is written.
async fn changed_is_refused(name: &str, first: Vec<MigrationOp>, changed: Vec<MigrationOp>, p: &Paths) {
    let fx = Fixture::shared().await;
    let manager = p.manager(&fx.fw);
    manager.migrate(&MigrationSet::new("1", vec![Migration::new("m", first)]).unwrap()).await.unwrap();
    let err = manager.migrate(&MigrationSet::new("1", vec![Migration::new("m", changed)]).unwrap()).await.unwrap_err();
    let meta = format!("{}/1", p.meta);
    assert!(matches!(&err, CuratorError::BadData { path, .. } if *path == meta), "{name}: {err:?}");
    assert_eq!(p.meta_nodes(&fx.fw, "1").await.len(), 1, "{name}");
    fx.close().await;
}

/// Follows `TestMigrationManager.testChecksumDataError`: an applied migration whose data changed
/// is refused (Curator's `MigrationException`).
#[tokio::test]
async fn checksum_data_error() {
    init_tracing();
    let p = Paths::new("migrate-sum-data");
    let (test, bar) = (p.at(""), p.at("/bar"));
    let first = vec![MigrationOp::create(&test, Vec::new()), MigrationOp::create(&bar, b"first".to_vec())];
    let changed = vec![MigrationOp::create(&test, Vec::new()), MigrationOp::create(&bar, b"second".to_vec())];
    changed_is_refused("data", first, changed, &p).await;
    let fw = Fixture::shared().await;
    assert_eq!(read(&fw.fw, &bar).await, b"first");
    fw.close().await;
}

/// Follows `TestMigrationManager.testChecksumPathError`: an applied migration whose path changed
/// is refused.
#[tokio::test]
async fn checksum_path_error() {
    init_tracing();
    let p = Paths::new("migrate-sum-path");
    let first = vec![MigrationOp::create(&p.data, Vec::new()), MigrationOp::create(&p.at("/bar"), Vec::new())];
    let changed = vec![MigrationOp::create(&p.data, Vec::new()), MigrationOp::create(&p.at("/baz"), Vec::new())];
    changed_is_refused("path", first, changed, &p).await;
}

/// Not in Curator's test (its `filter` has the check): more migrations applied than the set
/// has is refused with [`CuratorError::BadData`].
#[tokio::test]
async fn more_applied_than_the_set_has() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-shrunk");
    let manager = p.manager(&fx.fw);
    let [m1, m2, _] = model_migrations(&p);
    manager.migrate(&MigrationSet::new("1", vec![m1.clone(), m2]).unwrap()).await.unwrap();
    let err = manager.migrate(&MigrationSet::new("1", vec![m1]).unwrap()).await.unwrap_err();
    assert!(matches!(err, CuratorError::BadData { .. }), "{err:?}");
    fx.close().await;
}

/// Migrates a set whose last operation fails for want of a parent: [`CuratorError::NoNode`],
/// and nothing of the set written, no meta node either.
async fn all_or_nothing(name: &str, migrations: Vec<Migration>, p: &Paths, probe: &str) {
    let fx = Fixture::shared().await;
    let manager = p.manager(&fx.fw);
    let err = manager.migrate(&MigrationSet::new("1", migrations).unwrap()).await.unwrap_err();
    assert!(matches!(err, CuratorError::NoNode { .. }), "{name}: {err:?}");
    assert!(fx.fw.check_exists().for_path(probe).await.unwrap().is_none(), "{name}: {probe} written");
    assert!(p.meta_nodes(&fx.fw, "1").await.is_empty(), "{name}: a meta node was written");
    fx.close().await;
}

/// Follows `TestMigrationManager.testPartialApplyForBadOps`: of two migrations, the second
/// fails; the first is not applied either (all pending migrations go in one transaction).
#[tokio::test]
async fn partial_apply_for_bad_ops() {
    init_tracing();
    let p = Paths::new("migrate-partial");
    let test = unique_path("migrate-partial-test");
    let m1 = Migration::new("m1", vec![MigrationOp::create(&test, b"something".to_vec())]);
    let m2 = Migration::new("m2", vec![MigrationOp::create(&p.at("/a/b/c"), Vec::new())]);
    all_or_nothing("partial", vec![m1, m2], &p, &test).await;
}

/// Follows `TestMigrationManager.testTransactionForBadOps`: one migration whose second operation
/// fails writes nothing.
#[tokio::test]
async fn transaction_for_bad_ops() {
    init_tracing();
    let p = Paths::new("migrate-bad-ops");
    let test = unique_path("migrate-bad-ops-test");
    let m = Migration::new(
        "m",
        vec![MigrationOp::create(&test, b"something".to_vec()), MigrationOp::create(&p.at("/a/b/c/d"), Vec::new())],
    );
    all_or_nothing("transaction", vec![m], &p, &test).await;
}

/// A manager whose filter, on its first call only, says so on `entered` and waits for `go`
/// (Curator's test overrides `filter` with a latch for this).
fn pausing_manager(p: &Paths, fw: &CuratorFramework) -> (MigrationManager, oneshot::Receiver<()>, oneshot::Sender<()>) {
    let (entered_tx, entered) = oneshot::channel();
    let (go, go_rx) = oneshot::channel::<()>();
    let pause = Arc::new(Mutex::new(Some((entered_tx, go_rx))));
    let manager = p.manager(fw).with_filter(move |applied: AppliedMigrations| {
        let pause = pause.lock().unwrap().take();
        async move {
            if let Some((entered, go)) = pause {
                let _ = entered.send(());
                let _ = go.await;
            }
            applied.unapplied()
        }
    });
    (manager, entered, go)
}

fn bar_set(p: &Paths) -> MigrationSet {
    let ops = vec![MigrationOp::create(&p.data, Vec::new()), MigrationOp::create(&p.at("/bar"), b"first".to_vec())];
    MigrationSet::new("1", vec![Migration::new("m", ops)]).unwrap()
}

/// Follows `TestMigrationManager.testConcurrency1`: while one migrate holds the set's lock,
/// another manager with a short wait gives up with [`CuratorError::Timeout`] on the lock's path
/// (Curator's `AsyncWrappers.TimeoutException`); the first then completes.
#[tokio::test]
async fn concurrency_lock_wait_times_out() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-conc1");
    let (manager, entered, go) = pausing_manager(&p, &fx.fw);
    let set = bar_set(&p);
    let first = tokio::spawn({
        let set = set.clone();
        async move { manager.migrate(&set).await }
    });
    tokio::time::timeout(Timing::new().deadline(), entered).await.unwrap().unwrap();

    let impatient = MigrationManager::new(&fx.fw, &p.lock, &p.meta, Duration::from_millis(200)).unwrap();
    let err = impatient.migrate(&set).await.unwrap_err();
    let lock = format!("{}/1", p.lock);
    assert!(matches!(&err, CuratorError::Timeout { path } if *path == lock), "{err:?}");

    go.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap().applied, ["m"]);
    assert_eq!(read(&fx.fw, &p.at("/bar")).await, b"first");
    fx.close().await;
}

/// Follows `TestMigrationManager.testConcurrency2`: a second migrate on the same manager waits
/// while the first holds the lock, then finds nothing to do (applied once in all).
#[tokio::test]
async fn concurrency_second_waits_then_does_nothing() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-conc2");
    let (manager, entered, go) = pausing_manager(&p, &fx.fw);
    let set = bar_set(&p);
    let run = |manager: MigrationManager, set: MigrationSet| tokio::spawn(async move { manager.migrate(&set).await });
    let first = run(manager.clone(), set.clone());
    tokio::time::timeout(Timing::new().deadline(), entered).await.unwrap().unwrap();

    let mut second = run(manager, set);
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut second).await.is_err(), "the second did not wait");

    go.send(()).unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(read(&fx.fw, &p.at("/bar")).await, b"first");
    let second = tokio::time::timeout(Timing::new().deadline(), second).await.unwrap().unwrap().unwrap();
    assert_eq!((first.applied.len(), second.applied.len()), (1, 0));
    assert_eq!(second.already_applied, 1);
    fx.close().await;
}

/// A set of two migrations, each creating a persistent sequential node under `<data>/runs`: the
/// number of children afterwards counts how often they ran.
fn counting_set(p: &Paths) -> MigrationSet {
    let runs = p.at("/runs");
    let first = Migration::new(
        "first",
        vec![
            MigrationOp::create(&p.data, Vec::new()),
            MigrationOp::create(&runs, Vec::new()),
            MigrationOp::create_with_mode(&format!("{runs}/first-"), Vec::new(), CreateMode::PersistentSequential),
        ],
    );
    let second = Migration::new(
        "second",
        vec![MigrationOp::create_with_mode(&format!("{runs}/second-"), Vec::new(), CreateMode::PersistentSequential)],
    );
    MigrationSet::new("counted", vec![first, second]).unwrap()
}

/// The issue's "done when": 4 frameworks (4 sessions) migrate the same set at once; each
/// migration runs exactly once, and exactly one of them applied it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_apply_once() {
    init_tracing();
    let server = TestingServer::shared();
    let p = Paths::new("migrate-four");
    let mut fws = Vec::new();
    for _ in 0..4 {
        fws.push(tests::client(&server.connect_string()).await);
    }
    let set = counting_set(&p);
    let runs = fws.iter().map(|fw| {
        let (manager, set) = (p.manager(fw), set.clone());
        tokio::spawn(async move { manager.migrate(&set).await })
    });
    let reports: Vec<MigrationReport> =
        futures::future::join_all(runs).await.into_iter().map(|r| r.unwrap().unwrap()).collect();
    let appliers: Vec<&MigrationReport> = reports.iter().filter(|r| !r.applied.is_empty()).collect();
    assert_eq!(appliers.len(), 1, "{reports:?}");
    assert_eq!(appliers[0].applied, ["first", "second"]);
    assert!(reports.iter().filter(|r| r.applied.is_empty()).all(|r| r.already_applied == 2), "{reports:?}");
    let mut made = children(&fws[0], &p.at("/runs")).await;
    made.sort();
    assert_eq!(made, ["first-0000000000", "second-0000000001"]);
    assert_eq!(p.meta_nodes(&fws[0], "counted").await.len(), 2);
    for fw in fws {
        fw.close().await;
    }
}

/// A session expired in the middle of a migration (after the applied migrations were read,
/// before the commit), under both error policies and both retry policies: that migrate fails
/// with nothing applied, and migrating again (the caller retries) applies the set once; another
/// process then finds nothing to do. Curator has no such test; the expiry follows
/// `TestInterProcessMutexBase.testKilledSession`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expired_during_migration() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let cs = server.connect_string();
    for (policy, retry) in COMBINATIONS {
        let what = format!("{policy:?} {retry:?}");
        let p = Paths::new("migrate-expired");
        let fw = framework(&cs, policy, retry).await;
        let other = framework(&cs, ErrorPolicy::Standard, Retry::Default).await;
        let expire_once = Arc::new(Mutex::new(Some((fw.clone(), cs.clone()))));
        let manager = p.manager(&fw).with_filter(move |applied: AppliedMigrations| {
            let target = expire_once.lock().unwrap().take();
            async move {
                if let Some((fw, cs)) = target {
                    let info = fw.session().await?.client().session().clone();
                    expire_session(&cs, &info).await.expect("expire the session");
                }
                applied.unapplied()
            }
        });
        let set = counting_set(&p);

        let err = manager.migrate(&set).await.unwrap_err();
        tracing::info!(%what, ?err, "the interrupted migrate");
        // The guard refuses the commit: the lock's lease was made on the expired session.
        assert!(
            matches!(err, CuratorError::OwnNodeLost { ref path, .. } if path.starts_with(&p.lock))
                || matches!(err, CuratorError::SessionExpired { .. }),
            "{what}: {err:?}"
        );
        assert!(children(&other, &p.at("/runs")).await.is_empty(), "{what}: written after the expiry");
        assert!(p.meta_nodes(&other, "counted").await.is_empty(), "{what}: recorded after the expiry");

        let deadline = tokio::time::Instant::now() + Timing::new().deadline();
        let report = loop {
            match manager.migrate(&set).await {
                Ok(report) => break report,
                Err(err) => {
                    assert!(tokio::time::Instant::now() < deadline, "{what}: migrate kept failing: {err:?}");
                    tracing::debug!(%what, ?err, "migrate again");
                }
            }
        };
        assert_eq!(report.applied, ["first", "second"], "{what}");
        assert!(other_finds_nothing(&p, &other, &set).await, "{what}");
        let mut made = children(&other, &p.at("/runs")).await;
        made.sort();
        assert_eq!(made, ["first-0000000000", "second-0000000001"], "{what}");
        fw.close().await;
        other.close().await;
    }
}

async fn other_finds_nothing(p: &Paths, other: &CuratorFramework, set: &MigrationSet) -> bool {
    let report = p.manager(other).migrate(set).await.unwrap();
    report.applied.is_empty() && report.already_applied == 2
}

/// A filter replaces the default one (Curator's overridable `filter`): here one that lets an
/// applied migration change, and one that refuses to migrate with its own error.
#[tokio::test]
async fn filter_replaces_the_default() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-filter");
    let [m1, m2, _] = model_migrations(&p);
    p.manager(&fx.fw).migrate(&MigrationSet::new("1", vec![m1]).unwrap()).await.unwrap();

    let changed = Migration::new("v1 rewritten", vec![MigrationOp::create(&p.at("/elsewhere"), Vec::new())]);
    let lenient = p.manager(&fx.fw).with_filter(|applied: AppliedMigrations| async move {
        Ok(applied.set().migrations()[applied.hashes().len()..].to_vec())
    });
    let set = MigrationSet::new("1", vec![changed, m2]).unwrap();
    assert_eq!(lenient.migrate(&set).await.unwrap().applied, ["v2"]);
    assert_eq!(read(&fx.fw, &p.at("/test/it")).await, V2);

    let refusing = p.manager(&fx.fw).with_filter(|applied: AppliedMigrations| async move {
        Err(CuratorError::IllegalState(format!("not now: {}", applied.meta_path())))
    });
    let err = refusing.migrate(&set).await.unwrap_err();
    assert!(matches!(err, CuratorError::IllegalState(_)), "{err:?}");
    fx.close().await;
}

/// Bad input gets a typed error: a set id that is not one node name, a bad manager path, and an
/// operation a transaction refuses (a TTL create) leaves nothing written.
#[tokio::test]
async fn bad_input_is_typed() {
    init_tracing();
    let fx = Fixture::shared().await;
    for id in ["", "a/b", ".", "..", "x\u{0}y"] {
        let err = MigrationSet::new(id, Vec::new()).unwrap_err();
        assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{id:?}: {err:?}");
    }
    let err = MigrationManager::new(&fx.fw, "no-slash", "/meta", Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, CuratorError::InvalidPath { .. }), "{err:?}");
    let err = MigrationManager::new(&fx.fw, "/locks", "/meta/", Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, CuratorError::InvalidPath { .. }), "{err:?}");

    let p = Paths::new("migrate-bad");
    let ttl =
        Migration::new("ttl", vec![MigrationOp::create_with_mode(&p.data, Vec::new(), CreateMode::PersistentWithTtl)]);
    let err = p.manager(&fx.fw).migrate(&MigrationSet::new("1", vec![ttl]).unwrap()).await.unwrap_err();
    assert!(matches!(err, CuratorError::InvalidArgument { .. }), "{err:?}");
    assert!(fx.fw.check_exists().for_path(&p.data).await.unwrap().is_none());
    assert!(p.meta_nodes(&fx.fw, "1").await.is_empty());
    fx.close().await;
}

/// Not in Curator's test: a migrate dropped while it holds the set's lock (here paused in its
/// filter) applies nothing and frees the lock, so another process migrates the set within its
/// wait.
#[tokio::test]
async fn dropped_migrate_frees_the_lock() {
    init_tracing();
    let fx = Fixture::shared().await;
    let p = Paths::new("migrate-dropped");
    let (manager, entered, _go) = pausing_manager(&p, &fx.fw);
    let set = bar_set(&p);
    let first = tokio::spawn({
        let set = set.clone();
        async move { manager.migrate(&set).await }
    });
    tokio::time::timeout(Timing::new().deadline(), entered).await.unwrap().unwrap();
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());

    let other = fx.client().await;
    let report = p.manager(&other).migrate(&set).await.unwrap();
    assert_eq!(report.applied, ["m"]);
    assert_eq!(p.meta_nodes(&other, "1").await.len(), 1);
    other.close().await;
    fx.close().await;
}
