//! Service discovery's layout and its registrations' watches (issue 31, item 4), against real
//! ZooKeeper: a custom `DiscoveryPathConstructor` places every node (and one giving invalid
//! paths is a typed error), `watch_instances` takes another client's edit of a registration's
//! node into the registration (Curator's TestWatchedInstances), refuses garbage without
//! changing it, and registers the edit again after session expiry and across a proxy cut (each
//! under every combination of error and retry policy); `ServiceCacheBuilder::filter` applies to
//! the cache's instances and to its events.

use std::time::Duration;

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_discovery::{
    DiscoveryError, DiscoveryPathConstructor, RegistrationEvent, ServiceCacheEvent, ServiceDiscovery, ServiceInstance,
    ServiceProvider,
};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::fixture::wait_for;
use tests::policies::{framework, Retry, COMBINATIONS};
use tests::zk::children;
use tests::{init_tracing, unique_path};

type Instance = ServiceInstance<String>;

fn instance(name: &str, port: i32, payload: &str) -> Instance {
    ServiceInstance::builder(name).port(port).payload(payload.to_string()).build()
}

/// Instances under `<base>/<name>/instances`, names under `<base>`.
struct Nested(String);

impl DiscoveryPathConstructor for Nested {
    fn base_path(&self) -> String {
        self.0.clone()
    }
    fn path_for_instances(&self, name: &str) -> String {
        format!("{}/{name}/instances", self.0)
    }
}

/// The next registration event, within the test deadline.
async fn next_event(events: &mut curator_core::EventStream<RegistrationEvent<String>>) -> RegistrationEvent<String> {
    tokio::time::timeout(Timing::new().deadline(), events.next())
        .await
        .expect("a registration event in time")
        .expect("the registration events go on")
}

/// The instance at `path`, as `observer` reads it.
async fn read(observer: &CuratorFramework, path: &str) -> Option<Instance> {
    let bytes = observer.get_data().for_path(path).await.ok()?;
    ServiceInstance::from_json(&bytes).ok()
}

/// Follows Curator's DiscoveryPathConstructorImplTest with a constructor of the user's (and
/// TestServiceDiscovery.testBasic's checks): the registration, the queries, a cache and a
/// provider all use the constructor's paths; close deletes the instances where they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_path_constructor_places_every_node() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let me = instance("search", 10064, "thing");
    let other = instance("search", 10065, "other");
    let discovery = ServiceDiscovery::<String>::builder(&fw, "/ignored")
        .path_constructor(Nested(base.clone()))
        .this_instance(me.clone())
        .build()
        .expect("discovery");
    assert_eq!(discovery.base_path(), base);
    discovery.start().expect("start");
    discovery.ready().await.expect("ready: start");
    discovery.register(other.clone()).await.expect("register");
    let parent = format!("{base}/search/instances");
    let mut ids = vec![me.id.clone(), other.id.clone()];
    ids.sort();
    let mut found = children(&fw, &parent).await;
    found.sort();
    assert_eq!(found, ids);
    assert_eq!(read(&fw, &format!("{parent}/{}", me.id)).await, Some(me.clone()));
    assert_eq!(discovery.query_for_names().await.expect("names"), vec!["search".to_string()]);
    let mut both = vec![me.clone(), other.clone()];
    both.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(discovery.query_for_instances("search").await.expect("instances"), both);
    assert_eq!(discovery.query_for_instance("search", &me.id).await.expect("instance"), Some(me.clone()));

    let cache = discovery.service_cache_builder("search").build().expect("cache");
    assert_eq!(cache.path(), parent);
    cache.start().expect("cache start");
    cache.ready().await.expect("cache ready");
    assert_eq!(cache.instances(), both);
    let provider = discovery.service_provider("search", ServiceProvider::builder()).expect("provider");
    provider.start().expect("provider start");
    provider.ready().await.expect("provider ready");
    assert_eq!(provider.all_instances(), both);

    provider.close().await;
    cache.close().await;
    discovery.close().await;
    let emptied = eventually(Timing::new().deadline(), || async { children(&fw, &parent).await.is_empty() });
    assert!(emptied.await, "close unregisters at the constructor's paths");
    fw.close().await;
}

