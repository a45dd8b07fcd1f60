//! Circuit-breaking connection-state listeners (docs/architecture.md section 3.9) against a
//! real ZooKeeper: a flapping connection reaches the framework's streams and listeners (and the
//! caches, which follow the stream) as one disconnection and one recovery, while locks and leaders, which read the session itself, are
//! told of every suspension and loss as they happen. Every fault is tried under each
//! combination of error policy and retry policy (`tests::policies::COMBINATIONS`), the four at
//! once. The state machine's own tests (Curator's TestCircuitBreaker and
//! TestCircuitBreakingConnectionStateListener) are in curator-core (`breaker_tests.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::{
    CircuitBreakingConnectionStateListener, ConnectionState, ConnectionStateEvent, ConnectionStateStream, CuratorError,
    CuratorFramework, CuratorFrameworkBuilder, ErrorPolicy, RetryForever, RetryNTimes,
};
use curator_recipes::{InterProcessMutex, LeaderLatch, LockLost};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use futures::future::join_all;
use tests::policies::{with_policies, Retry, COMBINATIONS};
use tests::{builder, client, init_tracing, unique_path};
use ConnectionState::{Connected, Lost, Reconnected, Suspended};

/// How long the circuit holds transitions back at a time in the flapping tests.
const HOLD: Duration = Duration::from_millis(1500);

fn deadline() -> Duration {
    Timing::new().deadline()
}

/// Builds `b`, subscribes a stream and a recording listener (both before the start, so that
/// they see `Connected`), starts it and waits for the connection.
async fn started(
    b: CuratorFrameworkBuilder,
) -> (CuratorFramework, ConnectionStateStream, Arc<Mutex<Vec<ConnectionStateEvent>>>) {
    let fw = b.build().expect("valid options");
    let stream = fw.connection_state_stream();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let record = heard.clone();
    fw.add_connection_state_listener(move |_fw, event| record.lock().unwrap().push(event.clone()));
    fw.start().expect("start");
    fw.block_until_connected(deadline()).await.expect("connected");
    (fw, stream, heard)
}

/// Waits on the framework's watch (the session's truth) until `pred` holds.
async fn truth_until(fw: &CuratorFramework, pred: impl FnMut(&ConnectionStateEvent) -> bool) -> ConnectionStateEvent {
    let mut truth = fw.connection_state_watch();
    let seen = tokio::time::timeout(deadline(), async { truth.wait_for(pred).await.map(|now| now.clone()) }).await;
    seen.expect("within the deadline").expect("framework alive")
}

