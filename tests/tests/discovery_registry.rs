//! Service discovery's registry (issue 14): `ServiceDiscovery` and `ServiceCache` against real
//! ZooKeeper, following Curator's TestServiceDiscovery and TestServiceCache, and the issue's
//! "Must show": an outage longer than the session timeout, session expiry and `update` while
//! disconnected (the instance is back with its latest data, exactly once), unregister after a
//! connection loss, and nodes that are not instances (skipped, counted, logged). Faults run
//! under every combination of error and retry policy.

use std::time::{Duration, Instant};

use curator_core::LifeState;
use curator_core::{ConnectionState, CreateMode, CuratorError, CuratorFramework, ErrorPolicy};
use curator_discovery::{
    DiscoveryError, ServiceCacheEvent, ServiceDiscovery, ServiceInstance, ServiceProvider, ServiceType,
};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::fixture::wait_for;
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::zk::children;
use tests::{init_tracing, unique_path};

type Instance = ServiceInstance<String>;

fn instance(name: &str, port: i32, payload: &str) -> Instance {
    ServiceInstance::builder(name).port(port).payload(payload.to_string()).build()
}

async fn discovery(fw: &CuratorFramework, base: &str) -> ServiceDiscovery<String> {
    let discovery = ServiceDiscovery::builder(fw, base).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    discovery
}

fn sorted(mut instances: Vec<Instance>) -> Vec<Instance> {
    instances.sort_by(|a, b| a.id.cmp(&b.id));
    instances
}

/// The owner session and instance at `path`, as `observer` reads them.
async fn read_instance(observer: &CuratorFramework, path: &str) -> Option<(i64, Instance)> {
    let (bytes, stat) = observer.get_data().for_path_with_stat(path).await.ok()?;
    Some((stat.ephemeral_owner, ServiceInstance::from_json(&bytes).ok()?))
}

/// True once `base/<name>/<id>` holds exactly `expected`, owned by `fw`'s current session, and
/// is the only node of the service with that id.
async fn registered_once(fw: &CuratorFramework, observer: &CuratorFramework, base: &str, expected: &Instance) -> bool {
    let Ok(session) = fw.session().await else { return false };
    let parent = format!("{base}/{}", expected.name);
    let path = format!("{parent}/{}", expected.id);
    let ids = children(observer, &parent).await;
    ids.iter().filter(|id| id.starts_with(&expected.id)).count() == 1
        && read_instance(observer, &path).await.is_some_and(|(owner, i)| owner == session.id() && &i == expected)
}

async fn gone(observer: &CuratorFramework, path: &str) -> bool {
    eventually(Timing::new().deadline(), || async { observer.check_exists().for_path(path).await.ok() == Some(None) })
        .await
}

/// Follows Curator's TestServiceDiscovery.testBasic: the instance given to the builder is
/// registered by start, and the queries return it, field for field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let me = instance("test", 10064, "thing");
    let discovery: ServiceDiscovery<String> =
        ServiceDiscovery::builder(&fw, &base).this_instance(me.clone()).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    assert_eq!(discovery.query_for_names().await.expect("names"), vec!["test".to_string()]);
    assert_eq!(discovery.query_for_instances("test").await.expect("instances"), vec![me.clone()]);
    assert_eq!(discovery.query_for_instance("test", &me.id).await.expect("instance"), Some(me.clone()));
    assert_eq!(discovery.query_for_instance("test", "nobody").await.expect("no instance"), None);
    let stat = fw.check_exists().for_path(&format!("{base}/test/{}", me.id)).await.expect("exists").expect("a node");
    assert_ne!(stat.ephemeral_owner, 0, "a DYNAMIC instance is ephemeral");
    discovery.close().await;
    assert!(gone(&fw, &format!("{base}/test/{}", me.id)).await, "close unregisters");
    fw.close().await;
}

