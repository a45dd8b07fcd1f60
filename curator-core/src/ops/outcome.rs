//! The one owner of lost replies: whether a write whose reply was lost was applied
//! (docs/architecture.md section 4.4).
//!
//! # The rule
//! A write request whose reply is lost (the connection died under it: every shape of section
//! 2.3, or the session ended under it) leaves the write *in doubt*: the server may or may not
//! have applied it. Nothing more is sent for that write until its **evidence** has decided, on
//! a live session and after a `sync` of the node it reads:
//!
//! ```text
//! attempt ──ok──────────────────────────────────────────────► Ok
//!    │ definite answer (NodeExists, BadVersion, ...) ─────────► that error
//!    └ reply lost ─► in doubt ─► (the retry loop's pause, a session) ─► decide(evidence):
//!         Applied(result)  proven from evidence only this write could leave ─► Ok(result)
//!         NotApplied       proven                                         ─► attempt again
//!         Unknown(why)     nothing proves either                          ─► OutcomeUnknown
//! ```
//!
//! A write is never sent twice on a guess: without evidence it is `Unknown` at once. So a write
//! is applied at most once, and it is reported applied only when it was, and refused only when
//! it was not. If the retry loop gives up while the write is in doubt, or the evidence cannot be
//! read for good, the write ends with `OutcomeUnknown` too (a deadline's `Timeout` and a close's
//! `Closed` stay as they are: both are [`CuratorError::outcome_unknown`]'s).
//!
//! # The evidence, by kind of write ([`Evidence`])
//! - `None`: a create at a fixed path or a sequential one, a data write, a delete by path, a
//!   transaction. Equal bytes prove nothing (another client may write the same), a node found
//!   missing proves nothing (it may have been made and deleted since), a version found moved
//!   proves nothing (another writer may have moved it): `Unknown`.
//! - `UniqueName`: a protected create (`_c_<uuid>-`): a child of the parent with that prefix is
//!   ours (an ephemeral one only on our session): `Applied`; none (or an ephemeral one of an
//!   ended session, deleted then): `NotApplied`. Nobody else knows the name; the one thing
//!   another client can do is delete our node, and then no node of ours stands and one is made.
//! - `UniqueData`: data that holds an id no other write uses (a timed lease's record): the
//!   node holding exactly that data is `Applied`; with a version `v` named and the node still at
//!   `v` (same czxid, when known), `NotApplied`; else `Unknown`.
//! - `Identity`: a delete of the node made at zxid `czxid` (`if_created_at`): that node still
//!   there is `NotApplied`; gone is `Applied` for a delete told [`quietly`](crate::DeleteBuilder::quietly)
//!   (its contract is "gone, whoever did it"), else `Unknown`. A quiet delete by path: gone is
//!   `Applied`, a node there `Unknown` (it may have been made again).
//! - A write tag ([`WriteTag`](crate::WriteTag), module `write_tag`): decided there, exactly.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use zookeeper_client as zk;

use crate::error::{CuratorError, Result};
use crate::framework::{CuratorFramework, Session};
use crate::path;

/// Whether a write request that failed with `err` may have been applied: its reply was lost.
pub(crate) fn reply_lost(err: &zk::Error) -> bool {
    matches!(
        err,
        zk::Error::ConnectionLoss
            | zk::Error::Timeout
            | zk::Error::Custom(_)
            | zk::Error::SessionMoved
            | zk::Error::Throttled
            | zk::Error::SessionExpired
    )
}

/// One attempt's write request, watched for a lost reply. An attempt passes the result of the
/// request of the write itself (not of its reads, nor of the parents it makes) through
/// [`seen`](Self::seen).
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    lost: AtomicBool,
}

impl InFlight {
    /// Notes whether the write request's `result` lost its reply; hands it back.
    pub(crate) fn seen<T>(&self, result: std::result::Result<T, zk::Error>) -> std::result::Result<T, zk::Error> {
        if let Err(err) = &result {
            if reply_lost(err) {
                self.lost.store(true, Ordering::Relaxed);
            }
        }
        result
    }

    /// As [`seen`](Self::seen), for a transaction's answer: only a failed request (not a failed
    /// operation, which is a definite answer) loses its reply.
    pub(crate) fn seen_multi<T>(
        &self,
        result: std::result::Result<T, zk::MultiWriteError>,
    ) -> std::result::Result<T, zk::MultiWriteError> {
        if let Err(zk::MultiWriteError::RequestFailed { source }) = &result {
            if reply_lost(source) {
                self.lost.store(true, Ordering::Relaxed);
            }
        }
        result
    }

