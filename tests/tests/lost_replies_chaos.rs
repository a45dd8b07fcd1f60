//! Chaos for lost replies (issue 40): contenders take a mutex, lead an election and hold timed
//! leases, and write only through guarded writes while they hold (half of them with a write
//! tag), and move a shared counter only through `SharedCount::try_set`, while curator-test's
//! `Injector` loses replies and cuts connections at random from a seed, never expiring a
//! session. Then the server's final state is the history: every guarded write is a sequential
//! create whose data is an id of its own, so each id's nodes are counted, and
//! - every write reported applied is there exactly once,
//! - every write reported refused is absent,
//! - every write reported unknown is resolved by reading (there once, or absent; never twice),
//! - the counter moved by every `try_set` reported true, by none reported false, and by at most
//!   the ones reported unknown: `trues <= final <= trues + unknowns`, each true's value distinct.
//!
//! Under both error policies. `CHAOS_SECONDS` sets how long each run lasts (`CI_SECONDS` by
//! default), `CHAOS_SEED` a seed to repeat one; each run logs its counts. docs/architecture.md
//! sections 4.4 and 11.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_core::{CreateMode, CuratorError, CuratorFramework, ErrorPolicy, WriteTag};
use curator_recipes::{HeldNode, InterProcessMutex, LeaderLatch, SharedCount, TimedLease};
use curator_test::chaos::{ChaosRng, FaultKind, Injector, Target};
use curator_test::{ChaosProxy, TestingServer, Timing};
use tests::chaos::{duration, follow_session};
use tests::policies::{framework, Retry};
use tests::{init_tracing, unique_path};

/// How a write ended, as its writer was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Told {
    Applied,
    Refused,
    Unknown,
}

impl Told {
    fn of<T>(result: &Result<T, CuratorError>) -> Told {
        match result {
            Ok(_) => Told::Applied,
            Err(err) if err.outcome_unknown() => Told::Unknown,
            Err(_) => Told::Refused,
        }
    }
}

