//! The line watch of a `Leases` group (docs/architecture.md section 8.3; ours, with no Curator
//! analog: Curator's waiters watch their predecessor): a waiter with few nodes ahead waits on
//! one persistent recursive watch on the lock's path. These tests put a waiter on the line (one
//! mutex object per session: its second contended wait starts the object's watch, seen on the
//! server with `wchp`) and check that a node leaving out of turn, our own node's deletion and a
//! cut connection never give two holders, that every acquire ends, that the watch goes when the
//! line is idle, when the session expires and at once when a wait is over the line's limit, and
//! that a line silenced by a data watch of its own session (ZOOKEEPER-4466, our 3.8 server) is
//! found by the probe.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::CuratorFramework;
use curator_recipes::{InterProcessMutex, LockGuard};
use curator_test::{eventually, expire_session, ChaosProxy, TestingServer, Timing};
use tests::locks::{contenders_ahead, framework, line_watchers};
use tests::policies::COMBINATIONS;
use tests::{children, init_tracing, unique_path};

/// How long a waiter is given to (wrongly) take the lock before we conclude that it waits.
const STILL_WAITING: Duration = Duration::from_millis(500);
/// How long an unused line's watch stays (curator-recipes' `LINE_IDLE`, in `sequential/line.rs`):
/// a bound below it shows the watch went for another reason.
const LINE_IDLE: Duration = Duration::from_secs(10);

/// Turns the line on for each of `waiters` (one per session): rounds in which each waits behind
/// a hold of `holder` (today's waits: a group's second starts its watch), until the server
/// shows each of their sessions watching `path`. A waiter queued behind the hold may still find
/// it gone when its listing is read (its getChildren can reach a loaded server after the
/// holder's delete), and then holds without a wait: so the rounds go on until the watches are
/// on, at most [`START_ROUNDS`].
async fn start_lines(connect: &str, path: &str, holder: &InterProcessMutex, waiters: &[InterProcessMutex]) {
    let observer = framework(connect).await;
    for round in 0..START_ROUNDS {
        let held = holder.acquire().await.unwrap();
        let mut tasks = Vec::new();
        for (i, waiter) in waiters.iter().enumerate() {
            let waiter = waiter.clone();
            tasks.push(tokio::spawn(async move { waiter.acquire().await.unwrap().release().await.unwrap() }));
            let queued =
                eventually(Timing::new().deadline(), || async { children(&observer, path).await.len() == i + 2 });
            assert!(queued.await, "waiter {i} never queued");
        }
        held.release().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let on = || async { line_watchers(connect, path).await.len() >= waiters.len() };
        if round > 0 && eventually(Duration::from_secs(2), on).await {
            observer.close().await;
            return;
        }
    }
    panic!("the line watches never came on in {START_ROUNDS} rounds");
}

/// The most rounds [`start_lines`] runs.
const START_ROUNDS: usize = 8;

/// Counts holders: `enter` fails the test if another one holds.
#[derive(Default)]
struct Holders(AtomicUsize);

impl Holders {
    fn enter(&self, who: &str) {
        let before = self.0.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "{who} holds beside another holder");
    }

    fn leave(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Acquires `mutex` as `who` in a task, counted by `holders`; the task ends holding.
fn acquiring(
    mutex: &InterProcessMutex,
    holders: &Arc<Holders>,
    who: &'static str,
) -> tokio::task::JoinHandle<LockGuard> {
    let (mutex, holders) = (mutex.clone(), holders.clone());
    tokio::spawn(async move {
        let guard = mutex.acquire().await.unwrap_or_else(|e| panic!("{who}: {e}"));
        holders.enter(who);
        guard
    })
}

/// Releases a guard counted by `holders`.
async fn release(guard: LockGuard, holders: &Holders) {
    holders.leave();
    guard.release().await.unwrap();
}

/// Three sessions, each with its own framework and mutex object on `path`.
async fn three(connect: &str, path: &str) -> (Vec<CuratorFramework>, Vec<InterProcessMutex>) {
    let mut fws = Vec::new();
    for _ in 0..3 {
        fws.push(framework(connect).await);
    }
    let mutexes = fws.iter().map(|fw| InterProcessMutex::new(fw, path).unwrap()).collect();
    (fws, mutexes)
}

/// a. A waiter on the line behind the holder and a waiter that is then cancelled: the cancelled
/// waiter's node goes (out of turn), and the waiter still waits for the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_cancelled_waiter_waits_for_the_holder() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("line-cancelled");
    let (fws, m) = three(&connect, &path).await;
    start_lines(&connect, &path, &m[0], &m[1..]).await;
    let holders = Arc::new(Holders::default());
    let held = m[0].acquire().await.unwrap();
    holders.enter("holder");
    let cancelled = acquiring(&m[1], &holders, "cancelled");
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[0], &path).await.len() == 2 }).await);
    let mut waiter = acquiring(&m[2], &holders, "waiter");
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[0], &path).await.len() == 3 }).await);
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[0], &path).await.len() == 2 }).await);
    assert!(tokio::time::timeout(STILL_WAITING, &mut waiter).await.is_err(), "the waiter held beside the holder");
    assert!(held.is_held());
    release(held, &holders).await;
    let guard = tokio::time::timeout(Timing::new().deadline(), waiter).await.expect("the waiter holds").unwrap();
    release(guard, &holders).await;
    for fw in fws {
        fw.close().await;
    }
}

