//! The writes of a timed lease: its node and its grants' fences (docs/architecture.md section
//! 20), and how each is decided after a lost reply.
//!
//! ```text
//! <lease>                  the record (record.rs): holder, duration, write id, grant id
//! <lease>/grant-<uuid>     the fence of the grant the record names: made with the grant,
//!                          deleted with it (takeover, release); never written
//! ```
//!
//! Every write is one multi, so the record and its fence never disagree:
//!
//! | write | multi |
//! |---|---|
//! | grant, the node missing | create node; create fence; setData node @0 (its stat: the fencing token) |
//! | grant, taking the node over | setData node @v; delete the old fence; create the new one |
//! | renewal | check fence; setData node @v |
//! | guarded write | check fence; the user's operations |
//! | release | delete fence; delete node @v |
//!
//! A fence is a node no later grant can make again (its name holds a UUID of its grant), so a
//! `check` of its existence refuses every write of an earlier grant, whatever happened to the
//! lease node since: taken over (the fence deleted in the takeover's multi), released, or
//! deleted from outside (with its children) and made again.
//!
//! **Lost replies** (section 4.4): these multis carry no write tag, so the core cannot decide
//! them; each is sent with `commit_once` under the framework's retry loop, and after an attempt
//! whose reply may have been lost, its own evidence decides on the next attempt's session
//! (after a `sync`) before anything is sent again ([`Evidence`]).

use std::sync::atomic::{AtomicBool, Ordering};

use curator_core::zk::{self, Stat};
use curator_core::{
    make_parents, CreateMode, CuratorError, CuratorFramework, Result, Session, TransactionBuilder, TransactionCreate,
    TransactionResult, TransactionSetData,
};
use uuid::Uuid;

use super::record::{grant_child, Record, GRANT_PREFIX};

/// The lease node as a contender read it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub(super) czxid: i64,
    pub(super) version: i32,
    /// The grant its record names (`None` in a format 1 record).
    pub(super) grant: Option<Uuid>,
}

