//! Apache Curator's `LeaderSelector` tests (`TestLeaderSelector`, `TestLeaderSelectorEdges`,
//! `TestLeaderSelectorCluster`, `TestLeaderSelectorParticipants`), ported to our
//! `LeaderSelector` against real ZooKeeper. Java threads are tokio tasks; a leader thread that
//! blocks until interrupted is a future that runs until dropped; Curator's sleeps are waits for
//! what they stood for.
//!
//! Every test in which two or more selectors take part in one election records their terms in
//! the leadership checker (`tests::leadership`, through their leadership functions) and ends
//! with its clean report (no overlap, no token inversion), and with exactly one stable leader
//! where the election stays up before the selectors close. Curator's assertions stay.
//!
//! Our behaviour, on purpose (the tests show ours):
//! - A suspension or a lost session ends a *term*, not a wait in line: Curator's
//!   `LeaderSelectorListenerAdapter` cancels the whole election, so after a session expiry both
//!   of its selectors need a `requeue()`; ours only the one that led
//!   (`kill_session_then_close_should_elect_new_leader`).
//! - A create whose reply is lost is found by its protected name and the selector leads
//!   (`flapping`); Curator's selector gives up that attempt.
//!
//! Not ported:
//! - `TestLeaderSelector.testRaceAtStateChanged`: it parks the selector between the grant and
//!   the call to `takeLeadership` with package-private debug latches; there is no such hook.
//!   Our counterpart (a grant already lost when it comes does not start a term) is a check in
//!   the run loop.
//! - `TestLeaderSelectorEdges.createProtectedNodeInBackgroundTest` and `...NoRetry`: they test
//!   the framework's protected create in the background, not the selector; swallowed replies of
//!   protected creates are covered in `framework_failures.rs`.
//! - `TestLeaderSelectorWithExpiry`: there is no such class in Apache Curator (checked at its
//!   current master); the expiry scenarios are `testKillSessionThenCloseShouldElectNewLeader`
//!   here and `future_dropped_when_the_session_expires` in `leader_selector.rs`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use curator_core::EventStream;
use curator_core::{ConnectionState, CuratorFramework, ErrorPolicy};
use curator_recipes::{LeaderSelector, Leadership, LockLost, SelectorEvent, TermEnd};
use curator_test::{eventually, expire_session, four_letter_word, ChaosProxy, TestingCluster, TestingServer, Timing};
use futures::future::BoxFuture;
use tests::leadership::{next_event, one_leader, LeadershipChecker};
use tests::locks::framework;
use tests::policies::{with_policies, Retry};
use tests::{builder, children, connected, init_tracing, unique_path, wait_children, wait_for, Fixture};

/// Counts the leaders whose function runs: one more while a future lives.
struct Running(Arc<AtomicI32>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A leadership function that counts itself in `running` until its future is dropped.
fn until_dropped(running: &Arc<AtomicI32>) -> impl Fn(Leadership) -> BoxFuture<'static, ()> + Send + Sync {
    let running = running.clone();
    move |_leadership: Leadership| {
        let running = running.clone();
        Box::pin(async move {
            running.fetch_add(1, Ordering::SeqCst);
            let _running = Running(running);
            std::future::pending::<()>().await;
        })
    }
}

async fn expect_took(events: &mut EventStream<SelectorEvent>) -> Leadership {
    match next_event(events).await {
        SelectorEvent::Took(leadership) => leadership,
        other => panic!("expected Took, got {other:?}"),
    }
}

async fn expect_ended(events: &mut EventStream<SelectorEvent>) -> TermEnd {
    match next_event(events).await {
        SelectorEvent::Ended { end, .. } => end,
        other => panic!("expected Ended, got {other:?}"),
    }
}

/// Waits until `n` leadership functions run (`Took` is published just before the function is
/// first polled).
async fn running_are(running: &AtomicI32, n: i32) {
    assert!(
        eventually(Timing::new().deadline(), || async { running.load(Ordering::SeqCst) == n }).await,
        "{} running, not {n}",
        running.load(Ordering::SeqCst)
    );
}

