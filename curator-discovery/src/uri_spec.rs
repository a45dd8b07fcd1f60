//! [`UriSpec`]: a URI template with `{variable}` fields, as Curator's `UriSpec`.

use std::collections::HashMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{DiscoveryError, ServiceInstance};

/// `{scheme}`: `http`, or `https` when the instance has an SSL port.
pub const FIELD_SCHEME: &str = "scheme";
/// `{name}`: the instance's service name.
pub const FIELD_NAME: &str = "name";
/// `{id}`: the instance's id.
pub const FIELD_ID: &str = "id";
/// `{address}`: the instance's address (empty when it has none).
pub const FIELD_ADDRESS: &str = "address";
/// `{port}`: the instance's port (empty when it has none).
pub const FIELD_PORT: &str = "port";
/// `{ssl-port}`: the instance's SSL port (empty when it has none).
pub const FIELD_SSL_PORT: &str = "ssl-port";
/// `{registration-time-utc}`: the instance's registration time, milliseconds since the epoch.
pub const FIELD_REGISTRATION_TIME_UTC: &str = "registration-time-utc";
/// `{service-type}`: the instance's service type in lower case (`dynamic`, `static`, ...).
pub const FIELD_SERVICE_TYPE: &str = "service-type";
/// `{[}`: a literal `{`.
pub const FIELD_OPEN_BRACE: &str = "[";
/// `{]}`: a literal `}`.
pub const FIELD_CLOSE_BRACE: &str = "]";

/// One piece of a [`UriSpec`]: literal text, or the name of a variable to replace.
///
/// JSON: `{"value":"...","variable":true|false}`; a missing field reads as `""` / `false`, as
/// Curator's `UriSpec.Part` default constructor has them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Part {
    /// The literal text, or the variable's name.
    #[serde(default)]
    pub value: String,
    /// True for a variable (`{value}` in the template), false for literal text.
    #[serde(default)]
    pub variable: bool,
}

impl Part {
    /// Literal text.
    pub fn literal(value: impl Into<String>) -> Part {
        Part { value: value.into(), variable: false }
    }

    /// A variable, replaced when the spec is built.
    pub fn variable(name: impl Into<String>) -> Part {
        Part { value: name.into(), variable: true }
    }
}

/// A URI template such as `{scheme}://{address}:{port}/api`, stored with a service instance so
/// that clients can build the instance's URI ([`UriSpec::build`]).
///
/// Parsing follows Curator's `UriSpec(String)`: text between `{` and `}` is a variable (its name
/// trimmed of spaces and control characters), everything else is literal; `{}` adds nothing.
/// A `{` inside a variable, a `}` without its `{` or an unclosed `{` is an
/// [`DiscoveryError::InvalidUriSpec`]. Write `{[}` and `{]}` for literal braces.
///
/// JSON (inside a service instance): `{"parts":[{"value":"scheme","variable":true},...]}`.
///
/// ```
/// use std::collections::HashMap;
/// use curator_discovery::{ServiceInstance, UriSpec};
///
/// let spec: UriSpec = "{scheme}://{address}:{port}/{name}".parse().unwrap();
/// let instance: ServiceInstance = ServiceInstance::builder("search").address("10.0.0.7").port(8080).build();
/// assert_eq!(spec.build(&instance, &HashMap::new()), "http://10.0.0.7:8080/search");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct UriSpec {
    #[serde(default)]
    parts: Vec<Part>,
}

impl UriSpec {
    /// An empty spec, to fill with [`UriSpec::add`].
    pub fn new() -> UriSpec {
        UriSpec::default()
    }

    /// Parses a template (see the type's documentation).
    pub fn parse(template: &str) -> Result<UriSpec, DiscoveryError> {
        let invalid = |reason| DiscoveryError::InvalidUriSpec { spec: template.to_string(), reason };
        let mut parts = Vec::new();
        let mut inside_variable = false;
        let mut rest = template;
        while !rest.is_empty() {
            let end = rest.find(['{', '}']).unwrap_or(rest.len());
            if end == 0 {
                if rest.starts_with('{') {
                    if inside_variable {
                        return Err(invalid("{ is not allowed inside of a variable specification"));
                    }
                    inside_variable = true;
                } else {
                    if !inside_variable {
                        return Err(invalid("} must be preceded by {"));
                    }
                    inside_variable = false;
                }
                rest = &rest[1..];
                continue;
            }
            let token = &rest[..end];
            rest = &rest[end..];
            if inside_variable {
                // Java's String.trim: everything up to and including the space.
                parts.push(Part::variable(token.trim_matches(|c: char| c <= ' ')));
            } else {
                parts.push(Part::literal(token));
            }
        }
        if inside_variable {
            return Err(invalid("final variable not closed - expected }"));
        }
        Ok(UriSpec { parts })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Iterates over the parts.
    pub fn iter(&self) -> std::slice::Iter<'_, Part> {
        self.parts.iter()
    }