/// Reads `stream` until an event passes `until`, within the deadline; all read so far.
async fn read_until(
    stream: &mut ConnectionStateStream,
    until: impl Fn(&ConnectionStateEvent) -> bool,
) -> Vec<ConnectionStateEvent> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(deadline(), async {
        while let Some(event) = stream.next().await {
            let done = until(&event);
            seen.push(event);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert!(matches!(found, Ok(true)), "never saw the awaited state; saw {:?}", states(&seen));
    seen
}

fn states(events: &[ConnectionStateEvent]) -> Vec<ConnectionState> {
    events.iter().map(|e| e.state).collect()
}

/// Expires the framework's session from outside and waits until it is connected on the next.
async fn expire_and_wait(fw: &CuratorFramework, connect_string: &str) {
    let session = fw.session().await.expect("a session");
    let (generation, info) = (session.generation(), session.client().session().clone());
    drop(session);
    expire_session(connect_string, &info).await.expect("expired");
    truth_until(fw, |e| e.generation > generation && e.state.is_connected()).await;
}

/// Curator's TestLeaderLatch.testWithCircuitBreaker: five latches on one framework whose
/// listeners are behind a circuit; the session is lost and a new one opened three times in a
/// row. The framework's stream and listeners are told Suspended (if the loss began with one),
/// Lost and a new session's Reconnected, not each flap; the truth (the watch, as Curator's
/// `doNotProxy` listener) saw every session; every latch leads again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_latches_ride_out_a_flapping_session() {
    init_tracing();
    let server = TestingServer::start().await.expect("server");
    let runs = COMBINATIONS.map(|(policy, retry)| flapping_latches(server.connect_string(), policy, retry));
    join_all(runs).await;
}

async fn flapping_latches(connect_string: String, policy: ErrorPolicy, retry: Retry) {
    const LOOPS: usize = 3;
    let b = with_policies(builder(&connect_string), policy, retry)
        .connection_state_circuit_breaker(RetryForever::new(HOLD));
    let (fw, mut stream, heard) = started(b).await;
    let base = unique_path("breaker-latches");
    let mut latches = Vec::new();
    for i in 0..5 {
        let latch = LeaderLatch::new(&fw, &format!("{base}/{i}"), format!("latch-{i}")).expect("latch");
        latch.start().expect("start");
        latch.await_leadership_timeout(deadline()).await.expect("no error").expect("leads");
        latches.push(latch);
    }

    let first = fw.session().await.expect("a session").generation();
    for _ in 0..LOOPS {
        expire_and_wait(&fw, &connect_string).await;
    }
    let now = fw.connection_state_watch().borrow().clone();
    assert_eq!(now.generation, first + LOOPS as u64, "{policy:?}/{retry:?}: a session for each loss");

    let seen = read_until(&mut stream, |e| e.state.is_connected() && e.generation == now.generation).await;
    let told: Vec<_> = states(&seen).into_iter().filter(|s| *s != Suspended).collect();
    assert_eq!(told[..3], [Connected, Lost, Reconnected], "{policy:?}/{retry:?}: {:?}", states(&seen));
    let recovered = seen.iter().find(|e| e.state == Reconnected).expect("a reconnection");
    assert!(
        recovered.new_session,
        "{policy:?}/{retry:?}: the recovery is a new session to the listener: {recovered:?}"
    );
    assert!(
        seen.len() < now.seq as usize,
        "{policy:?}/{retry:?}: the circuit held transitions back: told {:?} of {} transitions",
        states(&seen),
        now.seq
    );
    let last_seen = seen.last().expect("events");
    assert!(
        eventually(deadline(), || async { heard.lock().unwrap().last().map(|e| e.seq) == Some(last_seen.seq) }).await,
        "{policy:?}/{retry:?}: the listener was told as the stream"
    );
    assert_eq!(states(&heard.lock().unwrap()), states(&seen), "{policy:?}/{retry:?}: listener and stream agree");

    for latch in &latches {
        let leads = latch.await_leadership_timeout(deadline()).await.expect("no error");
        assert!(leads.is_some(), "{policy:?}/{retry:?}: {} leads again", latch.id());
    }
    for latch in &latches {
        latch.close().await;
    }
    fw.close().await;
}

/// The safety promise under the circuit: a lock acquired while the circuit is open (the
/// listeners are not told of the reconnection yet) is still told it may be lost at the next
/// suspension (`ErrorPolicy::Standard`) or loss (`ErrorPolicy::Session`), exactly as without a
/// circuit, though the stream is not told of that suspension. Each combination runs with and
/// without the circuit; the outcomes must be the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_lock_is_told_at_once_while_the_circuit_is_open() {
    init_tracing();
    let server = TestingServer::start().await.expect("server");
    let runs = COMBINATIONS.into_iter().flat_map(|(policy, retry)| {
        let cs = server.connect_string();
        [true, false].map(move |breaker| lock_under_flaps(cs.clone(), policy, retry, breaker))
    });
    let outcomes = join_all(runs).await;
    for pair in outcomes.chunks(2) {
        assert_eq!(pair[0].1, pair[1].1, "{}: with and without the circuit", pair[0].0);
    }
}

