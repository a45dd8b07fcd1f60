//! # curator-core
//!
//! `CuratorFramework`: an async ZooKeeper client framework with the ideas of Apache Curator,
//! over the `zookeeper-client` crate on tokio. It tells the truth about the connection
//! ([`ConnectionState`]), opens a new session by itself when one expires, retries operations
//! whose outcome is unknown under a [`RetryPolicy`], and offers Curator's
//! fluent operations, each ending in something to `.await` or to send to the background.
//!
//! Coming from Java Curator? `docs/from-curator.md` in the repository maps each idiom, Java
//! then Rust.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use curator_core::{CreateMode, CuratorFramework};
//! use curator_test::TestingServer;
//!
//! let server = TestingServer::start().await?; // a real ZooKeeper on a free port
//! let client = CuratorFramework::builder()
//!     .connect_string(server.connect_string())
//!     .namespace("docs")
//!     .build()?;
//! client.start()?;
//! client.block_until_connected(Duration::from_secs(10)).await?;
//!
//! let path = client
//!     .create()
//!     .creating_parents_if_needed()
//!     .with_protection()
//!     .with_mode(CreateMode::EphemeralSequential)
//!     .for_path("/jobs/job-", b"hello".to_vec())
//!     .await?;
//! assert!(path.starts_with("/jobs/_c_"));
//! assert_eq!(client.get_data().for_path(&path).await?, b"hello");
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! Every item is at the crate's root. Where to start: [`CuratorFramework`] and its
//! [builder](CuratorFrameworkBuilder); the fluent operations it hands out ([`CreateBuilder`]
//! and the others, ending in [`Pending`]); [`ConnectionState`] and [`ErrorPolicy`];
//! [`RetryPolicy`] and its implementations; [`SessionLiveness`] (whether a session is over);
//! [`CuratorEvent`] for background callbacks; [`Listeners`] and [`EventStream`] (the one
//! listener queue); [`Lifecycle`] (the one start and close of recipes and caches); and
//! [`CuratorError`]. Three namespaces stay modules: [`path`] (Curator's `ZKPaths`), [`metrics`]
//! (the metric names) and [`deadline`] (a task's deadline). With their features, `TlsConfig`
//! and `SaslConfig` secure the connection.
//!
//! # Features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `metrics` | on | the [`metrics`](https://docs.rs/metrics) facade; without it every hook of [`metrics`] does nothing |
//! | `compression` | on | gzip of node data (flate2), the default [`GzipCompressionProvider`]: `compressed()` on create, set_data and transactions, `decompressed()` on get_data, `enable_compression()` for all of them; without it they fail with [`CuratorError::InvalidArgument`] (and `build()` refuses `enable_compression()` unless another provider is given) |
//! | `tls` | off | TLS to the secure client port: `TlsConfig`, `CuratorFrameworkBuilder::tls`, `CuratorError::Tls` (zookeeper-client's `tls`: rustls on aws-lc-rs) |
//! | `sasl` | off | SASL DIGEST-MD5: `SaslConfig`, `CuratorFrameworkBuilder::sasl` and `sasl_digest` (zookeeper-client's `sasl-digest-md5`: rsasl) |
//!
//! The defaults follow tonic, which leaves TLS to a feature that is off by default (reqwest,
//! whose default features bring TLS, does the opposite): what is pure Rust and cheap to build
//! is on (`metrics`, `compression`); what pulls a C build (aws-lc-sys, minutes
//! on a cold build) or a large or unmaintained stack (rsasl; rustls-pemfile, RUSTSEC-2025-0134)
//! is off, for those who need it to ask for. So the default build of `curator-recipes` needs no
//! C compiler and no SASL stack. curator-recipes, curator-cache, curator-discovery and
//! curator-inspect pass the same four features through, with the same defaults. Without
//! `tls`, a connect string that asks for TLS (`tcp+tls://`) is an
//! [`InvalidArgument`](CuratorError::InvalidArgument) from `build()`.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acl;
mod background;
mod breaker;
mod breaking_listener;
mod builder;
mod compression;
mod connect_string;
mod connection_state;
mod ensemble;
mod error;
mod event;
mod framework;
mod left_out;
mod lifecycle;
mod limits;
mod listeners;
mod liveness;
pub mod metrics;
mod ops;
mod parents;
pub mod path;
mod retry;
#[cfg(feature = "sasl")]
mod sasl;
mod schema;
mod schema_loader;
mod schema_set;
mod session;
mod session_writes;
mod shared;
mod state;
mod task;
#[cfg(feature = "tls")]
mod tls;
#[cfg(not(feature = "sasl"))]
use left_out::sasl;
#[cfg(not(feature = "tls"))]
use left_out::tls;
mod watcher;
mod write_tag;
mod zpath;

