//! [`LeaseGrant`]: one grant of a [`TimedLease`](super::TimedLease), with its renewals, its
//! guarded writes and its release, each fenced by the grant's own child of the lease node
//! (docs/architecture.md section 20).

use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use curator_core::zk::Stat;
use curator_core::{CuratorError, CuratorFramework, Result, TransactionBuilder};
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;
use uuid::Uuid;

use super::node;
use super::record::{grant_child, Record};

/// The most unconfirmed renewals a grant remembers (the oldest are forgotten).
const MAX_UNCONFIRMED: usize = 16;

/// Why a [`LeaseGrant`] may no longer hold its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseLost {
    /// Its time ran out without a renewal: from now on a contender may take it over.
    Expired,
    /// The node was written by another grant of the same holder id (this handle's next grant,
    /// or another handle's), or a renewal found the grant ended or the node changed by someone
    /// else (taken over, or deleted or written by an operator).
    Superseded,
    /// It was given back ([`LeaseGrant::release`]).
    Released,
}

/// A grant's changing part.
#[derive(Debug)]
struct GrantState {
    /// The lease node's stat after our last write (its version: the one our next write names).
    node: Stat,
    /// Our clock's time when the last confirmed write was sent, plus the duration.
    expires_at: Instant,
    lost: Option<LeaseLost>,
    /// The write ids of our renewals that failed without a verdict (a lost reply): the node
    /// may hold one of them. Cleared by a confirmed write.
    unconfirmed: Vec<Uuid>,
    /// The release is done: the grant's fence is gone.
    released: bool,
}

#[derive(Debug)]
pub(super) struct Grant {
    fw: CuratorFramework,
    path: String,
    holder: String,
    duration: Duration,
    /// The grant id, in each of its records.
    id: Uuid,
    /// The grant's fence: `<path>/grant-<id>`.
    fence: String,
    /// The lease node's czxid: the node the grant was made on.
    czxid: i64,
    /// The granting multi's zxid: the node's `mzxid` after it, and the fence's czxid (the fence
    /// is made in that multi and never written).
    token: i64,
    state: StdMutex<GrantState>,
    /// `expires_at`, for the task that tells of the expiry.
    ends: watch::Sender<Instant>,
    lost: watch::Sender<Option<LeaseLost>>,
    /// Serialises renewals and the release.
    writes: Mutex<()>,
}

