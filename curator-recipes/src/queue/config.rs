//! The types a queue's options are made of, which the builder sets and the consuming task reads:
//! the consumer as the queue holds it, its error type, and the [`ErrorMode`]. On their own so
//! that the task's files need nothing of the builder's.

use std::sync::Arc;

use curator_core::Result;
use futures::future::BoxFuture;

/// What a consumer's failure is: any error.
pub type ConsumerError = Box<dyn std::error::Error + Send + Sync>;

/// The consumer as the queue holds it.
pub(crate) type ConsumerFn<T> = Arc<dyn Fn(T) -> BoxFuture<'static, Result<(), ConsumerError>> + Send + Sync>;

/// What happens to an item node when the consumer fails on one of its items (Curator's
/// `ErrorMode`). It applies in lock-safe mode only: in plain mode the node is deleted before its
/// items are consumed, so a failed item is gone (as in Curator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ErrorMode {
    /// Put the node back at the end of the queue, to be taken again (Curator's default). The
    /// items of the node before the failed one are consumed again too.
    #[default]
    Requeue,
    /// Delete the node; the remaining items of the node are still consumed.
    Delete,
}
