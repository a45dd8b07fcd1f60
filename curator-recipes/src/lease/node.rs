//! The writes of a timed lease: its node and its grants' fences (docs/architecture.md section
//! 20).
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
//! **Lost replies** (section 4.4) are the core's: each multi is sent with `commit()`, under the
//! framework's retry loop, and declares its evidence, which the core reads after a lost reply
//! before anything is sent again. The grant and renewal multis write the record, whose write id
//! is unique to the write: `decided_by_data(lease, found)`, `found` the node's stat they write
//! at (a takeover's, a renewal's; none for a create). The release deletes the fence, made in the
//! granting multi, so its czxid is the grant's fencing token: `decided_by_delete(fence, token)`.
//! What stays here is the lease's reading of an [`OutcomeUnknown`](CuratorError::OutcomeUnknown):
//! a grant's is answered by whether the node holds its record ([`standing`]), a release's by
//! whether the fence is gone ([`ended`]).

use curator_core::zk::Stat;
use curator_core::{
    make_parents, CreateMode, CuratorError, CuratorFramework, Result, TransactionCreate, TransactionResult,
    TransactionSetData,
};
use uuid::Uuid;

use super::record::{grant_child, Record, GRANT_PREFIX};

/// The lease node as a contender read it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub(super) stat: Stat,
    /// The grant its record names (`None` in a format 1 record).
    pub(super) grant: Option<Uuid>,
}

/// Whether a multi sent with `commit()` ended without knowing if it was applied. Its retryable
/// errors say that nothing was (the core ends a write in doubt `OutcomeUnknown`); `Timeout` and
/// `Closed` may have come while it was in doubt.
fn in_doubt(err: &CuratorError) -> bool {
    err.outcome_unknown() && !err.is_retryable()
}

/// The stat the multi's write of `lease` left, among its `results` (as answered, or as read
/// back by the core after a lost reply).
fn written(lease: &str, results: Vec<TransactionResult>) -> Result<Stat> {
    results
        .into_iter()
        .find_map(|result| match result {
            TransactionResult::SetData { path, stat } if path == lease => Some(stat),
            _ => None,
        })
        .ok_or_else(|| CuratorError::OutcomeUnknown {
            path: lease.to_string(),
            reason: "the timed lease write was answered without the lease node's stat".into(),
        })
}

/// A grant's multi ended with `err`, whose outcome is unknown (the core could not tell from the
/// record, or gave up before it could): whether a grant of ours stands, which is what the caller
/// asks. The node holding exactly `data` (the record, whose write id only this grant uses) is
/// the grant, with the node's stat (the grant's write is still the node's last: its `mzxid` is
/// the token). Anything else is no grant of ours (`None`), whether or not the write was applied:
/// the node holds another write, or is gone. `err` when the node cannot be read. A read behind
/// the write can only miss it: then the node names this holder, whose next attempt takes it at
/// once.
async fn standing(fw: &CuratorFramework, lease: &str, data: &[u8], err: CuratorError) -> Result<Option<Stat>> {
    tracing::debug!(path = lease, error = %err, "getData (a timed lease grant of unknown outcome: does it stand?)");
    match fw.get_data().undecompressed().for_path_with_stat(lease).await {
        Ok((found, stat)) if found == data => {
            tracing::info!(path = lease, "a timed lease grant of unknown outcome stands");
            Ok(Some(stat))
        }
        Ok(_) | Err(CuratorError::NoNode { .. }) => {
            tracing::info!(path = lease, "a timed lease grant of unknown outcome does not stand");
            Ok(None)
        }
        Err(read) => {
            tracing::debug!(path = lease, error = %read, "the timed lease node could not be read");
            Err(err)
        }
    }
}

