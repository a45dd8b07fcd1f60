//! Barriers under faults (issue 16), against a real ZooKeeper, each fault under every
//! combination of error policy and retry policy (`tests::policies::COMBINATIONS`, the four at
//! once):
//! - a double barrier of 10 members, one of whom crashes inside (its session is expired while
//!   the others wait in `leave`): the others leave at once, and the crashed member's own leave
//!   fails with a clear error;
//! - a connection cut while a member waits in `enter`, and while it waits in `leave`: under the
//!   Session error policy the member rides it out; under Standard its call fails with
//!   `ConnectionLoss`, its node is deleted, and it can go on (enter again, or leave again);
//! - calls dropped, timed out, or a barrier dropped while inside: no node is left behind;
//! - bad input: a `CuratorError`, never a panic.

use std::time::{Duration, Instant};

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::policies::{framework, with_policies, Retry, COMBINATIONS};
use tests::{builder, children, client, connected, init_tracing, unique_path, wait_for};

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// The member nodes under `path` (its children but `ready`).
async fn members(fw: &CuratorFramework, path: &str) -> Vec<String> {
    children(fw, path).await.into_iter().filter(|c| c != "ready").collect()
}

/// Waits until `path` has no child left (member or `ready`).
async fn empty(fw: &CuratorFramework, path: &str) -> bool {
    eventually(deadline(), || async { children(fw, path).await.is_empty() }).await
}

/// Enters `barrier` in a task of its own; the task gives the barrier back with the outcome.
fn spawn_enter(
    mut barrier: DistributedDoubleBarrier,
) -> tokio::task::JoinHandle<(DistributedDoubleBarrier, curator_core::Result<bool>)> {
    tokio::spawn(async move {
        let entered = barrier.enter_timeout(deadline()).await;
        (barrier, entered)
    })
}

/// Leaves `barrier` in a task of its own; the task gives the barrier back with the outcome.
fn spawn_leave(
    mut barrier: DistributedDoubleBarrier,
) -> tokio::task::JoinHandle<(DistributedDoubleBarrier, curator_core::Result<bool>)> {
    tokio::spawn(async move {
        let left = barrier.leave_timeout(deadline()).await;
        (barrier, left)
    })
}

/// Members of the crash test.
const CRASH_MEMBERS: usize = 10;

/// Ten members enter; nine leave and wait for the tenth, whose session is then expired (it
/// crashes inside). The nine leave within a session timeout (its node went with its session,
/// at once), all successfully, as Curator's algorithm has it; the crashed member's own leave
/// fails with SessionExpired (or, under Standard, with ConnectionLoss when its client saw the
/// connection go before it saw the expiry). Nothing is left under the barrier's path.
async fn crash_inside(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let path = unique_path("double-crash");
    let connect_string = shared();
    let frameworks = join_all((0..CRASH_MEMBERS).map(|_| framework(&connect_string, policy, retry))).await;
    let entering: Vec<_> = frameworks
        .iter()
        .map(|fw| spawn_enter(DistributedDoubleBarrier::new(fw, &path, CRASH_MEMBERS).unwrap()))
        .collect();
    let mut barriers = Vec::new();
    for task in join_all(entering).await {
        let (barrier, entered) = task.unwrap();
        assert!(entered.unwrap(), "{case}: a member did not enter");
        barriers.push(barrier);
    }
    let mut victim = barriers.remove(0);
    let leaving: Vec<_> = barriers.into_iter().map(spawn_leave).collect();
    // Every member but the lowest deletes its node when it leaves: at most the victim and the
    // lowest are left once all nine are waiting.
    let observer = &frameworks[1];
    assert!(eventually(deadline(), || async { members(observer, &path).await.len() <= 2 }).await, "{case}");

    let info = frameworks[0].session().await.unwrap().client().session().clone();
    let crashed = Instant::now();
    expire_session(&connect_string, &info).await.expect("expire");
    for task in join_all(leaving).await {
        let (_, left) = task.unwrap();
        assert!(left.unwrap(), "{case}: a member did not leave");
    }
    let bound = Timing::new().session_timeout();
    assert!(crashed.elapsed() < bound, "{case}: the others took {:?} to leave", crashed.elapsed());

    let result = victim.leave_timeout(deadline()).await;
    let clear = match policy {
        ErrorPolicy::Standard => {
            matches!(result, Err(CuratorError::SessionExpired { .. } | CuratorError::ConnectionLoss { .. }))
        }
        ErrorPolicy::Session => matches!(result, Err(CuratorError::SessionExpired { .. })),
        other => panic!("{case}: unexpected policy {other:?}"),
    };
    assert!(clear, "{case}: the crashed member's leave: {result:?}");
    assert!(empty(observer, &path).await, "{case}: left behind: {:?}", children(observer, &path).await);
    for fw in frameworks {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_member_crashes_inside() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| crash_inside(policy, retry))).await;
}

