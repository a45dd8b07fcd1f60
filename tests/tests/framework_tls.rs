//! TLS to ZooKeeper's secure client port (issue 18), against real servers in the TLS mode of
//! `TestingServer` (keystores made by `keytool`, once per test binary): connecting with the CA,
//! with a client certificate, a recipe over TLS, and the faults (a wrong CA, a plain client on
//! the secure port, a missing client certificate) that must give a typed error quickly and no
//! reconnect storm. Each fault is tried with every policy combination at once, one thread each
//! (the attempt counter counts one thread's events), so that their 3 s windows overlap.
//!
//! Curator has no TLS test of its own (its TLS is ZooKeeper's client configuration); these
//! follow the list. Without a JDK (`keytool`) the servers do not start and every test
//! here fails: none skips.

use std::future::Future;
use std::time::{Duration, Instant};

use curator_core::{CuratorError, CuratorFramework, CuratorFrameworkBuilder, ErrorPolicy, TlsConfig};
use curator_recipes::InterProcessMutex;
use curator_test::{TestingServer, TestingTls, Timing, TlsFiles};
use tests::attempts::count_attempts;
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::{builder, connected, unique_path};

/// The waits the fault tests give (`block_until_connected`'s and the framework's connection
/// timeout, which an operation waits out for a session): the test deadline. A fatal error must
/// reach the caller in under half of it: the failure it guards against is a wait that runs out
/// (before the session manager asked the servers why an attempt failed), and a loaded machine
/// gets the other half (a fixed 3 s bound failed at 3.2 s on one).
fn fault_wait() -> Duration {
    Timing::new().deadline()
}

async fn tls_server(tls: TestingTls) -> TestingServer {
    TestingServer::builder().tls(tls).start().await.expect("a TLS TestingServer (needs the JDK's keytool)")
}

fn files(server: &TestingServer) -> &TlsFiles {
    server.tls_files().expect("TLS mode")
}

fn secure(server: &TestingServer) -> String {
    server.secure_connect_string().expect("TLS mode")
}

fn ca(server: &TestingServer) -> TlsConfig {
    TlsConfig::from_ca_file(files(server).ca_pem()).expect("CA PEM")
}

/// Starts `b` and checks that waiting for a connection, and then an operation, fail with a
/// [`CuratorError::Tls`] within half of [`fault_wait`] each, that the manager goes on retrying with backoff
/// (more than one attempt, and few), and returns the error.
async fn fails_with_tls_quickly(b: CuratorFrameworkBuilder, what: &str) -> CuratorError {
    let (attempts, _guard) = count_attempts();
    let wait = fault_wait();
    let fw = b.connection_timeout(wait).build().expect("valid options");
    fw.start().unwrap();
    let started = Instant::now();
    let err = fw.block_until_connected(wait).await.expect_err("must not connect");
    assert!(matches!(err, CuratorError::Tls { .. }), "{what}: block_until_connected gave {err:?}");
    assert!(started.elapsed() < wait / 2, "{what}: took {:?} of {wait:?}", started.elapsed());
    assert!(!err.is_retryable(), "{what}: a TLS error is not retried by operations");
    let path = unique_path("tls-fault");
    let asked = Instant::now();
    let op = fw.create().for_path(&path, vec![]).await.expect_err("must fail");
    assert!(matches!(op, CuratorError::Tls { .. }), "{what}: the operation gave {op:?}");
    assert!(asked.elapsed() < wait / 2, "{what}: the operation took {:?} of {wait:?}", asked.elapsed());
    // Over 3 s the backoff (200 ms doubling) allows about 4 attempts; a storm would be hundreds.
    let before = attempts.get();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = attempts.get() - before;
    assert!(attempts.get() >= 2, "{what}: the manager keeps retrying a TLS failure ({} attempts)", attempts.get());
    assert!(during <= 6, "{what}: {during} attempts in 3 s: a reconnect storm");
    fw.close().await;
    err
}

/// Runs `check` for every combination of [`COMBINATIONS`] at the same time, each on its own
/// thread with a current-thread runtime (what [`count_attempts`] needs), and panics with the
/// first failure once all have ended.
async fn each_combination<F, Fut>(check: F)
where
    F: Fn(ErrorPolicy, Retry) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()>,
{
    let all = tokio::task::spawn_blocking(move || {
        std::thread::scope(|scope| {
            let threads: Vec<_> = COMBINATIONS
                .iter()
                .map(|&(policy, retry)| {
                    let check = &check;
                    scope.spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                        runtime.block_on(check(policy, retry))
                    })
                })
                .collect();
            let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
            results.into_iter().collect::<Result<Vec<()>, _>>()
        })
    });
    if let Err(panic) = all.await.expect("the combinations' threads") {
        std::panic::resume_unwind(panic);
    }
}