/// TestLeaderSelector.testInterruption: the leader's work ends abnormally (Curator: its thread
/// is interrupted from outside; ours: the function panics); the term ends and the node is
/// deleted without error.
#[tokio::test]
async fn interruption() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("cs-interruption");
    let s = LeaderSelector::builder(&fx.fw, &path, |_l: Leadership| async { panic!("interrupted") }).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    expect_took(&mut events).await;
    assert_eq!(expect_ended(&mut events).await, TermEnd::Returned);
    wait_children(&fx.fw, &path, 0).await;
    s.close().await;
    fx.close().await;
}

/// TestLeaderSelector.testErrorPolicies: the server goes away while leading. Under
/// `ErrorPolicy::Standard` the term ends at the suspension, before `Lost`; under `Session` the
/// suspension leaves it running and it ends with the loss of the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_policies() {
    init_tracing();
    let mut server = TestingServer::start().await.unwrap();
    for policy in [ErrorPolicy::Standard, ErrorPolicy::Session] {
        let path = unique_path("cs-policies");
        let fw = connected(with_policies(builder(&server.connect_string()), policy, Retry::Short)).await;
        let mut states = fw.connection_state_stream();
        let running = Arc::new(AtomicI32::new(0));
        let s = LeaderSelector::builder(&fw, &path, until_dropped(&running)).build().unwrap();
        let mut events = s.events();
        s.start().unwrap();
        s.ready().await.unwrap();
        expect_took(&mut events).await;
        server.stop().await.unwrap();
        match policy {
            ErrorPolicy::Standard => {
                assert_eq!(expect_ended(&mut events).await, TermEnd::Lost(LockLost::Suspended));
                assert_eq!(running.load(Ordering::SeqCst), 0, "released");
                wait_for(&mut states, ConnectionState::Lost, |_| true).await;
            }
            ErrorPolicy::Session => {
                wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
                assert!(events.try_next().is_none(), "a suspension does not end the term");
                running_are(&running, 1).await;
                assert_eq!(expect_ended(&mut events).await, TermEnd::Lost(LockLost::SessionLost));
                assert_eq!(running.load(Ordering::SeqCst), 0, "released");
                wait_for(&mut states, ConnectionState::Lost, |_| true).await;
            }
            other => panic!("unexpected policy {other:?}"),
        }
        s.close().await;
        fw.close().await;
        server.restart().await.unwrap();
    }
}

/// TestLeaderSelector.testLeaderNodeDeleteOnInterrupt: the leader is interrupted while the
/// server is down (under `ErrorPolicy::Session`, so that the outage alone does not end the
/// term, as Curator's listener there ignores it); once the server is back, the node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_node_delete_on_interrupt() {
    init_tracing();
    let mut server = TestingServer::start().await.unwrap();
    let path = unique_path("cs-delete-on-interrupt");
    let fw = connected(with_policies(builder(&server.connect_string()), ErrorPolicy::Session, Retry::Short)).await;
    let mut states = fw.connection_state_stream();
    let running = Arc::new(AtomicI32::new(0));
    let s = LeaderSelector::builder(&fw, &path, until_dropped(&running)).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    expect_took(&mut events).await;
    server.stop().await.unwrap();
    wait_for(&mut states, ConnectionState::Suspended, |_| true).await;
    s.interrupt_leadership();
    assert_eq!(expect_ended(&mut events).await, TermEnd::Interrupted);
    server.restart().await.unwrap();
    wait_for(&mut states, ConnectionState::Reconnected, |_| true).await;
    wait_children(&fw, &path, 0).await;
    s.close().await;
    fw.close().await;
}

