//! Real ZooKeeper servers for tests, in the spirit of Apache Curator's `curator-test`, async on
//! tokio.
//!
//! Coming from Java Curator? `docs/from-curator.md` in the repository maps each idiom, Java
//! then Rust.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use curator_test::{TestingServer, Timing};
//! use zookeeper_client::{Acls, Client, CreateMode};
//!
//! let server = TestingServer::start().await?;
//! let client = Client::connector()
//!     .with_session_timeout(Timing::new().session_timeout())
//!     .connect(&server.connect_string())
//!     .await?;
//! client.create("/hello", b"world", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
//! assert_eq!(client.get_data("/hello").await?.0, b"world");
//! # Ok(()) }
//! ```
//!
//! What is here:
//! - [`TestingServer`]: one standalone ZooKeeper 3.8 (Debian's jars under `/usr/share/java`, or
//!   `ZOOKEEPER_CLASSPATH`) in a child java process on a free `127.0.0.1` port, with its own
//!   temporary data directory. It can be stopped, restarted with its data, killed, paused
//!   (SIGSTOP) and resumed. [`TestingServer::shared`] is one server per test binary for ordinary
//!   tests that each use a unique path.
//! - [`TestingCluster`]: an ensemble on loopback whose members can be killed and restarted;
//!   [`TestingCluster::start_reconfigurable`] starts one whose members can be added and removed
//!   by dynamic reconfiguration.
//! - [`expire_session`]: ends a session on demand, as Curator's `KillSession`.
//! - [`ChaosProxy`]: a TCP proxy that pauses (both ways or one way), delays, cuts, refuses, or
//!   drops the reply to one request (so that a request is applied but its client sees a
//!   connection loss).
//! - [`chaos`]: seeded, repeatable fault injection ([`chaos::Injector`]) and a checker of lock
//!   safety ([`chaos::Checker`]) for chaos tests of locks built elsewhere.
//! - [`Timing`] and [`eventually`]: generous deadlines from one place, and polling instead of
//!   sleeping.
//! - TLS and SASL modes of a [`TestingServer`] ([`TestingServerBuilder::tls`], [`TestingTls`],
//!   [`TestingServerBuilder::sasl_digest_users`]).
//! - [`four_letter_word`]: `srvr`, `mntr`, `cons` and friends.
//!
//! No java process outlives the test binary: dropping a server kills it, an `atexit` hook kills
//! what statics still hold, and a small watchdog next to each java process kills it within about
//! a second if the binary dies abruptly.
//!
//! Servers use `tickTime=500`, so sessions as short as 1 s are allowed, `forceSync=no`, TTL and
//! container nodes are enabled and all four-letter words are allowed. The server's log is
//! `zookeeper.log` in its directory and is quoted in start errors.
#![warn(missing_docs)]

pub mod chaos;
mod child;
mod cluster;
mod error;
mod four;
mod node;
mod process;
mod proxy;
mod reconfig;
mod sasl;
mod server;
mod session;
mod timing;
mod tls;

// The public surface, flat (docs/architecture.md section 1.1) but for `chaos`, the chaos checker,
// a kit of its own; api/curator-test.txt lists it all.
pub use child::child_test_command;
pub use cluster::TestingCluster;
pub use error::TestingError;
pub use four::four_letter_word;
pub use process::{CLASSPATH_ENV, RUN_ENV};
pub use proxy::{ChaosProxy, RequestKind, SeenRequest};
pub use server::{TestingServer, TestingServerBuilder};
pub use session::expire_session;
pub use timing::{eventually, wait_for_state, Timing, TIMING_MULTIPLE_ENV};
pub use tls::{TestingTls, TlsFiles, KEYSTORE_PASSWORD};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn send<T: Send>(_: &T) {}
    fn send_sync<T: Send + Sync>() {}

    /// Everything async here can be spawned on a multi-threaded runtime (checked at compile
    /// time; this function is never called).
    #[allow(dead_code)]
    fn futures_are_send(
        server: &mut TestingServer,
        cluster: &mut TestingCluster,
        session: &zookeeper_client::SessionInfo,
    ) {
        send(&server.stop());
        send(&server.restart());
        send(&server.kill());
        send(&cluster.kill(0));
        send(&cluster.restart(0));
        send(&cluster.leader());
        send(&cluster.wait_for_leader(Duration::from_secs(1)));
        send(&cluster.add_server());
        send(&cluster.remove_server(0));
        send(&cluster.ensemble_config());
        send(&expire_session("127.0.0.1:1", session));
        send(&eventually(Duration::from_secs(1), || async { true }));
    }

    /// The chaos tools can run in spawned tasks and be shared between them.
    #[allow(dead_code)]
    fn chaos_is_send(injector: &chaos::Injector, checker: &chaos::Checker, builder: chaos::InjectorBuilder) {
        send(&injector.run(std::time::Instant::now()));
        send(&checker.settle(Duration::from_secs(1)));
        send(&builder.build());
        send_sync::<chaos::Injector>();
        send_sync::<chaos::Checker>();
        send_sync::<chaos::Target>();
        send_sync::<chaos::Ensemble>();
        send_sync::<chaos::ChaosRecord>();
    }

    #[test]
    fn types_and_constructors_are_send() {
        send_sync::<TestingServer>();
        send_sync::<TestingCluster>();
        send_sync::<ChaosProxy>();
        send_sync::<TestingError>();
        send_sync::<Timing>();
        send(&TestingServer::start());
        send(&TestingServer::builder().start());
        send(&TestingCluster::start(3));
        send(&TestingCluster::start_reconfigurable(3));
        send(&ChaosProxy::start("127.0.0.1:1"));
        send(&four_letter_word("127.0.0.1:1", "ruok"));
    }
}
