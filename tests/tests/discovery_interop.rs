//! Live interop of the service discovery with Apache Curator 5.4's `ServiceDiscovery`,
//! `ServiceProvider` and `JsonInstanceSerializer` (Debian's `libcurator-discovery-java`), on one
//! ZooKeeper and one base path: the Java peer (tests/java/DiscoveryPeer.java) registers instances
//! that Rust's `query_for_instances`, `ServiceCache` and `ServiceProvider` read field for field,
//! and Rust registers instances that Java's `queryForInstances` and `ServiceProvider` read field
//! for field; both sides build the same URIs, and an unregistration on either side leaves the
//! other's view. Curator's serializer editing the node of a watched Rust registration is taken
//! into it. (The JSON bytes themselves are compared in `discovery_json_interop.rs`.)
//!
//! The Java side uses a `JsonInstanceSerializer<Map>`: Jackson reads an object payload written
//! without `"@class"` (Rust's default) as a `LinkedHashMap`, and one with a class (Rust's
//! `payload_class`) as that class, so both pass Curator's `Map` check. Rust reads Java's payloads
//! (which carry `"@class":"java.util.LinkedHashMap"`) as `serde_json::Value`.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;

use curator_core::ConnectionState;
use curator_discovery::{
    JsonInstanceSerializer, RegistrationEvent, RoundRobinStrategy, ServiceCache, ServiceDiscovery, ServiceInstance,
    ServiceProvider, ServiceType, UriSpec,
};
use curator_test::{eventually, expire_session, TestingServer, Timing};
use serde::Deserialize;
use serde_json::{json, Value};
use tests::fixture::wait_for;
use tests::{client, init_tracing, unique_path};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const TEMPLATE: &str = "{scheme}://{address}:{port}/x";

/// An instance as the Java peer prints it (`DiscoveryPeer.describe`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Printed {
    name: String,
    id: String,
    address: Option<String>,
    port: Option<i32>,
    ssl_port: Option<i32>,
    payload: Option<Value>,
    payload_class: Option<String>,
    #[serde(rename = "registrationTimeUTC")]
    registration_time_utc: i64,
    service_type: ServiceType,
    uri_spec: Option<UriSpec>,
    enabled: bool,
    uri: String,
}

/// What Curator's objects hold for an instance, as seen from Java.
#[derive(Debug, Clone, PartialEq)]
struct JavaView {
    /// The fields, as a Rust instance.
    instance: ServiceInstance,
    /// The Java class of the payload Curator read.
    payload_class: Option<String>,
    /// Curator's `buildUriSpec()`.
    uri: String,
}

fn parse(json: &str) -> JavaView {
    let p: Printed = serde_json::from_str(json).unwrap_or_else(|e| panic!("the peer's instance {json}: {e}"));
    JavaView {
        instance: ServiceInstance {
            name: p.name,
            id: p.id,
            address: p.address,
            port: p.port,
            ssl_port: p.ssl_port,
            payload: p.payload,
            registration_time_utc: p.registration_time_utc,
            service_type: p.service_type,
            uri_spec: p.uri_spec,
            enabled: p.enabled,
        },
        payload_class: p.payload_class,
        uri: p.uri,
    }
}

/// A Curator `ServiceDiscovery` in a Java process.
struct JavaDiscovery {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl JavaDiscovery {
    async fn start(connect: &str, base: &str) -> JavaDiscovery {
        let mut child = tests::java::peer("DiscoveryPeer")
            .args([connect, base])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run java (apt-get install default-jdk-headless)");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stdin = child.stdin.take().expect("stdin");
        let mut peer = JavaDiscovery { child, stdin, lines };
        assert_eq!(peer.line().await, "READY");
        peer
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to the java peer");
        self.stdin.flush().await.expect("flush");
    }

    /// The peer's next line, within the test deadline.
    async fn line(&mut self) -> String {
        tokio::time::timeout(Timing::new().deadline(), self.lines.next_line())
            .await
            .expect("the java peer answers in time")
            .expect("read from the java peer")
            .expect("the java peer is still running")
    }

    /// Registers an instance built by Curator's builder from `spec`; what Curator made of it.
    async fn register(&mut self, spec: &Value) -> JavaView {
        self.send(&format!("REGISTER {spec}")).await;
        let line = self.line().await;
        parse(line.strip_prefix("REGISTERED ").unwrap_or_else(|| panic!("unexpected line {line:?}")))
    }

