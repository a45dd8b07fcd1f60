//! [`CuratorFrameworkBuilder`]: Curator's options, checked when the framework is built.

use std::sync::Arc;
use std::time::Duration;

use crate::acl::{AclProvider, DefaultAclProvider};
use crate::compression::{CompressionProvider, GzipCompressionProvider};
use crate::error::{CuratorError, Result};
pub use crate::limits::{DEFAULT_MAX_REQUEST_LEN, SERVER_MAX_PACKET_LEN};
use crate::retry::{ExponentialBackoffRetry, RetryPolicy};
use crate::sasl::SaslConfig;
use crate::schema_set::SchemaSet;
use crate::state::ErrorPolicy;
use crate::tls::TlsConfig;
#[cfg(doc)]
use crate::CuratorFramework;

/// Default session timeout, as Curator's.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// Default connection timeout, as Curator's.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Default bound on how long [`CuratorFramework::close`] waits for guaranteed deletes.
pub const DEFAULT_MAX_CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Largest data accepted by default: the server's default `jute.maxbuffer` (1 MiB) less room for
/// the request's header and path.
pub const DEFAULT_MAX_DATA_LEN: usize = 1024 * 1024 - 1024;

/// Builds a [`CuratorFramework`] with Curator's options.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// use std::time::Duration;
/// use curator_core::{CuratorFramework, ExponentialBackoffRetry};
///
/// let client = CuratorFramework::builder()
///     .connect_string(server.connect_string())
///     .session_timeout(Duration::from_secs(30))
///     .retry_policy(ExponentialBackoffRetry::new(Duration::from_millis(100), 3))
///     .namespace("my-app")
///     .build()?;
/// client.start()?;
/// client.block_until_connected(Duration::from_secs(10)).await?;
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CuratorFrameworkBuilder {
    connect_string: String,
    session_timeout: Duration,
    connection_timeout: Duration,
    retry_policy: Arc<dyn RetryPolicy>,
    namespace: Option<String>,
    auth: Vec<(String, Vec<u8>)>,
    acl_provider: Arc<dyn AclProvider>,
    default_data: Option<Vec<u8>>,
    can_be_read_only: bool,
    use_container_parents: bool,
    error_policy: ErrorPolicy,
    circuit_breaker: Option<Arc<dyn RetryPolicy>>,
    max_close_wait: Duration,
    max_data_len: usize,
    max_request_len: usize,
    tls: Option<TlsConfig>,
    sasl: Option<SaslConfig>,
    ensemble_tracker: bool,
    metrics_name: Option<String>,
    schema_set: Option<Arc<SchemaSet>>,
    compression_enabled: bool,
    /// `None`: gzip.
    compression_provider: Option<Arc<dyn CompressionProvider>>,
}