/// The CA's certificate is all a client needs when the server asks for no client certificate.
#[tokio::test(flavor = "current_thread")]
async fn connects_over_tls_with_the_ca() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    let fw = connected(builder(&secure(&server)).tls(ca(&server))).await;
    let path = unique_path("tls");
    fw.create().for_path(&path, b"secret".to_vec()).await.unwrap();
    assert_eq!(fw.get_data().for_path(&path).await.unwrap(), b"secret");
    // The same node through the plain port: it is one server.
    let plain = connected(builder(&server.connect_string())).await;
    assert_eq!(plain.get_data().for_path(&path).await.unwrap(), b"secret");
    fw.close().await;
    plain.close().await;
}

/// With `ssl.clientAuth=need`, the client's certificate gets it in; without one, a typed error
/// at once (before the diagnosis: `NotConnected` after 30 s).
#[tokio::test(flavor = "current_thread")]
async fn connects_with_a_client_certificate_when_the_server_requires_one() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new().need_client_auth(true)).await;
    let f = files(&server);
    let tls = ca(&server).with_identity_files(f.client_cert_pem(), f.client_key_pem()).expect("client PEM");
    let fw = connected(builder(&secure(&server)).tls(tls)).await;
    let path = unique_path("mtls");
    fw.create().for_path(&path, vec![]).await.unwrap();
    assert!(fw.check_exists().for_path(&path).await.unwrap().is_some());
    fw.close().await;

    // Without one, the server refuses the client: a typed error, quickly.
    let (connect, ca) = (secure(&server), ca(&server));
    each_combination(move |policy, retry| {
        let b = with_policies(builder(&connect).tls(ca.clone()), policy, retry);
        async move {
            let err = fails_with_tls_quickly(b, &format!("no client certificate, {policy:?}/{retry:?}")).await;
            assert!(err.to_string().contains("certificate"), "{err}");
        }
    })
    .await;
}

/// A client that trusts a CA that did not sign the server's certificate.
/// Before the session manager asked the servers why an attempt failed, `block_until_connected`
/// waited out its whole 30 s and gave `NotConnected` ("no server answered with a session"),
/// and operations waited out the connection timeout.
#[tokio::test(flavor = "current_thread")]
async fn wrong_ca_is_a_tls_error_quickly() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    let other = TlsConfig::from_ca_file(files(&server).other_ca_pem()).unwrap();
    let connect = secure(&server);
    each_combination(move |policy, retry| {
        let b = with_policies(builder(&connect).tls(other.clone()), policy, retry);
        let connect = connect.clone();
        async move {
            let err = fails_with_tls_quickly(b, &format!("wrong CA, {policy:?}/{retry:?}")).await;
            let text = err.to_string();
            assert!(text.contains("not signed by a CA this client trusts"), "{text}");
            assert!(text.contains(&connect), "names the server: {text}");
        }
    })
    .await;
}

/// A client without TLS on the secure port.
/// Before the session manager asked the servers why an attempt failed, `block_until_connected`
/// waited out its whole 30 s and gave `NotConnected` ("no server answered with a session"),
/// and operations waited out the connection timeout.
#[tokio::test(flavor = "current_thread")]
async fn plain_client_on_the_secure_port_is_a_tls_error_quickly() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    let connect = secure(&server);
    each_combination(move |policy, retry| {
        let b = with_policies(builder(&connect), policy, retry);
        async move {
            let err = fails_with_tls_quickly(b, &format!("plain client, {policy:?}/{retry:?}")).await;
            assert!(err.to_string().contains("speaks TLS"), "{err}");
        }
    })
    .await;
}

/// Forwards `127.0.0.1:<port>` to `upstream`, except that its first `silent` connections are
/// accepted and never answered (kept open until the test ends): a server too loaded to answer
/// the first attempt and the first TLS probe, answering afterwards.
async fn slow_at_first(upstream: String, silent: usize) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            if held.len() < silent {
                held.push(socket);
                continue;
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut socket, &mut server).await;
                }
            });
        }
    });
    (addr.to_string(), task)
}

