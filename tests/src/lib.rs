//! Support for the integration tests in `tests/`: one copy of every helper, shared by all test
//! binaries (`use tests::...`).
//!
//! - [`fixture`]: logging, unique paths, framework builders with the test timings, and the
//!   server fixture (a `TestingServer` with a started, connected `CuratorFramework`).
//! - [`zk`]: reading the server directly: children, listings, raw clients, request counts.
//! - [`locks`]: the mutual-exclusion checker and the lock tests' frameworks.
//! - [`caches`]: node edits, event waits and event-log replays for the cache tests.
//! - [`java`]: the Apache Curator peers of the interop tests.
//! - [`queues`]: Curator's queues in a Java peer and logging Rust consumers, for the queue
//!   interop tests.
//! - [`leadership`]: the leadership checker every election test uses, and recording participants.
//! - [`policies`]: the error and retry policies every injected fault is tried with.
//! - [`attempts`]: counting the framework's attempts to open a session.
//! - [`logs`]: recording the tracing events a test's code emits.
//! - [`metrics`]: the recorder of the metrics tests.

pub mod attempts;
pub mod caches;
pub mod chaos;
pub mod fixture;
pub mod java;
pub mod leadership;
pub mod locks;
pub mod logs;
pub mod metrics;
pub mod policies;
pub mod queues;
pub mod zk;

pub use fixture::{
    at_once, builder, client, connected, init_tracing, proxied_with_states, unique_path, wait_for, Fixture,
};
pub use zk::{children, packets_received, wait_children};

/// The guide for Curator users, docs/from-curator.md: each of its Rust blocks runs as one of this
/// crate's doc tests (`cargo test --doc -p tests`), so that the guide cannot drift from the API.
#[doc = include_str!("../../docs/from-curator.md")]
#[cfg(doctest)]
pub struct FromCuratorGuide;

/// The README: its quick start is compiled (not run: it names a server at 127.0.0.1:2181) as one
/// of this crate's doc tests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct Readme;