impl Default for CuratorFrameworkBuilder {
    fn default() -> Self {
        Self {
            connect_string: String::new(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            retry_policy: Arc::new(ExponentialBackoffRetry::new(Duration::from_millis(100), 5)),
            namespace: None,
            auth: Vec::new(),
            acl_provider: Arc::new(DefaultAclProvider),
            default_data: None,
            can_be_read_only: false,
            use_container_parents: true,
            error_policy: ErrorPolicy::Standard,
            circuit_breaker: None,
            max_close_wait: DEFAULT_MAX_CLOSE_WAIT,
            max_data_len: DEFAULT_MAX_DATA_LEN,
            max_request_len: DEFAULT_MAX_REQUEST_LEN,
            tls: None,
            sasl: None,
            ensemble_tracker: true,
            metrics_name: None,
            schema_set: None,
            compression_enabled: false,
            compression_provider: None,
        }
    }
}

impl CuratorFrameworkBuilder {
    /// The ensemble: `host[:port][,host[:port]...][/chroot]` (the port defaults to 2181; an
    /// IPv6 address goes in brackets). Checked at [`build`](Self::build); a host that does not
    /// resolve is not an error there, only a server that cannot be reached.
    ///
    /// ```
    /// use curator_core::{CuratorError, CuratorFramework};
    ///
    /// let fw = CuratorFramework::builder().connect_string("zk1:2181,zk2:2181,[::1]:2181/my-app").build()?;
    /// let bad = CuratorFramework::builder().connect_string("zk1:99999").build(); // no such port
    /// assert!(matches!(bad, Err(CuratorError::InvalidArgument { .. })));
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn connect_string(mut self, connect_string: impl Into<String>) -> Self {
        self.connect_string = connect_string.into();
        self
    }
    /// The session timeout to ask the server for (it may negotiate another). From 1 ms to
    /// `i32::MAX` ms (ZooKeeper's limit), checked at [`build`](Self::build).
    ///
    /// What it bounds (docs/operations.md section 2): how long the server keeps the session of
    /// a silent client (then its ephemeral nodes, locks and leadership go); the framework
    /// presumes the session lost at 19/20 of the negotiated value after the server last heard
    /// from it (docs/architecture.md section 3.2); each attempt to open a session (one pass
    /// over the servers); and how long an operation made while a session is being opened is
    /// held for it (see [`connection_timeout`](Self::connection_timeout)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use curator_core::CuratorFramework;
    ///
    /// let builder = CuratorFramework::builder().connect_string("127.0.0.1:2181");
    /// let fw = builder.clone().session_timeout(Duration::from_secs(10)).build()?;
    /// assert!(builder.session_timeout(Duration::ZERO).build().is_err()); // 1 ms at least
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }
    /// How long an operation waits for a connection, as Curator's connection timeout. Not
    /// zero; `Duration::MAX` waits without end.
    ///
    /// What it bounds (docs/architecture.md section 3.4): while the session is suspended (the
    /// connection dropped), an operation fails with [`NotConnected`](CuratorError::NotConnected)
    /// (retryable: the retry policy may wait again) once it has waited this long. While a
    /// session is being opened (right after [`start`](CuratorFramework::start), or after a
    /// loss) and no attempt has failed yet, an operation past this wait is held, as Curator's
    /// ZooKeeper handle holds it, until the session is up, and fails with `NotConnected` only
    /// once the [session timeout](Self::session_timeout) has passed since it was made; so a
    /// create issued right after `start()` with a 1 ms connection timeout succeeds. It does
    /// not bound the attempts to connect: those are the session manager's
    /// (docs/architecture.md section 3.1).
    ///
    /// ```
    /// use std::time::Duration;
    /// use curator_core::CuratorFramework;
    ///
    /// let fw = CuratorFramework::builder()
    ///     .connect_string("127.0.0.1:2181")
    ///     .connection_timeout(Duration::from_secs(3))
    ///     .build()?;
    /// assert_eq!(fw.connection_timeout(), Duration::from_secs(3));
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }
    /// The retry policy of every operation (Curator's default is
    /// [`ExponentialBackoffRetry`](crate::ExponentialBackoffRetry)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use curator_core::{CuratorFramework, RetryNTimes, RetryPolicy};
    ///
    /// let fw = CuratorFramework::builder()
    ///     .connect_string("127.0.0.1:2181")
    ///     .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
    ///     .build()?;
    /// assert_eq!(fw.retry_policy().allow_retry(0, Duration::ZERO), Some(Duration::from_millis(100)));
    /// assert_eq!(fw.retry_policy().allow_retry(3, Duration::ZERO), None); // three retries, no more
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn retry_policy(mut self, policy: impl RetryPolicy + 'static) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }
    /// Prefix every path with this namespace (`"app"` or `"/app"`); created on first use.
    ///
    /// ```
    /// use curator_core::CuratorFramework;
    ///
    /// let fw = CuratorFramework::builder().connect_string("127.0.0.1:2181").namespace("my-app").build()?;
    /// assert_eq!(fw.namespace(), Some("/my-app")); // "/config" is "/my-app/config" on the server
    /// let root = fw.using_namespace(None)?; // the same connection, without the prefix
    /// assert_eq!(root.namespace(), None);
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    /// Authenticate every session with `scheme` (e.g. `digest`) and `auth` (e.g. `user:password`).
    /// A scheme the server does not have is refused with AUTH_FAILED, which is final:
    /// [`CuratorError::AuthFailed`] names the scheme.
    pub fn authorization(mut self, scheme: impl Into<String>, auth: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), auth.into()));
        self
    }
    /// Where created nodes get their ACLs when the operation names none.
    pub fn acl_provider(mut self, provider: impl AclProvider + 'static) -> Self {
        self.acl_provider = Arc::new(provider);
        self
    }
    /// Data for creates that give none (Curator's default is the local IP address).
    pub fn default_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.default_data = Some(data.into());
        self
    }
    /// Allow connections to read-only servers (reported as [`ConnectionState::ReadOnly`](crate::ConnectionState::ReadOnly)).
    pub fn can_be_read_only(mut self, allowed: bool) -> Self {
        self.can_be_read_only = allowed;
        self
    }
    /// Whether `creating_parent_containers_if_needed` creates containers (the default) or plain
    /// persistent nodes.
    pub fn use_container_parents(mut self, enabled: bool) -> Self {
        self.use_container_parents = enabled;
        self
    }
    /// Which connection states count as errors for locks and leaders (Curator's
    /// `connectionStateErrorPolicy`; default [`ErrorPolicy::Standard`]).
    ///
    /// ```
    /// use curator_core::{ConnectionState, CuratorFramework, ErrorPolicy};
    ///
    /// let fw = CuratorFramework::builder()
    ///     .connect_string("127.0.0.1:2181")
    ///     .connection_state_error_policy(ErrorPolicy::Session) // hold on through a suspension
    ///     .build()?;
    /// assert!(!fw.error_policy().is_error_state(ConnectionState::Suspended));
    /// # Ok::<(), curator_core::CuratorError>(())
    /// ```
    pub fn connection_state_error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.error_policy = policy;
        self
    }
    /// Puts every connection-state stream and listener of the framework behind one circuit
    /// timed by `policy` (Curator's `connectionStateListenerManagerFactory(
    /// ConnectionStateListenerManagerFactory.circuitBreaking(policy))`): after a disconnection,
    /// further transitions are held back for the policy's sleeps, so that a flapping connection
    /// reaches them, and the recipes that follow them (the caches), as one disconnection and one
    /// recovery ([`CircuitBreakingConnectionStateListener`] says exactly how).
    ///
    /// Only those views are shaped: [`connection_state_watch`](crate::CuratorFramework::connection_state_watch),
    /// [`connection_state`](crate::CuratorFramework::connection_state),
    /// [`liveness`](crate::CuratorFramework::liveness), and through them locks' `lost()` and
    /// leaders' leadership, still see every transition when it happens (docs/architecture.md
    /// section 3.9). Without this option (the default) nothing is held back.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// use std::time::Duration;
    /// use curator_core::{ConnectionState, CuratorFramework, RetryForever};
    ///
    /// let fw = CuratorFramework::builder()
    ///     .connect_string(server.connect_string())
    ///     .connection_state_circuit_breaker(RetryForever::new(Duration::from_secs(5)))
    ///     .build()?;
    /// let mut states = fw.connection_state_stream(); // behind the circuit
    /// fw.start()?;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Connected));
    /// fw.close().await;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Closed));
    /// # Ok(()) }
    /// ```
    ///
    /// [`CircuitBreakingConnectionStateListener`]: crate::CircuitBreakingConnectionStateListener
    pub fn connection_state_circuit_breaker(mut self, policy: impl RetryPolicy + 'static) -> Self {
        self.circuit_breaker = Some(Arc::new(policy));
        self
    }
    /// How long `close()` waits for guaranteed deletes still pending.
    pub fn max_close_wait(mut self, wait: Duration) -> Self {
        self.max_close_wait = wait;
        self
    }
    /// Largest node data accepted before sending (default [`DEFAULT_MAX_DATA_LEN`]).
    pub fn max_data_len(mut self, len: usize) -> Self {
        self.max_data_len = len;
        self
    }
    /// Check every operation against `set` before sending it (Curator's `schemaSet`): one that
    /// breaks the schema of its path fails with [`CuratorError::SchemaViolation`] and sends
    /// nothing. See [`SchemaSet`] for which schema a path gets and what is checked. None by
    /// default: everything is allowed.
    pub fn schema_set(mut self, set: SchemaSet) -> Self {
        self.schema_set = Some(Arc::new(set));
        self
    }
    /// Largest request sent (default [`DEFAULT_MAX_REQUEST_LEN`]), measured by its paths
    /// (namespace included), data and ACLs: a larger one fails with
    /// [`CuratorError::DataTooLarge`] before it is sent, where the server would close the
    /// connection. Raise it only for servers with a larger `jute.maxbuffer`.
    pub fn max_request_len(mut self, len: usize) -> Self {
        self.max_request_len = len;
        self
    }
    /// Connect over TLS (ZooKeeper's `secureClientPort`) with these certificates: every server of
    /// the connect string is reached over TLS unless written `tcp://host:port`. The PEM is
    /// checked at [`build`](Self::build) ([`CuratorError::Tls`]). A handshake that fails (a CA
    /// that did not sign the server's certificate, a refused client certificate, a plain port)
    /// makes operations fail at once with [`CuratorError::Tls`] naming the cause while the
    /// session manager keeps retrying with its backoff. See [`TlsConfig`] and
    /// docs/operations.md section 3. Only with curator-core's `tls` feature.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }
    /// Authenticate every session with SASL DIGEST-MD5 as `username` with `password` (the
    /// server's JAAS file lists the users). Shorthand for [`sasl`](Self::sasl) with
    /// [`SaslConfig::digest_md5`]. Only with curator-core's `sasl` feature.
    #[cfg(feature = "sasl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
    pub fn sasl_digest(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl(SaslConfig::digest_md5(username, password))
    }
    /// Authenticate every session with SASL. A refused credential is final: see
    /// [`CuratorError::AuthFailed`] and docs/operations.md section 4. Only with curator-core's
    /// `sasl` feature.
    #[cfg(feature = "sasl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
    pub fn sasl(mut self, sasl: SaslConfig) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// Whether to follow the ensemble's dynamic configuration (`/zookeeper/config`) and move
    /// the session to the new servers when it changes (docs/architecture.md section 3.7,
    /// Curator's `EnsembleTracker`). On by default, as in Curator: without it, a client whose
    /// servers all leave the ensemble loses its session once they stop. It costs one read and
    /// one watch per connection, and while it is on the framework's clients are opened detached
    /// (`close()` then ends the session with a short-lived client on it). A move shows as one
    /// `Suspended`/`Reconnected` pair at most (none if it completes within a tenth of the session
    /// timeout), never as `Lost`; see [`CuratorFramework::current_connect_string`] for the
    /// servers in use. With `tls` (its feature) the tracker stays off whatever this says: the
    /// dynamic configuration names each server's plain client port only, never its secure one,
    /// so following it would move a TLS client onto plain ports.
    pub fn ensemble_tracker(mut self, enabled: bool) -> Self {
        self.ensemble_tracker = enabled;
        self
    }

    /// The value of the `framework` label of the framework's connection-state gauge
    /// (`curator_connection_state`, docs/operations.md section 6), to tell the frameworks of
    /// one process apart. Without it the label is the connect string as given here followed by
    /// the namespace (`127.0.0.1:2181/app`); frameworks with the same of both share one series.
    /// Checked at [`build`](Self::build): an empty name, or one with control characters, is an
    /// [`InvalidArgument`](CuratorError::InvalidArgument).
    pub fn metrics_name(mut self, name: impl Into<String>) -> Self {
        self.metrics_name = Some(name.into());
        self
    }

    /// Compress the data of every create and data write (transactions included) and decompress
    /// that of every data read, unless the operation says `uncompressed()` (writes) or
    /// `undecompressed()` (reads): Curator's `enableCompression()`. Off by default. With the
    /// default gzip provider it needs curator-core's `compression` feature: without it
    /// [`build`](Self::build) is [`CuratorError::InvalidArgument`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// let fw = curator_core::CuratorFramework::builder()
    ///     .connect_string(server.connect_string())
    ///     .enable_compression()
    ///     .build()?;
    /// fw.start()?;
    /// fw.create().for_path("/report", b"a long report".to_vec()).await?;
    /// assert_eq!(fw.get_data().for_path("/report").await?, b"a long report");
    /// let stored = fw.get_data().undecompressed().for_path("/report").await?;
    /// assert_eq!(stored[..2], [0x1f, 0x8b]); // gzip
    /// # Ok(()) }
    /// ```
    pub fn enable_compression(mut self) -> Self {
        self.compression_enabled = true;
        self
    }
    /// How node data is compressed and decompressed (Curator's `compressionProvider`):
    /// [`GzipCompressionProvider`](crate::GzipCompressionProvider) by default. Used by
    /// `compressed()` / `decompressed()` operations, and by all with
    /// [`enable_compression`](Self::enable_compression).
    pub fn compression_provider(mut self, provider: impl CompressionProvider) -> Self {
        self.compression_provider = Some(Arc::new(provider));
        self
    }

    /// Checks the options: the framework's [`Config`], and its namespace as given (checked by
    /// the framework). Bad options are an [`InvalidArgument`](CuratorError::InvalidArgument)
    /// saying which; TLS certificates or keys that cannot be read are a [`Tls`](CuratorError::Tls)
    /// error. `build()` (in module `framework`, which makes the framework) calls it.
    pub(crate) fn into_config(self) -> Result<(Config, Option<String>)> {
        if self.compression_enabled && self.compression_provider.is_none() {
            crate::compression::check_gzip("")
                .map_err(|_| invalid("enable_compression() with gzip needs curator-core's `compression` feature, which this build leaves out; give a compression_provider".into()))?;
        }
        check_connect_string(&self.connect_string)?;
        let millis = self.session_timeout.as_millis();
        if millis == 0 || millis > i32::MAX as u128 {
            return Err(invalid(format!(
                "session timeout {:?} is not between 1 ms and {} ms (ZooKeeper's limit)",
                self.session_timeout,
                i32::MAX
            )));
        }
        if self.connection_timeout.is_zero() {
            return Err(invalid("connection timeout is zero".into()));
        }
        if let Some(tls) = &self.tls {
            tls.check()?;
        }
        let metrics_name = metrics_name(self.metrics_name.as_deref(), &self.connect_string, self.namespace.as_deref())?;
        let default_data = self.default_data.clone().unwrap_or_else(|| crate::local_address().into_bytes());
        // The dynamic configuration has no secure client ports (see `ensemble_tracker`).
        let tracking = self.ensemble_tracker && self.tls.is_none();
        let ensemble = Arc::new(crate::ensemble::Ensemble::new(&self.connect_string, tracking));
        let config = Config {
            ensemble,
            session_timeout: self.session_timeout,
            connection_timeout: self.connection_timeout,
            retry_policy: self.retry_policy,
            auth: self.auth,
            acl_provider: self.acl_provider,
            default_data,
            can_be_read_only: self.can_be_read_only,
            use_container_parents: self.use_container_parents,
            error_policy: self.error_policy,
            circuit_breaker: self.circuit_breaker,
            max_close_wait: self.max_close_wait,
            max_data_len: self.max_data_len,
            max_request_len: self.max_request_len,
            tls: self.tls,
            sasl: self.sasl,
            metrics_name,
            schema_set: self.schema_set,
            compression_enabled: self.compression_enabled,
            compression: self.compression_provider.unwrap_or_else(|| Arc::new(GzipCompressionProvider)),
        };
        Ok((config, self.namespace))
    }
}

