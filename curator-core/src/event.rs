//! What a background operation or a fired watch reports: the event and its kinds, how an
//! operation's output fills it, a transaction's results, and what the unhandled-error listeners
//! receive. Re-exported by modules [`background`](crate::background) and
//! [`ops::transaction`](crate::ops::transaction); the framework keeps the listeners of these
//! events.

use zookeeper_client::{Acl, Stat, WatchedEvent};

use crate::error::CuratorError;

/// What kind of operation an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CuratorEventType {
    /// `create()`.
    Create,
    /// `delete()`.
    Delete,
    /// `check_exists()`.
    Exists,
    /// `get_data()`.
    GetData,
    /// `set_data()`.
    SetData,
    /// `get_children()`.
    Children,
    /// `get_acl()`.
    GetAcl,
    /// `get_config()`.
    GetConfig,
    /// `set_acl()`.
    SetAcl,
    /// `sync()`.
    Sync,
    /// `transaction()`.
    Transaction,
    /// `reconfig()`.
    Reconfig,
    /// `watches().add()`.
    AddWatch,
    /// `watches().remove(..)`.
    RemoveWatches,
    /// A watch set with `.watched()` fired.
    Watched,
}

/// The outcome of a background operation, or a watch that fired.
#[derive(Debug, Clone)]
pub struct CuratorEvent {
    /// The operation.
    pub event_type: CuratorEventType,
    /// ZooKeeper's result code: 0 for success (see [`CuratorError::code`]).
    pub result_code: i32,
    /// The error, when the operation failed.
    pub error: Option<CuratorError>,
    /// The path given to the operation.
    pub path: String,
    /// For creates: the path actually created (sequence number and protection included).
    pub name: Option<String>,
    /// Data read.
    pub data: Option<Vec<u8>>,
    /// Stat returned.
    pub stat: Option<Stat>,
    /// Children listed.
    pub children: Option<Vec<String>>,
    /// ACLs read.
    pub acl: Option<Vec<Acl>>,
    /// The watch event, for [`CuratorEventType::Watched`].
    pub watched_event: Option<WatchedEvent>,
    /// Results of a transaction.
    pub op_results: Option<Vec<TransactionResult>>,
}

impl CuratorEvent {
    pub(crate) fn new(event_type: CuratorEventType, path: &str) -> Self {
        Self {
            event_type,
            result_code: 0,
            error: None,
            path: path.to_string(),
            name: None,
            data: None,
            stat: None,
            children: None,
            acl: None,
            watched_event: None,
            op_results: None,
        }
    }
}

/// An operation's output, written into the event that reports it.
pub trait EventData {
    /// Fills the fields of `event` this output provides.
    fn fill(&self, event: &mut CuratorEvent);
}

impl EventData for () {
    fn fill(&self, _: &mut CuratorEvent) {}
}
impl EventData for String {
    fn fill(&self, event: &mut CuratorEvent) {
        event.name = Some(self.clone());
    }
}
impl EventData for Stat {
    fn fill(&self, event: &mut CuratorEvent) {
        event.stat = Some(*self);
    }
}
impl EventData for Option<Stat> {
    fn fill(&self, event: &mut CuratorEvent) {
        event.stat = *self;
    }
}
impl EventData for Vec<u8> {
    fn fill(&self, event: &mut CuratorEvent) {
        event.data = Some(self.clone());
    }
}
impl EventData for (Vec<u8>, Stat) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.data = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}
impl EventData for (String, Stat) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.name = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}
impl EventData for Vec<String> {
    fn fill(&self, event: &mut CuratorEvent) {
        event.children = Some(self.clone());
    }
}
impl EventData for (Vec<String>, Stat) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.children = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}
impl EventData for (Vec<Acl>, Stat) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.acl = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}
impl EventData for Vec<TransactionResult> {
    fn fill(&self, event: &mut CuratorEvent) {
        event.op_results = Some(self.clone());
    }
}

/// The result of one operation of a committed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionResult {
    /// A node was created at `path` (sequence number included).
    Create {
        /// The path created.
        path: String,
    },
    /// A node was deleted.
    Delete {
        /// The node.
        path: String,
    },
    /// Data was written.
    SetData {
        /// The node.
        path: String,
        /// Its new stat.
        stat: Stat,
    },
    /// A version check passed.
    Check {
        /// The node.
        path: String,
    },
}

/// What the unhandled-error listeners receive.
#[derive(Debug, Clone)]
pub(crate) struct UnhandledError {
    pub(crate) message: String,
    pub(crate) error: CuratorError,
}
