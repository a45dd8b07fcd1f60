//! [`TestingServer`]: one standalone ZooKeeper server in a child java process.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use tempfile::TempDir;

use crate::error::TestingError;
use crate::node::{Node, ServerSettings, START_DEADLINE};
use crate::process;
use crate::sasl::SaslSettings;
use crate::tls::{TestingTls, TlsFiles};

/// How many times a fresh start is retried with new ports after a port clash.
pub(crate) const START_ATTEMPTS: usize = 3;

/// One standalone ZooKeeper server (Debian's ZooKeeper 3.8 jars) in a child java process, on a
/// free `127.0.0.1` port, with its own temporary data directory.
///
/// The server runs with `tickTime=500` (sessions from 1 s to 10 s are allowed), `forceSync=no`,
/// TTL and container nodes enabled (`extendedTypesEnabled=true`) and every four-letter word
/// allowed. Change these with [`TestingServer::builder`].
///
/// Dropping the server kills the process (SIGKILL) and deletes its directory. A process also
/// never outlives the test binary: an `atexit` hook kills what is left at exit, and a watchdog
/// kills java within about a second when the binary dies abruptly.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut server = curator_test::TestingServer::start().await?;
/// let client = zookeeper_client::Client::connect(&server.connect_string()).await?;
/// client.create("/x", b"1", &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())).await?;
/// drop(client);
/// server.restart().await?; // same port, same data
/// let client = zookeeper_client::Client::connect(&server.connect_string()).await?;
/// assert_eq!(client.get_data("/x").await?.0, b"1");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestingServer {
    // Declared before `dir`: the process dies before its directory is removed.
    node: Node,
    classpath: String,
    dir: Option<TempDir>,
    /// In TLS mode: the secure client port and the generated files.
    tls: Option<(u16, TlsFiles)>,
}

/// Options for a [`TestingServer`]; see [`TestingServer::builder`].
#[derive(Clone, Debug, Default)]
pub struct TestingServerBuilder {
    settings: ServerSettings,
    tls: Option<TestingTls>,
    sasl: Option<SaslSettings>,
}

impl TestingServerBuilder {
    /// ZooKeeper's `tickTime` (default 500 ms). The server allows session timeouts from 2 to 20
    /// ticks unless [`min_session_timeout`](Self::min_session_timeout) or
    /// [`max_session_timeout`](Self::max_session_timeout) say otherwise.
    pub fn tick_time(mut self, tick: Duration) -> Self {
        self.settings.tick_time = tick;
        self
    }

    /// Whether the server fsyncs its transaction log (default `false`: faster, and data still
    /// survives a killed process because it is written to the OS before a reply).
    pub fn force_sync(mut self, force: bool) -> Self {
        self.settings.force_sync = force;
        self
    }

    /// How often the server deletes empty container nodes (the `znode.container.checkIntervalMs`
    /// system property; 60 s by default). Curator's tests run with a short interval so that
    /// containers go within a test.
    pub fn container_check_interval(mut self, every: Duration) -> Self {
        self.settings.container_check_interval = Some(every);
        self
    }