// The public surface, flat (docs/architecture.md section 1.1): every item is reached from the
// crate's root, whatever module it lives in; `path` and `metrics` stay namespaces (Curator's
// `ZKPaths`, and the metric names), as does `deadline`. api/curator-core.txt lists it all, and
// scripts/check fails when it changes unrecorded.
pub use acl::{AclProvider, DefaultAclProvider, FixedAclProvider};
pub use background::{
    spawn_detached, BackgroundCallback, CuratorEvent, CuratorEventType, CuratorListener, EventData,
    UnhandledErrorListener,
};
pub use breaking_listener::CircuitBreakingConnectionStateListener;
pub use builder::{
    CuratorFrameworkBuilder, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_MAX_DATA_LEN,
    DEFAULT_MAX_REQUEST_LEN, DEFAULT_SESSION_TIMEOUT, SERVER_MAX_PACKET_LEN,
};
pub use compression::{CompressionProvider, GzipCompressionProvider};
pub use ensemble::{connect_string_from_config, CONFIG_PATH};
pub use error::{CuratorError, Result, ShortPath, SHOWN_PATH_MAX};
pub use framework::{CuratorFramework, Session};
pub use lifecycle::{LifeState, Lifecycle, Readiness, Starting};
pub use listeners::{Callback, EventStream, ListenerId, Listeners};
pub use liveness::{is_later, SessionEnd, SessionLiveness};
pub use ops::create::{make_parents, CreateBuilder};
pub use ops::delete::DeleteBuilder;
pub use ops::guarded::TransactionGuard;
pub use ops::read::{ExistsBuilder, GetAclBuilder, GetChildrenBuilder, GetConfigBuilder, GetDataBuilder};
pub use ops::reconfig::{config_version, ReconfigBuilder};
pub use ops::remove_watch::{RemovableWatch, RemoveAllWatchesBuilder, RemoveWatchesBuilder, WatcherType};
pub use ops::transaction::{TransactionBuilder, TransactionCreate, TransactionResult, TransactionSetData};
pub use ops::watch::{
    let_fire, readd_pause, AddWatchBuilder, AddWatchMode, PersistentWatch, WatchesBuilder, LET_FIRE_WAIT,
    READD_MAX_PAUSE,
};
pub use ops::write::{SetAclBuilder, SetAclWithAcl, SetDataBuilder, SyncBuilder};
pub use ops::{check_ttl_value, BoxFuture, CreateMode, Pending, Watch, MAX_TTL};
pub use retry::deadline;
pub use retry::{
    BoundedExponentialBackoffRetry, ExponentialBackoffForever, ExponentialBackoffRetry, RetryForever, RetryLoop,
    RetryNTimes, RetryOneTime, RetryPolicy, RetryUntilElapsed, SessionFailedRetryPolicy,
};
#[cfg(feature = "sasl")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
pub use sasl::SaslConfig;
pub use schema::{Allowance, DataValidator, Schema, SchemaBuilder};
pub use schema_loader::SchemaSetLoader;
pub use schema_set::{SchemaSet, DEFAULT_SCHEMA_NAME};
pub use session::SESSION_EVENTS_PATH;
pub use session_writes::SessionMulti;
pub use state::{ConnectionState, ConnectionStateEvent, ConnectionStateStream, ErrorPolicy};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use tls::TlsConfig;
/// The raw client crate, for its types (`Stat`, `Acl`, `WatchedEvent`...).
pub use write_tag::{WriteTag, WRITE_TAG_PREFIX, WRITE_TAG_REAP_AGE};
pub use zookeeper_client as zk;
pub use zpath::{ZPath, DEFAULT_PARAMETER};

/// This host's address as text, as Curator's default node data: the address the host name
/// resolves to, or `127.0.0.1`.
pub fn local_address() -> String {
    use std::net::ToSocketAddrs;
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    if host.is_empty() {
        return "127.0.0.1".into();
    }
    (host.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.find(|a| a.is_ipv4()))
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "127.0.0.1".into())
}
