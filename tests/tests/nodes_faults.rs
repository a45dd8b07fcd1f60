//! Nodes that stay, under faults (issue 13, "Must show"): an outage longer than the session
//! timeout with a server restart that brings the old session back, session expiry, connection
//! cuts shorter and longer than the session timeout, deletion by someone else, data set while
//! disconnected, and a node of another session in the way. Each runs under both error policies
//! and with both the default and a short retry policy.

use std::time::{Duration, Instant};

use curator_core::{ConnectionState, CreateMode, CuratorFramework, ErrorPolicy};
use curator_recipes::{GroupMember, PersistentNode};
use curator_test::{eventually, expire_session, ChaosProxy, RequestKind, SeenRequest, TestingServer, Timing};
use futures::future::join_all;
use tests::fixture::wait_for;
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::zk::children;
use tests::{init_tracing, unique_path};

/// The owner and data of `path`, or `None` if it is missing.
async fn read_node(fw: &CuratorFramework, path: &str) -> Option<(i64, Vec<u8>)> {
    match fw.get_data().for_path_with_stat(path).await {
        Ok((data, stat)) => Some((stat.ephemeral_owner, data)),
        Err(_) => None,
    }
}

async fn session_id(fw: &CuratorFramework) -> i64 {
    fw.session().await.expect("a session").id()
}

/// True once `path` is there, owned by `fw`'s current session, with `data`.
async fn owned_with(fw: &CuratorFramework, observer: &CuratorFramework, path: &str, data: &[u8]) -> bool {
    let Ok(session) = fw.session().await else { return false };
    read_node(observer, path).await.is_some_and(|(owner, d)| owner == session.id() && d == data)
}

/// The outage: the server stops, the member's client gives its session up, and the
/// server comes back with the old session (and its node) restored for another session timeout.
/// The member is back, on its new session, as soon as it has one: well before the old session
/// could expire. Curator's PersistentNode adopts the old node and waits for its expiry, so the
/// member is missing for about a session timeout; the hand-written re-registration of the old
/// demo failed with NodeExists and lost the member for good.
async fn outage_longer_than_the_session_timeout(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    // Twice the usual session timeout: the old session lives that long after the restart, and
    // the client's reconnection backoff (up to a few seconds after a long outage) must not eat
    // the margin that shows the member back before it could expire.
    let session_timeout = timing.session_timeout() * 2;
    let mut server = TestingServer::start().await.expect("server");
    let member_fw = framework_with(&server.connect_string(), policy, retry, session_timeout).await;
    let observer_fw = framework_with(&server.connect_string(), policy, retry, session_timeout).await;
    let path = unique_path("members");
    let member = GroupMember::builder(&member_fw, &path, "m1").payload(b"p1".to_vec()).build().expect("member");
    member.start().expect("member");
    member.ready().await.expect("member");
    assert!(member.wait_for_registration(timing.deadline()).await);
    let observer = GroupMember::builder(&observer_fw, &path, "obs").build().expect("observer");
    observer.start().expect("observer");
    observer.ready().await.expect("observer");
    assert!(eventually(timing.deadline(), || async { observer.current_members().contains_key("m1") }).await);
    let old = session_id(&member_fw).await;

    let mut states = member_fw.connection_state_stream();
    server.stop().await.expect("stop");
    wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    server.restart().await.expect("restart");
    let restarted = Instant::now();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    let reconnected = restarted.elapsed();

    let member_path = format!("{path}/m1");
    let back = eventually(timing.deadline(), || owned_with(&member_fw, &observer_fw, &member_path, b"p1")).await;
    let took = restarted.elapsed();
    assert!(back, "{policy:?}/{retry:?}: the member never came back on its new session");
    assert_ne!(session_id(&member_fw).await, old);
    assert!(
        took < session_timeout,
        "{policy:?}/{retry:?}: back {took:?} after the restart (new session after {reconnected:?}), not before the old session could expire ({session_timeout:?})"
    );
    // The observer's view converges, each member once.
    let converged = eventually(timing.deadline(), || async {
        let members = observer.current_members();
        members.len() == 2 && members.get("m1").map(Vec::as_slice) == Some(b"p1".as_slice())
    })
    .await;
    assert!(converged, "{policy:?}/{retry:?}: the observer sees {:?}", observer.current_members().keys());

    member.close().await;
    observer.close().await;
    let checker = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    assert!(
        eventually(timing.deadline(), || async { children(&checker, &path).await.is_empty() }).await,
        "{policy:?}/{retry:?}: nodes left after close: {:?}",
        children(&checker, &path).await
    );
    for fw in [member_fw, observer_fw, checker] {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_is_back_at_once_after_an_outage_longer_than_the_session_timeout() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| outage_longer_than_the_session_timeout(policy, retry))).await;
}

