//! `LeaderSelector` (issue 15): the leadership function's future is dropped when the term may be
//! lost (session expiry, a cut connection, under both error policies) and the leader is told
//! before anyone else leads; fencing tokens grow; auto-requeue, interrupt, close and drop; bad
//! input. Tests that expire something use a server of their own; proxies sit in front of the
//! shared one. Every selector records its terms in the leadership checker
//! (`tests::leadership`, through its leadership function): each test ends with a clean report,
//! and with exactly one stable leader where the election stays up before the selectors close.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_core::{ConnectionState, CuratorError, CuratorFramework, ErrorPolicy};
use curator_recipes::{LeaderSelector, Leadership, LockLost, SelectorEvent, TermEnd};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use futures::future::BoxFuture;
use tests::leadership::{next_event, one_leader, LeadershipChecker};
use tests::policies::{framework, framework_with, Retry, COMBINATIONS};
use tests::{children, init_tracing, unique_path, wait_children, wait_for, Fixture};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What a leadership function reports: its start, and (from a drop guard) the moment its
/// future was dropped or returned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Note {
    Started { who: String, token: i64, at: Instant },
    Dropped { who: String, token: i64, at: Instant },
}

/// Sends [`Note::Dropped`] when the leadership function's future goes.
struct DropGuard {
    tx: UnboundedSender<Note>,
    who: String,
    token: i64,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.tx.send(Note::Dropped { who: self.who.clone(), token: self.token, at: Instant::now() });
    }
}

/// A leadership function that reports its start and runs until its future is dropped.
fn until_dropped(who: &str, tx: UnboundedSender<Note>) -> impl Fn(Leadership) -> BoxFuture<'static, ()> + Send + Sync {
    let who = who.to_string();
    move |leadership: Leadership| {
        let (tx, who) = (tx.clone(), who.clone());
        Box::pin(async move {
            let token = leadership.fencing_token();
            let _guard = DropGuard { tx: tx.clone(), who: who.clone(), token };
            let _ = tx.send(Note::Started { who, token, at: Instant::now() });
            std::future::pending::<()>().await;
        })
    }
}

/// A selector with id `who` on `path` running [`until_dropped`], its terms recorded in
/// `checker`.
fn selector(
    checker: &LeadershipChecker,
    fw: &CuratorFramework,
    path: &str,
    who: &str,
    tx: &UnboundedSender<Note>,
) -> LeaderSelector {
    LeaderSelector::builder(fw, path, checker.recording(who, until_dropped(who, tx.clone()))).id(who).build().unwrap()
}

async fn expect_took(events: &mut curator_core::EventStream<SelectorEvent>) -> Leadership {
    match next_event(events).await {
        SelectorEvent::Took(leadership) => leadership,
        other => panic!("expected Took, got {other:?}"),
    }
}

async fn expect_ended(events: &mut curator_core::EventStream<SelectorEvent>) -> (i64, TermEnd) {
    match next_event(events).await {
        SelectorEvent::Ended { token, end } => (token, end),
        other => panic!("expected Ended, got {other:?}"),
    }
}

async fn next_note(notes: &mut UnboundedReceiver<Note>) -> Note {
    tokio::time::timeout(Timing::new().deadline(), notes.recv()).await.expect("a note within the deadline").unwrap()
}

/// The notes sent so far.
fn drain(notes: &mut UnboundedReceiver<Note>) -> Vec<Note> {
    std::iter::from_fn(|| notes.try_recv().ok()).collect()
}