/// A bad option: `InvalidArgument` with no path.
fn invalid(reason: String) -> CuratorError {
    CuratorError::InvalidArgument { path: String::new(), reason }
}

/// The `framework` label of the connection-state gauge: `name` if given (not empty, no
/// control characters), else the connect string followed by the namespace as `/ns`.
fn metrics_name(name: Option<&str>, connect_string: &str, namespace: Option<&str>) -> Result<Arc<str>> {
    match name {
        Some(name) if name.trim().is_empty() => Err(invalid("metrics name is empty".into())),
        Some(name) if name.chars().any(char::is_control) => {
            Err(invalid(format!("metrics name {name:?} has control characters")))
        }
        Some(name) => Ok(name.into()),
        None => match namespace.map(|ns| ns.trim_matches('/')).filter(|ns| !ns.is_empty()) {
            Some(ns) => Ok(format!("{}/{ns}", connect_string.trim()).into()),
            None => Ok(connect_string.trim().into()),
        },
    }
}

/// Checks a connect string as zookeeper-client will parse it: comma-separated
/// `[tcp://|tcp+tls://]host[:port]`, with an optional chroot after the last one. The port, if
/// given, is a number from 1 to 65535.
fn check_connect_string(connect_string: &str) -> Result<()> {
    let parsed = crate::connect_string::parse(connect_string).map_err(|why| match connect_string.trim() {
        "" => invalid(why),
        _ => invalid(format!("connect string {connect_string:?}: {why}")),
    })?;
    #[cfg(not(feature = "tls"))]
    if parsed.servers.iter().any(|server| server.scheme == crate::connect_string::Scheme::Tls) {
        return Err(invalid(format!(
            "connect string {connect_string:?}: tcp+tls:// needs curator-core's `tls` feature, which this build leaves out"
        )));
    }
    match parsed.chroot {
        Some(chroot) if chroot != "/" => crate::path::validate(chroot)
            .map(drop)
            .map_err(|_| invalid(format!("connect string {connect_string:?}: invalid chroot"))),
        _ => Ok(()),
    }
}

