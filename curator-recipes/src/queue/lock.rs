//! The lock node of a lock-safe take, `L/<item node name>`: ephemeral, holding an id of its own
//! take (a fresh UUID), which is what makes it ours (docs/architecture.md section 17.2).
//!
//! ```text
//! core create of L/n (ephemeral, unique data = this take's id, container parents):
//!   ok, an ephemeral of the current session             -> held, on this session
//!   ok, of another session (decided after a new one)    -> held elsewhere (it goes with that session)
//!   NodeExists                                          -> held elsewhere
//!   OutcomeUnknown (its reply lost, and the node does not hold our id: the core's decision,
//!   section 4.4), or the retry policy gave up while it was in doubt:
//!     the queue's own question, "do I hold it now?": sync + getData(L/n), under the retry policy:
//!       our id, an ephemeral of this session  -> held
//!       missing                               -> no lock of ours stands: create again
//!       another id, or ours of an ended session -> held elsewhere
//!       the read fails                        -> drop_unknown_lock: L/n deleted only if it holds
//!                                                our id and is an ephemeral of the current session
//! ```
//!
//! Whether the create was applied is the core's to decide (its `unique_data()` evidence: the
//! node holds exactly the bytes it sent); the queue asks only what the core cannot: whether the
//! node is held by this take *now*, on the current session. Why the id and not the session: two
//! takes may share a session (two queue handles on one framework, a `remove` beside the
//! consumer), and then an ephemeral owner equal to ours proves nothing. An ephemeral node
//! holding our id goes only by a request of ours (a take deletes only the lock that holds its
//! own id) or with its session; so a missing one means that no lock of ours stands, and a create
//! sent then makes the only one. Curator never reads a lock node's data (its own lock holds the
//! client's default data), so the layout is unchanged for it.

use curator_core::{ConnectionStateEvent, CreateMode, CuratorError, CuratorFramework, Result, Session};

/// The lock node of one take: its path and this take's id, its data.
#[derive(Debug, Clone)]
pub(crate) struct LockNode {
    pub(crate) path: String,
    /// A fresh UUID: no other take's lock holds it. Stored as the framework stores data
    /// (compressed under `enable_compression()`, section 3.10), read back decoded.
    id: String,
}

/// What a lock node at our path is, read after a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// None is there.
    Missing,
    /// Ours (it holds our id), an ephemeral of the session it was read on.
    Ours {
        /// The node's czxid: it names this node, not another made at the path since.
        czxid: i64,
        /// The generation of the session it was read on, which holds it.
        generation: u64,
    },
    /// Ours, but an ephemeral of another session (one that ended, or is ending).
    OursOnEndedSession,
    /// Another take's.
    Other,
}

impl LockNode {
    /// The lock node `path` of a new take, with a fresh id.
    pub(crate) fn new(path: String) -> Self {
        Self { path, id: uuid::Uuid::new_v4().to_string() }
    }

    /// Syncs the lock node's path and reads it on `session` (pipelined: one round trip), so
    /// that the read sees every request the server ordered before it, one of ours whose reply
    /// was lost included.
    pub(crate) async fn find(&self, fw: &CuratorFramework, session: &Session) -> Result<Found> {
        let client = session.client();
        tracing::debug!(path = %self.path, "queue: sync + getData (is the lock node ours?)");
        let sync = client.sync(&self.path);
        let read = client.get_data(&self.path);
        match sync.await {
            Ok(()) | Err(curator_core::zk::Error::NoNode) => {}
            Err(err) => return Err(CuratorError::from_zk(&self.path, err)),
        }
        let (data, stat) = match read.await {
            Ok(read) => read,
            Err(curator_core::zk::Error::NoNode) => return Ok(Found::Missing),
            Err(err) => return Err(CuratorError::from_zk(&self.path, err)),
        };
        // Data that does not decode is not ours either.
        let ours = fw.decode_data(&self.path, data).is_ok_and(|data| data == self.id.as_bytes());
        Ok(if !ours {
            Found::Other
        } else if stat.ephemeral_owner == session.id() {
            Found::Ours { czxid: stat.czxid, generation: session.generation() }
        } else {
            Found::OursOnEndedSession
        })
    }
}

/// A lock held: the generation of the session that holds it, and the connection's state just
/// after it was made.
pub(crate) struct Held {
    pub(crate) generation: u64,
    pub(crate) at_lock: ConnectionStateEvent,
}

impl Held {
    fn on(fw: &CuratorFramework, generation: u64) -> Self {
        Self { generation, at_lock: fw.connection_state_watch().borrow().clone() }
    }
}

/// A lock create that failed: its error, and whether a lock node of ours may stand all the
/// same (the core left the create's outcome unknown and reading the node failed too).
pub(crate) struct LockFailed {
    pub(crate) error: CuratorError,
    pub(crate) in_doubt: bool,
}