    /// Whether the write request's reply was lost.
    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

/// A write in doubt: its reply was lost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doubt {
    /// When the attempt whose reply was lost started.
    pub(crate) sent: Instant,
}

/// What the evidence of a write in doubt shows.
#[derive(Debug)]
pub(crate) enum Verdict<T> {
    /// It was applied; `T` is its result, as far as it can be read back.
    Applied(T),
    /// It was not: it may be sent again.
    NotApplied,
    /// Nothing shows either way: the write ends with [`CuratorError::OutcomeUnknown`].
    Unknown(String),
}

/// How a write without evidence of its own ends after a lost reply.
pub(crate) fn no_evidence<T>(what: &str) -> Verdict<T> {
    Verdict::Unknown(format!(
        "its reply was lost and {what} leaves nothing only it could have left, so it is not sent again \
         (docs/architecture.md section 4.4)"
    ))
}

impl CuratorFramework {
    /// Runs a write under the framework's retry loop and owns its lost replies (module docs):
    /// `attempt` sends the write on the session it is given, passing the write request's result
    /// through the [`InFlight`]; after an attempt whose reply was lost, `decide` is asked, on
    /// the next attempt's session, whether it was applied, before anything else is sent.
    pub(crate) async fn write_with_retry<T, A, AF, D, DF>(
        &self,
        op: &'static str,
        path: &str,
        mut attempt: A,
        mut decide: D,
    ) -> Result<T>
    where
        A: FnMut(Session, Arc<InFlight>) -> AF,
        AF: Future<Output = Result<T>>,
        D: FnMut(Session, Doubt) -> DF,
        DF: Future<Output = Result<Verdict<T>>>,
    {
        let doubt: Mutex<Option<Doubt>> = Mutex::new(None);
        let doubt = &doubt;
        let put = move |d: Doubt| *doubt.lock().unwrap_or_else(|e| e.into_inner()) = Some(d);
        let result = self
            .call_with_retry(op, path, |session, _| {
                let pending = doubt.lock().unwrap_or_else(|e| e.into_inner()).take();
                // Both futures are made here and do nothing until polled; the attempt is dropped
                // unpolled when the decision ends the write.
                let decision = pending.map(|pending| (pending, decide(session.clone(), pending)));
                let flight = Arc::new(InFlight::default());
                let send = attempt(session, flight.clone());
                async move {
                    if let Some((pending, decision)) = decision {
                        match decision.await {
                            Ok(Verdict::Applied(value)) => {
                                tracing::info!(path, "a write whose reply was lost was applied");
                                return Ok(value);
                            }
                            Ok(Verdict::NotApplied) => {
                                tracing::info!(path, "a write whose reply was lost was not applied: sending it again");
                            }
                            Ok(Verdict::Unknown(reason)) => {
                                tracing::warn!(path, %reason, "the outcome of a write whose reply was lost is unknown");
                                return Err(CuratorError::OutcomeUnknown { path: path.to_string(), reason });
                            }
                            // Not decided yet: decide on the next attempt.
                            Err(err) if err.is_retryable() || matches!(err, CuratorError::Closed) => {
                                put(pending);
                                return Err(err);
                            }
                            // The evidence could not be read for good (no permission, say): the
                            // write's outcome stays unknown, which is what the caller must hear,
                            // not the read's refusal.
                            Err(err) => {
                                return Err(CuratorError::OutcomeUnknown {
                                    path: path.to_string(),
                                    reason: format!("its reply was lost, and reading what would tell failed: {err}"),
                                });
                            }
                        }
                    }
                    let sent = Doubt { sent: Instant::now() };
                    let result = send.await;
                    if result.is_err() && flight.lost() {
                        tracing::debug!(path, "the write's reply was lost: in doubt");
                        put(sent);
                    }
                    result
                }
            })
            .await;
        match result {
            // The retry loop gave up while the write was in doubt: say so.
            Err(err) if err.is_retryable() && doubt.lock().unwrap_or_else(|e| e.into_inner()).is_some() => {
                Err(CuratorError::OutcomeUnknown {
                    path: path.to_string(),
                    reason: format!(
                        "its reply was lost, and the retry policy gave up before it could be decided: {err}"
                    ),
                })
            }
            other => other,
        }
    }
}