/// One run: what the lock was told at the suspension, and at the loss (if it held on).
async fn lock_under_flaps(
    connect_string: String,
    policy: ErrorPolicy,
    retry: Retry,
    breaker: bool,
) -> (String, Vec<Option<&'static str>>) {
    let name = format!("{policy:?}/{retry:?}");
    let proxy = ChaosProxy::start(&connect_string).await.expect("proxy");
    let mut b = with_policies(builder(&proxy.connect_string()), policy, retry);
    if breaker {
        // Long enough that nothing held comes out during the run.
        b = b.connection_state_circuit_breaker(RetryForever::new(Duration::from_secs(60)));
    }
    let (fw, mut stream, _) = started(b).await;

    // A first flap: with the breaker the circuit opens, the reconnection is held.
    let before = fw.connection_state_watch().borrow().seq;
    proxy.cut();
    let back = truth_until(&fw, |e| e.seq > before && e.state.is_connected()).await;
    assert_eq!(back.state, Reconnected, "{name}: same session");
    let seen = read_until(&mut stream, |e| e.state == Suspended).await;
    assert_eq!(states(&seen), [Connected, Suspended], "{name}");
    if breaker {
        assert!(stream.try_next().is_none(), "{name}: the reconnection is held");
    } else {
        assert_eq!(read_until(&mut stream, |_| true).await[0].state, Reconnected, "{name}");
    }

    // A cut through the proxy is often followed by a few more flaps of its own, which a short
    // retry policy may not outlast: acquire again until held.
    let mutex = InterProcessMutex::new(&fw, &unique_path("breaker-lock")).expect("mutex");
    let guard = tokio::time::timeout(deadline(), async {
        loop {
            match mutex.acquire().await {
                Ok(guard) if guard.is_held() => return guard,
                Ok(_) => {}
                Err(err) => assert!(err.is_retryable(), "{name}: {err}"),
            }
            fw.block_until_connected(deadline()).await.expect("connected");
        }
    })
    .await
    .expect("acquired within the deadline");
    let mut told = Vec::new();

    // A second flap: the listeners behind the circuit are not told; the lock is.
    let before = fw.connection_state_watch().borrow().seq;
    proxy.cut();
    match policy {
        ErrorPolicy::Standard => {
            let lost = tokio::time::timeout(deadline(), guard.lost()).await.expect("told within the deadline");
            told.push(Some(kind(lost)));
            assert!(!guard.is_held(), "{name}");
            if breaker {
                assert!(stream.try_next().is_none(), "{name}: the suspension is held from the stream");
            }
        }
        _ => {
            truth_until(&fw, |e| e.seq > before && e.state.is_connected()).await;
            told.push(guard.lost_watch().borrow().map(kind));
            assert!(guard.is_held(), "{name}: a suspension is not a loss under the session policy");
            let session = fw.session().await.expect("a session");
            let info = session.client().session().clone();
            drop(session);
            expire_session(&connect_string, &info).await.expect("expired");
            let lost = tokio::time::timeout(deadline(), guard.lost()).await.expect("told within the deadline");
            told.push(Some(kind(lost)));
            if breaker {
                // The first Lost is passed on at once, held circuit or not.
                let seen = read_until(&mut stream, |e| e.state == Lost).await;
                assert_eq!(states(&seen), [Lost], "{name}: the suspension and reconnections are held");
            }
        }
    }
    drop(guard);
    fw.close().await;
    (name, told)
}

/// A cache follows the framework's stream, so behind the circuit it is told of a flapping
/// connection once (one suspension, one reconnection) and still converges: a child added
/// during the flaps is in it once the circuit closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_is_told_one_suspension_and_still_converges() {
    init_tracing();
    let runs = COMBINATIONS.map(|(policy, retry)| cache_under_flaps(policy, retry));
    join_all(runs).await;
}

