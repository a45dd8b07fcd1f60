//! `delete()`: versions, children, quiet, and guaranteed deletes.
//!
//! A guaranteed delete whose foreground attempts fail with an unknown outcome returns the error
//! but keeps trying in the background, on whatever session is current, until the node is gone,
//! a definite error stops it, or the framework closes (`close()` waits a bounded time for it).
//! So does one whose future is dropped before it finished (cancel safety: a `release()` wrapped
//! in a timeout during an outage leaves nothing behind).

use std::future::Future;
use std::pin::Pin;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::ops::outcome::{decide_delete, InFlight};
use crate::ops::{check_version, Pending};
use crate::path;
use crate::schema_set::SchemaOp;

/// Builder of a delete. See [`CuratorFramework::delete`].
#[derive(Debug, Clone)]
pub struct DeleteBuilder {
    fw: CuratorFramework,
    version: Option<i32>,
    created_at: Option<i64>,
    guaranteed: bool,
    children: bool,
    quietly: bool,
}

impl CuratorFramework {
    /// Starts a delete.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// fw.create().creating_parents_if_needed().for_path("/app/jobs/1", Vec::new()).await?;
    /// fw.delete().deleting_children_if_needed().for_path("/app").await?;
    /// assert!(fw.check_exists().for_path("/app").await?.is_none());
    /// fw.delete().quietly().for_path("/app").await?; // no NoNode error for a node already gone
    /// // guaranteed(): Curator's guaranteed delete, retried in the background until it is done.
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> DeleteBuilder {
        DeleteBuilder {
            fw: self.clone(),
            version: None,
            created_at: None,
            guaranteed: false,
            children: false,
            quietly: false,
        }
    }
}

impl DeleteBuilder {
    /// Delete only if the node has this version.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }
    /// Delete only the node created at zxid `czxid` (its `Stat::czxid`): a node made again at
    /// the path since, by this client or another, is left, and the delete fails with `NoNode`
    /// (the node it names is gone). The node is looked at first and deleted at the version seen
    /// (or at [`with_version`](Self::with_version)'s), looked at again if written in between.
    /// For a recipe deleting its own node where the delete may run long after, when a new node
    /// may stand at the path (a kept node closed during an outage, with
    /// [`guaranteed`](Self::guaranteed)).
    pub fn if_created_at(mut self, czxid: i64) -> Self {
        self.created_at = Some(czxid);
        self
    }
    /// Keep trying in the background after an unknown outcome, until the node is gone.
    pub fn guaranteed(mut self) -> Self {
        self.guaranteed = true;
        self
    }
    /// Delete the node's children (recursively) first.
    pub fn deleting_children_if_needed(mut self) -> Self {
        self.children = true;
        self
    }
    /// A missing node is not an error.
    pub fn quietly(mut self) -> Self {
        self.quietly = true;
        self
    }

    /// Deletes `path`.
    ///
    /// Applied once, or reported as unknown: a delete whose reply was lost is decided by the
    /// node's identity ([`if_created_at`](Self::if_created_at): that node still there, it is sent
    /// again) or, told [`quietly`](Self::quietly), by the node being gone (its contract: gone,
    /// whoever did it); otherwise it ends with [`OutcomeUnknown`](CuratorError::OutcomeUnknown)
    /// (a node at the path may have been made again since: sending again could delete it). A
    /// [`guaranteed`](Self::guaranteed) delete goes on in the background after an unknown
    /// outcome, by path (or by identity, when given), until the node is gone
    /// (docs/architecture.md sections 4.4 and 7).
    pub fn for_path(self, path: &str) -> Pending<()> {
        let checked = path::validate(path)
            .and_then(|_| check_version(path, self.version))
            .and_then(|_| self.fw.check_schema(path, SchemaOp::Delete));
        if let Err(err) = checked {
            return Pending::failed(&self.fw, CuratorEventType::Delete, path, err);
        }
        if path == "/" {
            let err = CuratorError::InvalidPath { path: path.into(), reason: "cannot delete the root" };
            return Pending::failed(&self.fw, CuratorEventType::Delete, path, err);
        }
        let fw = self.fw.clone();
        let owned = path.to_string();
        Pending::new(&fw, CuratorEventType::Delete, path, async move {
            let mut unfinished = self.guaranteed.then(|| Unfinished {
                fw: self.fw.clone(),
                path: owned.clone(),
                target: self.target(),
                armed: true,
            });
            let (this, path) = (&self, &owned);
            let result = self
                .fw
                .write_with_retry(
                    "delete",
                    &owned,
                    |session, flight| async move { this.attempt(session.client(), path, &flight).await },
                    |session, _| async move { decide_delete(&session, path, this.created_at, this.quietly).await },
                )
                .await;
            if let Some(unfinished) = unfinished.as_mut() {
                unfinished.armed = false;
            }
            match result {
                // Also after a deadline cut the retries short (Timeout): the background task is
                // not under the caller's deadline.
                Err(err) if self.guaranteed && err.outcome_unknown() && !self.fw.is_closed() => {
                    tracing::info!(path = %owned, error = %err, "guaranteed delete continues in the background");
                    self.fw.guarantee_delete(owned, self.target());
                    Err(err)
                }
                other => other,
            }
        })
    }

    /// What the delete removes, besides its path.
    fn target(&self) -> Target {
        Target { version: self.version, created_at: self.created_at, children: self.children }
    }

    async fn attempt(&self, client: &zk::Client, path: &str, flight: &InFlight) -> Result<()> {
        match self.target().delete(client, path, Some(flight)).await {
            Err(CuratorError::NoNode { .. }) if self.quietly => Ok(()),
            other => other,
        }
    }
}

