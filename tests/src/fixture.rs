//! Logging, unique paths, frameworks with the test timings, and the server fixture.

use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{
    ConnectionState, ConnectionStateEvent, ConnectionStateStream, CuratorFramework, CuratorFrameworkBuilder,
};
use curator_test::{ChaosProxy, TestingServer, Timing};

/// Logs to the test's captured output (`warn` unless `RUST_LOG` says otherwise). Safe to call
/// from every test.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// A top-level path no other test uses: `/{name}-{16 random hex digits}`.
pub fn unique_path(name: &str) -> String {
    format!("/{name}-{:016x}", fastrand::u64(..))
}

/// The bound on what a test expects to happen at once (a refusal, a typed error, a call that
/// must neither wait for a connection nor retry) on `fw`: the connection timeout `fw` was built
/// with, which is what a wait for a connection would take. A time bound in a test is relative to
/// a timeout the test configured, never a fixed number of seconds: a loaded machine gets the
/// same room, scaled with `CURATOR_TEST_TIMING_MULTIPLE`, and the wait the test guards against
/// still fails it.
pub fn at_once(fw: &CuratorFramework) -> Duration {
    fw.connection_timeout()
}

/// A builder for `connect_string` with the test timings (session 4 s, connection 2 s, scaled by
/// `CURATOR_TEST_TIMING_MULTIPLE`) and a retry policy that outlasts a short cut.
pub fn builder(connect_string: &str) -> CuratorFrameworkBuilder {
    let timing = Timing::new();
    CuratorFramework::builder()
        .connect_string(connect_string)
        .session_timeout(timing.session_timeout())
        .connection_timeout(timing.connection_timeout())
        .retry_policy(RetryNTimes::new(20, Duration::from_millis(100)))
}

/// Builds, starts and waits (up to the test deadline) for the first connection.
pub async fn connected(b: CuratorFrameworkBuilder) -> CuratorFramework {
    let fw = b.build().expect("valid options");
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    fw
}

/// A started, connected framework on `connect_string` with [`builder`]'s options.
pub async fn client(connect_string: &str) -> CuratorFramework {
    connected(builder(connect_string)).await
}

/// The server a [`Fixture`] runs against.
enum Server {
    /// The binary's shared server ([`TestingServer::shared`]).
    Shared(&'static TestingServer),
    /// A server of the test's own, stopped when the fixture is dropped.
    Own(Box<TestingServer>),
}

/// A ZooKeeper server and a started, connected framework on it.
///
/// [`shared`](Fixture::shared) uses the binary's shared server (tests work under their own
/// [`unique_path`]); [`own`](Fixture::own) starts a server for tests that stop, pause, expire or
/// count something on it. The `_with` variants adjust the framework's builder.
pub struct Fixture {
    server: Server,
    /// The framework, connected to [`connect_string`](Fixture::connect_string).
    pub fw: CuratorFramework,
}

impl Fixture {
    /// The shared server and a framework with [`builder`]'s options.
    pub async fn shared() -> Fixture {
        Fixture::shared_with(|b| b).await
    }

    /// The shared server and a framework whose builder `adjust` changed.
    pub async fn shared_with(adjust: impl FnOnce(CuratorFrameworkBuilder) -> CuratorFrameworkBuilder) -> Fixture {
        let server = TestingServer::shared();
        let fw = connected(adjust(builder(&server.connect_string()))).await;
        Fixture { server: Server::Shared(server), fw }
    }

    /// A server of this test's own and a framework with [`builder`]'s options.
    pub async fn own() -> Fixture {
        Fixture::own_with(|b| b).await
    }

    /// A server of this test's own and a framework whose builder `adjust` changed.
    pub async fn own_with(adjust: impl FnOnce(CuratorFrameworkBuilder) -> CuratorFrameworkBuilder) -> Fixture {
        let server = TestingServer::start().await.expect("start a TestingServer");
        let fw = connected(adjust(builder(&server.connect_string()))).await;
        Fixture { server: Server::Own(Box::new(server)), fw }
    }

    /// The server.
    pub fn server(&self) -> &TestingServer {
        match &self.server {
            Server::Shared(s) => s,
            Server::Own(s) => s,
        }
    }

    /// The server's connect string.
    pub fn connect_string(&self) -> String {
        self.server().connect_string()
    }

    /// Another started, connected framework on the same server, with [`builder`]'s options.
    pub async fn client(&self) -> CuratorFramework {
        client(&self.connect_string()).await
    }

    /// Closes the framework (the server stops when the fixture is dropped, if it is its own).
    pub async fn close(self) {
        self.fw.close().await;
    }
}

/// A framework through a fresh proxy in front of the shared server, started and connected, with
/// a stream of its transitions from the start.
pub async fn proxied_with_states() -> (ChaosProxy, CuratorFramework, ConnectionStateStream) {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = builder(&proxy.connect_string()).build().expect("valid options");
    let states = fw.connection_state_stream();
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    (proxy, fw, states)
}

/// Reads transitions until one has `state` (and passes `check`), within the test deadline;
/// returns all read so far.
pub async fn wait_for(
    stream: &mut ConnectionStateStream,
    state: ConnectionState,
    check: impl Fn(&ConnectionStateEvent) -> bool,
) -> Vec<ConnectionStateEvent> {
    let mut seen = Vec::new();
    let deadline = Timing::new().deadline();
    let found = tokio::time::timeout(deadline, async {
        while let Some(event) = stream.next().await {
            let done = event.state == state && check(&event);
            seen.push(event);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "never saw {state:?}; saw {:?}",
        seen.iter().map(|e| e.state).collect::<Vec<_>>()
    );
    seen
}