/// TestLeaderSelector.testInterruptLeadershipWithRequeue: an auto-requeuing selector
/// interrupted twice in a row takes leadership again.
#[tokio::test]
async fn interrupt_leadership_with_requeue() {
    init_tracing();
    let fx = Fixture::shared().await;
    let running = Arc::new(AtomicI32::new(0));
    let s = LeaderSelector::builder(&fx.fw, &unique_path("cs-interrupt-requeue"), until_dropped(&running))
        .auto_requeue(true)
        .build()
        .unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    let first = expect_took(&mut events).await;
    s.interrupt_leadership();
    s.interrupt_leadership();
    assert_eq!(expect_ended(&mut events).await, TermEnd::Interrupted);
    let again = expect_took(&mut events).await;
    assert!(again.fencing_token() > first.fencing_token());
    s.close().await;
    fx.close().await;
}

/// TestLeaderSelector.testInterruptLeadership: interrupting the leader ends its function.
#[tokio::test]
async fn interrupt_leadership() {
    init_tracing();
    let fx = Fixture::shared().await;
    let running = Arc::new(AtomicI32::new(0));
    let s = LeaderSelector::builder(&fx.fw, &unique_path("cs-interrupt"), until_dropped(&running)).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    expect_took(&mut events).await;
    running_are(&running, 1).await;
    s.interrupt_leadership();
    assert_eq!(expect_ended(&mut events).await, TermEnd::Interrupted);
    assert_eq!(running.load(Ordering::SeqCst), 0);
    s.close().await;
    fx.close().await;
}

/// TestLeaderSelector.testAutoRequeue: a function that returns quickly leads at least twice.
#[tokio::test]
async fn auto_requeue() {
    init_tracing();
    let fx = Fixture::shared().await;
    let terms = Arc::new(AtomicUsize::new(0));
    let counted = terms.clone();
    let s = LeaderSelector::builder(&fx.fw, &unique_path("cs-auto-requeue"), move |_l: Leadership| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    })
    .build()
    .unwrap();
    s.auto_requeue();
    s.start().unwrap();
    s.ready().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { terms.load(Ordering::SeqCst) >= 2 }).await);
    s.close().await;
    fx.close().await;
}

/// TestLeaderSelector.testServerDying: the server dies under a leader; the framework reports
/// the session lost, and the term has ended by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dying() {
    init_tracing();
    let mut server = TestingServer::start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let mut states = fw.connection_state_stream();
    let running = Arc::new(AtomicI32::new(0));
    let s = LeaderSelector::builder(&fw, &unique_path("cs-dying"), until_dropped(&running)).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    expect_took(&mut events).await;
    server.kill().await.unwrap();
    wait_for(&mut states, ConnectionState::Lost, |_| true).await;
    assert!(matches!(expect_ended(&mut events).await, TermEnd::Lost(_)));
    assert!(!s.has_leadership());
    s.close().await;
    fw.close().await;
}

/// TestLeaderSelector.testKillSessionThenCloseShouldElectNewLeader: two selectors on one
/// client; its session expires. The leader's term ends and it must be requeued; the other
/// stayed in line (Curator: both must be requeued) and leads on the new session. One leader at
/// a time; closing the leader hands over to the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_session_then_close_should_elect_new_leader() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("cs-kill-session");
    let checker = LeadershipChecker::new();
    let running = Arc::new(AtomicI32::new(0));
    let one = LeaderSelector::builder(&fw, &path, checker.recording("one", until_dropped(&running))).build().unwrap();
    let two = LeaderSelector::builder(&fw, &path, checker.recording("two", until_dropped(&running))).build().unwrap();
    let mut one_events = one.events();
    let mut two_events = two.events();
    one.start().unwrap();
    one.ready().await.unwrap();
    expect_took(&mut one_events).await;
    two.start().unwrap();
    two.ready().await.unwrap();
    wait_children(&fw, &path, 2).await;

    let info = fw.session().await.unwrap().client().session().clone();
    checker.forced_expiry("one");
    expire_session(&server.connect_string(), &info).await.unwrap();
    assert!(matches!(expect_ended(&mut one_events).await, TermEnd::Lost(_)));
    expect_took(&mut two_events).await;
    running_are(&running, 1).await;
    assert!(one.requeue().unwrap());
    assert!(!two.requeue().unwrap(), "already leading");
    wait_children(&fw, &path, 2).await;

    assert_eq!(one_leader(&checker).await, "two");
    two.close().await;
    expect_took(&mut one_events).await;
    running_are(&running, 1).await;
    one.close().await;
    assert_eq!(running.load(Ordering::SeqCst), 0);
    let report = checker.verify();
    assert_eq!(report.terms, 3, "{report:#}");
    fw.close().await;
}

