//! Tests of the instance JSON against the bytes Curator 5.4 (Jackson) writes.

use super::*;
use serde_json::json;

/// Curator's test instance: `new ServiceInstance<>("name", "id", "address", 10, 20, payload,
/// 0, ServiceType.DYNAMIC, new UriSpec("{a}/b/{c}"), enabled)`.
fn curator_instance<T>(payload: Option<T>, enabled: bool) -> ServiceInstance<T> {
    ServiceInstance {
        name: "name".into(),
        id: "id".into(),
        address: Some("address".into()),
        port: Some(10),
        ssl_port: Some(20),
        payload,
        registration_time_utc: 0,
        service_type: ServiceType::Dynamic,
        uri_spec: Some(UriSpec::parse("{a}/b/{c}").unwrap()),
        enabled,
    }
}

const URI_SPEC: &str =
    r#"{"parts":[{"value":"a","variable":true},{"value":"/b/","variable":false},{"value":"c","variable":true}]}"#;

/// The bytes Curator 5.4 writes for `curator_instance`, with `payload` as written.
fn curator_bytes(payload: &str, enabled: Option<bool>) -> String {
    let enabled = enabled.map(|e| format!(r#","enabled":{e}"#)).unwrap_or_default();
    format!(
        r#"{{"name":"name","id":"id","address":"address","port":10,"sslPort":20,"payload":{payload},"registrationTimeUTC":0,"serviceType":"DYNAMIC","uriSpec":{URI_SPEC}{enabled}}}"#
    )
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Payload {
    val: String,
}

/// Follows Curator's `TestJsonInstanceSerializer.testBasic`: a string payload writes as
/// Curator writes it and reads back equal, field for field.
#[test]
fn basic_round_trip() {
    let serializer = JsonInstanceSerializer::new();
    let instance = curator_instance(Some("payload".to_string()), true);
    let bytes = serializer.serialize(&instance).unwrap();
    assert_eq!(text(bytes.clone()), curator_bytes(r#""payload""#, None));
    let back: ServiceInstance<String> = serializer.deserialize(&bytes).unwrap();
    assert_eq!(back, instance);
}

/// Follows Curator's `TestJsonInstanceSerializer.testWrongPayloadType`: a string payload
/// read as a number is an error (Curator: `ClassCastException`).
#[test]
fn wrong_payload_type_is_an_error() {
    let bytes = curator_instance(Some("payload".to_string()), true).to_json().unwrap();
    let read = ServiceInstance::<f64>::from_json(&bytes);
    assert!(matches!(read, Err(DiscoveryError::BadPayload { .. })), "{read:?}");
}

/// Follows Curator's `TestJsonInstanceSerializer.testNoPayload`: no payload is `null`.
#[test]
fn no_payload() {
    let instance = curator_instance::<Value>(None, true);
    let bytes = instance.to_json().unwrap();
    assert_eq!(text(bytes.clone()), curator_bytes("null", None));
    assert_eq!(ServiceInstance::from_json(&bytes).unwrap(), instance);
}

/// Follows Curator's `TestJsonInstanceSerializer.testNoEnabledState`: `{}` reads, enabled,
/// with the defaults of Curator's no-argument constructor.
#[test]
fn no_enabled_state_is_enabled() {
    let instance: ServiceInstance = ServiceInstance::from_json(b"{}").unwrap();
    assert!(instance.enabled);
    assert_eq!(instance.name, "");
    assert_eq!(instance.id, "");
    assert_eq!(instance.registration_time_utc, 0);
    assert_eq!(instance.service_type, ServiceType::Dynamic);
    assert_eq!((instance.address, instance.port, instance.payload, instance.uri_spec), (None, None, None, None));
}

/// Follows Curator's `TestJsonInstanceSerializer.testPayloadAsList` (with
/// `compatibleSerializationMode` false): a list is wrapped with its class, `enabled` is
/// written last, and both read back.
#[test]
fn payload_as_list() {
    let serializer = JsonInstanceSerializer::new().write_enabled(true);
    let instance = curator_instance(Some(json!(["Test value 1", "Test value 2"])), false);
    let bytes = serializer.serialize(&instance).unwrap();
    assert_eq!(
        text(bytes.clone()),
        curator_bytes(r#"["java.util.ArrayList",["Test value 1","Test value 2"]]"#, Some(false))
    );
    let back: ServiceInstance = serializer.deserialize(&bytes).unwrap();
    assert_eq!(back, instance);
}

/// Follows Curator's `TestJsonInstanceSerializer.testPayloadAsMap`: a map payload with its
/// class as `"@class"`, first, and read back without it.
#[test]
fn payload_as_map() {
    let serializer = JsonInstanceSerializer::new().payload_class("java.util.TreeMap").write_enabled(true);
    let instance = curator_instance(Some(json!({"1": "Test value 1", "2": "Test value 2"})), false);
    let bytes = serializer.serialize(&instance).unwrap();
    assert_eq!(
        text(bytes.clone()),
        curator_bytes(r#"{"@class":"java.util.TreeMap","1":"Test value 1","2":"Test value 2"}"#, Some(false))
    );
    let back: ServiceInstance = serializer.deserialize(&bytes).unwrap();
    assert_eq!(back, instance);
}

/// Follows Curator's `TestJsonInstanceSerializer.testPayloadClass`: a typed payload with
/// the Java class named, as Curator writes its `Payload` class; read back typed, and as a
/// `Value` without `"@class"`.
#[test]
fn payload_class() {
    let class = "org.apache.curator.x.discovery.TestJsonInstanceSerializer$Payload";
    let serializer = JsonInstanceSerializer::new().payload_class(class);
    let instance = curator_instance(Some(Payload { val: "Test value".into() }), true);
    let bytes = serializer.serialize(&instance).unwrap();
    assert_eq!(text(bytes.clone()), curator_bytes(&format!(r#"{{"@class":"{class}","val":"Test value"}}"#), None));
    let back: ServiceInstance<Payload> = serializer.deserialize(&bytes).unwrap();
    assert_eq!(back, instance);
    let untyped: ServiceInstance = serializer.deserialize(&bytes).unwrap();
    assert_eq!(untyped.payload, Some(json!({"val": "Test value"})));
}

/// Follows Curator's `TestJsonInstanceSerializerCompatibility.testCompatibilityMode` and
/// `testBackwardCompatibility`: by default `enabled` is not written, so a disabled instance
/// reads back enabled.
#[test]
fn compatible_mode_drops_enabled() {
    let instance = curator_instance(Some(Payload { val: "test".into() }), false);
    let bytes = instance.to_json().unwrap();
    assert!(!text(bytes.clone()).contains("enabled"));
    let back: ServiceInstance<Payload> = ServiceInstance::from_json(&bytes).unwrap();
    assert!(back.enabled);
    assert_eq!(back, ServiceInstance { enabled: true, ..instance });
}

/// Follows Curator's `TestJsonInstanceSerializerCompatibility.testFutureChanges`: fields a
/// newer writer adds are ignored, and a written `enabled` is read.
#[test]
fn unknown_fields_are_ignored() {
    let bytes = br#"{"name":"name","id":"id","address":"address","port":10,"sslPort":20,"payload":"hey","registrationTimeUTC":0,"serviceType":"DYNAMIC","uriSpec":null,"enabled":false,"new1":"what","new2":10101,"new3":1700000000000,"new4":"http://hey","new5":{"deep":[1,2]}}"#;
    let instance: ServiceInstance<String> = ServiceInstance::from_json(bytes).unwrap();
    assert_eq!(instance.name, "name");
    assert_eq!(instance.payload.as_deref(), Some("hey"));
    assert!(!instance.enabled);
}

/// Payload shapes as Jackson types them (bytes from Curator 5.4): natural scalars plain,
/// other classes wrapped, objects plain without a class, an empty object with its class.
#[test]
fn payload_shapes() {
    let write = |serializer: JsonInstanceSerializer, payload: Value| {
        let bytes = serializer.serialize(&curator_instance(Some(payload), true)).unwrap();
        let bytes = text(bytes);
        let start = bytes.find(r#""payload":"#).unwrap() + 10;
        let end = bytes.find(r#","registrationTimeUTC""#).unwrap();
        bytes[start..end].to_string()
    };
    let plain = JsonInstanceSerializer::new;
    assert_eq!(write(plain(), json!("str")), r#""str""#);
    assert_eq!(write(plain(), json!(5)), "5");
    assert_eq!(write(plain(), json!(2.5)), "2.5");
    assert_eq!(write(plain(), json!(true)), "true");
    assert_eq!(write(plain(), json!({"a": "x", "b": 2})), r#"{"a":"x","b":2}"#);
    assert_eq!(write(plain().payload_class("java.lang.Long"), json!(5)), r#"["java.lang.Long",5]"#);
    assert_eq!(write(plain().payload_class("java.lang.String"), json!("s")), r#""s""#);
    assert_eq!(write(plain().payload_class("java.util.HashMap"), json!({})), r#"{"@class":"java.util.HashMap"}"#);
    assert_eq!(write(plain().payload_class("java.util.LinkedList"), json!([1])), r#"["java.util.LinkedList",[1]]"#);
    // Reading unwraps every shape Jackson writes.
    for (written, payload) in [
        (r#"["java.lang.Long",5]"#, json!(5)),
        (r#"{"@class":"java.util.HashMap"}"#, json!({})),
        (r#"["java.util.ArrayList",["x","y"]]"#, json!(["x", "y"])),
        (r#"{"@class":"java.util.LinkedHashMap","k":[1,2]}"#, json!({"k": [1, 2]})),
        ("[1,2,3]", json!([1, 2, 3])),
    ] {
        let read: ServiceInstance = ServiceInstance::from_json(curator_bytes(written, None).as_bytes()).unwrap();
        assert_eq!(read.payload, Some(payload), "{written}");
    }
}

/// Strings are escaped as Jackson escapes them (bytes from Curator 5.4): short escapes,
/// `\u00XX` in upper case for other control characters, everything else as UTF-8.
#[test]
fn strings_escape_as_jackson() {
    let mut out = Vec::new();
    write_json(&mut out, "\u{8}\t\u{c}\r\n\u{0}\u{1f}\u{7f}\u{80}\u{2028}😀<>&'\\\"").unwrap();
    assert_eq!(text(out), "\"\\b\\t\\f\\r\\n\\u0000\\u001F\u{7f}\u{80}\u{2028}😀<>&'\\\\\\\"\"");
}

/// Floats are written as Java's `Double.toString` (each expected text from Jackson 2.14).
#[test]
fn floats_write_as_java() {
    for (value, java) in [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (1e6, "1000000.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (1.5e7, "1.5E7"),
        (0.001, "0.001"),
        (0.00099, "9.9E-4"),
        (1e-7, "1.0E-7"),
        (123.456, "123.456"),
        (1e20, "1.0E20"),
        (-2.5e-10, "-2.5E-10"),
        (0.1, "0.1"),
        (f64::MAX, "1.7976931348623157E308"),
    ] {
        let mut out = Vec::new();
        write_json(&mut out, &value).unwrap();
        assert_eq!(text(out), java, "{value:e}");
    }
    let mut out = Vec::new();
    write_json(&mut out, &[1.5f32, 1e10f32]).unwrap();
    assert_eq!(text(out), "[1.5,1.0E10]");
}

/// Bad data is a typed error, never a panic: empty, not JSON, not an object, truncated,
/// not UTF-8, and fields of the wrong type.
#[test]
fn bad_data_is_an_error() {
    let cases: &[&[u8]] = &[
        b"",
        b"  \n",
        b"not json",
        b"[]",
        b"\"name\"",
        b"null",
        b"{\"name\":\"n\"",
        b"{\"name\":\"\xff\xfe\"}",
        br#"{"name":5}"#,
        br#"{"port":"12"}"#,
        br#"{"port":1.5}"#,
        br#"{"port":4294967296}"#,
        br#"{"sslPort":true}"#,
        br#"{"registrationTimeUTC":"5"}"#,
        br#"{"serviceType":"dynamic"}"#,
        br#"{"serviceType":"OTHER"}"#,
        br#"{"uriSpec":"{scheme}://x"}"#,
        br#"{"uriSpec":{"parts":[{"value":1}]}}"#,
        br#"{"enabled":"yes"}"#,
    ];
    for bytes in cases {
        let read = ServiceInstance::<Value>::from_json(bytes);
        assert!(matches!(read, Err(DiscoveryError::BadJson { .. })), "{:?}: {read:?}", String::from_utf8_lossy(bytes));
    }
    let typed = ServiceInstance::<Payload>::from_json(br#"{"payload":{"@class":"x.Payload","val":3}}"#);
    assert!(matches!(typed, Err(DiscoveryError::BadPayload { .. })), "{typed:?}");
}

/// Nulls read as Jackson reads them: `enabled: null` is false (a Java `boolean`), a null
/// time is 0, a null type is DYNAMIC, null strings are missing.
#[test]
fn nulls_read_as_jackson() {
    let instance: ServiceInstance = ServiceInstance::from_json(
        br#"{"name":null,"id":null,"address":null,"registrationTimeUTC":null,"serviceType":null,"uriSpec":null,"enabled":null}"#,
    )
    .unwrap();
    assert_eq!((instance.name.as_str(), instance.id.as_str(), instance.address), ("", "", None));
    assert_eq!((instance.registration_time_utc, instance.service_type), (0, ServiceType::Dynamic));
    assert!(!instance.enabled);
}

/// A payload that cannot be JSON is a typed error when writing.
#[test]
fn unserializable_payload_is_an_error() {
    let mut payload = std::collections::BTreeMap::new();
    payload.insert(vec![1u8], 1);
    let instance = curator_instance(Some(payload), true);
    let written = JsonInstanceSerializer::new().serialize(&instance);
    assert!(matches!(written, Err(DiscoveryError::PayloadNotSerializable { .. })), "{written:?}");
}

/// Every service type and missing optional fields write and read back; the builder's
/// instances round-trip with and without `enabled`.
#[test]
fn round_trips() {
    for service_type in
        [ServiceType::Dynamic, ServiceType::Static, ServiceType::Permanent, ServiceType::DynamicSequential]
    {
        for enabled in [true, false] {
            let instance: ServiceInstance = ServiceInstance::builder("svc")
                .service_type(service_type)
                .enabled(enabled)
                .payload(json!({"nested": {"list": [1, 2.5, "x", null, true]}, "unicode": "é\u{1}"}))
                .build();
            let serializer = JsonInstanceSerializer::new().write_enabled(true);
            let back: ServiceInstance = serializer.deserialize(&serializer.serialize(&instance).unwrap()).unwrap();
            assert_eq!(back, instance);
        }
    }
    let bare = ServiceInstance::<Value> {
        address: None,
        port: None,
        ssl_port: None,
        uri_spec: None,
        ..curator_instance(None, true)
    };
    let bytes = bare.to_json().unwrap();
    assert_eq!(
        text(bytes.clone()),
        r#"{"name":"name","id":"id","address":null,"port":null,"sslPort":null,"payload":null,"registrationTimeUTC":0,"serviceType":"DYNAMIC","uriSpec":null}"#
    );
    assert_eq!(ServiceInstance::from_json(&bytes).unwrap(), bare);
}
