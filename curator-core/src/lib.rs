//! # curator-core
//!
//! `CuratorFramework`: an async ZooKeeper client framework with the ideas of Apache Curator,
//! over the `zookeeper-client` crate on tokio. It tells the truth about the connection
//! ([`ConnectionState`]), opens a new session by itself when one expires, retries operations
//! whose outcome is unknown under a [`RetryPolicy`](retry::RetryPolicy), and offers Curator's
//! fluent operations, each ending in something to `.await` or to send to the background.
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
//! Module map: [`framework`] (the client), [`builder`] (its options), [`session`] (the session manager),
//! [`state`] (connection states), [`liveness`] (whether a session is over), [`ensemble`] (ensemble tracking), [`retry`], [`path`], [`ops`]
//! (the fluent operations), [`background`] (callbacks), [`listeners`] (the one listener queue), [`lifecycle`] (the one start/close of recipes and caches),
//! [`metrics`] (the names of the metrics and where they are recorded), [`error`], and, with
//! their features, `tls` and `sasl` (securing the connection).
//!
//! # Features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `metrics` | on | the [`metrics`](https://docs.rs/metrics) facade; without it every hook of [`metrics`] does nothing |
//! | `compression` | on | gzip of node data (flate2): `compressed()` on create and set_data, `decompressed()` on get_data; without it they fail with [`CuratorError::InvalidArgument`] |
//! | `tls` | off | TLS to the secure client port: `tls::TlsConfig`, `CuratorFrameworkBuilder::tls`, `CuratorError::Tls` (zookeeper-client's `tls`: rustls on aws-lc-rs) |
//! | `sasl` | off | SASL DIGEST-MD5: `sasl::SaslConfig`, `CuratorFrameworkBuilder::sasl` and `sasl_digest` (zookeeper-client's `sasl-digest-md5`: rsasl) |
//!
//! The defaults follow reqwest and tonic, which leave TLS to a feature: what is pure Rust and
//! cheap to build is on (`metrics`, `compression`); what pulls a C build (aws-lc-sys, minutes
//! on a cold build) or a large or unmaintained stack (rsasl; rustls-pemfile, RUSTSEC-2025-0134)
//! is off, for those who need it to ask for. So the default build of `curator-recipes` needs no
//! C compiler and no SASL stack. curator-recipes, curator-cache, curator-discovery and
//! curator-inspect pass the same four features through, with the same defaults. Without
//! `tls`, a connect string that asks for TLS (`tcp+tls://`) is an
//! [`InvalidArgument`](CuratorError::InvalidArgument) from `build()`.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod acl;
pub mod background;
pub mod builder;
mod connect_string;
mod connection_state;
pub mod ensemble;
pub mod error;
mod event;
pub mod framework;
mod left_out;
pub mod lifecycle;
mod limits;
pub mod listeners;
pub mod liveness;
pub mod metrics;
pub mod ops;
mod parents;
pub mod path;
pub mod retry;
#[cfg(feature = "sasl")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
pub mod sasl;
pub mod session;
mod shared;
pub mod state;
mod task;
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub mod tls;
#[cfg(not(feature = "sasl"))]
use left_out::sasl;
#[cfg(not(feature = "tls"))]
use left_out::tls;
mod watcher;

pub use acl::{AclProvider, DefaultAclProvider, FixedAclProvider};
pub use background::{CuratorEvent, CuratorEventType, CuratorListener, UnhandledErrorListener};
pub use error::{CuratorError, Result};
pub use framework::{CuratorFramework, CuratorFrameworkBuilder, Session};
pub use liveness::{SessionEnd, SessionLiveness};
pub use ops::transaction::TransactionResult;
pub use ops::watch::{AddWatchMode, PersistentWatch};
pub use ops::{CreateMode, Pending, Watch};
#[cfg(feature = "sasl")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
pub use sasl::SaslConfig;
pub use state::{ConnectionState, ConnectionStateEvent, ConnectionStateStream, ErrorPolicy};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use tls::TlsConfig;
/// The raw client crate, for its types (`Stat`, `Acl`, `WatchedEvent`...).
pub use zookeeper_client as zk;

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
