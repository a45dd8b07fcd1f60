//! What a [`PersistentNode`](super::PersistentNode)'s handle and its keeper's task share: the
//! node's configuration, its data, the path it has now, and the signals between the two. The
//! handle (`persistent_node.rs`) and the keeper (`keeper/`) both import it from here.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use curator_core::Listeners;
use curator_core::{CreateMode, CuratorError, CuratorFramework};
use tokio::sync::{watch, Notify};

/// What a node is asked to be; fixed at start.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) path: String,
    pub(crate) mode: CreateMode,
    pub(crate) protected: bool,
    /// The data is unique (`unique_data()`): the evidence of a create whose reply was lost.
    pub(crate) unique: bool,
    pub(crate) ttl: Option<Duration>,
    pub(crate) parents: bool,
    /// Delete the node on close (a TTL node is left to expire).
    pub(crate) delete_on_close: bool,
}

/// The node's data and a count of changes, so the keeper knows whether it wrote the latest.
#[derive(Debug)]
pub(crate) struct DataSlot {
    pub(crate) bytes: Vec<u8>,
    pub(crate) version: u64,
    /// The version the keeper last wrote (or created the node with): a `set_data` is pending
    /// while it differs from `version`.
    pub(crate) written: u64,
    /// The zxid of that write (the node's `mzxid` after it; 0 before the first): data the node
    /// held no later than this is ours or was written over by ours.
    pub(crate) written_zxid: i64,
    /// The bytes are another client's (taken by `adopt_data`), not ours: not unique to our
    /// writes, so no evidence of them.
    pub(crate) theirs: bool,
}

/// What the handle and the keeper share.
pub(crate) struct Shared {
    pub(crate) fw: CuratorFramework,
    pub(crate) config: Config,
    pub(crate) data: Mutex<DataSlot>,
    pub(crate) actual: Mutex<Option<String>>,
    /// The last error retrying cannot fix, until the next successful create.
    pub(crate) last_error: watch::Sender<Option<CuratorError>>,
    pub(crate) created: Listeners<String>,
    /// True once the node was first created or adopted.
    pub(crate) initial: watch::Sender<bool>,
    /// True once the node was closed (or dropped).
    pub(crate) closing: watch::Sender<bool>,
    /// Wakes the keeper for new data.
    pub(crate) wake: Notify,
}

impl Shared {
    pub(crate) fn actual_path(&self) -> Option<String> {
        lock(&self.actual).clone()
    }

    pub(crate) fn data(&self) -> (Vec<u8>, u64) {
        let slot = lock(&self.data);
        (slot.bytes.clone(), slot.version)
    }

    /// As [`data`](Self::data), and whether those bytes are the evidence of our creates:
    /// declared unique, and not another client's (`adopt_data`).
    pub(crate) fn data_for_create(&self) -> (Vec<u8>, u64, bool) {
        let slot = lock(&self.data);
        (slot.bytes.clone(), slot.version, self.config.unique && !slot.theirs)
    }

    /// The data and its version if the version is not `written`; no copy otherwise.
    pub(crate) fn data_after(&self, written: u64) -> Option<(Vec<u8>, u64)> {
        let slot = lock(&self.data);
        (slot.version != written).then(|| (slot.bytes.clone(), slot.version))
    }

    /// The keeper wrote (or created the node with) data version `version`, in the write of
    /// zxid `zxid`; `None` when it took a node whose data it did not write (that data may be
    /// another client's edit, newer than our last write).
    pub(crate) fn mark_written(&self, version: u64, zxid: Option<i64>) {
        let mut slot = lock(&self.data);
        slot.written = version;
        if let Some(zxid) = zxid {
            slot.written_zxid = zxid;
        }
    }

    /// Tells the keeper to stop and the creation listeners that no more creates follow.
    pub(crate) fn close(&self) {
        self.closing.send_replace(true);
        self.wake.notify_one();
        self.created.close();
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
