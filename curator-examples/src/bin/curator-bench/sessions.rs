//! Many frameworks in one process, scenario `sessions` (issue 30): what a framework costs when a
//! process holds many.
//!
//! `--clients N` frameworks (each its own session) connect, at most [`CONNECT_WINDOW`] at a time
//! (Curator's side, `bench/java/SessionsBench.java`, follows the same rule). Each then acquires an
//! `InterProcessMutex` of its own (`<path>/locks/<i>`: every framework holds a lock node at once)
//! and starts a `NodeCache` on `<path>/node` (its initial build done). A connect sample runs from
//! just before the framework's `start()` to the return of `block_until_connected`.
//!
//! Once all are up, the process settles (see [`settle`]), then it reads its resident memory
//! (`VmRSS`) and thread count (`Threads`, both from `/proc/self/status`) and reports them as
//! deltas from the readings taken before the first framework was built, over N: memory per
//! framework and threads per framework. A framework of ours starts no thread of its own: its
//! I/O and timers are tasks on the caller's runtime, and listener callbacks run on that
//! runtime's blocking pool, which is shared (see docs/architecture.md). Everything is closed
//! cleanly at the end (locks released, caches and frameworks closed).
//!
//! Ours, `--mode listeners`: each cache also gets a callback listener; after the readings the
//! node is written once, and the line adds how long until every listener heard the change
//! (`listeners_all_us`) and the most threads the process had meanwhile
//! (`listeners_threads_peak`): callbacks run on the runtime's blocking pool, which grows with
//! the callbacks waiting at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_cache::{NodeCache, NodeCacheEvent};
use curator_core::{CreateMode, CuratorError, CuratorFramework, ExponentialBackoffRetry, Result};
use curator_recipes::{InterProcessMutex, LockGuard};
use futures::stream::{StreamExt, TryStreamExt};
use serde_json::json;

use crate::args::Args;
use crate::report::{line, micros, percentile, round};

/// How many frameworks connect at once.
pub(crate) const CONNECT_WINDOW: usize = 64;
/// How often the process's thread count is read while it settles.
const SETTLE_POLL: Duration = Duration::from_millis(100);
/// How long the counts must stay the same to count as settled.
const SETTLED_FOR: Duration = Duration::from_millis(500);
/// The longest wait to settle; the readings are taken anyway after it.
const SETTLE_DEADLINE: Duration = Duration::from_secs(15);

/// One framework as the scenario holds it.
struct Held {
    fw: CuratorFramework,
    guard: LockGuard,
    cache: NodeCache,
    connect_us: f64,
}

/// How long every listener may take to hear the change (`--mode listeners`).
const LISTEN_DEADLINE: Duration = Duration::from_secs(30);

/// `VmRSS` in bytes and `Threads` of this process.
fn rss_and_threads() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:") * 1024, field("Threads:"))
}

/// Waits until the thread count and resident memory have not changed for [`SETTLED_FOR`] (or
/// [`SETTLE_DEADLINE`] has passed), and returns the last readings.
async fn settle() -> (u64, u64) {
    let deadline = Instant::now() + SETTLE_DEADLINE;
    let mut last = rss_and_threads();
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(SETTLE_POLL).await; // the poll interval
        let now = rss_and_threads();
        if now.1 != last.1 || now.0.abs_diff(last.0) > 64 * 1024 {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= SETTLED_FOR || Instant::now() > deadline {
            return now;
        }
        if Instant::now() > deadline {
            return now;
        }
    }
}

