//! Chaos for `SetPartitioner` (issue 31 item 8): four member slots, each on its own
//! fault-injecting proxy, join and leave a partitioner group at random while curator-test's
//! `Injector` expires their sessions and cuts, pauses, slows and rejects their connections, all
//! from one seed (`CHAOS_SEED` repeats a run; the seed and the counts are printed). Each slot
//! answers `Release` with `release_set`, as a worker loop would, and makes a new partitioner
//! after a `Failure`.
//!
//! The checker records, per partition, each member's holds from the state stream: a hold starts
//! at its grant (`HeldPartition::granted_at`, with its fencing token) and is told lost at a
//! `Release(MayBeLost)` or `Failure`; it ends when the member stops using it (`Release`,
//! `Failure`, leaving). One curator-test `Checker` per partition then finds every pair of holds
//! of one partition at once where the earlier holder had not been told (the safety violation:
//! must be zero; a session expired by force, which no client can be told of first, is excused
//! as in the locks' chaos), and every grant whose token did not grow. Once the faults stop, a
//! group of every slot must split the whole set again (no partition wedged), and once they all
//! leave no node may be left.
//!
//! kazoo has no chaos test for its partitioner; the scenario follows ours for the locks
//! (tests/tests/locks_chaos.rs). `CHAOS_SECONDS` sets the length of each scenario (8 s by
//! default: both scenarios with their setup and settling take about half a minute).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::{CuratorFramework, ErrorPolicy};
use curator_recipes::{PartitionState, ReleaseCause, SetPartitioner};
use curator_test::chaos::{ChaosRng, Checker, Ensemble, FaultKind, HoldId, Injector, ReportInputs, Target};
use curator_test::{eventually, ChaosProxy, TestingServer, Timing};
use tests::chaos::follow_session;
use tests::policies::{framework, Retry};
use tests::zk::children;
use tests::{client, init_tracing, unique_path};

/// One scenario at a time: faults are timed against the session timeout.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SLOTS: usize = 4;
const PARTITIONS: usize = 6;
/// Short, for many transitions.
const SETTLE: Duration = Duration::from_millis(100);

fn duration() -> Duration {
    let secs = std::env::var("CHAOS_SECONDS").ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(8);
    Duration::from_secs(secs)
}

fn partition_names() -> Vec<String> {
    (0..PARTITIONS).map(|i| format!("p{i}")).collect()
}

/// What the slots did, for the report line.
#[derive(Default)]
struct Counts {
    transitions: AtomicU64,
    grants: AtomicU64,
    joins: AtomicU64,
    leaves: AtomicU64,
    releases: AtomicU64,
    may_be_lost: AtomicU64,
    failures: AtomicU64,
}

impl Counts {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "transitions={} grants={} joins={} leaves={} releases={} may_be_lost={} failures={}",
            get(&self.transitions),
            get(&self.grants),
            get(&self.joins),
            get(&self.leaves),
            get(&self.releases),
            get(&self.may_be_lost),
            get(&self.failures)
        )
    }
}

/// Everything the slots share.
#[derive(Clone)]
struct Shared {
    path: String,
    /// Slots that must not leave now (the target of a scripted fault).
    pinned: Arc<Vec<std::sync::atomic::AtomicBool>>,
    checkers: Arc<Vec<Checker>>,
    counts: Arc<Counts>,
}

/// The holds a member has open, per partition index.
struct Open(Vec<(usize, HoldId)>);

impl Open {
    fn lost(&self, shared: &Shared, at: Instant) {
        for &(k, hold) in &self.0 {
            shared.checkers[k].lost(hold, at);
        }
    }

    fn end(&mut self, shared: &Shared) {
        let now = Instant::now();
        for (k, hold) in self.0.drain(..) {
            shared.checkers[k].end_hold_at(hold, now);
        }
    }
}