/// Follows Curator's TestServiceDiscovery.testMultipleInstances: two services of two instances
/// each; names and instances per service as registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiple_instances() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = discovery(&fw, &base).await;
    let one = [instance("one", 1, "a"), instance("one", 2, "b")];
    let two = [instance("two", 3, "c"), instance("two", 4, "d")];
    for i in one.iter().chain(&two) {
        discovery.register(i.clone()).await.expect("register");
    }
    assert_eq!(discovery.query_for_names().await.expect("names"), vec!["one".to_string(), "two".to_string()]);
    assert_eq!(discovery.query_for_instances("one").await.expect("one"), sorted(one.to_vec()));
    assert_eq!(discovery.query_for_instances("two").await.expect("two"), sorted(two.to_vec()));
    assert!(discovery.query_for_instances("three").await.expect("none").is_empty());
    discovery.close().await;
    fw.close().await;
}

/// Each service type's node mode, as Curator's internalRegisterService chooses it; a
/// DYNAMIC_SEQUENTIAL instance gets a sequence after its id; close deletes every one of them,
/// PERMANENT included (Curator 5's close unregisters all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_modes_follow_the_service_type() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = discovery(&fw, &base).await;
    let types = [ServiceType::Dynamic, ServiceType::Static, ServiceType::Permanent, ServiceType::DynamicSequential];
    let mut ids = Vec::new();
    for t in types {
        let i = ServiceInstance::builder("modes").payload(t.to_string()).service_type(t).build();
        ids.push(i.id.clone());
        discovery.register(i).await.expect("register");
    }
    let names = children(&fw, &format!("{base}/modes")).await;
    assert_eq!(names.len(), 4, "{names:?}");
    for (t, id) in types.iter().zip(&ids) {
        let name = names.iter().find(|n| n.starts_with(id.as_str())).expect("registered");
        let stat = fw.check_exists().for_path(&format!("{base}/modes/{name}")).await.expect("exists").expect("node");
        assert_eq!(stat.ephemeral_owner != 0, t.is_dynamic(), "{t}");
        assert_eq!(name.len() > id.len(), *t == ServiceType::DynamicSequential, "{t}: {name}");
    }
    discovery.close().await;
    assert!(
        eventually(Timing::new().deadline(), || async { children(&fw, &format!("{base}/modes")).await.is_empty() })
            .await
    );
    fw.close().await;
}

/// Follows Curator's TestServiceDiscovery.testCleaning and testUnregisterService (CURATOR-164):
/// unregister deletes the node and forgets the registration; a second unregister, or one of an
/// instance never registered, is nothing to do. An update of an unregistered instance, or one
/// that changes the service, is a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregister_is_idempotent() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let me = instance("test", 10064, "thing");
    let discovery: ServiceDiscovery<String> =
        ServiceDiscovery::builder(&fw, &base).this_instance(me.clone()).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    let mut renamed = me.clone();
    renamed.name = "other".to_string();
    assert!(matches!(discovery.update(renamed), Err(DiscoveryError::InvalidInstance { .. })));
    discovery.unregister(&me).await;
    assert!(discovery.registered().is_empty());
    assert!(discovery.query_for_instances("test").await.expect("query").is_empty());
    discovery.unregister(&me).await;
    discovery.unregister(&instance("test", 1, "never registered")).await;
    assert!(matches!(discovery.update(me.clone()), Err(DiscoveryError::NotRegistered { .. })));
    discovery.close().await;
    assert!(matches!(discovery.register(me).await, Err(DiscoveryError::Curator(_))), "closed");
    fw.close().await;
}

/// An unregister that races a register still in flight waits for the node to go: once it
/// returns, the instance is not on the server. Before, the pending register held the node's
/// handle, so unregister returned at once and the node was deleted only when that register
/// ended (the node was still there when unregister returned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregister_racing_a_pending_register_returns_once_the_node_is_gone() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = std::sync::Arc::new(discovery(&fw, &base).await);
    for round in 0..20 {
        let me = instance("test", 10_000 + round, "racing");
        let path = format!("{base}/test/{}", me.id);
        let registering = {
            let (discovery, me) = (discovery.clone(), me.clone());
            tokio::spawn(async move { discovery.register(me).await })
        };
        // Unregister as soon as the registration is known, while its create may be in flight.
        assert!(
            eventually(Timing::new().deadline(), || async { !discovery.registered().is_empty() }).await,
            "round {round}: the registration never showed"
        );
        discovery.unregister(&me).await;
        assert_eq!(
            fw.check_exists().for_path(&path).await.expect("exists"),
            None,
            "round {round}: the node is still there after unregister returned"
        );
        // Either its node was made (and is now deleted), or the unregister came first.
        match registering.await.expect("register task") {
            Ok(()) | Err(DiscoveryError::NotRegistered { .. }) => {}
            Err(e) => panic!("round {round}: register failed with {e}"),
        }
        assert!(discovery.registered().is_empty());
    }
    fw.close().await;
}