/// A constructor that gives invalid paths is refused at `build()` with a typed error (issue 40
/// item 12: before, `build()` and `start()` took it and the error came at the first register or
/// query); one that gives an invalid path for some names only is a typed error wherever such a
/// name is asked, never a panic and never a request; an invalid base path (given or
/// constructed) fails the build (Curator 5's DiscoveryPathConstructorImpl throws
/// `IllegalArgumentException`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_constructor_giving_invalid_paths_is_a_typed_error() {
    init_tracing();
    struct Relative(String);
    impl DiscoveryPathConstructor for Relative {
        fn base_path(&self) -> String {
            self.0.clone()
        }
        fn path_for_instances(&self, name: &str) -> String {
            format!("relative/{name}")
        }
    }
    /// Instances that are not where the caches look for them: `/flat/<id>`.
    struct Elsewhere(String);
    impl DiscoveryPathConstructor for Elsewhere {
        fn base_path(&self) -> String {
            self.0.clone()
        }
        fn path_for_instances(&self, name: &str) -> String {
            format!("{}/{name}", self.0)
        }
        fn path_for_instance(&self, _name: &str, id: &str) -> String {
            format!("/flat/{id}")
        }
    }
    /// A relative path for the service "search" only.
    struct Picky(String);
    impl DiscoveryPathConstructor for Picky {
        fn base_path(&self) -> String {
            self.0.clone()
        }
        fn path_for_instances(&self, name: &str) -> String {
            match name {
                "search" => format!("relative/{name}"),
                _ => format!("{}/{name}", self.0),
            }
        }
    }
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    fn bad<T>(r: &Result<T, DiscoveryError>) -> bool {
        matches!(r, Err(DiscoveryError::InvalidConstructedPath { .. }))
    }

    let me = instance("search", 1, "p");
    let built = ServiceDiscovery::<String>::builder(&fw, "/x")
        .path_constructor(Relative(base.clone()))
        .this_instance(me.clone())
        .build();
    assert!(bad(&built), "{built:?}");
    let built = ServiceDiscovery::<String>::builder(&fw, "/x").path_constructor(Relative(base.clone())).build();
    assert!(bad(&built), "refused at build, with no instance given: {built:?}");
    let built = ServiceDiscovery::<String>::builder(&fw, "/x").path_constructor(Elsewhere(base.clone())).build();
    assert!(bad(&built), "an instance path not under the instances' path: {built:?}");

    let discovery =
        ServiceDiscovery::<String>::builder(&fw, "/x").path_constructor(Picky(base.clone())).build().expect("build");
    discovery.start().expect("start");
    let registered = discovery.register(me.clone()).await;
    assert!(bad(&registered), "{registered:?}");
    assert!(discovery.registered().is_empty());
    let queried = discovery.query_for_instances("search").await;
    assert!(bad(&queried), "{queried:?}");
    let one = discovery.query_for_instance("search", &me.id).await;
    assert!(bad(&one), "{one:?}");
    let cache = discovery.service_cache_builder("search").build();
    assert!(bad(&cache), "{cache:?}");
    let provider = discovery.service_provider("search", ServiceProvider::builder());
    assert!(bad(&provider), "{provider:?}");
    assert_eq!(discovery.query_for_names().await.expect("names"), Vec::<String>::new(), "the base path is fine");
    assert_eq!(fw.check_exists().for_path(&base).await.expect("exists"), None, "nothing was made");
    discovery.close().await;

    let bad_base = ServiceDiscovery::<String>::builder(&fw, "/x").path_constructor(Relative("no-slash".into())).build();
    assert!(bad(&bad_base), "{bad_base:?}");
    for given in ["", "services", "/services/"] {
        let refused = ServiceDiscovery::<String>::builder(&fw, given).build();
        assert!(
            matches!(refused, Err(DiscoveryError::Curator(CuratorError::InvalidPath { .. }))),
            "{given:?}: {refused:?}"
        );
    }
    fw.close().await;
}

/// A started discovery at a unique base, registering `me` with its registration watched, on a
/// framework of its own; `other` is a second client of the same server (an operator's tool).
struct Watched {
    fw: CuratorFramework,
    other: CuratorFramework,
    base: String,
    discovery: ServiceDiscovery<String>,
    events: curator_core::EventStream<RegistrationEvent<String>>,
}

