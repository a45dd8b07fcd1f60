//! A leader proclaims (issue 31 item 7, etcd's `Election.Proclaim` / `Election.Observe`): the
//! holder of a term publishes a value with [`Leadership::proclaim`], a write guarded by the term,
//! and every [`LeaderObserver::observe`] stream yields each new leader and each new value; a
//! deposed leader's proclaim is refused with `OwnNodeLost`, after an expiry of its session and
//! after a proxy cut, under both error policies and both retry policies. The Java interop case
//! (a Curator `LeaderLatch` on the same path) is in `leader_interop.rs`.

use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{LeaderLatch, LeaderObserver, Leadership, Proclamation, PROCLAIMED_NODE_NAME};
use curator_test::{expire_session, ChaosProxy, TestingServer, Timing};
use futures::{Stream, StreamExt};
use tests::fixture::{builder, connected};
use tests::policies::{framework, with_policies, Retry, COMBINATIONS};
use tests::{init_tracing, unique_path};

/// Reads `stream` until an item satisfies `want`, and returns every item read, that one last;
/// panics after the deadline or when the stream ends.
async fn until(
    stream: &mut (impl Stream<Item = Proclamation> + Unpin),
    what: &str,
    want: impl Fn(&Proclamation) -> bool,
) -> Vec<Proclamation> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        let item = next.unwrap_or_else(|_| panic!("never observed {what}; saw {seen:?}"));
        let item = item.unwrap_or_else(|| panic!("the stream ended before {what}; saw {seen:?}"));
        let done = want(&item);
        seen.push(item);
        if done {
            return seen;
        }
    }
}

/// Whether `p` shows the term `term` with the value `value`.
fn shows(p: &Proclamation, term: &Leadership, value: &[u8]) -> bool {
    p.leader.token == term.fencing_token() && p.value.as_deref() == Some(value)
}

/// A started, ready observer of `path`.
async fn observer(fw: &CuratorFramework, path: &str) -> LeaderObserver {
    let observer = LeaderObserver::new(fw, path).unwrap();
    observer.start().unwrap();
    observer.ready().await.unwrap();
    observer
}

/// A latch on `path` for `id`, started, and its first term.
async fn lead(fw: &CuratorFramework, path: &str, id: &str) -> (LeaderLatch, Leadership) {
    let latch = LeaderLatch::new(fw, path, id).unwrap();
    latch.start().unwrap();
    let term = tokio::time::timeout(Timing::new().deadline(), latch.await_leadership()).await.unwrap().unwrap();
    (latch, term)
}

/// The proclaim of `value` by a deposed leader, tried again while it fails with an error that
/// decides nothing; the error it ends with.
async fn refused_proclaim(term: &Leadership, value: &[u8]) -> CuratorError {
    let deadline = tokio::time::Instant::now() + Timing::new().deadline();
    loop {
        match term.proclaim(value.to_vec()).await {
            Ok(()) => panic!("a deposed leader's proclaim committed"),
            Err(err) if err.is_retryable() || matches!(err, CuratorError::OutcomeUnknown { .. }) => {
                assert!(tokio::time::Instant::now() < deadline, "the proclaim never decided: {err}");
            }
            Err(err) => return err,
        }
    }
}