/// Follows Curator's TestServiceCache.testInitialLoad and testCache: a started cache hears each
/// registration of its service (and none of another service); a second cache starts with all
/// of them loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_initial_load_and_events() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = discovery(&fw, &base).await;
    let cache = discovery.service_cache_builder("test").build().expect("cache");
    let mut events = cache.events();
    cache.start().expect("start");
    cache.ready().await.expect("ready: start");
    assert!(cache.instances().is_empty());
    let registered =
        [instance("test", 10064, "test"), instance("test", 10065, "test"), instance("test", 10066, "test")];
    for (n, i) in registered.iter().enumerate() {
        discovery.register(i.clone()).await.expect("register");
        // Another service's registration is no event of this cache: the next event is ours.
        discovery.register(instance("another", n as i32, "x")).await.expect("register another");
    }
    for i in &registered {
        let event = tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event");
        assert_eq!(event, Some(ServiceCacheEvent::Added(i.clone())));
    }
    assert_eq!(cache.instances(), sorted(registered.to_vec()));

    let cache2 = discovery.service_cache_builder("test").build().expect("cache 2");
    cache2.start().expect("start 2");
    cache2.ready().await.expect("ready: start 2");
    assert_eq!(cache2.instances(), sorted(registered.to_vec()), "loaded when start returns");
    use curator_discovery::InstanceProvider;
    assert_eq!(InstanceProvider::instances(&cache2).len(), 3);

    discovery.unregister(&registered[1]).await;
    let event = tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event");
    assert_eq!(event, Some(ServiceCacheEvent::Removed { id: registered[1].id.clone() }));
    cache.close().await;
    cache2.close().await;
    discovery.close().await;
    fw.close().await;
}

/// Follows Curator's TestServiceCache.testUpdate: an update of the registered instance reaches
/// the cache as an `Updated` event with the new payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_sees_updates() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let mut me = instance("test", 10064, "thing");
    let discovery: ServiceDiscovery<String> =
        ServiceDiscovery::builder(&fw, &base).this_instance(me.clone()).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    let cache = discovery.service_cache_builder("test").build().expect("cache");
    let mut events = cache.events();
    cache.start().expect("start");
    cache.ready().await.expect("ready: start");
    me.payload = Some("changed".to_string());
    discovery.update(me.clone()).expect("update");
    let event = tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event");
    assert_eq!(event, Some(ServiceCacheEvent::Updated(me.clone())));
    assert_eq!(cache.instances(), vec![me]);
    cache.close().await;
    discovery.close().await;
    fw.close().await;
}

/// CURATOR-452/453: nodes of a service that are not instances (empty, not JSON, a field of
/// the wrong type, not an object) are skipped by the queries and the cache, with a warning,
/// and counted; a single query of one is a typed error; an instance whose data turns bad leaves
/// the cache as `Removed`. Curator's query and cache threw on such nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_nodes_are_skipped_and_counted() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = discovery(&fw, &base).await;
    let good = instance("svc", 80, "ok");
    discovery.register(good.clone()).await.expect("register");
    let bad: [(&str, &[u8]); 4] = [
        ("empty", b""),
        ("not-json", b"{not json"),
        ("wrong-types", br#"{"name":"svc","id":"wrong-types","port":"eighty","serviceType":"DYNAMIC"}"#),
        ("not-an-object", b"[1,2,3]"),
    ];
    for (id, data) in bad {
        fw.create().for_path(&format!("{base}/svc/{id}"), data.to_vec()).await.expect("bad node");
    }
    assert_eq!(discovery.query_for_instances("svc").await.expect("query"), vec![good.clone()]);
    assert_eq!(discovery.skipped_nodes(), 4);
    let one = discovery.query_for_instance("svc", "not-json").await;
    assert!(matches!(one, Err(DiscoveryError::BadNode { ref path, .. }) if path.ends_with("/svc/not-json")), "{one:?}");
    // Said once (issue 26 item 13): "node \"..\": not a service instance: <why>".
    let message = one.unwrap_err().to_string();
    assert_eq!(message.matches("not a service instance").count(), 1, "{message}");
    assert!(message.contains("/svc/not-json") && message.contains("line 1"), "{message}");
    assert_eq!(discovery.skipped_nodes(), 5);

    let cache = discovery.service_cache_builder("svc").build().expect("cache");
    let mut events = cache.events();
    cache.start().expect("start");
    cache.ready().await.expect("ready: start");
    assert_eq!(cache.instances(), vec![good.clone()]);
    assert_eq!(cache.instances(), vec![good.clone()]);
    assert_eq!(cache.skipped_nodes(), 4, "each bad version counted once, however often read");
    // Another process breaks the good instance's node: it leaves the cache.
    fw.set_data().for_path(&format!("{base}/svc/{}", good.id), b"oops".to_vec()).await.expect("set data");
    let event = tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event");
    assert_eq!(event, Some(ServiceCacheEvent::Removed { id: good.id.clone() }));
    assert!(cache.instances().is_empty());
    assert_eq!(cache.skipped_nodes(), 5);
    cache.close().await;
    discovery.close().await;
    fw.close().await;
}

