//! [`TimedLease`]: a lease held for a duration, with no session tie (kazoo's
//! `NonBlockingLease`), safe without clock agreement (docs/architecture.md section 20).

use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use curator_core::{path, CuratorError, CuratorFramework, Result, TransactionBuilder};
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;
use uuid::Uuid;

use super::record::{check_duration, check_holder, Record};

/// The most unconfirmed renewals a grant remembers (the oldest are forgotten).
const MAX_UNCONFIRMED: usize = 16;

/// How much longer than the holder's duration a contender waits before taking a lease over:
/// 1% (the clock-rate assumption of docs/architecture.md section 20).
fn takeover_wait(duration: Duration) -> Duration {
    duration + duration / 100
}

/// Why a [`LeaseGrant`] may no longer hold its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseLost {
    /// Its time ran out without a renewal: from now on a contender may take it over.
    Expired,
    /// The node was written by another grant of the same holder id (this handle's next grant,
    /// or another handle's), or a renewal found it changed by someone else (an operator).
    Superseded,
    /// It was given back ([`LeaseGrant::release`]).
    Released,
}

/// A lease on one node that holds for a duration, renewed by its holder and taken by another
/// once it ran out (kazoo's `NonBlockingLease`). It has no tie to a ZooKeeper session: a holder
/// whose session expires, or whose process stops, keeps the lease until its time runs out.
///
/// [`try_acquire`](Self::try_acquire) never waits: it gives a [`LeaseGrant`] or `None`. The
/// node holds the holder's id, the duration and a write id (no times): no clock agreement is
/// needed. The holder's lease ends at its own clock's time when it sent the granting write,
/// plus the duration; a contender takes it over only after it has seen the node unchanged (same
/// `mzxid` and version), on its own clock, for the duration plus 1%, counted from a read
/// answered after that write; the takeover is a write at the version seen. So the holder's end
/// comes first as long as no clock runs more than 1% faster than another over one duration
/// (docs/architecture.md section 20). The price: a contender that first looks at an expired
/// lease still waits one duration (call `try_acquire` again; [`takeover_at`](Self::takeover_at)
/// says when).
///
/// A handle whose holder id is the one in the node takes the lease at once (kazoo's renewal by
/// identity): the id must be unique to its holder. A handle's new grant supersedes its
/// earlier one ([`LeaseLost::Superseded`], told before the new write is sent); to extend a
/// grant, [`renew`](LeaseGrant::renew) it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::TimedLease;
///
/// let lease = TimedLease::new(&fw, "/jobs/nightly/lease", Duration::from_secs(60), "host-a")?;
/// let other = TimedLease::new(&fw, "/jobs/nightly/lease", Duration::from_secs(60), "host-b")?;
/// let grant = lease.try_acquire().await?.expect("nobody held it");
/// assert!(other.try_acquire().await?.is_none()); // host-a holds it for a minute
/// assert!(grant.remaining() > Duration::from_secs(59));
/// // Writes that must not outlive the lease: they commit only while the node is as granted.
/// grant.transaction()?.create("/jobs/nightly/run-1", b"started".to_vec(), curator_core::CreateMode::Persistent).commit().await?;
/// grant.renew().await?; // another minute from now
/// let token = grant.fencing_token(); // larger for every later grant of this lease
/// grant.release().await?; // the node goes: another may take it at once
/// let next = other.try_acquire().await?.expect("released");
/// assert!(next.fencing_token() > token);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TimedLease {
    fw: CuratorFramework,
    path: String,
    holder: String,
    duration: Duration,
    /// The node as last read, and when (this handle's clock): serialises attempts.
    seen: Mutex<Option<Seen>>,
    /// This handle's last grant: superseded by its next one.
    last: StdMutex<Weak<Grant>>,
}

/// A version of the node a contender has seen.
#[derive(Debug, Clone, Copy)]
struct Seen {
    mzxid: i64,
    version: i32,
    /// When the first read that answered this version came back.
    at: Instant,
    /// The duration in the node.
    duration: Duration,
}