/// Observers see each proclaimed value, in order, with the term's token and id; a burst merges
/// but never reorders, and ends on the last value; the same value proclaimed again is a new
/// item (a new revision). Follows etcd's `TestV3ElectionObserve`
/// (tests/integration/v3election_grpc_test.go: ten proclaims, observed in order) and
/// `TestElectionWait` (tests/integration/v3_election_test.go: every follower sees each leader's
/// value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_see_each_proclaimed_value_in_order() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let fw = connected(builder(&server.connect_string())).await;
    let path = unique_path("proclaim-order");
    let (first, second) = (observer(&fw, &path).await, observer(&fw, &path).await);
    let (mut a, mut b) = (Box::pin(first.observe()), Box::pin(second.observe()));
    let (latch, term) = lead(&fw, &path, "leader-1").await;

    // The new leader first, without a value.
    for stream in [&mut a, &mut b] {
        let seen = until(stream, "the leader", |p| p.leader.token == term.fencing_token()).await;
        let last = seen.last().unwrap();
        assert_eq!((last.leader.id.as_str(), last.value.as_deref(), last.revision), ("leader-1", None, 0));
    }
    // One at a time: every value is seen, in order.
    let mut revision = 0;
    for i in 0..5 {
        let value = format!("value-{i}");
        term.proclaim(value.clone()).await.unwrap();
        let mut now = 0;
        for stream in [&mut a, &mut b] {
            let seen = until(stream, &value, |p| shows(p, &term, value.as_bytes())).await;
            assert_eq!(seen.len(), 1, "an item other than {value}: {seen:?}");
            assert!(seen[0].revision > revision, "{seen:?}");
            now = seen[0].revision;
        }
        revision = now;
    }
    // The same value again is a new proclamation.
    term.proclaim("value-4").await.unwrap();
    let again = until(&mut a, "value-4 again", |p| shows(p, &term, b"value-4")).await;
    assert!(again[0].revision > revision, "{again:?}");
    // A burst: merged perhaps, never reordered, ending on the last.
    for i in 0..10 {
        term.proclaim(format!("burst-{i:02}")).await.unwrap();
    }
    for stream in [&mut a, &mut b] {
        let seen = until(stream, "burst-09", |p| shows(p, &term, b"burst-09")).await;
        let values: Vec<String> = seen.iter().map(|p| String::from_utf8(p.value.clone().unwrap()).unwrap()).collect();
        let mut sorted = values.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(values, sorted, "out of order or repeated");
        assert!(seen.windows(2).all(|w| w[0].revision < w[1].revision), "{seen:?}");
        assert!(values.iter().all(|v| v.starts_with("burst-")), "{values:?}");
    }
    // A stream made now starts with the current value.
    let current = until(&mut Box::pin(second.observe()), "the current value", |_| true).await;
    assert!(shows(&current[0], &term, b"burst-09"), "{current:?}");
    // The value node is where the docs say, in the documented form.
    let data = fw.get_data().for_path(&format!("{path}/{PROCLAIMED_NODE_NAME}")).await.unwrap();
    assert_eq!(data, format!("{}:burst-09", term.fencing_token()).into_bytes());

    // Closing the observer ends its streams.
    first.close().await;
    assert!(tokio::time::timeout(Timing::new().deadline(), a.next()).await.unwrap().is_none());
    latch.close().await;
    second.close().await;
    fw.close().await;
}

/// A new leader is seen at once without a value (the old leader's value is not shown as its),
/// then with its first value; the old leader, having closed, cannot proclaim (`NotHeld`).
/// Follows etcd's `TestElectionFailover` (tests/integration/v3_election_test.go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_is_seen_with_its_first_value() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let fw = connected(builder(&server.connect_string())).await;
    let other = connected(builder(&server.connect_string())).await;
    let path = unique_path("proclaim-next");
    let watching = observer(&fw, &path).await;
    let mut stream = Box::pin(watching.observe());
    let (first, term) = lead(&fw, &path, "first").await;
    term.proclaim("first-value").await.unwrap();
    until(&mut stream, "first-value", |p| shows(p, &term, b"first-value")).await;

    let second = LeaderLatch::new(&other, &path, "second").unwrap();
    second.start().unwrap();
    second.ready().await.unwrap();
    first.close().await;
    let next = tokio::time::timeout(Timing::new().deadline(), second.await_leadership()).await.unwrap().unwrap();
    let seen = until(&mut stream, "the second leader", |p| p.leader.token == next.fencing_token()).await;
    let last = seen.last().unwrap();
    assert_eq!((last.leader.id.as_str(), last.value.as_deref()), ("second", None), "{seen:?}");
    assert!(next.fencing_token() > term.fencing_token());

    let err = term.proclaim("late").await.unwrap_err();
    assert!(matches!(err, CuratorError::NotHeld { .. }), "{err:?}");
    next.proclaim("second-value").await.unwrap();
    let seen = until(&mut stream, "second-value", |p| shows(p, &next, b"second-value")).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].leader.id, "second");

    second.close().await;
    watching.close().await;
    fw.close().await;
    other.close().await;
}