/// What decides a lease write whose reply was lost.
#[derive(Debug)]
enum Evidence<'a> {
    /// A grant, writing these bytes (unique: a fresh write id): it stands when the node holds
    /// them. A takeover of the node made at `czxid`, at `version` (`before`), was not applied
    /// while the node is still that node at that version: sent again. Otherwise no grant
    /// stands, whether or not the write was applied (the node holds another write, or is
    /// gone): settled without one, never sent again.
    Grant { data: &'a [u8], before: Option<(i32, i64)> },
    /// A renewal, writing these bytes at `version` of the node made at `czxid`: applied when
    /// the node holds them; not applied when the node is still that node at `version`;
    /// otherwise unknown.
    Renewal { data: &'a [u8], version: i32, czxid: i64 },
    /// A release of the grant fenced by `fence`: done when the fence is gone (the grant is
    /// over, whoever ended it: what a release promises); not applied while it stands.
    Release { fence: &'a str },
}

/// What the evidence showed.
enum Verdict {
    /// Settled, with the lease node's stat as read (see [`Evidence`]; `None`: no grant stands,
    /// or a release is done).
    Settled(Option<Stat>),
    /// Not applied: it may be sent again.
    NotApplied,
    Unknown(String),
}

impl Evidence<'_> {
    /// Decides on `session`, after a `sync` (pipelined with the read: one round trip).
    async fn decide(&self, session: &Session, lease: &str) -> Result<Verdict> {
        let client = session.client();
        let read = match self {
            Evidence::Release { fence } => {
                tracing::debug!(path = %fence, "sync + exists (a timed lease release whose reply was lost)");
                let sync = client.sync(lease);
                let read = client.check_stat(fence);
                synced(lease, sync.await)?;
                let found = read.await.map_err(|e| CuratorError::from_zk(fence, e))?;
                return Ok(if found.is_none() { Verdict::Settled(None) } else { Verdict::NotApplied });
            }
            Evidence::Grant { .. } | Evidence::Renewal { .. } => {
                tracing::debug!(path = lease, "sync + getData (a timed lease write whose reply was lost)");
                let sync = client.sync(lease);
                let read = client.get_data(lease);
                synced(lease, sync.await)?;
                match read.await {
                    Ok(found) => Some(found),
                    Err(zk::Error::NoNode) => None,
                    Err(e) => return Err(CuratorError::from_zk(lease, e)),
                }
            }
        };
        Ok(match (self, read) {
            (Evidence::Grant { data, .. } | Evidence::Renewal { data, .. }, Some((found, stat))) if found == *data => {
                Verdict::Settled(Some(stat))
            }
            (
                Evidence::Grant { before: Some((version, czxid)), .. } | Evidence::Renewal { version, czxid, .. },
                Some((_, stat)),
            ) if stat.version == *version && stat.czxid == *czxid => Verdict::NotApplied,
            (Evidence::Grant { .. }, _) => Verdict::Settled(None),
            _ => Verdict::Unknown(
                "the renewal's reply was lost, and the lease node was written, deleted or made again since it was \
                 sent"
                    .into(),
            ),
        })
    }
}

/// A sync's answer: a missing node is fine (the read after it says so).
fn synced(path: &str, answer: std::result::Result<(), zk::Error>) -> Result<()> {
    match answer {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(CuratorError::from_zk(path, e)),
    }
}

/// Commits `tx` under the framework's retry loop, one `commit_once` per attempt. After an
/// attempt whose reply may have been lost, `evidence` decides first, on the next attempt's
/// session: settled ends the write, not applied sends it again, unknown is
/// [`OutcomeUnknown`](CuratorError::OutcomeUnknown). `Ok` holds the stat of the multi's
/// `setData` of `lease` when it was answered, else the evidence's.
async fn commit(
    fw: &CuratorFramework,
    op: &'static str,
    lease: &str,
    tx: TransactionBuilder,
    evidence: Evidence<'_>,
) -> Result<Option<Stat>> {
    let in_doubt = AtomicBool::new(false);
    let (tx, evidence, in_doubt) = (&tx, &evidence, &in_doubt);
    fw.call_with_retry(op, lease, |session, _| async move {
        if in_doubt.load(Ordering::Relaxed) {
            match evidence.decide(&session, lease).await? {
                Verdict::Settled(stat) => {
                    tracing::info!(
                        path = lease,
                        op,
                        found = stat.is_some(),
                        "a timed lease write whose reply was lost, decided"
                    );
                    return Ok(stat);
                }
                Verdict::NotApplied => {
                    tracing::info!(
                        path = lease,
                        op,
                        "a timed lease write whose reply was lost was not applied: sending it again"
                    );
                    in_doubt.store(false, Ordering::Relaxed);
                }
                Verdict::Unknown(reason) => {
                    tracing::warn!(path = lease, op, %reason, "the outcome of a timed lease write is unknown");
                    return Err(CuratorError::OutcomeUnknown { path: lease.to_string(), reason });
                }
            }
        }
        match tx.clone().commit_once().await {
            Ok(results) => Ok(results.into_iter().find_map(|result| match result {
                TransactionResult::SetData { path, stat } if path == lease => Some(stat),
                _ => None,
            })),
            Err(err) => {
                if err.outcome_unknown() {
                    in_doubt.store(true, Ordering::Relaxed);
                }
                Err(err)
            }
        }
    })
    .await
}

/// The record's bytes and its grant's fence.
fn parts(lease: &str, record: &Record) -> Result<(Vec<u8>, String)> {
    let grant = record.grant.ok_or_else(|| CuratorError::InvalidArgument {
        path: lease.to_string(),
        reason: "a timed lease record is written with its grant".into(),
    })?;
    Ok((record.encode(), grant_child(lease, grant)))
}

fn plain(mode: CreateMode) -> TransactionCreate {
    TransactionCreate::new(mode).uncompressed()
}

fn at_version(version: i32) -> TransactionSetData {
    TransactionSetData::new().with_version(version).uncompressed()
}

/// Creates the missing lease node for `record`'s grant, with its fence, in one multi (the
/// node is written at version 0 in the same multi, so that the answer carries the granting
/// write's stat). Missing parents are made (persistent) and the multi sent again. `None` when
/// another create came first.
pub(super) async fn create(fw: &CuratorFramework, lease: &str, record: &Record) -> Result<Option<Stat>> {
    let (data, fence) = parts(lease, record)?;
    let mut parents_made = false;
    loop {
        let tx = fw
            .transaction()
            .create_with(lease, data.clone(), plain(CreateMode::Persistent))
            .create_with(&fence, Vec::new(), plain(CreateMode::Persistent))
            .set_data_with(lease, data.clone(), at_version(0));
        match commit(fw, "timed_lease_create", lease, tx, Evidence::Grant { data: &data, before: None }).await {
            Err(CuratorError::NodeExists { path }) if path == lease => return Ok(None),
            Err(CuratorError::NoNode { path }) if path == lease && !parents_made => {
                parents_made = true;
                fw.call_with_retry("timed_lease_parents", lease, |session, _| async move {
                    make_parents(fw, session.client(), lease, false).await
                })
                .await?;
            }
            // The parents went again meanwhile: another contender's turn.
            Err(CuratorError::NoNode { path }) if path == lease => return Ok(None),
            other => return other,
        }
    }
}

/// Writes `record` over the lease node read as `found` (at its version), deletes the fence of
/// the grant it names and makes the new one, in one multi. `None` when the node was written,
/// deleted or made again since. A node whose record names no fence, or one that is gone
/// (deleted from outside), is replaced: [`replace`].
pub(super) async fn take_over(
    fw: &CuratorFramework,
    lease: &str,
    found: Found,
    record: &Record,
) -> Result<Option<Stat>> {
    let Some(old) = found.grant else { return replace(fw, lease, found, record).await };
    let old = grant_child(lease, old);
    let (data, fence) = parts(lease, record)?;
    let tx = fw
        .transaction()
        .set_data_with(lease, data.clone(), at_version(found.version))
        .delete(&old, None)
        .create_with(&fence, Vec::new(), plain(CreateMode::Persistent));
    let evidence = Evidence::Grant { data: &data, before: Some((found.version, found.czxid)) };
    match commit(fw, "timed_lease_take_over", lease, tx, evidence).await {
        Err(CuratorError::BadVersion { path } | CuratorError::NoNode { path }) if path == lease => Ok(None),
        Err(CuratorError::NoNode { path }) if path == old => {
            tracing::info!(path = lease, fence = %old, "the timed lease's fence is gone: replacing the node");
            replace(fw, lease, found, record).await
        }
        other => other,
    }
}

/// Replaces a lease node without a fence (format 1, or its fence deleted from outside): deletes
/// the node read as `found` (by its czxid, at its version, and only while it has no children:
/// every node with a live grant has its fence) and creates it again for `record`'s grant.
/// Fences its record does not name (left by a meddler: these writes never leave one) are
/// deleted first; another child is [`BadData`](CuratorError::BadData). `None` when the node
/// changed since.
async fn replace(fw: &CuratorFramework, lease: &str, found: Found, record: &Record) -> Result<Option<Stat>> {
    let mut swept = false;
    loop {
        let deleted =
            fw.delete().if_created_at(found.czxid).with_version(found.version).quietly().for_path(lease).await;
        match deleted {
            // Gone (that node, by us or another): make it again.
            Ok(()) => return create(fw, lease, record).await,
            Err(CuratorError::BadVersion { .. }) => return Ok(None),
            Err(CuratorError::NotEmpty { .. }) if !swept => {
                swept = true;
                if !sweep(fw, lease, found).await? {
                    return Ok(None);
                }
            }
            Err(CuratorError::NotEmpty { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Deletes the fences under the lease node that its record does not name, once the node is
/// still as `found` after the listing (a fence listed and not named then is dead: a grant's
/// fence goes in the multi that replaces its record). False when the node changed.
async fn sweep(fw: &CuratorFramework, lease: &str, found: Found) -> Result<bool> {
    let children = match fw.get_children().for_path(lease).await {
        Ok(children) => children,
        Err(CuratorError::NoNode { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    match fw.check_exists().for_path(lease).await? {
        Some(stat) if stat.czxid == found.czxid && stat.version == found.version => {}
        _ => return Ok(false),
    }
    let named = found.grant.map(|g| format!("{GRANT_PREFIX}{}", g.as_hyphenated()));
    let foreign: Vec<&String> = children.iter().filter(|c| !c.starts_with(GRANT_PREFIX)).collect();
    if !foreign.is_empty() {
        return Err(CuratorError::BadData {
            path: lease.to_string(),
            reason: format!("the timed lease node has children this recipe did not make: {foreign:?}"),
        });
    }
    for child in children.iter().filter(|c| Some(*c) != named.as_ref()) {
        let path = format!("{lease}/{child}");
        tracing::info!(%path, "deleting a timed lease fence its record does not name");
        fw.delete().quietly().for_path(&path).await?;
    }
    Ok(true)
}

/// Renews the grant fenced by `fence` with `record`: one multi, the fence's check and the node's
/// write at `version` (of the node made at `czxid`). The node's stat after it. `NoNode` on the
/// fence: the grant is over; `BadVersion` on the node: written by someone else (or by an earlier
/// renewal of ours whose answer was lost).
pub(super) async fn renew(
    fw: &CuratorFramework,
    lease: &str,
    fence: &str,
    (version, czxid): (i32, i64),
    record: &Record,
) -> Result<Stat> {
    let data = record.encode();
    let tx = fw.transaction().check(fence, -1).set_data_with(lease, data.clone(), at_version(version));
    let evidence = Evidence::Renewal { data: &data, version, czxid };
    commit(fw, "timed_lease_renew", lease, tx, evidence).await?.ok_or_else(|| CuratorError::OutcomeUnknown {
        path: lease.to_string(),
        reason: "the renewal was answered without the lease node's stat".into(),
    })
}

/// Releases the grant fenced by `fence`: one multi, the fence's delete and the node's at
/// `version`. `Ok` also when the grant was over already (its fence gone: nothing to give back).
/// `BadVersion` on the node: written by someone else (or by an earlier renewal of ours whose
/// answer was lost); `NotEmpty`: it has other children.
pub(super) async fn release(fw: &CuratorFramework, lease: &str, fence: &str, version: i32) -> Result<()> {
    let tx = fw.transaction().delete(fence, None).delete(lease, Some(version));
    match commit(fw, "timed_lease_release", lease, tx, Evidence::Release { fence }).await {
        Ok(_) => Ok(()),
        Err(CuratorError::NoNode { path }) if path == fence => Ok(()),
        Err(e) => Err(e),
    }
}

/// Ends the grant fenced by `fence` without deleting the lease node (one that cannot be
/// deleted as released): deletes the fence alone. A fence found gone is fine.
pub(super) async fn end_fence(fw: &CuratorFramework, fence: &str) -> Result<()> {
    fw.delete().quietly().for_path(fence).await
}