/// TestLeaderSelector.testKillServerThenCloseShouldElectNewLeader: as above, with the server
/// stopped and restarted on its port, and auto-requeue: one leader again, and closing it hands
/// over to the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_server_then_close_should_elect_new_leader() {
    init_tracing();
    let mut server = TestingServer::start().await.unwrap();
    let fw = framework(&server.connect_string()).await;
    let path = unique_path("cs-kill-server");
    let checker = LeadershipChecker::new();
    let running = Arc::new(AtomicI32::new(0));
    let one = LeaderSelector::builder(&fw, &path, checker.recording("one", until_dropped(&running)))
        .auto_requeue(true)
        .build()
        .unwrap();
    let two = LeaderSelector::builder(&fw, &path, checker.recording("two", until_dropped(&running)))
        .auto_requeue(true)
        .build()
        .unwrap();
    let mut one_events = one.events();
    one.start().unwrap();
    one.ready().await.unwrap();
    expect_took(&mut one_events).await;
    two.start().unwrap();
    two.ready().await.unwrap();
    wait_children(&fw, &path, 2).await;

    server.stop().await.unwrap();
    assert!(matches!(expect_ended(&mut one_events).await, TermEnd::Lost(_)));
    server.restart().await.unwrap();
    assert!(
        eventually(Timing::new().multiple(2.0).deadline(), || async { one.has_leadership() || two.has_leadership() })
            .await
    );
    running_are(&running, 1).await;
    one_leader(&checker).await;
    let (leader, other) = if one.has_leadership() { (one, two) } else { (two, one) };
    leader.close().await;
    assert!(eventually(Timing::new().deadline(), || async { other.has_leadership() }).await);
    running_are(&running, 1).await;
    other.close().await;
    assert_eq!(running.load(Ordering::SeqCst), 0);
    checker.verify();
    fw.close().await;
}

/// TestLeaderSelector.testClosing: of two selectors, closing the one that does not lead leaves
/// the leader leading; closing the leader ends its leadership.
#[tokio::test]
async fn closing() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("cs-closing");
    let checker = LeadershipChecker::new();
    let running = Arc::new(AtomicI32::new(0));
    let one =
        LeaderSelector::builder(&fx.fw, &path, checker.recording("one", until_dropped(&running))).build().unwrap();
    let two =
        LeaderSelector::builder(&fx.fw, &path, checker.recording("two", until_dropped(&running))).build().unwrap();
    one.start().unwrap();
    one.ready().await.unwrap();
    two.start().unwrap();
    two.ready().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { one.has_leadership() || two.has_leadership() }).await);
    assert_ne!(one.has_leadership(), two.has_leadership());
    let (leader, other) = if one.has_leadership() { (one, two) } else { (two, one) };
    other.close().await;
    wait_children(&fx.fw, &path, 1).await;
    assert!(leader.has_leadership());
    assert!(!other.has_leadership());
    one_leader(&checker).await;
    leader.close().await;
    assert!(!leader.has_leadership());
    assert_eq!(running.load(Ordering::SeqCst), 0);
    let report = checker.verify();
    assert_eq!(report.terms, 1, "{report:#}");
    fx.close().await;
}

