//! # curator-modeled
//!
//! Typed ZooKeeper nodes, Apache Curator's x-async "modeled" framework in Rust terms: a
//! [`ModelSpec`] says where a model lives (a [`ZPath`](curator_core::ZPath), maybe with
//! parameters) and how it is written (a [`ModelSerializer`], serde JSON by default and byte
//! for byte what Curator's `JacksonModelSerializer` writes; create mode, ACL, TTL, create and
//! delete options); a [`ModeledFramework`] reads and writes models over a
//! [`CuratorFramework`](curator_core::CuratorFramework), with compare-and-set
//! [`update`](ModeledFramework::update)s and operations for transactions (guarded ones too);
//! a [`CachedModeledFramework`] answers reads from a [`CuratorCache`](curator_cache::CuratorCache)
//! and reports typed [`ModeledCacheEvent`]s.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use curator_core::{CuratorError, CuratorFramework, ZPath};
//! use curator_modeled::{ModelSpec, ModeledFramework};
//! use curator_test::TestingServer;
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Person { first_name: String, age: u32, nickname: Option<String> }
//!
//! let server = TestingServer::start().await?;
//! let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
//! fw.start()?;
//! fw.block_until_connected(Duration::from_secs(10)).await?;
//!
//! let people = ModeledFramework::new(&fw, ModelSpec::<Person>::json(ZPath::parse("/people")?).build()?);
//! let john = people.child("john")?;
//! john.set(&Person { first_name: "John".into(), age: 42, nickname: None }).await?;
//! // Jackson's bytes for the same class: fields in order, nothing omitted.
//! assert_eq!(fw.get_data().for_path("/people/john").await?, br#"{"first_name":"John","age":42,"nickname":null}"#);
//! assert_eq!(john.read().await?.age, 42);
//! assert_eq!(people.children().await?, [ZPath::parse("/people/john")?]);
//!
//! fw.set_data().for_path("/people/john", b"not json".to_vec()).await?;
//! assert!(matches!(john.read().await, Err(CuratorError::BadData { path, .. }) if path == "/people/john"));
//! fw.close().await;
//! # Ok(()) }
//! ```
//!
//! Every item is at the crate's root. Design: docs/architecture.md section 19.

#![warn(missing_docs)]

mod cached;
mod modeled;
mod serializer;
mod spec;
mod transaction;
mod znode;

pub use cached::{CachedChildren, CachedModeledFramework, ModeledCacheEvent, ModeledCacheEvents};
pub use modeled::ModeledFramework;
pub use serializer::{JsonModelSerializer, ModelSerializer, RawModelSerializer};
pub use spec::{CreateOption, DeleteOption, ModelSpec, ModelSpecBuilder};
pub use znode::ZNode;
