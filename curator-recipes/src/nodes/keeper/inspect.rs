//! A node in the keeper's way (docs/architecture.md section 13, "Who owns a node in the
//! way"): met by a create (NodeExists), or at the path of a create whose outcome is unknown.
//! It is adopted, cleared away, or waited for, by its owner:
//!
//! ```text
//! getData (on the current session):
//!     gone ────────────────────────────────────────────────► Place
//!     persistent mode, or ephemeral of this session ─────────► Own   (adopt; our data if it differs,
//!                                                                unless the node is one we made and
//!                                                                we have no new data: an edit stays)
//!     ephemeral of an earlier session of this node ──────────► Place (after deleting it, at its version)
//!     ephemeral of any other session ────────────────────────► Foreign
//! ```

use curator_core::{zk, CuratorError};

use super::{Keeper, State};

impl Keeper {
    /// The path is taken: adopt the node, clear it away, or wait for it.
    pub(super) async fn inspect(&mut self, path: String) -> State {
        let session = match self.session().await {
            Ok(session) => session,
            Err(err) => return self.failed(err).await,
        };
        tracing::debug!(path = %path, "persistent node: getData of the node in the way");
        let (current, stat) = match session.client().get_data(&path).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => {
                self.in_the_way = false;
                return State::Place;
            }
            Err(err) => return self.failed(CuratorError::from_zk(&path, err)).await,
        };
        // Looked at: what follows decides whose it is.
        self.in_the_way = false;
        let owner = stat.ephemeral_owner;
        if self.mode().is_ephemeral() && owner != session.id() {
            if self.sessions.contains(&owner) {
                tracing::info!(path = %path, owner = format_args!("{owner:#x}"), "persistent node: deleting our node of an earlier session");
                let delete = match session.delete(&path, Some(stat.version)) {
                    Ok(delete) => delete,
                    Err(refused) => return self.failed(refused).await,
                };
                return match delete.await {
                    Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => State::Place,
                    Err(err) => self.failed(CuratorError::from_zk(&path, err)).await,
                };
            }
            if owner != 0 {
                tracing::warn!(path = %path, owner = format_args!("{owner:#x}"), "persistent node: the path is held by another session; waiting for it to go");
                self.known.get_or_insert_with(|| path.clone());
                return State::Foreign(path);
            }
            tracing::warn!(path = %path, "persistent node: a persistent node is in the way of an ephemeral one; adopting it, as Curator does");
        }
        let (data, version) = self.shared.data();
        // A node this keeper made (an ephemeral of the current session, or the persistent node
        // at the path it got) keeps what another client wrote to it since, as in Own: our data
        // goes over it only when a `set_data` of ours is still to be written. A node of an
        // earlier run, or one this keeper never held, gets our data.
        // Compared decoded (section 3.10); data that does not decode is not ours.
        let current = self.fw.decode_data(&path, current).ok();
        // The zxid of our write over the node's data, if we write it.
        let mut zxid = None;
        let made_here =
            self.may_own && self.known.as_deref() == Some(path.as_str()) && (owner == 0 || owner == session.id());
        if current.as_deref() != Some(&data[..]) && (!made_here || version != self.written) {
            let stored = match self.fw.encode_data(&path, &data) {
                Ok(stored) => stored,
                Err(err) => return self.failed(err).await,
            };
            tracing::debug!(path = %path, "persistent node: setData of the adopted node");
            let write = match session.set_data(&path, &stored, Some(stat.version)) {
                Ok(write) => write,
                Err(refused) => return self.failed(refused).await,
            };
            match write.await {
                Ok(written) => zxid = Some(written.mzxid),
                Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => return State::Place,
                Err(err) => return self.failed(CuratorError::from_zk(&path, err)).await,
            }
        }
        drop(session);
        self.took(&path, &stat, version, zxid);
        self.settled();
        State::Own(path)
    }
}
