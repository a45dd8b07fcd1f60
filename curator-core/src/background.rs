//! Background operations and their events (Curator's `BackgroundCallback`, `CuratorListener`,
//! `UnhandledErrorListener`).
//!
//! A Rust future does nothing until polled, so where Curator writes
//! `client.create().inBackground(cb).forPath(p)`, here the choice comes last and starts the
//! operation: `client.create().for_path(p, data).in_background(cb)`. The callback runs on
//! tokio's blocking pool, so a slow callback never stalls other operations or watches.

use std::future::Future;
use std::sync::Arc;

use zookeeper_client::{Acl, Stat, WatchedEvent};

use crate::error::CuratorError;
use crate::framework::CuratorFramework;
use crate::listeners::ListenerId;
use crate::ops::transaction::TransactionResult;

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
    /// `watches().add()`.
    AddWatch,
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

/// Receives events of background operations started without a callback, and of `.watched()`
/// watches.
pub trait CuratorListener: Send + Sync {
    /// Called with each event, in order, on the blocking pool.
    fn event_received(&self, client: &CuratorFramework, event: CuratorEvent);
}

impl<F: Fn(&CuratorFramework, CuratorEvent) + Send + Sync> CuratorListener for F {
    fn event_received(&self, client: &CuratorFramework, event: CuratorEvent) {
        self(client, event)
    }
}

/// Receives errors of background work that nobody else handles.
pub trait UnhandledErrorListener: Send + Sync {
    /// Called with a description and the error.
    fn unhandled_error(&self, message: &str, error: &CuratorError);
}

impl<F: Fn(&str, &CuratorError) + Send + Sync> UnhandledErrorListener for F {
    fn unhandled_error(&self, message: &str, error: &CuratorError) {
        self(message, error)
    }
}

/// A callback for one background operation.
pub type BackgroundCallback = Arc<dyn Fn(&CuratorFramework, CuratorEvent) + Send + Sync>;

/// What the unhandled-error listeners receive.
#[derive(Debug, Clone)]
pub(crate) struct UnhandledError {
    message: String,
    error: CuratorError,
}

impl CuratorFramework {
    /// Adds a listener for background events that have no callback of their own. They reach it
    /// in the order the operations finished, on the blocking pool.
    pub fn add_listener(&self, listener: impl CuratorListener + 'static) -> ListenerId {
        let this = self.downgrade();
        self.inner.listeners.add_callback(Arc::new(move |event: &CuratorEvent| {
            if let Some(fw) = this.upgrade() {
                listener.event_received(&fw, event.clone());
            }
        }))
    }

    /// Removes a listener added with [`add_listener`](Self::add_listener); events already queued
    /// for it are still delivered. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.inner.listeners.remove(id)
    }

    /// Adds a listener for errors that nobody else handles.
    pub fn add_unhandled_error_listener(&self, listener: impl UnhandledErrorListener + 'static) -> ListenerId {
        self.inner
            .unhandled
            .add_callback(Arc::new(move |e: &UnhandledError| listener.unhandled_error(&e.message, &e.error)))
    }

    /// Removes a listener added with
    /// [`add_unhandled_error_listener`](Self::add_unhandled_error_listener).
    pub fn remove_unhandled_error_listener(&self, id: ListenerId) -> bool {
        self.inner.unhandled.remove(id)
    }

    /// Delivers `event` to the callback if there is one, else to the listeners; an error nobody
    /// receives goes to the unhandled-error listeners. User code runs on the blocking pool.
    pub(crate) fn deliver(&self, event: CuratorEvent, callback: Option<BackgroundCallback>) {
        if let Some(callback) = callback {
            let fw = self.clone();
            crate::listeners::call_user(move || callback(&fw, event));
            return;
        }
        if self.inner.listeners.is_empty() {
            if let Some(error) = &event.error {
                self.report_unhandled(&format!("background {:?} on {}", event.event_type, event.path), error);
            }
            return;
        }
        self.inner.listeners.publish(event);
    }

    /// Reports an error nobody else handles: to the unhandled-error listeners, or to the log
    /// when there are none.
    pub fn report_unhandled(&self, message: &str, error: &CuratorError) {
        if self.inner.unhandled.is_empty() {
            tracing::error!(error = %error, "{message}");
            return;
        }
        self.inner.unhandled.publish(UnhandledError { message: message.to_string(), error: error.clone() });
    }
}

/// Spawns a task on the current runtime, if there is one (drop-time cleanups run where no
/// runtime may be left). Unlike [`CuratorFramework::spawn_background`], `close()` does not wait
/// for it: for monitors that end by themselves.
pub fn spawn_detached<F>(future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => drop(handle.spawn(future)),
        Err(_) => tracing::warn!("no tokio runtime: background task not started"),
    }
}
