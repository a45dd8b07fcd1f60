//! Our own `LeaderLatch` and `LeaderObserver` tests, past Curator's: fencing tokens across leaders,
//! `lost()` under every error and retry policy, 100 latches on one framework without a herd,
//! the CURATOR-696 rule on an expired session, an observer following the leader, and bad input.

use std::sync::Arc;
use std::time::Duration;

use curator_core::EventStream;
use curator_core::RetryNTimes;
use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{LatchEvent, Leader, LeaderLatch, LeaderObserver, Leadership, LockLost};
use curator_test::{eventually, expire_session, four_letter_word, ChaosProxy, TestingServer, Timing};
use tests::leadership::{close_latch, next_event, LeadershipChecker, STABLE};
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::{
    builder, children, client, connected, init_tracing, packets_received, proxied_with_states, unique_path, wait_for,
    Fixture,
};

fn shared() -> String {
    TestingServer::shared().connect_string()
}

fn deadline() -> Duration {
    Timing::new().deadline()
}

async fn next_term(events: &mut EventStream<LatchEvent>) -> Leadership {
    match next_event(events).await {
        LatchEvent::IsLeader(term) => term,
        other => panic!("expected IsLeader, got {other:?}"),
    }
}

async fn next_loss(events: &mut EventStream<LatchEvent>) -> LockLost {
    match next_event(events).await {
        LatchEvent::NotLeader(reason) => reason,
        other => panic!("expected NotLeader, got {other:?}"),
    }
}

/// Waits until the server lists a watch on `node` (`wchp`): the leader's lock monitor has sent
/// its exists+watch. A test that cuts the connection waits for this first: a request that
/// zookeeper-client has queued but not written when its connection drops is answered only when
/// the session ends, and a monitor waiting on it hears of the suspension that late.
async fn watched(connect_string: &str, node: &str) {
    let listed = || async { four_letter_word(connect_string, "wchp").await.expect("wchp").contains(node) };
    assert!(eventually(deadline(), listed).await, "no watch on {node}");
}

