//! The JSON of a service instance, byte for byte as Curator 5.4's `JsonInstanceSerializer`
//! (Jackson 2 with its defaults) writes it.

use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::ser::{CharEscape, Formatter};
use serde_json::Value;

use crate::{DiscoveryError, ServiceInstance, ServiceType, UriSpec};

/// Jackson's type property on a payload written as a JSON object.
pub const CLASS_PROPERTY: &str = "@class";

/// The class Jackson writes for a list, and the one written for an array payload whose class
/// is not given (Java reads an array payload only with a class).
pub const DEFAULT_ARRAY_CLASS: &str = "java.util.ArrayList";

/// Java classes whose values Jackson writes without a type, even with a class given.
const NATURAL_CLASSES: [&str; 4] = ["java.lang.String", "java.lang.Integer", "java.lang.Double", "java.lang.Boolean"];

/// Turns service instances into bytes and back, as Curator's `InstanceSerializer`. The service
/// discovery stores what [`serialize`](InstanceSerializer::serialize) returns as a node's data.
pub trait InstanceSerializer<T>: Send + Sync {
    /// The instance's bytes.
    fn serialize(&self, instance: &ServiceInstance<T>) -> Result<Vec<u8>, DiscoveryError>;

    /// The instance in `bytes`; a typed error, never a panic, for anything that is not one.
    fn deserialize(&self, bytes: &[u8]) -> Result<ServiceInstance<T>, DiscoveryError>;
}

/// The JSON serializer, compatible with Curator 5.4's `JsonInstanceSerializer` both ways.
///
/// Writing, with [`JsonInstanceSerializer::new`], gives the bytes Curator's default serializer
/// gives: `{"name":..,"id":..,"address":..,"port":..,"sslPort":..,"payload":..,
/// "registrationTimeUTC":..,"serviceType":..,"uriSpec":..}`, with `null` for what is missing,
/// no spaces, Jackson's string escapes and Java's number format. `enabled` is left out, as
/// Curator's default "compatible serialization mode" (CURATOR-275) leaves it out;
/// [`write_enabled(true)`](JsonInstanceSerializer::write_enabled) adds it last, as Curator's
/// `JsonInstanceSerializer(payloadClass, false)`.
///
/// The payload carries Jackson's type information as Curator writes it, so that Java reads it:
/// - a JSON object gets `"@class"` first (`{"@class":"com.example.Payload","val":..}`) when
///   [`payload_class`](JsonInstanceSerializer::payload_class) names a class; without one it is
///   written plain, which Java reads as a `LinkedHashMap`;
/// - a JSON array is wrapped with its class, `["java.util.ArrayList",[..]]` (the default class);
/// - a string, integer, float or boolean is written plain (Java reads `String`, `Integer` or
///   `Long`, `Double`, `Boolean`), unless a class other than those is named: then it is wrapped,
///   `["java.lang.Long",5]`, as Jackson writes such values (an enum, a `Long`, ...);
/// - no payload is `null`.
///
/// Reading accepts what Curator writes, in either mode, and more: unknown fields are ignored;
/// a missing `enabled` is true (`null` is false, as Jackson reads a `boolean`); missing `name`
/// or `id` are `""`, a missing or `null` `serviceType` is `DYNAMIC` and a missing
/// `registrationTimeUTC` is 0, as Curator's defaults. The payload's type information is
/// dropped before it is read as `T`: `"@class"` is removed from an object and a `[class, value]`
/// array is unwrapped (Jackson writes every array payload so). Anything else is a
/// [`DiscoveryError::BadJson`] (empty, not JSON, not an object, a field of the wrong type: a
/// port must be a JSON integer where Jackson would also take `"12"`) or a
/// [`DiscoveryError::BadPayload`].
///
/// Limits of the byte equality: Java 17 sometimes writes a `double` with more digits than the
/// shortest that reads back (`1e23` as `9.999999999999999E22`; Java 19 and later do not), and
/// Java writes `4.9E-324` where the shortest is `5.0E-324`; object payloads held as
/// [`serde_json::Value`] are written with their keys sorted (serde_json's map), where Java writes
/// a `HashMap` in hash order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonInstanceSerializer {
    payload_class: Option<String>,
    write_enabled: bool,
}

impl JsonInstanceSerializer {
    /// Curator's default serializer: no `enabled`, no payload class.
    pub fn new() -> JsonInstanceSerializer {
        JsonInstanceSerializer::default()
    }

    /// The Java class written as the payload's type (see the type's documentation), for
    /// payloads Java must read as that class, e.g. `"com.example.InstanceDetails"`.
    pub fn payload_class(mut self, class: impl Into<String>) -> JsonInstanceSerializer {
        self.payload_class = Some(class.into());
        self
    }