async fn cache_under_flaps(policy: ErrorPolicy, retry: Retry) {
    use PathChildrenCacheEvent::{ChildAdded, ConnectionLost, ConnectionReconnected, ConnectionSuspended};
    let name = format!("{policy:?}/{retry:?}");
    let shared = TestingServer::shared().connect_string();
    let observer = client(&shared).await;
    let proxy = ChaosProxy::start(&shared).await.expect("proxy");
    let b = with_policies(builder(&proxy.connect_string()), policy, retry)
        .connection_state_circuit_breaker(RetryForever::new(HOLD));
    let (fw, _, _) = started(b).await;
    let base = unique_path("breaker-cache");
    observer.create().creating_parents_if_needed().for_path(&format!("{base}/a"), b"a".to_vec()).await.expect("a");
    let cache = PathChildrenCache::new(&fw, &base, true).expect("cache");
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache).expect("start");
    cache.wait_initialized().await.expect("initialized");

    for i in 0..2 {
        let before = fw.connection_state_watch().borrow().seq;
        proxy.cut();
        if i == 0 {
            observer.create().for_path(&format!("{base}/b"), b"b".to_vec()).await.expect("b");
        }
        truth_until(&fw, |e| e.seq > before && e.state.is_connected()).await;
    }
    let mut seen = Vec::new();
    let done = tokio::time::timeout(deadline(), async {
        while let Some(event) = events.next().await {
            seen.push(event);
            let added = seen.iter().any(|e| matches!(e, ChildAdded(d) if d.path.ends_with("/b")));
            if added && seen.iter().any(|e| matches!(e, ConnectionReconnected)) {
                return;
            }
        }
    })
    .await;
    let kinds: Vec<_> = seen.iter().map(|e| format!("{:?}", e.kind())).collect();
    assert!(done.is_ok(), "{name}: never saw b and the reconnection: {kinds:?}");
    let suspended = seen.iter().filter(|e| matches!(e, ConnectionSuspended)).count();
    let reconnected = seen.iter().filter(|e| matches!(e, ConnectionReconnected)).count();
    assert_eq!((suspended, reconnected), (1, 1), "{name}: one flap told: {kinds:?}");
    assert!(!seen.iter().any(|e| matches!(e, ConnectionLost)), "{name}: {kinds:?}");
    let mut paths: Vec<_> = cache.current_data().iter().map(|d| d.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, [format!("{base}/a"), format!("{base}/b")], "{name}");
    cache.close().await;
    fw.close().await;
    observer.close().await;
}

/// What a lock was told, as far as the comparison goes: at an expiry the lock may hear of its
/// node's deletion or of the session's loss first, whichever comes first.
fn kind(lost: LockLost) -> &'static str {
    match lost {
        LockLost::Suspended => "suspended",
        LockLost::SessionLost | LockLost::NodeDeleted => "gone with the session",
        _ => "something else",
    }
}

/// The breaker alone, around a framework's stream and as a listener of a framework without
/// one: two cuts in a row are told as one suspension, and the recovery after the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_alone_around_a_stream_and_a_listener() {
    init_tracing();
    let runs = COMBINATIONS.map(|(policy, retry)| alone(policy, retry));
    join_all(runs).await;
}

async fn alone(policy: ErrorPolicy, retry: Retry) {
    let name = format!("{policy:?}/{retry:?}");
    let proxy = ChaosProxy::start(&TestingServer::shared().connect_string()).await.expect("proxy");
    let fw = with_policies(builder(&proxy.connect_string()), policy, retry).build().expect("valid options");
    let mut raw = fw.connection_state_stream();
    let mut broken =
        CircuitBreakingConnectionStateListener::stream(RetryForever::new(HOLD), fw.connection_state_stream()).unwrap();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let record = heard.clone();
    let listener = CircuitBreakingConnectionStateListener::new(RetryForever::new(HOLD), move |e| {
        record.lock().unwrap().push(e.state);
    })
    .unwrap();
    let feed = listener.clone();
    fw.add_connection_state_listener(move |_fw, event| feed.state_changed(event));
    fw.start().unwrap();
    fw.block_until_connected(deadline()).await.unwrap();

    for _ in 0..2 {
        let before = fw.connection_state_watch().borrow().seq;
        proxy.cut();
        truth_until(&fw, |e| e.seq > before && e.state.is_connected()).await;
    }
    let all = read_until(&mut raw, |e| e.seq == 5).await;
    assert_eq!(states(&all), [Connected, Suspended, Reconnected, Suspended, Reconnected], "{name}");
    assert!(listener.is_open(), "{name}: open for {HOLD:?} after the first suspension");

    let told = read_until(&mut broken, |e| e.state == Reconnected).await;
    assert_eq!(states(&told), [Connected, Suspended, Reconnected], "{name}");
    // A cut through the proxy is often followed by a few more flaps of its own.
    let mut all = all;
    while let Some(e) = raw.try_next() {
        all.push(e);
    }
    let latest = all.iter().rev().find(|e| e.seq <= told[2].seq).expect("the raw stream has it");
    assert_eq!((latest.seq, latest.state), (told[2].seq, Reconnected), "{name}: the latest transition, after the hold");
    assert!(all.len() > told.len(), "{name}: flaps held back: told {:?} of {:?}", states(&told), states(&all));
    assert!(eventually(deadline(), || async { !listener.is_open() }).await, "{name}: closes once connected");
    assert_eq!(*heard.lock().unwrap(), [Connected, Suspended, Reconnected], "{name}");
    fw.close().await;
    assert_eq!(read_until(&mut broken, |e| e.state == ConnectionState::Closed).await.len(), 1, "{name}");
    assert!(broken.next().await.is_none(), "{name}: ends with its source");
}