/// The issue's outage (as Curator's TestServiceDiscovery.testCrashedServerMultiInstances, with
/// an outage longer than the session timeout instead of an injected expiry): two instances
/// registered, the server stops until the client declares its session lost, one instance is
/// updated meanwhile, the server comes back (with the old session restored). Both instances
/// are back on the new session, the updated one with its latest data (CURATOR-181), each once,
/// and a cache of another client converges on them.
async fn outage_longer_than_the_session_timeout(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let session_timeout = timing.session_timeout() * 2;
    let mut server = TestingServer::start().await.expect("server");
    let fw = framework_with(&server.connect_string(), policy, retry, session_timeout).await;
    let observer = framework_with(&server.connect_string(), policy, retry, session_timeout).await;
    let base = unique_path("discovery");
    let discovery = discovery(&fw, &base).await;
    let first = instance("test", 10064, "v1");
    let mut second = instance("test", 10065, "v1");
    discovery.register(first.clone()).await.expect("register");
    discovery.register(second.clone()).await.expect("register");
    let view = ServiceDiscovery::<String>::builder(&observer, &base).build().expect("view");
    let cache = view.service_cache_builder("test").build().expect("cache");
    cache.start().expect("cache");
    cache.ready().await.expect("cache");
    assert_eq!(cache.instances().len(), 2);

    let mut states = fw.connection_state_stream();
    server.stop().await.expect("stop");
    wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    second.payload = Some("v2".to_string());
    discovery.update(second.clone()).expect("update while the server is down");
    server.restart().await.expect("restart");
    let restarted = Instant::now();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;

    for i in [&first, &second] {
        let back = eventually(timing.deadline(), || registered_once(&fw, &observer, &base, i)).await;
        assert!(back, "{policy:?}/{retry:?}: {} not back once with its latest data", i.port.unwrap_or_default());
    }
    assert!(
        restarted.elapsed() < session_timeout,
        "{policy:?}/{retry:?}: back only after the old session could expire"
    );
    let converged =
        eventually(timing.deadline(), || async { cache.instances() == sorted(vec![first.clone(), second.clone()]) });
    assert!(converged.await, "{policy:?}/{retry:?}: the cache sees {:?}", cache.instances());
    assert_eq!(cache.skipped_nodes(), 0);

    cache.close().await;
    discovery.close().await;
    assert!(
        eventually(timing.deadline(), || async { children(&observer, &format!("{base}/test")).await.is_empty() }).await,
        "{policy:?}/{retry:?}: left after close: {:?}",
        children(&observer, &format!("{base}/test")).await
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_are_back_with_their_latest_data_after_an_outage_longer_than_the_session_timeout() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| outage_longer_than_the_session_timeout(policy, retry))).await;
}

