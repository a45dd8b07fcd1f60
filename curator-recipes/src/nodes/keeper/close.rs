//! The keeper's close: the node is deleted if it may be ours (docs/architecture.md sections 7
//! and 13), and no other node.
//!
//! ```text
//! the node it made or adopted, of known czxid ─► guaranteed, quiet delete if_created_at(czxid):
//!     a node made again at the path since (an outage's close) is left
//! its identity unknown (a close before the first create, or after a create met a node it has
//! not looked at yet, or after a create whose outcome is unknown) ─► look at the path, delete
//!     the node only if the keeper would have adopted it: a persistent node, or an ephemeral of
//!     the current session (delete_if_ours); another session's ephemeral is someone else's
//! a first sequential create in doubt, of unique data ─► find its node by its data, delete it
//!     by its czxid
//! ```
//!
//! Connected, the close waits for the delete up to the connection timeout; it goes on in the
//! background after that, or at once when not connected (tracked: the framework's close waits
//! for it, a bounded time).

use std::future::Future;

use curator_core::CuratorError;

use super::doubt::find_by_data;
use super::Keeper;

/// The node a close deletes when its czxid is not known yet.
enum Found {
    /// The node at this path, if the keeper would adopt it.
    AtPath(String),
    /// The node of a first sequential create in doubt, by its (unique) data.
    ByData(Vec<u8>),
}

impl Keeper {
    /// Deletes the node, if it may be ours and the node is meant to go on close.
    pub(super) async fn finish(&mut self) {
        let config = &self.shared.config;
        if !config.delete_on_close || self.fw.is_closed() {
            return;
        }
        if let Some(doubt) = self.doubt.take() {
            if doubt.unique {
                tracing::debug!(path = %config.path, "persistent node: delete on close, the node of the create in doubt if found");
                self.delete_found(Found::ByData(doubt.data)).await;
            }
            // Without evidence nothing tells which node is ours: none is deleted (an ephemeral
            // one goes with its session).
            return;
        }
        // A node without a sequence or protection has its path before any reply gives it.
        let fixed = !config.mode.is_sequential() && !config.protected;
        let Some(path) = self.known.clone().or_else(|| fixed.then(|| config.path.clone())) else { return };
        match self.czxid.filter(|_| self.may_own && self.known.as_deref() == Some(path.as_str())) {
            Some(czxid) => self.delete_made(path, czxid).await,
            None if self.may_own || !self.tried || (self.in_the_way && self.known.is_none()) => {
                self.delete_if_ours(path).await
            }
            None => {}
        }
    }

    /// Deletes the node made or adopted at `path`, created at `czxid`.
    async fn delete_made(&self, path: String, czxid: i64) {
        // By its identity: the delete may run after a reconnection, when a new node (this
        // client's or another's) may stand at the path. Quiet: gone is what it promises, also
        // after a lost reply.
        let delete = self.fw.delete().guaranteed().quietly().if_created_at(czxid).for_path(&path);
        if !self.fw.connection_state().is_connected() {
            // The close does not wait for a connection: the guaranteed delete goes on in the
            // background until the node is gone (docs/architecture.md, section 7).
            tracing::debug!(path = %path, "persistent node: delete on close, in the background (not connected)");
            delete.in_background(|_, _| {});
            return;
        }
        tracing::debug!(path = %path, "persistent node: delete on close");
        // Connected: delete now, for no longer than the connection timeout. Past it the delete's
        // future is dropped, and a guaranteed delete dropped unfinished carries on in the
        // background (a request sent just as the connection went may otherwise wait for the
        // connection to come back).
        match tokio::time::timeout(self.fw.connection_timeout(), delete).await {
            Ok(Ok(())) | Ok(Err(CuratorError::NoNode { .. })) => {}
            Ok(Err(err)) => {
                tracing::debug!(path = %path, error = %err, "persistent node: the delete goes on in the background")
            }
            Err(_) => {
                tracing::debug!(path = %path, "persistent node: the delete goes on in the background (connection timeout)")
            }
        }
    }

    /// The node at `path` may be ours, but its identity is unknown: deleted if it is one the
    /// keeper would adopt (a persistent node, or an ephemeral of the current session: the
    /// core's `delete_if_ours` rule), by the czxid looked at. Without this, the outcome of a
    /// close right after `start` depended on whether the keeper had adopted the node yet
    /// (Curator's TestPersistentNode.testQuickCloseNodeExists deletes it); a delete by path
    /// instead would take another session's node, made at the path after ours went (a group
    /// member's).
    async fn delete_if_ours(&self, path: String) {
        tracing::debug!(path = %path, "persistent node: delete on close, if the node at the path is ours");
        self.delete_found(Found::AtPath(path)).await;
    }

    /// Finds the node `what` names and deletes it by its czxid, under the cleanup loop (until
    /// done or the framework closes), as tracked background work the close waits for while
    /// connected (up to the connection timeout).
    async fn delete_found(&self, what: Found) {
        let fw = self.fw.clone();
        let config = &self.shared.config;
        let (path, ephemeral) = (config.path.clone(), config.mode.is_ephemeral());
        self.clean_up(async move {
            let mut retry = fw.cleanup_retry_loop();
            loop {
                let attempt = async {
                    let session = fw.session().await?;
                    let found = match &what {
                        Found::AtPath(at) => {
                            tracing::debug!(path = %at, "persistent node: exists (ours to delete on close?)");
                            session
                                .client()
                                .check_stat(at)
                                .await
                                .map_err(|e| CuratorError::from_zk(at, e))?
                                .filter(|stat| stat.ephemeral_owner == 0 || stat.ephemeral_owner == session.id())
                                .map(|stat| (at.clone(), stat))
                        }
                        Found::ByData(data) => find_by_data(&fw, &session, &path, data, ephemeral).await?,
                    };
                    drop(session);
                    let Some((found, stat)) = found else { return Ok(()) };
                    tracing::debug!(path = %found, "persistent node: delete on close (a node of ours, by its czxid)");
                    match fw.delete().guaranteed().quietly().if_created_at(stat.czxid).for_path(&found).await {
                        Ok(()) | Err(CuratorError::NoNode { .. }) => Ok(()),
                        Err(err) => Err(err),
                    }
                };
                match attempt.await {
                    Ok(()) => return,
                    Err(err) => {
                        if let Err(err) = retry.on_error(err).await {
                            // A guaranteed delete in doubt goes on by itself; anything else is
                            // given up with the framework.
                            tracing::debug!(path = %path, error = %err, "persistent node: delete on close ended");
                            return;
                        }
                    }
                }
            }
        })
        .await;
    }

    /// Runs `cleanup` as tracked background work (the framework's close waits for it, a
    /// bounded time); connected, waits for it up to the connection timeout.
    async fn clean_up(&self, cleanup: impl Future<Output = ()> + Send + 'static) {
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        self.fw.spawn_background(async move {
            cleanup.await;
            drop(done);
        });
        if self.fw.connection_state().is_connected() {
            let _ = tokio::time::timeout(self.fw.connection_timeout(), finished).await;
        }
    }
}
