//! [`ServiceInstance`], its [`ServiceType`] and its builder, as Curator's `ServiceInstance`,
//! `ServiceType` and `ServiceInstanceBuilder`.

use std::collections::HashMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::{local_ipv4_addresses, DiscoveryError, InstanceSerializer, JsonInstanceSerializer, UriSpec};

/// How an instance is kept in ZooKeeper. JSON: the name in capitals (`"DYNAMIC"`, ...), as
/// Curator's enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ServiceType {
    /// Registered for as long as the registering process runs (an ephemeral node). The default.
    #[default]
    Dynamic,
    /// Registered until unregistered (a persistent node).
    Static,
    /// Registered until unregistered (a persistent node). The service discovery treats it as
    /// `Static` (its `close` unregisters it too, as Curator 5's); only Curator's discovery
    /// server tells them apart (it purges `Static` instances after a while).
    Permanent,
    /// As `Dynamic`, with a sequence number added to the node name (an ephemeral sequential
    /// node).
    DynamicSequential,
}

impl ServiceType {
    /// True for the types that live only as long as their process: `Dynamic` and
    /// `DynamicSequential` (Curator's `isDynamic`).
    pub fn is_dynamic(self) -> bool {
        matches!(self, ServiceType::Dynamic | ServiceType::DynamicSequential)
    }

    /// The name as Curator writes it: `DYNAMIC`, `STATIC`, `PERMANENT`, `DYNAMIC_SEQUENTIAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "DYNAMIC",
            ServiceType::Static => "STATIC",
            ServiceType::Permanent => "PERMANENT",
            ServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }
}

impl fmt::Display for ServiceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instance of a service: where it is, how it is registered, and an optional payload of
/// the user's type `T`, as Curator's `ServiceInstance<T>`.
///
/// `T` is any type serde can read and write; the default, [`serde_json::Value`], reads any
/// payload. Integer fields have Java's types (`Integer` ports, `long` time), so that everything
/// Curator writes reads back.
///
/// Make one with [`ServiceInstance::builder`] (Curator's defaults) or by filling the fields. Its
/// JSON, byte for byte as Curator 5.4 writes it, comes from [`ServiceInstance::to_json`] or a
/// [`JsonInstanceSerializer`] (field order `name, id, address, port, sslPort, payload,
/// registrationTimeUTC, serviceType, uriSpec`; `enabled` only when asked for, as Curator; see
/// [`JsonInstanceSerializer`] for the payload's `"@class"`).
///
/// ```
/// use curator_discovery::{ServiceInstance, ServiceType};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// struct Zone {
///     zone: String,
/// }
///
/// let instance = ServiceInstance::builder("search")
///     .address("10.0.0.7")
///     .port(8080)
///     .payload(Zone { zone: "eu-1".into() })
///     .build();
/// assert_eq!(instance.service_type, ServiceType::Dynamic); // Curator's default
/// assert!(!instance.id.is_empty()); // a random UUID unless `.id(..)` names one
/// let json = instance.to_json()?; // what ServiceDiscovery writes in the instance's node
/// let read: ServiceInstance<Zone> = ServiceInstance::from_json(&json)?;
/// assert_eq!(read, instance);
/// # Ok::<(), curator_discovery::DiscoveryError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceInstance<T = serde_json::Value> {
    /// The service's name: instances of one service share it.
    pub name: String,
    /// This instance's id, unique within the service.
    pub id: String,
    /// Where the instance listens (an IP address or a host name), if said.
    pub address: Option<String>,
    /// The port, if any.
    pub port: Option<i32>,
    /// The SSL port, if any (the URI scheme is then `https`).
    pub ssl_port: Option<i32>,
    /// The user's payload, if any.
    pub payload: Option<T>,
    /// When the instance was made, in milliseconds since the Unix epoch (UTC).
    pub registration_time_utc: i64,
    /// How the instance is kept in ZooKeeper.
    pub service_type: ServiceType,
    /// How to build the instance's URI, if said.
    pub uri_spec: Option<UriSpec>,
    /// Whether clients should use the instance. Curator's default serializer does not write it
    /// (CURATOR-275), so it reads back as true unless the writer was asked to write it.
    pub enabled: bool,
}

impl<T> ServiceInstance<T> {
    /// A builder with Curator's defaults for the service `name`: a random UUID as id, the first
    /// address of [`local_ipv4_addresses`] (none if the host has none), now as registration
    /// time, [`ServiceType::Dynamic`], enabled, no port, payload or URI spec.
    pub fn builder(name: impl Into<String>) -> ServiceInstanceBuilder<T> {
        ServiceInstanceBuilder {
            instance: ServiceInstance {
                name: name.into(),
                id: uuid::Uuid::new_v4().to_string(),
                address: local_ipv4_addresses().first().map(|a| a.to_string()),
                port: None,
                ssl_port: None,
                payload: None,
                registration_time_utc: now_millis(),
                service_type: ServiceType::Dynamic,
                uri_spec: None,
                enabled: true,
            },
        }
    }