/// A server restart that outlasts the session: the case behind the flake of
/// `ephemeral_sequential_with_protection_reconnection` (nodes_curator_persistent.rs), made
/// certain here by restarting only once the client has presumed its session lost (19/20 of the
/// session timeout after the server last answered, docs/architecture.md section 3.2). The
/// protected ephemeral-sequential node is made again on the new session, under its name, as
/// the only child, and that create is published once (Curator calls `nodeCreated` for its
/// create after RECONNECTED too). Every error and retry policy, on one server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_is_made_again_once_after_a_restart_that_outlasts_the_session() {
    init_tracing();
    let deadline = Timing::new().deadline();
    let mut server = TestingServer::start().await.expect("server");
    let connect = server.connect_string();
    let mut rounds = Vec::new();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&connect, policy, retry).await;
        let parent = unique_path("restart-lost");
        let node = PersistentNode::builder(&fw, &format!("{parent}/two"))
            .mode(CreateMode::EphemeralSequential)
            .protection(true)
            .build()
            .expect("node");
        node.start().expect("start");
        assert!(node.wait_for_initial_create(deadline).await);
        let actual = node.actual_path().expect("a path");
        let before = children(&fw, &parent).await;
        assert_eq!(before.len(), 1, "{before:?}");
        let old = session_id(&fw).await;
        let (creates, states) = (node.created_events(), fw.connection_state_stream());
        rounds.push((policy, retry, fw, node, parent, actual, before, old, creates, states));
    }
    server.stop().await.expect("stop");
    for (.., states) in &mut rounds {
        wait_for(states, ConnectionState::Lost, |_| true).await;
    }
    server.restart().await.expect("restart");
    let observer = framework(&connect, ErrorPolicy::Standard, Retry::Default).await;
    for (policy, retry, fw, node, parent, actual, before, old, mut creates, mut states) in rounds {
        wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
        let again = tokio::time::timeout(deadline, creates.next()).await.ok().flatten();
        assert_eq!(again.as_deref(), Some(actual.as_str()), "{policy:?}/{retry:?}: not made again under its name");
        let new = session_id(&fw).await;
        assert_ne!(new, old, "{policy:?}/{retry:?}");
        let owner = read_node(&observer, &actual).await.map(|(owner, _)| owner);
        assert_eq!(owner, Some(new), "{policy:?}/{retry:?}: not the new session's node");
        assert_eq!(children(&observer, &parent).await, before, "{policy:?}/{retry:?}: one node, under its name");
        assert_eq!(node.actual_path().as_deref(), Some(actual.as_str()));
        assert!(creates.try_next().is_none(), "{policy:?}/{retry:?}: made more than once");
        node.close().await;
        fw.close().await;
    }
    observer.close().await;
}

/// Expiry of the node's session: the node is made again on the new session, with the latest
/// data (set while the session was being replaced).
async fn session_expiry(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let path = format!("{}/node", unique_path("expiry"));
    let node = PersistentNode::builder(&fw, &path).data(b"v1".to_vec()).build().expect("node");
    node.start().expect("node");
    assert!(node.wait_for_initial_create(timing.deadline()).await);
    let info = fw.session().await.expect("session").client().session().clone();
    let mut states = fw.connection_state_stream();
    expire_session(&server.connect_string(), &info).await.expect("expire");
    node.set_data(b"v2".to_vec()).expect("set data");
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;
    assert!(
        eventually(timing.deadline(), || owned_with(&fw, &observer, &path, b"v2")).await,
        "{policy:?}/{retry:?}: not back with v2: {:?}",
        read_node(&observer, &path).await
    );
    node.close().await;
    assert!(node_gone(&observer, &path).await, "{policy:?}/{retry:?}: left behind after close");
    fw.close().await;
    observer.close().await;
}

async fn node_gone(observer: &CuratorFramework, path: &str) -> bool {
    eventually(Timing::new().deadline(), || async { read_node(observer, path).await.is_none() }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_is_made_again_after_session_expiry_with_the_latest_data() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| session_expiry(policy, retry))).await;
}