/// Which node a delete removes at its path, and how: a builder's settings, kept for a
/// guaranteed delete's background attempts.
#[derive(Debug, Clone, Copy)]
struct Target {
    version: Option<i32>,
    created_at: Option<i64>,
    children: bool,
}

impl Target {
    /// Deletes the node at `path` this target names. With `created_at`, looks at the node
    /// first: another node there (or none) is `NoNode`; deleted at the version seen unless one
    /// was given, and looked at again after a `BadVersion` (written since the look).
    /// `flight`, when given, notes the reply of the delete of the node itself.
    async fn delete(self, client: &zk::Client, path: &str, flight: Option<&InFlight>) -> Result<()> {
        let Some(czxid) = self.created_at else {
            return delete_node(client, path, self.version, self.children, flight).await;
        };
        loop {
            tracing::debug!(path, czxid, "exists (the node to delete, by its czxid)");
            let stat = match client.check_stat(path).await {
                Ok(Some(stat)) if stat.czxid == czxid => stat,
                Ok(_) => return Err(CuratorError::from_zk(path, zk::Error::NoNode)),
                Err(err) => return Err(CuratorError::from_zk(path, err)),
            };
            match delete_node(client, path, Some(self.version.unwrap_or(stat.version)), self.children, flight).await {
                Err(CuratorError::BadVersion { .. }) if self.version.is_none() => continue,
                other => return other,
            }
        }
    }
}

/// Deletes `path`, its children first when `children` is set; `flight`, when given, notes the
/// reply of the delete of `path` itself.
fn delete_node<'a>(
    client: &'a zk::Client,
    path: &'a str,
    version: Option<i32>,
    children: bool,
    flight: Option<&'a InFlight>,
) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>> {
    Box::pin(async move {
        loop {
            let deleted = client.delete(path, version).await;
            let deleted = match flight {
                Some(flight) => flight.seen(deleted),
                None => deleted,
            };
            match deleted {
                Ok(()) => return Ok(()),
                Err(zk::Error::NotEmpty) if children => {
                    let kids = match client.list_children(path).await {
                        Ok(kids) => kids,
                        Err(zk::Error::NoNode) => continue,
                        Err(err) => return Err(CuratorError::from_zk(path, err)),
                    };
                    for kid in kids {
                        let child = path::make_path(path, &kid);
                        match delete_node(client, &child, None, true, None).await {
                            Ok(()) | Err(CuratorError::NoNode { .. }) => {}
                            Err(err) => return Err(err),
                        }
                    }
                }
                Err(err) => return Err(CuratorError::from_zk(path, err)),
            }
        }
    })
}

/// A guaranteed delete in flight: if its future is dropped before the outcome is known, the
/// delete goes on in the background.
struct Unfinished {
    fw: CuratorFramework,
    path: String,
    target: Target,
    armed: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.armed && !self.fw.is_closed() {
            tracing::info!(path = %self.path, "guaranteed delete dropped before it finished: it continues in the background");
            self.fw.guarantee_delete(std::mem::take(&mut self.path), self.target);
        }
    }
}

impl CuratorFramework {
    /// Keeps deleting `path` in the background until it is gone.
    fn guarantee_delete(&self, path: String, target: Target) {
        let fw = self.clone();
        self.spawn_background(async move {
            let mut retry = fw.cleanup_retry_loop();
            loop {
                let attempt = async {
                    let session = fw.session_for(&path).await?;
                    target.delete(session.client(), &path, None).await
                };
                let err = match attempt.await {
                    Ok(()) | Err(CuratorError::NoNode { .. }) => {
                        tracing::info!(path = %path, "guaranteed delete done");
                        return;
                    }
                    Err(CuratorError::Closed) => return,
                    Err(err) => err,
                };
                if let Err(err) = retry.on_error(err).await {
                    if !fw.is_closed() {
                        fw.report_unhandled(&format!("guaranteed delete of {path} failed"), &err);
                    }
                    return;
                }
            }
        });
    }
}

impl CuratorFramework {
    /// Deletes the node at `path` if it may be one that a create of ours made although its
    /// reply was lost: an ephemeral node of the current session or, with `persistent`, a
    /// persistent node. Another session's ephemeral node is left alone: it is someone else's.
    /// `Ok` once the node is gone or is not ours.
    ///
    /// The cleanup of a create at a known path whose outcome stayed unknown (a recipe's lock
    /// node at a fixed name, a kept node closed before it looked at the node in its way). As
    /// [`delete_protected`](Self::delete_protected), it does not depend on the user's retry
    /// policy: it retries every retryable error until done or the framework closes
    /// ([`CuratorError::Closed`]). The delete is at the version looked at, so a node made
    /// again in between is left.
    pub async fn delete_if_ours(&self, path: &str, persistent: bool) -> Result<()> {
        let mut retry = self.cleanup_retry_loop();
        loop {
            let attempt = async {
                let session = self.session_for(path).await?;
                let client = session.client();
                tracing::debug!(path, "exists (a node of ours, after an unknown outcome?)");
                let stat = match client.check_stat(path).await {
                    Ok(Some(stat)) => stat,
                    Ok(None) => return Ok(()),
                    Err(err) => return Err(CuratorError::from_zk(path, err)),
                };
                let ours = if stat.ephemeral_owner == 0 { persistent } else { stat.ephemeral_owner == session.id() };
                if !ours {
                    return Ok(());
                }
                tracing::debug!(path, version = stat.version, "delete (a node of ours, left by an unknown outcome)");
                match client.delete(path, Some(stat.version)).await {
                    Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(()),
                    Err(err) => Err(CuratorError::from_zk(path, err)),
                }
            };
            match attempt.await {
                Ok(()) => return Ok(()),
                Err(err) => retry.on_error(err).await?,
            }
        }
    }
}
