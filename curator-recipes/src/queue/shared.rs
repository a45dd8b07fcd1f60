//! What a queue's handle and its consuming task share: the [`Shared`] state (its options and
//! listeners), the [`QueueEvent`]s the task reports, and the making of the queue's paths. The
//! handle (`distributed.rs`) and the task's files (`consumer.rs`, `take.rs`, `put.rs`, ...)
//! import them from here, and the builder (`builder.rs`) makes the [`Shared`] a queue starts from.

use std::sync::{Arc, Mutex};

use curator_core::Listeners;
use curator_core::{CuratorError, CuratorFramework, Result, WriteTag};

use super::background::Puts;
use super::config::{ConsumerFn, ErrorMode};
use super::order::ItemOrder;
use super::serializer::QueueSerializer;

/// What a queue's listeners receive (from the consuming task).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum QueueEvent {
    /// The items of `node` were consumed and the node removed (in lock-safe mode: by our
    /// fenced final delete).
    Consumed {
        /// The item node's name.
        node: String,
    },
    /// The data of `node` is not Curator's framing, or the serializer could not read an item of
    /// it: nothing of it was consumed, and it was deleted (as Curator does).
    BadItem {
        /// The item node's name.
        node: String,
        /// What is wrong ([`CuratorError::BadData`], or the serializer's error).
        error: CuratorError,
        /// The node's data.
        data: Vec<u8>,
    },
    /// The consumer failed on an item of `node`; `mode` says what became of the node.
    ConsumerFailed {
        /// The item node's name.
        node: String,
        /// The consumer's error, as text.
        error: String,
        /// The error mode applied.
        mode: ErrorMode,
    },
    /// Lock-safe mode: the lock on `node` may have been lost before the node was finished (the
    /// connection was suspended under `ErrorPolicy::Standard`, its session ended, or its lock
    /// node was deleted): the consumer, if still running, was dropped, and the node was left
    /// for whoever holds it next.
    LockLost {
        /// The item node's name.
        node: String,
    },
    /// A ZooKeeper error in the consuming task (the retry policy gave up on a request); the
    /// task goes on after a pause.
    ///
    /// One whose [`outcome_unknown`](CuratorError::outcome_unknown) holds, on an item node's
    /// path, is a take that may have removed the node without consuming it: in plain mode a
    /// delete whose reply was lost, the node gone since (this take's delete or another
    /// consumer's: nothing tells); in lock-safe mode a fenced final multi whose reply was lost
    /// and that the queue handle's write tag could not decide (someone else changed the tag, or
    /// it was gone past its reap age). The item may be lost (delivery is at most once); it is
    /// never consumed twice by this queue for it. docs/architecture.md section 17.2.
    Error {
        /// The error.
        error: CuratorError,
    },
}

/// What the queue's task and its handle share.
pub(crate) struct Shared<T> {
    pub(crate) fw: CuratorFramework,
    pub(crate) path: String,
    pub(crate) lock_path: Option<String>,
    pub(crate) serializer: Arc<dyn QueueSerializer<T>>,
    pub(crate) consumer: Option<ConsumerFn<T>>,
    pub(crate) error_mode: Mutex<ErrorMode>,
    pub(crate) max_items: Option<usize>,
    pub(crate) order: ItemOrder,
    /// Re-list (and so re-sort) after this many items of a listing if the children changed
    /// meanwhile (Curator's `minItemsBeforeRefresh`, priority queues only); `None`: never.
    pub(crate) refresh_after: Option<usize>,
    pub(crate) events: Listeners<QueueEvent>,
    /// The puts made in the background: their listeners and count (`background.rs`).
    pub(crate) puts: Puts<T>,
    /// Lock-safe mode: the handle's write tag under the lock path, which decides a fenced final
    /// multi whose reply was lost (`fence.rs`). Made (no request) when first asked for; its node
    /// is made by the handle's first multi, and deleted once the queue closes or its handle
    /// goes (docs/architecture.md section 17.2).
    pub(crate) tag: Mutex<Option<WriteTag>>,
}

impl<T> Shared<T> {
    /// The `queue` label of the queue's metrics: lock-safe with a lock path, else plain.
    pub(crate) fn metrics_kind(&self) -> &'static str {
        match self.lock_path {
            Some(_) => curator_core::metrics::queue::LOCK_SAFE,
            None => curator_core::metrics::queue::DISTRIBUTED,
        }
    }

    pub(crate) fn error_mode(&self) -> ErrorMode {
        *self.error_mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handle's write tag (lock-safe mode only), made when first asked for. `None` without a
    /// lock path, or if the tag cannot be made (a lock path the builder checked is valid): the
    /// fence then goes without, and a lost reply is `OutcomeUnknown`.
    pub(crate) fn write_tag(&self) -> Option<WriteTag> {
        let lock_path = self.lock_path.as_deref()?;
        let mut tag = self.tag.lock().unwrap_or_else(|e| e.into_inner());
        if tag.is_none() {
            match WriteTag::new(&self.fw, lock_path) {
                Ok(made) => *tag = Some(made),
                Err(err) => tracing::warn!(path = lock_path, error = %err, "queue: no write tag"),
            }
        }
        tag.clone()
    }

    /// Lets go of the handle's write tag: once no take holds it, its node is deleted (in the
    /// background, tracked by the framework, whose close waits for it). A later fenced multi
    /// (a `remove` after `close`) makes a new one.
    pub(crate) fn drop_write_tag(&self) {
        let tag = self.tag.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(tag);
    }
}

/// Creates `path` as Curator's `DistributedQueue.start` does, if missing: a persistent node whose
/// missing parents are containers. Not a container itself: the server would reap it whenever the
/// queue ran empty, and Curator's consumers stop for good when it goes (their children watch
/// ends with it; their lock-safe take cannot create `L/<item>`).
pub(crate) async fn create_path(fw: &CuratorFramework, path: &str) -> Result<()> {
    tracing::debug!(path, "queue: create the path (persistent, parents: containers)");
    fw.create()
        .creating_parent_containers_if_needed()
        .if_missing()
        .for_path(path, fw.default_data().to_vec())
        .await
        .map(drop)
}