/// `UniqueName`: looks, on `session`, for the node of a protected create whose name starts with
/// `prefix` under `parent`. One from an ended session (`ephemeral`) is deleted: its owner is
/// gone and the node with it, so it cannot stand for this write.
pub(crate) async fn find_protected(
    session: &Session,
    parent: &str,
    prefix: &str,
    ephemeral: bool,
) -> Result<Verdict<(String, zk::Stat)>> {
    let client = session.client();
    tracing::debug!(path = parent, prefix, "getChildren (the node of a protected create in doubt?)");
    let children = match client.list_children(parent).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(Verdict::NotApplied),
        Err(err) => return Err(CuratorError::from_zk(parent, err)),
    };
    let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else { return Ok(Verdict::NotApplied) };
    let found = path::make_path(parent, &name);
    let Some(stat) = client.check_stat(&found).await.map_err(|e| CuratorError::from_zk(&found, e))? else {
        return Ok(Verdict::NotApplied);
    };
    if ephemeral && stat.ephemeral_owner != session.id() {
        tracing::info!(path = %found, owner = format_args!("{:#x}", stat.ephemeral_owner), "protected node from an ended session: deleting it");
        return match client.delete(&found, None).await {
            Ok(()) | Err(zk::Error::NoNode) => Ok(Verdict::NotApplied),
            Err(err) => Err(CuratorError::from_zk(&found, err)),
        };
    }
    tracing::info!(path = %found, "found the node of an earlier attempt");
    Ok(Verdict::Applied((found, stat)))
}

/// Syncs `path` (so that the read after it sees everything the server ordered before, the write
/// in doubt included if it was ever going to be applied) and reads its data and stat; `None`
/// when it is missing. The two requests are pipelined: one round trip.
pub(crate) async fn synced_read(session: &Session, path: &str) -> Result<Option<(Vec<u8>, zk::Stat)>> {
    let client = session.client();
    tracing::debug!(path, "sync + getData (a write in doubt)");
    let sync = client.sync(path);
    let read = client.get_data(path);
    match sync.await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(CuratorError::from_zk(path, err)),
    }
    match read.await {
        Ok(found) => Ok(Some(found)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(err) => Err(CuratorError::from_zk(path, err)),
    }
}

/// Syncs `path` and reads its stat (as [`synced_read`], without the data); `None` when it is
/// missing. Pipelined: one round trip.
pub(crate) async fn synced_exists(session: &Session, path: &str) -> Result<Option<zk::Stat>> {
    let client = session.client();
    tracing::debug!(path, "sync + exists (a write in doubt)");
    let sync = client.sync(path);
    let read = client.check_stat(path);
    match sync.await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(CuratorError::from_zk(path, err)),
    }
    read.await.map_err(|e| CuratorError::from_zk(path, e))
}

/// `UniqueData`: whether a write of `data` (stored bytes, holding an id no other write uses) to
/// `path` was applied. `expected` is what the write required of the node, when it required
/// anything: its version, and its czxid when known. A create requires its absence (`None`).
pub(crate) async fn decide_unique_data(
    session: &Session,
    path: &str,
    data: &[u8],
    expected: Option<(i32, Option<i64>)>,
) -> Result<Verdict<zk::Stat>> {
    let Some((found, stat)) = synced_read(session, path).await? else {
        return Ok(Verdict::Unknown("the node is gone: the write may have been applied before it went".into()));
    };
    if found == data {
        return Ok(Verdict::Applied(stat));
    }
    match expected {
        Some((version, czxid)) if stat.version == version && czxid.is_none_or(|c| c == stat.czxid) => {
            Ok(Verdict::NotApplied)
        }
        _ => Ok(Verdict::Unknown(
            "the node holds other data than the write's, and was written or made again since it was sent".into(),
        )),
    }
}

/// Whether a delete of `path` whose reply was lost was applied. `Identity`: the delete named
/// the node made at `czxid`; that node still there is `NotApplied`. Without it, a node at the
/// path proves nothing (it may have been made again since). The node gone proves nothing either
/// (another client may have deleted it), except to a delete told `quietly`, whose contract is
/// "gone, whoever did it".
pub(crate) async fn decide_delete(
    session: &Session,
    path: &str,
    czxid: Option<i64>,
    quietly: bool,
) -> Result<Verdict<()>> {
    if czxid.is_none() && !quietly {
        return Ok(no_evidence("a delete by path"));
    }
    tracing::debug!(path, czxid, "a delete in doubt");
    let now = synced_exists(session, path).await?;
    Ok(match (now, czxid) {
        (Some(stat), Some(czxid)) if stat.czxid == czxid => Verdict::NotApplied,
        (Some(_), None) => Verdict::Unknown(
            "a node stands at the path, and the delete named no node (if_created_at): it may have been \
             applied and the node made again since"
                .into(),
        ),
        _ if quietly => Verdict::Applied(()),
        _ => Verdict::Unknown(
            "the node it names is gone, deleted by this delete or by another client: nothing tells which".into(),
        ),
    })
}
