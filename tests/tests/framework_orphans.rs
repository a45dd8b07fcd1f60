//! Protected creates whose outcome stays unknown: the cleanup of their node does not depend on
//! the user's retry policy or on the create's future still being alive. Each fault runs with a
//! short retry policy (`RetryNTimes(1, 100ms)`) under both error policies.

use std::future::IntoFuture;
use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{CreateMode, CuratorError, ErrorPolicy};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::{builder, children, client, connected, init_tracing, unique_path};

/// How long the server is unreachable: longer than the short policy's whole run
/// (two connection timeouts and a pause), shorter than the session timeout.
const OUTAGE: Duration = Duration::from_secs(4);

async fn short_policy_framework(proxy: &ChaosProxy, policy: ErrorPolicy) -> curator_core::CuratorFramework {
    connected(
        builder(&proxy.connect_string())
            .retry_policy(RetryNTimes::new(1, Duration::from_millis(100)))
            .session_timeout(Duration::from_secs(20))
            .connection_timeout(Duration::from_secs(1))
            .connection_state_error_policy(policy),
    )
    .await
}

/// Issue 11, "orphans that wedge the lock", at the framework level: the create is applied, its
/// reply lost, and the server stays unreachable past the retry policy. Before the fix, the
/// cleanup ran under the same short policy, gave up during the outage, and the node stayed for
/// as long as the session lived.
async fn failed_create_during_outage(policy: ErrorPolicy, drop_future: bool) {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = short_policy_framework(&proxy, policy).await;
    let observer = client(&server.connect_string()).await;
    let parent = unique_path("orphan");
    fw.create().for_path(&parent, Vec::new()).await.unwrap();

    proxy.set_reject(true);
    proxy.swallow_next_reply();
    let create = fw
        .create()
        .with_protection()
        .with_mode(CreateMode::EphemeralSequential)
        .for_path(&format!("{parent}/member-"), b"x".to_vec());
    if drop_future {
        let mut create = std::pin::pin!(create.into_future());
        tokio::select! {
            _ = &mut create => panic!("the create cannot finish while the server is unreachable"),
            swallowed = eventually(Timing::new().deadline(), || async { !proxy.swallow_pending() }) => {
                assert!(swallowed, "the create's reply was swallowed");
            }
        }
    } else {
        let err = create.await.expect_err("no connection for the retry");
        // The policy gave up before the create's name could be looked for: its outcome is
        // unknown, and said so (docs/architecture.md section 4.4).
        assert!(matches!(err, CuratorError::OutcomeUnknown { .. }), "outcome unknown: {err}");
        assert!(!proxy.swallow_pending(), "the create's reply was swallowed");
    }
    // The swallow is taken when the proxy reads the request, before the server applies it.
    assert!(
        eventually(Timing::new().deadline(), || async { children(&observer, &parent).await.len() == 1 }).await,
        "the create was applied: {:?}",
        children(&observer, &parent).await
    );
    // The scenario: the outage lasts past the short policy's whole run.
    tokio::time::sleep(OUTAGE).await;
    proxy.set_reject(false);
    proxy.pass();
    assert!(
        eventually(Timing::new().deadline(), || async { children(&observer, &parent).await.is_empty() }).await,
        "the orphan was left on the live session: {:?}",
        children(&observer, &parent).await
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_create_leaves_no_orphan_standard_policy() {
    failed_create_during_outage(ErrorPolicy::Standard, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_create_leaves_no_orphan_session_policy() {
    failed_create_during_outage(ErrorPolicy::Session, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_create_leaves_no_orphan_standard_policy() {
    failed_create_during_outage(ErrorPolicy::Standard, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_create_leaves_no_orphan_session_policy() {
    failed_create_during_outage(ErrorPolicy::Session, true).await;
}

/// A persistent protected node outlives its session: its cleanup carries over to the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_orphan_is_deleted_after_the_outage() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = short_policy_framework(&proxy, ErrorPolicy::Standard).await;
    let observer = client(&server.connect_string()).await;
    let parent = unique_path("orphan-persistent");
    fw.create().for_path(&parent, Vec::new()).await.unwrap();
    proxy.set_reject(true);
    proxy.swallow_next_reply();
    let err: CuratorError = fw
        .create()
        .with_protection()
        .with_mode(CreateMode::PersistentSequential)
        .for_path(&format!("{parent}/job-"), Vec::new())
        .await
        .expect_err("no connection for the retry");
    assert!(matches!(err, CuratorError::OutcomeUnknown { .. }), "{err}");
    assert_eq!(children(&observer, &parent).await.len(), 1, "the create was applied");
    tokio::time::sleep(OUTAGE).await;
    proxy.set_reject(false);
    assert!(
        eventually(Timing::new().deadline(), || async { children(&observer, &parent).await.is_empty() }).await,
        "the persistent orphan was left: {:?}",
        children(&observer, &parent).await
    );
    fw.close().await;
    observer.close().await;
}