/// Session expiry (as Curator's TestServiceDiscovery.testCrashedInstance and testCrashedServer):
/// the instance, updated while its session is replaced, is registered again on the new session
/// with the update (CURATOR-181: Curator's re-registration wrote the instance it was first
/// given), once.
async fn session_expiry(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery");
    let mut me = instance("test", 10064, "v1");
    let discovery: ServiceDiscovery<String> =
        ServiceDiscovery::builder(&fw, &base).this_instance(me.clone()).build().expect("discovery");
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    let info = fw.session().await.expect("session").client().session().clone();
    let mut states = fw.connection_state_stream();
    expire_session(&server.connect_string(), &info).await.expect("expire");
    me.payload = Some("v2".to_string());
    discovery.update(me.clone()).expect("update");
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    assert!(
        eventually(timing.deadline(), || registered_once(&fw, &observer, &base, &me)).await,
        "{policy:?}/{retry:?}: not back once with v2: {:?}",
        discovery.query_for_instances("test").await
    );
    assert_eq!(discovery.query_for_instances("test").await.expect("query"), vec![me]);
    discovery.close().await;
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_is_back_with_its_latest_data_after_session_expiry() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| session_expiry(policy, retry))).await;
}

/// `update` while disconnected (a cut through the proxy, reconnection refused for `outage`):
/// the instance is there with the update once the client is back, once. After a short cut
/// (same session) the node is the same node, not deleted and made again (CURATOR-320: Curator
/// re-registered on every reconnection, a delete and create loop while the connection flapped);
/// after a cut longer than the session timeout it is made again on the new session.
async fn update_while_disconnected(policy: ErrorPolicy, retry: Retry, outage: Duration) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery");
    let mut me = instance("test", 10064, "v1");
    let discovery = discovery(&fw, &base).await;
    discovery.register(me.clone()).await.expect("register");
    let path = format!("{base}/test/{}", me.id);
    let created = observer.check_exists().for_path(&path).await.expect("exists").expect("node").czxid;

    for round in 0..3 {
        let mut states = fw.connection_state_stream();
        proxy.set_reject(true);
        proxy.cut();
        wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
        me.payload = Some(format!("v{}", round + 2));
        discovery.update(me.clone()).expect("update while disconnected");
        let until = Instant::now() + outage;
        if outage > timing.session_timeout() {
            wait_for(&mut states, ConnectionState::Lost, |_| true).await;
        }
        tokio::time::sleep_until(until.into()).await; // the outage itself, not a synchronisation
        proxy.set_reject(false);
        wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
        assert!(
            eventually(timing.deadline(), || registered_once(&fw, &observer, &base, &me)).await,
            "{policy:?}/{retry:?}/{outage:?}: round {round}: not back once with the update"
        );
        let czxid = observer.check_exists().for_path(&path).await.expect("exists").expect("node").czxid;
        if outage < timing.session_timeout() {
            assert_eq!(czxid, created, "{policy:?}/{retry:?}: the node was made again on the same session");
        }
    }
    discovery.close().await;
    assert!(gone(&observer, &path).await);
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_during_short_cuts_is_written_on_the_same_node() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| update_while_disconnected(policy, retry, Duration::from_millis(500))))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_during_a_cut_longer_than_the_session_timeout_is_registered_on_the_new_session() {
    init_tracing();
    let longer = Timing::new().session_timeout() + Duration::from_secs(1);
    join_all(COMBINATIONS.map(|(policy, retry)| update_while_disconnected(policy, retry, longer))).await;
}

/// CURATOR-617: unregister during a connection outage returns (Curator's threw, and the
/// instance stayed), and the instance is gone once the connection is back; a second
/// unregister is nothing to do.
async fn unregister_while_disconnected(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery");
    let me = ServiceInstance::builder("test").payload("p".to_string()).service_type(ServiceType::Static).build();
    let discovery = discovery(&fw, &base).await;
    discovery.register(me.clone()).await.expect("register");
    let path = format!("{base}/test/{}", me.id);
    let mut states = fw.connection_state_stream();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    let unregistered = tokio::time::timeout(timing.deadline(), discovery.unregister(&me)).await;
    assert!(unregistered.is_ok(), "{policy:?}/{retry:?}: unregister waited for the connection");
    discovery.unregister(&me).await;
    assert!(observer.check_exists().for_path(&path).await.expect("exists").is_some(), "deleted while cut off?");
    proxy.set_reject(false);
    assert!(gone(&observer, &path).await, "{policy:?}/{retry:?}: the instance outlived its unregister");
    discovery.close().await;
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregister_during_an_outage_returns_and_the_instance_goes_once_connected() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| unregister_while_disconnected(policy, retry))).await;
}

