//! Part 3: a read/write lock guards a config node; readers read it concurrently, a writer
//! updates it with a write guarded by its hold, and a NodeCache shows every reader the new
//! value. Then a second writer takes the write lock, its session is expired on purpose, and its
//! guarded write is refused: nothing is written by a writer that no longer holds the lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_cache::{NodeCache, NodeCacheEvent};
use curator_core::{CuratorError, Result};
use curator_recipes::InterProcessReadWriteLock;
use tokio::sync::Barrier;

use super::Checks;

const CONFIG: &str = "/config/app";
const LOCK: &str = "/config/lock";
const READERS: usize = 4;

/// Readers holding the read lock now, and the most at once.
#[derive(Default)]
struct Occupancy {
    readers: AtomicUsize,
    most: AtomicUsize,
    overlaps_with_writer: AtomicUsize,
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let writer = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    writer.create().creating_parents_if_needed().for_path(CONFIG, b"timeout=30s".to_vec()).await?;
    tracing::info!("{CONFIG} = \"timeout=30s\"; {READERS} readers, one writer, lock {LOCK}");

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
            let cache = NodeCache::new(&fw, CONFIG)?;
            let mut events = cache.events();
            cache.start(true)?;
            cache.wait_initialized().await?;
            let lock = InterProcessReadWriteLock::new(&fw, LOCK)?;

            // All readers hold the read lock at the same time.
            let guard = lock.read_lock().acquire().await?;
            let now = occupancy.readers.fetch_add(1, Ordering::SeqCst) + 1;
            occupancy.most.fetch_max(now, Ordering::SeqCst);
            all_in.wait().await;
            let before = cache.current_data().and_then(|d| d.data().map(|b| String::from_utf8_lossy(b).into_owned()));
            tracing::info!("  reader {r} ({now} holding the read lock so far) sees {before:?}");
            occupancy.readers.fetch_sub(1, Ordering::SeqCst);
            guard.release().await?;
            read_done.wait().await;

            // The writer's update reaches this reader's NodeCache.
            written.wait().await;
            let new_value = |c: &NodeCache| c.current_data().is_some_and(|d| d.data() == Some(&b"timeout=45s"[..]));
            let update = async {
                if new_value(&cache) {
                    return true;
                }
                while let Some(event) = events.next().await {
                    if let NodeCacheEvent::NodeChanged(Some(d)) = event {
                        if d.data() == Some(&b"timeout=45s"[..]) {
                            return true;
                        }
                    }
                }
                false
            };
            let seen = tokio::time::timeout(Duration::from_secs(30), update).await.unwrap_or(false);
            let after = cache.current_data().and_then(|d| d.data().map(|b| String::from_utf8_lossy(b).into_owned()));
            tracing::info!("  reader {r}'s NodeCache now shows {after:?}");
            cache.close().await;
            fw.close().await;
            Ok::<_, CuratorError>((before, seen))
        }));
    }

    // The writer waits for the readers to be done, then updates under the write lock.
    read_done.wait().await;
    let lock = InterProcessReadWriteLock::new(&writer, LOCK)?;
    let guard = lock.write_lock().acquire().await?;
    occupancy.overlaps_with_writer.fetch_add(occupancy.readers.load(Ordering::SeqCst), Ordering::SeqCst);
    // Guarded: the server applies it only while the write lock's node exists.
    guard.set_data(CONFIG, b"timeout=45s".to_vec()).await?;
    tracing::info!("  writer (fencing token {:#x}) set \"timeout=45s\" under its write lock", guard.fencing_token());
    guard.release().await?;
    written.wait().await;

    let mut before_ok = true;
    let mut seen_ok = true;
    for r in readers {
        let (before, seen) = r.await.map_err(|e| CuratorError::IllegalState(e.to_string()))??;
        before_ok &= before.as_deref() == Some("timeout=30s");
        seen_ok &= seen;
    }
    let most = occupancy.most.load(Ordering::SeqCst);
    checks.record("readers held the read lock concurrently", most == READERS, format!("{most} at once"));
    checks.record("every reader read the old value under its lock", before_ok, "timeout=30s");
    checks.record(
        "the writer held the lock alone",
        occupancy.overlaps_with_writer.load(Ordering::SeqCst) == 0,
        "no reader inside while writing",
    );
    checks.record("every reader's NodeCache showed the new value", seen_ok, "timeout=45s");
    let (refused, kept) = stale_writer(connect, namespace).await?;
    checks.record("a writer whose lock was lost is refused", refused.is_some(), refused.unwrap_or_default());
    checks.record(
        "and nothing it wrote reached the node",
        kept.as_deref() == Some("timeout=45s"),
        kept.unwrap_or_default(),
    );
    writer.close().await;
    Ok(())
}

/// A writer takes the write lock, then its session is expired from outside (as a long pause or
/// a partition would end it); its guarded write must be refused. Returns the refusal, if any,
/// and what the config node holds after.
async fn stale_writer(connect: &str, namespace: &str) -> Result<(Option<String>, Option<String>)> {
    let fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    let lock = InterProcessReadWriteLock::new(&fw, LOCK)?;
    let guard = lock.write_lock().acquire().await?;
    let session = fw.session().await?;
    tracing::info!("  a second writer holds the write lock; expiring its session {:#x} on purpose", session.id());
    curator_test::expire_session(connect, session.client().session())
        .await
        .map_err(|e| CuratorError::IllegalState(format!("expire_session: {e}")))?;
    drop(session);
    let refused = match guard.set_data(CONFIG, b"timeout=99s".to_vec()).await {
        Err(err @ CuratorError::OwnNodeLost { .. }) => Some(err.to_string()),
        Err(other) => return Err(other),
        Ok(_) => None,
    };
    tracing::info!("  its guarded write: {}", refused.as_deref().unwrap_or("committed (it should not have)"));
    let kept = fw.get_data().for_path(CONFIG).await.ok().map(|b| String::from_utf8_lossy(&b).into_owned());
    drop(guard);
    fw.close().await;
    Ok((refused, kept))
}
