//! ACLs, authentication and namespaces: which ACL a node gets, who may touch it, and what the
//! ACL provider is asked. Several tests follow Apache Curator's `TestFramework` and
//! `TestCreate`, as each one's comment says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::zk::{Acl, Acls, AuthId, Permission};
use curator_core::{AclProvider, CreateMode, CuratorError, CuratorEvent, CuratorEventType, FixedAclProvider};
use curator_test::{expire_session, TestingServer};
use tests::{builder, connected, init_tracing, unique_path, wait_for};
use tokio::sync::mpsc;

fn server() -> String {
    TestingServer::shared().connect_string()
}

/// `unique_path` without its leading slash, for a namespace.
fn unique_namespace(name: &str) -> String {
    unique_path(name).trim_start_matches('/').to_string()
}

/// `world:anyone` with the given permissions.
fn anyone(perms: Permission) -> Vec<Acl> {
    vec![Acl::new(perms, AuthId::anyone())]
}

/// WRITE for whoever the session authenticated as (Curator's `new ACL(Perms.WRITE, Ids.AUTH_IDS)`).
fn write_for_auth() -> Vec<Acl> {
    vec![Acl::new(Permission::WRITE, AuthId::authed())]
}

/// ACLs by full path, `world:anyone` ALL elsewhere (Curator's `TestCreate.testACLProvider`).
#[derive(Debug)]
struct ByPath(HashMap<String, Vec<Acl>>);

impl AclProvider for ByPath {
    fn default_acl(&self) -> Vec<Acl> {
        Acls::anyone_all().to_vec()
    }
    fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        self.0.get(path).cloned().unwrap_or_else(|| self.default_acl())
    }
}

/// Remembers every path it is asked about.
#[derive(Debug, Clone, Default)]
struct Recording(Arc<Mutex<Vec<String>>>);

impl AclProvider for Recording {
    fn default_acl(&self) -> Vec<Acl> {
        Acls::anyone_all().to_vec()
    }
    fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        self.0.lock().unwrap().push(path.to_string());
        self.default_acl()
    }
}

/// Permissions that still let the test delete what it made: READ|CREATE|DELETE|ADMIN and
/// READ|CREATE|DELETE|WRITE, neither of them the default ALL.
fn no_write() -> Permission {
    Permission::READ | Permission::CREATE | Permission::DELETE | Permission::ADMIN
}
fn no_admin() -> Permission {
    Permission::READ | Permission::CREATE | Permission::DELETE | Permission::WRITE
}

/// The namespace node, and its parents, get the framework's provider's ACLs (asked with their
/// full paths), as Curator's `NamespaceImpl` does through `ZKPaths.mkdirs`. Follows Curator's
/// `TestCreate.testCreateWithParentsWithoutAclInNamespace`, with a namespace two levels deep.
/// Before, the namespace nodes were created `world:anyone` ALL whatever the provider said, and
/// the provider was asked about the parents inside the namespace without the namespace.
#[tokio::test]
async fn namespace_nodes_and_parents_get_the_providers_acls() {
    let top = unique_namespace("aclns");
    let namespace = format!("{top}/bar");
    let provider = ByPath(HashMap::from([
        (format!("/{top}"), anyone(no_admin())),
        (format!("/{namespace}"), anyone(no_write())),
        (format!("/{namespace}/foo"), anyone(no_admin())),
    ]));
    let fw = connected(builder(&server()).acl_provider(provider)).await;
    let bar = fw.using_namespace(Some(&namespace)).unwrap();
    bar.create().creating_parents_if_needed().for_path("/foo/boo", vec![]).await.unwrap();

    let plain = connected(builder(&server())).await;
    let acl = |p: String| {
        let plain = plain.clone();
        async move { plain.get_acl().for_path(&p).await.unwrap().0 }
    };
    assert_eq!(acl(format!("/{namespace}/foo/boo")).await, Acls::anyone_all().to_vec());
    assert_eq!(acl(format!("/{namespace}/foo")).await, anyone(no_admin()));
    assert_eq!(acl(format!("/{namespace}")).await, anyone(no_write()), "the namespace node");
    assert_eq!(acl(format!("/{top}")).await, anyone(no_admin()), "the namespace's parent");
    plain.delete().deleting_children_if_needed().for_path(&format!("/{top}")).await.unwrap();
    fw.close().await;
    plain.close().await;
}

