//! [`DistributedIdQueue`]: Curator's `DistributedIdQueue`, items with ids, over the one queue.

use std::time::Duration;

use curator_core::{CuratorError, Result};

use super::distributed::DistributedQueue;
use super::order::{id_of, id_prefix, SEPARATOR};
use super::remove;
use super::wrapper::delegate_to_queue;

/// A queue whose items carry an id, so that they can be removed before they are consumed:
/// nodes `P/queue-|<id>|<seq>` (Curator's `DistributedIdQueue`), taken first in, first out
/// whatever their ids. Built by
/// [`QueueBuilder::build_id_queue`](super::QueueBuilder::build_id_queue); everything else is
/// [`DistributedQueue`]'s, lock-safe mode included.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{DistributedQueue, StringSerializer};
///
/// // A producer only (no consumer): items wait until a consumer starts.
/// let queue = DistributedQueue::builder(&fw, "/orders/queue", StringSerializer).build_id_queue()?;
/// queue.start()?;
/// queue.ready().await?;
/// queue.put(&"ship order 12".to_string(), "order-12").await?;
/// queue.put(&"ship order 13".to_string(), "order-13").await?;
/// assert_eq!(queue.remove("order-12").await?, 1); // cancelled before anyone took it
/// assert_eq!(queue.remove("order-12").await?, 0);
/// queue.close().await;
/// # Ok(()) }
/// ```
pub struct DistributedIdQueue<T> {
    queue: DistributedQueue<T>,
}

delegate_to_queue!(DistributedIdQueue);

impl<T: Send + Sync + 'static> DistributedIdQueue<T> {
    pub(crate) fn new(queue: DistributedQueue<T>) -> Self {
        Self { queue }
    }

    /// Puts `item` with the id `id`: a new node `P/queue-|<id>|<seq>`. Ids need not be
    /// unique; [`remove`](Self::remove) removes every item with its id.
    ///
    /// # Errors
    /// [`CuratorError::InvalidArgument`] for an empty id or one holding `|` or `/` (Curator
    /// silently turns those into `_`, so that a `remove` with the id given never finds the
    /// item); then as [`DistributedQueue::put`].
    pub async fn put(&self, item: &T, id: &str) -> Result<()> {
        let prefix = self.prefix(id)?;
        self.queue.put_named(&prefix, std::slice::from_ref(item), None).await.map(|_| ())
    }

    /// As [`put`](Self::put), waiting at most `max_wait` for room in a bounded queue: `false`
    /// (nothing put) if there was none in time.
    pub async fn put_timeout(&self, item: &T, id: &str, max_wait: Duration) -> Result<bool> {
        let prefix = self.prefix(id)?;
        self.queue.put_named(&prefix, std::slice::from_ref(item), Some(max_wait)).await
    }

    /// As [`put`](Self::put), in the background: returns once the item is serialized, and the
    /// put's outcome reaches the put listeners ([`DistributedQueue::put_in_background`]).
    ///
    /// # Errors
    /// As [`put`](Self::put)'s checks of the id, then as
    /// [`DistributedQueue::put_in_background`].
    pub fn put_in_background(&self, item: T, id: &str) -> Result<()> {
        let prefix = self.prefix(id)?;
        self.queue.put_named_in_background(&prefix, vec![item])
    }

    /// Removes the items with the id `id` that no consumer has taken: how many were removed
    /// (Curator's `remove`). In lock-safe mode an item a consumer holds is not removed. An
    /// item is counted as not removed only when this call did not delete it.
    ///
    /// # Errors
    /// [`CuratorError::InvalidArgument`] for an id [`put`](Self::put) refuses; the error of
    /// listing the queue or of a delete; [`CuratorError::Closed`]. A delete whose reply was
    /// lost and that nothing decides (in plain mode, any: a delete by path leaves no evidence;
    /// in lock-safe mode only one whose write tag, which decides the fenced delete, was changed
    /// by someone else or gone past its reap age) ends the call with an error whose
    /// [`outcome_unknown`](CuratorError::outcome_unknown) holds, on that item's path: it may
    /// have been removed; the items removed before it are not counted.
    pub async fn remove(&self, id: &str) -> Result<usize> {
        self.prefix(id)?;
        let q = &self.queue.shared;
        let mut removed = 0;
        for name in remove::children(q).await? {
            if id_of(&name) == Some(id) && remove::try_remove(q, &name).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The name prefix of an item with the id `id`, if the id is valid.
    fn prefix(&self, id: &str) -> Result<String> {
        let reason = if id.is_empty() {
            "an item id cannot be empty".to_string()
        } else if id.contains(SEPARATOR) || id.contains('/') {
            format!("item id {id:?} holds '{SEPARATOR}' or '/'")
        } else {
            return Ok(id_prefix(id));
        };
        Err(CuratorError::InvalidArgument { path: self.path().to_string(), reason })
    }
}