/// Waits until the observer shows a leader for which `check` holds; returns it.
async fn observed(observer: &mut LeaderObserver, check: impl Fn(&Option<Leader>) -> bool) -> Option<Leader> {
    tokio::time::timeout(deadline(), async {
        loop {
            let now = observer.current();
            if check(&now) {
                return now;
            }
            observer.changed().await.expect("the observer runs");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the observer never showed the expected leader; last {:?}", observer.current()))
}

/// Five latches on five sessions hand leadership on, by closing and by stepping down, 15
/// times: every new term's fencing token is larger than the last, the terms never overlap
/// (each `IsLeader` comes after the previous leader's term ended), and the events of each
/// latch alternate `IsLeader` / `NotLeader`. The leadership checker agrees, and finds one
/// leader (the last to step down, leading again: the only latch left) once the handoffs stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_grow_with_each_new_leader() {
    init_tracing();
    let path = unique_path("tokens");
    let checker = LeadershipChecker::new();
    let mut fws = Vec::new();
    let mut latches = Vec::new();
    for i in 0..5 {
        let fw = client(&shared()).await;
        let latch = LeaderLatch::new(&fw, &path, format!("p{i}")).unwrap();
        checker.record_latch(&latch, &format!("p{i}"));
        fws.push(fw);
        latches.push(latch);
    }
    let log: Arc<std::sync::Mutex<Vec<(usize, bool, i64)>>> = Arc::default();
    for (i, latch) in latches.iter().enumerate() {
        let log = log.clone();
        latch.add_listener(move |event| {
            let entry = match event {
                LatchEvent::IsLeader(term) => (i, true, term.fencing_token()),
                LatchEvent::NotLeader(_) => (i, false, 0),
                other => panic!("unexpected event {other:?}"),
            };
            log.lock().unwrap().push(entry);
        });
        latch.start().unwrap();
        latch.ready().await.unwrap();
    }
    let mut tokens = Vec::new();
    let mut open: Vec<bool> = vec![true; 5];
    for round in 0..15 {
        let live: Vec<usize> = (0..5).filter(|&i| open[i]).collect();
        assert!(eventually(deadline(), || async { live.iter().any(|&i| latches[i].has_leadership()) }).await);
        let leader = *live.iter().find(|&&i| latches[i].has_leadership()).expect("someone leads");
        let term = latches[leader].leadership().expect("it leads");
        assert_eq!(live.iter().filter(|&&i| latches[i].has_leadership()).count(), 1, "one leader");
        assert_eq!(term.participant_id(), format!("p{leader}"));
        tokens.push(term.fencing_token());
        assert!(checker.recorded(&format!("p{leader}"), deadline()).await);
        if round % 3 == 2 && live.len() > 1 {
            close_latch(&checker, &format!("p{leader}"), &latches[leader]).await;
            open[leader] = false;
        } else {
            latches[leader].step_down().await.unwrap();
        }
    }
    // The last step down made a new leader: it is the one leader, and its token counts too.
    let last = checker.await_one_leader(deadline(), STABLE).await;
    let last = last.unwrap_or_else(|| panic!("one leader after the handoffs: {:#}", checker.report()));
    let last = latches.iter().find(|l| l.id() == last).and_then(|l| l.leadership()).expect("the last leader leads");
    tokens.push(last.fencing_token());
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens grow: {tokens:?}");
    for (i, latch) in latches.iter().enumerate() {
        if open[i] {
            close_latch(&checker, &format!("p{i}"), latch).await;
        }
    }
    // Listener queues drain after the closes: every IsLeader (with its token) was seen, and
    // each latch alternated.
    assert!(
        eventually(deadline(), || async { log.lock().unwrap().iter().filter(|e| e.1).count() == tokens.len() }).await
    );
    let log = log.lock().unwrap().clone();
    for i in 0..5 {
        let mine: Vec<bool> = log.iter().filter(|e| e.0 == i).map(|e| e.1).collect();
        assert!(mine.windows(2).all(|w| w[0] != w[1]), "latch {i} alternates: {mine:?}");
        assert!(mine.first().copied().unwrap_or(true), "latch {i} starts with IsLeader");
    }
    let leader_tokens: Vec<i64> = log.iter().filter(|e| e.1).map(|e| e.2).collect();
    let mut sorted = leader_tokens.clone();
    sorted.sort();
    assert_eq!(sorted, tokens);
    let report = checker.verify();
    assert_eq!(report.terms, tokens.len(), "{report:#}");
    for fw in fws {
        fw.close().await;
    }
}

/// `Leadership::lost()` resolves, and `NotLeader` is published with the same reason, when the
/// leader's session expires, under every error and retry policy (policies.rs). Under
/// `Standard` the reason may be `Suspended` (the connection dropped first); under `Session` it
/// is `SessionLost`. The latch then leads again on its new session, with a larger token (under
/// `Standard`, perhaps after a term with its old node on the old session, which the client can
/// get back onto for a moment before the server ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_resolves_on_expiry_under_every_policy() {
    init_tracing();
    let server = TestingServer::shared();
    let runs = COMBINATIONS.iter().map(|&(policy, retry)| async move {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let latch = LeaderLatch::new(&fw, &unique_path("lost-expiry"), "me").unwrap();
        let mut events = latch.events();
        latch.start().unwrap();
        latch.ready().await.unwrap();
        let term = next_term(&mut events).await;
        let info = fw.session().await.unwrap().client().session().clone();
        expire_session(&server.connect_string(), &info).await.unwrap();
        let reason = tokio::time::timeout(deadline(), term.lost()).await.expect("lost() resolves");
        match policy {
            ErrorPolicy::Standard => {
                assert!(
                    matches!(reason, LockLost::Suspended | LockLost::SessionLost),
                    "{policy:?} {retry:?}: {reason:?}"
                )
            }
            ErrorPolicy::Session => assert_eq!(reason, LockLost::SessionLost, "{retry:?}"),
            other => panic!("unexpected policy {other:?}"),
        }
        assert!(!term.is_held());
        assert_eq!(next_loss(&mut events).await, reason);
        // Under Standard the client may get back onto the old session for a moment before the
        // server ends it (expire_session takes the session over, then closes it): the latch then
        // leads again with its old node, and loses that term too, before its new session.
        let again = loop {
            let next = next_term(&mut events).await;
            if next.fencing_token() != term.fencing_token() {
                break next;
            }
            assert_eq!(policy, ErrorPolicy::Standard, "{retry:?}: led again with the old node");
            assert_eq!(next.path(), term.path());
            next_loss(&mut events).await;
        };
        assert!(again.fencing_token() > term.fencing_token(), "{policy:?} {retry:?}");
        assert_ne!(again.path(), term.path());
        latch.close().await;
        fw.close().await;
    });
    futures::future::join_all(runs).await;
}

/// A cut connection (the session survives): under `Standard` the term ends (`Suspended`) and
/// the latch leads again once reconnected, with the same node (as Curator 5.4+); under
/// `Session` nothing happens.
/// A connection silent for longer than the session timeout ends the term under both policies
/// (`Suspended` first under `Standard`, `SessionLost` under `Session`), and the latch leads
/// again on a new session. Every error and retry policy combination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_resolves_on_cut_under_every_policy() {
    init_tracing();
    let server = TestingServer::shared();
    let runs = COMBINATIONS.iter().map(|&(policy, retry)| async move {
        let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
        let fw = framework_with(&proxy.connect_string(), policy, retry, Timing::new().session_timeout()).await;
        let path = unique_path("lost-cut");
        let latch = LeaderLatch::new(&fw, &path, "me").unwrap();
        let mut events = latch.events();
        latch.start().unwrap();
        latch.ready().await.unwrap();
        let term = next_term(&mut events).await;
        watched(&server.connect_string(), term.path()).await;

        // A short cut.
        proxy.cut();
        match policy {
            ErrorPolicy::Standard => {
                let reason = tokio::time::timeout(deadline(), term.lost()).await.expect("lost() resolves");
                assert_eq!(reason, LockLost::Suspended, "{retry:?}");
                assert_eq!(next_loss(&mut events).await, LockLost::Suspended);
                let again = next_term(&mut events).await;
                assert_eq!(again.path(), term.path(), "{retry:?}: the same node leads again");
                assert_eq!(again.fencing_token(), term.fencing_token());
                assert_eq!(children(&fw, &path).await.len(), 1);
            }
            ErrorPolicy::Session => {
                // The reconnection is on the same session: the term goes on.
                assert!(
                    eventually(deadline(), || async { fw.connection_state().is_connected() }).await,
                    "{retry:?}: reconnected"
                );
                assert!(tokio::time::timeout(Duration::from_millis(300), term.lost()).await.is_err());
                assert!(latch.has_leadership());
            }
            other => panic!("unexpected policy {other:?}"),
        }

        // Silence for longer than the session timeout.
        let term = latch.await_leadership_timeout(deadline()).await.unwrap().expect("leads");
        proxy.pause();
        let reason = tokio::time::timeout(deadline(), term.lost()).await.expect("lost() resolves");
        let expected = if policy == ErrorPolicy::Standard { LockLost::Suspended } else { LockLost::SessionLost };
        assert_eq!(reason, expected, "{policy:?} {retry:?}");
        assert_eq!(next_loss(&mut events).await, expected);
        assert!(!latch.has_leadership());
        // The client presumes the session lost after a session timeout without a connection
        // (under `Standard`, the latch keeps its node until then).
        let mut states = fw.connection_state_watch();
        let lost = states.wait_for(|s| s.state == ConnectionState::Lost);
        tokio::time::timeout(deadline(), lost).await.expect("the session is lost").expect("framework open");
        proxy.pass();
        let again = next_term(&mut events).await;
        assert!(again.fencing_token() > term.fencing_token());
        assert_ne!(again.path(), term.path());
        latch.close().await;
        fw.close().await;
    });
    futures::future::join_all(runs).await;
}

