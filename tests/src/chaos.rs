//! Lock chaos scenarios: contenders loop acquire → non-atomic read-modify-write of a shared
//! counter → release, each through its own fault-injecting proxy, while curator-test's
//! `Injector` drives faults at random from a seed; curator-test's `Checker` then counts
//! overlapping unsignalled holds, lost increments, token inversions and hung acquirers, and the
//! scenario counts orphans and wedged locks.
//!
//! `CHAOS_SECONDS` sets how long each scenario runs ([`CI_SECONDS`] by default, the CI-sized
//! run), `CHAOS_SEED` a seed to repeat, `CHAOS_SUMMARY` a file to which each scenario appends one
//! line of results (`scripts/soak` uses all three for the long soak).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_core::{CuratorFramework, ErrorPolicy};
use curator_recipes::{
    InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, Lease, LockGuard, LockLost,
};
use curator_test::chaos::{ChaosRng, Checker, Ensemble, FaultKind, Injector, Report, ReportInputs, Target};
use curator_test::{eventually, ChaosProxy, TestingCluster, TestingServer, Timing};
use tokio::sync::watch;

use crate::fixture::{builder, connected};
use crate::locks::lock_retry;
use crate::unique_path;
use crate::zk::children;

/// Which recipe the contenders use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    Mutex,
    /// Half the acquires take the write lock, half the read lock.
    ReadWrite,
    /// A semaphore with one lease.
    Semaphore,
}

/// The retry policy of the contenders' frameworks.
pub use crate::policies::Retry;

/// One server or a 3-node ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    Single,
    Cluster,
}

/// One chaos scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub recipe: Recipe,
    pub policy: ErrorPolicy,
    pub retry: Retry,
    pub servers: Servers,
    pub contenders: usize,
}

/// How long a scenario runs in a plain `cargo test` (CI), in seconds: eight scenarios of this
/// with their setup and settling take under two minutes. The soak (`scripts/soak`, ten minutes a
/// scenario by default) is where long runs happen.
pub const CI_SECONDS: u64 = 8;

/// How long a scenario runs: `CHAOS_SECONDS`, [`CI_SECONDS`] by default.
pub fn duration() -> Duration {
    let secs = std::env::var("CHAOS_SECONDS").ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(CI_SECONDS);
    Duration::from_secs(secs)
}

/// What a contender holds.
enum Held {
    Guard(LockGuard),
    Lease(Lease),
}

impl Held {
    fn token(&self) -> i64 {
        match self {
            Held::Guard(g) => g.fencing_token(),
            Held::Lease(l) => l.fencing_token(),
        }
    }
    fn is_held(&self) -> bool {
        match self {
            Held::Guard(g) => g.is_held(),
            Held::Lease(l) => l.is_held(),
        }
    }
    fn lost_watch(&self) -> watch::Receiver<Option<LockLost>> {
        match self {
            Held::Guard(g) => g.lost_watch(),
            Held::Lease(l) => l.lost_watch(),
        }
    }
    async fn release(self) {
        let _ = match self {
            Held::Guard(g) => g.release().await,
            Held::Lease(l) => l.release().await,
        };
    }
}

/// A contender's lock handle.
enum Handle {
    Mutex(InterProcessMutex),
    ReadWrite(InterProcessReadWriteLock),
    Semaphore(InterProcessSemaphoreV2),
}

impl Handle {
    fn new(recipe: Recipe, fw: &CuratorFramework, path: &str) -> Handle {
        match recipe {
            Recipe::Mutex => Handle::Mutex(InterProcessMutex::new(fw, path).expect("valid path")),
            Recipe::ReadWrite => Handle::ReadWrite(InterProcessReadWriteLock::new(fw, path).expect("valid path")),
            Recipe::Semaphore => Handle::Semaphore(InterProcessSemaphoreV2::new(fw, path, 1).expect("valid path")),
        }
    }

    async fn acquire(&self, exclusive: bool, timeout: Duration) -> curator_core::Result<Option<Held>> {
        Ok(match self {
            Handle::Mutex(m) => m.acquire_timeout(timeout).await?.map(Held::Guard),
            Handle::ReadWrite(rw) if exclusive => rw.write_lock().acquire_timeout(timeout).await?.map(Held::Guard),
            Handle::ReadWrite(rw) => rw.read_lock().acquire_timeout(timeout).await?.map(Held::Guard),
            Handle::Semaphore(s) => s.acquire_timeout(1, timeout).await?.and_then(|mut v| v.pop()).map(Held::Lease),
        })
    }

