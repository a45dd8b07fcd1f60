//! Interop of the discovery model with Apache Curator 5.4's `JsonInstanceSerializer` (Debian's
//! `libcurator-discovery-java`): the Java peer (tests/java/DiscoveryJsonPeer.java) serializes a
//! set of instances, and the same instances built in Rust must give the same bytes; each side
//! reads the other's bytes back to equal instances and builds the same URIs. No ZooKeeper is
//! involved: this is the node data the service discovery will store.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;

use curator_discovery::{
    local_ipv4_addresses, InstanceSerializer, JsonInstanceSerializer, ServiceInstance, ServiceType, UriSpec,
};
use curator_test::Timing;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;

/// The peer's typed payload, `DiscoveryJsonPeer.Details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Details {
    zone: String,
    weight: i32,
}

const DETAILS_CLASS: &str = "DiscoveryJsonPeer$Details";

fn spec(template: &str) -> UriSpec {
    UriSpec::parse(template).expect("a valid template")
}

/// The peer's cases, built in Rust: (case, instance with its payload as JSON, serializer).
fn cases() -> Vec<(&'static str, ServiceInstance, JsonInstanceSerializer)> {
    let base = |name: &str, id: &str, time: i64| {
        ServiceInstance::builder(name).id(id).no_address().registration_time_utc(time)
    };
    let plain = JsonInstanceSerializer::new;
    vec![
        (
            "map",
            base("search", "3f5e7a0c-0000-4000-8000-000000000001", 1_700_000_000_000)
                .address("10.0.0.7")
                .port(8080)
                .payload(json!({"region": "eu-1", "tags": ["a", "b"], "weight": 3}))
                .uri_spec(spec("{scheme}://{address}:{port}/{name}"))
                .build(),
            plain().payload_class("java.util.TreeMap"),
        ),
        (
            "string",
            base("search", "s-2", 1_700_000_000_001)
                .address("host.example")
                .ssl_port(8443)
                .payload(json!("hello \"world\" é\u{1}\u{1f}"))
                .service_type(ServiceType::Static)
                .uri_spec(spec("{scheme}://{address}:{ssl-port}/{[}x{]}/{service-type}/{id}"))
                .build(),
            plain(),
        ),
        ("none", base("bare", "b-3", 0).service_type(ServiceType::Permanent).build(), plain()),
        (
            "list",
            base("search", "l-4", 1_700_000_000_002)
                .address("10.0.0.8")
                .port(1)
                .ssl_port(2)
                .payload(json!(["a", 1, 2.5]))
                .service_type(ServiceType::DynamicSequential)
                .uri_spec(spec("{scheme}://{address}:{port}"))
                .enabled(false)
                .build(),
            plain().write_enabled(true),
        ),
        (
            "typed",
            base("search", "t-5", 1_700_000_000_003)
                .address("10.0.0.9")
                .port(80)
                .payload(json!({"zone": "eu-2", "weight": 7}))
                .build(),
            plain().payload_class(DETAILS_CLASS),
        ),
        (
            "long",
            base("search", "n-6", 1_700_000_000_004)
                .address("10.0.0.10")
                .port(81)
                .payload(json!(5_000_000_000i64))
                .build(),
            plain().payload_class("java.lang.Long"),
        ),
        (
            "double",
            base("search", "d-7", -1).address("10.0.0.11").port(82).payload(json!(1e20)).build(),
            plain().payload_class("java.lang.Double"),
        ),
    ]
}

/// The typed case with its payload as the `Details` struct (serde keeps the field order).
fn typed_case() -> ServiceInstance<Details> {
    ServiceInstance::builder("search")
        .id("t-5")
        .address("10.0.0.9")
        .port(80)
        .registration_time_utc(1_700_000_000_003)
        .payload(Details { zone: "eu-2".into(), weight: 7 })
        .build()
}

/// Rust's bytes for a case. The typed case is written from the `Details` struct, whose fields
/// serde writes in declaration order as Jackson writes the Java class's; as a `Value` its keys
/// would come out sorted (serde_json's map), which is equal JSON but not equal bytes.
fn rust_bytes(case: &str, instance: &ServiceInstance, serializer: &JsonInstanceSerializer) -> String {
    let bytes = if case == "typed" {
        JsonInstanceSerializer::new().payload_class(DETAILS_CLASS).serialize(&typed_case())
    } else {
        serializer.serialize(instance)
    };
    String::from_utf8(bytes.expect("serialize")).expect("UTF-8")
}