/// The options a framework was built with.
#[derive(Debug)]
pub(crate) struct Config {
    /// The connect string: the builder's, or the ensemble's as tracked.
    pub(crate) ensemble: Arc<crate::ensemble::Ensemble>,
    pub(crate) session_timeout: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) retry_policy: Arc<dyn RetryPolicy>,
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    pub(crate) acl_provider: Arc<dyn AclProvider>,
    pub(crate) default_data: Vec<u8>,
    pub(crate) can_be_read_only: bool,
    pub(crate) use_container_parents: bool,
    pub(crate) error_policy: ErrorPolicy,
    /// The policy timing the circuit in front of the connection-state streams and listeners
    /// (docs/architecture.md section 3.9), if any.
    pub(crate) circuit_breaker: Option<Arc<dyn RetryPolicy>>,
    pub(crate) max_close_wait: Duration,
    pub(crate) max_data_len: usize,
    pub(crate) max_request_len: usize,
    pub(crate) tls: Option<TlsConfig>,
    pub(crate) sasl: Option<SaslConfig>,
    /// The `framework` label of the connection-state gauge
    /// ([`CuratorFrameworkBuilder::metrics_name`]).
    pub(crate) metrics_name: Arc<str>,
    /// The schemas operations are checked against ([`CuratorFrameworkBuilder::schema_set`]).
    pub(crate) schema_set: Option<Arc<SchemaSet>>,
    /// Whether creates and data writes compress, and data reads decompress, unless told
    /// otherwise.
    pub(crate) compression_enabled: bool,
    /// What compresses and decompresses node data.
    pub(crate) compression: Arc<dyn CompressionProvider>,
}