/// A cut through the proxy, with reconnection refused for `outage`: data set meanwhile is on
/// the node once the client is back, on the same session (short outage) or a new one (longer
/// than the session timeout).
async fn cut(policy: ErrorPolicy, retry: Retry, outage: Duration) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let path = format!("{}/node", unique_path("cut"));
    let node = PersistentNode::builder(&fw, &path)
        .mode(CreateMode::EphemeralSequential)
        .protection(true)
        .data(b"v1".to_vec())
        .build()
        .expect("node");
    node.start().expect("node");
    assert!(node.wait_for_initial_create(timing.deadline()).await);
    let first = node.actual_path().expect("a path");
    let mut states = fw.connection_state_stream();
    proxy.set_reject(true);
    proxy.cut();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    node.set_data(b"v2".to_vec()).expect("set data");
    let until = Instant::now() + outage;
    if outage > timing.session_timeout() {
        wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    }
    tokio::time::sleep_until(until.into()).await; // the outage itself, not a synchronisation
    proxy.set_reject(false);
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    assert!(
        eventually(timing.deadline(), || owned_with(&fw, &observer, &first, b"v2")).await,
        "{policy:?}/{retry:?}/{outage:?}: not back under its name {first} with v2; children: {:?}",
        children(&observer, curator_core::path::parent(&path)).await
    );
    assert_eq!(node.actual_path().as_deref(), Some(first.as_str()), "a sequential node keeps its name");
    assert_eq!(children(&observer, curator_core::path::parent(&path)).await.len(), 1, "registered once");
    node.close().await;
    assert!(node_gone(&observer, &first).await, "{policy:?}/{retry:?}: left behind after close");
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_set_during_a_short_cut_is_written_on_the_same_node() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| cut(policy, retry, Duration::from_millis(500)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_is_made_again_under_its_name_after_a_cut_longer_than_the_session_timeout() {
    init_tracing();
    let longer = Timing::new().session_timeout() + Duration::from_secs(1);
    join_all(COMBINATIONS.map(|(policy, retry)| cut(policy, retry, longer))).await;
}

/// Someone else deletes the node: it comes back, with the latest data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_deleted_by_someone_else_comes_back() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let other = framework(&server.connect_string(), policy, retry).await;
        let path = format!("{}/node", unique_path("deleted"));
        let node = PersistentNode::builder(&fw, &path)
            .mode(CreateMode::Persistent)
            .data(b"v1".to_vec())
            .build()
            .expect("node");
        node.start().expect("node");
        assert!(node.wait_for_initial_create(timing.deadline()).await);
        let mut created = node.created_events();
        node.set_data(b"v2".to_vec()).expect("set data");
        assert!(
            eventually(timing.deadline(), || async { read_node(&other, &path).await.is_some_and(|(_, d)| d == b"v2") })
                .await
        );
        other.delete().for_path(&path).await.expect("delete");
        let again = tokio::time::timeout(timing.deadline(), created.next()).await;
        assert_eq!(again.ok().flatten().as_deref(), Some(path.as_str()), "{policy:?}/{retry:?}: not made again");
        assert!(
            eventually(timing.deadline(), || async { read_node(&other, &path).await.is_some_and(|(_, d)| d == b"v2") })
                .await
        );
        node.close().await;
        assert!(node_gone(&other, &path).await, "{policy:?}/{retry:?}: a persistent node is deleted on close");
        fw.close().await;
        other.close().await;
    }
}

/// An ephemeral node of another session at the path is not taken over (the path would be
/// held twice): the node waits for it to go, then makes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_node_is_waited_for_not_taken() {
    init_tracing();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let fw = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    let path = format!("{}/node", unique_path("foreign"));
    other
        .create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path(&path, b"theirs".to_vec())
        .await
        .expect("create");
    let node = PersistentNode::builder(&fw, &path).data(b"ours".to_vec()).build().expect("node");
    node.start().expect("node");
    assert!(!node.wait_for_initial_create(Duration::from_millis(500)).await, "took another session's node");
    assert_eq!(read_node(&other, &path).await.map(|(_, d)| d), Some(b"theirs".to_vec()), "their data was overwritten");
    other.close().await;
    assert!(node.wait_for_initial_create(timing.deadline()).await, "never made its own once theirs went");
    assert!(eventually(timing.deadline(), || owned_with(&fw, &fw, &path, b"ours")).await);
    node.close().await;
    assert!(node_gone(&fw, &path).await);
    fw.close().await;
}

/// A persistent node made through a proxy and closed while the proxy refuses connections (the
/// close returned, the connection still refused); `observer` is connected directly.
struct Outage {
    proxy: ChaosProxy,
    fw: CuratorFramework,
    observer: CuratorFramework,
    path: String,
}