impl Watched {
    async fn start(me: &Instance) -> Watched {
        let server = TestingServer::shared();
        let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let base = unique_path("discovery");
        let discovery = ServiceDiscovery::<String>::builder(&fw, &base)
            .this_instance(me.clone())
            .watch_instances(true)
            .build()
            .expect("discovery");
        let events = discovery.registration_events();
        discovery.start().expect("start");
        discovery.ready().await.expect("ready: start");
        Watched { fw, other, base, discovery, events }
    }
}

/// Follows Curator's TestWatchedInstances.testWatchedInstances: another client writes a
/// changed instance (another payload) to a watched registration's node; the registration
/// takes it. Without the watch it does not. A local update afterwards writes over the edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_registration_takes_another_clients_edit() {
    init_tracing();
    let me = instance("test", 10064, "thing");
    let Watched { fw, other, base, discovery, mut events } = Watched::start(&me).await;
    assert_eq!(discovery.query_for_names().await.expect("names"), vec!["test".to_string()]);
    assert_eq!(discovery.query_for_instances("test").await.expect("instances"), vec![me.clone()]);

    let mut changed = me.clone();
    changed.payload = Some("different".to_string());
    let path = format!("{base}/test/{}", me.id);
    other.set_data().for_path(&path, changed.to_json().expect("json")).await.expect("edit");
    match next_event(&mut events).await {
        RegistrationEvent::Edited(edited) => assert_eq!(edited, changed),
        other => panic!("expected the edit, got {other:?}"),
    }
    assert_eq!(discovery.registered(), vec![changed.clone()]);
    assert_eq!(read(&other, &path).await, Some(changed.clone()), "the edit is not written over");

    // A local update after the edit wins, and is not reported as an edit.
    let mut mine = changed.clone();
    mine.payload = Some("mine".to_string());
    discovery.update(mine.clone()).expect("update");
    assert!(eventually(Timing::new().deadline(), || async { read(&other, &path).await.as_ref() == Some(&mine) }).await);
    assert_eq!(discovery.registered(), vec![mine.clone()]);
    assert!(events.try_next().is_none(), "our own write is no edit");

    // Without the watch, an edit is not taken.
    let plain_base = unique_path("discovery");
    let plain = ServiceDiscovery::<String>::builder(&fw, &plain_base).build().expect("plain");
    let unwatched = instance("test", 10066, "thing");
    plain.register(unwatched.clone()).await.expect("register");
    let mut edited = unwatched.clone();
    edited.payload = Some("different".to_string());
    let plain_path = format!("{plain_base}/test/{}", unwatched.id);
    other.set_data().for_path(&plain_path, edited.to_json().expect("json")).await.expect("edit");
    // Settled when a watched registration of the same client would have seen it: a second
    // edit of the watched node, written after, is reported.
    other.set_data().for_path(&path, changed.to_json().expect("json")).await.expect("edit");
    assert!(matches!(next_event(&mut events).await, RegistrationEvent::Edited(_)));
    assert_eq!(plain.registered(), vec![unwatched]);

    plain.close().await;
    discovery.close().await;
    fw.close().await;
    other.close().await;
}

/// Our own updates in quick succession are never taken as edits. The registration's watch may
/// read the node between two of them and report, after the second is written, the data of the
/// first: that data is older than our latest write (its mzxid is not above the write's), so it
/// is no edit. Before this was checked, such a stale read reverted the registration to the
/// older instance and published it as `Edited` (settling on the next read). No Curator analog:
/// TestWatchedInstances has no local updates. The settling is checked with another client's edit,
/// written after: the first event must be that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_own_quick_updates_are_never_taken_as_edits() {
    init_tracing();
    let me = instance("test", 10070, "0");
    let Watched { fw, other, base, discovery, mut events } = Watched::start(&me).await;
    let path = format!("{base}/test/{}", me.id);

    let mut mine = me.clone();
    for round in 1..=UPDATE_ROUNDS {
        mine.payload = Some(round.to_string());
        discovery.update(mine.clone()).expect("update");
        // Written: the watch's read of it may now race the next update's write.
        assert!(
            eventually(Timing::new().deadline(), || async { read(&other, &path).await.as_ref() == Some(&mine) }).await
        );
    }
    let mut edit = mine.clone();
    edit.payload = Some("theirs".to_string());
    other.set_data().for_path(&path, edit.to_json().expect("json")).await.expect("edit");
    match next_event(&mut events).await {
        RegistrationEvent::Edited(edited) => assert_eq!(edited, edit, "an update of ours was taken as an edit"),
        other => panic!("expected the other client's edit, got {other:?}"),
    }
    assert_eq!(discovery.registered(), vec![edit]);
    assert!(events.try_next().is_none(), "no event but the other client's edit");

    discovery.close().await;
    fw.close().await;
    other.close().await;
}

