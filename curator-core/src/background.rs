//! Background operations and their events (Curator's `BackgroundCallback`, `CuratorListener`,
//! `UnhandledErrorListener`).
//!
//! A Rust future does nothing until polled, so where Curator writes
//! `client.create().inBackground(cb).forPath(p)`, here the choice comes last and starts the
//! operation: `client.create().for_path(p, data).in_background(cb)`. The callback runs on
//! tokio's blocking pool, so a slow callback never stalls other operations or watches.

use std::sync::Arc;

use crate::error::CuratorError;
use crate::event::UnhandledError;
pub use crate::event::{CuratorEvent, CuratorEventType, EventData};
use crate::framework::CuratorFramework;
use crate::listeners::ListenerId;
pub use crate::task::spawn_detached;

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
