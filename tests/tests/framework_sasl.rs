//! SASL DIGEST-MD5 (issue 18), against real servers in the SASL mode of `TestingServer` (a JAAS
//! file with `DigestLoginModule` users): the right password connects and can protect a node
//! with a `sasl` ACL that another user cannot read; a wrong password, or no SASL where the
//! server requires it, is a typed `AuthFailed` at once, after which the framework stops
//! connecting (ZooKeeper's AUTH_FAILED is final, as in its Java client): no reconnect storm.
//!
//! Curator has no SASL test of its own (SASL is ZooKeeper's client configuration); these
//! follow the list.

use std::time::{Duration, Instant};

use curator_core::zk::{Acl, AuthId, Permission};
use curator_core::{CuratorError, CuratorFrameworkBuilder};
use curator_test::{TestingServer, Timing};
use tests::attempts::count_attempts;
use tests::policies::{with_policies, COMBINATIONS};
use tests::{builder, connected, packets_received, unique_path};

/// The waits the fault tests give (`block_until_connected`'s and the framework's connection
/// timeout, which an operation waits out for a session): the test deadline. A refused credential
/// must reach the caller in under half of it: the failure it guards against is a wait that runs
/// out, and a loaded machine gets the other half.
fn fault_wait() -> Duration {
    Timing::new().deadline()
}

async fn sasl_server(required: bool) -> TestingServer {
    TestingServer::builder()
        .sasl_digest_users(&[("alice", "alice-secret"), ("bob", "bob-secret")])
        .sasl_required(required)
        .start()
        .await
        .expect("a SASL TestingServer")
}

/// Starts `b` and checks that waiting for a connection and an operation fail with
/// [`CuratorError::AuthFailed`] within half of [`fault_wait`], that the framework made one attempt and no
/// more, and that the server hears nothing more from it.
async fn fails_with_auth_failed(server: &TestingServer, b: CuratorFrameworkBuilder, what: &str) -> CuratorError {
    let (attempts, _guard) = count_attempts();
    let wait = fault_wait();
    let fw = b.connection_timeout(wait).build().expect("valid options");
    fw.start().unwrap();
    let started = Instant::now();
    let err = fw.block_until_connected(wait).await.expect_err("must not connect");
    assert!(matches!(err, CuratorError::AuthFailed { .. }), "{what}: block_until_connected gave {err:?}");
    assert!(started.elapsed() < wait / 2, "{what}: took {:?} of {wait:?}", started.elapsed());
    assert!(!err.is_retryable(), "{what}");
    let asked = Instant::now();
    let op = fw.get_data().for_path(&unique_path("sasl-fault")).await.expect_err("must fail");
    assert!(matches!(op, CuratorError::AuthFailed { .. }), "{what}: the operation gave {op:?}");
    assert!(asked.elapsed() < wait / 2, "{what}: the operation took {:?} of {wait:?}", asked.elapsed());
    // What reading the count costs (the `mntr` itself), then the count after 2 s of quiet.
    let first = packets_received(&server.connect_string()).await;
    let packets = packets_received(&server.connect_string()).await;
    let cost = packets - first;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(attempts.get(), 1, "{what}: the framework stops connecting after AUTH_FAILED");
    let after = packets_received(&server.connect_string()).await;
    assert_eq!(after - packets, cost, "{what}: the server hears nothing more from the framework");
    fw.close().await;
    err
}

/// The right password connects; a node with a `sasl:alice` ACL is alice's alone: bob (with his
/// own right password) and an unauthenticated session get `NoAuth`.
#[tokio::test(flavor = "current_thread")]
async fn right_password_connects_and_sasl_acl_keeps_other_users_out() {
    tests::init_tracing();
    let server = sasl_server(false).await;
    let alice = connected(builder(&server.connect_string()).sasl_digest("alice", "alice-secret")).await;
    let bob = connected(builder(&server.connect_string()).sasl_digest("bob", "bob-secret")).await;
    let path = unique_path("sasl");
    alice
        .create()
        .with_acl(vec![Acl::new(Permission::ALL, AuthId::new("sasl", "alice"))])
        .for_path(&path, b"for alice".to_vec())
        .await
        .unwrap();
    assert_eq!(alice.get_data().for_path(&path).await.unwrap(), b"for alice");
    let denied = bob.get_data().for_path(&path).await.expect_err("bob may not read");
    assert!(matches!(denied, CuratorError::NoAuth { .. }), "{denied:?}");
    let anonymous = connected(builder(&server.connect_string())).await;
    let denied = anonymous.get_data().for_path(&path).await.expect_err("nobody may read");
    assert!(matches!(denied, CuratorError::NoAuth { .. }), "{denied:?}");
    let acl = alice.get_acl().for_path(&path).await.unwrap();
    assert_eq!(acl.0, vec![Acl::new(Permission::ALL, AuthId::new("sasl", "alice"))]);
    for fw in [alice, bob, anonymous] {
        fw.close().await;
    }
}

/// A wrong password. Before AUTH_FAILED was final, the session manager retried it with backoff
/// for ever and `block_until_connected` gave `NotConnected` ("authentication failed") after its
/// whole 30 s.
#[tokio::test(flavor = "current_thread")]
async fn wrong_password_is_auth_failed_at_once_and_final() {
    tests::init_tracing();
    let server = sasl_server(false).await;
    for (policy, retry) in COMBINATIONS {
        let b = with_policies(builder(&server.connect_string()).sasl_digest("alice", "wrong"), policy, retry);
        let err = fails_with_auth_failed(&server, b, &format!("wrong password, {policy:?}/{retry:?}")).await;
        assert!(err.to_string().contains("\"alice\""), "names the user: {err}");
    }
    // The server still serves the right password.
    let alice = connected(builder(&server.connect_string()).sasl_digest("alice", "alice-secret")).await;
    alice.close().await;
}

/// No SASL where the server requires it (`sessionRequireClientSASLAuth`): the same AUTH_FAILED.
#[tokio::test(flavor = "current_thread")]
async fn no_sasl_where_the_server_requires_it_is_auth_failed() {
    tests::init_tracing();
    let server = sasl_server(true).await;
    for (policy, retry) in COMBINATIONS {
        let b = with_policies(builder(&server.connect_string()), policy, retry);
        let err = fails_with_auth_failed(&server, b, &format!("no SASL, {policy:?}/{retry:?}")).await;
        assert!(err.to_string().contains("sasl_digest"), "says what to configure: {err}");
    }
    let alice = connected(builder(&server.connect_string()).sasl_digest("alice", "alice-secret")).await;
    alice.close().await;
}