impl Outage {
    async fn closed_in(policy: ErrorPolicy, retry: Retry, name: &str) -> Outage {
        let timing = Timing::new();
        let server = TestingServer::shared();
        let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let observer = framework(&server.connect_string(), policy, retry).await;
        let path = format!("{}/node", unique_path(name));
        let node = PersistentNode::builder(&fw, &path).mode(CreateMode::Persistent).build().expect("node");
        node.start().expect("node");
        assert!(node.wait_for_initial_create(timing.deadline()).await);
        let mut states = fw.connection_state_stream();
        proxy.set_reject(true);
        proxy.cut();
        wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
        let closed = tokio::time::timeout(timing.deadline(), node.close()).await;
        assert!(closed.is_ok(), "{policy:?}/{retry:?}: close() waited for the connection");
        Outage { proxy, fw, observer, path }
    }
}

/// Closing during an outage returns while the connection is still refused (it does not wait
/// for a connection), and the node is deleted once the connection is back: the guaranteed
/// delete goes on in the background. A persistent node, which no session end would remove.
async fn close_during_an_outage(policy: ErrorPolicy, retry: Retry) {
    let Outage { proxy, fw, observer, path } = Outage::closed_in(policy, retry, "close-outage").await;
    assert!(read_node(&observer, &path).await.is_some(), "deleted while the connection was refused?");
    proxy.set_reject(false);
    assert!(node_gone(&observer, &path).await, "{policy:?}/{retry:?}: the node outlived its close");
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_during_an_outage_returns_and_the_node_goes_once_connected() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| close_during_an_outage(policy, retry))).await;
}

/// A close during an outage deletes its own node once connected, and no other: a node made at
/// the path meanwhile (here someone deleted ours and made a new one) is left. The delete on
/// close goes by the node's identity (its czxid), not by its path. Failed before: the guaranteed
/// delete on close, sent after the reconnection, deleted the new node. No Curator analog
/// (Curator's close deletes by path, as ours did).
async fn close_during_an_outage_leaves_a_new_node(policy: ErrorPolicy, retry: Retry) {
    let Outage { proxy, fw, observer, path } = Outage::closed_in(policy, retry, "close-outage-new").await;
    observer.delete().for_path(&path).await.expect("someone deletes our node");
    observer.create().for_path(&path, b"new".to_vec()).await.expect("and makes a new one");
    proxy.record_requests(true);
    proxy.set_reject(false);
    // The close's delete (or its look at the node) went out once the proxy saw a request of the
    // path; answered once a later request of the same session is.
    let of_path = |r: &SeenRequest| {
        r.path.as_deref() == Some(path.as_str()) && (r.is(RequestKind::Delete) || r.is(RequestKind::Exists))
    };
    let sent = eventually(Timing::new().deadline(), || async { proxy.take_seen_requests().iter().any(of_path) }).await;
    assert!(sent, "{policy:?}/{retry:?}: the close's delete never went out");
    fw.check_exists().for_path(&path).await.expect("a request after it");
    assert_eq!(
        read_node(&observer, &path).await.map(|(_, data)| data),
        Some(b"new".to_vec()),
        "{policy:?}/{retry:?}: the new node was deleted"
    );
    proxy.record_requests(false);
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_during_an_outage_deletes_its_own_node_not_a_new_one_at_the_path() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| close_during_an_outage_leaves_a_new_node(policy, retry))).await;
}

/// True once the keeper of this thread's recorded events went through a node in the way of its
/// create (`getData of the node in the way`) and is watching its node again after that.
fn placed_again(events: &tests::logs::Events) -> bool {
    let all = events.all();
    let Some(inspected) = all.iter().position(|e| e.ends_with("persistent node: getData of the node in the way"))
    else {
        return false;
    };
    all[inspected..].iter().any(|e| e.ends_with("persistent node: exists+watch"))
}

