//! Curator framework calls that users porting from Java look for: `checkExists()
//! .creatingParentContainersIfNeeded()`, `createContainers(path)`, `getConfig()` (watched too),
//! and removing a one-shot watch from the server. Each test names the Curator test it follows.

use std::time::Duration;

use curator_core::CuratorFramework;
use curator_core::RetryNTimes;
use curator_test::{eventually, four_letter_word, TestingCluster, TestingServer, Timing};
use tests::{builder, client, unique_path};

/// A server that reaps empty containers every 100 ms (as Curator's tests run theirs), so that a
/// test can tell a container from a persistent node: only a container goes once its last child
/// does. (A Stat shows no difference: the server hides the container marker from clients.)
async fn reaping_server() -> TestingServer {
    TestingServer::builder().container_check_interval(Duration::from_millis(100)).start().await.unwrap()
}

/// Creates a child under `path` and deletes it, so that the server reaps `path` if it is a
/// container (it deletes only containers that have had children).
async fn use_once(fw: &CuratorFramework, path: &str) {
    let child = format!("{path}/child");
    fw.create().for_path(&child, vec![]).await.unwrap();
    fw.delete().for_path(&child).await.unwrap();
}

async fn gone(fw: &CuratorFramework, path: &str) -> bool {
    let fw = fw.clone();
    eventually(Timing::new().deadline(), || {
        let fw = fw.clone();
        async move { fw.check_exists().for_path(path).await.unwrap().is_none() }
    })
    .await
}

/// `check_exists().creating_parent_containers_if_needed()` makes the missing parents as
/// containers and reports the node itself as missing; follows Curator's
/// TestFramework.testCreateParentContainers (which uses `checkExists()` this way).
#[tokio::test]
async fn check_exists_creates_parent_containers() {
    let server = reaping_server().await;
    let fw = client(&server.connect_string()).await;
    let base = unique_path("exists-parents");
    let leaf = format!("{base}/one/two/three");
    let stat = fw.check_exists().creating_parent_containers_if_needed().for_path(&leaf).await.unwrap();
    assert!(stat.is_none(), "the node itself is not created");
    let two = format!("{base}/one/two");
    assert!(fw.check_exists().for_path(&two).await.unwrap().is_some(), "the parents are");
    // Once used and empty, each parent goes: they are containers.
    use_once(&fw, &two).await;
    assert!(gone(&fw, &base).await, "{base} was not a container, or not reaped");
    fw.close().await;
}

/// `create_containers(path)` makes the path and its ancestors as containers, leaves existing
/// nodes alone, and works under a namespace; follows Curator's
/// TestFramework.testCreateContainersWithNamespace and testCreateContainersUsingNamespace.
#[tokio::test]
async fn create_containers_makes_the_path_and_its_ancestors() {
    let server = reaping_server().await;
    let fw = client(&server.connect_string()).await;
    let base = unique_path("containers");
    fw.create().for_path(&base, b"keep".to_vec()).await.unwrap();
    let path = format!("{base}/a/b");
    fw.create_containers(&path).await.unwrap();
    fw.create_containers(&path).await.unwrap();
    use_once(&fw, &path).await;
    assert!(gone(&fw, &format!("{base}/a")).await, "the path and its new ancestor are containers");
    assert_eq!(fw.get_data().for_path(&base).await.unwrap(), b"keep", "an existing node stays as it was");

    let namespaced = fw.using_namespace(Some("ns")).unwrap();
    namespaced.create_containers("/x/y").await.unwrap();
    assert!(fw.check_exists().for_path("/ns/x/y").await.unwrap().is_some(), "made under the namespace");
    use_once(&namespaced, "/x/y").await;
    assert!(gone(&fw, "/ns/x").await);
    assert!(matches!(fw.create_containers("bad").await, Err(curator_core::CuratorError::InvalidPath { .. })));
    fw.close().await;
}

/// Follows Curator's TestFrameworkEdges.testCreateContainersForBadConnect: the server is down
/// when `create_containers` is called and comes back while it waits for a connection.
#[tokio::test]
async fn create_containers_waits_for_a_server_that_comes_back() {
    let timing = Timing::new();
    let mut server = TestingServer::start().await.unwrap();
    server.stop().await.unwrap();
    let fw = builder(&server.connect_string())
        .connection_timeout(timing.deadline())
        .retry_policy(RetryNTimes::new(10, timing.connection_timeout() / 4))
        .build()
        .unwrap();
    fw.start().unwrap();
    let (created, restarted) = futures::join!(fw.create_containers("/this/does/not/exist"), server.restart());
    restarted.unwrap();
    created.unwrap();
    assert!(fw.check_exists().for_path("/this/does/not/exist").await.unwrap().is_some());
    fw.close().await;
}

/// `get_config()` reads the ensemble's configuration, with or without a watch; follows Curator's
/// TestReconfiguration.testApiPermutations (the getConfig part: plain, watched, with a stat).
#[tokio::test]
async fn get_config_reads_the_ensemble() {
    let cluster = TestingCluster::start(3).await.unwrap();
    let fw = client(&cluster.connect_string()).await;
    let (data, stat) = fw.get_config().for_ensemble().await.unwrap();
    let config = String::from_utf8_lossy(&data);
    for i in 1..=3 {
        assert!(config.contains(&format!("server.{i}=")), "server.{i} in {config:?}");
    }
    let (watched, watched_stat) = fw.get_config().watched().for_ensemble().await.unwrap();
    assert_eq!(watched, data);
    assert_eq!(watched_stat.version, stat.version);
    fw.close().await;
}

/// Total watches the server holds, from `wchs`.
async fn server_watches(server: &TestingServer) -> usize {
    let answer = four_letter_word(&server.connect_string(), "wchs").await.unwrap();
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no watch count in {answer:?}"))
}

/// A one-shot watch returned by a read is removed from the server when it is removed (or
/// dropped); follows Curator's TestRemoveWatches.testRemoveCuratorWatch (set a watch, remove
/// it, the server no longer holds it).
#[tokio::test]
async fn removed_watch_leaves_the_server() {
    let server = TestingServer::start().await.unwrap();
    let fw = client(&server.connect_string()).await;
    let path = unique_path("remove-watch");
    fw.create().for_path(&path, vec![]).await.unwrap();
    // The framework keeps a watch of its own (the session manager's).
    let before = server_watches(&server).await;
    let (_, _, data_watch) = fw.get_data().for_path_and_watch(&path).await.unwrap();
    let (_, exists_watch) = fw.check_exists().for_path_and_watch(&format!("{path}/missing")).await.unwrap();
    assert!(
        eventually(Timing::new().deadline(), || async { server_watches(&server).await == before + 2 }).await,
        "two watches set: {} (before: {before})",
        server_watches(&server).await
    );
    data_watch.remove();
    drop(exists_watch);
    assert!(
        eventually(Timing::new().deadline(), || async { server_watches(&server).await == before }).await,
        "watches left on the server: {} (before: {before})",
        server_watches(&server).await
    );
    fw.close().await;
}