/// b. Someone deletes the node of a waiter on the line: it re-checks (its node's deletion comes
/// on the line) instead of holding a deleted node when the holder goes; the holder keeps the
/// lock alone meanwhile, and the waiter holds after it, on a new node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_node_is_deleted_does_not_hold_it() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("line-own-deleted");
    let (fws, m) = three(&connect, &path).await;
    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    let holders = Arc::new(Holders::default());
    let held = m[0].acquire().await.unwrap();
    holders.enter("holder");
    let mut waiter = acquiring(&m[1], &holders, "waiter");
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[2], &path).await.len() == 2 }).await);
    let nodes = children(&fws[2], &path).await;
    let theirs = nodes.iter().find(|n| !held.path().ends_with(n.as_str())).expect("the waiter's node").clone();
    fws[2].delete().for_path(&format!("{path}/{theirs}")).await.unwrap();
    // It makes a new node and waits again.
    let again = eventually(Timing::new().deadline(), || async {
        let now = children(&fws[2], &path).await;
        now.len() == 2 && !now.contains(&theirs)
    });
    assert!(again.await, "the waiter never made a new node");
    assert!(tokio::time::timeout(STILL_WAITING, &mut waiter).await.is_err(), "the waiter held beside the holder");
    assert!(held.is_held());
    release(held, &holders).await;
    let guard = tokio::time::timeout(Timing::new().deadline(), waiter).await.expect("the waiter holds").unwrap();
    assert!(!guard.path().ends_with(&theirs), "held the deleted node");
    release(guard, &holders).await;
    for fw in fws {
        fw.close().await;
    }
}

/// c. The waiter's connection is cut while it waits on the line, under both error policies and
/// both retry policies: no two holders, a timed acquire started during the cut ends by its
/// deadline, and the waiter holds once the holder releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_while_waiting_on_the_line_never_gives_two_holders() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    for (policy, retry) in COMBINATIONS {
        let proxy = ChaosProxy::start(&connect).await.unwrap();
        let holder_fw = tests::policies::framework(&connect, policy, retry).await;
        let waiter_fw = tests::policies::framework(&proxy.connect_string(), policy, retry).await;
        let path = unique_path("line-cut");
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap();
        let waiter = InterProcessMutex::new(&waiter_fw, &path).unwrap();
        start_lines(&connect, &path, &holder, std::slice::from_ref(&waiter)).await;
        let holders = Arc::new(Holders::default());
        let held = holder.acquire().await.unwrap();
        holders.enter("holder");
        let mut waiting = acquiring(&waiter, &holders, "waiter");
        let queued = eventually(Timing::new().deadline(), || async { children(&holder_fw, &path).await.len() == 2 });
        assert!(queued.await, "{policy:?} {retry:?}: the waiter never queued");
        proxy.cut();
        let timeout = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let timed = tokio::time::timeout(Timing::new().deadline(), waiter.acquire_timeout(timeout)).await;
        let timed = timed.unwrap_or_else(|_| panic!("{policy:?} {retry:?}: the timed acquire never ended"));
        assert!(!matches!(timed, Ok(Some(_))), "{policy:?} {retry:?}: the timed acquire held beside the holder");
        // By its timeout, give or take a connection timeout (not a retry under the policy).
        let late = timeout + tests::at_once(&waiter_fw);
        assert!(started.elapsed() < late, "{policy:?} {retry:?}: ended after {:?}", started.elapsed());
        // The waiter's acquire (the session survives the cut) keeps waiting, alone.
        if let Ok(result) = tokio::time::timeout(STILL_WAITING, &mut waiting).await {
            let _ = result.map(|_| panic!("{policy:?} {retry:?}: the waiter held beside the holder"));
        }
        release(held, &holders).await;
        let guard = tokio::time::timeout(Timing::new().deadline(), waiting)
            .await
            .unwrap_or_else(|_| panic!("{policy:?} {retry:?}: the waiter never held"))
            .unwrap_or_else(|e| panic!("{policy:?} {retry:?}: {e}"));
        release(guard, &holders).await;
        holder_fw.close().await;
        waiter_fw.close().await;
    }
}