    /// Adds a part at the end.
    pub fn add(&mut self, part: Part) {
        self.parts.push(part);
    }

    /// Removes the first part equal to `part`, if any.
    pub fn remove(&mut self, part: &Part) {
        if let Some(at) = self.parts.iter().position(|p| p == part) {
            self.parts.remove(at);
        }
    }

    /// Builds the URI for `instance`, as Curator's `UriSpec.build(instance, variables)`.
    ///
    /// Variables: `scheme` is `https` when the instance has an SSL port, else `http`; `name`,
    /// `id`, `address`, `port`, `ssl-port`, `registration-time-utc` are the instance's (empty
    /// where it has none); `service-type` is its type in lower case; `[` and `]` are `{` and `}`.
    /// Entries of `variables` are added last and so replace any of these. A variable that is
    /// found nowhere is left out (replaced by nothing).
    pub fn build<T>(&self, instance: &ServiceInstance<T>, variables: &HashMap<String, String>) -> String {
        let mut known = Self::always_known();
        let text = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
        known.insert(FIELD_NAME, instance.name.clone());
        known.insert(FIELD_ID, instance.id.clone());
        known.insert(FIELD_ADDRESS, instance.address.clone().unwrap_or_default());
        known.insert(FIELD_PORT, text(instance.port));
        known.insert(FIELD_SSL_PORT, text(instance.ssl_port));
        known.insert(FIELD_REGISTRATION_TIME_UTC, instance.registration_time_utc.to_string());
        known.insert(FIELD_SERVICE_TYPE, instance.service_type.as_str().to_lowercase());
        if instance.ssl_port.is_some() {
            known.insert(FIELD_SCHEME, "https".to_string());
        }
        self.render(known, variables)
    }

    /// Builds the URI with no instance (Curator's `UriSpec.build(variables)`): only `scheme`
    /// (`http`), `[`, `]` and the entries of `variables` are known.
    pub fn build_without_instance(&self, variables: &HashMap<String, String>) -> String {
        self.render(Self::always_known(), variables)
    }

    fn always_known() -> HashMap<&'static str, String> {
        HashMap::from([
            (FIELD_OPEN_BRACE, "{".to_string()),
            (FIELD_CLOSE_BRACE, "}".to_string()),
            (FIELD_SCHEME, "http".to_string()),
        ])
    }

    fn render(&self, known: HashMap<&'static str, String>, variables: &HashMap<String, String>) -> String {
        let mut uri = String::new();
        for part in &self.parts {
            if !part.variable {
                uri.push_str(&part.value);
            } else if let Some(value) = variables.get(&part.value) {
                uri.push_str(value);
            } else if let Some(value) = known.get(part.value.as_str()) {
                uri.push_str(value);
            }
        }
        uri
    }
}

impl FromStr for UriSpec {
    type Err = DiscoveryError;

    fn from_str(template: &str) -> Result<UriSpec, DiscoveryError> {
        UriSpec::parse(template)
    }
}

impl<'a> IntoIterator for &'a UriSpec {
    type Item = &'a Part;
    type IntoIter = std::slice::Iter<'a, Part>;

    fn into_iter(self) -> Self::IntoIter {
        self.parts.iter()
    }
}