/// Under `ErrorPolicy::Standard`, a leader whose connection is cut for less than the session
/// timeout hears `NotLeader(Suspended)` and, reconnected on the same session, leads again with
/// the same node: the same path and fencing token (its node stayed first, so nobody else led
/// meanwhile). A second latch on the path never leads meanwhile; it leads once the first
/// closes. Curator 5.4+ does the same (CURATOR-644/645: `LeaderLatch.handleStateChange` keeps
/// its node on `RECONNECTED` and checks again). Before, the latch deleted its node at the
/// suspension and joined again at the end of the line: the second latch led, and the first
/// heard no `IsLeader` (this test timed out waiting for it). The leadership checker sees
/// three terms (a, a again with the same token, b) and no overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_cut_leads_again_with_the_same_node() {
    init_tracing();
    let (proxy, fw_a, mut states) = proxied_with_states().await;
    let fw_b = client(&shared()).await;
    let path = unique_path("short-cut");
    let checker = LeadershipChecker::new();
    let a = LeaderLatch::new(&fw_a, &path, "a").unwrap();
    checker.record_latch(&a, "a");
    let mut events_a = a.events();
    a.start().unwrap();
    a.ready().await.unwrap();
    let first = next_term(&mut events_a).await;
    watched(&shared(), first.path()).await;
    let b = LeaderLatch::new(&fw_b, &path, "b").unwrap();
    checker.record_latch(&b, "b");
    let mut events_b = b.events();
    b.start().unwrap();
    b.ready().await.unwrap();
    let session = fw_a.session().await.unwrap().id();

    // Cut, and keep the server out of reach until the leader has heard of the suspension.
    proxy.set_reject(true);
    proxy.cut();
    assert_eq!(next_loss(&mut events_a).await, LockLost::Suspended);
    assert!(!a.has_leadership());
    assert_eq!(a.our_path().as_deref(), Some(first.path()), "the node is kept while suspended");
    proxy.set_reject(false);
    wait_for(&mut states, ConnectionState::Reconnected, |e| !e.new_session).await;

    let again = next_term(&mut events_a).await;
    assert_eq!(again.path(), first.path());
    assert_eq!(again.fencing_token(), first.fencing_token());
    assert_eq!(again.node().session_id, session);
    assert!(again.is_held() && !first.is_held(), "a new term; the old one stays lost");
    assert!(a.has_leadership());
    assert!(!b.has_leadership());
    // The node was never deleted (same czxid), so b's node was never first.
    let stat = fw_b.check_exists().for_path(first.path()).await.unwrap().expect("the leader's node exists");
    assert_eq!(stat.czxid, first.fencing_token());
    assert_eq!(children(&fw_b, &path).await.len(), 2);
    assert!(tokio::time::timeout(Duration::from_millis(300), events_b.next()).await.is_err(), "b never led");
    assert_eq!(checker.await_one_leader(deadline(), STABLE).await.as_deref(), Some("a"), "{:#}", checker.report());

    close_latch(&checker, "a", &a).await;
    let term_b = next_term(&mut events_b).await;
    assert!(term_b.fencing_token() > again.fencing_token());
    close_latch(&checker, "b", &b).await;
    let report = checker.verify();
    assert_eq!(report.terms, 3, "{report:#}");
    fw_b.close().await;
    fw_a.close().await;
}