/// A node the keeper made is edited by another client, and the keeper's next request loses its
/// reply (the connection closes): the keeper places the node again, finds its own node in the
/// way (same session) and adopts it, keeping the edit, as it keeps one while it watches the
/// node (a watched discovery registration takes the edit in: discovery_watched.rs). Failed
/// before: the keeper wrote its own data over the edit (the node read `ours`, version 2). The
/// create the keeper sends then is no create: nothing is published.
async fn edit_kept_when_placed_again(policy: ErrorPolicy, retry: Retry) {
    let (events, _recording) = tests::logs::record_events();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let path = unique_path("pn-edited");
    let node =
        PersistentNode::builder(&fw, &path).mode(CreateMode::Ephemeral).data(b"ours".to_vec()).build().expect("node");
    node.start().expect("start");
    assert!(node.wait_for_initial_create(Timing::new().deadline()).await);
    let mut creates = node.created_events();
    // The keeper watches its node (its only request until the edit fires the watch).
    let watching = || async { events.all().iter().any(|e| e.ends_with("persistent node: exists+watch")) };
    assert!(eventually(Timing::new().deadline(), watching).await);
    proxy.swallow_next_reply();
    observer.set_data().for_path(&path, b"edit".to_vec()).await.expect("edit");
    let placed = eventually(Timing::new().deadline(), || async { placed_again(&events) }).await;
    assert!(placed, "{policy:?}/{retry:?}: the keeper did not place its node again: {:#?}", events.all());
    let (data, stat) = observer.get_data().for_path_with_stat(&path).await.expect("the node");
    assert_eq!(
        (String::from_utf8_lossy(&data).into_owned(), stat.version),
        ("edit".to_string(), 1),
        "{policy:?}/{retry:?}: the edit was written over"
    );
    assert_eq!(stat.ephemeral_owner, session_id(&fw).await);
    // The create sent after the lost reply met the node still there: not a create.
    assert!(creates.try_next().is_none(), "{policy:?}/{retry:?}: published as created again");
    // Data of our own set after that goes over the edit, as always.
    node.set_data(b"newer".to_vec()).expect("set data");
    assert!(eventually(Timing::new().deadline(), || owned_with(&fw, &observer, &path, b"newer")).await);
    node.close().await;
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_edit_of_another_client_is_kept_when_the_keeper_finds_its_own_node_in_the_way() {
    for (policy, retry) in COMBINATIONS {
        edit_kept_when_placed_again(policy, retry).await;
    }
}

/// A close that comes while the keeper's first create is in doubt after a lost reply: the
/// keeper looks at the node that create made (before the core decided such creates, the create
/// was sent again and met it "in the way") just as the node closes. Found by `partition_chaos`
/// (a group member that left stayed in the group for the rest of its session: its keeper
/// stopped between NodeExists and looking at the node, and deleted nothing). Curator's
/// TestPersistentNode.testQuickCloseNodeExists, with the node in the way being our own.
async fn close_while_own_node_in_the_way(policy: ErrorPolicy, retry: Retry) {
    let (events, _recording) = tests::logs::record_events();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let deadline = Timing::new().deadline();
    for round in 0..6 {
        let path = unique_path("pn-close-in-the-way");
        events.clear();
        // The first create is applied, its reply lost and its connection closed: its outcome is
        // unknown, and the keeper looks at the node at the path once connected.
        proxy.swallow_next_reply();
        let node = PersistentNode::builder(&fw, &path).mode(CreateMode::Ephemeral).build().expect("node");
        node.start().expect("start");
        let sent = || async { events.all().iter().any(|e| e.ends_with("persistent node: create")) };
        assert!(eventually(deadline, sent).await, "{policy:?}/{retry:?} round {round}: no create");
        node.close().await;
        assert!(
            node_gone(&observer, &path).await,
            "{policy:?}/{retry:?} round {round}: the node outlived its close: {:?}",
            read_node(&observer, &path).await
        );
    }
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_close_while_the_create_meets_its_own_node_deletes_it() {
    for (policy, retry) in COMBINATIONS {
        close_while_own_node_in_the_way(policy, retry).await;
    }
}

/// A member's node whose create's outcome stayed unknown, closed while another session's
/// member holds the path: the close leaves that node. The create is applied, its reply lost,
/// and the client kept from connecting again until its session has expired (taking the node
/// with it) and another session has made its own node at the path; the create then ends with
/// `OutcomeUnknown` (a create at a fixed path carries no evidence), and the keeper, finding the
/// other session's node, waits for it to go. Failed before: the close deleted by path, with a
/// guaranteed delete, whatever stood there: the other session's member left its group.
async fn close_in_doubt_leaves_another_sessions_node(policy: ErrorPolicy, retry: Retry) {
    let (events, _recording) = tests::logs::record_events();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let group = unique_path("pn-close-doubt");
    // The group's node first: the member's create is then the first create sent.
    observer.create().for_path(&group, Vec::new()).await.expect("group");
    let path = format!("{group}/m1");
    let info = fw.session().await.expect("session").client().session().clone();
    proxy.swallow_next_reply_to(RequestKind::Create);
    proxy.set_reject(true);
    let node =
        PersistentNode::builder(&fw, &path).mode(CreateMode::Ephemeral).data(b"ours".to_vec()).build().expect("node");
    node.start().expect("start");
    assert!(
        eventually(timing.deadline(), || async { read_node(&observer, &path).await.is_some() }).await,
        "{policy:?}/{retry:?}: the create was not applied"
    );
    expire_session(&server.connect_string(), &info).await.expect("expire");
    assert!(node_gone(&observer, &path).await, "{policy:?}/{retry:?}: the expired session's node stayed");
    observer.create().with_mode(CreateMode::Ephemeral).for_path(&path, b"theirs".to_vec()).await.expect("theirs");
    proxy.set_reject(false);
    let waiting = || async {
        events
            .all()
            .iter()
            .any(|e| e.ends_with("persistent node: the path is held by another session; waiting for it to go"))
    };
    assert!(eventually(timing.deadline(), waiting).await, "{policy:?}/{retry:?}: {:#?}", events.all());
    node.close().await;
    // A request of the same session after the close's: anything the close sent is answered.
    fw.check_exists().for_path(&path).await.expect("a request after the close");
    assert_eq!(
        read_node(&observer, &path).await,
        Some((session_id(&observer).await, b"theirs".to_vec())),
        "{policy:?}/{retry:?}: the other session's node was deleted"
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_close_in_doubt_leaves_another_sessions_node_at_the_path() {
    for (policy, retry) in COMBINATIONS {
        close_in_doubt_leaves_another_sessions_node(policy, retry).await;
    }
}

/// A sequential node of unique data (`unique_data()`) whose first create loses its reply: the
/// node that create made is found among its parent's children by its data, kept, published as
/// created, and deleted on close; no second node is made. A persistent mode, so that a node
/// left behind would stay for good. Under every error and retry policy. Before (no
/// `unique_data`, the create unprotected): the keeper made a second node and left the first.
async fn sequential_unique_data_found(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let parent = unique_path("pn-seq-unique");
    observer.create().for_path(&parent, Vec::new()).await.expect("parent");
    let data = format!("{parent}/{policy:?}/{retry:?}").into_bytes();
    let node = PersistentNode::builder(&fw, &format!("{parent}/n-"))
        .mode(CreateMode::PersistentSequential)
        .unique_data()
        .data(data.clone())
        .build()
        .expect("node");
    let mut creates = node.created_events();
    proxy.swallow_next_reply_to(RequestKind::Create);
    node.start().expect("start");
    node.ready().await.expect("ready");
    assert!(node.wait_for_initial_create(timing.deadline()).await, "{policy:?}/{retry:?}: never made");
    assert!(!proxy.swallow_pending(), "{policy:?}/{retry:?}: the create never reached the server");
    let names = children(&observer, &parent).await;
    assert_eq!(names.len(), 1, "{policy:?}/{retry:?}: one node, not {names:?}");
    let made = format!("{parent}/{}", names[0]);
    assert_eq!(node.actual_path().as_deref(), Some(made.as_str()), "{policy:?}/{retry:?}");
    assert_eq!(read_node(&observer, &made).await, Some((0, data)), "{policy:?}/{retry:?}");
    assert_eq!(creates.next().await.as_deref(), Some(made.as_str()), "{policy:?}/{retry:?}: not published");
    node.close().await;
    assert!(node_gone(&observer, &made).await, "{policy:?}/{retry:?}: left behind after close");
    assert!(children(&observer, &parent).await.is_empty(), "{policy:?}/{retry:?}");
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_node_of_unique_data_whose_create_loses_its_reply_is_made_once() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| sequential_unique_data_found(policy, retry))).await;
}

/// An unprotected sequential node without unique data whose first create loses its reply:
/// nothing can tell whether, or where, the create made a node, so the keeper does not create
/// again while the session that may hold that node lives (`last_error` says why), and makes
/// its node once that session has ended (taking the node, if any, with it). Failed before: the
/// keeper created again at once, and two nodes stood for the rest of the session.
async fn sequential_without_evidence_waits(policy: ErrorPolicy, retry: Retry) {
    let (events, _recording) = tests::logs::record_events();
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let parent = unique_path("pn-seq-doubt");
    observer.create().for_path(&parent, Vec::new()).await.expect("parent");
    let node = PersistentNode::builder(&fw, &format!("{parent}/n-"))
        .mode(CreateMode::EphemeralSequential)
        .build()
        .expect("node");
    proxy.swallow_next_reply_to(RequestKind::Create);
    node.start().expect("start");
    let waiting = || {
        events
            .all()
            .iter()
            .any(|e| e.ends_with("persistent node: waiting for the end of the session that may hold the node"))
    };
    let settled =
        eventually(timing.deadline(), || async { waiting() || children(&observer, &parent).await.len() > 1 }).await;
    assert!(settled, "{policy:?}/{retry:?}: {:#?}", events.all());
    let first = children(&observer, &parent).await;
    assert_eq!(first.len(), 1, "{policy:?}/{retry:?}: created again while the first node may stand: {first:?}");
    assert!(
        matches!(node.last_error(), Some(curator_core::CuratorError::OutcomeUnknown { .. })),
        "{policy:?}/{retry:?}: {:?}",
        node.last_error()
    );
    assert_eq!(node.actual_path(), None, "{policy:?}/{retry:?}");
    // The session that may hold the node ends: the node is made on the next, once.
    let info = fw.session().await.expect("session").client().session().clone();
    expire_session(&server.connect_string(), &info).await.expect("expire");
    let made = || async {
        let names = children(&observer, &parent).await;
        let Some(actual) = node.actual_path() else { return false };
        names.len() == 1
            && actual == format!("{parent}/{}", names[0])
            && read_node(&observer, &actual).await.is_some_and(|(owner, _)| owner != info.id().0)
    };
    assert!(
        eventually(timing.deadline(), made).await,
        "{policy:?}/{retry:?}: {:?} {:?}",
        node.actual_path(),
        children(&observer, &parent).await
    );
    assert!(node.last_error().is_none(), "{policy:?}/{retry:?}: {:?}", node.last_error());
    node.close().await;
    assert!(
        eventually(timing.deadline(), || async { children(&observer, &parent).await.is_empty() }).await,
        "{policy:?}/{retry:?}"
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_unprotected_sequential_node_in_doubt_is_not_made_twice() {
    for (policy, retry) in COMBINATIONS {
        sequential_without_evidence_waits(policy, retry).await;
    }
}

/// A node of unique data closed while its first create, sequential, is in doubt (its reply
/// lost, the client not connected again yet): once connected, on the same session, the close
/// finds the node that create made by its data and deletes it. Under every error and retry
/// policy.
async fn close_while_first_create_in_doubt(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let parent = unique_path("pn-seq-close-doubt");
    observer.create().for_path(&parent, Vec::new()).await.expect("parent");
    let session = session_id(&fw).await;
    let node = PersistentNode::builder(&fw, &format!("{parent}/n-"))
        .mode(CreateMode::EphemeralSequential)
        .unique_data()
        .data(format!("{parent}/{policy:?}/{retry:?}").into_bytes())
        .build()
        .expect("node");
    proxy.swallow_next_reply_to(RequestKind::Create);
    proxy.set_reject(true);
    node.start().expect("start");
    let made = eventually(timing.deadline(), || async { children(&observer, &parent).await.len() == 1 }).await;
    assert!(made, "{policy:?}/{retry:?}: the create was not applied");
    // Closed first, then connected again: the close cannot know the node's name before.
    tokio::join!(node.close(), async { proxy.set_reject(false) });
    assert!(
        eventually(timing.deadline(), || async { children(&observer, &parent).await.is_empty() }).await,
        "{policy:?}/{retry:?}: left behind: {:?}",
        children(&observer, &parent).await
    );
    assert_eq!(
        session_id(&fw).await,
        session,
        "{policy:?}/{retry:?}: not deleted by the close but by the session's end"
    );
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_while_the_first_create_is_in_doubt_deletes_the_node_it_made() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| close_while_first_create_in_doubt(policy, retry))).await;
}

/// A create at a fixed path whose reply is lost is not sent again: the core ends it with
/// `OutcomeUnknown` (a fixed path carries no evidence), and the keeper looks at the node at the
/// path instead, adopting its own (an ephemeral of its session). One create request, and no
/// error left in `last_error`. Failed before: the keeper was stuck with `OutcomeUnknown` in
/// `last_error` until the next connection change, then sent the create again (NodeExists).
/// Under every error and retry policy.
async fn fixed_path_create_in_doubt_looks(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let group = unique_path("pn-fixed-doubt");
    observer.create().for_path(&group, Vec::new()).await.expect("group");
    let path = format!("{group}/m1");
    proxy.record_requests(true);
    proxy.swallow_next_reply_to(RequestKind::Create);
    let node =
        PersistentNode::builder(&fw, &path).mode(CreateMode::Ephemeral).data(b"ours".to_vec()).build().expect("node");
    node.start().expect("start");
    node.ready().await.expect("ready");
    assert!(node.wait_for_initial_create(timing.deadline()).await, "{policy:?}/{retry:?}: never placed");
    assert!(!proxy.swallow_pending(), "{policy:?}/{retry:?}: the create never reached the server");
    assert!(
        owned_with(&fw, &observer, &path, b"ours").await,
        "{policy:?}/{retry:?}: {:?}",
        read_node(&observer, &path).await
    );
    let creates = proxy
        .take_seen_requests()
        .iter()
        .filter(|r| r.is(RequestKind::Create) && r.path.as_deref() == Some(path.as_str()))
        .count();
    assert_eq!(creates, 1, "{policy:?}/{retry:?}: the create was sent again");
    assert!(node.last_error().is_none(), "{policy:?}/{retry:?}: {:?}", node.last_error());
    node.close().await;
    assert!(node_gone(&observer, &path).await, "{policy:?}/{retry:?}: left behind after close");
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_at_a_fixed_path_whose_reply_is_lost_is_not_sent_again() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| fixed_path_create_in_doubt_looks(policy, retry))).await;
}

