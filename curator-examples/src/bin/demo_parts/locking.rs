//! Part 1: 30 workers, each its own session, contend for one mutex and increment a counter node
//! under it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::{CuratorError, Result};
use curator_recipes::InterProcessMutex;
use tokio::sync::Mutex;

use super::Checks;

const WORKERS: usize = 30;
const ROUNDS: usize = 3;
const LOCK: &str = "/locking/lock";
const COUNTER: &str = "/locking/counter";

/// One hold of the lock, as a worker saw it.
struct Hold {
    worker: usize,
    token: i64,
    waited: Duration,
    acquired: Instant,
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let setup = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    setup.create().creating_parents_if_needed().for_path(COUNTER, 0u64.to_be_bytes().to_vec()).await?;
    tracing::info!("{WORKERS} workers, each with its own session, {ROUNDS} rounds each on {LOCK}");

    let holds = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let (connect, namespace, holds) = (connect.to_string(), namespace.to_string(), holds.clone());
        tasks.push(tokio::spawn(async move {
            let fw = crate::framework(&connect, &namespace, Duration::from_secs(10)).await?;
            let mutex = InterProcessMutex::new(&fw, LOCK)?;
            for _ in 0..ROUNDS {
                let asked = Instant::now();
                let guard = mutex.acquire().await?;
                let waited = asked.elapsed();
                // Read, then write with the version read: exclusive holders never conflict.
                let (data, stat) = fw.get_data().for_path_with_stat(COUNTER).await?;
                let value = u64::from_be_bytes(data.as_slice().try_into().map_err(|_| CuratorError::BadData {
                    path: COUNTER.into(),
                    reason: "not an 8-byte counter".into(),
                })?);
                fw.set_data().with_version(stat.version).for_path(COUNTER, (value + 1).to_be_bytes().to_vec()).await?;
                holds.lock().await.push(Hold {
                    worker,
                    token: guard.fencing_token(),
                    waited,
                    acquired: Instant::now(),
                });
                guard.release().await?;
            }
            fw.close().await;
            Ok::<_, CuratorError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| CuratorError::IllegalState(format!("worker task: {e}")))??;
    }

    let data = setup.get_data().for_path(COUNTER).await?;
    let count = data.as_slice().try_into().map(u64::from_be_bytes).unwrap_or(0);
    let mut holds = std::mem::take(&mut *holds.lock().await);
    holds.sort_by_key(|h| h.acquired);
    let tokens: Vec<i64> = holds.iter().map(|h| h.token).collect();
    let first: Vec<String> = holds.iter().take(8).map(|h| format!("w{}:{:#x}", h.worker, h.token)).collect();
    tracing::info!("fencing tokens in acquisition order: {} …", first.join(" "));
    let mut waits: Vec<Duration> = holds.iter().map(|h| h.waited).collect();
    waits.sort();
    let pct =
        |p: usize| waits.get((waits.len() * p / 100).min(waits.len().saturating_sub(1))).copied().unwrap_or_default();
    tracing::info!("wait for the lock: min {:?}, median {:?}, max {:?}", pct(0), pct(50), pct(100));

    let expected = (WORKERS * ROUNDS) as u64;
    checks.record(
        "counter = workers × rounds (no lost increment)",
        count == expected,
        format!("{count} = {WORKERS} × {ROUNDS}"),
    );
    checks.record(
        "fencing tokens grow with every acquisition",
        tokens.windows(2).all(|w| w[0] < w[1]) && tokens.len() == WORKERS * ROUNDS,
        format!(
            "{} tokens, from {:#x} to {:#x}",
            tokens.len(),
            tokens.first().unwrap_or(&0),
            tokens.last().unwrap_or(&0)
        ),
    );
    let leftover = setup.get_children().for_path("/locking/lock").await.unwrap_or_default();
    checks.record("no lock node left behind", leftover.is_empty(), format!("{} nodes under {LOCK}", leftover.len()));
    setup.close().await;
    Ok(())
}
