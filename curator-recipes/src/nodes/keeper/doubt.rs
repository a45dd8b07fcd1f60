//! The first create of an unprotected sequential node whose reply was lost (docs/architecture.md
//! sections 4.4 and 13). The core ends such a create with `OutcomeUnknown` at once: its name
//! does not say which child of the parent it made, if any. Creating again on that guess made a
//! second node and left the first, untracked, for the rest of the session (or for good, in a
//! persistent mode). The keeper decides by what the node's data can prove:
//!
//! ```text
//! unique data (unique_data()) ─► sync + getChildren(parent), getData of each child of the
//!                                name's form (pipelined):
//!     a child holding exactly our data (an ephemeral one: of the current session)
//!         ─► Own (the newest such child; published as created: our create made it)
//!     none ─► Place: no node of ours stands, so exactly one is made
//!     an error ─► back off and look again (nothing is created meanwhile)
//! no evidence, ephemeral ─► wait for the end of the session the create ran on (or a later
//!                           one) ─► Place: a node it made went with it
//! no evidence, persistent ─► before the first outcome: refused with OutcomeUnknown (closed);
//!                            after it: wait for the close. A node it made would stay beside a
//!                            second one for good.
//! ```
//!
//! A close while a look by data is pending looks once more and deletes the node found
//! (`close.rs`).

use curator_core::{path, zk, CuratorError, CuratorFramework, Session};

use super::{Keeper, State};

/// A first sequential create whose outcome is unknown.
#[derive(Debug, Clone)]
pub(super) struct Doubt {
    /// The data it was sent with (as given, not encoded) and that data's version.
    pub(super) data: Vec<u8>,
    pub(super) version: u64,
    /// Whether that data is unique (the evidence of the create).
    pub(super) unique: bool,
    /// The framework's latest session when the create ended: a node it made is an ephemeral
    /// of this session or of an earlier one.
    pub(super) generation: u64,
    /// How the create ended.
    pub(super) error: CuratorError,
}

impl Keeper {
    /// The first create, sequential and unprotected, ended with `err` (its outcome unknown),
    /// sent with data `data` of version `version`.
    pub(super) async fn first_create_in_doubt(
        &mut self,
        err: CuratorError,
        data: Vec<u8>,
        version: u64,
        unique: bool,
    ) -> State {
        let generation = self.conn.borrow().generation;
        self.doubt = Some(Doubt { data, version, unique, generation, error: err });
        self.resolve_doubt().await
    }