/// While a suspended latch waits for the connection with its node kept (under `Standard`),
/// `step_down()` changes nothing (it does not lead: it keeps its place) and `close()` deletes
/// the node: the close returns once the retry policy (a short one here) gives up on the
/// connection, and the guaranteed delete finishes in the background once it is back. Nothing
/// is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_down_and_close_while_suspended() {
    init_tracing();
    let proxy = ChaosProxy::start(&shared()).await.unwrap();
    let fw_a =
        connected(builder(&proxy.connect_string()).retry_policy(RetryNTimes::new(1, Duration::from_millis(100)))).await;
    let fw_b = client(&shared()).await;
    let path = unique_path("suspended-close");
    let a = LeaderLatch::new(&fw_a, &path, "a").unwrap();
    let mut events = a.events();
    a.start().unwrap();
    a.ready().await.unwrap();
    let first = next_term(&mut events).await;
    watched(&shared(), first.path()).await;
    proxy.set_reject(true);
    proxy.cut();
    assert_eq!(next_loss(&mut events).await, LockLost::Suspended);
    a.step_down().await.unwrap();
    assert_eq!(a.our_path().as_deref(), Some(first.path()), "a step down keeps the node");
    a.close().await;
    assert_eq!(a.our_path(), None);
    proxy.set_reject(false);
    assert!(eventually(deadline(), || async { children(&fw_b, &path).await.is_empty() }).await);
    assert!(tokio::time::timeout(deadline(), events.next()).await.unwrap().is_none(), "nothing more: the stream ends");
    fw_b.close().await;
    fw_a.close().await;
}

/// Under `ErrorPolicy::Standard`, a leader whose connection is silent for longer than the
/// session timeout hears `NotLeader(Suspended)`; its session expires on the server, so the
/// other latch leads, with a larger token. Once the connection is back (on a new session) the
/// first latch joins again with a new node, behind the new leader (its old node is gone), and
/// leads with a still larger token when that one closes. The leadership checker sees a's first
/// term end (at the suspension) before b's began: no overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_cut_lets_the_next_latch_lead() {
    init_tracing();
    let (proxy, fw_a, mut states) = proxied_with_states().await;
    let fw_b = client(&shared()).await;
    let path = unique_path("long-cut");
    let checker = LeadershipChecker::new();
    let a = LeaderLatch::new(&fw_a, &path, "a").unwrap();
    checker.record_latch(&a, "a");
    let mut events_a = a.events();
    a.start().unwrap();
    a.ready().await.unwrap();
    let first = next_term(&mut events_a).await;
    watched(&shared(), first.path()).await;
    let b = LeaderLatch::new(&fw_b, &path, "b").unwrap();
    checker.record_latch(&b, "b");
    let mut events_b = b.events();
    b.start().unwrap();
    b.ready().await.unwrap();

    proxy.pause();
    assert_eq!(next_loss(&mut events_a).await, LockLost::Suspended);
    // The server expires a's session: its node goes, and b leads.
    let term_b = next_term(&mut events_b).await;
    assert!(term_b.fencing_token() > first.fencing_token());
    proxy.pass();
    wait_for(&mut states, ConnectionState::Reconnected, |e| e.new_session).await;

    assert!(eventually(deadline(), || async { a.our_path().is_some_and(|p| p != first.path()) }).await);
    assert!(eventually(deadline(), || async { children(&fw_b, &path).await.len() == 2 }).await);
    assert!(fw_b.check_exists().for_path(first.path()).await.unwrap().is_none(), "the old node is gone");
    assert!(b.has_leadership());
    assert!(!a.has_leadership());
    assert!(tokio::time::timeout(Duration::from_millis(300), events_a.next()).await.is_err(), "a waits in line");
    assert_eq!(checker.await_one_leader(deadline(), STABLE).await.as_deref(), Some("b"), "{:#}", checker.report());

    close_latch(&checker, "b", &b).await;
    let again = next_term(&mut events_a).await;
    assert_eq!(a.our_path().as_deref(), Some(again.path()));
    assert!(again.fencing_token() > term_b.fencing_token());
    close_latch(&checker, "a", &a).await;
    let report = checker.verify();
    assert_eq!(report.terms, 3, "{report:#}");
    fw_b.close().await;
    fw_a.close().await;
}

