//! Atomic counter scenario `atomic_increments`: increments per second of one
//! `DistributedAtomicLong` (optimistic mode, no promotion) shared by S sessions.
//!
//! `--sessions S` sessions (1 by default), each a framework of its own with its own handle on
//! the counter `<path>/counter`, which the first session initializes to 0. Each session first
//! makes `--warmup-increments W` untimed increments (20 by default: its write tag is made, the
//! code paths are warm), then, once every session is ready, all start together and each makes
//! `--increments I` increments one after the other (1000 by default), or increments for
//! `--seconds D` if given. The counter's retry policy is `RetryNTimes(--retry-times N,
//! --retry-sleep-ms M)` (20 and 1 ms by default; scripts/bench-atomic says why), the same on the
//! Java side (`bench/java/AtomicBench.java`, Curator 5.4's `DistributedAtomicLong`).
//!
//! A sample is one `increment()` call, successful or not. `ops` and `ops_per_s` count the
//! successful increments of the timed phase over its wall time (from the common start to the
//! last session's end). The line also carries the failed increments (`succeeded == false`: the
//! policy ran out under conflicts), the optimistic tries (`AtomicStats`) in all and per
//! increment, the server's requests per successful increment (`zk_packets_received` through
//! `mntr` once the server is quiet before the start and again after the end, as `leader_failover`
//! counts them), and a correctness check: the counter moved by exactly the successful
//! increments, and their post-values are distinct and fill that range. A failed check is an
//! error exit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework, Result};
use curator_recipes::DistributedAtomicLong;
use serde_json::json;
use tokio::sync::Barrier;

use crate::args::Args;
use crate::report::{line, micros, Counter};

/// How long the sessions may take to connect and warm up.
const READY_DEADLINE: Duration = Duration::from_secs(120);

/// What one session's timed phase did.
#[derive(Default)]
struct Session {
    /// Each `increment()` call's duration, µs.
    latencies: Vec<f64>,
    /// The post-values of the successful increments.
    posts: Vec<i64>,
    failed: u64,
    tries: u64,
}

fn counter(fw: &CuratorFramework, path: &str, args: &Args) -> Result<DistributedAtomicLong> {
    DistributedAtomicLong::new(fw, path, RetryNTimes::new(args.retry_times, Duration::from_millis(args.retry_sleep_ms)))
}

/// One session: warm-up, wait for the others, then the timed increments.
async fn run_session(
    counter: DistributedAtomicLong,
    args: Arc<Args>,
    ready: Arc<Barrier>,
    start: Arc<Barrier>,
) -> Result<(Session, u64)> {
    let mut warm_successes = 0;
    for _ in 0..args.warmup_increments {
        if counter.increment().await?.succeeded() {
            warm_successes += 1;
        }
    }
    ready.wait().await; // every session warm; the counter is read and counted
    start.wait().await;
    let deadline = (args.seconds > 0.0).then(|| Instant::now() + Duration::from_secs_f64(args.seconds));
    let mut s = Session::default();
    let mut n = 0;
    loop {
        match deadline {
            Some(d) if Instant::now() >= d => break,
            None if n >= args.increments => break,
            _ => {}
        }
        n += 1;
        let t0 = Instant::now();
        let value = counter.increment().await?;
        s.latencies.push(micros(t0.elapsed()));
        s.tries += u64::from(value.stats.optimistic_tries);
        if value.succeeded() {
            s.posts.push(value.post_value);
        } else {
            s.failed += 1;
        }
    }
    drop(counter); // its write tag goes (in the framework's background)
    Ok((s, warm_successes))
}

pub(crate) async fn atomic_increments(args: &Args) -> Result<Vec<String>> {
    let sessions = args.sessions.max(1);
    let path = format!("{}/counter", args.path);
    let server = Counter::new(&args.connect);
    let fws = crate::clients(args, sessions).await?;
    let observer = counter(&fws[0], &path, args)?;
    observer.initialize(0).await?;

    let shared = Arc::new(args.clone());
    let ready = Arc::new(Barrier::new(sessions + 1));
    let start = Arc::new(Barrier::new(sessions + 1));
    let mut tasks = Vec::with_capacity(sessions);
    for fw in &fws {
        let handle = counter(fw, &path, args)?;
        tasks.push(tokio::spawn(run_session(handle, shared.clone(), ready.clone(), start.clone())));
    }
    if tokio::time::timeout(READY_DEADLINE, ready.wait()).await.is_err() {
        return Err(CuratorError::IllegalState(format!("the sessions were not warm within {READY_DEADLINE:?}")));
    }
    let before = observer.get().await?.post_value;
    let p0 = server.quiet().await?;
    start.wait().await;
    let t0 = Instant::now();
    let mut done = Vec::with_capacity(sessions);
    for task in tasks {
        let finished =
            task.await.map_err(|e| CuratorError::IllegalState(format!("a session's task failed: {e}")))??;
        done.push(finished);
    }
    let wall = t0.elapsed();
    let p1 = server.quiet().await?;
    let after = observer.get().await?.post_value;
    drop(observer);

    let warm_successes: u64 = done.iter().map(|(_, w)| w).sum();
    let mut latencies: Vec<f64> = done.iter().flat_map(|(s, _)| s.latencies.iter().copied()).collect();
    let mut posts: Vec<i64> = done.iter().flat_map(|(s, _)| s.posts.iter().copied()).collect();
    let failed: u64 = done.iter().map(|(s, _)| s.failed).sum();
    let tries: u64 = done.iter().map(|(s, _)| s.tries).sum();
    let calls = latencies.len() as u64;
    let succeeded = posts.len() as u64;

    // Exactly once: the counter moved by the successes, each post-value once, filling the range.
    posts.sort_unstable();
    let filled = posts.iter().zip(before + 1..).all(|(post, want)| *post == want);
    let correct = before == warm_successes as i64 && after - before == succeeded as i64 && filled;

    let requests = p1.saturating_sub(p0) as f64;
    let per = |x: f64| if succeeded > 0 { (x / succeeded as f64 * 100.0).round() / 100.0 } else { 0.0 };
    let extra = json!({
        "sessions": sessions,
        "increments": calls,
        "succeeded": succeeded,
        "failed": failed,
        "tries": tries,
        "tries_per_increment": if calls > 0 { (tries as f64 / calls as f64 * 1000.0).round() / 1000.0 } else { 0.0 },
        "requests_per_increment": per(requests),
        "retry": format!("RetryNTimes({}, {} ms)", args.retry_times, args.retry_sleep_ms),
        "value_before": before,
        "value_after": after,
        "correct": correct,
        "wall_s": (wall.as_secs_f64() * 1000.0).round() / 1000.0,
    });
    let result = line("atomic_increments", sessions, succeeded as usize, wall, &mut latencies, extra);

    for fw in &fws {
        fw.close().await;
    }
    if !correct {
        eprintln!("curator-bench: atomic_increments: {result}");
        return Err(CuratorError::IllegalState(format!(
            "the counter is wrong: {before} after {warm_successes} warm-up successes, then {after} after {succeeded} successes (post-values filling the range: {filled})"
        )));
    }
    Ok(vec![result])
}