/// With a provider that gives `world:anyone` READ and ALL to the creator, under digest
/// authentication, the namespace node gets exactly that ACL: a stranger may read it but not
/// create in it. Before, it was created `world:anyone` ALL.
#[tokio::test]
async fn namespace_node_is_not_open_to_the_world() {
    let namespace = unique_namespace("private");
    let provider = FixedAclProvider(vec![
        Acl::new(Permission::READ, AuthId::anyone()),
        Acl::new(Permission::ALL, AuthId::authed()),
    ]);
    let owner = connected(
        builder(&server())
            .authorization("digest", b"owner:secret".to_vec())
            .acl_provider(provider)
            .namespace(namespace.clone()),
    )
    .await;
    owner.create().for_path("/mine", b"x".to_vec()).await.unwrap();

    let stranger = connected(builder(&server())).await;
    let (acl, _) = stranger.get_acl().for_path(&format!("/{namespace}")).await.unwrap();
    assert_eq!(acl.len(), 2, "{acl:?}");
    assert_eq!((acl[0].scheme(), acl[0].id(), acl[0].permission()), ("world", "anyone", Permission::READ));
    assert!(acl[1].scheme() == "digest" && acl[1].id().starts_with("owner:"), "{acl:?}");
    let denied = stranger.create().for_path(&format!("/{namespace}/theirs"), vec![]).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");

    owner.delete().for_path("/mine").await.unwrap();
    owner.using_namespace(None).unwrap().delete().for_path(&format!("/{namespace}")).await.unwrap();
    owner.close().await;
    stranger.close().await;
}

/// The ACL provider is asked with the full path, namespace included, as Curator's
/// `CreateBuilderImpl` does (`acling.getAclList(adjustedPath)`, the path after
/// `fixForNamespace` and the protection prefix) and `ZKPaths.mkdirs` for parents and the
/// namespace. Before, it was asked with the path inside the namespace, and not at all for the
/// namespace node.
#[tokio::test]
async fn acl_provider_is_asked_with_the_full_path() {
    let namespace = unique_namespace("asked");
    let provider = Recording::default();
    let fw = connected(builder(&server()).acl_provider(provider.clone()).namespace(namespace.clone())).await;
    fw.create().creating_parents_if_needed().for_path("/a/b", vec![]).await.unwrap();
    let protected = fw.create().with_protection().for_path("/a/p", vec![]).await.unwrap();
    fw.transaction().create("/t", vec![], CreateMode::Persistent).commit().await.unwrap();

    let asked = provider.0.lock().unwrap().clone();
    let ns = format!("/{namespace}");
    for expected in [ns.clone(), format!("{ns}/a"), format!("{ns}/a/b"), format!("{ns}{protected}"), format!("{ns}/t")]
    {
        assert!(asked.contains(&expected), "{expected} not in {asked:?}");
    }
    assert!(asked.iter().all(|p| p.starts_with(&ns)), "{asked:?}");
    fw.using_namespace(None).unwrap().delete().deleting_children_if_needed().for_path(&ns).await.unwrap();
    fw.close().await;
}

/// `set_acl` sets the ACL it is given, with or without a version. (It can no longer be
/// called without one: `set_acl().for_path(p)` does not compile; it used to set
/// `world:anyone` ALL.)
#[tokio::test]
async fn set_acl_sets_the_acl_given() {
    let fw = connected(builder(&server())).await;
    let p = unique_path("setacl");
    fw.create().for_path(&p, vec![]).await.unwrap();
    let read_only = anyone(Permission::READ | Permission::ADMIN | Permission::DELETE);
    fw.set_acl().with_acl(read_only.clone()).for_path(&p).await.unwrap();
    assert_eq!(fw.get_acl().for_path(&p).await.unwrap().0, read_only);
    let denied = fw.set_data().for_path(&p, b"x".to_vec()).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    let (_, stat) = fw.get_acl().for_path(&p).await.unwrap();
    let stale = fw.set_acl().with_acl(Acls::anyone_all().to_vec()).with_version(stat.aversion + 1).for_path(&p).await;
    assert!(matches!(stale, Err(CuratorError::BadVersion { .. })), "{stale:?}");
    fw.set_acl().with_version(stat.aversion).with_acl(Acls::anyone_all().to_vec()).for_path(&p).await.unwrap();
    assert_eq!(fw.get_acl().for_path(&p).await.unwrap().0, Acls::anyone_all().to_vec());
    fw.delete().for_path(&p).await.unwrap();
    fw.close().await;
}