/// Framework `i`: connects, takes its lock, starts its cache.
async fn up(args: &Args, i: usize, node: &str, heard: Option<Arc<AtomicUsize>>) -> Result<Held> {
    let fw = CuratorFramework::builder()
        .connect_string(&args.connect)
        .session_timeout(Duration::from_secs(30))
        .connection_timeout(Duration::from_secs(15))
        .retry_policy(ExponentialBackoffRetry::new(Duration::from_millis(100), 5))
        .build()?;
    let t0 = Instant::now();
    fw.start()?;
    fw.block_until_connected(Duration::from_secs(30)).await?;
    let connect_us = micros(t0.elapsed());
    let mutex = InterProcessMutex::new(&fw, &format!("{}/locks/{i:05}", args.path))?;
    let guard = mutex.acquire().await?;
    let cache = NodeCache::new(&fw, node)?;
    if let Some(heard) = heard {
        cache.add_listener(move |event: &NodeCacheEvent| {
            if let NodeCacheEvent::NodeChanged(Some(data)) = event {
                if data.data() == Some(&b"changed"[..]) {
                    heard.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    cache.start(true)?;
    cache.wait_initialized().await?;
    Ok(Held { fw, guard, cache, connect_us })
}

pub(crate) async fn sessions(args: &Args) -> Result<Vec<String>> {
    let n = args.clients.max(1);
    let node = format!("{}/node", args.path);
    {
        let setup = crate::client(args).await?;
        match setup
            .create()
            .creating_parents_if_needed()
            .with_mode(CreateMode::Persistent)
            .for_path(&node, b"x".to_vec())
            .await
        {
            Ok(_) | Err(CuratorError::NodeExists { .. }) => {}
            Err(e) => return Err(e),
        }
        setup.close().await;
    }
    let (rss0, threads0) = settle().await;
    let heard = (args.mode == "listeners").then(|| Arc::new(AtomicUsize::new(0)));

    let started = Instant::now();
    let held: Vec<Held> = futures::stream::iter(0..n)
        .map(|i| {
            let (node, heard) = (&node, heard.clone());
            async move { up(args, i, node, heard).await }
        })
        .buffer_unordered(CONNECT_WINDOW)
        .try_collect()
        .await?;
    let connect_all = started.elapsed();
    let (rss1, threads1) = settle().await;

    let listened = match &heard {
        Some(heard) => Some(listen(&held[0].fw, &node, heard, n).await?),
        None => None,
    };

    let mut connects: Vec<f64> = held.iter().map(|h| h.connect_us).collect();
    let rss_per = rss1.saturating_sub(rss0) as f64 / n as f64;
    let threads_per = (threads1 as f64 - threads0 as f64) / n as f64;
    let (p50, p99) = (round(percentile(&mut connects, 50.0)), round(percentile(&mut connects, 99.0)));
    let mut extra = json!({
        "connect_p50_us": p50,
        "connect_p99_us": p99,
        "connect_all_us": round(micros(connect_all)),
        "connect_window": CONNECT_WINDOW,
        "rss_bytes_per_client": rss_per.round(),
        "rss_before_bytes": rss0,
        "rss_after_bytes": rss1,
        "threads": threads1,
        "threads_before": threads0,
        "threads_per_client": (threads_per * 1000.0).round() / 1000.0,
    });
    if let (Some((all, peak)), Some(obj)) = (listened, extra.as_object_mut()) {
        obj.insert("listeners_all_us".into(), json!(round(micros(all))));
        obj.insert("listeners_threads_peak".into(), json!(peak));
    }
    let result = line("sessions", n, n, connect_all, &mut connects, extra);

    futures::stream::iter(held)
        .for_each_concurrent(CONNECT_WINDOW, |h| async move {
            if let Err(e) = h.guard.release().await {
                tracing::warn!(error = %e, "a lock's release failed");
            }
            h.cache.close().await;
            h.fw.close().await;
        })
        .await;
    Ok(vec![result])
}

/// Writes the node once and waits until all `n` listeners heard it; returns how long that took
/// and the most threads the process had meanwhile (read every millisecond).
async fn listen(fw: &CuratorFramework, node: &str, heard: &AtomicUsize, n: usize) -> Result<(Duration, u64)> {
    let t0 = Instant::now();
    fw.set_data().for_path(node, b"changed".to_vec()).await?;
    let mut peak = rss_and_threads().1;
    while heard.load(Ordering::Relaxed) < n {
        if t0.elapsed() > LISTEN_DEADLINE {
            let got = heard.load(Ordering::Relaxed);
            return Err(CuratorError::IllegalState(format!("{got} of {n} listeners heard the change")));
        }
        tokio::time::sleep(Duration::from_millis(1)).await; // the poll interval
        peak = peak.max(rss_and_threads().1);
    }
    Ok((t0.elapsed(), peak))
}