/// Issue 40 item 11: `connection_state_circuit_breaker(RetryNTimes::new(3, sleep))` with every
/// extreme sleep (`ZERO`, 1 ns, `u64::MAX` ms, `MAX`): after a cut, the framework's stream and
/// listeners are told the reconnection, each within the test deadline. Before, the two sleeps
/// too long for a timer to end opened the circuit for good: the listeners stayed `Suspended`
/// while the framework had long reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sleep_lets_the_recovery_through() {
    init_tracing();
    let sleeps = [Duration::ZERO, Duration::from_nanos(1), Duration::from_millis(u64::MAX), Duration::MAX];
    let runs = sleeps.into_iter().flat_map(|sleep| COMBINATIONS.map(move |(policy, retry)| (sleep, policy, retry)));
    join_all(runs.map(|(sleep, policy, retry)| recovery_through(sleep, policy, retry))).await;
}

async fn recovery_through(sleep: Duration, policy: ErrorPolicy, retry: Retry) {
    let name = format!("{sleep:?} {policy:?}/{retry:?}");
    let proxy = ChaosProxy::start(&TestingServer::shared().connect_string()).await.expect("proxy");
    let b = with_policies(builder(&proxy.connect_string()), policy, retry)
        .connection_state_circuit_breaker(RetryNTimes::new(3, sleep));
    let (fw, mut stream, heard) = started(b).await;
    let before = fw.connection_state_watch().borrow().seq;
    proxy.cut();
    let back = truth_until(&fw, |e| e.seq > before && e.state.is_connected()).await;
    let told = read_until(&mut stream, |e| e.seq >= back.seq && e.state.is_connected()).await;
    assert!(states(&told).contains(&Suspended), "{name}: told of the cut: {:?}", states(&told));
    let last = told.last().expect("told something").seq;
    assert!(
        eventually(deadline(), || async { heard.lock().unwrap().last().map(|e| e.seq) == Some(last) }).await,
        "{name}: the listener is told the recovery as the stream is: {:?}",
        states(&heard.lock().unwrap())
    );
    fw.close().await;
}

/// Bad input: a breaker made outside a tokio runtime, which could never close its circuit, is
/// a typed error.
#[test]
fn breaker_outside_a_runtime_is_a_typed_error() {
    let made = CircuitBreakingConnectionStateListener::new(RetryForever::new(HOLD), |_| {});
    assert!(matches!(made, Err(CuratorError::NoRuntime { .. })), "{made:?}");
    let fw = CuratorFramework::builder().connect_string("127.0.0.1:1").build().expect("valid options");
    let wrapped = CircuitBreakingConnectionStateListener::stream(RetryForever::new(HOLD), fw.connection_state_stream());
    assert!(matches!(wrapped, Err(CuratorError::NoRuntime { .. })), "{wrapped:?}");
}