/// One partitioner's life in slot `slot`: answers its states until it fails or `leave` fires,
/// recording its holds. True when it ended by failing.
async fn incarnation(
    slot: usize,
    target: Target,
    p: SetPartitioner,
    shared: Shared,
    mut leave: tokio::sync::oneshot::Receiver<()>,
) -> bool {
    let names = partition_names();
    let mut states = p.states();
    p.start().expect("start");
    let mut open = Open(Vec::new());
    let failed = loop {
        let state = tokio::select! {
            state = states.next() => state,
            _ = &mut leave => break false,
        };
        let Some(state) = state else { break false };
        Counts::add(&shared.counts.transitions, 1);
        match state {
            PartitionState::Acquired(held) => {
                for h in &held {
                    let k = names.iter().position(|n| n == h.name()).expect("a partition of the set");
                    let hold = shared.checkers[k].begin_hold_at(slot, h.fencing_token(), true, h.granted_at());
                    open.0.push((k, hold));
                }
                Counts::add(&shared.counts.grants, held.len() as u64);
                // The injector aims its long partitions at holders.
                target.set_holding(!held.is_empty());
            }
            PartitionState::Release(cause) => {
                if let ReleaseCause::MayBeLost { .. } = cause {
                    open.lost(&shared, Instant::now());
                    Counts::add(&shared.counts.may_be_lost, 1);
                }
                open.end(&shared);
                target.set_holding(false);
                Counts::add(&shared.counts.releases, 1);
                let _ = p.release_set().await;
            }
            PartitionState::Failure(_) => {
                open.lost(&shared, Instant::now());
                Counts::add(&shared.counts.failures, 1);
                break true;
            }
            _ => {}
        }
    };
    open.end(&shared);
    target.set_holding(false);
    p.close().await;
    failed
}

/// Slot `slot` joins and leaves at random until `until`, one partitioner at a time.
async fn slot_loop(
    slot: usize,
    fw: CuratorFramework,
    target: Target,
    shared: Shared,
    mut rng: ChaosRng,
    until: Instant,
) {
    let mut generation = 0;
    let mut current: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<bool>)> = None;
    while Instant::now() < until {
        tokio::time::sleep(rng.between(Duration::from_millis(100), Duration::from_millis(900))).await;
        match current.take() {
            Some((leave, task))
                if task.is_finished() || (rng.chance(0.25) && !shared.pinned[slot].load(Ordering::Relaxed)) =>
            {
                let _ = leave.send(());
                if !task.await.expect("the incarnation panicked") {
                    Counts::add(&shared.counts.leaves, 1);
                }
            }
            Some(running) => current = Some(running),
            None if rng.chance(0.7) => {
                generation += 1;
                let id = format!("m{slot}-{generation}");
                let p = SetPartitioner::builder(&fw, &shared.path, &id, partition_names())
                    .settle(SETTLE)
                    .build()
                    .expect("valid settings");
                let (leave, left) = tokio::sync::oneshot::channel();
                current = Some((leave, tokio::spawn(incarnation(slot, target.clone(), p, shared.clone(), left))));
                Counts::add(&shared.counts.joins, 1);
            }
            None => {}
        }
    }
    if let Some((leave, task)) = current {
        let _ = leave.send(());
        let _ = task.await;
    }
}