/// TestLeaderSelector.testRotatingLeadership: 5 selectors, 3 rounds; in each round every
/// selector leads exactly once (started in the first round, requeued in the others).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_leadership() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("cs-rotating");
    let checker = LeadershipChecker::new();
    let leaders = Arc::new(Mutex::new(Vec::new()));
    let mut selectors = Vec::new();
    for i in 0..5usize {
        let leaders = leaders.clone();
        let lead = checker.recording(&format!("s{i}"), move |_l: Leadership| {
            let leaders = leaders.clone();
            async move {
                tokio::task::yield_now().await;
                leaders.lock().unwrap().push(i);
            }
        });
        let s = LeaderSelector::builder(&fx.fw, &path, lead).build().unwrap();
        selectors.push(s);
    }
    for round in 1..=3 {
        for s in &selectors {
            if round == 1 {
                s.start().unwrap();
                s.ready().await.unwrap();
            } else {
                // Its last term may still be ending: requeue once it has.
                assert!(eventually(Timing::new().deadline(), || async { s.requeue().unwrap() }).await);
            }
        }
        assert!(eventually(Timing::new().deadline(), || async { leaders.lock().unwrap().len() == round * 5 }).await);
    }
    for s in &selectors {
        s.close().await;
    }
    let leaders = leaders.lock().unwrap().clone();
    for round in leaders.chunks(5) {
        assert_eq!(round.iter().collect::<HashSet<_>>().len(), 5, "each leads once per round: {leaders:?}");
    }
    let report = checker.verify();
    assert_eq!(report.terms, 15, "{report:#}");
    fx.close().await;
}

/// TestLeaderSelectorEdges.flappingTest: the connection drops right after our node is created
/// (the create's reply is lost). Ours finds its node by its protected name and leads, with one
/// node; once it is closed no node is left and another selector leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping() {
    init_tracing();
    let server = TestingServer::shared();
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let fw = framework(&proxy.connect_string()).await;
    let observer = framework(&server.connect_string()).await;
    let path = unique_path("cs-flapping");
    observer.create().creating_parents_if_needed().for_path(&path, Vec::new()).await.unwrap();
    let checker = LeadershipChecker::new();
    let running = Arc::new(AtomicI32::new(0));
    let one = LeaderSelector::builder(&fw, &path, checker.recording("one", until_dropped(&running))).build().unwrap();
    let mut events = one.events();
    proxy.swallow_next_reply();
    one.start().unwrap();
    one.ready().await.unwrap();
    expect_took(&mut events).await;
    assert!(!proxy.swallow_pending(), "a reply was swallowed");
    assert_eq!(children(&observer, &path).await.len(), 1, "exactly one node: ours");
    one.close().await;
    wait_children(&observer, &path, 0).await;
    let two =
        LeaderSelector::builder(&observer, &path, checker.recording("two", until_dropped(&running))).build().unwrap();
    let mut events = two.events();
    two.start().unwrap();
    two.ready().await.unwrap();
    expect_took(&mut events).await;
    assert_eq!(one_leader(&checker).await, "two");
    two.close().await;
    let report = checker.verify();
    assert_eq!(report.terms, 2, "{report:#}");
    fw.close().await;
    observer.close().await;
}

/// Which member of `cluster` holds `fw`'s session (from each member's `cons`).
async fn connected_member(cluster: &TestingCluster, fw: &CuratorFramework) -> usize {
    let sid = format!("sid=0x{:x}", fw.session().await.unwrap().id());
    for i in 0..cluster.len() {
        if let Ok(cons) = four_letter_word(&cluster.connect_string_of(i), "cons").await {
            if cons.contains(&sid) {
                return i;
            }
        }
    }
    panic!("no member lists {sid}");
}

