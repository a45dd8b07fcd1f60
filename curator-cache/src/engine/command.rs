//! [`Command`]: what a cache asks of its running engine. The handle sends it and the event loop
//! answers it; it lives on its own so that neither of the two imports the other for it.

use curator_core::Result;
use tokio::sync::oneshot;

/// What a cache asks of its running engine.
pub(super) enum Command {
    /// Load again without events.
    Rebuild(oneshot::Sender<Result<()>>),
    /// Forget everything without events, then load again with events.
    ClearAndRefresh(oneshot::Sender<Result<()>>),
    /// Read one node again and replace (or drop) it in the map, without events.
    RebuildNode(String, oneshot::Sender<Result<()>>),
}