/// A deposed leader's proclaim is refused with `OwnNodeLost` (its node's path) and writes
/// nothing, after its session was expired from outside (etcd's `TestElectionFailover` revokes
/// the leader's lease; Curator's `TestLeaderLatch.testSessionErrorPolicy` expires it); the next
/// leader's value is the one observed. Under both error policies and both retry policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposed_leader_proclaim_refused_after_expiry() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let watcher = connected(builder(&server.connect_string())).await;
    for (policy, retry) in COMBINATIONS {
        let what = format!("{policy:?} {retry:?}");
        let fw = framework(&server.connect_string(), policy, retry).await;
        let other = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
        let path = unique_path("proclaim-expired");
        let watching = observer(&watcher, &path).await;
        let mut stream = Box::pin(watching.observe());
        let (old, term) = lead(&fw, &path, "old").await;
        term.proclaim("old-value").await.unwrap();
        until(&mut stream, "old-value", |p| shows(p, &term, b"old-value")).await;
        let next_latch = LeaderLatch::new(&other, &path, "next").unwrap();
        next_latch.start().unwrap();
        next_latch.ready().await.unwrap();

        let info = fw.session().await.unwrap().client().session().clone();
        expire_session(&server.connect_string(), &info).await.unwrap();
        let err = refused_proclaim(&term, b"deposed").await;
        assert!(matches!(&err, CuratorError::OwnNodeLost { path, .. } if path == term.path()), "{what}: {err:?}");
        let next =
            tokio::time::timeout(Timing::new().deadline(), next_latch.await_leadership()).await.unwrap().unwrap();
        next.proclaim("next-value").await.unwrap();
        let seen = until(&mut stream, "next-value", |p| shows(p, &next, b"next-value")).await;
        assert!(seen.iter().all(|p| p.value.as_deref() != Some(&b"deposed"[..])), "{what}: {seen:?}");
        // Still refused, now that the next leader leads, and never written.
        let err = refused_proclaim(&term, b"deposed").await;
        assert!(matches!(err, CuratorError::OwnNodeLost { .. }), "{what}: {err:?}");
        let data = watcher.get_data().for_path(&format!("{path}/{PROCLAIMED_NODE_NAME}")).await.unwrap();
        assert_eq!(data, format!("{}:next-value", next.fencing_token()).into_bytes(), "{what}");

        old.close().await;
        next_latch.close().await;
        watching.close().await;
        fw.close().await;
        other.close().await;
    }
    watcher.close().await;
}

/// A deposed leader's proclaim is refused with `OwnNodeLost` after a proxy cut its connection
/// until its session expired and the next leader took over, and still after it reconnects;
/// observers see the next leader's value. The cut is Curator's `TestLeaderLatch.testLostConnection`
/// (there by stopping the server). Under both error policies and both retry policies, each
/// combination on an election of its own, run side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposed_leader_proclaim_refused_after_proxy_cut() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    let watcher = connected(builder(&server.connect_string())).await;
    let session = Timing::new().multiple(0.5).session_timeout();
    let cases = COMBINATIONS.map(|(policy, retry)| cut_case(&server, &watcher, policy, retry, session));
    futures::future::join_all(cases).await;
    watcher.close().await;
}

/// One combination of [`deposed_leader_proclaim_refused_after_proxy_cut`].
async fn cut_case(
    server: &TestingServer,
    watcher: &CuratorFramework,
    policy: ErrorPolicy,
    retry: Retry,
    session: Duration,
) {
    let what = format!("{policy:?} {retry:?}");
    let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
    let b = builder(&proxy.connect_string()).session_timeout(session).connection_timeout(session / 2);
    let fw = connected(with_policies(b, policy, retry)).await;
    let other = connected(builder(&server.connect_string())).await;
    let path = unique_path("proclaim-cut");
    let watching = observer(watcher, &path).await;
    let mut stream = Box::pin(watching.observe());
    let (old, term) = lead(&fw, &path, "old").await;
    term.proclaim("old-value").await.unwrap();
    until(&mut stream, "old-value", |p| shows(p, &term, b"old-value")).await;
    let next_latch = LeaderLatch::new(&other, &path, "next").unwrap();
    next_latch.start().unwrap();
    next_latch.ready().await.unwrap();

    proxy.set_reject(true);
    proxy.cut();
    let next = tokio::time::timeout(Timing::new().deadline(), next_latch.await_leadership()).await.unwrap().unwrap();
    // The old leader was told before the next one was made (HeldNode's promise), so this is
    // refused without a request, while still cut off.
    assert!(!term.is_held(), "{what}: the deposed term still looks held");
    let err = term.proclaim("deposed").await.unwrap_err();
    assert!(matches!(&err, CuratorError::OwnNodeLost { path, .. } if path == term.path()), "{what}: {err:?}");
    next.proclaim("next-value").await.unwrap();
    until(&mut stream, "next-value", |p| shows(p, &next, b"next-value")).await;

    proxy.set_reject(false);
    fw.block_until_connected(Timing::new().deadline()).await.unwrap();
    let err = refused_proclaim(&term, b"deposed").await;
    assert!(matches!(err, CuratorError::OwnNodeLost { .. }), "{what}: {err:?}");
    let data = watcher.get_data().for_path(&format!("{path}/{PROCLAIMED_NODE_NAME}")).await.unwrap();
    assert_eq!(data, format!("{}:next-value", next.fencing_token()).into_bytes(), "{what}");

    old.close().await;
    next_latch.close().await;
    watching.close().await;
    fw.close().await;
    other.close().await;
}
