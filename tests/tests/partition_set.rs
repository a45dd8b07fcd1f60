//! kazoo's `SetPartitioner` tests (kazoo/tests/test_partitioner.py), ported to our
//! `SetPartitioner` against a real ZooKeeper, with what kazoo's leave out: the state stream in
//! order, the fencing tokens, the node layout, a real session expiry and connection loss (under
//! both error policies and both retry policies), drops that leave no node, and bad input.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, EventStream, LifeState};
use curator_recipes::{InterProcessMutex, LockLost, PartitionState, ReleaseCause, SetPartitioner};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::policies::{framework, COMBINATIONS};
use tests::zk::children;
use tests::{client, init_tracing, unique_path};

/// kazoo's tests use a 0.2 s time boundary.
const SETTLE: Duration = Duration::from_millis(200);

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

fn set(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}

fn partitioner(fw: &CuratorFramework, path: &str, id: &str, n: usize) -> SetPartitioner {
    SetPartitioner::builder(fw, path, id, set(n)).settle(SETTLE).build().expect("valid settings")
}

/// A state's name and, when acquired, its partitions' names.
fn describe(state: &PartitionState) -> String {
    match state {
        PartitionState::Acquired(held) => {
            format!("Acquired{:?}", held.iter().map(|p| p.name().to_string()).collect::<Vec<_>>())
        }
        PartitionState::Release(cause) => format!("Release({cause:?})"),
        PartitionState::Failure(err) => format!("Failure({err})"),
        other => format!("{other:?}"),
    }
}

/// The next state, within the deadline.
async fn next_state(states: &mut EventStream<PartitionState>) -> PartitionState {
    tokio::time::timeout(deadline(), states.next())
        .await
        .expect("a state within the deadline")
        .expect("the state stream ended")
}

/// The names of the partitions held now (`None` unless acquired).
fn shares(p: &SetPartitioner) -> Option<Vec<String>> {
    match p.partition_state() {
        PartitionState::Acquired(held) => Some(held.iter().map(|h| h.name().to_string()).collect()),
        _ => None,
    }
}

