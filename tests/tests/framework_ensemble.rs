//! Ensemble tracking (issue 18): the framework follows `/zookeeper/config` and moves its session
//! to the new servers when the ensemble changes, keeping the session, its ephemeral nodes and
//! its locks. On a `TestingCluster` with dynamic reconfiguration: a client that knows only
//! server 1 sees a 4th server join and server 1 leave.
//!
//! After Apache Curator's `TestReconfiguration.testAdd` and `testAddAndRemove` (the connect
//! string follows the configuration); those check only the connect string, since Curator's
//! client opens a new session for a new one, where ours keeps the session.

use std::collections::BTreeSet;
use std::time::Duration;

use curator_core::{ConnectionState, ConnectionStateEvent, CreateMode, CuratorFramework, ErrorPolicy};
use curator_recipes::InterProcessMutex;
use curator_test::{eventually, TestingCluster, Timing};
use futures::FutureExt;
use tests::policies::{with_policies, Retry};
use tests::{builder, init_tracing, unique_path};

fn servers(connect_string: &str) -> BTreeSet<String> {
    connect_string.split(',').map(str::to_string).collect()
}

/// Waits until the framework's current connect string names exactly `expected`'s servers.
async fn wait_connect_string(fw: &CuratorFramework, expected: &str) {
    let ok =
        eventually(Timing::new().deadline(), || async { servers(&fw.current_connect_string()) == servers(expected) })
            .await;
    assert!(ok, "connect string {:?}, expected {expected:?}", fw.current_connect_string());
}

/// Every transition read so far, without waiting.
fn drain(states: &mut curator_core::ConnectionStateStream) -> Vec<ConnectionStateEvent> {
    let mut seen = Vec::new();
    while let Some(Some(event)) = states.next().now_or_never() {
        seen.push(event);
    }
    seen
}

/// The scenario under one pair of policies: a client connected to server 1 alone, holding an
/// ephemeral node and a lock; server 4 joins, server 1 leaves.
async fn add_then_remove_own_server(policy: ErrorPolicy, retry: Retry) {
    init_tracing();
    let mut cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let fw = with_policies(builder(&cluster.connect_string_of(0)), policy, retry).build().expect("options");
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    // The tracker read the configuration at connection: all three servers.
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;

    let session = fw.session().await.unwrap().id();
    let path = unique_path("ensemble");
    let ephemeral = fw
        .create()
        .creating_parents_if_needed()
        .with_mode(CreateMode::Ephemeral)
        .for_path(&format!("{path}/ephemeral"), b"mine".to_vec())
        .await
        .unwrap();
    let guard = InterProcessMutex::new(&fw, &format!("{path}/lock")).unwrap().acquire().await.unwrap();
    let lost = guard.lost_watch();

    let added = cluster.add_server().await.expect("add a server");
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;
    cluster.remove_server(0).await.expect("remove server 1");
    assert!(!servers(&cluster.ensemble_connect_string()).contains(&cluster.connect_string_of(0)));
    assert!(servers(&cluster.ensemble_connect_string()).contains(&cluster.connect_string_of(added)));
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;

    // A removed server goes on serving (a follower outside the configuration): the session
    // stays with the new client instead of bouncing back to a client still on server 1 (with
    // the old client kept alive, it did: one Suspended/Reconnected about 100 ms after the move).
    let until = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < until {
        fw.check_exists().for_path("/").await.expect("reads go on during and after the move");
    }
    // The session moved: operations work, on the same session, and server 1 plays no part (it
    // is killed, so that a client still on it would fail).
    cluster.kill(0).await.unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected after the move");
    let after = fw.create().with_mode(CreateMode::Ephemeral).for_path(&format!("{path}/after"), b"".to_vec()).await;
    after.expect("an operation after the move");
    assert_eq!(fw.session().await.unwrap().id(), session, "the session was kept");
    let stat = fw.check_exists().for_path(&ephemeral).await.unwrap().expect("the ephemeral node survived");
    assert_eq!(stat.ephemeral_owner, session);

    // Connection states: never Lost, no new session, and here not even Suspended: the move
    // starts when the configuration leaves out the client's only server, and completes well
    // within the grace of a move (a tenth of the session timeout) while that server still
    // serves. (Had the server dropped the connection first, one Suspended/Reconnected pair
    // would be allowed.)
    let seen = drain(&mut states);
    let kinds: Vec<_> = seen.iter().map(|e| e.state).collect();
    tracing::info!(?kinds, "connection states during the change");
    assert!(!kinds.contains(&ConnectionState::Lost), "{kinds:?}");
    assert!(seen.iter().all(|e| !e.new_session), "{kinds:?}");
    assert!(!kinds.contains(&ConnectionState::Suspended), "{kinds:?}");

    // So the lock is not reported lost, under either error policy.
    assert!(lost.borrow().is_none(), "lock reported lost: {:?} ({kinds:?})", *lost.borrow());
    assert!(guard.is_held());
    guard.release().await.unwrap();
    fw.close().await;
}