/// A framework through its own proxy, with the policies, and a stream of its states.
async fn proxied(
    policy: ErrorPolicy,
    retry: Retry,
) -> (ChaosProxy, CuratorFramework, curator_core::ConnectionStateStream) {
    let proxy = ChaosProxy::start(&shared()).await.expect("proxy");
    let fw = connected(with_policies(builder(&proxy.connect_string()), policy, retry)).await;
    let states = fw.connection_state_stream();
    (proxy, fw, states)
}

/// Cuts the proxy's connections and refuses new ones until the client saw the suspension,
/// then lets it reconnect and waits until it has.
async fn cut(proxy: &ChaosProxy, states: &mut curator_core::ConnectionStateStream) {
    proxy.set_reject(true);
    proxy.cut();
    wait_for(states, ConnectionState::Suspended, |_| true).await;
    proxy.pass();
    wait_for(states, ConnectionState::Reconnected, |_| true).await;
}

/// Member A (behind a proxy) waits in `enter` of a barrier for three when its connection is
/// cut. Session: it rides the cut out. Standard: its enter fails with ConnectionLoss and its
/// node is deleted; it enters again. Either way, once B and C come, all three enter and leave.
async fn cut_during_enter(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let path = unique_path("double-cut-enter");
    let (proxy, a_fw, mut states) = proxied(policy, retry).await;
    let observer = framework(&shared(), policy, retry).await;
    let mut a = spawn_enter(DistributedDoubleBarrier::new(&a_fw, &path, 3).unwrap());
    assert!(eventually(deadline(), || async { members(&observer, &path).await.len() == 1 }).await, "{case}");

    cut(&proxy, &mut states).await;
    if policy == ErrorPolicy::Standard {
        let (barrier, entered) = tokio::time::timeout(deadline(), a).await.expect("enter still waiting").unwrap();
        assert!(matches!(entered, Err(CuratorError::ConnectionLoss { .. })), "{case}: {entered:?}");
        assert_eq!(barrier.member_path(), None, "{case}");
        assert!(empty(&observer, &path).await, "{case}: A's node was left: {:?}", children(&observer, &path).await);
        a = spawn_enter(barrier);
    } else {
        assert!(!a.is_finished(), "{case}: A's enter ended");
    }
    let (b_fw, c_fw) = (framework(&shared(), policy, retry).await, framework(&shared(), policy, retry).await);
    let b = spawn_enter(DistributedDoubleBarrier::new(&b_fw, &path, 3).unwrap());
    let c = spawn_enter(DistributedDoubleBarrier::new(&c_fw, &path, 3).unwrap());
    let mut barriers = Vec::new();
    for task in [a, b, c] {
        let (barrier, entered) = tokio::time::timeout(deadline(), task).await.expect("enter still waiting").unwrap();
        assert!(entered.unwrap(), "{case}");
        barriers.push(barrier);
    }
    for left in join_all(barriers.into_iter().map(spawn_leave)).await {
        assert!(left.unwrap().1.unwrap(), "{case}");
    }
    assert!(empty(&observer, &path).await, "{case}: left behind: {:?}", children(&observer, &path).await);
    for fw in [a_fw, b_fw, c_fw, observer] {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_connection_cut_during_enter() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| cut_during_enter(policy, retry))).await;
}