    /// Whether to write `enabled` (last). False by default, as Curator's default (clients of
    /// Curator before 2.10 fail on the field); true is Curator's
    /// `JsonInstanceSerializer(payloadClass, false)`.
    pub fn write_enabled(mut self, write: bool) -> JsonInstanceSerializer {
        self.write_enabled = write;
        self
    }

    fn write_payload<T: Serialize>(&self, out: &mut Vec<u8>, payload: Option<&T>) -> Result<(), DiscoveryError> {
        let Some(payload) = payload else {
            out.extend_from_slice(b"null");
            return Ok(());
        };
        let mut plain = Vec::new();
        write_json(&mut plain, payload)
            .map_err(|e| DiscoveryError::PayloadNotSerializable { reason: e.to_string() })?;
        let class = self.payload_class.as_deref();
        match plain.first() {
            Some(b'{') => match class {
                Some(class) => {
                    out.extend_from_slice(b"{");
                    write_key(out, CLASS_PROPERTY);
                    write_string(out, class);
                    if plain.len() > 2 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&plain[1..]);
                }
                None => out.extend_from_slice(&plain),
            },
            Some(b'[') => wrap(out, class.unwrap_or(DEFAULT_ARRAY_CLASS), &plain),
            Some(b'n') | None => out.extend_from_slice(b"null"),
            Some(_) => match class {
                Some(class) if !NATURAL_CLASSES.contains(&class) => wrap(out, class, &plain),
                _ => out.extend_from_slice(&plain),
            },
        }
        Ok(())
    }
}

impl<T: Serialize + DeserializeOwned> InstanceSerializer<T> for JsonInstanceSerializer {
    fn serialize(&self, instance: &ServiceInstance<T>) -> Result<Vec<u8>, DiscoveryError> {
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        write_key(&mut out, "name");
        write_string(&mut out, &instance.name);
        out.push(b',');
        write_key(&mut out, "id");
        write_string(&mut out, &instance.id);
        out.push(b',');
        write_key(&mut out, "address");
        write_infallible(&mut out, &instance.address);
        out.push(b',');
        write_key(&mut out, "port");
        write_infallible(&mut out, &instance.port);
        out.push(b',');
        write_key(&mut out, "sslPort");
        write_infallible(&mut out, &instance.ssl_port);
        out.push(b',');
        write_key(&mut out, "payload");
        self.write_payload(&mut out, instance.payload.as_ref())?;
        out.push(b',');
        write_key(&mut out, "registrationTimeUTC");
        write_infallible(&mut out, &instance.registration_time_utc);
        out.push(b',');
        write_key(&mut out, "serviceType");
        write_infallible(&mut out, &instance.service_type);
        out.push(b',');
        write_key(&mut out, "uriSpec");
        write_infallible(&mut out, &instance.uri_spec);
        if self.write_enabled {
            out.push(b',');
            write_key(&mut out, "enabled");
            write_infallible(&mut out, &instance.enabled);
        }
        out.push(b'}');
        Ok(out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<ServiceInstance<T>, DiscoveryError> {
        let bad = |reason: String| DiscoveryError::BadJson { reason };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(bad("empty data".to_string()));
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if !value.is_object() {
            return Err(bad(format!("a JSON object was expected, found {}", kind(&value))));
        }
        let wire = Wire::deserialize(value).map_err(|e| bad(e.to_string()))?;
        let payload = match wire.payload {
            None | Some(Value::Null) => None,
            Some(payload) => Some(
                T::deserialize(without_type(payload))
                    .map_err(|e| DiscoveryError::BadPayload { reason: e.to_string() })?,
            ),
        };
        Ok(ServiceInstance {
            name: wire.name.unwrap_or_default(),
            id: wire.id.unwrap_or_default(),
            address: wire.address,
            port: wire.port,
            ssl_port: wire.ssl_port,
            payload,
            registration_time_utc: wire.registration_time_utc.unwrap_or(0),
            service_type: wire.service_type.unwrap_or_default(),
            uri_spec: wire.uri_spec,
            enabled: wire.enabled.unwrap_or(false),
        })
    }
}

/// The fields as read, before Curator's defaults are applied. `Option` twice for `enabled`:
/// missing (true) is not `null` (false).
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    port: Option<i32>,
    #[serde(default, rename = "sslPort")]
    ssl_port: Option<i32>,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default, rename = "registrationTimeUTC")]
    registration_time_utc: Option<i64>,
    #[serde(default, rename = "serviceType")]
    service_type: Option<ServiceType>,
    #[serde(default, rename = "uriSpec")]
    uri_spec: Option<UriSpec>,
    #[serde(default = "missing_enabled", deserialize_with = "present")]
    enabled: Option<bool>,
}