/// A persistent (STATIC) node of an earlier run with the same id is adopted and given the
/// current data, not left stale (Curator deletes it and creates it again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_node_of_an_earlier_run_is_adopted_with_the_current_data() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let me = ServiceInstance::builder("test").payload("new".to_string()).service_type(ServiceType::Static).build();
    let mut old = me.clone();
    old.payload = Some("old".to_string());
    let path = format!("{base}/test/{}", me.id);
    fw.create()
        .creating_parent_containers_if_needed()
        .with_mode(CreateMode::Persistent)
        .for_path(&path, old.to_json().expect("json"))
        .await
        .expect("old node");
    let discovery = discovery(&fw, &base).await;
    discovery.register(me.clone()).await.expect("register");
    assert!(
        eventually(Timing::new().deadline(), || async {
            discovery.query_for_instances("test").await.ok() == Some(vec![me.clone()])
        })
        .await
    );
    discovery.close().await;
    assert!(gone(&fw, &path).await);
    fw.close().await;
}

/// Follows Curator's TestServiceProvider.testBasic, with three instances each in a process of
/// its own (a framework each): a round-robin provider hands out each in turn; once one
/// instance's process dies (its framework closes, so its session ends), the provider stops
/// returning it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_round_robin_drops_an_instance_whose_process_died() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let base = unique_path("discovery-provider");
    let mut processes = Vec::new();
    let mut instances = Vec::new();
    for port in [9001, 9002, 9003] {
        let fw = tests::client(&connect).await;
        let registry = discovery(&fw, &base).await;
        let instance = instance("web", port, "p");
        registry.register(instance.clone()).await.expect("register");
        instances.push(instance);
        processes.push((fw, registry));
    }
    let client = tests::client(&connect).await;
    let lookup = discovery(&client, &base).await;
    let provider = lookup.service_provider("web", curator_discovery::ServiceProvider::builder()).expect("provider");
    provider.start().expect("start the provider");
    provider.ready().await.expect("the provider's first load");
    assert!(eventually(Timing::new().deadline(), || async { provider.all_instances().len() == 3 }).await);
    let mut ports: Vec<i32> = (0..6).filter_map(|_| provider.instance()).filter_map(|i| i.port).collect();
    assert_eq!(&ports[..3], &ports[3..], "round robin repeats its order");
    ports.truncate(3);
    ports.sort();
    assert_eq!(ports, vec![9001, 9002, 9003], "each instance once per round");

    // The process of the second instance dies: its session ends with no unregister.
    let (dead_fw, dead_registry) = processes.remove(1);
    dead_fw.close().await;
    drop(dead_registry);
    let dropped = eventually(Timing::new().deadline(), || async {
        (0..6).filter_map(|_| provider.instance()).all(|i| i.port != Some(9002))
    })
    .await;
    assert!(dropped, "the provider still returns the instance of a dead process");
    assert_eq!(provider.all_instances().len(), 2);
    provider.close().await;
    lookup.close().await;
    client.close().await;
    for (fw, registry) in processes {
        registry.close().await;
        fw.close().await;
    }
}

/// A registration refused for good (`base` lets anyone read it, nobody create under it):
/// `register` returns `NoAuth` within a second (it took the connection timeout before), under
/// every error and retry policy, and nothing is kept registered, so that a second `register`
/// is refused again rather than taken for an update of a registration that never was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_register_is_reported_promptly_and_not_kept() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let base = unique_path("discovery-noauth");
        tests::zk::read_only_node(&fw, &base).await;
        let discovery = ServiceDiscovery::<String>::builder(&fw, &base).build().expect("discovery");
        let me = instance("test", 10070, "v1");
        for attempt in ["first", "second"] {
            let started = Instant::now();
            let r = tokio::time::timeout(Timing::new().deadline(), discovery.register(me.clone())).await;
            assert!(
                matches!(r, Ok(Err(DiscoveryError::Curator(CuratorError::NoAuth { .. })))),
                "{policy:?}/{retry:?}: {attempt}: {r:?}"
            );
            assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
            assert!(discovery.registered().is_empty(), "{policy:?}/{retry:?}: kept {:?}", discovery.registered());
        }
        discovery.close().await;
        fw.close().await;
    }
}

