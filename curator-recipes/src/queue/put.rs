//! Putting items: one node per `put` or `put_multi`, after waiting for room in a bounded queue.
//!
//! ```text
//! put(items)   : bytes = framing(serialize each item)         (bad item: its error, nothing sent)
//!                bounded: Room; then create P/<prefix> (persistent sequential, parents:
//!                containers); the prefix is `queue-`, or the id, priority or delay queue's name
//! Room         : getChildren+watch(P) -> fewer than max_items (or no P): room
//!                                     -> else wait for the watch, then Room again
//!                a timed put gives up (false) when its time runs out
//! background   : prepare (serialize, frame, size) at once, then the same in a tracked task
//!                (module background); closing the queue ends a wait for room, nothing sent
//! ```

use std::time::Duration;

use curator_core::deadline;
use curator_core::{path, CreateMode, CuratorError, Pending, Result};
use tokio::sync::watch;

use super::framing;
use super::shared::Shared;

/// A put made ready before anything is sent: its node's path prefix and its data (the items
/// serialized and framed).
pub(crate) struct Prepared {
    prefix: String,
    data: Vec<u8>,
    /// How many items the node holds.
    pub(crate) count: usize,
}

/// Serializes and frames `items` for a node named `prefix` + sequence number: the serializer's
/// error, or [`CuratorError::DataTooLarge`], before anything is sent.
pub(crate) fn prepare<T: Send + Sync + 'static>(q: &Shared<T>, prefix: &str, items: &[T]) -> Result<Prepared> {
    let raw = items.iter().map(|item| q.serializer.serialize(item)).collect::<Result<Vec<_>>>()?;
    let data = framing::encode(&raw);
    let prefix = path::make_path(&q.path, prefix);
    q.fw.check_data(&prefix, &data)?;
    Ok(Prepared { prefix, data, count: items.len() })
}

/// Puts `items` in one node named `prefix` + sequence number; `false` if a timed put found no
/// room in `max_wait`.
pub(crate) async fn put<T: Send + Sync + 'static>(
    q: &Shared<T>,
    prefix: &str,
    items: &[T],
    max_wait: Option<Duration>,
) -> Result<bool> {
    let prepared = prepare(q, prefix, items)?;
    Ok(send(q, prepared, max_wait).await?.is_some())
}

/// Sends a prepared put: in bounded mode after waiting for room ([`wait_room`]). The node's
/// path, or `None` if a timed put found no room in time.
pub(crate) async fn send<T: Send + Sync + 'static>(
    q: &Shared<T>,
    prepared: Prepared,
    max_wait: Option<Duration>,
) -> Result<Option<String>> {
    let count = prepared.count;
    if !wait_room(q, max_wait, None).await? {
        return Ok(None);
    }
    let node = create(q, prepared).await?;
    curator_core::metrics::queue_put(q.metrics_kind(), count);
    Ok(Some(node))
}

/// The create of a prepared put (room, if bounded, already found): awaited by a put, sent to
/// the framework's ordered background queue by a put in the background.
pub(crate) fn create<T: Send + Sync + 'static>(q: &Shared<T>, prepared: Prepared) -> Pending<String> {
    let Prepared { prefix, data, count } = prepared;
    tracing::debug!(path = %prefix, items = count, "queue put: create (persistent sequential)");
    q.fw.create()
        .creating_parent_containers_if_needed()
        .with_mode(CreateMode::PersistentSequential)
        .for_path(&prefix, data)
}

/// In bounded mode, waits for room: at most `max_wait` (`false` when it runs out); given up,
/// with [`CuratorError::AlreadyClosed`] and nothing sent, once `closing` says the queue
/// closes. At once `true` for a queue without bound.
pub(crate) async fn wait_room<T: Send + Sync + 'static>(
    q: &Shared<T>,
    max_wait: Option<Duration>,
    closing: Option<watch::Receiver<bool>>,
) -> Result<bool> {
    let Some(max_items) = q.max_items else { return Ok(true) };
    let room = wait_for_room(q, max_items);
    let room = async {
        match closing {
            None => room.await,
            Some(mut closing) => tokio::select! {
                room = room => room,
                _ = closing.wait_for(|closing| *closing) => {
                    tracing::debug!(path = %q.path, "background put: the queue closed while it waited for room; nothing sent");
                    Err(CuratorError::AlreadyClosed { what: "DistributedQueue" })
                }
            },
        }
    };
    // A wait too long to count (`Duration::MAX`) is a wait without end.
    match max_wait.map(|wait| deadline::deadline_after(tokio::time::Instant::now(), wait)) {
        None => room.await.map(|()| true),
        Some(at) => match deadline::with_deadline(at, room).await {
            Ok(()) => Ok(true),
            Err(CuratorError::Timeout { .. }) => Ok(false),
            Err(err) => Err(err),
        },
    }
}

/// Waits until the queue holds fewer than `max_items` nodes.
async fn wait_for_room<T: Send + Sync + 'static>(q: &Shared<T>, max_items: usize) -> Result<()> {
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
