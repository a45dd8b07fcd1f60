//! Part 3: typed configuration guarded by a read/write lock. The config is a model
//! (`AppConfig`, JSON as Curator's `JacksonModelSerializer` writes it); readers hold the read
//! lock together and read it through a cached model; a writer updates it with a transaction
//! guarded by its write lock, and every reader's cache shows the new value. Then a second
//! writer takes the write lock, its session is expired on purpose, and its guarded write is
//! refused: a writer that no longer holds the lock writes nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, Result, ZPath};
use curator_modeled::{CachedModeledFramework, ModelSpec, ModeledCacheEvent, ModeledFramework};
use curator_recipes::InterProcessReadWriteLock;
use serde::{Deserialize, Serialize};
use tokio::sync::Barrier;

use super::Checks;

const CONFIG: &str = "/config/app";
const LOCK: &str = "/config/lock";
const READERS: usize = 4;

/// The application's configuration, as every process reads and writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AppConfig {
    timeout_secs: u32,
    retries: u32,
}

const OLD: AppConfig = AppConfig { timeout_secs: 30, retries: 3 };
const NEW: AppConfig = AppConfig { timeout_secs: 45, retries: 3 };
const STALE: AppConfig = AppConfig { timeout_secs: 99, retries: 0 };

fn model(fw: &CuratorFramework) -> Result<ModeledFramework<AppConfig>> {
    Ok(ModeledFramework::new(fw, ModelSpec::json(ZPath::parse(CONFIG)?).build()?))
}

/// Readers holding the read lock now, and the most at once.
#[derive(Default)]
struct Occupancy {
    readers: AtomicUsize,
    most: AtomicUsize,
    overlaps_with_writer: AtomicUsize,
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let writer = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    let config = model(&writer)?;
    config.set(&OLD).await?;
    tracing::info!("{CONFIG} = {OLD:?}; {READERS} readers, one writer, lock {LOCK}");

    let occupancy = Arc::new(Occupancy::default());
    let all_in = Arc::new(Barrier::new(READERS));
    let read_done = Arc::new(Barrier::new(READERS + 1));
    let written = Arc::new(Barrier::new(READERS + 1));
    let mut readers = Vec::new();
    for r in 0..READERS {
        let (connect, namespace) = (connect.to_string(), namespace.to_string());
        let (occupancy, all_in, read_done, written) =
            (occupancy.clone(), all_in.clone(), read_done.clone(), written.clone());
        readers.push(tokio::spawn(async move {
            let fw = crate::framework(&connect, &namespace, Duration::from_secs(10)).await?;
            let cached = CachedModeledFramework::new(model(&fw)?)?;
            let mut events = cached.events();
            cached.start()?;
            cached.wait_initialized().await?;
            let lock = InterProcessReadWriteLock::new(&fw, LOCK)?;

            // All readers hold the read lock at the same time.
            let guard = lock.read_lock().acquire().await?;
            let now = occupancy.readers.fetch_add(1, Ordering::SeqCst) + 1;
            occupancy.most.fetch_max(now, Ordering::SeqCst);
            all_in.wait().await;
            let before = cached.current()?.map(|node| node.model);
            tracing::info!("  reader {r} ({now} holding the read lock so far) sees {before:?}");
            occupancy.readers.fetch_sub(1, Ordering::SeqCst);
            guard.release().await?;
            read_done.wait().await;

            // The writer's update reaches this reader's cached model, typed.
            written.wait().await;
            let update = async {
                if cached.current().ok().flatten().is_some_and(|node| node.model == NEW) {
                    return true;
                }
                while let Some(event) = events.next().await {
                    if let ModeledCacheEvent::Updated { new, .. } | ModeledCacheEvent::Added(new) = event {
                        if new.model == NEW {
                            return true;
                        }
                    }
                }
                false
            };
            let seen = tokio::time::timeout(Duration::from_secs(30), update).await.unwrap_or(false);
            let after = cached.current()?.map(|node| node.model);
            tracing::info!("  reader {r}'s cached model now shows {after:?}");
            cached.close().await;
            fw.close().await;
            Ok::<_, CuratorError>((before, seen))
        }));
    }

    // The writer waits for the readers to be done, then updates under the write lock, in a
    // transaction guarded by it: the server applies it only while the lock's node exists.
    read_done.wait().await;
    let lock = InterProcessReadWriteLock::new(&writer, LOCK)?;
    let guard = lock.write_lock().acquire().await?;
    occupancy.overlaps_with_writer.fetch_add(occupancy.readers.load(Ordering::SeqCst), Ordering::SeqCst);
    config.set_in(guard.transaction(), &NEW, None)?.commit().await?;
    tracing::info!("  writer (fencing token {:#x}) set {NEW:?} under its write lock", guard.fencing_token());
    guard.release().await?;
    written.wait().await;

    let mut before_ok = true;
    let mut seen_ok = true;
    for r in readers {
        let (before, seen) = r.await.map_err(|e| CuratorError::IllegalState(e.to_string()))??;
        before_ok &= before.as_ref() == Some(&OLD);
        seen_ok &= seen;
    }
    let most = occupancy.most.load(Ordering::SeqCst);
    checks.record("readers held the read lock concurrently", most == READERS, format!("{most} at once"));
    checks.record("every reader read the old config under its lock", before_ok, format!("{OLD:?}"));
    checks.record(
        "the writer held the lock alone",
        occupancy.overlaps_with_writer.load(Ordering::SeqCst) == 0,
        "no reader inside while writing",
    );
    checks.record("every reader's cached model showed the new config", seen_ok, format!("{NEW:?}"));
    let (refused, kept) = stale_writer(connect, namespace).await?;
    checks.record("a writer whose lock was lost is refused", refused.is_some(), refused.unwrap_or_default());
    checks.record("and nothing it wrote reached the config", kept.as_ref() == Some(&NEW), format!("{kept:?}"));
    writer.close().await;
    Ok(())
}

/// A writer takes the write lock, then its session is expired from outside (as a long pause or
/// a partition would end it); its guarded write must be refused. Returns the refusal, if any,
/// and the config after.
async fn stale_writer(connect: &str, namespace: &str) -> Result<(Option<String>, Option<AppConfig>)> {
    let fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    let config = model(&fw)?;
    let lock = InterProcessReadWriteLock::new(&fw, LOCK)?;
    let guard = lock.write_lock().acquire().await?;
    let session = fw.session().await?;
    tracing::info!("  a second writer holds the write lock; expiring its session {:#x} on purpose", session.id());
    curator_test::expire_session(connect, session.client().session())
        .await
        .map_err(|e| CuratorError::IllegalState(format!("expire_session: {e}")))?;
    drop(session);
    // The write may race the expiry: a reply lost with the connection leaves its outcome
    // unknown, and the writer asks again, as a careful writer would, until it is decided.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match config.set_in(guard.transaction(), &STALE, None)?.commit().await {
            Err(err @ CuratorError::OwnNodeLost { .. }) => break Some(err.to_string()),
            Err(err)
                if (err.is_retryable() || matches!(err, CuratorError::OutcomeUnknown { .. }))
                    && tokio::time::Instant::now() < deadline =>
            {
                tracing::info!("  its guarded write is undecided ({err}); asking again");
            }
            Err(other) => return Err(other),
            Ok(_) => break None,
        }
    };
    tracing::info!("  its guarded write: {}", refused.as_deref().unwrap_or("committed (it should not have)"));
    let kept = config.read().await.ok();
    drop(guard);
    fw.close().await;
    Ok((refused, kept))
}