    /// The smallest session timeout the server grants (`minSessionTimeout`).
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.settings.min_session_timeout = Some(timeout);
        self
    }

    /// The largest session timeout the server grants (`maxSessionTimeout`).
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.settings.max_session_timeout = Some(timeout);
        self
    }

    /// TLS mode: the server also listens on a secure client port (`secureClientPort`, served by
    /// `NettyServerCnxnFactory`) with keystores generated at start by the JDK's `keytool` (see
    /// [`TestingTls`](crate::TestingTls)). The plain client port stays (readiness checks use it).
    /// [`TestingServer::secure_connect_string`] and [`TestingServer::tls_files`] give what a
    /// client needs. Without a JDK the start fails: it never falls back to plain.
    pub fn tls(mut self, tls: TestingTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// SASL DIGEST-MD5 mode: a JAAS file whose `Server` section lists these users and
    /// passwords (`DigestLoginModule`), and the SASL authentication provider. Sessions without
    /// SASL are still allowed unless [`sasl_required`](Self::sasl_required).
    pub fn sasl_digest_users(mut self, users: &[(&str, &str)]) -> Self {
        let sasl = self.sasl.get_or_insert_with(SaslSettings::default);
        sasl.users.extend(users.iter().map(|(u, p)| (u.to_string(), p.to_string())));
        self
    }

    /// With [`sasl_digest_users`](Self::sasl_digest_users): the server closes sessions that did
    /// not authenticate with SASL (`enforce.auth.enabled`, `enforce.auth.schemes=sasl`,
    /// `sessionRequireClientSASLAuth`).
    pub fn sasl_required(mut self, required: bool) -> Self {
        self.sasl.get_or_insert_with(SaslSettings::default).required = required;
        self
    }

    /// Starts the server and waits (up to 30 s) until it answers `srvr` with a `Mode:` line.
    ///
    /// # Errors
    /// [`TestingError::NotInstalled`] without ZooKeeper or java; [`TestingError::StartTimeout`]
    /// or [`TestingError::Exited`] (both quoting the server's log) when it does not come up.
    pub async fn start(self) -> Result<TestingServer, TestingError> {
        let classpath = process::classpath()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let dir = tempfile::Builder::new()
                .prefix("curator-test-zk-")
                .tempdir()
                .map_err(|e| TestingError::io("create a temporary directory", e))?;
            let port = process::free_port()?;
            let mut settings = self.settings.clone();
            let tls = match &self.tls {
                Some(options) => {
                    // keytool and java take seconds: off the runtime's threads.
                    let tls_dir = dir.path().join("tls");
                    let files = tokio::task::spawn_blocking(move || TlsFiles::generate(&tls_dir))
                        .await
                        .map_err(|e| TestingError::Internal(format!("the keystore generation panicked: {e}")))??;
                    let secure_port = process::free_port()?;
                    settings.extra_cfg.extend(options.cfg_lines(&files, secure_port));
                    Some((secure_port, files))
                }
                None => None,
            };
            if let Some(sasl) = &self.sasl {
                let jaas = sasl.write_jaas(dir.path())?;
                settings.extra_cfg.extend(sasl.cfg_lines());
                settings.extra_properties.push(SaslSettings::jaas_property(&jaas));
            }
            let mut node = Node::create(dir.path(), "server", port, &settings, None)?;
            node.spawn(&classpath)?;
            match node.wait_ready(START_DEADLINE).await {
                Ok(()) => {
                    tracing::info!(port, secure_port = ?tls.as_ref().map(|t| t.0), dir = %dir.path().display(), "TestingServer started");
                    return Ok(TestingServer { node, classpath, dir: Some(dir), tls });
                }
                Err(e) if attempt < START_ATTEMPTS && node.clashed() => {
                    tracing::info!(port, "port clash, retrying on another port: {e}");
                    node.kill().await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

static SHARED: OnceLock<Result<TestingServer, TestingError>> = OnceLock::new();

impl TestingServer {
    /// Starts a server with default settings; see [`TestingServerBuilder::start`].
    pub async fn start() -> Result<TestingServer, TestingError> {
        Self::builder().start().await
    }

    /// Options: tick time, fsync, session timeout bounds.
    pub fn builder() -> TestingServerBuilder {
        TestingServerBuilder::default()
    }

    /// The connect string for clients, `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.node.addr()
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.node.port()
    }

    /// In TLS mode, the connect string of the secure client port, `127.0.0.1:PORT`; `None`
    /// otherwise.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.tls.as_ref().map(|(port, _)| format!("127.0.0.1:{port}"))
    }

    /// In TLS mode, the secure client port.
    pub fn secure_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|(port, _)| *port)
    }

    /// In TLS mode, the generated CA, certificates and keys (PEM for clients).
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref().map(|(_, files)| files)
    }

    /// The server's data directory (`dataDir`).
    pub fn data_dir(&self) -> &Path {
        self.node.data_dir()
    }

    /// The pid of the java process, if it is running.
    pub fn pid(&self) -> Option<u32> {
        self.node.pid()
    }

    /// Whether the process is running (it may still be paused).
    pub fn is_running(&self) -> bool {
        self.node.is_spawned()
    }

    /// Stops the server gracefully: SIGTERM, wait for the exit, SIGKILL after 10 s. Data is kept
    /// for [`restart`](Self::restart). Does nothing if it is not running.
    pub async fn stop(&mut self) -> Result<(), TestingError> {
        self.node.stop().await
    }

    /// Stops the server if it runs, then starts it again on the same port with the same data,
    /// and returns once it answers `srvr` again.
    pub async fn restart(&mut self) -> Result<(), TestingError> {
        self.node.stop().await?;
        self.node.start_again(&self.classpath, START_DEADLINE).await
    }

    /// Kills the server (SIGKILL) and waits until the process is gone. Data is kept for
    /// [`restart`](Self::restart). Does nothing if it is not running.
    pub async fn kill(&mut self) -> Result<(), TestingError> {
        self.node.kill().await
    }

    /// Freezes the server (SIGSTOP) and returns once all its threads are stopped: connections stay
    /// open but nothing is answered, so clients see silence rather than a closed connection, and
    /// sessions expire once the server resumes.
    pub fn pause(&self) -> Result<(), TestingError> {
        self.node.freeze()
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) -> Result<(), TestingError> {
        self.node.signal(libc::SIGCONT)
    }

    /// One server for the whole test binary, started on first use, for ordinary tests that
    /// each work under their own unique path. It is never stopped by a test; it is killed when
    /// the binary exits.
    ///
    /// # Panics
    /// If the server cannot start; use [`try_shared`](Self::try_shared) to get the error instead.
    pub fn shared() -> &'static TestingServer {
        match Self::try_shared() {
            Ok(server) => server,
            Err(e) => panic!("the shared TestingServer could not start: {e}"),
        }
    }

    /// Like [`shared`](Self::shared), but returns the start error (the same one on every call).
    pub fn try_shared() -> Result<&'static TestingServer, &'static TestingError> {
        SHARED.get_or_init(start_shared).as_ref()
    }
}

/// Starts the shared server on its own thread and runtime, so that it can be called from sync
/// code and from inside any runtime alike.
fn start_shared() -> Result<TestingServer, TestingError> {
    let thread = std::thread::Builder::new()
        .name("curator-test-shared-zk".into())
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| TestingError::io("build a runtime for the shared server", e))?;
            runtime.block_on(TestingServer::start())
        })
        .map_err(|e| TestingError::io("spawn the shared server's thread", e))?;
    let mut server =
        thread.join().map_err(|_| TestingError::Internal("the shared server's start thread panicked".into()))??;
    // Statics never drop: remove the directory at exit instead.
    if let Some(dir) = server.dir.take() {
        process::remove_at_exit(dir.keep());
    }
    Ok(server)
}