impl Grant {
    /// The grant `id` of `holder`'s lease at `path`, whose write, sent at `sent`, left the node as
    /// `stat` says.
    pub(super) fn new(
        fw: &CuratorFramework,
        path: &str,
        holder: &str,
        duration: Duration,
        id: Uuid,
        stat: &Stat,
        sent: Instant,
    ) -> Self {
        let expires_at = sent + duration;
        Self {
            fw: fw.clone(),
            path: path.to_string(),
            holder: holder.to_string(),
            duration,
            id,
            fence: grant_child(path, id),
            czxid: stat.czxid,
            token: stat.mzxid,
            state: StdMutex::new(GrantState {
                node: *stat,
                expires_at,
                lost: None,
                unconfirmed: Vec::new(),
                released: false,
            }),
            ends: watch::channel(expires_at).0,
            lost: watch::channel(None).0,
            writes: Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, GrantState> {
        // A panic while holding this lock leaves no broken invariant: use the state as is.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks the grant lost (the first reason stays). True if this call did.
    pub(super) fn mark_lost(&self, reason: LeaseLost) -> bool {
        let mut state = self.state();
        if state.lost.is_some() {
            return false;
        }
        state.lost = Some(reason);
        drop(state);
        tracing::info!(path = %self.path, holder = %self.holder, ?reason, "timed lease lost");
        self.lost.send_replace(Some(reason));
        true
    }

    /// `Ok(the node's stat after our last write)` while held, by the clock; otherwise marks it
    /// expired and fails.
    fn held(&self) -> Result<Stat> {
        let (node, expires_at, lost) = {
            let state = self.state();
            (state.node, state.expires_at, state.lost)
        };
        if lost.is_none() && Instant::now() < expires_at {
            return Ok(node);
        }
        self.mark_lost(LeaseLost::Expired);
        Err(CuratorError::NotHeld { path: self.path.clone(), what: "the timed lease" })
    }
}

/// Tells of the expiry at `expires_at` (moved by renewals) until the grant is dropped.
async fn expiry_notice(grant: Weak<Grant>, mut ends: watch::Receiver<Instant>) {
    loop {
        let end = *ends.borrow_and_update();
        tokio::select! {
            () = tokio::time::sleep_until(end) => {
                let Some(grant) = grant.upgrade() else { return };
                if grant.state().expires_at <= Instant::now() {
                    grant.mark_lost(LeaseLost::Expired);
                    return;
                }
            }
            changed = ends.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// A grant of a [`TimedLease`](super::TimedLease): held until [`expires_at`](Self::expires_at) unless renewed
/// ([`renew`](Self::renew)) or given back ([`release`](Self::release)). Dropping it gives
/// nothing back: the lease runs out.
#[derive(Debug, Clone)]
pub struct LeaseGrant {
    grant: Arc<Grant>,
}

impl LeaseGrant {
    pub(super) fn new(grant: Grant) -> Self {
        let grant = Arc::new(grant);
        curator_core::spawn_detached(expiry_notice(Arc::downgrade(&grant), grant.ends.subscribe()));
        Self { grant }
    }

    /// The shared grant, for its lease handle's note of its last grant.
    pub(super) fn inner(&self) -> &Arc<Grant> {
        &self.grant
    }

    /// The fencing token: the `mzxid` of the write that granted the lease. Every later grant
    /// of the lease has a larger one (a later write on the same path); renewals keep it. Pass
    /// it to what the lease protects so that it can refuse an earlier holder.
    pub fn fencing_token(&self) -> i64 {
        self.grant.token
    }

    /// The lease node's path.
    pub fn path(&self) -> &str {
        &self.grant.path
    }

    /// The holder id the grant was made for.
    pub fn holder(&self) -> &str {
        &self.grant.holder
    }

    /// When the lease ends on this process's clock unless renewed: the time the granting (or
    /// last renewing) write was sent, plus the duration. No contender can be granted it
    /// before then (docs/architecture.md section 20). A `tokio::time::Instant`: leases follow
    /// tokio's clock.
    pub fn expires_at(&self) -> Instant {
        self.grant.state().expires_at
    }

    /// The time left before [`expires_at`](Self::expires_at) (zero once lost).
    pub fn remaining(&self) -> Duration {
        let state = self.grant.state();
        if state.lost.is_some() {
            return Duration::ZERO;
        }
        state.expires_at.saturating_duration_since(Instant::now())
    }

    /// True while the lease is held: not lost, and its time has not run out (by the clock,
    /// whether or not the notice has been given). Costs no request.
    pub fn is_held(&self) -> bool {
        self.grant.held().is_ok()
    }

    /// Resolves when the lease may no longer be held, with the reason: at
    /// [`expires_at`](Self::expires_at) ([`LeaseLost::Expired`], before any contender can be
    /// granted it, as far as the runtime's timer is on time), or at a failed renewal or the
    /// release.
    pub async fn lost(&self) -> LeaseLost {
        let mut lost = self.grant.lost.subscribe();
        loop {
            if let Some(reason) = *lost.borrow_and_update() {
                return reason;
            }
            if lost.changed().await.is_err() {
                // The sender lives in the grant, which `self` keeps.
                return LeaseLost::Released;
            }
        }
    }

    /// A `watch` that turns `Some(reason)` when the lease may no longer be held (see
    /// [`lost`](Self::lost)).
    pub fn lost_watch(&self) -> watch::Receiver<Option<LeaseLost>> {
        self.grant.lost.subscribe()
    }

    /// Extends the lease to the duration from now (from when the write is sent): one multi, a
    /// check of the grant's fence and a write of the node at the version of our last write.
    /// While held only: once the time ran out it is [`NotHeld`](CuratorError::NotHeld) (take it
    /// again with [`TimedLease::try_acquire`](super::TimedLease::try_acquire), at once while the
    /// node is still ours). A grant ended by someone else (taken over, or the node deleted, or
    /// written, from outside) marks the grant [`LeaseLost::Superseded`] and is
    /// [`OwnNodeLost`](CuratorError::OwnNodeLost); a node written from outside also ends the
    /// grant's fence (one more request, on that path only). Any other error (a connection
    /// lost, retries used up) leaves the earlier end in force: renew again.
    ///
    /// A renewal whose reply was lost is decided by the core by its unique write id
    /// (`decided_by_data`): `Ok` if the node holds it, sent again if the node is still the
    /// grant's at the version it named, else [`OutcomeUnknown`](CuratorError::OutcomeUnknown)
    /// (the earlier end in force; the next renewal takes the node for ours if it holds that
    /// write).
    pub async fn renew(&self) -> Result<()> {
        let grant = &self.grant;
        let _writes = grant.writes.lock().await;
        let mut at = grant.held()?;
        let mut resolved = false;
        loop {
            let record = Record::new(&grant.holder, grant.duration, grant.id);
            // Unconfirmed until a verdict: a renewal dropped on its way (cancelled) or whose
            // reply is lost may still have been applied.
            {
                let mut state = grant.state();
                if state.unconfirmed.len() >= MAX_UNCONFIRMED {
                    state.unconfirmed.remove(0);
                }
                state.unconfirmed.push(record.write);
            }
            let sent = Instant::now();
            let written = node::renew(&grant.fw, &grant.path, &grant.fence, &at, &record).await;
            match written {
                Ok(stat) => {
                    let mut state = grant.state();
                    state.unconfirmed.clear();
                    state.node = stat;
                    if state.lost.is_some() {
                        // The time ran out while the write was on its way: lost is final.
                        return Err(CuratorError::NotHeld { path: grant.path.clone(), what: "the timed lease" });
                    }
                    state.expires_at = sent + grant.duration;
                    grant.ends.send_replace(state.expires_at);
                    tracing::debug!(path = %grant.path, holder = %grant.holder, "timed lease renewed");
                    return Ok(());
                }
                // An earlier renewal whose reply was lost may have moved the version on.
                Err(CuratorError::BadVersion { path }) if path == grant.path => {
                    if !resolved {
                        if let Some(own) = self.own_unconfirmed().await? {
                            (at, resolved) = (own, true);
                            continue;
                        }
                    }
                    // Written by someone else while our fence stands: the grant gives up, and
                    // its fence goes, so that no write of it commits from now on.
                    let lost = self.superseded();
                    if let Err(err) = node::end_fence(&grant.fw, &grant.fence).await {
                        tracing::warn!(path = %grant.fence, error = %err, "a timed lease's fence not deleted");
                    }
                    return Err(lost);
                }
                Err(CuratorError::NoNode { path }) if path == grant.path || path == grant.fence => {
                    return Err(self.superseded());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks the grant [`LeaseLost::Superseded`]: the error a renewal ends with.
    fn superseded(&self) -> CuratorError {
        let grant = &self.grant;
        grant.mark_lost(LeaseLost::Superseded);
        CuratorError::OwnNodeLost {
            path: grant.path.clone(),
            reason: "the timed lease was taken over, or its node deleted or written by someone else".into(),
        }
    }

    /// The node's stat when it is the grant's node holding one of our unconfirmed writes
    /// (adopted as ours).
    async fn own_unconfirmed(&self) -> Result<Option<Stat>> {
        let grant = &self.grant;
        if grant.state().unconfirmed.is_empty() {
            return Ok(None);
        }
        let (data, stat) = match grant.fw.get_data().undecompressed().for_path_with_stat(&grant.path).await {
            Ok(found) => found,
            Err(CuratorError::NoNode { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(record) = Record::decode(&grant.path, &data) else { return Ok(None) };
        let mut state = grant.state();
        if !state.unconfirmed.contains(&record.write) || stat.czxid != grant.czxid {
            return Ok(None);
        }
        state.unconfirmed.clear();
        state.node = stat;
        Ok(Some(stat))
    }

    /// Gives the lease back: one multi deleting the grant's fence and the node (at the version
    /// of our last write), so that another may take it at once, and marks the grant
    /// [`LeaseLost::Released`] (unless it was lost before). A grant ended already (taken over,
    /// or the node deleted) has nothing to give back: `Ok`, and nothing is deleted. A node
    /// written by someone else since (or with children of someone else's) is left; only the
    /// fence goes, so the grant ends all the same. An expired grant still gives back the node
    /// if no one took it over.
    ///
    /// It never deletes another grant's node: the multi deletes nothing unless the fence, which
    /// no later grant has, still stands. So a release that failed (its outcome unknown, the
    /// retries used up) may be called again. One whose reply was lost is decided by the core by
    /// the fence (`decided_by_delete`, by its czxid): still there, it is sent again; gone, the
    /// core cannot tell who deleted it, but the grant is over either way, which is what a
    /// release promises: `Ok`.
    pub async fn release(&self) -> Result<()> {
        let grant = &self.grant;
        let _writes = grant.writes.lock().await;
        let (mut version, lost, released) = {
            let state = grant.state();
            (state.node.version, state.lost, state.released)
        };
        if released || lost == Some(LeaseLost::Superseded) {
            return Ok(());
        }
        // Given up before the delete can commit: nobody is granted it while we think we hold.
        grant.mark_lost(LeaseLost::Released);
        let mut resolved = false;
        let done = loop {
            match node::release(&grant.fw, &grant.path, &grant.fence, grant.token, version).await {
                Err(CuratorError::BadVersion { path }) if path == grant.path && !resolved => {
                    resolved = true;
                    match self.own_unconfirmed().await? {
                        Some(own) => version = own.version,
                        None => break node::end_fence(&grant.fw, &grant.fence).await,
                    }
                }
                // Written by someone else, or with children of someone else's: left as it is.
                Err(CuratorError::BadVersion { path } | CuratorError::NotEmpty { path }) if path == grant.path => {
                    break node::end_fence(&grant.fw, &grant.fence).await
                }
                other => break other,
            }
        };
        if done.is_ok() {
            grant.state().released = true;
        }
        done
    }

    /// A transaction that commits only while this grant stands: its first operation checks that
    /// the grant's fence (the child `grant-<uuid>` of the lease node, made with the grant and
    /// deleted by whatever ends it) exists, and is the first result. So it commits only while no
    /// one took the lease over, released it, or deleted it (even if it was made again since),
    /// whatever the clocks say. [`NotHeld`](CuratorError::NotHeld) once the lease may be lost;
    /// nothing is built then. A refused check fails the commit with
    /// [`NoNode`](CuratorError::NoNode) on the fence's path; nothing was written.
    pub fn transaction(&self) -> Result<TransactionBuilder> {
        self.grant.held()?;
        Ok(self.grant.fw.transaction().check(&self.grant.fence, -1))
    }
}