/// Members A (behind a proxy), B and C are inside; A leaves first and waits for the others
/// when its connection is cut. Session: it rides the cut out and leaves with the others.
/// Standard: its leave fails with ConnectionLoss and its node is deleted (so B and C do not
/// wait for it); B and C leave, and A's second leave returns once they are out.
async fn cut_during_leave(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let path = unique_path("double-cut-leave");
    let (proxy, a_fw, mut states) = proxied(policy, retry).await;
    let (b_fw, c_fw) = (framework(&shared(), policy, retry).await, framework(&shared(), policy, retry).await);
    let entering = [&a_fw, &b_fw, &c_fw].map(|fw| spawn_enter(DistributedDoubleBarrier::new(fw, &path, 3).unwrap()));
    let mut barriers = Vec::new();
    for task in join_all(entering).await {
        let (barrier, entered) = task.unwrap();
        assert!(entered.unwrap(), "{case}");
        barriers.push(barrier);
    }
    let (c, b, a) = (barriers.pop().unwrap(), barriers.pop().unwrap(), barriers.pop().unwrap());
    let a_name = a.member_path().unwrap().rsplit('/').next().unwrap().to_string();
    let mut a = spawn_leave(a);
    // A is waiting once its leave deleted its node, unless it is the lowest, which keeps its
    // node to the end (then the cut may also catch its first listing: the outcome is the same).
    let lowest = members(&b_fw, &path).await.into_iter().min().unwrap();
    if lowest != a_name {
        assert!(eventually(deadline(), || async { !members(&b_fw, &path).await.contains(&a_name) }).await, "{case}");
    }

    cut(&proxy, &mut states).await;
    if policy == ErrorPolicy::Standard {
        let (barrier, left) = tokio::time::timeout(deadline(), a).await.expect("leave still waiting").unwrap();
        assert!(matches!(left, Err(CuratorError::ConnectionLoss { .. })), "{case}: {left:?}");
        assert!(
            eventually(deadline(), || async { !members(&b_fw, &path).await.contains(&a_name) }).await,
            "{case}: A's node was left"
        );
        a = spawn_leave(barrier);
    } else {
        assert!(!a.is_finished(), "{case}: A's leave ended");
    }
    for task in [a, spawn_leave(b), spawn_leave(c)] {
        let (_, left) = tokio::time::timeout(deadline(), task).await.expect("leave still waiting").unwrap();
        assert!(left.unwrap(), "{case}");
    }
    assert!(empty(&b_fw, &path).await, "{case}: left behind: {:?}", children(&b_fw, &path).await);
    for fw in [a_fw, b_fw, c_fw] {
        fw.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_connection_cut_during_leave() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| cut_during_leave(policy, retry))).await;
}

/// A single barrier's wait rides out a cut (it holds nothing) under every combination, and
/// ends when the barrier is removed.
async fn barrier_wait_through_a_cut(policy: ErrorPolicy, retry: Retry) {
    let case = format!("{policy:?}/{retry:?}");
    let path = unique_path("barrier-cut");
    let (proxy, fw, mut states) = proxied(policy, retry).await;
    let setter = framework(&shared(), policy, retry).await;
    let gate = DistributedBarrier::new(&setter, &path).unwrap();
    gate.set_barrier().await.unwrap();
    let waiter = DistributedBarrier::new(&fw, &path).unwrap();
    let waiting = tokio::spawn(async move { waiter.wait_on_barrier().await });
    cut(&proxy, &mut states).await;
    assert!(!gate.wait_on_barrier_timeout(Duration::from_millis(20)).await.unwrap());
    assert!(!waiting.is_finished(), "{case}: the wait ended with the barrier set");
    gate.remove_barrier().await.unwrap();
    tokio::time::timeout(deadline(), waiting).await.expect("still waiting").unwrap().unwrap();
    fw.close().await;
    setter.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_wait_rides_out_a_connection_cut() {
    init_tracing();
    join_all(COMBINATIONS.map(|(policy, retry)| barrier_wait_through_a_cut(policy, retry))).await;
}

/// An enter dropped while it waits, and one that times out, leave no node; the member is out
/// and may enter again.
#[tokio::test]
async fn abandoned_enter_leaves_no_node() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("double-drop-enter");
    let dropped = spawn_enter(DistributedDoubleBarrier::new(&fw, &path, 2).unwrap());
    assert!(eventually(deadline(), || async { members(&fw, &path).await.len() == 1 }).await);
    dropped.abort();
    assert!(empty(&fw, &path).await, "left behind: {:?}", children(&fw, &path).await);

    let mut barrier = DistributedDoubleBarrier::new(&fw, &path, 2).unwrap();
    assert!(!barrier.enter_timeout(Duration::from_millis(200)).await.unwrap());
    assert_eq!(barrier.member_path(), None);
    assert!(empty(&fw, &path).await, "left behind: {:?}", children(&fw, &path).await);
    fw.close().await;
}

/// A barrier dropped while inside, and a leave dropped while it waits, delete our node, so the
/// others do not wait for it; a timed-out leave does the same.
#[tokio::test]
async fn abandoned_member_is_not_waited_for() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("double-drop-inside");
    let mut alone = DistributedDoubleBarrier::new(&fw, &path, 1).unwrap();
    alone.enter().await.unwrap();
    drop(alone);
    assert!(eventually(deadline(), || async { members(&fw, &path).await.is_empty() }).await);
    // The barrier was open, and no member left it: `ready` is still there, as in Curator.
    assert_eq!(children(&fw, &path).await, vec!["ready".to_string()]);
    fw.delete().for_path(&format!("{path}/ready")).await.unwrap();

    for timed_out in [false, true] {
        let (x, y) = tokio::join!(
            spawn_enter(DistributedDoubleBarrier::new(&fw, &path, 2).unwrap()),
            spawn_enter(DistributedDoubleBarrier::new(&fw, &path, 2).unwrap())
        );
        let ((mut x, x_in), (y, y_in)) = (x.unwrap(), y.unwrap());
        assert!(x_in.unwrap() && y_in.unwrap());
        let y_name = y.member_path().unwrap().rsplit('/').next().unwrap().to_string();
        if timed_out {
            // Y waits on X (or X deletes its node and waits on Y): either way X times out.
            let mut y = y;
            assert!(!y.leave_timeout(Duration::from_millis(200)).await.unwrap());
            assert!(eventually(deadline(), || async { !members(&fw, &path).await.contains(&y_name) }).await);
        } else {
            let leaving = spawn_leave(y);
            tokio::task::yield_now().await;
            leaving.abort();
            assert!(eventually(deadline(), || async { !members(&fw, &path).await.contains(&y_name) }).await);
        }
        assert!(x.leave_timeout(deadline()).await.unwrap(), "X waited for a member who gave up");
        assert!(empty(&fw, &path).await, "left behind: {:?}", children(&fw, &path).await);
    }
    fw.close().await;
}