    /// The instance's URI built from its [`UriSpec`] and `variables` ([`UriSpec::build`]), or
    /// `""` when it has no spec (Curator's `buildUriSpec`).
    pub fn build_uri(&self, variables: &HashMap<String, String>) -> String {
        self.uri_spec.as_ref().map(|spec| spec.build(self, variables)).unwrap_or_default()
    }
}

impl<T: Serialize + serde::de::DeserializeOwned> ServiceInstance<T> {
    /// The instance's JSON as Curator's default `JsonInstanceSerializer` writes it (no
    /// `enabled`, no payload class: see [`JsonInstanceSerializer`] to choose either).
    pub fn to_json(&self) -> Result<Vec<u8>, DiscoveryError> {
        JsonInstanceSerializer::new().serialize(self)
    }

    /// Reads an instance as Curator's `JsonInstanceSerializer` writes it (or any writer of
    /// the same fields); see [`JsonInstanceSerializer`] for what is accepted.
    pub fn from_json(bytes: &[u8]) -> Result<ServiceInstance<T>, DiscoveryError> {
        JsonInstanceSerializer::new().deserialize(bytes)
    }
}

/// Builds a [`ServiceInstance`]; made by [`ServiceInstance::builder`] with Curator's defaults.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceInstanceBuilder<T> {
    instance: ServiceInstance<T>,
}

impl<T> ServiceInstanceBuilder<T> {
    /// Replaces the random UUID id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.instance.id = id.into();
        self
    }

    /// Sets the address (an IP address or a host name).
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.instance.address = Some(address.into());
        self
    }

    /// Leaves the address out (JSON `null`).
    pub fn no_address(mut self) -> Self {
        self.instance.address = None;
        self
    }

    /// Sets the port.
    pub fn port(mut self, port: impl Into<i32>) -> Self {
        self.instance.port = Some(port.into());
        self
    }

    /// Sets the SSL port (the URI scheme becomes `https`).
    pub fn ssl_port(mut self, port: impl Into<i32>) -> Self {
        self.instance.ssl_port = Some(port.into());
        self
    }

    /// Sets the payload.
    pub fn payload(mut self, payload: T) -> Self {
        self.instance.payload = Some(payload);
        self
    }

    /// Sets the service type (default [`ServiceType::Dynamic`]).
    pub fn service_type(mut self, service_type: ServiceType) -> Self {
        self.instance.service_type = service_type;
        self
    }

    /// Replaces the registration time (milliseconds since the Unix epoch, UTC).
    pub fn registration_time_utc(mut self, millis: i64) -> Self {
        self.instance.registration_time_utc = millis;
        self
    }

    /// Sets the URI spec.
    pub fn uri_spec(mut self, uri_spec: UriSpec) -> Self {
        self.instance.uri_spec = Some(uri_spec);
        self
    }

    /// Marks the instance enabled or not (default enabled).
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.instance.enabled = enabled;
        self
    }

    /// The instance.
    pub fn build(self) -> ServiceInstance<T> {
        self.instance
    }
}

/// Now, in milliseconds since the Unix epoch (Java's `System.currentTimeMillis()`); 0 if the
/// clock is before the epoch.
fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builder has Curator's defaults (`ServiceInstance.builder()`): a random UUID id, the
    /// first local IPv4 address, now as registration time, DYNAMIC, enabled.
    #[test]
    fn builder_defaults_are_curators() {
        let before = now_millis();
        let a: ServiceInstance = ServiceInstance::builder("svc").build();
        let b: ServiceInstance = ServiceInstance::builder("svc").build();
        let after = now_millis();
        assert_eq!(a.name, "svc");
        assert!(uuid::Uuid::parse_str(&a.id).is_ok(), "{}", a.id);
        assert_eq!(a.id.len(), 36);
        assert_ne!(a.id, b.id);
        assert_eq!(a.address, local_ipv4_addresses().first().map(|a| a.to_string()));
        assert!((before..=after).contains(&a.registration_time_utc));
        assert_eq!(a.service_type, ServiceType::Dynamic);
        assert!(a.enabled);
        assert_eq!((a.port, a.ssl_port, a.payload, a.uri_spec), (None, None, None, None));
    }

    /// Curator's `ServiceType` names and `isDynamic`.
    #[test]
    fn service_types() {
        for (t, name, dynamic) in [
            (ServiceType::Dynamic, "DYNAMIC", true),
            (ServiceType::Static, "STATIC", false),
            (ServiceType::Permanent, "PERMANENT", false),
            (ServiceType::DynamicSequential, "DYNAMIC_SEQUENTIAL", true),
        ] {
            assert_eq!(t.as_str(), name);
            assert_eq!(t.to_string(), name);
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ServiceType>(&format!("\"{name}\"")).unwrap(), t);
            assert_eq!(t.is_dynamic(), dynamic);
        }
    }

    /// `build_uri` is `""` without a spec (Curator's `buildUriSpec`).
    #[test]
    fn build_uri_without_a_spec_is_empty() {
        let instance: ServiceInstance = ServiceInstance::builder("svc").port(1u16).build();
        assert_eq!(instance.build_uri(&HashMap::new()), "");
    }
}