    /// The paths whose children are contenders' nodes.
    fn node_parents(&self, path: &str) -> Vec<String> {
        match self {
            Handle::Semaphore(_) => vec![format!("{path}/locks"), format!("{path}/leases")],
            _ => vec![path.to_string()],
        }
    }
}

/// The servers of a scenario, and where each contender's proxy points.
async fn start_servers(servers: Servers, contenders: usize) -> (Ensemble, Vec<String>, String) {
    match servers {
        Servers::Single => {
            let server = TestingServer::start().await.expect("server");
            let connect = server.connect_string();
            (Ensemble::Server(Arc::new(tokio::sync::Mutex::new(server))), vec![connect.clone(); contenders], connect)
        }
        Servers::Cluster => {
            let cluster = TestingCluster::start(3).await.expect("cluster");
            cluster.wait_for_leader(Timing::new().deadline()).await.expect("a leader");
            let upstreams = (0..contenders).map(|i| cluster.connect_string_of(i % cluster.len())).collect();
            let connect = cluster.connect_string();
            (Ensemble::Cluster(Arc::new(tokio::sync::Mutex::new(cluster))), upstreams, connect)
        }
    }
}

async fn framework(connect: &str, scenario: &Scenario) -> CuratorFramework {
    connected(crate::policies::with_policies(builder(connect), scenario.policy, scenario.retry)).await
}

/// Keeps the framework's current session where the injector can read it without awaiting.
pub fn follow_session(fw: &CuratorFramework) -> Arc<Mutex<Option<zookeeper_client::SessionInfo>>> {
    let slot = Arc::new(Mutex::new(None));
    let (fw, out) = (fw.clone(), slot.clone());
    tokio::spawn(async move {
        let mut states = fw.connection_state_watch();
        loop {
            if let Ok(Ok(session)) = tokio::time::timeout(Duration::from_secs(1), fw.session()).await {
                *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(session.client().session().clone());
            }
            if fw.is_closed() || states.changed().await.is_err() {
                return;
            }
        }
    });
    slot
}

impl Scenario {
    /// A name for logs and summaries.
    pub fn name(&self) -> String {
        format!("{:?}-{:?}-{:?}-{:?}", self.recipe, self.policy, self.retry, self.servers).to_lowercase()
    }

    /// Runs the scenario for [`duration`] and returns the checker's report.
    pub async fn run(&self) -> Report {
        let seed = ChaosRng::seed_from_env("CHAOS_SEED");
        let timing = Timing::new();
        let session_timeout = timing.session_timeout();
        let (ensemble, upstreams, direct) = start_servers(self.servers, self.contenders).await;
        let path = unique_path(&format!("chaos-{}", self.name()));
        let checker = Checker::new();
        let mut frameworks = Vec::new();
        let mut targets = Vec::new();
        let mut proxies = Vec::new();
        for upstream in &upstreams {
            let proxy = Arc::new(ChaosProxy::start(upstream).await.expect("proxy"));
            let fw = framework(&proxy.connect_string(), self).await;
            let session = follow_session(&fw);
            targets.push(Target::new(proxy.clone(), move || session.lock().unwrap_or_else(|e| e.into_inner()).clone()));
            proxies.push(proxy);
            frameworks.push(fw);
        }
        let kinds: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| self.servers == Servers::Cluster || *k != FaultKind::LeaderKill)
            .collect();
        let injector = Injector::builder(seed)
            .targets(targets.clone())
            .ensemble(ensemble.clone())
            .session_timeout(session_timeout)
            .mean_gap(Duration::from_millis(700))
            .kinds(kinds)
            .long_partition_chance(0.2)
            .build()
            .await
            .expect("injector");
        let until = Instant::now() + duration();
        let chaos = injector.spawn(until);
        let mut tasks = Vec::new();
        for (i, fw) in frameworks.iter().enumerate() {
            let handle = Handle::new(self.recipe, fw, &path);
            let (checker, target, recipe) = (checker.clone(), targets[i].clone(), self.recipe);
            let rng = ChaosRng::new(seed.wrapping_add(i as u64 + 1));
            tasks.push(tokio::spawn(contender(i, handle, recipe, checker, target, rng, until, session_timeout)));
        }
        let record = chaos.await.expect("the injector panicked");
        checker.note_expiries(&record);
        // Every acquire must end within `patience` once the faults have stopped; one still
        // open then is hung, and its contender is stopped (dropping the acquire: cancel safety).
        checker.settle(patience(session_timeout)).await;
        for mut task in tasks {
            // What is left of a hold begun before the end, and its release.
            if tokio::time::timeout(session_timeout * 2, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }

        // Orphans: nodes still there once every contender stopped and cleanups had time.
        let observer = connected(lock_retry(builder(&direct))).await;
        let parents = Handle::new(self.recipe, &observer, &path).node_parents(&path);
        let left = || async {
            let mut left = 0;
            for parent in &parents {
                left += children(&observer, parent).await.len();
            }
            left as u64
        };
        eventually(session_timeout * 2 + Duration::from_secs(10), || async { left().await == 0 }).await;
        let orphans = left().await;
        // Wedged: a fresh client must be able to take the lock.
        let fresh = Handle::new(self.recipe, &observer, &path);
        let wedged = match fresh.acquire(true, timing.deadline()).await {
            Ok(Some(held)) => {
                held.release().await;
                0
            }
            _ => 1,
        };
        let report = checker.report(ReportInputs {
            record: Some(&record),
            orphans,
            wedged_locks: wedged,
            hung_after: patience(session_timeout),
            calm_since: Some(record.ended),
        });
        eprintln!("{}: {report:#}", self.name());
        if let Ok(file) = std::env::var("CHAOS_SUMMARY") {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
                let _ =
                    writeln!(f, "scenario={} seconds={} {}", self.name(), duration().as_secs(), report.to_key_values());
            }
        }
        for fw in frameworks {
            fw.close().await;
        }
        observer.close().await;
        drop(proxies);
        // The servers stop here, after everyone is done with them.
        drop(ensemble);
        report
    }
}

