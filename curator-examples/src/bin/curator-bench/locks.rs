//! Lock scenarios: `lock` (InterProcessMutex, N sessions), `rwlock` (InterProcessReadWriteLock,
//! N sessions, `--read-pct` reads), and `waiters` (ours: one framework, N acquirers as tasks).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use curator_core::Result;
use curator_recipes::{InterProcessMutex, InterProcessReadWriteLock, QueuedMutex};
use serde_json::json;
use tokio::sync::Barrier;

use crate::args::Args;
use crate::report::{cpu_seconds, line, memory_kib, micros, percentile, round};

/// One timed hold: when `acquire` returned and when `release` was called.
struct Hold {
    acquired: Instant,
    releasing: Instant,
}

/// Per-client results.
struct ClientRun {
    latencies: Vec<f64>,
    read_latencies: Vec<f64>,
    write_latencies: Vec<f64>,
    holds: Vec<Hold>,
}

/// Handoff gaps: sort holds by acquire time; next holder's acquire return minus the previous
/// holder's release call.
fn handoffs(mut holds: Vec<Hold>) -> Vec<f64> {
    holds.sort_by_key(|h| h.acquired);
    holds
        .windows(2)
        .filter(|w| w[1].acquired >= w[0].releasing)
        .map(|w| micros(w[1].acquired - w[0].releasing))
        .collect()
}

/// One slot per client for the lock object it keeps across its cycles, as Curator's peer keeps
/// one `InterProcessMutex` per client (`LockBench.java`).
fn per_client<T>(args: &Args) -> Arc<Vec<OnceLock<T>>> {
    Arc::new((0..args.clients).map(|_| OnceLock::new()).collect())
}

/// The lock object in `slot`, made by `make` on the client's first cycle.
fn once<T: Clone>(slot: &OnceLock<T>, make: impl FnOnce() -> Result<T>) -> Result<T> {
    if let Some(made) = slot.get() {
        return Ok(made.clone());
    }
    let made = make()?;
    Ok(slot.get_or_init(|| made).clone())
}