    /// Writes an instance built by Curator's builder from `spec` to its node with Curator's
    /// serializer (`setData`); what Curator wrote.
    async fn edit(&mut self, spec: &Value) -> JavaView {
        self.send(&format!("EDIT {spec}")).await;
        let line = self.line().await;
        parse(line.strip_prefix("EDITED ").unwrap_or_else(|| panic!("unexpected line {line:?}")))
    }

    /// `INSTANCE` lines up to `END`, and the `PICK <id> <uri>` lines among them.
    async fn instances_until_end(&mut self) -> (Vec<JavaView>, Vec<(String, String)>) {
        let (mut instances, mut picks) = (Vec::new(), Vec::new());
        loop {
            let line = self.line().await;
            if line == "END" {
                return (instances, picks);
            } else if let Some(json) = line.strip_prefix("INSTANCE ") {
                instances.push(parse(json));
            } else if let Some(pick) = line.strip_prefix("PICK ") {
                let (id, uri) = pick.split_once(' ').unwrap_or((pick, ""));
                picks.push((id.to_string(), uri.to_string()));
            } else {
                panic!("unexpected line {line:?}");
            }
        }
    }

    /// Curator's `queryForInstances(name)`, sorted by id.
    async fn query(&mut self, name: &str) -> Vec<JavaView> {
        self.send(&format!("QUERY {name}")).await;
        self.instances_until_end().await.0
    }

    /// The instances of the name's round-robin `ServiceProvider` (`getAllInstances()`, sorted by
    /// id), and `picks` of its `getInstance()` with each pick's `buildUriSpec()`.
    async fn provide(&mut self, name: &str, picks: usize) -> (Vec<JavaView>, Vec<(String, String)>) {
        self.send(&format!("PROVIDE {name} {picks}")).await;
        self.instances_until_end().await
    }

    /// Waits (the peer polls, up to 30 s) until the name's `ServiceProvider` holds exactly `ids`.
    async fn await_ids(&mut self, name: &str, ids: &[&str]) {
        let list = if ids.is_empty() { "-".to_string() } else { ids.join(",") };
        self.send(&format!("AWAIT {name} {list}")).await;
        assert_eq!(self.line().await, format!("SEEN {list}"), "Curator's ServiceProvider of {name}");
    }

    async fn unregister(&mut self, id: &str) {
        self.send(&format!("UNREGISTER {id}")).await;
        assert_eq!(self.line().await, format!("UNREGISTERED {id}"));
    }

    async fn quit(mut self) {
        self.send("QUIT").await;
        assert_eq!(self.line().await, "BYE");
        let status = tokio::time::timeout(Timing::new().deadline(), self.child.wait()).await;
        assert!(status.expect("the java peer exits").expect("wait").success());
    }
}

fn ids<T>(instances: &[ServiceInstance<T>]) -> Vec<String> {
    instances.iter().map(|i| i.id.clone()).collect()
}

/// `picks` round-robin picks of a Rust provider: (id, `build_uri`) each.
fn rust_picks(provider: &ServiceProvider, picks: usize) -> Vec<(String, String)> {
    (0..picks)
        .map(|_| {
            let instance = provider.instance().expect("the provider has an instance");
            let uri = instance.build_uri(&HashMap::new());
            (instance.id, uri)
        })
        .collect()
}

/// Checks that `picks` went round the `want` ids (each id once in every `want.len()` picks) and
/// gives each id's URI.
fn round_robin_uris(side: &str, picks: &[(String, String)], want: &[String]) -> BTreeMap<String, String> {
    for round in picks.chunks(want.len()) {
        let mut seen: Vec<String> = round.iter().map(|(id, _)| id.clone()).collect();
        seen.sort();
        assert_eq!(seen, want, "{side}'s round robin: {picks:?}");
    }
    let uris: BTreeMap<String, String> = picks.iter().cloned().collect();
    assert_eq!(uris.len(), want.len(), "{side} built one URI per instance: {picks:?}");
    uris
}

/// Java's `ServiceDiscovery` registers two instances of "java-svc" with map payloads and the
/// uriSpec `{scheme}://{address}:{port}/x` (one with an SSL port: `https`). Rust's
/// `query_for_instances`, a `ServiceCache` and a round-robin `ServiceProvider` return them with
/// every field equal to what Java was asked to register, the registration time as Java
/// printed it, and the URIs Curator's `ServiceProvider` builds. Java then unregisters one, and
/// Rust's cache, provider and query drop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_reads_what_curators_service_discovery_registers() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let base = unique_path("interop-discovery-java");
    let mut java = JavaDiscovery::start(&connect, &base).await;

