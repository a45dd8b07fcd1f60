//! Putting items: one node per `put` or `put_multi`, after waiting for room in a bounded queue.
//!
//! ```text
//! put(items)   : bytes = framing(serialize each item)         (bad item: its error, nothing sent)
//!                bounded: Room; then create P/<prefix> (persistent sequential, parents:
//!                containers); the prefix is `queue-`, or the id, priority or delay queue's name
//! Room         : getChildren+watch(P) -> fewer than max_items (or no P): room
//!                                     -> else wait for the watch, then Room again
//!                a timed put gives up (false) when its time runs out
//! ```

use std::time::Duration;

use curator_core::deadline;
use curator_core::{path, CreateMode, CuratorError, Result};

use super::framing;
use super::shared::Shared;

/// Puts `items` in one node named `prefix` + sequence number; `false` if a timed put found no
/// room in `max_wait`.
pub(crate) async fn put<T: Send + 'static>(
    q: &Shared<T>,
    prefix: &str,
    items: &[T],
    max_wait: Option<Duration>,
) -> Result<bool> {
    let raw = items.iter().map(|item| q.serializer.serialize(item)).collect::<Result<Vec<_>>>()?;
    let data = framing::encode(&raw);
    let prefix = path::make_path(&q.path, prefix);
    q.fw.check_data(&prefix, &data)?;
    if let Some(max_items) = q.max_items {
        let room = wait_for_room(q, max_items);
        // A wait too long to count (`Duration::MAX`) is a wait without end.
        match max_wait.map(|wait| deadline::deadline_after(tokio::time::Instant::now(), wait)) {
            None => room.await?,
            Some(at) => match deadline::with_deadline(at, room).await {
                Ok(()) => {}
                Err(CuratorError::Timeout { .. }) => return Ok(false),
                Err(err) => return Err(err),
            },
        }
    }
    tracing::debug!(path = %prefix, items = items.len(), "queue put: create (persistent sequential)");
    q.fw.create()
        .creating_parent_containers_if_needed()
        .with_mode(CreateMode::PersistentSequential)
        .for_path(&prefix, data)
        .await?;
    curator_core::metrics::queue_put(q.metrics_kind(), items.len());
    Ok(true)
}

/// Waits until the queue holds fewer than `max_items` nodes.
async fn wait_for_room<T: Send + 'static>(q: &Shared<T>, max_items: usize) -> Result<()> {
    loop {
        tracing::debug!(path = %q.path, "bounded queue: getChildren+watch (room?)");
        let (children, _, watch) = match q.fw.get_children().for_path_and_watch(&q.path).await {
            Ok(listed) => listed,
            Err(CuratorError::NoNode { .. }) => return Ok(()),
            Err(err) => return Err(err),
        };
        if children.len() < max_items {
            return Ok(());
        }
        tracing::debug!(path = %q.path, count = children.len(), max_items, "bounded queue full: waiting");
        deadline::until(&q.path, async {
            watch.changed().await;
            Ok(())
        })
        .await?;
    }
}