/// The leader's session expires, under each error policy: its function's future is dropped,
/// `Ended` says the term may be lost (under `Session`: `SessionLost`), and the waiting
/// participant leads with a larger fencing token. (A forced expiry deletes the node on the
/// server at once, so no client can be told first: the order of the two participants is checked
/// with the connection cuts below, where the session outlives the warning.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_dropped_when_the_session_expires() {
    init_tracing();
    let server = TestingServer::start().await.unwrap();
    for policy in [ErrorPolicy::Standard, ErrorPolicy::Session] {
        let path = unique_path("sel-expiry");
        let checker = LeadershipChecker::new();
        let a_fw = framework(&server.connect_string(), policy, Retry::Default).await;
        let b_fw = framework(&server.connect_string(), policy, Retry::Default).await;
        let (tx, mut notes) = unbounded_channel();
        let a = selector(&checker, &a_fw, &path, "a", &tx);
        let mut a_events = a.events();
        a.start().unwrap();
        a.ready().await.unwrap();
        let term = expect_took(&mut a_events).await;
        assert!(matches!(next_note(&mut notes).await, Note::Started { who, .. } if who == "a"));
        let b = selector(&checker, &b_fw, &path, "b", &tx);
        let mut b_events = b.events();
        b.start().unwrap();
        b.ready().await.unwrap();
        wait_children(&a_fw, &path, 2).await;

        let info = a_fw.session().await.unwrap().client().session().clone();
        checker.forced_expiry("a");
        expire_session(&server.connect_string(), &info).await.unwrap();

        let (token, end) = expect_ended(&mut a_events).await;
        assert_eq!(token, term.fencing_token());
        match policy {
            ErrorPolicy::Standard => {
                assert!(matches!(end, TermEnd::Lost(LockLost::Suspended | LockLost::SessionLost)), "{end:?}")
            }
            ErrorPolicy::Session => assert_eq!(end, TermEnd::Lost(LockLost::SessionLost)),
            other => panic!("unexpected policy {other:?}"),
        }
        // The guard went with the future, before Ended was published. (b may have started
        // already: the server deleted a's node at the forced expiry.)
        let seen = drain(&mut notes);
        assert!(
            seen.iter().any(|n| matches!(n, Note::Dropped { who, token: t, .. } if who == "a" && *t == token)),
            "{seen:?}"
        );
        assert!(!a.has_leadership());
        assert!(!term.is_held());
        let next = expect_took(&mut b_events).await;
        assert!(next.fencing_token() > token, "the token grows across the handover");
        if !seen.iter().any(|n| matches!(n, Note::Started { who, .. } if who == "b")) {
            assert!(matches!(next_note(&mut notes).await, Note::Started { who, .. } if who == "b"));
        }
        assert_eq!(one_leader(&checker).await, "b", "{policy:?}");
        a.close().await;
        b.close().await;
        wait_children(&b_fw, &path, 0).await;
        let report = checker.verify();
        assert_eq!(report.terms, 2, "{policy:?}: {report:#}");
        a_fw.close().await;
        b_fw.close().await;
    }
}