/// Updates in [`our_own_quick_updates_are_never_taken_as_edits`].
const UPDATE_ROUNDS: usize = 200;

/// What a watched registration cannot take (bytes that are not an instance, an instance of
/// another name or id) is a typed `Rejected` event; the registration is unchanged, and a valid
/// edit after is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_a_watched_node_is_rejected_and_changes_nothing() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = ServiceDiscovery::<String>::builder(&fw, &base).watch_instances(true).build().expect("discovery");
    let mut events = discovery.registration_events();
    let me = instance("test", 10064, "thing");
    discovery.register(me.clone()).await.expect("register");
    let path = format!("{base}/test/{}", me.id);

    other.set_data().for_path(&path, b"{not json".to_vec()).await.expect("garbage");
    match next_event(&mut events).await {
        RegistrationEvent::Rejected { id, error: DiscoveryError::BadNode { path: p, .. } } => {
            assert_eq!((id.as_str(), p.as_str()), (me.id.as_str(), path.as_str()));
        }
        other => panic!("expected a rejection of the garbage, got {other:?}"),
    }
    assert_eq!(discovery.registered(), vec![me.clone()]);

    let mut renamed = me.clone();
    renamed.name = "elsewhere".to_string();
    let mut other_id = me.clone();
    other_id.id = "someone-else".to_string();
    for wrong in [renamed, other_id] {
        other.set_data().for_path(&path, wrong.to_json().expect("json")).await.expect("edit");
        let event = next_event(&mut events).await;
        assert!(
            matches!(event, RegistrationEvent::Rejected { error: DiscoveryError::InvalidInstance { .. }, .. }),
            "{event:?}"
        );
        assert_eq!(discovery.registered(), vec![me.clone()]);
    }

    let mut fine = me.clone();
    fine.port = Some(10065);
    other.set_data().for_path(&path, fine.to_json().expect("json")).await.expect("edit");
    assert!(matches!(next_event(&mut events).await, RegistrationEvent::Edited(ref i) if i == &fine));
    assert_eq!(discovery.registered(), vec![fine]);
    discovery.close().await;
    assert!(events.next().await.is_none(), "the events end with the discovery");
    fw.close().await;
    other.close().await;
}

/// A watched registration edited by another client, then its session expires: the instance is
/// registered again on the new session with the edit (Curator's re-registration writes the
/// registration, which its NodeCache listener updated).
async fn edit_then_session_expiry(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), policy, retry).await;
    let other = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery");
    let discovery = ServiceDiscovery::<String>::builder(&fw, &base).watch_instances(true).build().expect("discovery");
    let mut events = discovery.registration_events();
    let me = instance("test", 10064, "v1");
    discovery.register(me.clone()).await.expect("register");
    let path = format!("{base}/test/{}", me.id);
    let mut edited = me.clone();
    edited.payload = Some("edited".to_string());
    other.set_data().for_path(&path, edited.to_json().expect("json")).await.expect("edit");
    assert!(matches!(next_event(&mut events).await, RegistrationEvent::Edited(_)), "{policy:?}/{retry:?}");

    let info = fw.session().await.expect("session").client().session().clone();
    let mut states = fw.connection_state_stream();
    expire_session(&server.connect_string(), &info).await.expect("expire");
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    let session = fw.session().await.expect("session").id();
    let back = eventually(timing.deadline(), || async {
        let Ok((bytes, stat)) = other.get_data().for_path_with_stat(&path).await else { return false };
        stat.ephemeral_owner == session && ServiceInstance::from_json(&bytes).ok() == Some(edited.clone())
    });
    assert!(back.await, "{policy:?}/{retry:?}: not registered again with the edit: {:?}", read(&other, &path).await);
    assert_eq!(discovery.registered(), vec![edited]);
    discovery.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_registration_is_registered_again_with_the_edit_after_session_expiry() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| edit_then_session_expiry(policy, retry))).await;
}