    let specs = [
        json!({
            "name": "java-svc", "id": "java-1", "address": "10.0.0.1", "port": 8001, "sslPort": null,
            "payload": {"zone": "eu-1", "weight": 3, "tags": ["a", "b"], "nested": {"ratio": 0.5, "on": true}},
            "uriSpec": TEMPLATE,
        }),
        json!({
            "name": "java-svc", "id": "java-2", "address": "host-2.example", "port": 8002, "sslPort": 8443,
            "payload": {"zone": "us-2", "note": "é \"quoted\""},
            "uriSpec": TEMPLATE,
        }),
    ];
    let mut expected: Vec<ServiceInstance> = Vec::new();
    for spec in &specs {
        let registered = java.register(spec).await;
        assert!(registered.instance.registration_time_utc > 0, "Curator's builder sets the time: {registered:?}");
        let mut builder = ServiceInstance::builder("java-svc")
            .id(spec["id"].as_str().expect("id"))
            .address(spec["address"].as_str().expect("address"))
            .port(i32::try_from(spec["port"].as_i64().expect("port")).expect("a port"))
            .payload(spec["payload"].clone())
            .registration_time_utc(registered.instance.registration_time_utc)
            .uri_spec(UriSpec::parse(TEMPLATE).expect("a template"));
        if let Some(ssl) = spec["sslPort"].as_i64() {
            builder = builder.ssl_port(i32::try_from(ssl).expect("a port"));
        }
        let instance = builder.build();
        assert_eq!(registered.instance, instance, "Curator registered something else than asked");
        expected.push(instance);
    }
    let expected_ids = ids(&expected);
    // Curator's own view, as the peer prints it: the same instances, each payload a LinkedHashMap.
    let java_view = java.query("java-svc").await;
    assert_eq!(java_view.iter().map(|v| v.instance.clone()).collect::<Vec<_>>(), expected);
    assert!(java_view.iter().all(|v| v.payload_class.as_deref() == Some("java.util.LinkedHashMap")), "{java_view:?}");

    let fw = client(&connect).await;
    let discovery: ServiceDiscovery = ServiceDiscovery::builder(&fw, &base).build().expect("discovery");
    assert_eq!(discovery.query_for_names().await.expect("names"), vec!["java-svc".to_string()]);
    let queried = discovery.query_for_instances("java-svc").await.expect("query");
    assert_eq!(queried, expected, "Rust's query_for_instances of Curator's instances");
    assert_eq!(
        discovery.query_for_instance("java-svc", "java-2").await.expect("query one").as_ref(),
        Some(&expected[1])
    );
    let cache: ServiceCache = discovery.service_cache_builder("java-svc").build().expect("cache");
    cache.start().expect("start the cache");
    cache.ready().await.expect("ready: start the cache");
    assert_eq!(cache.instances(), expected, "Rust's ServiceCache of Curator's instances");
    assert_eq!((discovery.skipped_nodes(), cache.skipped_nodes()), (0, 0));

    // Both providers go round the two instances and build the same URIs.
    let provider = discovery
        .service_provider("java-svc", ServiceProvider::builder().strategy(RoundRobinStrategy::new()))
        .expect("provider");
    provider.start().expect("start the provider");
    provider.ready().await.expect("the provider is ready");
    assert_eq!(provider.all_instances(), expected);
    java.await_ids("java-svc", &["java-1", "java-2"]).await;
    let (java_all, java_picks) = java.provide("java-svc", 4).await;
    assert_eq!(java_all.iter().map(|v| v.instance.clone()).collect::<Vec<_>>(), expected);
    let java_uris = round_robin_uris("Curator", &java_picks, &expected_ids);
    let rust_uris = round_robin_uris("Rust", &rust_picks(&provider, 4), &expected_ids);
    assert_eq!(rust_uris, java_uris, "Rust's provider builds other URIs than Curator's");
    let want_uris: BTreeMap<String, String> = [
        ("java-1".to_string(), "http://10.0.0.1:8001/x".to_string()),
        ("java-2".to_string(), "https://host-2.example:8002/x".to_string()),
    ]
    .into();
    assert_eq!(rust_uris, want_uris);
    for view in &java_view {
        assert_eq!(view.uri, view.instance.build_uri(&HashMap::new()), "buildUriSpec() of {}", view.instance.id);
    }