/// The leader's connection is cut, under every combination of error and retry policy.
/// A short cut (the client reconnects at once to the same session): under `Standard` the
/// function's future is dropped at the suspension (`Lost(Suspended)`) and the other participant
/// leads once our node is deleted; under `Session` the term goes on. A cut long enough for the
/// session to expire: the future is dropped (at the suspension under `Standard`, at the loss
/// under `Session`) before the other participant's function starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_dropped_when_the_connection_is_cut() {
    init_tracing();
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let path = unique_path("sel-cut");
        let checker = LeadershipChecker::new();
        let proxy = ChaosProxy::start(&server.connect_string()).await.unwrap();
        let a_fw = framework_with(&proxy.connect_string(), policy, retry, Duration::from_secs(2)).await;
        let b_fw = framework(&server.connect_string(), policy, retry).await;
        let mut a_states = a_fw.connection_state_stream();
        let (tx, mut notes) = unbounded_channel();
        let a = selector(&checker, &a_fw, &path, "a", &tx);
        let mut a_events = a.events();
        a.start().unwrap();
        a.ready().await.unwrap();
        let mut term = expect_took(&mut a_events).await;
        assert!(matches!(next_note(&mut notes).await, Note::Started { who, .. } if who == "a"));
        let b = selector(&checker, &b_fw, &path, "b", &tx);
        let mut b_events = b.events();
        b.start().unwrap();
        b.ready().await.unwrap();
        wait_children(&b_fw, &path, 2).await;

        // A short cut.
        proxy.cut();
        wait_for(&mut a_states, ConnectionState::Reconnected, |e| !e.new_session).await;
        match policy {
            ErrorPolicy::Standard => {
                let (token, end) = expect_ended(&mut a_events).await;
                assert_eq!(
                    (token, end),
                    (term.fencing_token(), TermEnd::Lost(LockLost::Suspended)),
                    "{policy:?} {retry:?}"
                );
                assert!(matches!(notes.try_recv(), Ok(Note::Dropped { who, .. }) if who == "a"));
                assert!(!a.has_leadership());
                // Our node is deleted once reconnected: the other participant leads.
                let b_term = expect_took(&mut b_events).await;
                assert!(b_term.fencing_token() > token);
                assert!(matches!(next_note(&mut notes).await, Note::Started { who, .. } if who == "b"));
                // Back to a leading `a` for the long cut.
                assert!(a.requeue().unwrap());
                b.interrupt_leadership();
                assert_eq!(expect_ended(&mut b_events).await.1, TermEnd::Interrupted);
                assert!(matches!(next_note(&mut notes).await, Note::Dropped { who, .. } if who == "b"));
                term = expect_took(&mut a_events).await;
                assert!(term.fencing_token() > b_term.fencing_token());
                assert!(matches!(next_note(&mut notes).await, Note::Started { who, .. } if who == "a"));
                assert!(b.requeue().unwrap());
                wait_children(&b_fw, &path, 2).await;
            }
            ErrorPolicy::Session => {
                assert!(a.has_leadership(), "the Session policy keeps the term through a short cut");
                assert!(a_events.try_next().is_none());
                assert!(notes.try_recv().is_err(), "the future still runs");
            }
            other => panic!("unexpected policy {other:?}"),
        }

        // A cut until the session is gone.
        proxy.set_reject(true);
        proxy.cut();
        let (token, end) = expect_ended(&mut a_events).await;
        let expected = match policy {
            ErrorPolicy::Standard => LockLost::Suspended,
            ErrorPolicy::Session => LockLost::SessionLost,
            other => panic!("unexpected policy {other:?}"),
        };
        assert_eq!((token, end), (term.fencing_token(), TermEnd::Lost(expected)), "{policy:?} {retry:?}");
        let seen = drain(&mut notes);
        let [Note::Dropped { who, at: dropped_at, .. }] = seen.as_slice() else {
            panic!("{policy:?} {retry:?}: a's future was dropped: {seen:?}")
        };
        assert_eq!(who, "a");
        let b_term = expect_took(&mut b_events).await;
        assert!(b_term.fencing_token() > token);
        let Note::Started { who, at: started_at, .. } = next_note(&mut notes).await else { panic!("b started") };
        assert_eq!(who, "b");
        assert!(*dropped_at < started_at, "a's future was dropped before b's function started");
        proxy.pass();
        assert_eq!(one_leader(&checker).await, "b", "{policy:?} {retry:?}");
        a.close().await;
        b.close().await;
        wait_children(&b_fw, &path, 0).await;
        let report = checker.verify();
        let terms = if policy == ErrorPolicy::Standard { 4 } else { 2 };
        assert_eq!(report.terms, terms, "{policy:?} {retry:?}: {report:#}");
        a_fw.close().await;
        b_fw.close().await;
    }
}