impl TimedLease {
    /// A lease on the node `path` (created with its parents when first granted), held for
    /// `duration` (1 ms to a year) by grants of this handle, whose holder is `holder` (not
    /// empty, one line, at most 1024 bytes; kazoo's identifier: use one unique to the holder).
    /// Bad input is [`InvalidPath`](CuratorError::InvalidPath) or
    /// [`InvalidArgument`](CuratorError::InvalidArgument); nothing is sent.
    pub fn new(fw: &CuratorFramework, path: &str, duration: Duration, holder: &str) -> Result<Self> {
        path::validate(path)?;
        if path == "/" {
            return Err(CuratorError::InvalidPath { path: path.into(), reason: "a lease node cannot be the root" });
        }
        check_duration(path, duration)?;
        check_holder(path, holder)?;
        Ok(Self {
            fw: fw.clone(),
            path: path.to_string(),
            holder: holder.to_string(),
            duration,
            seen: Mutex::new(None),
            last: StdMutex::new(Weak::new()),
        })
    }

    /// The lease node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// This handle's holder id.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// One attempt, without waiting: a grant when the node is missing, holds this holder's id,
    /// or has been seen unchanged by this handle for its holder's duration plus 1%; `None`
    /// otherwise (also when another contender's write came first). The node is read once and
    /// written at most once. A node this recipe cannot read (garbage, or a newer format) is
    /// [`BadData`](CuratorError::BadData) and is left alone.
    pub async fn try_acquire(&self) -> Result<Option<LeaseGrant>> {
        let mut seen = self.seen.lock().await;
        let read = self.fw.get_data().for_path_with_stat(&self.path).await;
        let read_at = Instant::now();
        let (data, stat) = match read {
            Ok(found) => found,
            Err(CuratorError::NoNode { .. }) => {
                *seen = None;
                return self.create().await;
            }
            Err(e) => return Err(e),
        };
        let record = Record::decode(&self.path, &data)?;
        let first = match *seen {
            Some(s) if s.mzxid == stat.mzxid && s.version == stat.version => s,
            _ => Seen { mzxid: stat.mzxid, version: stat.version, at: read_at, duration: record.duration },
        };
        *seen = Some(first);
        let ours = record.holder == self.holder;
        let ran_out = read_at >= first.at + takeover_wait(first.duration);
        if !ours && !ran_out {
            tracing::debug!(path = %self.path, holder = %record.holder, "timed lease held by another");
            return Ok(None);
        }
        self.supersede_last();
        let record = Record::new(&self.holder, self.duration);
        let sent = Instant::now();
        let written =
            self.fw.set_data().with_version(stat.version).unique_data().for_path(&self.path, record.encode()).await;
        match written {
            Ok(stat) => Ok(Some(self.granted(stat.mzxid, stat.version, sent))),
            Err(CuratorError::BadVersion { .. } | CuratorError::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// When this handle could take over the lease as last seen, if its holder does not renew
    /// it: `None` before a read, or when the node was missing. (A node holding this handle's
    /// own holder id is taken at once, whatever this says.)
    pub async fn takeover_at(&self) -> Option<Instant> {
        self.seen.lock().await.map(|s| s.at + takeover_wait(s.duration))
    }

    /// Marks this handle's last grant [`LeaseLost::Superseded`] before a write that would
    /// replace it: one handle holds one grant at a time.
    fn supersede_last(&self) {
        let last = self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).upgrade();
        if let Some(grant) = last {
            grant.mark_lost(LeaseLost::Superseded);
        }
    }

    /// Creates the missing node: a grant, or `None` when another create came first.
    async fn create(&self) -> Result<Option<LeaseGrant>> {
        self.supersede_last();
        let record = Record::new(&self.holder, self.duration);
        let sent = Instant::now();
        let created = self
            .fw
            .create()
            .creating_parents_if_needed()
            .unique_data()
            .for_path_with_stat(&self.path, record.encode())
            .await;
        match created {
            Ok((_, stat)) => Ok(Some(self.granted(stat.mzxid, stat.version, sent))),
            // Another create came first (and, for NoNode, that node went again while ours
            // was being told apart from it).
            Err(CuratorError::NodeExists { .. } | CuratorError::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The grant of a write at `mzxid` leaving the node at `version`, sent at `sent`.
    fn granted(&self, mzxid: i64, version: i32, sent: Instant) -> LeaseGrant {
        let expires_at = sent + self.duration;
        tracing::info!(path = %self.path, holder = %self.holder, fencing_token = mzxid, "timed lease granted");
        let grant = LeaseGrant::new(Grant {
            fw: self.fw.clone(),
            path: self.path.clone(),
            holder: self.holder.clone(),
            duration: self.duration,
            token: mzxid,
            state: StdMutex::new(GrantState { version, expires_at, lost: None, unconfirmed: Vec::new() }),
            ends: watch::channel(expires_at).0,
            lost: watch::channel(None).0,
            writes: Mutex::new(()),
        });
        *self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::downgrade(&grant.grant);
        grant
    }
}

/// A grant's changing part.
#[derive(Debug)]
struct GrantState {
    /// The node's version after our last write.
    version: i32,
    /// Our clock's time when the last confirmed write was sent, plus the duration.
    expires_at: Instant,
    lost: Option<LeaseLost>,
    /// The write ids of our renewals that failed without a verdict (a lost reply): the node
    /// may hold one of them. Cleared by a confirmed write.
    unconfirmed: Vec<Uuid>,
}

#[derive(Debug)]
struct Grant {
    fw: CuratorFramework,
    path: String,
    holder: String,
    duration: Duration,
    token: i64,
    state: StdMutex<GrantState>,
    /// `expires_at`, for the task that tells of the expiry.
    ends: watch::Sender<Instant>,
    lost: watch::Sender<Option<LeaseLost>>,
    /// Serialises renewals and the release.
    writes: Mutex<()>,
}

impl Grant {
    fn state(&self) -> std::sync::MutexGuard<'_, GrantState> {
        // A panic while holding this lock leaves no broken invariant: use the state as is.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks the grant lost (the first reason stays). True if this call did.
    fn mark_lost(&self, reason: LeaseLost) -> bool {
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

    /// `Ok(version)` while held, by the clock; otherwise marks it expired and fails.
    fn held_version(&self) -> Result<i32> {
        let (version, expires_at, lost) = {
            let state = self.state();
            (state.version, state.expires_at, state.lost)
        };
        if lost.is_none() && Instant::now() < expires_at {
            return Ok(version);
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

/// A grant of a [`TimedLease`]: held until [`expires_at`](Self::expires_at) unless renewed
/// ([`renew`](Self::renew)) or given back ([`release`](Self::release)). Dropping it gives
/// nothing back: the lease runs out.
#[derive(Debug, Clone)]
pub struct LeaseGrant {
    grant: Arc<Grant>,
}

impl LeaseGrant {
    fn new(grant: Grant) -> Self {
        let grant = Arc::new(grant);
        curator_core::spawn_detached(expiry_notice(Arc::downgrade(&grant), grant.ends.subscribe()));
        Self { grant }
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
        self.grant.held_version().is_ok()
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

    /// Extends the lease to the duration from now (from when the write is sent): a write of the
    /// node at the version of our last write. While held only: once the time ran out it is
    /// [`NotHeld`](CuratorError::NotHeld) (take it again with
    /// [`TimedLease::try_acquire`], at once while the node is still ours). A node changed by
    /// someone else marks the grant [`LeaseLost::Superseded`] and is
    /// [`OwnNodeLost`](CuratorError::OwnNodeLost). Any other error (a connection lost, retries
    /// used up) leaves the earlier end in force: renew again.
    pub async fn renew(&self) -> Result<()> {
        let grant = &self.grant;
        let _writes = grant.writes.lock().await;
        let mut version = grant.held_version()?;
        let mut resolved = false;
        loop {
            let record = Record::new(&grant.holder, grant.duration);
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
            let written =
                grant.fw.set_data().with_version(version).unique_data().for_path(&grant.path, record.encode()).await;
            match written {
                Ok(stat) => {
                    let mut state = grant.state();
                    state.unconfirmed.clear();
                    state.version = stat.version;
                    if state.lost.is_some() {
                        // The time ran out while the write was on its way: lost is final.
                        return Err(CuratorError::NotHeld { path: grant.path.clone(), what: "the timed lease" });
                    }
                    state.expires_at = sent + grant.duration;
                    grant.ends.send_replace(state.expires_at);
                    tracing::debug!(path = %grant.path, holder = %grant.holder, "timed lease renewed");
                    return Ok(());
                }
                Err(CuratorError::BadVersion { .. } | CuratorError::NoNode { .. }) => {
                    // An earlier renewal whose reply was lost may have moved the version on.
                    if !resolved {
                        if let Some(own) = self.own_unconfirmed_version().await? {
                            (version, resolved) = (own, true);
                            continue;
                        }
                    }
                    grant.mark_lost(LeaseLost::Superseded);
                    return Err(CuratorError::OwnNodeLost {
                        path: grant.path.clone(),
                        reason: "the timed lease's node was changed by someone else".into(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The node's version when it holds one of our unconfirmed writes (adopted as ours).
    async fn own_unconfirmed_version(&self) -> Result<Option<i32>> {
        let grant = &self.grant;
        if grant.state().unconfirmed.is_empty() {
            return Ok(None);
        }
        let (data, stat) = match grant.fw.get_data().for_path_with_stat(&grant.path).await {
            Ok(found) => found,
            Err(CuratorError::NoNode { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(record) = Record::decode(&grant.path, &data) else { return Ok(None) };
        let mut state = grant.state();
        if !state.unconfirmed.contains(&record.write) {
            return Ok(None);
        }
        state.unconfirmed.clear();
        state.version = stat.version;
        Ok(Some(stat.version))
    }

    /// Gives the lease back: deletes the node at the version of our last write, so that
    /// another may take it at once, and marks the grant [`LeaseLost::Released`] (unless it
    /// was lost before). A node changed by someone else since is left alone; an expired grant
    /// still deletes its own write, if no one took it over.
    pub async fn release(&self) -> Result<()> {
        let grant = &self.grant;
        let _writes = grant.writes.lock().await;
        let (version, lost) = {
            let state = grant.state();
            (state.version, state.lost)
        };
        if lost == Some(LeaseLost::Superseded) || lost == Some(LeaseLost::Released) {
            return Ok(());
        }
        // Given up before the delete can commit: nobody is granted it while we think we hold.
        grant.mark_lost(LeaseLost::Released);
        let mut deleted = grant.fw.delete().with_version(version).for_path(&grant.path).await;
        if matches!(deleted, Err(CuratorError::BadVersion { .. })) {
            if let Some(own) = self.own_unconfirmed_version().await? {
                deleted = grant.fw.delete().with_version(own).for_path(&grant.path).await;
            }
        }
        match deleted {
            Ok(()) | Err(CuratorError::BadVersion { .. } | CuratorError::NoNode { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A transaction that commits only while the lease node is as our last write left it (a
    /// `check` of its version goes first in the same multi and is the first result): no one
    /// took the lease over, whatever the clocks say. [`NotHeld`](CuratorError::NotHeld) once
    /// the lease may be lost; nothing is built then.
    pub fn transaction(&self) -> Result<TransactionBuilder> {
        let version = self.grant.held_version()?;
        Ok(self.grant.fw.transaction().check(&self.grant.path, version))
    }
}