/// What every contender was told, shared.
#[derive(Default)]
struct Ledger {
    /// Each guarded write: its id (its node's data), how it was sent, what it was told.
    writes: Mutex<Vec<(String, &'static str, Told)>>,
    /// Each `try_set`: what it was told, and the value it wrote.
    sets: Mutex<Vec<(Told, i32)>>,
}

impl Ledger {
    fn write(&self, id: String, how: &'static str, told: Told) {
        self.writes.lock().unwrap_or_else(|e| e.into_inner()).push((id, how, told));
    }
}

/// One contender's round of guarded writes under `held`: three sequential creates under
/// `history`, each with a fresh id as data, the odd ones carrying `tag`.
async fn write_under(held: &HeldNode, history: &str, tag: &WriteTag, me: usize, ledger: &Ledger, how: &'static str) {
    for n in 0..3 {
        let id = format!("{how}-{me}-{:016x}", fastrand::u64(..));
        let node = format!("{history}/w-");
        let result = if n % 2 == 1 {
            let transaction =
                held.transaction().create(&node, id.clone().into_bytes(), CreateMode::PersistentSequential);
            transaction.with_write_tag(tag).commit().await.map(drop)
        } else {
            held.create(&node, id.clone().into_bytes(), CreateMode::PersistentSequential).await.map(drop)
        };
        let told = Told::of(&result);
        if let Err(err) = &result {
            tracing::debug!(me, how, error = %err, ?told, "guarded write not applied, or not known");
        }
        ledger.write(id, if n % 2 == 1 { "tagged" } else { "plain" }, told);
        if told == Told::Refused {
            return;
        }
    }
}

/// Everything one contender uses.
struct Contender {
    me: usize,
    fw: CuratorFramework,
    mutex: InterProcessMutex,
    latch: LeaderLatch,
    lease: TimedLease,
    count: SharedCount,
    tag: WriteTag,
}

impl Contender {
    async fn round(&self, rng: &mut ChaosRng, history: &str, ledger: &Ledger) {
        let patience = Timing::new().deadline() / 4;
        match rng.below(4) {
            0 => {
                if let Ok(Some(guard)) = self.mutex.acquire_timeout(patience).await {
                    write_under(&guard, history, &self.tag, self.me, ledger, "lock").await;
                    let _ = guard.release().await;
                }
            }
            1 => {
                if let Some(leadership) = self.latch.leadership() {
                    write_under(&leadership, history, &self.tag, self.me, ledger, "leader").await;
                }
            }
            2 => {
                if let Ok(Some(grant)) = self.lease.try_acquire().await {
                    for _ in 0..3 {
                        let id = format!("lease-{}-{:016x}", self.me, fastrand::u64(..));
                        let result = match grant.transaction() {
                            Ok(transaction) => transaction
                                .create(
                                    &format!("{history}/w-"),
                                    id.clone().into_bytes(),
                                    CreateMode::PersistentSequential,
                                )
                                .commit()
                                .await
                                .map(drop),
                            Err(err) => Err(err),
                        };
                        let told = Told::of(&result);
                        ledger.write(id, "lease", told);
                        if told == Told::Refused {
                            break;
                        }
                    }
                    let _ = grant.release().await;
                }
            }
            _ => {
                let Ok(seen) = self.count.versioned_value() else { return };
                let next = seen.value + 1;
                let result = self.count.try_set(&seen, next).await;
                let told = match &result {
                    Ok(true) => Told::Applied,
                    Ok(false) => Told::Refused,
                    Err(err) if err.outcome_unknown() => Told::Unknown,
                    Err(err) => {
                        tracing::debug!(me = self.me, error = %err, "try_set refused");
                        Told::Refused
                    }
                };
                ledger.sets.lock().unwrap_or_else(|e| e.into_inner()).push((told, next));
            }
        }
    }
}

/// One run under `policy`: the contenders, the faults, then the checks against the server.
async fn run(policy: ErrorPolicy) {
    init_tracing();
    let seed = ChaosRng::seed_from_env("CHAOS_SEED");
    let timing = Timing::new();
    let server = TestingServer::shared();
    let base = unique_path("lost-replies-chaos");
    let history = format!("{base}/history");
    let observer = framework(&server.connect_string(), ErrorPolicy::Standard, Retry::Default).await;
    observer.create().creating_parents_if_needed().for_path(&history, Vec::new()).await.expect("history");
    let ledger = Arc::new(Ledger::default());
    let (mut targets, mut contenders, mut proxies) = (Vec::new(), Vec::new(), Vec::new());
    for me in 0..3 {
        let proxy = Arc::new(ChaosProxy::start(&server.connect_string()).await.expect("proxy"));
        // Kept here: the injector lets go of its targets when its run ends, and a proxy dropped
        // then would cut the contenders off for the rest of the test (their last rounds, the
        // closes), which took about 100 s of retries and session timeouts.
        proxies.push(proxy.clone());
        let fw = framework(&proxy.connect_string(), policy, Retry::Default).await;
        let session = follow_session(&fw);
        targets.push(Target::new(proxy, move || session.lock().unwrap_or_else(|e| e.into_inner()).clone()));
        let latch = LeaderLatch::builder(&fw, &format!("{base}/leader")).build().expect("latch");
        latch.start().expect("start");
        let count = SharedCount::new(&fw, &format!("{base}/count"), 0).expect("count");
        count.start().expect("start");
        count.ready().await.expect("count ready");
        let lease =
            TimedLease::new(&fw, &format!("{base}/lease"), timing.session_timeout(), &format!("c{me}")).expect("lease");
        contenders.push(Arc::new(Contender {
            me,
            mutex: InterProcessMutex::new(&fw, &format!("{base}/lock")).expect("mutex"),
            tag: WriteTag::new(&fw, &base).expect("tag"),
            latch,
            lease,
            count,
            fw,
        }));
    }
    let injector = Injector::builder(seed)
        .targets(targets)
        .session_timeout(timing.session_timeout())
        .mean_gap(Duration::from_millis(300))
        .kinds([FaultKind::SwallowReply, FaultKind::Cut])
        .build()
        .await
        .expect("injector");
    let until = Instant::now() + duration();
    let chaos = injector.spawn(until);
    let mut workers = Vec::new();
    for (i, contender) in contenders.iter().enumerate() {
        let (contender, ledger, history) = (contender.clone(), ledger.clone(), history.clone());
        let mut rng = ChaosRng::new(seed ^ (i as u64 + 1));
        workers.push(tokio::spawn(async move {
            while Instant::now() < until {
                contender.round(&mut rng, &history, &ledger).await;
            }
        }));
    }
    for worker in workers {
        tokio::time::timeout(timing.deadline() * 4, worker).await.expect("a contender hung").expect("contender");
    }
    let record = chaos.await.expect("injector");
    assert!(record.restore_errors.is_empty(), "{:?}", record.restore_errors);
    for contender in &contenders {
        contender.latch.close().await;
        contender.count.close().await;
    }

    // The server's history: each id's nodes.
    let mut found: HashMap<String, usize> = HashMap::new();
    for child in observer.get_children().for_path(&history).await.expect("history") {
        let data = observer.get_data().for_path(&format!("{history}/{child}")).await.expect("entry");
        *found.entry(String::from_utf8(data).expect("utf-8 id")).or_default() += 1;
    }
    let writes = ledger.writes.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut counts: HashMap<(&str, Told), usize> = HashMap::new();
    let mut resolved_applied = 0;
    for (id, how, told) in &writes {
        *counts.entry((how, *told)).or_default() += 1;
        let n = found.get(id).copied().unwrap_or(0);
        match told {
            Told::Applied => {
                assert_eq!(n, 1, "seed {seed:#x}, {policy:?}: {how} write {id} reported applied is there {n} times")
            }
            Told::Refused => {
                assert_eq!(n, 0, "seed {seed:#x}, {policy:?}: {how} write {id} reported refused is there {n} times")
            }
            Told::Unknown => {
                assert!(n <= 1, "seed {seed:#x}, {policy:?}: {how} write {id} of unknown outcome is there {n} times");
                resolved_applied += n;
            }
        }
    }
    let ids: HashSet<&String> = writes.iter().map(|(id, _, _)| id).collect();
    assert!(found.keys().all(|id| ids.contains(id)), "seed {seed:#x}: a write nobody made");

    let sets = ledger.sets.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let trues: Vec<i32> = sets.iter().filter(|(t, _)| *t == Told::Applied).map(|(_, v)| *v).collect();
    let unknown_sets = sets.iter().filter(|(t, _)| *t == Told::Unknown).count();
    let distinct: HashSet<i32> = trues.iter().copied().collect();
    assert_eq!(distinct.len(), trues.len(), "seed {seed:#x}, {policy:?}: two try_sets reported the same write");
    let (data, _) = observer.get_data().for_path_with_stat(&format!("{base}/count")).await.expect("count");
    let last = i32::from_be_bytes(data.as_slice().try_into().expect("4 bytes"));
    let last = usize::try_from(last).expect("a count");
    assert!(
        trues.len() <= last && last <= trues.len() + unknown_sets,
        "seed {seed:#x}, {policy:?}: the count is {last}, with {} try_sets reported true and {unknown_sets} unknown",
        trues.len()
    );
    tracing::info!(
        seed = format_args!("{seed:#x}"),
        ?policy,
        faults = ?record.counts,
        writes = writes.len(),
        ?counts,
        unknown_writes_applied = resolved_applied,
        try_sets = sets.len(),
        try_sets_true = trues.len(),
        try_sets_unknown = unknown_sets,
        count = last,
        "lost-replies chaos run"
    );
    assert!(!writes.is_empty() && !trues.is_empty(), "seed {seed:#x}, {policy:?}: nothing was written");
    for contender in contenders {
        if let Ok(contender) = Arc::try_unwrap(contender) {
            contender.fw.close().await;
        }
    }
    observer.delete().deleting_children_if_needed().quietly().for_path(&base).await.expect("cleanup");
    observer.close().await;
    drop(proxies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_and_try_sets_under_lost_replies_standard() {
    run(ErrorPolicy::Standard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_and_try_sets_under_lost_replies_session() {
    run(ErrorPolicy::Session).await;
}