/// A plain client on the secure port of a server that answers neither the first attempt nor
/// the first TLS probe (the probe gives up after its own timeout: inconclusive) still gets the
/// typed TLS error once the server answers. Before, the manager asked the servers only after
/// the first failure of a streak (and again only while TLS was the cause found), so one
/// inconclusive probe left every later failure undiagnosed: `block_until_connected` gave
/// `NotConnected` after its whole wait, as this test's full run on a loaded machine (load 11 on
/// 2 cores) did for `plain_client_on_the_secure_port_is_a_tls_error_quickly`.
#[tokio::test(flavor = "current_thread")]
async fn a_probe_that_got_no_answer_is_asked_again() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    // The first attempt's connection and the first probe's.
    let (connect, forwarder) = slow_at_first(secure(&server), 2).await;
    let wait = fault_wait();
    let fw = builder(&connect).connection_timeout(wait).build().expect("valid options");
    fw.start().unwrap();
    let err = fw.block_until_connected(wait).await.expect_err("must not connect");
    assert!(matches!(err, CuratorError::Tls { .. }), "block_until_connected gave {err:?}");
    assert!(err.to_string().contains("speaks TLS"), "{err}");
    fw.close().await;
    forwarder.abort();
}

/// A TLS client on the plain port.
/// Before the session manager asked the servers why an attempt failed, `block_until_connected`
/// waited out its whole 30 s and gave `NotConnected` ("no server answered with a session"),
/// and operations waited out the connection timeout.
#[tokio::test(flavor = "current_thread")]
async fn tls_client_on_the_plain_port_is_a_tls_error_quickly() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    let (connect, ca) = (server.connect_string(), ca(&server));
    each_combination(move |policy, retry| {
        let b = with_policies(builder(&connect).tls(ca.clone()), policy, retry);
        async move {
            let err = fails_with_tls_quickly(b, &format!("TLS client on the plain port, {policy:?}/{retry:?}")).await;
            assert!(err.to_string().contains("plain client port"), "{err}");
        }
    })
    .await;
}

/// The TLS servers of one test binary get copies of one generated set of keystores (made once:
/// `keytool` and `java` take over ten seconds a set), each in its own directory.
#[tokio::test(flavor = "current_thread")]
async fn tls_servers_share_one_generated_set_of_keystores() {
    tests::init_tracing();
    let (a, b) = tokio::join!(tls_server(TestingTls::new()), tls_server(TestingTls::new().need_client_auth(true)));
    let (fa, fb) = (files(&a), files(&b));
    assert_ne!(fa.dir(), fb.dir(), "each server has its own copy");
    for (x, y) in [(fa.ca_pem(), fb.ca_pem()), (fa.server_keystore(), fb.server_keystore())] {
        assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap(), "{} and {}", x.display(), y.display());
    }
    // And each copy works: a client trusting the CA of `a` reaches `b`'s secure port.
    let f = fa;
    let tls = TlsConfig::from_ca_file(f.ca_pem()).unwrap().with_identity_files(f.client_cert_pem(), f.client_key_pem());
    let fw = connected(builder(&secure(&b)).tls(tls.expect("client PEM"))).await;
    assert!(fw.check_exists().for_path("/").await.unwrap().is_some());
    fw.close().await;
}

/// A recipe over TLS: two sessions take turns on an `InterProcessMutex`.
#[tokio::test(flavor = "current_thread")]
async fn a_lock_works_over_tls() {
    tests::init_tracing();
    let server = tls_server(TestingTls::new()).await;
    let a = connected(builder(&secure(&server)).tls(ca(&server))).await;
    let b = connected(builder(&secure(&server)).tls(ca(&server))).await;
    let path = unique_path("tls-lock");
    let lock_a = InterProcessMutex::new(&a, &path).unwrap();
    let lock_b = InterProcessMutex::new(&b, &path).unwrap();
    let held = lock_a.acquire().await.unwrap();
    assert!(lock_b.acquire_timeout(Duration::from_millis(200)).await.unwrap().is_none(), "held by a");
    let token = held.fencing_token();
    held.release().await.unwrap();
    let next = lock_b.acquire_timeout(Timing::new().deadline()).await.unwrap().expect("b gets it after a");
    assert!(next.fencing_token() > token, "tokens grow over TLS as elsewhere");
    next.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// PEM without a certificate, and a CA file that does not exist, are typed errors, not panics.
#[test]
fn bad_pem_is_a_typed_error_at_build() {
    let err = CuratorFramework::builder()
        .connect_string("127.0.0.1:2281")
        .tls(TlsConfig::new("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
        .build()
        .expect_err("bad PEM");
    assert!(matches!(err, CuratorError::Tls { .. }), "{err:?}");
    let err = CuratorFramework::builder().connect_string("127.0.0.1:2281").tls(TlsConfig::new("")).build().unwrap_err();
    assert!(matches!(err, CuratorError::Tls { .. }), "{err:?}");
    let missing = TlsConfig::from_ca_file("/nonexistent/ca.pem").unwrap_err();
    assert!(matches!(missing, CuratorError::Tls { .. }), "{missing:?}");
}