/// Two faults the scenario always makes, on top of the injector's random ones, each aimed at a
/// slot that holds partitions then: a forced expiry (noted in the checkers: no client can be told
/// of it first), then a partition longer than the session timeout of another (the holder must be
/// told before anyone else is granted its partitions). What was done, for the report line.
async fn scripted_faults(targets: Vec<Target>, direct: String, shared: Shared, session_timeout: Duration) -> String {
    // The first slot seen holding within two seconds (polled).
    let holder = |skip: Option<usize>| {
        let targets = targets.clone();
        async move {
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                if let Some(i) = (0..targets.len()).find(|&i| Some(i) != skip && targets[i].is_holding()) {
                    return Some(i);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None
        }
    };
    let mut done = Vec::new();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let expired = holder(None).await;
    if let Some(i) = expired {
        if let Some(session) = targets[i].session() {
            let at = Instant::now();
            if curator_test::expire_session(&direct, &session).await.is_ok() {
                for checker in shared.checkers.iter() {
                    checker.forced_expiry(i, at);
                }
                done.push(format!("expire=slot{i}"));
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(i) = holder(expired).await {
        // It stays in the group until it was told.
        shared.pinned[i].store(true, Ordering::Relaxed);
        targets[i].proxy().pause();
        tokio::time::sleep(session_timeout + session_timeout / 5).await;
        targets[i].proxy().pass();
        done.push(format!("long_pause=slot{i}"));
    }
    done.join(",")
}

/// Member nodes and lock nodes under the path.
async fn nodes_left(fw: &CuratorFramework, path: &str) -> usize {
    let mut left = children(fw, &format!("{path}/party")).await.len();
    for name in partition_names() {
        left += children(fw, &format!("{path}/locks/{name}")).await.len();
    }
    left
}

async fn run(policy: ErrorPolicy, retry: Retry) {
    init_tracing();
    let _turn = ONE_AT_A_TIME.lock().await;
    let name = format!("partition-{policy:?}-{retry:?}").to_lowercase();
    let seed = ChaosRng::seed_from_env("CHAOS_SEED");
    let timing = Timing::new();
    let session_timeout = timing.session_timeout();
    let server = TestingServer::start().await.expect("server");
    let direct = server.connect_string();
    let ensemble = Ensemble::Server(Arc::new(tokio::sync::Mutex::new(server)));
    let mut frameworks = Vec::new();
    let mut targets = Vec::new();
    let mut proxies = Vec::new();
    for _ in 0..SLOTS {
        let proxy = Arc::new(ChaosProxy::start(&direct).await.expect("proxy"));
        let fw = framework(&proxy.connect_string(), policy, retry).await;
        let session = follow_session(&fw);
        targets.push(Target::new(proxy.clone(), move || session.lock().unwrap_or_else(|e| e.into_inner()).clone()));
        proxies.push(proxy);
        frameworks.push(fw);
    }
    let kinds = FaultKind::ALL.into_iter().filter(|k| k.needs_target());
    let injector = Injector::builder(seed)
        .targets(targets.clone())
        .ensemble(ensemble.clone())
        .session_timeout(session_timeout)
        .mean_gap(Duration::from_millis(350))
        .kinds(kinds)
        .long_partition_chance(0.2)
        .build()
        .await
        .expect("injector");
    let shared = Shared {
        path: unique_path(&name),
        pinned: Arc::new((0..SLOTS).map(|_| std::sync::atomic::AtomicBool::new(false)).collect()),
        checkers: Arc::new((0..PARTITIONS).map(|_| Checker::new()).collect()),
        counts: Arc::new(Counts::default()),
    };
    let until = Instant::now() + duration();
    let chaos = injector.spawn(until);
    let slots: Vec<_> = frameworks
        .iter()
        .enumerate()
        .map(|(i, fw)| {
            let rng = ChaosRng::new(seed.wrapping_add(i as u64 + 1));
            tokio::spawn(slot_loop(i, fw.clone(), targets[i].clone(), shared.clone(), rng, until))
        })
        .collect();
    let scripted = tokio::spawn(scripted_faults(targets.clone(), direct.clone(), shared.clone(), session_timeout));
    let record = chaos.await.expect("the injector panicked");
    let scripted = scripted.await.expect("the scripted faults panicked");
    for pinned in shared.pinned.iter() {
        pinned.store(false, Ordering::Relaxed);
    }
    let started = Instant::now();
    for slot in slots {
        slot.await.expect("a slot panicked");
    }
    let slots_done = started.elapsed();

    // Liveness: with the faults over, a group of every slot splits the whole set again.
    let patience = session_timeout * 3 + timing.deadline();
    let last: Vec<SetPartitioner> = frameworks
        .iter()
        .enumerate()
        .map(|(i, fw)| {
            let p = SetPartitioner::builder(fw, &shared.path, &format!("m{i}-last"), partition_names())
                .settle(SETTLE)
                .build()
                .expect("valid settings");
            p.start().expect("start");
            p
        })
        .collect();
    let union = || {
        let mut held: Vec<String> = Vec::new();
        for p in &last {
            match p.partition_state() {
                PartitionState::Acquired(h) => held.extend(h.iter().map(|h| h.name().to_string())),
                PartitionState::Release(_) => return None,
                _ => return None,
            }
        }
        held.sort();
        Some(held)
    };
    // Members of the last group answer a Release too (a late join or leave of a lost session).
    let whole = eventually(patience, || async {
        for p in &last {
            if let PartitionState::Release(_) = p.partition_state() {
                let _ = p.release_set().await;
            }
        }
        union() == Some(partition_names())
    })
    .await;
    let whole_at = started.elapsed();
    let party = children(&frameworks[0], &format!("{}/party", shared.path)).await;
    let states: Vec<String> = last.iter().map(|p| format!("{:?}", p.partition_state())).collect();
    for p in &last {
        p.close().await;
    }
    let observer = client(&direct).await;
    let clean = eventually(patience, || async { nodes_left(&observer, &shared.path).await == 0 }).await;
    let orphans = nodes_left(&observer, &shared.path).await;
    eprintln!(
        "{name}: slots done {slots_done:?}, whole set {whole_at:?}, clean {:?} after the faults",
        started.elapsed()
    );

    let mut overlaps = 0;
    let mut signalled = 0;
    let mut inversions = 0;
    let mut holds = 0;
    let mut violations = Vec::new();
    let mut faults = String::new();
    let mut forced = 0;
    for (k, checker) in shared.checkers.iter().enumerate() {
        checker.note_expiries(&record);
        let report = checker.report(ReportInputs {
            record: Some(&record),
            orphans: 0,
            wedged_locks: 0,
            hung_after: patience,
            calm_since: Some(record.ended),
        });
        overlaps += report.overlaps;
        signalled += report.signalled_overlaps;
        inversions += report.token_inversions;
        holds += report.holds;
        if k == 0 {
            faults = report.faults.iter().map(|(kind, n)| format!("{kind}={n}")).collect::<Vec<_>>().join(",");
            forced = report.forced_expiries;
        }
        violations.extend(report.violations.iter().map(|v| format!("p{k}: {v}")));
    }
    eprintln!(
        "{name}: seed={seed} seconds={} {} holds={holds} overlaps={overlaps} signalled_overlaps={signalled} \
         token_inversions={inversions} orphans={orphans} forced_expiries={forced} faults=[{faults}] scripted=[{scripted}]",
        duration().as_secs(),
        shared.counts
    );
    for fw in frameworks {
        fw.close().await;
    }
    observer.close().await;
    drop(proxies);
    drop(ensemble);
    assert_eq!(overlaps, 0, "{name} seed={seed}: {violations:#?}");
    assert_eq!(inversions, 0, "{name} seed={seed}: {violations:#?}");
    assert!(holds > 0, "{name} seed={seed}: no partition was ever held");
    // A holder cut off for longer than its session timeout, or expired, is told.
    if !scripted.is_empty() {
        let told = shared.counts.failures.load(Ordering::Relaxed) + shared.counts.may_be_lost.load(Ordering::Relaxed);
        assert!(told > 0, "{name} seed={seed}: {scripted}, and no holder was told of a loss");
    }
    assert!(whole, "{name} seed={seed}: the last group did not split the whole set: {states:?}, party {party:?}");
    assert!(clean, "{name} seed={seed}: {orphans} nodes left behind");
}

/// The standard error policy with the patient retry policy.
/// With seed 7174514424524748287 this found a member that had left staying in the group for the
/// rest of its session (its `PersistentNode` closed between a retried create's NodeExists and
/// its look at the node), so the last group could not split the whole set; test
/// `nodes_faults::a_close_while_the_create_meets_its_own_node_deletes_it`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_partition_standard_default() {
    run(ErrorPolicy::Standard, Retry::Default).await;
}

/// `ErrorPolicy::Session` with the short retry policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_partition_session_short() {
    run(ErrorPolicy::Session, Retry::Short).await;
}