/// Server 4 joins, then the one server the client knows leaves: the session, its ephemeral
/// node and its lock survive, and the connect string names the new servers (as in Curator's
/// `TestReconfiguration.testAdd` and `testAddAndRemove`, where only the connect string is
/// checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_moves_to_the_new_ensemble() {
    add_then_remove_own_server(ErrorPolicy::Standard, Retry::Default).await;
}

/// As [`session_moves_to_the_new_ensemble`], under `ErrorPolicy::Session` and a retry policy
/// that gives up after one retry: the lock is never reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_moves_under_session_policy_and_short_retry() {
    add_then_remove_own_server(ErrorPolicy::Session, Retry::Short).await;
}

/// The other case of a move: the connection drops (server 1 dies, still a member) after the
/// ensemble grew. The reconnection goes to the tracked list, on the same session: one
/// `Suspended`/`Reconnected` pair, and under `ErrorPolicy::Session` the lock is kept. Without
/// the tracker the client would have only server 1 to go back to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnection_after_a_change_uses_the_new_list() {
    init_tracing();
    let mut cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let fw = with_policies(builder(&cluster.connect_string_of(0)), ErrorPolicy::Session, Retry::Short)
        .build()
        .expect("options");
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    let session = fw.session().await.unwrap().id();
    let guard = InterProcessMutex::new(&fw, &unique_path("reconnect")).unwrap().acquire().await.unwrap();
    cluster.add_server().await.expect("add a server");
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;

    cluster.kill(0).await.unwrap();
    let seen = tests::wait_for(&mut states, ConnectionState::Reconnected, |e| !e.new_session).await;
    let kinds: Vec<_> = seen.iter().map(|e| e.state).collect();
    assert_eq!(kinds[kinds.len() - 2..], [ConnectionState::Suspended, ConnectionState::Reconnected], "{kinds:?}");
    assert!(!kinds.contains(&ConnectionState::Lost), "{kinds:?}");
    assert_eq!(fw.session().await.unwrap().id(), session, "the session was kept");
    fw.create().for_path(&unique_path("after"), b"".to_vec()).await.expect("an operation after the move");
    assert!(guard.is_held() && guard.lost_watch().borrow().is_none());
    guard.release().await.unwrap();
    fw.close().await;
}