    // Java unregisters one: Rust's cache, provider and query drop it.
    java.unregister("java-1").await;
    let dropped = eventually(Timing::new().deadline(), || async { ids(&cache.instances()) == ["java-2"] }).await;
    assert!(dropped, "Rust's cache still holds {:?}", ids(&cache.instances()));
    let dropped = eventually(Timing::new().deadline(), || async { ids(&provider.all_instances()) == ["java-2"] }).await;
    assert!(dropped, "Rust's provider still holds {:?}", ids(&provider.all_instances()));
    assert_eq!(rust_picks(&provider, 2).iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["java-2", "java-2"]);
    assert_eq!(discovery.query_for_instances("java-svc").await.expect("query"), &expected[1..]);
    java.await_ids("java-svc", &["java-2"]).await;

    // Closing Curator's discovery unregisters the rest.
    java.quit().await;
    let gone = eventually(Timing::new().deadline(), || async { cache.instances().is_empty() }).await;
    assert!(gone, "Rust's cache still holds {:?}", ids(&cache.instances()));
    cache.close().await;
    drop(provider);
    discovery.close().await;
    fw.close().await;
}

/// Rust registers two instances of "rust-svc" with map payloads and the uriSpec
/// `{scheme}://{address}:{port}/x`: one with the default serializer (no `"@class"`: Java reads
/// a `LinkedHashMap`), one STATIC with an SSL port from a discovery whose serializer names the
/// payload class `java.util.HashMap`. Curator's `queryForInstances` and its round-robin
/// `ServiceProvider` return both, equal field for field (registration time included), and the
/// URIs Curator builds are Rust's `build_uri`. Rust then unregisters one, and Curator's provider
/// and query drop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_service_discovery_reads_what_rust_registers() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let base = unique_path("interop-discovery-rust");
    let fw = client(&connect).await;
    let plain: ServiceDiscovery = ServiceDiscovery::builder(&fw, &base).build().expect("discovery");
    let typed: ServiceDiscovery = ServiceDiscovery::builder(&fw, &base)
        .serializer(JsonInstanceSerializer::new().payload_class("java.util.HashMap"))
        .build()
        .expect("discovery");
    let spec = UriSpec::parse(TEMPLATE).expect("a template");
    let rust_1: ServiceInstance = ServiceInstance::builder("rust-svc")
        .id("rust-1")
        .address("10.0.0.2")
        .port(9001)
        .payload(json!({"zone": "eu-1", "weight": 5, "tags": ["x"], "nested": {"ratio": 1.25, "off": false}}))
        .uri_spec(spec.clone())
        .build();
    let rust_2: ServiceInstance = ServiceInstance::builder("rust-svc")
        .id("rust-2")
        .address("host-3.example")
        .port(9002)
        .ssl_port(9443)
        .service_type(ServiceType::Static)
        .payload(json!({"zone": "ap-3", "note": "é \"quoted\""}))
        .uri_spec(spec)
        .build();
    plain.register(rust_1.clone()).await.expect("register rust-1");
    typed.register(rust_2.clone()).await.expect("register rust-2");
    let expected = vec![rust_1.clone(), rust_2.clone()];
    let expected_ids = ids(&expected);
    let classes = [Some("java.util.LinkedHashMap".to_string()), Some("java.util.HashMap".to_string())];

    let mut java = JavaDiscovery::start(&connect, &base).await;
    let queried = java.query("rust-svc").await;
    assert_eq!(queried.len(), 2, "Curator's queryForInstances: {queried:?}");
    for ((view, instance), class) in queried.iter().zip(&expected).zip(&classes) {
        assert_eq!(&view.instance, instance, "Curator reads {} differently", instance.id);
        assert_eq!(&view.payload_class, class, "the Java class of {}'s payload", instance.id);
        assert_eq!(view.uri, instance.build_uri(&HashMap::new()), "Curator builds another URI for {}", instance.id);
    }

    // Curator's round-robin provider returns both and builds Rust's URIs; so does Rust's.
    java.await_ids("rust-svc", &["rust-1", "rust-2"]).await;
    let (java_all, java_picks) = java.provide("rust-svc", 4).await;
    assert_eq!(java_all, queried, "Curator's ServiceProvider and queryForInstances differ");
    let java_uris = round_robin_uris("Curator", &java_picks, &expected_ids);
    let want_uris: BTreeMap<String, String> =
        expected.iter().map(|i| (i.id.clone(), i.build_uri(&HashMap::new()))).collect();
    assert_eq!(java_uris, want_uris, "Curator's provider builds other URIs than Rust's build_uri");
    assert_eq!(want_uris["rust-2"], "https://host-3.example:9002/x");
    let provider = plain
        .service_provider("rust-svc", ServiceProvider::builder().strategy(RoundRobinStrategy::new()))
        .expect("provider");
    provider.start().expect("start the provider");
    provider.ready().await.expect("the provider is ready");
    assert_eq!(round_robin_uris("Rust", &rust_picks(&provider, 4), &expected_ids), java_uris);

    // Rust unregisters one: Curator's provider and query drop it.
    plain.unregister(&rust_1).await;
    java.await_ids("rust-svc", &["rust-2"]).await;
    let queried = java.query("rust-svc").await;
    assert_eq!(queried.iter().map(|v| v.instance.clone()).collect::<Vec<_>>(), vec![rust_2.clone()]);
    let (_, java_picks) = java.provide("rust-svc", 2).await;
    let only_2 = ("rust-2".to_string(), want_uris["rust-2"].clone());
    assert_eq!(java_picks, vec![only_2.clone(), only_2]);

    // Closing the Rust discovery unregisters the STATIC instance too (as Curator's close).
    typed.close().await;
    java.await_ids("rust-svc", &[]).await;
    assert!(java.query("rust-svc").await.is_empty());
    java.quit().await;
    drop(provider);
    plain.close().await;
    fw.close().await;
}