    /// Decides a first create in doubt (module docs); `Place` once no node of ours can stand.
    pub(super) async fn resolve_doubt(&mut self) -> State {
        let Some(doubt) = self.doubt.clone() else { return State::Place };
        if doubt.unique {
            return self.find_by_data(doubt).await;
        }
        let config = &self.shared.config;
        tracing::warn!(path = %config.path, error = %doubt.error, "persistent node: the first create's outcome is unknown, and nothing tells which node it may have made");
        self.shared.last_error.send_replace(Some(doubt.error.clone()));
        if !config.mode.is_ephemeral() && !self.readiness.is_reported() {
            tracing::warn!(path = %config.path, "persistent node: a node that create made would stay beside a new one: refused; closing");
            self.readiness.refused(doubt.error);
            self.shared.close();
            return State::Stop;
        }
        self.readiness.ready();
        let mut life = self.fw.liveness(doubt.generation);
        let ephemeral = config.mode.is_ephemeral();
        if ephemeral {
            tracing::warn!(path = %config.path, generation = doubt.generation, "persistent node: waiting for the end of the session that may hold the node");
        } else {
            tracing::warn!(path = %config.path, "persistent node: a node that create made would stay beside a new one: waiting for the close");
        }
        let ended = async {
            if ephemeral {
                life.ended().await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            end = ended => {
                tracing::info!(path = %self.shared.config.path, %end, "persistent node: the session that may have held the node is over: creating it");
                self.doubt = None;
                self.shared.last_error.send_if_modified(|last| last.take().is_some());
                State::Place
            }
            _ = self.closing.wait_for(|closing| *closing) => State::Stop,
        }
    }

    /// Looks for the node of a first create in doubt by its unique data.
    async fn find_by_data(&mut self, doubt: Doubt) -> State {
        let session = match self.session().await {
            Ok(session) => session,
            Err(err) => return self.failed(err).await,
        };
        let config = &self.shared.config;
        match find_by_data(&self.fw, &session, &config.path, &doubt.data, config.mode.is_ephemeral()).await {
            Ok(Some((found, stat))) => {
                drop(session);
                tracing::info!(path = %found, "persistent node: found the node of the first create, whose reply was lost, by its data");
                self.doubt = None;
                self.took(&found, &stat, doubt.version, Some(stat.mzxid));
                // That create made it, once: as a create whose reply came.
                self.shared.created.publish(found.clone());
                self.settled();
                State::Own(found)
            }
            Ok(None) => {
                tracing::info!(path = %config.path, "persistent node: the first create, whose reply was lost, made no node that stands: creating it");
                self.doubt = None;
                State::Place
            }
            Err(err) => self.failed(err).await,
        }
    }
}

/// The node of an unprotected sequential create of `path` (`<parent>/<name>`, the create
/// making `<name><sequence>`) holding exactly `data`, on `session`: the newest child of the
/// parent of that form whose data decodes to `data`, an ephemeral of `session` when
/// `ephemeral`, else a persistent node. `None` when there is none. The parent is synced first,
/// so that the listing sees a create the server ordered before.
pub(super) async fn find_by_data(
    fw: &CuratorFramework,
    session: &Session,
    path: &str,
    data: &[u8],
    ephemeral: bool,
) -> curator_core::Result<Option<(String, zk::Stat)>> {
    let (parent, name) = path::parent_and_node(path);
    let client = session.client();
    tracing::debug!(
        path = parent,
        name,
        "persistent node: sync + getChildren (the node of a create in doubt, by its data)"
    );
    let sync = client.sync(parent);
    let list = client.list_children(parent);
    match sync.await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(CuratorError::from_zk(parent, err)),
    }
    let children = match list.await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(CuratorError::from_zk(parent, err)),
    };
    let candidates: Vec<String> = children
        .into_iter()
        .filter(|child| child.strip_prefix(name).is_some_and(is_sequence))
        .map(|child| path::make_path(parent, &child))
        .collect();
    let reads: Vec<_> = candidates
        .iter()
        .map(|candidate| {
            tracing::debug!(path = %candidate, "persistent node: getData (a node of the create in doubt?)");
            client.get_data(candidate)
        })
        .collect();
    let mut found: Option<(String, zk::Stat)> = None;
    for (candidate, read) in candidates.iter().zip(futures::future::join_all(reads).await) {
        let (bytes, stat) = match read {
            Ok(read) => read,
            Err(zk::Error::NoNode) => continue,
            Err(err) => return Err(CuratorError::from_zk(candidate, err)),
        };
        let owner_fits = if ephemeral { stat.ephemeral_owner == session.id() } else { stat.ephemeral_owner == 0 };
        // Compared decoded (section 3.10); data that does not decode is not ours.
        if !owner_fits || fw.decode_data(candidate, bytes).ok().as_deref() != Some(data) {
            continue;
        }
        if found.as_ref().is_none_or(|(_, newest)| stat.czxid > newest.czxid) {
            found = Some((candidate.clone(), stat));
        }
    }
    Ok(found)
}

/// Whether `suffix` is a sequence number as ZooKeeper appends it: ten digits (a sign in place of
/// the first for a counter that wrapped), or nineteen.
fn is_sequence(suffix: &str) -> bool {
    matches!(suffix.len(), 10 | 19) && suffix.parse::<i64>().is_ok() && !suffix.starts_with('+')
}

#[cfg(test)]
mod tests {
    use super::is_sequence;

    #[test]
    fn sequence_suffixes() {
        assert!(is_sequence("0000000042"));
        assert!(is_sequence("-000000001"));
        assert!(is_sequence("0000000002147483648"));
        assert!(!is_sequence("000000042"));
        assert!(!is_sequence("+000000042"));
        assert!(!is_sequence("00000000x2"));
        assert!(!is_sequence(""));
    }
}