/// With the tracker off, the client keeps the servers it was built with. A server removed from
/// the ensemble goes on serving (as a follower outside the configuration) until it is shut down,
/// so the client stays on it; once it stops, the client has nowhere to go: the session is
/// presumed lost, and no new one can be opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_tracker_the_client_loses_its_server() {
    init_tracing();
    let mut cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let own = cluster.connect_string_of(0);
    let fw = with_policies(builder(&own), ErrorPolicy::Session, Retry::Default)
        .ensemble_tracker(false)
        .build()
        .expect("options");
    let mut states = fw.connection_state_stream();
    fw.start().unwrap();
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    let guard = InterProcessMutex::new(&fw, &unique_path("untracked")).unwrap().acquire().await.unwrap();

    cluster.add_server().await.expect("add a server");
    cluster.remove_server(0).await.expect("remove server 1");
    assert_eq!(fw.current_connect_string(), own, "the connect string did not follow the ensemble");
    fw.create().for_path(&unique_path("still"), b"".to_vec()).await.expect("the removed server still serves");
    cluster.kill(0).await.unwrap();
    let lost = tokio::time::timeout(Timing::new().deadline(), async {
        while let Some(event) = states.next().await {
            if event.state == ConnectionState::Lost {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(lost, Ok(true), "the session is presumed lost");
    assert!(tokio::time::timeout(Timing::new().deadline(), guard.lost()).await.is_ok(), "the lock is reported lost");
    let again = fw.block_until_connected(Duration::from_secs(2)).await;
    assert!(again.is_err(), "no server of the old list serves: {again:?}");
    fw.close().await;
}

/// A `NodeCache` opened before the move sees the changes made after it, also once the removed
/// server has stopped, and the move shows no `Suspended`. Failed before the cache let go of the
/// moved session's old client (`CuratorFramework::client_gone`) and before its watch's end was
/// tracked per client (`Session::epoch`) rather than per session: the cache kept the old client,
/// whose watch worked only while the removed server served, then retried loads on it with
/// "connection lost" until the deadline (its generation, unchanged by a move, counted as over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_follows_the_moved_session() {
    init_tracing();
    let mut cluster = TestingCluster::start_reconfigurable(3).await.expect("cluster");
    let fw = tests::connected(builder(&cluster.connect_string_of(0))).await;
    let mut states = fw.connection_state_stream();
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;
    let path = unique_path("cached");
    fw.create().for_path(&path, b"before".to_vec()).await.unwrap();
    let cache = curator_cache::NodeCache::new(&fw, &path).unwrap();
    cache.start(true).unwrap();
    cache.wait_initialized().await.unwrap();
    let watcher = curator_recipes::PersistentWatcher::new(&fw, &path, false).unwrap();
    let mut resets = watcher.resets();
    let mut events = watcher.events();
    watcher.start().unwrap();
    tokio::time::timeout(Timing::new().deadline(), resets.next()).await.expect("the watch is added");
    cluster.add_server().await.expect("add a server");
    cluster.remove_server(0).await.expect("remove server 1");
    wait_connect_string(&fw, &cluster.ensemble_connect_string()).await;
    let other = tests::client(&cluster.ensemble_connect_string()).await;
    other.set_data().for_path(&path, b"after".to_vec()).await.unwrap();
    let seen = eventually(Timing::new().deadline(), || async {
        cache.current_data().is_some_and(|d| d.data.as_deref() == Some(&b"after"[..]))
    })
    .await;
    assert!(seen, "the cache saw the change made after the move: {:?}", cache.current_data());
    // And once the removed server is gone too.
    cluster.kill(0).await.unwrap();
    while let Some(Some(_)) = events.next().now_or_never() {}
    other.set_data().for_path(&path, b"later".to_vec()).await.unwrap();
    let seen = eventually(Timing::new().deadline(), || async {
        cache.current_data().is_some_and(|d| d.data.as_deref() == Some(&b"later"[..]))
    })
    .await;
    assert!(seen, "the cache saw the change made after server 1 stopped: {:?}", cache.current_data());
    let kinds: Vec<_> = drain(&mut states).iter().map(|e| e.state).collect();
    assert!(!kinds.contains(&ConnectionState::Suspended), "{kinds:?}");
    // The PersistentWatcher added its watch again on the new client: it reports the last change.
    let changed = tokio::time::timeout(Timing::new().deadline(), async {
        while let Some(event) = events.next().await {
            if event.event_type == curator_core::zk::EventType::NodeDataChanged
                && other.get_data().for_path(&path).await.ok().as_deref() == Some(&b"later"[..])
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(changed, Ok(true), "the persistent watcher saw the change after the move");
    other.close().await;
    fw.close().await;
}
