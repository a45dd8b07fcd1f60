//! [`TimedLease`]: a lease held for a duration, with no session tie (kazoo's
//! `NonBlockingLease`), safe without clock agreement (docs/architecture.md section 20).

use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use curator_core::zk::Stat;
use curator_core::{path, CuratorError, CuratorFramework, Result};
use tokio::sync::Mutex;
use tokio::time::Instant;
use uuid::Uuid;

use super::grant::{Grant, LeaseGrant, LeaseLost};
use super::node::{self, Found};
use super::record::{check_duration, check_holder, Record};

/// How much longer than the holder's duration a contender waits before taking a lease over:
/// 1% (the clock-rate assumption of docs/architecture.md section 20).
fn takeover_wait(duration: Duration) -> Duration {
    duration + duration / 100
}

/// A lease on one node that holds for a duration, renewed by its holder and taken by another
/// once it ran out (kazoo's `NonBlockingLease`). It has no tie to a ZooKeeper session: a holder
/// whose session expires, or whose process stops, keeps the lease until its time runs out.
///
/// [`try_acquire`](Self::try_acquire) never waits: it gives a [`LeaseGrant`] or `None`. The
/// node holds the holder's id, the duration, a write id and a grant id (no times): no clock
/// agreement is needed. The holder's lease ends at its own clock's time when it sent the
/// granting write, plus the duration; a contender takes it over only after it has seen the node
/// unchanged (same `mzxid` and version), on its own clock, for the duration plus 1%, counted
/// from a read answered after that write; the takeover is a write at the version seen. So the
/// holder's end comes first as long as no clock runs more than 1% faster than another over one
/// duration (docs/architecture.md section 20). The price: a contender that first looks at an
/// expired lease still waits one duration (call `try_acquire` again;
/// [`takeover_at`](Self::takeover_at) says when).
///
/// A handle whose holder id is the one in the node takes the lease at once (kazoo's renewal by
/// identity): the id must be unique to its holder. A handle's new grant supersedes its
/// earlier one ([`LeaseLost::Superseded`], told before the new write is sent); to extend a
/// grant, [`renew`](LeaseGrant::renew) it.
///
/// **The fence.** Each grant has a child of the lease node, `grant-<uuid>`, made in the same
/// multi as the granting write and deleted in the same multi as the write that ends the grant
/// (a takeover, the release). A grant's renewals, guarded writes
/// ([`transaction`](LeaseGrant::transaction)) and release check that child first, so none of
/// them commits once a later grant exists, even when the lease node was deleted and made again
/// in between (a version would be equal again; the child never is). It costs no request. The
/// lease node's children are the recipe's: delete the whole lease with its children
/// (`delete().deleting_children_if_needed()`), which ends its grant.
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
/// // Writes that must not outlive the grant: they commit only while no later grant exists.
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
    /// written at most once (one multi: the record and the grant's fence, the earlier grant's
    /// fence deleted), except for a node without a fence (written by format 1, or its fence
    /// deleted from outside), which is deleted and made again. A node this recipe cannot read
    /// (garbage, or a newer format) is [`BadData`](CuratorError::BadData) and is left alone.
    ///
    /// A write whose reply was lost is decided by its unique write id (the core's
    /// `decided_by_data`): the grant is given if the node holds it, and a takeover is sent again
    /// while the node is still as read. Otherwise it is `None`: the node is read once more, and
    /// no grant of ours stands, whether or not the write was applied. An error whose outcome is
    /// unknown (the node could not be read either) may leave the node naming this holder, which
    /// this handle then takes at once.
    pub async fn try_acquire(&self) -> Result<Option<LeaseGrant>> {
        let mut seen = self.seen.lock().await;
        let read = self.fw.get_data().undecompressed().for_path_with_stat(&self.path).await;
        let read_at = Instant::now();
        let (data, stat) = match read {
            Ok(found) => found,
            Err(CuratorError::NoNode { .. }) => {
                *seen = None;
                return self.grant(None).await;
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
        self.grant(Some(Found { stat, grant: record.grant })).await
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

    /// A new grant: the node created (`found` is `None`: it was missing) or taken over (as
    /// read); `None` when another write came first.
    async fn grant(&self, found: Option<Found>) -> Result<Option<LeaseGrant>> {
        self.supersede_last();
        let id = Uuid::new_v4();
        let record = Record::new(&self.holder, self.duration, id);
        let sent = Instant::now();
        let written = match found {
            None => node::create(&self.fw, &self.path, &record).await?,
            Some(found) => node::take_over(&self.fw, &self.path, found, &record).await?,
        };
        Ok(written.map(|stat| self.granted(id, &stat, sent)))
    }

    /// The grant `id` whose write, sent at `sent`, left the node as `stat` says.
    fn granted(&self, id: Uuid, stat: &Stat, sent: Instant) -> LeaseGrant {
        tracing::info!(path = %self.path, holder = %self.holder, fencing_token = stat.mzxid, "timed lease granted");
        let grant = LeaseGrant::new(Grant::new(&self.fw, &self.path, &self.holder, self.duration, id, stat, sent));
        *self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::downgrade(grant.inner());
        grant
    }
}