/// Follows Curator's `TestFramework.testCreateACLSingleAuth`: a node created with WRITE for
/// the creator's digest identity may be written by a session with the same credentials and
/// not by one with others.
#[tokio::test]
async fn create_acl_single_auth() {
    let p = unique_path("single");
    let me1 = connected(builder(&server()).authorization("digest", b"me1:pass1".to_vec())).await;
    me1.create().with_acl(write_for_auth()).for_path(&p, b"test".to_vec()).await.unwrap();
    me1.close().await;

    let again = connected(builder(&server()).authorization("digest", b"me1:pass1".to_vec())).await;
    again.set_data().for_path(&p, b"test".to_vec()).await.unwrap();
    let other = connected(builder(&server()).authorization("digest", b"something:else".to_vec())).await;
    let denied = other.set_data().for_path(&p, b"test".to_vec()).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    again.close().await;
    other.close().await;
}

/// Follows Curator's `TestFramework.testCreateACLMultipleAuths`: a framework authenticated
/// twice creates a node with WRITE for its identities; either identity may write it, another
/// may not.
#[tokio::test]
async fn create_acl_multiple_auths() {
    let p = unique_path("multi");
    let both = connected(
        builder(&server())
            .authorization("digest", b"me1:pass1".to_vec())
            .authorization("digest", b"me2:pass2".to_vec()),
    )
    .await;
    both.create().with_acl(write_for_auth()).for_path(&p, b"test".to_vec()).await.unwrap();
    both.close().await;

    for auth in [&b"me1:pass1"[..], b"me2:pass2"] {
        let fw = connected(builder(&server()).authorization("digest", auth.to_vec())).await;
        fw.set_data().for_path(&p, b"test".to_vec()).await.unwrap();
        fw.close().await;
    }
    let other = connected(builder(&server()).authorization("digest", b"something:else".to_vec())).await;
    let denied = other.set_data().for_path(&p, b"test".to_vec()).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    other.close().await;
}

/// Follows Curator's `TestFramework.testCreateACLWithReset`: the credentials are given to
/// every new session, so after the session is lost the framework may still write a node only
/// its identity may write. (Curator stops the server until `LOST`; here the session is
/// expired on demand, which leads to the same new session, sooner.)
#[tokio::test]
async fn create_acl_with_reset() {
    init_tracing();
    let p = unique_path("reset");
    let b = builder(&server()).authorization("digest", b"me:pass".to_vec());
    let fw = b.build().unwrap();
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    fw.block_until_connected(Duration::from_secs(10)).await.unwrap();
    fw.create().with_acl(write_for_auth()).for_path(&p, b"test".to_vec()).await.unwrap();

    let old = fw.session().await.unwrap();
    expire_session(&server(), old.client().session()).await.unwrap();
    drop(old);
    wait_for(&mut states, curator_core::ConnectionState::Lost, |_| true).await;
    wait_for(&mut states, curator_core::ConnectionState::Reconnected, |e| e.new_session).await;
    fw.set_data().for_path(&p, b"test".to_vec()).await.unwrap();
    fw.close().await;
}

/// The next path sent, within 10 s.
async fn next_path(rx: &mut mpsc::UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("an event in time")
}

/// Follows Curator's `TestFramework.testNamespaceInBackground`: background events of a
/// framework with a namespace carry paths inside the namespace, for listeners and callbacks.
#[tokio::test]
async fn namespace_in_background() {
    let namespace = unique_namespace("aisa");
    let fw = connected(builder(&server()).namespace(namespace.clone())).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let to_listener = tx.clone();
    let listener = fw.add_listener(move |_: &curator_core::CuratorFramework, e: CuratorEvent| {
        if e.event_type == CuratorEventType::Exists {
            drop(to_listener.send(e.path));
        }
    });
    fw.create().for_path("/base", vec![]).await.unwrap();
    fw.check_exists().for_path("/base").in_background_to_listeners();
    assert_eq!(next_path(&mut rx).await.as_deref(), Some("/base"));
    fw.remove_listener(listener);

    fw.get_children().for_path("/base").in_background(move |_, e| drop(tx.send(e.path)));
    assert_eq!(next_path(&mut rx).await.as_deref(), Some("/base"));
    delete_namespace(&fw, &namespace).await;
    fw.close().await;
}

/// Follows Curator's `TestFramework.testNamespaceWithWatcher`: a watcher set through a
/// framework with a namespace is told the path inside the namespace.
#[tokio::test]
async fn namespace_with_watcher() {
    let namespace = unique_namespace("aisa");
    let fw = connected(builder(&server()).namespace(namespace.clone())).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    fw.create().for_path("/base", vec![]).await.unwrap();
    fw.get_children().using_watcher(move |e| drop(tx.send(e.path))).for_path("/base").await.unwrap();
    fw.create().for_path("/base/child", vec![]).await.unwrap();
    let path = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("a watch event in time");
    assert_eq!(path.as_deref(), Some("/base"));
    delete_namespace(&fw, &namespace).await;
    fw.close().await;
}