/// TestLeaderSelectorCluster.testRestart: on a 3-node ensemble, the member the leader is
/// connected to is killed; the auto-requeuing selector (whose function lists the election's
/// nodes) leads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_restart() {
    init_tracing();
    let mut cluster = TestingCluster::start(3).await.unwrap();
    let fw = framework(&cluster.connect_string()).await;
    let path = unique_path("cs-cluster-restart");
    let terms = Arc::new(AtomicUsize::new(0));
    let (counted, lister, listed) = (terms.clone(), fw.clone(), path.clone());
    let s = LeaderSelector::builder(&fw, &path, move |_l: Leadership| {
        let (counted, lister, listed) = (counted.clone(), lister.clone(), listed.clone());
        async move {
            if !lister.get_children().for_path(&listed).await.unwrap_or_default().is_empty() {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
    .auto_requeue(true)
    .build()
    .unwrap();
    s.start().unwrap();
    s.ready().await.unwrap();
    assert!(eventually(Timing::new().deadline(), || async { terms.load(Ordering::SeqCst) >= 1 }).await);
    let member = connected_member(&cluster, &fw).await;
    cluster.kill(member).await.unwrap();
    let before = terms.load(Ordering::SeqCst);
    assert!(
        eventually(Timing::new().multiple(4.0).deadline(), || async { terms.load(Ordering::SeqCst) > before + 1 })
            .await
    );
    s.close().await;
    fw.close().await;
}

/// TestLeaderSelectorCluster.testLostRestart: the ensemble goes down under the leader (two of
/// three members killed: no quorum; Curator stops all three) and its term ends; the members
/// come back, the old node is deleted (as its session's expiry would), and a requeue leads
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_lost_restart() {
    init_tracing();
    let mut cluster = TestingCluster::start(3).await.unwrap();
    let fw = framework(&cluster.connect_string()).await;
    let path = unique_path("cs-cluster-lost");
    let running = Arc::new(AtomicI32::new(0));
    let s = LeaderSelector::builder(&fw, &path, until_dropped(&running)).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    let term = expect_took(&mut events).await;
    assert_eq!(children(&fw, &path).await.len(), 1);
    let member = connected_member(&cluster, &fw).await;
    let others: Vec<usize> = (0..3).filter(|i| *i != member).collect();
    cluster.kill(member).await.unwrap();
    cluster.kill(others[0]).await.unwrap();
    assert!(matches!(expect_ended(&mut events).await, TermEnd::Lost(_)));
    assert!(!s.has_leadership());
    assert_eq!(running.load(Ordering::SeqCst), 0);
    cluster.restart(member).await.unwrap();
    cluster.restart(others[0]).await.unwrap();
    let _ = fw.delete().for_path(term.path()).await; // as its session's expiry would
    assert!(s.requeue().unwrap());
    expect_took(&mut events).await;
    s.close().await;
    fw.close().await;
}

/// TestLeaderSelectorParticipants.testId: the id given is the leader's and the only
/// participant's.
#[tokio::test]
async fn participants_id() {
    init_tracing();
    let fx = Fixture::shared().await;
    let running = Arc::new(AtomicI32::new(0));
    let s =
        LeaderSelector::builder(&fx.fw, &unique_path("cs-id"), until_dropped(&running)).id("A is A").build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    expect_took(&mut events).await;
    let leader = s.leader().await.unwrap().expect("a leader");
    assert!(leader.is_leader);
    assert_eq!(leader.id, "A is A");
    let participants = s.participants().await.unwrap();
    assert_eq!(participants.len(), 1);
    assert_eq!(participants[0].id, s.id());
    s.close().await;
    fx.close().await;
}

/// TestLeaderSelectorParticipants.testBasic: 10 selectors see the same participants, with one
/// leader and every id once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_basic() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("cs-participants");
    let checker = LeadershipChecker::new();
    let running = Arc::new(AtomicI32::new(0));
    let mut selectors = Vec::new();
    for i in 0..10 {
        let lead = checker.recording(&i.to_string(), until_dropped(&running));
        let s = LeaderSelector::builder(&fx.fw, &path, lead).id(i.to_string()).build().unwrap();
        s.start().unwrap();
        s.ready().await.unwrap();
        selectors.push(s);
    }
    wait_children(&fx.fw, &path, 10).await;
    assert!(eventually(Timing::new().deadline(), || async { running.load(Ordering::SeqCst) == 1 }).await);
    let participants = selectors[0].participants().await.unwrap();
    for s in &selectors[1..] {
        assert_eq!(s.participants().await.unwrap(), participants);
    }
    assert_eq!(participants.iter().filter(|p| p.is_leader).count(), 1);
    let ids: HashSet<String> = participants.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids, (0..10).map(|i| i.to_string()).collect::<HashSet<_>>());
    one_leader(&checker).await;
    for s in &selectors {
        s.close().await;
    }
    checker.verify();
    fx.close().await;
}