/// Curator 5.7's rule (CURATOR-696): a node left by an expired session never makes a leader.
/// The test deletes nothing: the leader's session expires while the latch leads, and the
/// latch joins again on its new session. Its node from the old session never yields a second
/// `IsLeader`: the next term is on a new node (new path, larger token), and the old node is
/// gone from the server by then. The latch's events alternate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_session_node_never_makes_a_leader() {
    init_tracing();
    let fx = Fixture::shared_with(|b| b.connection_state_error_policy(ErrorPolicy::Session)).await;
    let path = unique_path("curator-696");
    let latch = LeaderLatch::new(&fx.fw, &path, "me").unwrap();
    let mut events = latch.events();
    latch.start().unwrap();
    latch.ready().await.unwrap();
    let old = next_term(&mut events).await;
    let watcher = client(&fx.connect_string()).await;
    let info = fx.fw.session().await.unwrap().client().session().clone();
    expire_session(&fx.connect_string(), &info).await.unwrap();
    assert_eq!(next_loss(&mut events).await, LockLost::SessionLost);
    let new = next_term(&mut events).await;
    assert_ne!(new.path(), old.path(), "the old node never leads again");
    assert!(new.fencing_token() > old.fencing_token());
    assert_eq!(new.node().session_id, fx.fw.session().await.unwrap().id(), "the term is on the current session");
    assert!(watcher.check_exists().for_path(old.path()).await.unwrap().is_none(), "the old node is gone");
    assert_eq!(children(&watcher, &path).await.len(), 1);
    assert!(tokio::time::timeout(Duration::from_millis(300), events.next()).await.is_err(), "nothing more");
    latch.close().await;
    watcher.close().await;
    fx.close().await;
}

/// 100 latches, each in a task of its own, on one framework: exactly one leads; when it closes,
/// the next in start order leads, and so on for 30 handoffs. No herd: a handoff costs a few
/// requests (the leader's delete; the listing of the waiter that has just become second, with
/// its watches on the new leader and on its own node), counted by the server, not one per
/// waiter. (A waiter far back watches one node, the one before its predecessor; one with at
/// most 8 nodes ahead watches them all: section 8.3 of the architecture.) The leadership
/// checker sees the terms one after the other, with growing tokens, and one leader after the
/// handoffs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_latches_hand_over_in_order_without_a_herd() {
    init_tracing();
    let fx = Fixture::own().await;
    let fw = fx.fw.clone();
    let path = unique_path("hundred");
    let checker = LeadershipChecker::new();
    let mut latches = Vec::new();
    for i in 0..100 {
        let latch = LeaderLatch::new(&fw, &path, format!("{i:03}")).unwrap();
        checker.record_latch(&latch, &format!("{i:03}"));
        latch.start().unwrap();
        latch.ready().await.unwrap();
        latches.push(latch);
    }
    // Each latch waits in a task of its own.
    let mut waits: Vec<_> = latches
        .iter()
        .cloned()
        .map(|latch| tokio::spawn(async move { latch.await_leadership().await.map(|t| t.fencing_token()) }))
        .collect();
    let leaders = |latches: &[LeaderLatch]| latches.iter().filter(|l| l.has_leadership()).count();
    assert!(eventually(deadline(), || async { latches[0].has_leadership() }).await);
    assert_eq!(leaders(&latches), 1);
    // Let every waiter set its watches before counting.
    assert!(eventually(deadline(), || async { children(&fw, &path).await.len() == 100 }).await);
    // ... that is, until the server's request count stands still (pings aside).
    let last = std::sync::atomic::AtomicU64::new(0);
    let connect = fx.connect_string();
    assert!(
        eventually(deadline(), || async {
            let now = packets_received(&connect).await;
            now.saturating_sub(last.swap(now, std::sync::atomic::Ordering::SeqCst)) <= 1
        })
        .await
    );
    const HANDOFFS: usize = 30;
    let before = packets_received(&fx.connect_string()).await;
    let mut tokens = Vec::new();
    let mut token_of = |i: usize, wait: Result<Result<i64, CuratorError>, _>| {
        tokens.push(wait.expect("the wait task runs").unwrap_or_else(|e| panic!("latch {i}: {e}")));
    };
    for i in 0..HANDOFFS {
        // The leader's own wait has seen its term before it closes (else it would see the close).
        token_of(i, (&mut waits[i]).await);
        close_latch(&checker, &format!("{i:03}"), &latches[i]).await;
        let next = latches[i + 1].clone();
        assert!(
            eventually(deadline(), || async { next.has_leadership() }).await,
            "latch {} leads after {i} closed",
            i + 1
        );
        assert_eq!(leaders(&latches[i + 1..]), 1, "exactly one leader after handoff {i}");
    }
    let after = packets_received(&fx.connect_string()).await;
    let per_handoff = (after - before) as f64 / HANDOFFS as f64;
    eprintln!("{per_handoff:.2} requests per handoff with {} waiters", 100 - HANDOFFS);
    // A herd would be one listing per waiter (about 70 to 100 per handoff). Pings add a few.
    assert!(per_handoff <= 5.0, "{per_handoff} requests per handoff");
    token_of(HANDOFFS, (&mut waits[HANDOFFS]).await);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens grow in start order");
    let one = checker.await_one_leader(deadline(), STABLE).await;
    assert_eq!(one, Some(format!("{HANDOFFS:03}")), "{:#}", checker.report());
    for latch in &latches[HANDOFFS..] {
        close_latch(&checker, latch.id(), latch).await;
    }
    assert!(children(&fw, &path).await.is_empty(), "no node left behind");
    // Not every latch leads: one may close before its turn comes.
    let report = checker.verify();
    assert!(report.terms > HANDOFFS, "{report:#}");
    fx.close().await;
}