impl LockFailed {
    fn definite(error: CuratorError) -> Self {
        Self { error, in_doubt: false }
    }
}

/// Creates the lock node (module diagram): `Some` when it is ours, `None` when another take
/// holds it.
pub(crate) async fn lock_item(fw: &CuratorFramework, lock: &LockNode) -> Result<Option<Held>, LockFailed> {
    loop {
        tracing::debug!(path = %lock.path, "queue: create lock node (ephemeral)");
        let created = fw
            .create()
            .with_mode(CreateMode::Ephemeral)
            .creating_parent_containers_if_needed()
            .unique_data()
            .for_path_with_stat(&lock.path, lock.id.as_bytes().to_vec())
            .await;
        let unknown = match created {
            Ok((_, stat)) => return held_now(fw, lock, stat.ephemeral_owner).await,
            Err(CuratorError::NodeExists { .. }) => return Ok(None),
            Err(err @ (CuratorError::OutcomeUnknown { .. } | CuratorError::Timeout { .. })) => err,
            Err(err) => return Err(LockFailed::definite(err)),
        };
        tracing::info!(path = %lock.path, error = %unknown, "queue: our lock create's outcome is unknown: is the lock node ours now?");
        let found = fw
            .call_with_retry("queue lock read", &lock.path, |session, _| async move { lock.find(fw, &session).await })
            .await;
        match found {
            Ok(Found::Ours { generation, .. }) => {
                tracing::info!(path = %lock.path, "queue: the lock node holds our id, on this session: held");
                return Ok(Some(Held::on(fw, generation)));
            }
            Ok(Found::Missing) => {
                tracing::info!(path = %lock.path, "queue: no lock node of ours stands: creating it again");
            }
            Ok(found @ (Found::OursOnEndedSession | Found::Other)) => {
                tracing::info!(path = %lock.path, ?found, "queue: the lock node is not ours to hold");
                return Ok(None);
            }
            Err(CuratorError::Closed) => return Err(LockFailed::definite(CuratorError::Closed)),
            Err(read) => {
                tracing::warn!(path = %lock.path, error = %read, "queue: reading the lock node after an unknown outcome failed");
                return Err(LockFailed { error: unknown, in_doubt: true });
            }
        }
    }
}

/// The lock node made by our create is an ephemeral of the session `owner`: held if that is
/// the current session (no request while connected). One of another session is going with it.
async fn held_now(fw: &CuratorFramework, lock: &LockNode, owner: i64) -> Result<Option<Held>, LockFailed> {
    match fw.session().await {
        Ok(session) if session.id() == owner => Ok(Some(Held::on(fw, session.generation()))),
        Ok(_) => {
            tracing::info!(path = %lock.path, "queue: our lock node is an ephemeral of an ended session: not ours to hold");
            Ok(None)
        }
        Err(CuratorError::Closed) => Err(LockFailed::definite(CuratorError::Closed)),
        // Ours on some session, maybe the current one: the cleanup decides.
        Err(error) => Err(LockFailed { error, in_doubt: true }),
    }
}

/// After a lock create left in doubt: our lock node may exist, and while our session lives it
/// would keep the item from every consumer. Deletes it if it holds our id and is an ephemeral
/// of the current session, by its identity (the core's `if_created_at`: a node made at the
/// path since is left, and a lost reply is decided by that node); one of an ended session goes
/// with it, and another take's is left. Reads with the cleanup's backoff until done or the
/// framework closes. Waited for, so that this consumer tries the item again only after it;
/// once `until` resolves (the queue's close, a caller's bound) it goes on in the background.
pub(crate) async fn drop_unknown_lock(
    fw: &CuratorFramework,
    lock: &LockNode,
    until: impl std::future::Future<Output = ()>,
) {
    let (fw, lock) = (fw.clone(), lock.clone());
    let spawner = fw.clone();
    let mut work = Box::pin(async move {
        let mut retry = fw.cleanup_retry_loop();
        let czxid = loop {
            let found = async { lock.find(&fw, &fw.session().await?).await };
            match found.await {
                Ok(Found::Ours { czxid, .. }) => break czxid,
                Ok(_) => return,
                Err(err) => {
                    if retry.on_error(err).await.is_err() {
                        return;
                    }
                }
            }
        };
        tracing::info!(path = %lock.path, "queue: delete our lock node left by a create in doubt");
        let deleted = fw.delete().if_created_at(czxid).quietly().guaranteed().for_path(&lock.path).await;
        if let Err(err) = deleted {
            tracing::warn!(path = %lock.path, error = %err, "queue: deleting our lock node left by a create in doubt failed");
        }
    });
    tokio::select! {
        () = &mut work => {}
        () = until => spawner.spawn_background(work),
    }
}