/// A member inside a double barrier whose node someone else deletes: its leave fails with
/// `OwnNodeLost` naming the node (before: `IllegalState`), where Curator's
/// `DistributedDoubleBarrier.internalLeave` throws an IllegalStateException ("our path is
/// missing"); the member may enter again and leave, and nothing is left behind. Under every
/// error and retry policy.
#[tokio::test]
async fn member_node_deleted_by_someone_else() {
    init_tracing();
    let connect_string = shared();
    let admin = client(&connect_string).await;
    for (policy, retry) in COMBINATIONS {
        let case = format!("{policy:?}/{retry:?}");
        let fw = framework(&connect_string, policy, retry).await;
        let path = unique_path("double-deleted");
        let mut barrier = DistributedDoubleBarrier::new(&fw, &path, 1).unwrap();
        assert!(barrier.enter_timeout(deadline()).await.unwrap(), "{case}");
        let ours = members(&admin, &path).await;
        assert_eq!(ours.len(), 1, "{case}: {ours:?}");
        let node = format!("{path}/{}", ours[0]);
        admin.delete().for_path(&node).await.unwrap();
        let left = barrier.leave_timeout(deadline()).await;
        assert!(matches!(&left, Err(CuratorError::OwnNodeLost { path: p, .. }) if *p == node), "{case}: {left:?}");
        assert!(barrier.enter_timeout(deadline()).await.unwrap(), "{case}: enters again");
        assert!(barrier.leave_timeout(deadline()).await.unwrap(), "{case}: leaves");
        assert!(empty(&admin, &path).await, "{case}: left behind: {:?}", children(&admin, &path).await);
        fw.close().await;
    }
    admin.close().await;
}

/// Bad input is a `CuratorError`, never a panic: bad paths, the root as a double barrier, no
/// members, leave without enter, enter twice, and calls after close.
#[tokio::test]
async fn bad_input() {
    init_tracing();
    let fw = client(&shared()).await;
    for bad in ["", "no-slash", "/trailing/", "/a//b", "/a/./b", "/nul\u{0}"] {
        assert!(matches!(DistributedBarrier::new(&fw, bad), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
        assert!(matches!(DistributedDoubleBarrier::new(&fw, bad, 2), Err(CuratorError::InvalidPath { .. })), "{bad:?}");
    }
    assert!(matches!(DistributedDoubleBarrier::new(&fw, "/", 2), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(DistributedDoubleBarrier::new(&fw, "/b", 0), Err(CuratorError::InvalidArgument { .. })));
    // The root cannot be a barrier node: created, it is an invalid path.
    let root = DistributedBarrier::new(&fw, "/").unwrap();
    assert!(root.set_barrier().await.is_err());

    let path = unique_path("double-bad");
    let mut barrier = DistributedDoubleBarrier::new(&fw, &path, 1).unwrap();
    let not_in = barrier.leave().await;
    assert!(matches!(&not_in, Err(CuratorError::NotHeld { path: p, .. }) if *p == path), "{not_in:?}");
    barrier.enter().await.unwrap();
    let twice = barrier.enter().await;
    assert!(matches!(&twice, Err(CuratorError::AlreadyHeld { path: p, .. }) if *p == path), "{twice:?}");
    barrier.leave().await.unwrap();
    assert!(matches!(barrier.leave().await, Err(CuratorError::NotHeld { .. })));
    assert!(empty(&fw, &path).await);

    fw.close().await;
    assert!(matches!(barrier.enter().await, Err(CuratorError::Closed)));
    let gate = DistributedBarrier::new(&fw, &path).unwrap();
    assert!(matches!(gate.wait_on_barrier().await, Err(CuratorError::Closed)));
    assert!(matches!(gate.set_barrier().await, Err(CuratorError::Closed)));
}