/// The peer's next line, within the test deadline.
async fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(Timing::new().deadline(), lines.next_line())
        .await
        .expect("the java peer answers in time")
        .expect("read from the java peer")
        .expect("the java peer is still running")
}

/// Curator writes every case with the bytes Rust writes, and Rust reads Curator's bytes back
/// to the instances it built (typed payloads too); Curator reads Rust's bytes back to equal
/// instances and builds the same URIs from them; the default address is Curator's first IPv4.
#[tokio::test]
async fn curator_and_rust_write_and_read_the_same_instance_json() {
    tests::init_tracing();
    let mut child = tests::java::peer("DiscoveryJsonPeer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run java (apt-get install default-jdk-headless)");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stdin = child.stdin.take().expect("stdin");
    let deadline = Timing::new().deadline();

    let address = next(&mut lines).await;
    let rust_address = local_ipv4_addresses().first().map(|a| a.to_string()).unwrap_or_else(|| "none".into());
    assert_eq!(address, format!("ADDRESS {rust_address}"), "Curator's first IPv4 address is the builder's default");

    let mut java: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let line = next(&mut lines).await;
        if line == "END" {
            break;
        }
        let rest = line.strip_prefix("WRITE ").unwrap_or_else(|| panic!("unexpected line {line:?}"));
        let (case, json) = rest.split_once(' ').expect("WRITE <case> <json>");
        java.insert(case.to_string(), json.to_string());
    }

    let cases = cases();
    assert_eq!(java.len(), cases.len(), "one Java instance per case: {:?}", java.keys());
    for (case, instance, serializer) in &cases {
        let java_json = &java[*case];
        let rust_json = rust_bytes(case, instance, serializer);
        assert_eq!(&rust_json, java_json, "case {case}: Rust's bytes differ from Curator's");
        let read: ServiceInstance = serializer.deserialize(java_json.as_bytes()).expect("Rust reads Curator's JSON");
        assert_eq!(&read, instance, "case {case}: Rust reads Curator's JSON to a different instance");
        assert_eq!(read.build_uri(&HashMap::new()), instance.build_uri(&HashMap::new()));
    }
    let typed_serializer = JsonInstanceSerializer::new().payload_class(DETAILS_CLASS);
    let typed = typed_case();
    let read: ServiceInstance<Details> =
        typed_serializer.deserialize(java["typed"].as_bytes()).expect("Rust reads Curator's typed payload");
    assert_eq!(read, typed);

    for (case, instance, serializer) in &cases {
        let rust_json = rust_bytes(case, instance, serializer);
        stdin.write_all(format!("{case} {rust_json}\n").as_bytes()).await.expect("write to the java peer");
    }
    stdin.flush().await.expect("flush");
    drop(stdin);
    for (case, instance, _) in &cases {
        assert_eq!(
            next(&mut lines).await,
            format!("READ {case} equal"),
            "case {case}: Curator reads Rust's JSON differently"
        );
        assert_eq!(
            next(&mut lines).await,
            format!("URI {case} {}", instance.build_uri(&HashMap::new())),
            "case {case}: Curator builds another URI"
        );
    }
    let status = tokio::time::timeout(deadline, child.wait()).await;
    assert!(status.expect("the java peer exits").expect("wait").success());
}

/// Curator's bytes with a field Rust does not know, a payload Rust reads as a `Value`, and
/// bytes that are not an instance at all: Rust ignores the field, and the bad bytes are typed
/// errors, as they are exceptions in Curator.
#[test]
fn rust_reads_what_curator_would_and_rejects_what_curator_rejects() {
    let with_extra = br#"{"name":"x","id":"y","address":null,"port":null,"sslPort":null,"payload":{"@class":"java.util.HashMap","k":"v"},"registrationTimeUTC":5,"serviceType":"STATIC","uriSpec":null,"future":{"a":[1]}}"#;
    let read: ServiceInstance<Value> = ServiceInstance::from_json(with_extra).expect("unknown fields are ignored");
    assert_eq!(read.payload, Some(json!({"k": "v"})));
    assert_eq!(read.service_type, ServiceType::Static);
    for bad in [&b""[..], b"not json", br#"{"serviceType":"dynamic"}"#] {
        assert!(ServiceInstance::<Value>::from_json(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
}
