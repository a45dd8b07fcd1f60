//! The keeper's close: the node is deleted if it may be ours (docs/architecture.md sections 7
//! and 13).

use curator_core::CuratorError;

use super::Keeper;

impl Keeper {
    /// Deletes the node, if it may be ours and the node is meant to go on close.
    pub(super) async fn finish(&mut self) {
        if !self.tried || (self.in_the_way && self.known.is_none()) {
            self.adopt_for_close().await;
        }
        let config = &self.shared.config;
        // A create whose outcome is unknown may have made the node before any reply gave its
        // path; without a sequence or protection, that path is the configured one.
        let unknown = self.may_own && !config.mode.is_sequential() && !config.protected;
        let Some(path) = self.known.clone().or_else(|| unknown.then(|| config.path.clone())) else { return };
        if !self.may_own || !self.shared.config.delete_on_close || self.fw.is_closed() {
            return;
        }
        let mut delete = self.fw.delete().guaranteed();
        // The node it made or adopted, by its identity: the delete may run after a
        // reconnection, when a new node (this client's or another's) may stand at the path.
        if let Some(czxid) = self.czxid.filter(|_| self.known.as_deref() == Some(path.as_str())) {
            delete = delete.if_created_at(czxid);
        }
        let delete = delete.for_path(&path);
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
}

impl Keeper {
    /// A close that came before the first create, or before the keeper looked at the node its
    /// first create met: a node already at the configured path is the one the keeper would have
    /// adopted (a node it may not adopt, another session's ephemeral, is left), so the close
    /// deletes it, as it would after the adoption. Without this, the outcome of a close right
    /// after `start` depended on whether the keeper had adopted the node yet (Curator's
    /// TestPersistentNode.testQuickCloseNodeExists deletes it), and a close just after a
    /// create's retry met the node its lost first attempt made left that node for the rest of
    /// the session. A sequential or protected node has no path before its create: nothing to
    /// adopt.
    async fn adopt_for_close(&mut self) {
        let config = &self.shared.config;
        if config.mode.is_sequential() || config.protected || !config.delete_on_close || self.fw.is_closed() {
            return;
        }
        if !self.fw.connection_state().is_connected() {
            // The close does not wait for a connection: the look and the delete, by the same
            // rule (any persistent node, or an ephemeral of the session then current), go on
            // in the background.
            let (fw, path) = (self.fw.clone(), config.path.clone());
            tracing::debug!(path = %path, "persistent node: closed before it looked at its path: in the background (not connected)");
            self.fw.spawn_background(async move {
                let _ = fw.delete_if_ours(&path, true).await;
            });
            return;
        }
        let path = config.path.clone();
        let session = match self.fw.session().await {
            Ok(session) => session,
            Err(_) => return,
        };
        tracing::debug!(path = %path, "persistent node: closed before its first create: exists");
        match session.client().check_stat(&path).await {
            Ok(Some(stat))
                if !self.mode().is_ephemeral() || stat.ephemeral_owner == 0 || stat.ephemeral_owner == session.id() =>
            {
                tracing::debug!(path = %path, "persistent node: adopting the node in the way, to delete it on close");
                self.known = Some(path);
                self.may_own = true;
                self.czxid = Some(stat.czxid);
            }
            Ok(_) => {}
            Err(err) => {
                tracing::debug!(path = %path, error = %err, "persistent node: could not look at the path on close")
            }
        }
    }
}
