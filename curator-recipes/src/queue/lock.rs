//! The lock node of a lock-safe take, `L/<item node name>`: ephemeral, holding an id of its own
//! take (a fresh UUID), which is what makes it ours (docs/architecture.md section 17.2).
//!
//! ```text
//! create L/n (ephemeral, data = this take's id)      ok         -> held, on this session
//!                                                    NodeExists -> held elsewhere
//!   its reply lost -> in doubt; the next attempt sends nothing before it has decided, on its
//!   session: sync + getData(L/n) ->
//!       our id, an ephemeral of this session   -> held (our create was applied)
//!       our id, of an ended session            -> held elsewhere (it goes with that session)
//!       another id                             -> held elsewhere (another take's)
//!       missing                                -> not held: create again
//! the retry policy gives up while in doubt -> drop_unknown_lock: L/n deleted only if it holds
//!   our id and is an ephemeral of the current session, else left
//! ```
//!
//! Why the id and not the session: two takes may share a session (two queue handles on one
//! framework, a `remove` beside the consumer), and then an ephemeral owner equal to ours proves
//! nothing. An ephemeral node holding our id goes only by a request of ours (a take deletes only
//! the lock that holds its own id) or with its session; so a missing one means that no lock of
//! ours stands, and a create sent then makes the only one. Curator never reads a lock node's
//! data (its own lock holds the client's default data), so the layout is unchanged for it.

use curator_core::make_parents;
use curator_core::{zk, ConnectionStateEvent, CuratorError, CuratorFramework, Result, Session};

/// The lock node of one take: its path and the data (this take's id) it is created with.
#[derive(Debug, Clone)]
pub(crate) struct LockNode {
    pub(crate) path: String,
    /// The stored bytes: the take's id, compressed under `enable_compression()` as the
    /// client's data is (section 3.10). No other take's lock holds them.
    data: Vec<u8>,
}

/// What a lock node at our path is, read after a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// None is there.
    Missing,
    /// Ours (it holds our id), an ephemeral of the session it was read on, at this version.
    Ours(i32),
    /// Ours, but an ephemeral of another session (one that ended, or is ending).
    OursOnEndedSession,
    /// Another take's.
    Other,
}

impl LockNode {
    /// The lock node `path` of a new take, with a fresh id.
    pub(crate) fn new(fw: &CuratorFramework, path: String) -> Result<Self> {
        let id = uuid::Uuid::new_v4().to_string();
        let data = fw.encode_data(&path, id.as_bytes())?.into_owned();
        Ok(Self { path, data })
    }

    /// Syncs the lock node's path and reads it on `session` (pipelined: one round trip), so
    /// that the read sees every request the server ordered before it, one of ours whose reply
    /// was lost included.
    pub(crate) async fn find(&self, session: &Session) -> Result<Found> {
        let client = session.client();
        tracing::debug!(path = %self.path, "queue: sync + getData (is the lock node ours?)");
        let sync = client.sync(&self.path);
        let read = client.get_data(&self.path);
        match sync.await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(err) => return Err(CuratorError::from_zk(&self.path, err)),
        }
        Ok(match read.await {
            Ok((data, _)) if data != self.data => Found::Other,
            Ok((_, stat)) if stat.ephemeral_owner == session.id() => Found::Ours(stat.version),
            Ok(_) => Found::OursOnEndedSession,
            Err(zk::Error::NoNode) => Found::Missing,
            Err(err) => return Err(CuratorError::from_zk(&self.path, err)),
        })
    }
}

/// A lock held: the generation of the session that holds it, and the connection's state just
/// after it was made.
pub(crate) struct Held {
    pub(crate) generation: u64,
    pub(crate) at_lock: ConnectionStateEvent,
}

/// A lock create that failed: its error, and whether a create of ours may have been applied
/// all the same (its reply was lost and nothing decided it since).
pub(crate) struct LockFailed {
    pub(crate) error: CuratorError,
    pub(crate) in_doubt: bool,
}