/// A persistent sequential node, unprotected and without unique data, whose first create loses
/// its reply: a node that create made would stay for good beside a second one, and nothing
/// tells which it is, so the first create is refused with `OutcomeUnknown` (the node closes,
/// and nothing is created again). Before: the keeper created a second node.
async fn persistent_sequential_without_evidence_refused(policy: ErrorPolicy, retry: Retry) {
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let parent = unique_path("pn-pseq-doubt");
    observer.create().for_path(&parent, Vec::new()).await.expect("parent");
    let node = PersistentNode::builder(&fw, &format!("{parent}/n-"))
        .mode(CreateMode::PersistentSequential)
        .build()
        .expect("node");
    proxy.swallow_next_reply_to(RequestKind::Create);
    node.start().expect("start");
    let ready = tokio::time::timeout(Timing::new().deadline(), node.ready()).await;
    assert!(
        matches!(ready, Ok(Err(curator_core::CuratorError::OutcomeUnknown { .. }))),
        "{policy:?}/{retry:?}: {ready:?}"
    );
    assert_eq!(node.state(), curator_core::LifeState::Closed, "{policy:?}/{retry:?}");
    node.close().await;
    assert_eq!(children(&observer, &parent).await.len(), 1, "{policy:?}/{retry:?}: made again");
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_sequential_node_in_doubt_without_evidence_is_refused() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| persistent_sequential_without_evidence_refused(policy, retry))).await;
}