/// A release ended with `err`, whose outcome is unknown: the fence made at `token` gone means
/// the grant is over (ended by this release or by whoever took the lease over or deleted it),
/// which is what a release promises: `Ok`. Still there (or not readable), `err`: the retries
/// gave up before the release could be sent again; it may be called again.
async fn ended(fw: &CuratorFramework, fence: &str, token: i64, err: CuratorError) -> Result<()> {
    tracing::debug!(path = fence, error = %err, "exists (a timed lease release of unknown outcome: is the fence gone?)");
    match fw.check_exists().for_path(fence).await {
        Ok(Some(stat)) if stat.czxid == token => Err(err),
        Ok(_) => {
            tracing::info!(
                path = fence,
                "a timed lease release of unknown outcome: the fence is gone, the grant is over"
            );
            Ok(())
        }
        Err(read) => {
            tracing::debug!(path = fence, error = %read, "the timed lease fence could not be read");
            Err(err)
        }
    }
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
/// another create came first, or when a multi of unknown outcome left no grant of ours
/// ([`standing`]).
pub(super) async fn create(fw: &CuratorFramework, lease: &str, record: &Record) -> Result<Option<Stat>> {
    let (data, fence) = parts(lease, record)?;
    let mut parents_made = false;
    loop {
        let committed = fw
            .transaction()
            .create_with(lease, data.clone(), plain(CreateMode::Persistent))
            .create_with(&fence, Vec::new(), plain(CreateMode::Persistent))
            .set_data_with(lease, data.clone(), at_version(0))
            .decided_by_data(lease, None)
            .commit()
            .await;
        match committed {
            Ok(results) => return written(lease, results).map(Some),
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
            Err(err) if in_doubt(&err) => return standing(fw, lease, &data, err).await,
            Err(err) => return Err(err),
        }
    }
}

/// Writes `record` over the lease node read as `found` (at its version), deletes the fence of
/// the grant it names and makes the new one, in one multi. `None` when the node was written,
/// deleted or made again since, or when a multi of unknown outcome left no grant of ours
/// ([`standing`]). A node whose record names no fence, or one that is gone (deleted from
/// outside), is replaced: [`replace`].
pub(super) async fn take_over(
    fw: &CuratorFramework,
    lease: &str,
    found: Found,
    record: &Record,
) -> Result<Option<Stat>> {
    let Some(old) = found.grant else { return replace(fw, lease, found, record).await };
    let old = grant_child(lease, old);
    let (data, fence) = parts(lease, record)?;
    let committed = fw
        .transaction()
        .set_data_with(lease, data.clone(), at_version(found.stat.version))
        .delete(&old, None)
        .create_with(&fence, Vec::new(), plain(CreateMode::Persistent))
        .decided_by_data(lease, Some(&found.stat))
        .commit()
        .await;
    match committed {
        Ok(results) => written(lease, results).map(Some),
        Err(CuratorError::BadVersion { path } | CuratorError::NoNode { path }) if path == lease => Ok(None),
        Err(CuratorError::NoNode { path }) if path == old => {
            tracing::info!(path = lease, fence = %old, "the timed lease's fence is gone: replacing the node");
            replace(fw, lease, found, record).await
        }
        Err(err) if in_doubt(&err) => standing(fw, lease, &data, err).await,
        Err(err) => Err(err),
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
        let deleted = fw
            .delete()
            .if_created_at(found.stat.czxid)
            .with_version(found.stat.version)
            .quietly()
            .for_path(lease)
            .await;
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
        Some(stat) if stat.czxid == found.stat.czxid && stat.version == found.stat.version => {}
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
/// write at `at`'s version (`at`: the node's stat after the grant's last write, the core's proof
/// that a renewal whose reply was lost was not applied while the node is still that node at that
/// version). The node's stat after it. `NoNode` on the fence: the grant is over; `BadVersion` on
/// the node: written by someone else (or by an earlier renewal of ours whose answer was lost);
/// [`OutcomeUnknown`](CuratorError::OutcomeUnknown): its reply was lost and the node, written or
/// made again since, does not hold it.
pub(super) async fn renew(fw: &CuratorFramework, lease: &str, fence: &str, at: &Stat, record: &Record) -> Result<Stat> {
    let data = record.encode();
    let results = fw
        .transaction()
        .check(fence, -1)
        .set_data_with(lease, data, at_version(at.version))
        .decided_by_data(lease, Some(at))
        .commit()
        .await?;
    written(lease, results)
}

/// Releases the grant fenced by `fence`: one multi, the fence's delete and the node's at
/// `version`. `token` is the grant's fencing token, which is the fence's czxid (both made by
/// the granting multi): the core's proof that a release whose reply was lost was not applied
/// while that fence stands. `Ok` also when the grant was over already (its fence gone: nothing
/// to give back; [`ended`]). `BadVersion` on the node: written by someone else (or by an
/// earlier renewal of ours whose answer was lost); `NotEmpty`: it has other children.
pub(super) async fn release(fw: &CuratorFramework, lease: &str, fence: &str, token: i64, version: i32) -> Result<()> {
    let committed = fw
        .transaction()
        .delete(fence, None)
        .delete(lease, Some(version))
        .decided_by_delete(fence, token)
        .commit()
        .await;
    match committed {
        Ok(_) => Ok(()),
        Err(CuratorError::NoNode { path }) if path == fence => Ok(()),
        Err(err) if in_doubt(&err) => ended(fw, fence, token, err).await,
        Err(err) => Err(err),
    }
}

/// Ends the grant fenced by `fence` without deleting the lease node (one that cannot be
/// deleted as released): deletes the fence alone. A fence found gone is fine.
pub(super) async fn end_fence(fw: &CuratorFramework, fence: &str) -> Result<()> {
    fw.delete().quietly().for_path(fence).await
}
