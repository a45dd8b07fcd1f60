//! # curator-discovery
//!
//! Coming from Java Curator? `docs/from-curator.md` in the repository maps each idiom, Java
//! then Rust.
//!
//! Apache Curator's service discovery (`curator-x-discovery` 5.x), with the
//! JSON Curator 5.4 reads and writes, byte for byte, so that a Rust service and a Java service
//! using Curator can find each other:
//!
//! - [`ServiceInstance`]: one instance of a service (name, id, address, ports, payload,
//!   registration time, [`ServiceType`], [`UriSpec`], enabled), with a builder that has
//!   Curator's defaults ([`ServiceInstance::builder`]).
//! - [`UriSpec`]: a URI template such as `{scheme}://{address}:{port}`, built for an instance.
//! - [`JsonInstanceSerializer`]: the instance's JSON, as Curator's `JsonInstanceSerializer`
//!   (field order, `null`s, Jackson's `"@class"` on payloads, `enabled` only when asked for),
//!   behind the [`InstanceSerializer`] trait.
//! - [`DiscoveryError`]: the one error of the crate; bad bytes never panic.
//! - [`ServiceDiscovery`]: registers instances at `base/<name>/<id>`, each kept by a
//!   `curator_recipes::PersistentNode` through new sessions and outages, and queries
//!   them; with `watch_instances`, a registration takes in the edits other clients write to
//!   its node ([`RegistrationEvent`]).
//! - [`DiscoveryPathConstructor`]: where services and instances are; [`DefaultPathConstructor`]
//!   is `base/<name>/<id>`.
//! - [`ServiceCache`]: the instances of one service in memory, on a `PathChildrenCache`, with
//!   [`ServiceCacheEvent`]s, optionally through [`InstanceFilter`]s; it is an
//!   [`InstanceProvider`].
//! - [`ServiceProvider`]: picks one instance for a single use from an
//!   [`InstanceProvider`], through [`InstanceFilter`]s and the [`DownInstancePolicy`], with a
//!   [`ProviderStrategy`] ([`RoundRobinStrategy`], [`RandomStrategy`], [`StickyStrategy`]),
//!   as Curator's `ServiceProvider`.
//!
//! Nodes that do not hold an instance are skipped with a warning and counted, never a panic.
//!
//! ```
//! use std::collections::HashMap;
//! use curator_discovery::{InstanceSerializer, JsonInstanceSerializer, ServiceInstance, UriSpec};
//! use serde_json::json;
//!
//! let instance = ServiceInstance::builder("search")
//!     .id("3f5e7a0c-0000-4000-8000-000000000001")
//!     .address("10.0.0.7")
//!     .port(8080)
//!     .payload(json!({"zone": "eu-1"}))
//!     .registration_time_utc(1_700_000_000_000)
//!     .uri_spec(UriSpec::parse("{scheme}://{address}:{port}/{name}")?)
//!     .build();
//! assert_eq!(instance.build_uri(&HashMap::new()), "http://10.0.0.7:8080/search");
//!
//! // As Curator 5.4 writes it; Java reads the payload as a com.example.Zone.
//! let serializer = JsonInstanceSerializer::new().payload_class("com.example.Zone");
//! let bytes = serializer.serialize(&instance)?;
//! assert!(bytes.starts_with(br#"{"name":"search","id":"3f5e7a0c-0000-4000-8000-000000000001","address":"10.0.0.7","port":8080,"sslPort":null,"payload":{"@class":"com.example.Zone","zone":"eu-1"},"#));
//!
//! // Reading drops "@class"; any payload reads as a serde_json::Value.
//! let read: ServiceInstance = serializer.deserialize(&bytes)?;
//! assert_eq!(read, instance);
//! # Ok::<(), curator_discovery::DiscoveryError>(())
//! ```
#![warn(missing_docs)]

mod address;
mod cache;
mod discovery;
mod error;
mod instance;
mod instance_provider;
mod json;
mod paths;
mod provider;
mod uri_spec;

// The public surface, flat (docs/architecture.md section 1.1); api/curator-discovery.txt lists it.
pub use address::local_ipv4_addresses;
pub use cache::{ServiceCache, ServiceCacheBuilder, ServiceCacheEvent};
pub use discovery::{RegistrationEvent, ServiceDiscovery, ServiceDiscoveryBuilder};
pub use error::DiscoveryError;
pub use instance::{ServiceInstance, ServiceInstanceBuilder, ServiceType};
pub use instance_provider::InstanceProvider;
pub use json::{InstanceSerializer, JsonInstanceSerializer, CLASS_PROPERTY, DEFAULT_ARRAY_CLASS};
pub use paths::{DefaultPathConstructor, DiscoveryPathConstructor};
pub use provider::{
    DownInstanceManager, DownInstancePolicy, InstanceFilter, ProviderStrategy, RandomStrategy, RoundRobinStrategy,
    ServiceProvider, ServiceProviderBuilder, StickyStrategy,
};
pub use uri_spec::{
    Part, UriSpec, FIELD_ADDRESS, FIELD_CLOSE_BRACE, FIELD_ID, FIELD_NAME, FIELD_OPEN_BRACE, FIELD_PORT,
    FIELD_REGISTRATION_TIME_UTC, FIELD_SCHEME, FIELD_SERVICE_TYPE, FIELD_SSL_PORT,
};