/// A `LeaderObserver` follows the leader through a close, a step down and a session expiry, for a
/// latch election and for a mutex-based one (`lock-` nodes), with the leader's id and token;
/// it shows `None` when nobody takes part, and starts on a path that does not exist yet. The
/// leadership checker sees the latches' four terms, none overlapping (but for b's, whose
/// session is expired by force while it leads: excused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_follows_close_step_down_and_expiry() {
    init_tracing();
    let server = TestingServer::shared();
    let watcher_fw = client(&server.connect_string()).await;
    let path = unique_path("observe");
    let mut observer = LeaderObserver::new(&watcher_fw, &path).unwrap();
    observer.start().unwrap();
    observer.ready().await.unwrap();
    assert_eq!(observed(&mut observer, |l| l.is_none()).await, None);

    let fw_a = client(&server.connect_string()).await;
    let fw_b = connected(builder(&server.connect_string()).connection_state_error_policy(ErrorPolicy::Session)).await;
    let checker = LeadershipChecker::new();
    let a = LeaderLatch::new(&fw_a, &path, "a").unwrap();
    let b = LeaderLatch::new(&fw_b, &path, "b").unwrap();
    checker.record_latch(&a, "a");
    checker.record_latch(&b, "b");
    a.start().unwrap();
    a.ready().await.unwrap();
    let term_a = a.await_leadership_timeout(deadline()).await.unwrap().expect("a leads");
    b.start().unwrap();
    b.ready().await.unwrap();
    let seen = observed(&mut observer, |l| l.as_ref().is_some_and(|l| l.id == "a")).await.unwrap();
    assert_eq!(seen, Leader { id: "a".into(), token: term_a.fencing_token(), path: term_a.path().to_string() });

    // Step down: b leads, then a again after b's expiry. a's term is recorded (its listener
    // runs a little after the event) and its end noted before it steps down: a full parallel
    // run once recorded a's start late, just before b's, and the checker saw an overlap.
    assert!(checker.recorded("a", deadline()).await, "a's term is recorded before it steps down");
    checker.stopping("a", "step_down()");
    a.step_down().await.unwrap();
    let term_b = b.await_leadership_timeout(deadline()).await.unwrap().expect("b leads");
    let seen = observed(&mut observer, |l| l.as_ref().is_some_and(|l| l.id == "b")).await.unwrap();
    assert_eq!(seen.token, term_b.fencing_token());

    // Expiry of b's session: a leads; b joins again behind it.
    let info = fw_b.session().await.unwrap().client().session().clone();
    assert!(checker.recorded("b", deadline()).await, "b's term is recorded before its session expires");
    checker.forced_expiry("b");
    expire_session(&server.connect_string(), &info).await.unwrap();
    let term_a2 = a.await_leadership_timeout(deadline()).await.unwrap().expect("a leads again");
    let seen = observed(&mut observer, |l| l.as_ref().is_some_and(|l| l.id == "a")).await.unwrap();
    assert_eq!(seen.token, term_a2.fencing_token());
    assert!(seen.token > term_b.fencing_token());

    // Close: b leads; close b too: nobody.
    assert!(eventually(deadline(), || async { children(&watcher_fw, &path).await.len() == 2 }).await);
    assert_eq!(checker.await_one_leader(deadline(), STABLE).await.as_deref(), Some("a"), "{:#}", checker.report());
    close_latch(&checker, "a", &a).await;
    let term_b2 = b.await_leadership_timeout(deadline()).await.unwrap().expect("b leads");
    let seen = observed(&mut observer, |l| l.as_ref().is_some_and(|l| l.id == "b")).await.unwrap();
    assert_eq!(seen.token, term_b2.fencing_token());
    close_latch(&checker, "b", &b).await;
    assert_eq!(observed(&mut observer, |l| l.is_none()).await, None);
    let report = checker.verify();
    assert_eq!(report.terms, 4, "{report:#}");

    // A mutex-based election on the same path (lock- nodes, as a LeaderSelector's).
    let mutex = curator_recipes::InterProcessMutex::new(&fw_a, &path).unwrap();
    let guard = mutex.acquire().await.unwrap();
    let seen = observed(&mut observer, |l| l.is_some()).await.unwrap();
    assert_eq!(seen.token, guard.fencing_token());
    assert!(seen.path.contains("-lock-"));
    guard.release().await.unwrap();
    assert_eq!(observed(&mut observer, |l| l.is_none()).await, None);

    observer.close().await;
    for fw in [fw_a, fw_b, watcher_fw] {
        fw.close().await;
    }
}