/// Runs `clients` sessions through warm-up, a barrier, and the timed cycles of `cycle`; returns
/// the timed wall time, the process's CPU seconds over it, and each client's results.
async fn contend<F, Fut>(args: &Args, cycle: F) -> Result<(Duration, f64, Vec<ClientRun>)>
where
    F: Fn(usize, curator_core::CuratorFramework, bool, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(f64, Option<bool>, Instant, Instant)>> + Send,
{
    let fws = crate::clients(args, args.clients).await?;
    crate::ensure_path(&fws[0], &args.path).await?;
    let barrier = Arc::new(Barrier::new(args.clients + 1));
    let cycle = Arc::new(cycle);
    let mut tasks = Vec::new();
    for (i, fw) in fws.iter().cloned().enumerate() {
        let (barrier, cycle, warmup, cycles) = (barrier.clone(), cycle.clone(), args.warmup, args.cycles);
        tasks.push(tokio::spawn(async move {
            for n in 0..warmup {
                cycle(i, fw.clone(), false, n).await?;
            }
            barrier.wait().await;
            let mut run =
                ClientRun { latencies: vec![], read_latencies: vec![], write_latencies: vec![], holds: vec![] };
            for n in 0..cycles {
                let (us, read, acquired, releasing) = cycle(i, fw.clone(), true, n).await?;
                run.latencies.push(us);
                match read {
                    Some(true) => run.read_latencies.push(us),
                    Some(false) => run.write_latencies.push(us),
                    None => {}
                }
                run.holds.push(Hold { acquired, releasing });
            }
            Ok::<_, curator_core::CuratorError>(run)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let mut runs = Vec::new();
    for t in tasks {
        runs.push(t.await.map_err(|e| curator_core::CuratorError::IllegalState(format!("client task: {e}")))??);
    }
    let wall = started.elapsed();
    let cpu = cpu_seconds() - cpu_before;
    for fw in fws {
        fw.close().await;
    }
    Ok((wall, cpu, runs))
}

pub(crate) async fn lock(args: &Args) -> Result<Vec<String>> {
    let lock_path = format!("{}/lock", args.path);
    let path = Arc::new(lock_path);
    let mutexes = per_client(args);
    let (wall, cpu, runs) = contend(args, move |client, fw, _, _| {
        let (path, mutexes) = (path.clone(), mutexes.clone());
        async move {
            let mutex = once(&mutexes[client], || InterProcessMutex::new(&fw, &path))?;
            let t = Instant::now();
            let guard = mutex.acquire().await?;
            let acquired = Instant::now();
            let us = micros(acquired - t);
            let releasing = Instant::now();
            guard.release().await?;
            Ok((us, None, acquired, releasing))
        }
    })
    .await?;
    let mut latencies: Vec<f64> = runs.iter().flat_map(|r| r.latencies.iter().copied()).collect();
    let mut gaps = handoffs(runs.into_iter().flat_map(|r| r.holds).collect());
    let ops = (args.clients * args.cycles).max(1) as f64;
    let extra = if args.clients > 1 {
        json!({
            "handoff_p50_us": round(percentile(&mut gaps, 50.0)), "handoff_p99_us": round(percentile(&mut gaps, 99.0)),
            "cpu_us_per_op": round(cpu * 1e6 / ops),
        })
    } else {
        json!({"cpu_us_per_op": round(cpu * 1e6 / ops)})
    };
    Ok(vec![line("lock", args.clients, args.clients * args.cycles, wall, &mut latencies, extra)])
}

pub(crate) async fn rwlock(args: &Args) -> Result<Vec<String>> {
    let path = Arc::new(format!("{}/rwlock", args.path));
    let read_pct = args.read_pct;
    let locks = per_client(args);
    let (wall, cpu, runs) = contend(args, move |client, fw, _, n| {
        let (path, locks) = (path.clone(), locks.clone());
        async move {
            let rw = once(&locks[client], || InterProcessReadWriteLock::new(&fw, &path))?;
            let read = fastrand::Rng::with_seed((client as u64) << 32 | n as u64).u32(0..100) < read_pct;
            let t = Instant::now();
            let guard = if read { rw.read_lock().acquire().await? } else { rw.write_lock().acquire().await? };
            let acquired = Instant::now();
            let releasing = Instant::now();
            guard.release().await?;
            Ok((micros(acquired - t), Some(read), acquired, releasing))
        }
    })
    .await?;
    let mut latencies: Vec<f64> = runs.iter().flat_map(|r| r.latencies.iter().copied()).collect();
    let mut reads: Vec<f64> = runs.iter().flat_map(|r| r.read_latencies.iter().copied()).collect();
    let mut writes: Vec<f64> = runs.iter().flat_map(|r| r.write_latencies.iter().copied()).collect();
    let extra = json!({
        "read_p50_us": round(percentile(&mut reads, 50.0)),
        "write_p50_us": round(percentile(&mut writes, 50.0)),
        "reads": reads.len(),
        "writes": writes.len(),
        "cpu_us_per_op": round(cpu * 1e6 / (args.clients * args.cycles).max(1) as f64),
    });
    Ok(vec![line("rwlock", args.clients, args.clients * args.cycles, wall, &mut latencies, extra)])
}

/// One framework (one session), `--clients` tasks each acquiring and releasing one mutex
/// `--cycles` times. Reports cycles/s, acquire latency, and peak resident memory.
///
/// `--mode queued` uses a [`QueuedMutex`] (local waiters queue in memory behind one ZooKeeper
/// node per process); the default gives every task its own `InterProcessMutex` node, which
/// costs every waiter a listing of all the others (quadratic: 10,000 of them overwhelm a
/// server with 1 GB of heap, as they would with Curator).
pub(crate) async fn waiters(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let path = format!("{}/lock", args.path);
    let (rss_before, _) = memory_kib();
    let barrier = Arc::new(Barrier::new(args.clients + 1));
    let queued = args.mode == "queued";
    let shared = if queued { Some(Arc::new(QueuedMutex::new(&fw, &path)?)) } else { None };
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let (fw, path, barrier, cycles, shared) =
            (fw.clone(), path.clone(), barrier.clone(), args.cycles, shared.clone());
        tasks.push(tokio::spawn(async move {
            let own = match shared {
                Some(_) => None,
                None => Some(InterProcessMutex::new(&fw, &path)?),
            };
            barrier.wait().await;
            let mut latencies = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                let t = Instant::now();
                match (&shared, &own) {
                    (Some(q), _) => {
                        let guard = q.acquire().await?;
                        latencies.push(micros(t.elapsed()));
                        guard.release().await?;
                    }
                    (None, Some(m)) => {
                        let guard = m.acquire().await?;
                        latencies.push(micros(t.elapsed()));
                        guard.release().await?;
                    }
                    (None, None) => {}
                }
            }
            Ok::<_, curator_core::CuratorError>(latencies)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.map_err(|e| curator_core::CuratorError::IllegalState(format!("waiter task: {e}")))??);
    }
    let wall = started.elapsed();
    let (rss, peak) = memory_kib();
    fw.close().await;
    let extra = json!({
        "rss_kib": rss, "peak_rss_kib": peak, "rss_before_kib": rss_before, "tasks": args.clients,
        "mode": if queued { "queued" } else { "mutex" },
    });
    Ok(vec![line("waiters", args.clients, args.clients * args.cycles, wall, &mut latencies, extra)])
}