impl FromIterator<Part> for UriSpec {
    fn from_iter<I: IntoIterator<Item = Part>>(parts: I) -> UriSpec {
        UriSpec { parts: parts.into_iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServiceType;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn check(spec: &UriSpec, expected: &[(&str, bool)]) {
        let got: Vec<(&str, bool)> = spec.iter().map(|p| (p.value.as_str(), p.variable)).collect();
        assert_eq!(got, expected);
    }

    /// Follows Curator's `TestUriSpec.testScheme`: `{scheme}` is `http`, and `https` once the
    /// instance has an SSL port.
    #[test]
    fn scheme_is_https_with_an_ssl_port() {
        let spec = UriSpec::parse("{scheme}://foo.com").unwrap();
        let instance: ServiceInstance = ServiceInstance::builder("foo").id("x").port(5).build();
        assert_eq!(spec.build(&instance, &HashMap::new()), "http://foo.com");
        let instance: ServiceInstance = ServiceInstance::builder("foo").id("x").port(5).ssl_port(5).build();
        assert_eq!(spec.build(&instance, &HashMap::new()), "https://foo.com");
    }

    /// Follows Curator's `TestUriSpec.testFromInstance`: every instance variable, and a given
    /// variable replacing a predefined one (`scheme`).
    #[test]
    fn instance_variables_and_overrides() {
        let instance: ServiceInstance = ServiceInstance::builder("foo")
            .address("1.2.3.4")
            .id("bar")
            .port(5)
            .ssl_port(6)
            .registration_time_utc(789)
            .service_type(ServiceType::Permanent)
            .build();
        let spec =
            UriSpec::parse("{scheme}://{address}:{port}:{ssl-port}/{name}/{id}/{registration-time-utc}/{service-type}")
                .unwrap();
        assert_eq!(spec.build(&instance, &vars(&[("scheme", "test")])), "test://1.2.3.4:5:6/foo/bar/789/permanent");
    }

    /// Follows Curator's `TestUriSpec.testEscapes`: `{[}` and `{]}` give literal braces.
    #[test]
    fn escapes() {
        let spec = UriSpec::parse("{one}two-three-{[}four{]}-five{six}").unwrap();
        check(
            &spec,
            &[
                ("one", true),
                ("two-three-", false),
                ("[", true),
                ("four", false),
                ("]", true),
                ("-five", false),
                ("six", true),
            ],
        );
        assert_eq!(spec.build_without_instance(&vars(&[("one", "1"), ("six", "6")])), "1two-three-{four}-five6");
    }

    /// Follows Curator's `TestUriSpec.testBasic`: adjacent variables and literals.
    #[test]
    fn basic_parts() {
        let spec = UriSpec::parse("{one}{two}three-four-five{six}seven{eight}").unwrap();
        check(
            &spec,
            &[
                ("one", true),
                ("two", true),
                ("three-four-five", false),
                ("six", true),
                ("seven", false),
                ("eight", true),
            ],
        );
    }

    /// Missing instance fields build as empty text, unknown variables as nothing, variable names
    /// are trimmed, literals are not, and `{}` adds no part (Curator's StringTokenizer).
    #[test]
    fn missing_values_and_trimming() {
        let instance: ServiceInstance = ServiceInstance::builder("svc").no_address().build();
        let spec = UriSpec::parse("{ scheme }://{address}:{port}{nope}{} /x").unwrap();
        check(
            &spec,
            &[
                ("scheme", true),
                ("://", false),
                ("address", true),
                (":", false),
                ("port", true),
                ("nope", true),
                (" /x", false),
            ],
        );
        assert_eq!(spec.build(&instance, &HashMap::new()), "http://: /x");
        assert_eq!(UriSpec::parse("").unwrap(), UriSpec::new());
    }

    /// Bad templates are typed errors, never panics: the three checks of Curator's constructor.
    #[test]
    fn bad_templates_are_errors() {
        for (template, reason) in [
            ("{a{b}}", "{ is not allowed inside of a variable specification"),
            ("a}", "} must be preceded by {"),
            ("{scheme}://{address", "final variable not closed - expected }"),
        ] {
            let parsed = template.parse::<UriSpec>();
            assert!(
                matches!(&parsed, Err(DiscoveryError::InvalidUriSpec { spec, reason: r }) if spec == template && *r == reason),
                "{template}: {parsed:?}"
            );
        }
    }

    /// The JSON of a spec is Curator's (`{"parts":[{"value":..,"variable":..}]}`), and parts
    /// missing a field read with Curator's defaults.
    #[test]
    fn json_is_curators() {
        let spec = UriSpec::parse("{a}/b/{c}").unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            json,
            r#"{"parts":[{"value":"a","variable":true},{"value":"/b/","variable":false},{"value":"c","variable":true}]}"#
        );
        assert_eq!(serde_json::from_str::<UriSpec>(&json).unwrap(), spec);
        let partial: UriSpec = serde_json::from_str(r#"{"parts":[{"value":"x"},{}]}"#).unwrap();
        assert_eq!(partial.parts(), &[Part::literal("x"), Part::literal("")]);
    }

    /// `add` and `remove` edit the parts as Curator's.
    #[test]
    fn add_and_remove() {
        let mut spec = UriSpec::new();
        spec.add(Part::variable("scheme"));
        spec.add(Part::literal("://x"));
        assert_eq!(spec.build_without_instance(&HashMap::new()), "http://x");
        spec.remove(&Part::variable("scheme"));
        assert_eq!(spec.parts(), &[Part::literal("://x")]);
    }
}