/// Follows Curator's `TestCreate.testCreateWithParentsWithoutAcl`: with no ACL given, each
/// parent a create makes gets the provider's ACL for its own path, the node its own.
#[tokio::test]
async fn create_with_parents_without_acl() {
    let base = unique_path("parents");
    let provider = ByPath(HashMap::from([
        (format!("{base}/bar"), anyone(no_write())),
        (format!("{base}/bar/foo"), anyone(no_admin())),
    ]));
    let fw = connected(builder(&server()).acl_provider(provider)).await;
    fw.create().creating_parents_if_needed().for_path(&format!("{base}/bar/foo/boo"), vec![]).await.unwrap();
    let acl = |p: String| {
        let fw = fw.clone();
        async move { fw.get_acl().for_path(&p).await.unwrap().0 }
    };
    assert_eq!(acl(format!("{base}/bar/foo/boo")).await, Acls::anyone_all().to_vec());
    assert_eq!(acl(format!("{base}/bar/foo")).await, anyone(no_admin()));
    assert_eq!(acl(format!("{base}/bar")).await, anyone(no_write()));
    fw.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
    fw.close().await;
}

/// Follows Curator's `TestCreate.testForbiddenAncestors` (ZOOKEEPER-2590): creating parents
/// needs CREATE only on the deepest existing ancestor, not on every ancestor. Under a node
/// nobody may create in, a create whose missing parents start there fails with `NoAuth`, and
/// one whose missing parents start deeper, in a subtree that allows it, succeeds. Curator's
/// test creates only one level under the existing subtree; the deeper create here failed
/// before, with `NoAuth`: parents were created from the top, and the server checks CREATE on
/// the parent before it answers that a node exists.
#[tokio::test]
async fn forbidden_ancestors() {
    let base = unique_path("forbidden");
    let fw = connected(builder(&server())).await;
    let bat = format!("{base}/bat");
    fw.create().creating_parents_if_needed().for_path(&format!("{bat}/bi/hiru"), vec![]).await.unwrap();
    fw.set_acl().with_acl(anyone(Permission::DELETE | Permission::ADMIN)).for_path(&bat).await.unwrap();

    let denied = fw.create().creating_parents_if_needed().for_path(&format!("{bat}/foo/bost"), vec![]).await;
    assert!(matches!(denied, Err(CuratorError::NoAuth { .. })), "{denied:?}");
    fw.create().creating_parents_if_needed().for_path(&format!("{bat}/bi/hiru/bost"), vec![]).await.unwrap();
    fw.create().creating_parents_if_needed().for_path(&format!("{bat}/bi/hiru/x/y/z"), vec![]).await.unwrap();
    assert!(fw.check_exists().for_path(&format!("{bat}/bi/hiru/x/y/z")).await.unwrap().is_some());

    fw.set_acl().with_acl(Acls::anyone_all().to_vec()).for_path(&bat).await.unwrap();
    fw.delete().deleting_children_if_needed().for_path(&base).await.unwrap();
    fw.close().await;
}

/// Deletes the namespace node `namespace` (without its leading slash) and everything under it.
async fn delete_namespace(fw: &curator_core::CuratorFramework, namespace: &str) {
    let root = fw.using_namespace(None).unwrap();
    root.delete().deleting_children_if_needed().for_path(&format!("/{namespace}")).await.unwrap();
}

/// An authentication scheme the server does not have (`authorization("nosuchscheme", ..)`) is
/// refused by the server with AUTH_FAILED: the error says what was refused, the scheme, and
/// does not blame SASL, which this framework does not use. Before, the message said "the server
/// requires authentication (SASL) that this framework does not give" and suggested
/// `sasl_digest`.
#[tokio::test]
async fn an_unknown_auth_scheme_is_named_in_the_refusal() {
    init_tracing();
    let fw = builder(&server()).authorization("nosuchscheme", b"secret".to_vec()).build().unwrap();
    fw.start().unwrap();
    let r = tokio::time::timeout(Duration::from_secs(20), fw.block_until_connected(Duration::from_secs(10)))
        .await
        .expect("an answer");
    let Err(CuratorError::AuthFailed { detail }) = &r else { panic!("expected AuthFailed, got {r:?}") };
    assert!(detail.contains("\"nosuchscheme\""), "{detail}");
    assert!(!detail.contains("SASL") && !detail.contains("sasl"), "{detail}");
    assert!(!detail.contains("secret"), "the credential is not shown: {detail}");
    fw.close().await;
}