fn missing_enabled() -> Option<bool> {
    Some(true)
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Option::<bool>::deserialize(deserializer)
}

/// The payload without Jackson's type information.
fn without_type(payload: Value) -> Value {
    match payload {
        Value::Object(mut fields) => {
            if fields.get(CLASS_PROPERTY).is_some_and(Value::is_string) {
                fields.remove(CLASS_PROPERTY);
            }
            Value::Object(fields)
        }
        Value::Array(mut items) if items.len() == 2 && items[0].is_string() => items.pop().unwrap_or(Value::Null),
        other => other,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `[class,value]`: Jackson's wrapper for a typed value that is not an object.
fn wrap(out: &mut Vec<u8>, class: &str, value: &[u8]) {
    out.push(b'[');
    write_string(out, class);
    out.push(b',');
    out.extend_from_slice(value);
    out.push(b']');
}

fn write_key(out: &mut Vec<u8>, key: &str) {
    write_string(out, key);
    out.push(b':');
}

fn write_string(out: &mut Vec<u8>, text: &str) {
    write_infallible(out, text);
}

/// Writes a value whose serialization cannot fail (strings, numbers, the model's own types)
/// into a `Vec`, which cannot fail either.
fn write_infallible<S: Serialize + ?Sized>(out: &mut Vec<u8>, value: &S) {
    let written = write_json(out, value);
    debug_assert!(written.is_ok(), "the model's own fields always serialize");
}

/// Writes `value` as Jackson would: compact, Jackson's escapes, Java's number format.
pub(crate) fn write_json<S: Serialize + ?Sized>(out: &mut Vec<u8>, value: &S) -> Result<(), serde_json::Error> {
    value.serialize(&mut serde_json::Serializer::with_formatter(out, JacksonFormatter))
}

/// serde_json's compact output, with what Jackson writes differently: `\u001F` (upper-case
/// hex) for control characters without a short escape, and floats as Java's `Double.toString`
/// and `Float.toString` (`1.0E20`, `100.0`, `9.9E-4`).
struct JacksonFormatter;

impl Formatter for JacksonFormatter {
    fn write_char_escape<W: ?Sized + io::Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        let short = match escape {
            CharEscape::Quote => b'"',
            CharEscape::ReverseSolidus => b'\\',
            CharEscape::Solidus => b'/',
            CharEscape::Backspace => b'b',
            CharEscape::FormFeed => b'f',
            CharEscape::LineFeed => b'n',
            CharEscape::CarriageReturn => b'r',
            CharEscape::Tab => b't',
            CharEscape::AsciiControl(byte) => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                let escaped = [b'\\', b'u', b'0', b'0', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xF)]];
                return writer.write_all(&escaped);
            }
        };
        writer.write_all(&[b'\\', short])
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(java_float(&format!("{:e}", value.abs()), value.is_sign_negative(), value.abs()).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        let magnitude = f64::from(value.abs());
        writer.write_all(java_float(&format!("{:e}", value.abs()), value.is_sign_negative(), magnitude).as_bytes())
    }
}

/// Java's `Double.toString` from Rust's shortest exponent form (`1.2345e2`) of the magnitude:
/// plain between 10^-3 and 10^7 (`123.45`, `100.0`, `0.001`), else computerized scientific
/// (`1.0E7`, `9.9E-4`), always with a digit after the point.
fn java_float(exponent_form: &str, negative: bool, magnitude: f64) -> String {
    let sign = if negative { "-" } else { "" };
    if magnitude == 0.0 {
        return format!("{sign}0.0");
    }
    let (mantissa, exponent) = exponent_form.split_once('e').unwrap_or((exponent_form, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let (first, rest) = digits.split_at(1.min(digits.len()));
    if (1e-3..1e7).contains(&magnitude) {
        if exponent >= 0 {
            let whole_len = usize::try_from(exponent).unwrap_or(0) + 1;
            let (whole, fraction) = if digits.len() > whole_len {
                (digits[..whole_len].to_string(), digits[whole_len..].to_string())
            } else {
                (format!("{digits:0<whole_len$}"), "0".to_string())
            };
            format!("{sign}{whole}.{fraction}")
        } else {
            let zeros = "0".repeat(usize::try_from(-exponent - 1).unwrap_or(0));
            format!("{sign}0.{zeros}{digits}")
        }
    } else {
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{sign}{first}.{rest}E{exponent}")
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
