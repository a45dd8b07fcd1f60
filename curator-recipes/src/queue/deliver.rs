//! Handing a node's items to the consumer.
//!
//! ```text
//! decode the framing, then deserialize every item   -> any error: BadItem reported, nothing consumed
//! each item in order: consumer(item)                -> error: ConsumerFailed reported;
//!                                                      Requeue mode: stop here; Delete mode: go on
//! ```
//! Curator's `processMessageBytes` does the same (a corrupt node is logged and treated as done).

use super::config::ErrorMode;
use super::framing;
use super::shared::{QueueEvent, Shared};

/// How a node's items went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumed {
    /// All consumed.
    Done,
    /// All handed over, and the consumer failed on some under [`ErrorMode::Delete`].
    Dropped,
    /// Not readable: reported; the node is to be deleted.
    Bad,
    /// The consumer failed under [`ErrorMode::Requeue`].
    Requeue,
}

/// Consumes the items of the node `name` (at `item_path`) whose data is `data`.
pub(crate) async fn consume<T: Send + Sync + 'static>(
    q: &Shared<T>,
    name: &str,
    item_path: &str,
    data: &[u8],
) -> Consumed {
    let Some(consumer) = &q.consumer else { return Consumed::Requeue };
    let items = framing::decode(item_path, data).and_then(|raw| {
        raw.iter().map(|bytes| q.serializer.deserialize(item_path, bytes)).collect::<Result<Vec<T>, _>>()
    });
    let items = match items {
        Ok(items) => items,
        Err(error) => {
            tracing::error!(path = %item_path, %error, "queue: corrupted item node: reported and deleted");
            q.events.publish(QueueEvent::BadItem { node: name.to_string(), error, data: data.to_vec() });
            return Consumed::Bad;
        }
    };
    let mut outcome = Consumed::Done;
    for item in items {
        curator_core::metrics::queue_taken(q.metrics_kind());
        if let Err(error) = consumer(item).await {
            let mode = q.error_mode();
            tracing::warn!(path = %item_path, %error, ?mode, "queue: the consumer failed on an item");
            q.events.publish(QueueEvent::ConsumerFailed { node: name.to_string(), error: error.to_string(), mode });
            if mode == ErrorMode::Requeue {
                return Consumed::Requeue;
            }
            outcome = Consumed::Dropped;
        }
    }
    outcome
}
