//! What the framework tells of its connection: the latest state, a watch, a stream and
//! listeners of its transitions, and the liveness of one session (docs/architecture.md
//! sections 3.3 and 3.8).

use std::sync::Arc;

use tokio::sync::watch;

use super::CuratorFramework;
use crate::listeners::ListenerId;
use crate::state::{ConnectionState, ConnectionStateEvent, ConnectionStateStream};

impl CuratorFramework {
    /// The latest connection state.
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.shared.hub.current().state
    }

    /// A `watch` of the latest connection-state transition.
    pub fn connection_state_watch(&self) -> watch::Receiver<ConnectionStateEvent> {
        self.inner.shared.hub.watch()
    }

    /// The session of `generation` (see [`Session::generation`](crate::Session::generation)) watched for its end: the one
    /// reading of session liveness for everything held on a session (module
    /// [`SessionLiveness`](crate::SessionLiveness)).
    pub fn liveness(&self, generation: u64) -> crate::liveness::SessionLiveness {
        crate::liveness::SessionLiveness::new(generation, self.inner.shared.hub.watch())
    }

    /// An ordered stream of every connection-state transition from now on. None is dropped.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// use curator_core::{ConnectionState, CuratorFramework};
    ///
    /// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// let mut states = fw.connection_state_stream(); // before start: sees the first connection
    /// fw.start()?;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Connected));
    /// fw.close().await;
    /// assert_eq!(states.next().await.map(|e| e.state), Some(ConnectionState::Closed));
    /// assert!(states.next().await.is_none(), "the stream ends with the framework");
    /// # Ok(()) }
    /// ```
    pub fn connection_state_stream(&self) -> ConnectionStateStream {
        self.inner.shared.hub.listeners().stream()
    }

    /// Calls `listener` with every connection-state transition, in order, on the blocking pool
    /// (a slow listener delays only itself; one that panics keeps receiving). It stops when the
    /// framework closes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// use curator_core::{ConnectionState, CuratorFramework};
    ///
    /// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// let id = fw.add_connection_state_listener(move |_fw, event| {
    ///     let _ = tx.send(event.state); // may block: this runs on the blocking pool
    /// });
    /// fw.start()?;
    /// assert_eq!(rx.recv().await, Some(ConnectionState::Connected));
    /// assert!(fw.remove_connection_state_listener(id));
    /// # fw.close().await;
    /// # Ok(()) }
    /// ```
    pub fn add_connection_state_listener<F>(&self, listener: F) -> ListenerId
    where
        F: Fn(&CuratorFramework, &ConnectionStateEvent) + Send + Sync + 'static,
    {
        let this = self.downgrade();
        self.inner.shared.hub.listeners().add_callback(Arc::new(move |event: &ConnectionStateEvent| {
            if let Some(fw) = this.upgrade() {
                listener(&fw, event);
            }
        }))
    }

    /// Removes a connection-state listener; the transitions already queued for it are still
    /// delivered. False if it was not there.
    pub fn remove_connection_state_listener(&self, id: ListenerId) -> bool {
        self.inner.shared.hub.listeners().remove(id)
    }
}