/// Marks a leadership function as running until it is dropped, returned or not.
struct Inside(Arc<AtomicBool>);

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Terms never overlap and fencing tokens grow with every term: three auto-requeuing
/// selectors on three sessions record their terms from inside the leadership function, and in
/// the leadership checker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_grow_and_terms_never_overlap() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("sel-tokens");
    let checker = LeadershipChecker::new();
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut fws = Vec::new();
    let mut selectors = Vec::new();
    for i in 0..3 {
        let fw = fx.client().await;
        let (inside, overlaps, tokens) = (inside.clone(), overlaps.clone(), tokens.clone());
        let recorded = checker.recording(&format!("p{i}"), move |leadership: Leadership| {
            // Recorded as the function is called, as the checker records the term: a close can
            // drop the term's future before its first poll.
            tokens.lock().unwrap().push(leadership.fencing_token());
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            async move {
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.store(true, Ordering::SeqCst);
                }
                // A function whose future is dropped (a close in the middle of its term) is no
                // longer inside either: the guard says so when it is dropped with the future.
                let _inside = Inside(inside);
                tokio::task::yield_now().await;
            }
        });
        let s = LeaderSelector::builder(&fw, &path, recorded).id(format!("p{i}")).auto_requeue(true).build().unwrap();
        s.start().unwrap();
        s.ready().await.unwrap();
        selectors.push(s);
        fws.push(fw);
    }
    assert!(eventually(Timing::new().deadline(), || async { tokens.lock().unwrap().len() >= 30 }).await);
    for s in &selectors {
        s.close().await;
    }
    let tokens = tokens.lock().unwrap().clone();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens grow: {tokens:?}");
    assert!(!overlaps.load(Ordering::SeqCst), "two terms overlapped");
    wait_children(&fx.fw, &path, 0).await;
    let report = checker.verify();
    assert_eq!(report.terms, tokens.len(), "{report:#}");
    for fw in fws {
        fw.close().await;
    }
    fx.close().await;
}

/// Auto-requeue takes leadership again after every term, whether set on the builder or later
/// with `auto_requeue()`; without it the selector is idle after a term until `requeue()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_requeue_takes_leadership_again() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("sel-requeue");
    let s = LeaderSelector::builder(&fx.fw, &path, |_leadership: Leadership| async {}).build().unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    let first = expect_took(&mut events).await;
    assert_eq!(expect_ended(&mut events).await, (first.fencing_token(), TermEnd::Returned));
    // Idle now: a requeue is taken.
    assert!(s.requeue().unwrap());
    let second = expect_took(&mut events).await;
    assert!(second.fencing_token() > first.fencing_token());
    assert_eq!(expect_ended(&mut events).await.1, TermEnd::Returned);
    s.auto_requeue();
    assert!(s.requeue().unwrap());
    let mut last = second.fencing_token();
    for _ in 0..3 {
        let term = expect_took(&mut events).await;
        assert!(term.fencing_token() > last);
        last = term.fencing_token();
        assert_eq!(expect_ended(&mut events).await, (last, TermEnd::Returned));
    }
    s.close().await;
    wait_children(&fx.fw, &path, 0).await;

    let built =
        LeaderSelector::builder(&fx.fw, &path, |_leadership: Leadership| async {}).auto_requeue(true).build().unwrap();
    let mut events = built.events();
    built.start().unwrap();
    built.ready().await.unwrap();
    for _ in 0..3 {
        expect_took(&mut events).await;
        assert_eq!(expect_ended(&mut events).await.1, TermEnd::Returned);
    }
    built.close().await;
    wait_children(&fx.fw, &path, 0).await;
    fx.close().await;
}