/// Another client edits a watched registration's node while the registering client is cut off
/// (a proxy cut, reconnection refused for a while, the same session): once back, the
/// registration takes the edit, and the node keeps it.
async fn edit_during_a_cut(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let other = framework(&server.connect_string(), policy, retry).await;
    let base = unique_path("discovery");
    let discovery = ServiceDiscovery::<String>::builder(&fw, &base).watch_instances(true).build().expect("discovery");
    let mut events = discovery.registration_events();
    let me = instance("test", 10064, "v1");
    discovery.register(me.clone()).await.expect("register");
    let path = format!("{base}/test/{}", me.id);

    let mut states = fw.connection_state_stream();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    let mut edited = me.clone();
    edited.payload = Some("edited while cut off".to_string());
    other.set_data().for_path(&path, edited.to_json().expect("json")).await.expect("edit");
    assert!(events.try_next().is_none(), "{policy:?}/{retry:?}: seen while cut off?");
    tokio::time::sleep(Duration::from_millis(300)).await; // the outage itself, not a synchronisation
    proxy.set_reject(false);
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    match tokio::time::timeout(timing.deadline(), events.next()).await {
        Ok(Some(RegistrationEvent::Edited(instance))) => assert_eq!(instance, edited, "{policy:?}/{retry:?}"),
        other => {
            panic!("{policy:?}/{retry:?}: expected the edit, got {other:?}; registered {:?}", discovery.registered())
        }
    }
    assert_eq!(discovery.registered(), vec![edited.clone()]);
    let kept = eventually(timing.deadline(), || async { read(&other, &path).await.as_ref() == Some(&edited) });
    assert!(kept.await, "{policy:?}/{retry:?}: the edit was written over");
    discovery.close().await;
    fw.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_made_during_a_cut_is_taken_once_reconnected() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| edit_during_a_cut(policy, retry))).await;
}

/// The next cache event, within the test deadline.
async fn next(events: &mut curator_core::EventStream<ServiceCacheEvent<String>>) -> ServiceCacheEvent<String> {
    tokio::time::timeout(Timing::new().deadline(), events.next()).await.expect("an event").expect("events go on")
}

/// A cache's filters apply to its instances and to its events (Curator has them on the
/// provider only: TestServiceProvider's filter cases, here on the cache): an instance refused
/// makes no event, one whose update the filter refuses is `Removed`, accepted again `Added`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_filters_apply_to_instances_and_events() {
    init_tracing();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let base = unique_path("discovery");
    let discovery = ServiceDiscovery::<String>::builder(&fw, &base).build().expect("discovery");
    let web = instance("svc", 8080, "a");
    let admin = instance("svc", 9090, "b");
    discovery.register(web.clone()).await.expect("register");
    discovery.register(admin.clone()).await.expect("register");
    let cache = discovery
        .service_cache_builder("svc")
        .filter(|i: &Instance| i.port == Some(8080))
        .filter(|i: &Instance| i.payload.as_deref() != Some("hidden"))
        .build()
        .expect("cache");
    let mut events = cache.events();
    cache.start().expect("start");
    cache.ready().await.expect("ready");
    assert_eq!(cache.instances(), vec![web.clone()]);

    // Refused: no event; the accepted one registered after is the next event.
    discovery.register(instance("svc", 9091, "c")).await.expect("register");
    let web2 = instance("svc", 8080, "d");
    discovery.register(web2.clone()).await.expect("register");
    assert_eq!(next(&mut events).await, ServiceCacheEvent::Added(web2.clone()));
    // An update the second filter refuses: Removed; accepted again: Added.
    let mut hidden = web.clone();
    hidden.payload = Some("hidden".to_string());
    discovery.update(hidden).expect("update");
    assert_eq!(next(&mut events).await, ServiceCacheEvent::Removed { id: web.id.clone() });
    discovery.update(web.clone()).expect("update");
    assert_eq!(next(&mut events).await, ServiceCacheEvent::Added(web.clone()));
    let mut both = vec![web.clone(), web2.clone()];
    both.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(cache.instances(), both);
    assert_eq!(cache.skipped_nodes(), 0, "filtered out is not skipped");
    // A refused instance going away makes no event either.
    discovery.unregister(&admin).await;
    discovery.unregister(&web2).await;
    assert_eq!(next(&mut events).await, ServiceCacheEvent::Removed { id: web2.id.clone() });
    cache.close().await;
    discovery.close().await;
    fw.close().await;
}