/// A partitioner whose `Release` states are answered with `release_set` by a task, as a worker
/// loop would; every state it sees is logged.
struct Member {
    partitioner: Arc<SetPartitioner>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Member {
    fn start(fw: &CuratorFramework, path: &str, id: &str, n: usize) -> Member {
        let partitioner = Arc::new(partitioner(fw, path, id, n));
        let mut states = partitioner.states();
        partitioner.start().expect("start");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (p, l) = (partitioner.clone(), log.clone());
        tokio::spawn(async move {
            while let Some(state) = states.next().await {
                l.lock().unwrap().push(describe(&state));
                if let PartitionState::Release(_) = state {
                    let _ = p.release_set().await;
                }
            }
        });
        Member { partitioner, log }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Waits until every member holds the expected share.
async fn wait_for_shares(members: &[&Member], expected: &[&[&str]]) {
    let want: Vec<Vec<String>> = expected.iter().map(|s| s.iter().map(|p| p.to_string()).collect()).collect();
    let settled = eventually(deadline(), || async {
        members.iter().zip(&want).all(|(m, w)| shares(&m.partitioner).as_ref() == Some(w))
    })
    .await;
    let now: Vec<_> = members.iter().map(|m| (shares(&m.partitioner), m.log())).collect();
    assert!(settled, "wanted {want:?}, have {now:?}");
}

/// Member nodes and lock nodes left under the partitioner's path.
async fn nodes_left(fw: &CuratorFramework, path: &str, n: usize) -> Vec<String> {
    let mut left: Vec<String> =
        children(fw, &format!("{path}/party")).await.into_iter().map(|c| format!("party/{c}")).collect();
    for p in set(n) {
        left.extend(children(fw, &format!("{path}/locks/{p}")).await.into_iter().map(|c| format!("locks/{p}/{c}")));
    }
    left
}

async fn assert_no_node_left(fw: &CuratorFramework, path: &str, n: usize) {
    let clean = eventually(deadline(), || async { nodes_left(fw, path, n).await.is_empty() }).await;
    assert!(clean, "nodes left behind: {:?}", nodes_left(fw, path, n).await);
}

/// kazoo's test_party_of_one: alone, a member takes the whole set. Past kazoo: the exact state
/// stream (Allocating, then Acquired), a fencing token per partition, kazoo's node layout
/// (`P/party/<id>`, a lock under `P/locks/<partition>`), and nothing left after `close`.
#[tokio::test]
async fn party_of_one() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-one");
    let p = partitioner(&fw, &path, "solo", 3);
    let mut states = p.states();
    assert!(matches!(p.partition_state(), PartitionState::Allocating));
    p.start().unwrap();
    p.ready().await.unwrap();
    assert_eq!(describe(&next_state(&mut states).await), "Allocating");
    let state = next_state(&mut states).await;
    assert_eq!(describe(&state), r#"Acquired["0", "1", "2"]"#);
    let held = p.wait_for_acquire().await.unwrap();
    let tokens: Vec<i64> = held.iter().map(|h| h.fencing_token()).collect();
    assert!(tokens.iter().all(|&t| t > 0), "{tokens:?}");
    for h in &held {
        assert!(h.is_held());
        assert!(h.path().starts_with(&format!("{path}/locks/{}/", h.name())), "{}", h.path());
    }
    assert_eq!(children(&fw, &format!("{path}/party")).await, vec!["solo".to_string()]);
    for i in 0..3 {
        assert_eq!(children(&fw, &format!("{path}/locks/{i}")).await.len(), 1);
    }
    p.close().await;
    assert_eq!(p.state(), LifeState::Closed);
    assert!(next_state_or_end(&mut states).await.is_none(), "the stream ends with the close");
    assert!(matches!(p.release_set().await, Err(CuratorError::AlreadyClosed { .. })));
    assert_no_node_left(&fw, &path, 3).await;
    fw.close().await;
}

async fn next_state_or_end(states: &mut EventStream<PartitionState>) -> Option<PartitionState> {
    tokio::time::timeout(deadline(), states.next()).await.expect("the stream ends within the deadline")
}

/// kazoo's test_party_of_two: two members split two partitions, one each; when one finishes, the
/// other is told to release (a `Release(MembershipChanged)`, in the stream, while it still
/// holds its share), and once it releases it gets the whole set ("member leaves -> other gets
/// all after release").
#[tokio::test]
async fn party_of_two() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-two");
    let zero = Member::start(&fw, &path, "0", 2);
    let one = Member::start(&fw, &path, "1", 2);
    wait_for_shares(&[&zero, &one], &[&["0"], &["1"]]).await;

    let held_before = one.partitioner.wait_for_acquire().await.unwrap();
    let mut states = one.partitioner.states();
    zero.partitioner.close().await;
    // Member 1's answering task calls release_set on the Release it sees; here, the same
    // states in the same order.
    let mut seen = Vec::new();
    while !seen.iter().any(|s: &String| s.starts_with("Acquired")) {
        seen.push(describe(&next_state(&mut states).await));
    }
    assert_eq!(seen, ["Release(MembershipChanged)", "Allocating", r#"Acquired["0", "1"]"#]);
    let held_after = one.partitioner.wait_for_acquire().await.unwrap();
    // Partition 1 was given back and taken again: a new grant, a larger token.
    assert!(held_after[1].fencing_token() > held_before[0].fencing_token());
    assert!(!held_before[0].is_held(), "the released grant is no longer held");
    one.partitioner.close().await;
    assert_no_node_left(&fw, &path, 2).await;
    fw.close().await;
}

/// kazoo's test_party_expansion: two members hold [0, 2] and [1]; a third joins, the two are
/// told to release, and after their release_set the set is split in three.
#[tokio::test]
async fn party_expansion() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-expansion");
    let zero = Member::start(&fw, &path, "0", 3);
    let one = Member::start(&fw, &path, "1", 3);
    wait_for_shares(&[&zero, &one], &[&["0", "2"], &["1"]]).await;
    let two = Member::start(&fw, &path, "2", 3);
    wait_for_shares(&[&zero, &one, &two], &[&["0"], &["1"], &["2"]]).await;
    for m in [&zero, &one] {
        assert!(m.log().contains(&"Release(MembershipChanged)".to_string()), "{:?}", m.log());
    }
    for m in [&zero, &one, &two] {
        m.partitioner.close().await;
    }
    assert_no_node_left(&fw, &path, 3).await;
    fw.close().await;
}

/// kazoo's test_more_members_than_set_items: with one partition and two members, one holds it
/// and the other holds nothing (an `Acquired` with no partition).
#[tokio::test]
async fn more_members_than_set_items() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-more-members");
    let zero = Member::start(&fw, &path, "0", 1);
    let one = Member::start(&fw, &path, "1", 1);
    wait_for_shares(&[&zero, &one], &[&["0"], &[]]).await;
    zero.partitioner.close().await;
    one.partitioner.close().await;
    assert_no_node_left(&fw, &path, 1).await;
    fw.close().await;
}

/// kazoo's test_party_session_failure, with a real session expiry (kazoo calls `_fail_out`):
/// the holder is told `Failure(SessionExpired)` (under `ErrorPolicy::Standard` after a
/// `Release(MayBeLost(Suspended))` for the disconnection, as kazoo's `SUSPENDED` then `LOST`),
/// its partitions say lost, it leaves the group, and a `release_set` afterwards returns the
/// failure. Under every error and retry policy.
#[tokio::test]
async fn session_failure() {
    init_tracing();
    let connect = shared();
    let observer = client(&connect).await;
    for (policy, retry) in COMBINATIONS {
        let context = format!("{policy:?}/{retry:?}");
        let fw = framework(&connect, policy, retry).await;
        let path = unique_path("partition-expiry");
        let p = partitioner(&fw, &path, "m", 3);
        let mut states = p.states();
        p.start().unwrap();
        let held = tokio::time::timeout(deadline(), p.wait_for_acquire()).await.expect(&context).unwrap();
        assert_eq!(held.len(), 3, "{context}");
        let info = fw.session().await.unwrap().client().session().clone();
        expire_session(&connect, &info).await.unwrap();
        let failure = loop {
            match next_state(&mut states).await {
                PartitionState::Failure(err) => break err,
                PartitionState::Acquired(_) | PartitionState::Allocating => {}
                PartitionState::Release(ReleaseCause::MayBeLost { reason: LockLost::Suspended })
                    if policy == curator_core::ErrorPolicy::Standard => {}
                other => panic!("{context}: {}", describe(&other)),
            }
        };
        assert!(matches!(failure, CuratorError::SessionExpired { .. }), "{context}: {failure}");
        assert!(held.iter().all(|h| !h.is_held()), "{context}");
        assert!(matches!(p.partition_state(), PartitionState::Failure(_)), "{context}");
        assert!(matches!(p.wait_for_acquire().await, Err(CuratorError::SessionExpired { .. })), "{context}");
        assert!(matches!(p.release_set().await, Err(CuratorError::SessionExpired { .. })), "{context}");
        // It left the group and gave its partitions back, although its framework has a new
        // session now.
        assert_no_node_left(&observer, &path, 3).await;
        p.close().await;
        fw.close().await;
    }
    observer.close().await;
}

/// kazoo's test_connection_loss, through a proxy that cuts the connection: under
/// `ErrorPolicy::Standard` both members are told their partitions may be lost
/// (`Release(MayBeLost(Suspended))`), release, and settle on the same split; under
/// `ErrorPolicy::Session` a cut shorter than the session timeout changes nothing (no state, the
/// same grants). Then, as kazoo's test, a third member joins and the set is split in three.
/// Under every error and retry policy.
#[tokio::test]
async fn connection_loss() {
    init_tracing();
    let connect = shared();
    for (policy, retry) in COMBINATIONS {
        let context = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&connect).await.unwrap();
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let path = unique_path("partition-connection-loss");
        let zero = Member::start(&fw, &path, "0", 3);
        let one = Member::start(&fw, &path, "1", 3);
        wait_for_shares(&[&zero, &one], &[&["0", "2"], &["1"]]).await;
        let before: Vec<i64> =
            zero.partitioner.wait_for_acquire().await.unwrap().iter().map(|h| h.fencing_token()).collect();
        let logged = zero.log().len();

        proxy.cut();
        let released = eventually(Duration::from_secs(1), || async {
            zero.log().iter().skip(logged).any(|s| s.starts_with("Release"))
        })
        .await;
        match policy {
            curator_core::ErrorPolicy::Standard => {
                assert!(released, "{context}: {:?}", zero.log());
                let cause = format!("{:?}", ReleaseCause::MayBeLost { reason: LockLost::Suspended });
                assert!(zero.log().iter().any(|s| s.contains(&cause)), "{context}: {:?}", zero.log());
            }
            _ => assert!(!released, "{context}: a short cut is no loss under Session: {:?}", zero.log()),
        }
        wait_for_shares(&[&zero, &one], &[&["0", "2"], &["1"]]).await;
        let after: Vec<i64> =
            zero.partitioner.wait_for_acquire().await.unwrap().iter().map(|h| h.fencing_token()).collect();
        if policy == curator_core::ErrorPolicy::Session {
            assert_eq!(before, after, "{context}: the same grants");
        }

        let two = Member::start(&fw, &path, "2", 3);
        wait_for_shares(&[&zero, &one, &two], &[&["0"], &["1"], &["2"]]).await;
        for m in [&zero, &one, &two] {
            m.partitioner.close().await;
        }
        let observer = client(&connect).await;
        assert_no_node_left(&observer, &path, 3).await;
        observer.close().await;
        fw.close().await;
    }
}

/// kazoo's test_race_condition_new_partitioner_during_the_lock, without its mock: member 0,
/// alone, has taken partition 0 and waits for partition 1 (held by another client, as kazoo's
/// slow lock holds it) when member 1 joins. Member 0 gives up the allocation, gives partition 0
/// back, and once the group settles and the other client lets go, the two hold [0] and [1]. No
/// deadlock, member 0 is never told it holds both, and its stream tells the allocation started
/// over as one `Allocating`.
#[tokio::test]
async fn new_member_during_the_lock() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-race");
    let blocker = InterProcessMutex::new(&fw, &format!("{path}/locks/1")).unwrap();
    let blocked = blocker.acquire().await.unwrap();
    let zero = Member::start(&fw, &path, "0", 2);
    // Member 0 holds partition 0 and waits behind the blocker on partition 1.
    let waiting = eventually(deadline(), || async { children(&fw, &format!("{path}/locks/1")).await.len() == 2 }).await;
    assert!(waiting, "member 0 waits for partition 1");
    assert_eq!(children(&fw, &format!("{path}/locks/0")).await.len(), 1);
    let one = Member::start(&fw, &path, "1", 2);
    // Member 1 waits for partition 1 too, once the group settled; member 0 gave it up.
    let settled = eventually(deadline(), || async {
        let waiters = children(&fw, &format!("{path}/locks/1")).await.len();
        waiters == 2 && zero.partitioner.partition_state().is_acquired()
    })
    .await;
    assert!(settled, "{:?} {:?}", zero.log(), one.log());
    assert_eq!(shares(&zero.partitioner), Some(vec!["0".to_string()]));
    blocked.release().await.unwrap();
    wait_for_shares(&[&zero, &one], &[&["0"], &["1"]]).await;
    assert!(!zero.log().iter().any(|s| s == r#"Acquired["0", "1"]"#), "{:?}", zero.log());
    // The allocation started over is one Allocating in the stream, not two.
    assert!(!zero.log().windows(2).any(|w| w[0] == "Allocating" && w[1] == "Allocating"), "{:?}", zero.log());
    zero.partitioner.close().await;
    one.partitioner.close().await;
    assert_no_node_left(&fw, &path, 2).await;
    fw.close().await;
}

/// Dropping a partitioner, holding or still waiting for a partition, leaves no node behind
/// (its member node and lock nodes are deleted in the background).
#[tokio::test]
async fn dropping_leaves_no_node() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-drop");
    let holding = partitioner(&fw, &path, "holding", 2);
    holding.start().unwrap();
    holding.wait_for_acquire().await.unwrap();
    drop(holding);
    assert_no_node_left(&fw, &path, 2).await;

    let blocker = InterProcessMutex::new(&fw, &format!("{path}/locks/1")).unwrap();
    let blocked = blocker.acquire().await.unwrap();
    let waiting = partitioner(&fw, &path, "waiting", 2);
    waiting.start().unwrap();
    let queued = eventually(deadline(), || async { children(&fw, &format!("{path}/locks/1")).await.len() == 2 }).await;
    assert!(queued, "the partitioner waits for partition 1");
    drop(waiting);
    let gone = eventually(deadline(), || async {
        children(&fw, &format!("{path}/locks/1")).await.len() == 1
            && children(&fw, &format!("{path}/locks/0")).await.is_empty()
            && children(&fw, &format!("{path}/party")).await.is_empty()
    })
    .await;
    assert!(gone, "left: {:?}", nodes_left(&fw, &path, 2).await);
    blocked.release().await.unwrap();
    assert_no_node_left(&fw, &path, 2).await;
    fw.close().await;
}

/// Lost replies (the core decides them, or ends them with `OutcomeUnknown`, never sending on a
/// guess): the member's registration create and then a lock's create are applied with their
/// replies lost. The partitioner takes the whole set, with one member node and one lock node per
/// partition (a lock create in doubt is found by its protected name, or its node deleted by the
/// core's orphan guard and the partition taken again), and leaves nothing on close. Under every
/// error and retry policy.
#[tokio::test]
async fn lost_replies_leave_one_member_and_one_lock_each() {
    use curator_test::RequestKind;
    init_tracing();
    let connect = shared();
    let observer = client(&connect).await;
    for (policy, retry) in COMBINATIONS {
        let context = format!("{policy:?}/{retry:?}");
        let proxy = ChaosProxy::start(&connect).await.unwrap();
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let path = unique_path("partition-lost-replies");
        // The parents first: the creates whose replies are lost are the member's and a lock's.
        for parent in ["party", "locks/0", "locks/1"] {
            observer
                .create()
                .creating_parents_if_needed()
                .for_path(&format!("{path}/{parent}"), Vec::new())
                .await
                .unwrap();
        }
        let one_each = || async {
            children(&observer, &format!("{path}/party")).await == vec!["solo".to_string()]
                && children(&observer, &format!("{path}/locks/0")).await.len() == 1
                && children(&observer, &format!("{path}/locks/1")).await.len() == 1
        };
        proxy.swallow_next_reply_to(RequestKind::Create);
        let p = partitioner(&fw, &path, "solo", 2);
        p.start().unwrap();
        let held = tokio::time::timeout(deadline(), p.wait_for_acquire()).await.expect("acquired in time");
        assert_eq!(held.map(|h| h.len()).ok(), Some(2), "{context}");
        assert!(!proxy.swallow_pending(), "{context}: the member's create never reached the server");
        assert!(eventually(deadline(), one_each).await, "{context}: {:?}", nodes_left(&observer, &path, 2).await);
        // Allocating again: a lock's create loses its reply.
        proxy.swallow_next_reply_to(RequestKind::Create);
        p.release_set().await.unwrap();
        let held = tokio::time::timeout(deadline(), p.wait_for_acquire()).await.expect("acquired again in time");
        assert_eq!(held.map(|h| h.len()).ok(), Some(2), "{context}");
        assert!(!proxy.swallow_pending(), "{context}: no lock create reached the server");
        assert!(eventually(deadline(), one_each).await, "{context}: {:?}", nodes_left(&observer, &path, 2).await);
        p.close().await;
        assert_no_node_left(&observer, &path, 2).await;
        fw.close().await;
    }
    observer.close().await;
}

/// Bad input is a typed error from `build`, before anything is sent: an empty set, a partition
/// named twice, partition names and member ids that are not one node name, settle times of zero
/// or over an hour, an invalid path.
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("partition-bad");
    let build = |id: &str, names: &[&str], settle: Duration| {
        SetPartitioner::builder(&fw, &path, id, names.iter().copied()).settle(settle).build()
    };
    let invalid = |r: curator_core::Result<SetPartitioner>, what: &str| match r {
        Err(CuratorError::InvalidArgument { reason, .. }) => reason,
        other => panic!("{what}: {other:?}"),
    };
    assert!(invalid(build("m", &[], SETTLE), "empty set").contains("empty"));
    assert!(invalid(build("m", &["a", "b", "a"], SETTLE), "duplicate").contains("twice"));
    for name in ["", "a/b", ".", "..", "bad\u{0}name"] {
        invalid(build("m", &["a", name], SETTLE), &format!("partition {name:?}"));
    }
    for id in ["", "a/b", ".."] {
        invalid(build(id, &["a"], SETTLE), &format!("id {id:?}"));
    }
    assert!(invalid(build("m", &["a"], Duration::ZERO), "zero settle").contains("settle"));
    let huge = SetPartitioner::MAX_SETTLE + Duration::from_millis(1);
    assert!(invalid(build("m", &["a"], huge), "huge settle").contains("settle"));
    assert!(build("m", &["a"], SetPartitioner::MAX_SETTLE).is_ok());
    let bad_path = SetPartitioner::builder(&fw, "no-slash", "m", ["a"]).build();
    assert!(matches!(bad_path, Err(CuratorError::InvalidPath { .. })), "{bad_path:?}");
    // Nothing was sent.
    assert!(fw.check_exists().for_path(&path).await.unwrap().is_none());
    fw.close().await;
}