/// `interrupt_leadership` drops the running future (`Ended { Interrupted }`) and deletes our
/// node; the selector is idle until requeued; an interrupt while not leading does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_drops_the_future() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("sel-interrupt");
    let checker = LeadershipChecker::new();
    let (tx, mut notes) = unbounded_channel();
    let s = selector(&checker, &fx.fw, &path, "a", &tx);
    let mut events = s.events();
    s.interrupt_leadership(); // not started: nothing to interrupt
    s.start().unwrap();
    s.ready().await.unwrap();
    let term = expect_took(&mut events).await;
    assert!(matches!(next_note(&mut notes).await, Note::Started { .. }));
    assert!(s.has_leadership());
    assert_eq!(s.leadership().map(|l| l.fencing_token()), Some(term.fencing_token()));
    s.interrupt_leadership();
    assert_eq!(expect_ended(&mut events).await, (term.fencing_token(), TermEnd::Interrupted));
    assert!(matches!(notes.try_recv(), Ok(Note::Dropped { .. })));
    assert!(!s.has_leadership());
    assert!(s.leadership().is_none());
    wait_children(&fx.fw, &path, 0).await;
    // Ended is published before the node goes; the term's own watch says Released after.
    assert_eq!(term.lost_watch().borrow().as_ref(), Some(&LockLost::Released));
    s.interrupt_leadership(); // idle: nothing happens
    assert!(s.requeue().unwrap());
    let again = expect_took(&mut events).await;
    assert!(again.fencing_token() > term.fencing_token());
    s.close().await;
    assert_eq!(expect_ended(&mut events).await.1, TermEnd::Interrupted);
    checker.verify();
    fx.close().await;
}

/// `close()` while leading drops the future and has deleted our node when it returns; while
/// waiting in line it abandons the wait and leaves no node; dropping a leading selector does
/// the same in the background. Event streams end after close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_and_drop_leave_no_node() {
    init_tracing();
    let fx = Fixture::shared().await;
    let other = fx.client().await;
    let path = unique_path("sel-close");
    let checker = LeadershipChecker::new();
    let (tx, mut notes) = unbounded_channel();
    let a = selector(&checker, &fx.fw, &path, "a", &tx);
    let mut a_events = a.events();
    a.start().unwrap();
    a.ready().await.unwrap();
    expect_took(&mut a_events).await;
    let b = selector(&checker, &other, &path, "b", &tx);
    b.start().unwrap();
    b.ready().await.unwrap();
    wait_children(&fx.fw, &path, 2).await;

    // Waiting in line.
    b.close().await;
    wait_children(&fx.fw, &path, 1).await;
    assert!(a.has_leadership());
    assert_eq!(one_leader(&checker).await, "a");
    b.close().await; // again: nothing to do
    assert!(matches!(b.requeue(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })));

    // Leading.
    assert!(matches!(next_note(&mut notes).await, Note::Started { .. }));
    a.close().await;
    assert_eq!(expect_ended(&mut a_events).await.1, TermEnd::Interrupted);
    assert!(a_events.next().await.is_none(), "the stream ends with the selector");
    assert!(matches!(notes.try_recv(), Ok(Note::Dropped { .. })));
    assert!(children(&fx.fw, &path).await.is_empty(), "the node is gone when close returns");

    // Dropped while leading.
    let c = selector(&checker, &other, &path, "c", &tx);
    let mut c_events = c.events();
    c.start().unwrap();
    c.ready().await.unwrap();
    expect_took(&mut c_events).await;
    assert!(matches!(next_note(&mut notes).await, Note::Started { .. }));
    drop(c);
    assert_eq!(expect_ended(&mut c_events).await.1, TermEnd::Interrupted);
    assert!(matches!(next_note(&mut notes).await, Note::Dropped { who, .. } if who == "c"));
    wait_children(&fx.fw, &path, 0).await;

    // Closed before it started.
    let d = selector(&checker, &other, &path, "d", &tx);
    d.close().await;
    assert!(matches!(d.start(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })));
    let report = checker.verify();
    assert_eq!(report.terms, 2, "a and c led, one after the other: {report:#}");
    other.close().await;
    fx.close().await;
}