/// Bad input is a typed error, never a panic: bad paths (latch and observer), an id over the
/// data limit, and calls out of order (start twice, step down before start, wait before start
/// or after close), each with its lifecycle variant.
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    init_tracing();
    let fw: CuratorFramework = client(&shared()).await;
    for bad in ["", "relative", "/trailing/", "/a//b", "/a/./b", "/nul\u{0}"] {
        assert!(
            matches!(LeaderLatch::new(&fw, bad, "id"), Err(CuratorError::InvalidPath { .. })),
            "latch path {bad:?}"
        );
        assert!(
            matches!(LeaderObserver::new(&fw, bad), Err(CuratorError::InvalidPath { .. })),
            "observer path {bad:?}"
        );
    }
    let huge = "x".repeat(2 * 1024 * 1024);
    assert!(matches!(LeaderLatch::new(&fw, "/ok", huge), Err(CuratorError::DataTooLarge { .. })));

    let latch = LeaderLatch::new(&fw, &unique_path("bad-input"), "id").unwrap();
    assert!(matches!(latch.step_down().await, Err(CuratorError::NotStarted { .. })));
    assert!(matches!(latch.await_leadership().await, Err(CuratorError::NotStarted { .. })));
    assert!(!latch.has_leadership());
    latch.start().unwrap();
    latch.ready().await.unwrap();
    assert!(matches!(latch.start(), Err(CuratorError::AlreadyStarted { .. })));
    latch.await_leadership_timeout(deadline()).await.unwrap().expect("leads");
    latch.close().await;
    latch.close().await;
    assert!(matches!(latch.await_leadership().await, Err(CuratorError::AlreadyClosed { .. })));
    assert!(matches!(latch.step_down().await, Err(CuratorError::AlreadyClosed { .. })));
    assert!(latch.leadership().is_none());
    assert_eq!(latch.our_path(), None);
    fw.close().await;
}

/// Dropping the last handle of a latch (leading or in line) leaves no node behind; so does
/// dropping a latch whose create is in flight. The waiter, dropped first, never leads.
#[tokio::test]
async fn dropping_leaves_no_node() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("drop");
    let checker = LeadershipChecker::new();
    let leader = LeaderLatch::new(&fw, &path, "leader").unwrap();
    checker.record_latch(&leader, "leader");
    leader.start().unwrap();
    leader.ready().await.unwrap();
    leader.await_leadership_timeout(deadline()).await.unwrap().expect("leads");
    let waiter = LeaderLatch::new(&fw, &path, "waiter").unwrap();
    checker.record_latch(&waiter, "waiter");
    waiter.start().unwrap();
    waiter.ready().await.unwrap();
    assert!(checker.recorded("leader", deadline()).await);
    assert_eq!(children(&fw, &path).await.len(), 2);
    drop(waiter);
    drop(leader);
    let starting = LeaderLatch::new(&fw, &path, "starting").unwrap();
    starting.start().unwrap();
    // One turn of the scheduler: its task sends its create; then the latch goes.
    tokio::task::yield_now().await;
    drop(starting);
    assert!(eventually(deadline(), || async { children(&fw, &path).await.is_empty() }).await);
    let report = checker.verify();
    assert_eq!(report.terms, 1, "only the leader led: {report:#}");
    fw.close().await;
}

/// A participant's id and the leader read through `participants()` / `leader()`: ids from node
/// data, in line order, the leader first; one leader for the leadership checker.
#[tokio::test]
async fn participants_in_line_order() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("participants");
    let checker = LeadershipChecker::new();
    let mut latches = Vec::new();
    for id in ["one", "two", "three"] {
        let latch = LeaderLatch::new(&fw, &path, id).unwrap();
        checker.record_latch(&latch, id);
        latch.start().unwrap();
        latch.ready().await.unwrap();
        latches.push(latch);
    }
    latches[0].await_leadership_timeout(deadline()).await.unwrap().expect("leads");
    let participants = latches[2].participants().await.unwrap();
    let ids: Vec<(&str, bool)> = participants.iter().map(|p| (p.id.as_str(), p.is_leader)).collect();
    assert_eq!(ids, vec![("one", true), ("two", false), ("three", false)]);
    assert_eq!(latches[1].leader().await.unwrap().map(|p| p.id), Some("one".to_string()));
    assert_eq!(checker.await_one_leader(deadline(), STABLE).await.as_deref(), Some("one"), "{:#}", checker.report());
    for latch in &latches {
        assert!(latch.our_path().is_some_and(|p| p.contains("-latch-")));
        close_latch(&checker, latch.id(), latch).await;
    }
    checker.verify();
    fw.close().await;
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<LeaderLatch>();
    is::<Leadership>();
    is::<LeaderObserver>();
    is::<LatchEvent>();
    let _ = Retry::Default;
}