/// A service cache whose service node refuses the client reading it: `start` returns `Ok` (it
/// is sync), `ready` returns `NoAuth` within a second (it waited for ever before issue 27's
/// first fix), under every error and retry policy, and the cache is closed within that second
/// (state `Closed`, a later start is `AlreadyClosed`). The same for a `ServiceProvider`, whose
/// start, ready and close are its cache's (Curator's TestServiceProvider has no refusal case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_cache_refused_reading_reports_it_from_ready() {
    use curator_core::zk::{Acl, AuthId, Permission};
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let base = unique_path("discovery-noread");
        let no_read = Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN;
        let acl = vec![Acl::new(no_read, AuthId::anyone())];
        fw.create()
            .creating_parents_if_needed()
            .with_acl(acl)
            .for_path(&format!("{base}/test"), Vec::new())
            .await
            .unwrap();
        let discovery = ServiceDiscovery::<String>::builder(&fw, &base).build().expect("discovery");
        let cache = discovery.service_cache_builder("test").build().expect("cache");
        let started = Instant::now();
        cache.start().expect("start returns Ok: the load is the cache's task's");
        let r = tokio::time::timeout(Timing::new().deadline(), cache.ready()).await;
        assert!(
            matches!(r, Ok(Err(DiscoveryError::Curator(CuratorError::NoAuth { .. })))),
            "{policy:?}/{retry:?}: {r:?}"
        );
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        let closed =
            eventually(Duration::from_secs(1), || std::future::ready(cache.state() == LifeState::Closed)).await;
        assert!(closed, "{policy:?}/{retry:?}: the refused cache is {:?}, not Closed", cache.state());
        let again = cache.start();
        assert!(
            matches!(again, Err(DiscoveryError::Curator(CuratorError::AlreadyClosed { what: "ServiceCache" }))),
            "{policy:?}/{retry:?}: {again:?}"
        );
        cache.close().await;

        let provider = discovery.service_provider("test", ServiceProvider::builder()).expect("provider");
        let started = Instant::now();
        provider.start().expect("start returns Ok: the load is the cache's task's");
        let r = tokio::time::timeout(Timing::new().deadline(), provider.ready()).await;
        assert!(
            matches!(r, Ok(Err(DiscoveryError::Curator(CuratorError::NoAuth { .. })))),
            "{policy:?}/{retry:?}: provider: {r:?}"
        );
        let closed =
            eventually(tests::at_once(&fw), || std::future::ready(provider.state() == LifeState::Closed)).await;
        assert!(closed, "{policy:?}/{retry:?}: the refused provider is {:?}, not Closed", provider.state());
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        provider.close().await;
        fw.close().await;
    }
}

/// A discovery whose `this_instance` the server refuses to create (`base` lets anyone read it,
/// nobody create under it): `start` returns `Ok` (it is sync: the registration is the
/// discovery's task's), `ready` returns `NoAuth` within a second, and the discovery is closed
/// within that second too (state `Closed`, nothing registered, a register is `AlreadyClosed`),
/// under every error and retry policy. Curator's `start` throws the create's error (its
/// TestServiceDiscovery has no refusal case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_this_instance_is_reported_by_ready_and_closes_the_discovery() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let base = unique_path("discovery-this-noauth");
        tests::zk::read_only_node(&fw, &base).await;
        let me = instance("test", 10071, "v1");
        let discovery =
            ServiceDiscovery::<String>::builder(&fw, &base).this_instance(me.clone()).build().expect("discovery");
        let started = Instant::now();
        discovery.start().expect("start returns Ok");
        let r = tokio::time::timeout(Timing::new().deadline(), discovery.ready()).await;
        assert!(
            matches!(r, Ok(Err(DiscoveryError::Curator(CuratorError::NoAuth { .. })))),
            "{policy:?}/{retry:?}: {r:?}"
        );
        let closed =
            eventually(Duration::from_secs(1), || std::future::ready(discovery.state() == LifeState::Closed)).await;
        assert!(closed, "{policy:?}/{retry:?}: the refused discovery is {:?}, not Closed", discovery.state());
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        assert!(discovery.registered().is_empty(), "{policy:?}/{retry:?}: kept {:?}", discovery.registered());
        let later = discovery.register(me).await;
        assert!(
            matches!(later, Err(DiscoveryError::Curator(CuratorError::AlreadyClosed { what: "ServiceDiscovery" }))),
            "{policy:?}/{retry:?}: {later:?}"
        );
        discovery.close().await;
        fw.close().await;
    }
}