/// A leadership function that panics ends its term as if it returned: the node is deleted and
/// an auto-requeuing selector leads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_function_ends_its_term() {
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("sel-panic");
    let s = LeaderSelector::builder(&fx.fw, &path, |_leadership: Leadership| async { panic!("the leader fails") })
        .auto_requeue(true)
        .build()
        .unwrap();
    let mut events = s.events();
    s.start().unwrap();
    s.ready().await.unwrap();
    for _ in 0..2 {
        let term = expect_took(&mut events).await;
        assert_eq!(expect_ended(&mut events).await, (term.fencing_token(), TermEnd::Returned));
    }
    s.close().await;
    wait_children(&fx.fw, &path, 0).await;
    fx.close().await;
}

/// A leadership function that panics at once, with auto-requeue (issue 26 item 9): each failed
/// term is followed by the framework retry policy's pause before the selector gets back in line,
/// and once the policy gives up the selector stays idle (reported to the unhandled-error
/// listeners as `GaveUp` naming the selector's path; before: `IllegalState`) until `requeue()`.
/// Before, it ran about 1,000 terms a second for ever. Tried with
/// both error policies and both retry policies of `tests::policies`: the patient one (at least
/// 50 ms between terms) makes a bounded number of terms in the window; the short one
/// (`RetryNTimes(1, 100ms)`) makes exactly two and gives up. No Curator counterpart: Curator
/// requeues at once after a `takeLeadership` that throws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_function_backs_off_before_requeueing() {
    init_tracing();
    const WINDOW: Duration = Duration::from_millis(1500);
    let server = TestingServer::shared();
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&server.connect_string(), policy, retry).await;
        let reports = Arc::new(Mutex::new(Vec::new()));
        let seen = reports.clone();
        fw.add_unhandled_error_listener(move |message: &str, err: &CuratorError| {
            seen.lock().unwrap().push((format!("{message}: {err}"), err.clone()));
        });
        let path = unique_path("sel-panic-backoff");
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let s = LeaderSelector::builder(&fw, &path, move |_leadership: Leadership| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { panic!("the leader fails") }
        })
        .auto_requeue(true)
        .build()
        .unwrap();
        s.start().unwrap();
        s.ready().await.unwrap();
        // A fixed window of observation, not a synchronisation: the count is the measurement.
        tokio::time::sleep(WINDOW).await;
        let made = calls.load(Ordering::SeqCst);
        let label = format!("{policy:?}/{retry:?}");
        match retry {
            Retry::Default => {
                // Pauses of at least 50 ms: at most one term per 50 ms, and the first.
                let bound = (WINDOW.as_millis() / 50 + 1) as usize;
                assert!((2..=bound).contains(&made), "{label}: {made} terms in {WINDOW:?}, not 2..={bound}");
            }
            Retry::Short => {
                assert_eq!(made, 2, "{label}: one term, one retry, then the policy gives up");
                let reported = eventually(Timing::new().deadline(), || {
                    let n = reports.lock().unwrap().len();
                    async move { n == 1 }
                })
                .await;
                assert!(reported, "{label}: the give-up is reported once: {:?}", reports.lock().unwrap());
                let gave_up = reports.lock().unwrap()[0].1.clone();
                assert!(
                    matches!(&gave_up, CuratorError::GaveUp { path: p, .. } if *p == path),
                    "{label}: reported as {gave_up:?}"
                );
                assert!(s.requeue().unwrap(), "{label}: idle after the policy gave up");
                let again = eventually(Timing::new().deadline(), || {
                    let n = calls.load(Ordering::SeqCst);
                    async move { n > 2 }
                })
                .await;
                assert!(again, "{label}: requeue() gets back in line");
            }
        }
        s.close().await;
        wait_children(&fw, &path, 0).await;
        fw.close().await;
    }
}