/// The keeper's data write whose reply is lost (applied, its connection closed): the keeper
/// places the node again, finds its own node holding the new data, and takes it as written:
/// one write (the node's version moves by one), no create event, and the data kept through
/// later re-creates. Under every error and retry policy.
async fn set_data_with_a_lost_reply(policy: ErrorPolicy, retry: Retry) {
    let timing = Timing::new();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = framework(&proxy.connect_string(), policy, retry).await;
    let observer = framework(&server.connect_string(), policy, retry).await;
    let path = unique_path("pn-set-lost");
    let node =
        PersistentNode::builder(&fw, &path).mode(CreateMode::Ephemeral).data(b"v1".to_vec()).build().expect("node");
    node.start().expect("start");
    assert!(node.wait_for_initial_create(timing.deadline()).await);
    let mut creates = node.created_events();
    proxy.swallow_next_reply_to(RequestKind::SetData);
    node.set_data(b"v2".to_vec()).expect("set data");
    assert!(eventually(timing.deadline(), || async { !proxy.swallow_pending() }).await, "{policy:?}/{retry:?}");
    assert!(
        eventually(timing.deadline(), || owned_with(&fw, &observer, &path, b"v2")).await,
        "{policy:?}/{retry:?}: {:?}",
        read_node(&observer, &path).await
    );
    // A request of the keeper's after the lost one, seen by the proxy, and answered: the
    // keeper is watching its node again.
    proxy.record_requests(true);
    proxy.cut();
    let watching = || async {
        proxy.take_seen_requests().iter().any(|r| r.is(RequestKind::Exists) && r.path.as_deref() == Some(path.as_str()))
    };
    assert!(eventually(timing.deadline(), watching).await, "{policy:?}/{retry:?}: not watching again");
    let stat = observer.check_exists().for_path(&path).await.expect("stat").expect("node");
    assert_eq!(stat.version, 1, "{policy:?}/{retry:?}: written more than once");
    assert!(creates.try_next().is_none(), "{policy:?}/{retry:?}: published as created");
    node.close().await;
    fw.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_write_whose_reply_is_lost_is_applied_once() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| set_data_with_a_lost_reply(policy, retry))).await;
}