/// Follows Curator's TestWatchedInstances with Curator as the other client: Curator's
/// `JsonInstanceSerializer` writes a changed instance (another address, port and payload) to the
/// node of a watched Rust registration; the registration takes it, field for field as Curator
/// built it. After the Rust session expires the node is made again with Curator's edit (its
/// bytes, `"@class"` and all), which Curator's `queryForInstances` reads on the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_rust_registration_takes_curators_edit() {
    init_tracing();
    let server = TestingServer::shared();
    let connect = server.connect_string();
    let base = unique_path("interop-discovery-watch");
    let fw = client(&connect).await;
    let discovery: ServiceDiscovery =
        ServiceDiscovery::builder(&fw, &base).watch_instances(true).build().expect("discovery");
    let mut events = discovery.registration_events();
    let mine: ServiceInstance = ServiceInstance::builder("watched")
        .id("w-1")
        .address("10.0.0.9")
        .port(7001)
        .payload(json!({"v": 1}))
        .uri_spec(UriSpec::parse(TEMPLATE).expect("a template"))
        .build();
    discovery.register(mine.clone()).await.expect("register");

    let mut java = JavaDiscovery::start(&connect, &base).await;
    let edited = java
        .edit(&json!({"name": "watched", "id": "w-1", "address": "10.0.0.10", "port": 7002,
            "payload": {"v": 2, "zone": "eu-2"}, "uriSpec": TEMPLATE}))
        .await;
    assert_ne!(edited.instance, mine);
    let event = tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event in time");
    match event {
        Some(RegistrationEvent::Edited(instance)) => assert_eq!(instance, edited.instance),
        other => panic!("expected Curator's edit, got {other:?}"),
    }
    assert_eq!(discovery.registered(), vec![edited.instance.clone()]);

    let info = fw.session().await.expect("session").client().session().clone();
    let mut states = fw.connection_state_stream();
    expire_session(&connect, &info).await.expect("expire");
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    let session = fw.session().await.expect("session").id();
    let path = format!("{base}/watched/w-1");
    let on_new_session = eventually(Timing::new().deadline(), || async {
        fw.check_exists().for_path(&path).await.ok().flatten().is_some_and(|stat| stat.ephemeral_owner == session)
    });
    assert!(on_new_session.await, "not registered again on the new session");
    let queried = java.query("watched").await;
    assert_eq!(queried, vec![edited.clone()], "Curator reads the edit back from the new session's node");
    assert_eq!(queried[0].payload_class.as_deref(), Some("java.util.LinkedHashMap"));
    java.quit().await;
    discovery.close().await;
    fw.close().await;
}