/// d. The watch goes when the group stops waiting (within LINE_IDLE, 10 s, and a margin), and
/// a session expiry ends the line: the next acquire works, and starts the line on the new
/// session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_goes_when_idle_and_with_the_session() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("line-idle");
    let (fws, m) = three(&connect, &path).await;
    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    let gone = eventually(Duration::from_secs(20), || async { line_watchers(&connect, &path).await.is_empty() });
    assert!(gone.await, "the idle line's watch is still on");

    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    let old = line_watchers(&connect, &path).await;
    let info = fws[1].session().await.unwrap().client().session().clone();
    expire_session(&connect, &info).await.unwrap();
    let new_session =
        eventually(Timing::new().deadline(), || async { fws[1].session().await.is_ok_and(|s| s.id() != info.id().0) });
    assert!(new_session.await, "no new session after the expiry");
    // The next acquires work, and a contended one starts the line again on the new session.
    m[1].acquire().await.unwrap().release().await.unwrap();
    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    let now = line_watchers(&connect, &path).await;
    let new_id = format!("0x{:x}", fws[1].session().await.unwrap().id());
    assert!(now.contains(&new_id), "the new session watches the line: {now:?} (before: {old:?})");
    let holders = Arc::new(Holders::default());
    let held = m[0].acquire().await.unwrap();
    holders.enter("holder");
    let waiting = acquiring(&m[1], &holders, "waiter");
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[2], &path).await.len() == 2 }).await);
    release(held, &holders).await;
    let guard = tokio::time::timeout(Timing::new().deadline(), waiting).await.expect("the waiter holds").unwrap();
    release(guard, &holders).await;
    for fw in fws {
        fw.close().await;
    }
}

/// A wait over the line's limit (33 nodes ahead, an observer's) while the waiter's watch is on
/// stops the line at once: the watch is gone from the server well before LINE_IDLE (10 s) could
/// drop it, and the wait (today's) still ends in a hold once the nodes go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_over_the_limit_stops_the_line_at_once() {
    init_tracing();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("line-over-limit");
    let (fws, m) = three(&connect, &path).await;
    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    let ahead = contenders_ahead(&fws[2], &path, 33).await;
    let started = tokio::time::Instant::now();
    let waiter = m[1].clone();
    let waiting = tokio::spawn(async move { waiter.acquire().await });
    assert!(eventually(Timing::new().deadline(), || async { children(&fws[2], &path).await.len() == 34 }).await);
    let gone = eventually(LINE_IDLE / 2, || async { line_watchers(&connect, &path).await.is_empty() });
    assert!(gone.await, "the line's watch is still on after a wait over the limit");
    assert!(started.elapsed() < LINE_IDLE * 9 / 10, "the watch went only as idle");
    for node in &ahead {
        fws[2].delete().for_path(node).await.unwrap();
    }
    let guard = tokio::time::timeout(Timing::new().deadline(), waiting).await.expect("the waiter holds").unwrap();
    guard.unwrap().release().await.unwrap();
    for fw in fws {
        fw.close().await;
    }
}

/// ZOOKEEPER-4466 (servers before 3.9; ours is 3.8): a non-recursive persistent watch that the
/// waiter's own framework sets on the lock's path replaces the line's persistent recursive
/// watch there, and the holder's deletion never reaches the line. The probe (LINE_PROBE, 5 s) lists again, finds
/// the holder's node gone without its event, and stops the line: the waiter holds within
/// LINE_PROBE and a margin. Current-thread runtime: the recorder sees the line's events.
#[tokio::test]
async fn a_line_silenced_by_a_watch_on_its_path_is_found_by_the_probe() {
    let (events, _recording) = tests::logs::record_events();
    let connect = TestingServer::shared().connect_string();
    let path = unique_path("line-silenced");
    let (fws, m) = three(&connect, &path).await;
    start_lines(&connect, &path, &m[0], &m[1..2]).await;
    events.clear();
    let holders = Arc::new(Holders::default());
    let held = m[0].acquire().await.unwrap();
    holders.enter("holder");
    let waiting = acquiring(&m[1], &holders, "waiter");
    let debug = || events.at(tracing::Level::DEBUG, "curator_recipes");
    let on_line =
        eventually(Timing::new().deadline(), || async { debug().iter().any(|e| e.ends_with("waiting on the line")) });
    assert!(on_line.await, "the waiter never waited on the line: {:?}", debug());
    // The same session sets a non-recursive persistent watch on the lock's path (as a node
    // cache of the lock's node would). A one-shot exists watch (`check_exists().watched()`, even
    // fired by a setData) did not silence the line on this server: deletions kept coming.
    let _node_watch =
        fws[1].watches().add().with_mode(curator_core::AddWatchMode::Persistent).for_path(&path).await.unwrap();
    let released = tokio::time::Instant::now();
    release(held, &holders).await;
    let guard = tokio::time::timeout(Duration::from_secs(5 + 5), waiting)
        .await
        .expect("the waiter holds within LINE_PROBE and a margin")
        .unwrap();
    let took = released.elapsed();
    release(guard, &holders).await;
    let seen = debug();
    let missed = seen.iter().any(|e| e.contains("the line missed a deletion"));
    assert!(missed, "no missed deletion (took {took:?}): {seen:?}");
    let stopped =
        eventually(Timing::new().deadline(), || async { debug().iter().any(|e| e.contains("line watch removed")) });
    assert!(stopped.await, "the line was not stopped: {:?}", debug());
    for fw in fws {
        fw.close().await;
    }
}