impl Config {
    /// What the server refused when it answers AUTH_FAILED, said from the credentials the
    /// framework gave: its SASL user, the schemes given with
    /// [`authorization`](CuratorFrameworkBuilder::authorization) (an unknown scheme is refused
    /// so; the credentials themselves are never shown), or none at all (the server requires
    /// SASL).
    pub(crate) fn auth_failed_detail(&self) -> String {
        const FINAL: &str = "the framework no longer connects: close it and build one with";
        let sasl = self.sasl.as_ref().map(|s| format!("{} user {:?}", s.mechanism(), s.username()));
        let schemes = self.auth.iter().map(|(scheme, _)| format!("authorization({scheme:?}, ..)")).collect::<Vec<_>>();
        let schemes = schemes.join(" or ");
        match (sasl, schemes.is_empty()) {
            (None, true) => format!(
                "the server requires authentication (SASL) that this framework does not give; {FINAL} CuratorFrameworkBuilder::sasl_digest"
            ),
            (Some(sasl), true) => {
                format!("the server refused the session's SASL credentials ({sasl}); {FINAL} the right credentials")
            }
            (None, false) => format!(
                "the server refused {schemes}: it has no such authentication scheme, or the scheme's provider refused the credential; {FINAL} other credentials"
            ),
            (Some(sasl), false) => format!(
                "the server refused the session's credentials, SASL ({sasl}) or {schemes}: a wrong SASL user or password, an authentication scheme it does not have, or a credential the scheme's provider refused; {FINAL} other credentials"
            ),
        }
    }
}

#[cfg(test)]
mod feature_tests {
    use super::*;

    /// A connect string that asks for TLS is accepted with the `tls` feature and, without it,
    /// refused by `build()` with an `InvalidArgument` naming the feature (not a hang on a
    /// plain connection to a secure port).
    #[test]
    fn tls_connect_string_follows_the_feature() {
        let checked = check_connect_string("tcp+tls://127.0.0.1:2281");
        if cfg!(feature = "tls") {
            assert!(checked.is_ok(), "{checked:?}");
        } else {
            match checked {
                Err(CuratorError::InvalidArgument { reason, .. }) => {
                    assert!(reason.contains("`tls` feature"), "{reason}")
                }
                other => panic!("not InvalidArgument: {other:?}"),
            }
        }
        assert!(check_connect_string("tcp://127.0.0.1:2181").is_ok());
    }
}