/// The core lifecycle (issue 27, item 4): a second `close()` is fine (Curator's throws, and ours
/// returned `IllegalState`), as is closing a latch that was never started; a closed latch
/// refuses a start with a typed error, and `await_leadership` (and `ready`) say why it cannot
/// lead.
#[tokio::test]
async fn close_is_idempotent_and_lifecycle_errors_are_typed() {
    init_tracing();
    let fw = client(&shared()).await;
    let path = unique_path("latch-life");
    let latch = LeaderLatch::new(&fw, &path, "a").unwrap();
    let r = latch.await_leadership().await;
    assert!(matches!(r, Err(CuratorError::NotStarted { what: "LeaderLatch" })), "{r:?}");
    assert!(matches!(latch.ready().await, Err(CuratorError::NotStarted { what: "LeaderLatch" })));
    latch.start().unwrap();
    latch.ready().await.unwrap();
    assert!(matches!(latch.start(), Err(CuratorError::AlreadyStarted { .. })));
    latch.await_leadership().await.unwrap();
    latch.close().await;
    latch.close().await;
    assert!(children(&fw, &path).await.is_empty(), "the first close deleted our node");
    assert!(matches!(latch.start(), Err(CuratorError::AlreadyClosed { .. })));
    assert!(matches!(latch.await_leadership().await, Err(CuratorError::AlreadyClosed { .. })));
    let never = LeaderLatch::new(&fw, &path, "b").unwrap();
    never.close().await;
    assert!(matches!(never.ready().await, Err(CuratorError::AlreadyClosed { what: "LeaderLatch" })));
    fw.close().await;
}

/// Issue 27, item 3 (and item 2's convention): a latch whose node the server refuses (the
/// election path allows reading only) starts (`start()` only spawns its task), and `ready()`
/// reports `NoAuth`, promptly, with the latch closed; before issue 27 `start()` returned `Ok`
/// and the latch tried again for ever without ever leading (an ERROR line the only sign).
/// The framework's unhandled-error listeners hear the refusal too, as Curator's do
/// (`TestLeaderAcls`, ported in `leader_curator_latch::acl_error_with_leader`); after issue 27
/// they heard nothing of it (issue 40 item 5). Under every error and retry policy.
#[tokio::test]
async fn a_refused_first_join_is_reported_by_ready() {
    init_tracing();
    let connect = shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&connect, policy, retry).await;
        let path = unique_path("latch-noauth");
        tests::zk::read_only_node(&fw, &path).await;
        let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
        fw.add_unhandled_error_listener(move |_: &str, err: &CuratorError| drop(tx.send(err.clone())));
        let latch = LeaderLatch::new(&fw, &path, "refused").unwrap();
        let started = std::time::Instant::now();
        latch.start().expect("start only spawns the task");
        let r = tokio::time::timeout(deadline(), latch.ready()).await.expect("ready returns");
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {r:?}");
        let told = tokio::time::timeout(deadline(), heard.recv()).await;
        assert!(matches!(told, Ok(Some(CuratorError::NoAuth { .. }))), "{policy:?}/{retry:?}: listeners: {told:?}");
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        assert_eq!(latch.state(), curator_recipes::LatchState::Closed);
        assert!(!latch.has_leadership());
        assert!(matches!(latch.await_leadership().await, Err(CuratorError::AlreadyClosed { .. })));
        assert!(matches!(latch.ready().await, Err(CuratorError::NoAuth { .. })), "the outcome stays");
        latch.close().await;
        fw.close().await;
    }
}

/// Issue 27, item 2: an observer whose first read the server refuses (no READ on the election
/// path) starts, and `ready()` reports `NoAuth` within a second, with the observer closed (a
/// second start is `AlreadyClosed`; `changed()` ends). Before, the refusal was only told by
/// `wait_initialized()` while the observer went on trying. Under every error and retry policy.
/// (No Curator counterpart: the observer is ours.)
#[tokio::test]
async fn a_refused_first_read_is_reported_by_the_observers_ready() {
    use curator_core::zk::{Acl, AuthId, Permission};
    init_tracing();
    let connect = shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&connect, policy, retry).await;
        let path = unique_path("observe-noauth");
        let no_read = Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN;
        let no_read = vec![Acl::new(no_read, AuthId::anyone())];
        fw.create().with_acl(no_read).for_path(&path, Vec::new()).await.unwrap();
        let mut observer = LeaderObserver::new(&fw, &path).unwrap();
        let started = std::time::Instant::now();
        observer.start().expect("start only spawns the task");
        let r = tokio::time::timeout(deadline(), observer.ready()).await.expect("ready returns");
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {r:?}");
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        assert!(matches!(observer.start(), Err(CuratorError::AlreadyClosed { what: "LeaderObserver" })));
        let changed = tokio::time::timeout(deadline(), observer.changed()).await.expect("changed returns");
        assert_eq!(changed, None, "{policy:?}/{retry:?}: the observer is closed");
        observer.close().await;
        observer.close().await;
        fw.close().await;
    }
}