/// Bad input gives a typed error: invalid paths, an id over the data limit, starting twice,
/// requeueing before start.
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    init_tracing();
    let fx = Fixture::shared().await;
    for bad in ["", "no-slash", "/trailing/", "/a//b", "/a/./b"] {
        let built = LeaderSelector::builder(&fx.fw, bad, |_l: Leadership| async {}).build();
        assert!(matches!(built, Err(CuratorError::InvalidPath { .. })), "{bad:?}: {built:?}");
    }
    let huge = "x".repeat(2 << 20);
    let built = LeaderSelector::builder(&fx.fw, "/ok", |_l: Leadership| async {}).id(huge).build();
    assert!(matches!(built, Err(CuratorError::DataTooLarge { .. })), "{built:?}");

    let path = unique_path("sel-bad");
    let s = LeaderSelector::builder(&fx.fw, &path, |_l: Leadership| async {}).id("x").build().unwrap();
    assert!(matches!(s.requeue(), Err(CuratorError::NotStarted { .. })));
    assert_eq!(s.id(), "x");
    s.start().unwrap();
    s.ready().await.unwrap();
    assert!(matches!(s.start(), Err(CuratorError::AlreadyStarted { .. })));
    s.close().await;
    assert!(matches!(s.requeue(), Err(CuratorError::AlreadyClosed { .. })));
    fx.close().await;
}

/// Issue 27: participant ids are checked the same way by `LeaderLatch`, `LeaderSelector` and
/// `GroupMember`: an id the caller sets must be one node name (not empty, no `/`, no NUL or
/// other control character, not `.` or `..`), else `InvalidArgument` naming the election's (or
/// group's) path. Before, the latch and the selector accepted all of them and `GroupMember`
/// refused them with `InvalidPath`. An *unset* id still works: the latch writes Curator's
/// empty id, the selector the framework's default data (Curator's `LeaderSelector` and
/// `LeaderLatch` do the same), and both lead.
#[tokio::test]
async fn participant_ids_are_validated_the_same_way_everywhere() {
    use curator_recipes::GroupMember;
    use curator_recipes::LeaderLatch;
    init_tracing();
    let fx = Fixture::shared().await;
    let path = unique_path("ids");
    for bad in ["", "\u{0}", "a\u{0}b", "a/b", "/a", ".", "..", "tab\there"] {
        let latch = LeaderLatch::new(&fx.fw, &path, bad);
        assert!(
            matches!(&latch, Err(CuratorError::InvalidArgument { path: p, .. }) if *p == path),
            "latch {bad:?}: {latch:?}"
        );
        let selector = LeaderSelector::builder(&fx.fw, &path, |_l: Leadership| async {}).id(bad).build();
        assert!(
            matches!(&selector, Err(CuratorError::InvalidArgument { path: p, .. }) if *p == path),
            "selector {bad:?}: {selector:?}"
        );
        let member = GroupMember::builder(&fx.fw, &path, bad).build();
        assert!(
            matches!(&member, Err(CuratorError::InvalidArgument { path: p, .. }) if *p == path),
            "group member {bad:?}: {member:?}"
        );
    }
    assert!(fx.fw.check_exists().for_path(&path).await.unwrap().is_none(), "nothing is created for a bad id");

    // Good ids, and unset ones.
    for good in ["worker-1", "10.0.0.3:7000", "ünïcode"] {
        LeaderLatch::new(&fx.fw, &path, good).expect(good);
        LeaderSelector::builder(&fx.fw, &path, |_l: Leadership| async {}).id(good).build().expect(good);
    }
    let latch = LeaderLatch::builder(&fx.fw, &unique_path("ids-latch")).build().expect("an unset latch id");
    assert_eq!(latch.id(), "", "Curator's default latch id");
    latch.start().unwrap();
    latch.ready().await.unwrap();
    latch.await_leadership_timeout(Timing::new().deadline()).await.unwrap().expect("leads");
    assert_eq!(latch.leader().await.unwrap().map(|p| p.id), Some(String::new()));
    latch.close().await;
    let selector = LeaderSelector::builder(&fx.fw, &unique_path("ids-sel"), |_l: Leadership| async {})
        .build()
        .expect("an unset selector id");
    assert_eq!(selector.id().as_bytes(), fx.fw.default_data(), "the framework's default data, as Curator");
    let mut events = selector.events();
    selector.start().unwrap();
    selector.ready().await.unwrap();
    expect_took(&mut events).await;
    selector.close().await;
    fx.close().await;
}

