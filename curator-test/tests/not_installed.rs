//! ZOOKEEPER_CLASSPATH pointing at nothing gives TestingError::NotInstalled; pointing at the
//! wrong jars gives a start error that quotes the server's log. Its own test binary with one
//! test, because it changes the process environment.

use curator_test::{TestingCluster, TestingError, TestingServer, CLASSPATH_ENV};

#[tokio::test]
async fn classpath_pointing_at_nothing_is_not_installed() {
    // The only test in this binary: nothing else reads the environment concurrently.
    std::env::set_var(CLASSPATH_ENV, "/nonexistent/zookeeper.jar:/nonexistent/lib/*");
    let err = TestingServer::start().await.unwrap_err();
    assert!(matches!(err, TestingError::NotInstalled), "{err:?}");
    assert_eq!(
        err.to_string(),
        "ZooKeeper not found (looked for /usr/share/java/zookeeper.jar; set ZOOKEEPER_CLASSPATH or run \
         `apt-get install -y zookeeper default-jre-headless`)"
    );
    let err = TestingCluster::start(3).await.unwrap_err();
    assert!(matches!(err, TestingError::NotInstalled), "{err:?}");
    assert!(matches!(TestingServer::try_shared(), Err(TestingError::NotInstalled)));

    // Jars that exist but hold no ZooKeeper: java starts and exits; the error quotes its log.
    std::env::set_var(CLASSPATH_ENV, "/usr/share/java/slf4j-api.jar");
    if !std::path::Path::new("/usr/share/java/slf4j-api.jar").exists() {
        return;
    }
    let err = TestingServer::start().await.unwrap_err();
    match &err {
        TestingError::Exited { log_tail, .. } => {
            assert!(log_tail.contains("QuorumPeerMain"), "log tail does not explain: {log_tail}")
        }
        other => panic!("expected Exited, got {other:?}"),
    }
    assert!(err.to_string().contains("exited while starting"), "{err}");
}