/// Creates the lock node (module diagram): `Some` when it is ours, `None` when another take
/// holds it.
pub(crate) async fn lock_item(fw: &CuratorFramework, lock: &LockNode) -> Result<Option<Held>, LockFailed> {
    let acl = fw.acl_for_path(&lock.path);
    let in_doubt = std::sync::atomic::AtomicBool::new(false);
    let result = fw
        .call_with_retry("queue lock", &lock.path, |session, _| {
            let (acl, in_doubt) = (acl.clone(), &in_doubt);
            async move {
                use std::sync::atomic::Ordering::Relaxed;
                if in_doubt.load(Relaxed) {
                    match lock.find(&session).await? {
                        Found::Ours(_) => {
                            tracing::info!(path = %lock.path, "queue: our lock create whose reply was lost was applied");
                            in_doubt.store(false, Relaxed);
                            return Ok(Some(session.generation()));
                        }
                        found @ (Found::OursOnEndedSession | Found::Other) => {
                            tracing::info!(path = %lock.path, ?found, "queue: after our lock create whose reply was lost, the lock node is not ours to hold");
                            in_doubt.store(false, Relaxed);
                            return Ok(None);
                        }
                        Found::Missing => {
                            tracing::info!(path = %lock.path, "queue: our lock create whose reply was lost left no lock: creating it again");
                            in_doubt.store(false, Relaxed);
                        }
                    }
                }
                let client = session.client();
                tracing::debug!(path = %lock.path, "queue: create lock node (ephemeral)");
                let mut created = session.create(&lock.path, &lock.data, zk::CreateMode::Ephemeral, &acl)?.await;
                if matches!(created, Err(zk::Error::NoNode)) {
                    // The lock path was deleted (or its parent reaped): make it again.
                    make_parents(fw, client, &lock.path, fw.use_container_parents()).await?;
                    tracing::debug!(path = %lock.path, "queue: create lock node again (parents made)");
                    created = session.create(&lock.path, &lock.data, zk::CreateMode::Ephemeral, &acl)?.await;
                }
                match created {
                    Ok(_) => Ok(Some(session.generation())),
                    Err(zk::Error::NodeExists) => Ok(None),
                    Err(e) => {
                        let err = CuratorError::from_zk(&lock.path, e);
                        // Every reply-lost shape maps to a retryable error (section 2.3).
                        if err.is_retryable() {
                            in_doubt.store(true, Relaxed);
                        }
                        Err(err)
                    }
                }
            }
        })
        .await;
    match result {
        Ok(held) => {
            Ok(held.map(|generation| Held { generation, at_lock: fw.connection_state_watch().borrow().clone() }))
        }
        Err(error) => Err(LockFailed { error, in_doubt: in_doubt.load(std::sync::atomic::Ordering::Relaxed) }),
    }
}

/// After a lock create left in doubt (the retry policy gave up on it): our lock node may exist,
/// and while our session lives it would keep the item from every consumer. Deletes it if it
/// holds our id and is an ephemeral of the current session, at the version read (only our own
/// requests delete it while that session lives); one of an ended session goes with it, and
/// another take's is left. Retries with the cleanup's backoff until done or the framework
/// closes. Waited for, so that this consumer tries the item again only after it; once `until`
/// resolves (the queue's close, a caller's bound) it goes on in the background.
pub(crate) async fn drop_unknown_lock(
    fw: &CuratorFramework,
    lock: &LockNode,
    until: impl std::future::Future<Output = ()>,
) {
    let (fw, lock) = (fw.clone(), lock.clone());
    let spawner = fw.clone();
    let mut work = Box::pin(async move {
        let mut retry = fw.cleanup_retry_loop();
        loop {
            let attempt = async {
                let session = fw.session().await?;
                let Found::Ours(version) = lock.find(&session).await? else { return Ok(()) };
                tracing::info!(path = %lock.path, "queue: delete our lock node left by a create in doubt");
                match session.delete(&lock.path, Some(version))?.await {
                    Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                    // A reply lost: read again (ours still there, or gone).
                    Err(err) => Err(CuratorError::from_zk(&lock.path, err)),
                }
            };
            match attempt.await {
                Ok(()) => return,
                Err(err) => {
                    if retry.on_error(err).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    tokio::select! {
        () = &mut work => {}
        () = until => spawner.spawn_background(work),
    }
}