/// The lifecycle errors of the discovery types are typed and name the type (Curator's
/// TestServiceCache / TestServiceDiscovery close twice without complaint): a service cache
/// started twice is `AlreadyStarted`, closed twice is fine, started after close is
/// `AlreadyClosed`; a register after the discovery's close is `AlreadyClosed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_errors_are_typed() {
    init_tracing();
    let fw = framework(&TestingServer::shared().connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery-life");
    let discovery = discovery(&fw, &base).await;
    let cache = discovery.service_cache_builder("test").build().expect("cache");
    cache.start().expect("start");
    cache.ready().await.expect("ready: start");
    let twice = cache.start();
    assert!(
        matches!(twice, Err(DiscoveryError::Curator(CuratorError::AlreadyStarted { what: "ServiceCache" }))),
        "{twice:?}"
    );
    cache.close().await;
    cache.close().await;
    let after = cache.start();
    assert!(
        matches!(after, Err(DiscoveryError::Curator(CuratorError::AlreadyClosed { what: "ServiceCache" }))),
        "{after:?}"
    );
    let never = discovery.service_cache_builder("test").build().expect("cache");
    never.close().await;
    assert!(matches!(never.start(), Err(DiscoveryError::Curator(CuratorError::AlreadyClosed { .. }))));

    discovery.close().await;
    discovery.close().await;
    let refused = discovery.register(instance("test", 1, "x")).await;
    assert!(
        matches!(refused, Err(DiscoveryError::Curator(CuratorError::AlreadyClosed { what: "ServiceDiscovery" }))),
        "{refused:?}"
    );
    fw.close().await;
}

/// A `DynamicSequential` registration whose create loses its reply: the node it made is the
/// registration's, the only one of the instance, and its close deletes it. The core ends such
/// a create with `OutcomeUnknown` (an unprotected sequential create leaves no name to look
/// for; Curator's node names are kept, so no protection); the registration's data, the
/// instance's JSON with its id and registration time, is unique, and the node is found among
/// the service's children by it. Failed before: the keeper placed the node again and made a
/// second one, leaving the first behind as a second registration of the same instance for the
/// rest of the session (and after `close`). Under every error and retry policy.
async fn sequential_registration_with_a_lost_reply(policy: ErrorPolicy, retry: Retry) {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery-seq-lost");
    let parent = format!("{base}/seq");
    // The service's node first: the registration's create is then the first create sent.
    observer.create().creating_parents_if_needed().for_path(&parent, Vec::new()).await.expect("parent");
    let discovery = discovery(&fw, &base).await;
    let me = ServiceInstance::builder("seq")
        .port(8080)
        .payload("p".to_string())
        .service_type(ServiceType::DynamicSequential)
        .build();
    proxy.swallow_next_reply_to(curator_test::RequestKind::Create);
    let registered = tokio::time::timeout(Timing::new().deadline(), discovery.register(me.clone())).await;
    assert!(!proxy.swallow_pending(), "{policy:?}/{retry:?}: the create never reached the server");
    assert!(matches!(registered, Ok(Ok(()))), "{policy:?}/{retry:?}: {registered:?}");
    let session = fw.session().await.expect("session").id();
    let ids = children(&observer, &parent).await;
    assert_eq!(ids.len(), 1, "{policy:?}/{retry:?}: one registration, not {ids:?}");
    let (owner, found) = read_instance(&observer, &format!("{parent}/{}", ids[0])).await.expect("the instance");
    assert_eq!((owner, &found), (session, &me), "{policy:?}/{retry:?}");
    assert_eq!(discovery.query_for_instances("seq").await.expect("query"), vec![me.clone()]);
    discovery.close().await;
    assert!(
        eventually(Timing::new().deadline(), || async { children(&observer, &parent).await.is_empty() }).await,
        "{policy:?}/{retry:?}: left behind after close: {:?}",
        children(&observer, &parent).await
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_registration_whose_create_loses_its_reply_is_registered_once() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| sequential_registration_with_a_lost_reply(policy, retry))).await;
}