/// How long an acquire may stay open once the faults have stopped before the checker calls it
/// hung: a session timeout for a holder cut off at the end to be expired, two more for the
/// long holds queued ahead of it, and the test deadline for the connection to come back.
fn patience(session_timeout: Duration) -> Duration {
    session_timeout * 3 + Timing::new().deadline()
}

/// One contender's loop until `until`.
#[allow(clippy::too_many_arguments)]
async fn contender(
    i: usize,
    handle: Handle,
    recipe: Recipe,
    checker: Checker,
    target: Target,
    mut rng: ChaosRng,
    until: Instant,
    session_timeout: Duration,
) {
    while Instant::now() < until {
        let exclusive = recipe != Recipe::ReadWrite || rng.chance(0.5);
        // Half the acquires are given up early, at random (cancel safety). The others wait
        // as long as the faults last and `patience` beyond: the scenario stops them first.
        let cancel = rng.chance(0.5);
        let wait = if cancel {
            rng.between(Duration::ZERO, Duration::from_millis(300))
        } else {
            until.saturating_duration_since(Instant::now()) + patience(session_timeout) * 2
        };
        let id = checker.begin_acquire(i);
        let held = match handle.acquire(exclusive, wait).await {
            Ok(Some(held)) => held,
            Ok(None) if !cancel => continue, // hung: left open for the checker
            Ok(None) | Err(_) => {
                checker.end_acquire(id);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        checker.end_acquire(id);
        target.set_holding(true);
        let hold = checker.begin_hold(i, held.token(), exclusive);
        let mut lost = held.lost_watch();
        let signal = {
            let (checker, mut lost) = (checker.clone(), lost.clone());
            tokio::spawn(async move {
                loop {
                    if let Some(reason) = *lost.borrow_and_update() {
                        if reason != LockLost::Released {
                            checker.lost(hold, Instant::now());
                        }
                        return;
                    }
                    if lost.changed().await.is_err() {
                        return;
                    }
                }
            })
        };
        // Mostly short holds; some longer than the session timeout, for partitions to hit.
        let hold_for = if rng.chance(0.1) {
            session_timeout + session_timeout / 2
        } else {
            rng.between(Duration::ZERO, Duration::from_millis(30))
        };
        let value = checker.read_counter();
        tokio::select! {
            _ = tokio::time::sleep(hold_for) => {}
            _ = lost.wait_for(|l| l.is_some()) => {}
        }
        if exclusive && held.is_held() {
            checker.increment(hold, value);
        }
        checker.end_hold(hold);
        target.set_holding(false);
        if rng.chance(0.5) {
            held.release().await;
        } else {
            drop(held);
        }
        signal.abort();
    }
}