/// Issue 27 (item 2's convention): a selector whose node the server refuses (the election
/// path allows reading only) starts (`start()` only spawns its run loop), and `ready()` reports
/// `NoAuth`, promptly, with the selector closed; before issue 27 `start()` returned `Ok`, the
/// refusal went only to the unhandled-error listeners and the selector sat idle. Those
/// listeners hear it still (issue 40 item 5: after issue 27 they heard nothing of a refusal of
/// the first attempt, only of later ones). Under every error and retry policy. (As
/// `leader_latch::a_refused_first_join_is_reported_by_ready`; Curator's `LeaderSelector` tells
/// nobody of the refusal, `TestLeaderSelector` has no such case.)
#[tokio::test]
async fn a_refused_first_turn_is_reported_by_ready() {
    init_tracing();
    let fx = Fixture::shared().await;
    for (policy, retry) in COMBINATIONS {
        let fw = framework(&fx.connect_string(), policy, retry).await;
        let path = unique_path("sel-noauth");
        tests::zk::read_only_node(&fw, &path).await;
        let (tx, mut heard) = unbounded_channel();
        fw.add_unhandled_error_listener(move |_: &str, err: &CuratorError| drop(tx.send(err.clone())));
        let s = LeaderSelector::builder(&fw, &path, |_l: Leadership| async {}).id("refused").build().unwrap();
        let started = Instant::now();
        s.start().expect("start only spawns the run loop");
        let r = tokio::time::timeout(Timing::new().deadline(), s.ready()).await.expect("ready returns");
        assert!(matches!(r, Err(CuratorError::NoAuth { .. })), "{policy:?}/{retry:?}: {r:?}");
        let told = tokio::time::timeout(Timing::new().deadline(), heard.recv()).await;
        assert!(matches!(told, Ok(Some(CuratorError::NoAuth { .. }))), "{policy:?}/{retry:?}: listeners: {told:?}");
        assert!(started.elapsed() < tests::at_once(&fw), "{policy:?}/{retry:?}: took {:?}", started.elapsed());
        assert!(!s.has_leadership());
        assert!(matches!(s.requeue(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })), "closed");
        assert!(matches!(s.start(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })), "closed");
        s.close().await;
        s.close().await;
        fw.close().await;
    }
    fx.close().await;
}

/// Issue 27: the selector's lifecycle conditions are the typed variants every started thing
/// uses, naming `LeaderSelector` (before: `IllegalState` strings); a close, first or second,
/// of a started, never-started or closed selector is `Ok`.
#[tokio::test]
async fn lifecycle_errors_are_typed_and_close_is_idempotent() {
    init_tracing();
    let fx = Fixture::shared().await;
    let s =
        LeaderSelector::builder(&fx.fw, &unique_path("sel-life"), |_l: Leadership| async {}).id("x").build().unwrap();
    assert!(matches!(s.requeue(), Err(CuratorError::NotStarted { what: "LeaderSelector" })));
    s.start().unwrap();
    s.ready().await.unwrap();
    assert!(matches!(s.start(), Err(CuratorError::AlreadyStarted { what: "LeaderSelector" })));
    s.close().await;
    s.close().await; // a second close gives the same as the first
    assert!(matches!(s.requeue(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })));
    assert!(matches!(s.start(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })));

    let never = LeaderSelector::builder(&fx.fw, &unique_path("sel-life"), |_l: Leadership| async {}).build().unwrap();
    never.close().await;
    never.close().await;
    assert!(matches!(never.start(), Err(CuratorError::AlreadyClosed { what: "LeaderSelector" })));
    fx.close().await;
}
