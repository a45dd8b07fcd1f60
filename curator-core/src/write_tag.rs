//! [`WriteTag`]: a node only one writer changes, bumped in the same transaction as each of its
//! writes, so that a write whose reply was lost is decided exactly (docs/architecture.md
//! sections 4.4 and 16.2).
//!
//! # The algorithm
//! ```text
//! a write with the tag, one at a time per tag:
//!   multi [the write's operations .., create T (first write) | setData T at t] ──ok──► t + 1
//!     │ T's operation refused (NoNode, BadVersion): T was reaped while idle, or its parent
//!     │   made again; nothing was written: read T, and the writer may send again
//!     └ reply lost: sync, exists T:
//!          T at t + 1 (or made, when it was absent)          ─► applied; its mzxid is the write's zxid
//!          T at t (or still absent)                          ─► not applied
//!          T gone, less than the reap age after the sending  ─► not applied
//!          T at another version, or gone past the reap age   ─► unknown
//! the write made T: in the background, list the parent, stat the other tags (one round),
//!   delete those unwritten for longer than the reap age, each at the version and czxid read
//! the last handle dropped: T is deleted (guaranteed)
//! ```
//! Sound because only this handle ever writes `T` (its name holds a UUID), one write at a time,
//! so its version is known; a reaper deletes only tags whose mtime, by the server's clock, is
//! older than the reap age, and a tag bumped by the write in doubt has an mtime after its
//! sending.

mod reap;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::error::{CuratorError, Result};
use crate::framework::{CuratorFramework, Session};
use crate::ops::outcome::{synced_exists, Verdict};
use crate::path;

/// Name prefix of a write tag, a child of the node its writes go with (docs/architecture.md
/// section 5).
pub const WRITE_TAG_PREFIX: &str = "curator-rs-write-tag-";

/// How long another handle's write tag may go without a write before a handle that makes its
/// own tag under the same parent deletes it as left behind (by a process that crashed, was
/// killed or lost power): one hour, unless set with [`WriteTag::with_reap_age`]. It must exceed
/// the longest time a write may take to be decided after its reply was lost
/// (docs/architecture.md section 16.2); a live handle whose idle tag was reaped makes it again.
pub const WRITE_TAG_REAP_AGE: Duration = Duration::from_secs(60 * 60);

/// `state` while the tag node does not exist (as far as this handle knows).
const ABSENT: i64 = i64::MIN;

/// A new tag path under `parent`.
fn fresh_name(parent: &str) -> String {
    path::make_path(parent, &format!("{WRITE_TAG_PREFIX}{}", uuid::Uuid::new_v4()))
}

/// A writer's tag: a persistent child `<parent>/curator-rs-write-tag-<uuid>` that only this
/// handle (and its clones) writes, bumped in the same transaction as each write that carries it
/// ([`TransactionBuilder::with_write_tag`](crate::TransactionBuilder::with_write_tag)). After a
/// lost reply, its version says whether the write was applied: exactly, where the other
/// evidence a write leaves (equal bytes, a version moved) proves nothing. It costs no request:
/// the tag's operation is one more in the same multi.
///
/// The tag is made by its first write and deleted when the last clone is dropped. Tags left by
/// processes that ended without dropping theirs are deleted by the next handle that makes its
/// tag under the same parent, once unwritten for longer than the reap age. A tag under a node
/// keeps a plain delete of that node from succeeding (`NotEmpty`): delete it with its children.
/// Writes carrying one tag run one at a time.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_core::{TransactionSetData, WriteTag};
///
/// fw.create().creating_parents_if_needed().for_path("/orders/next", b"1".to_vec()).await?;
/// let tag = WriteTag::new(&fw, "/orders/next")?;
/// // Applied once, or reported as OutcomeUnknown: never sent twice on a guess.
/// fw.transaction()
///     .set_data_with("/orders/next", b"2".to_vec(), TransactionSetData::new().with_version(0))
///     .with_write_tag(&tag)
///     .commit()
///     .await?;
/// assert_eq!(fw.get_data().for_path("/orders/next").await?, b"2");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct WriteTag {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    fw: CuratorFramework,
    parent: String,
    /// The tag node's path: a fresh name each time the tag is made again (after it was found
    /// gone), so that no delete aimed at an earlier one can take it.
    path: std::sync::Mutex<String>,
    /// The tag's version, or [`ABSENT`]: exact while the write lock is held.
    state: AtomicI64,
    reap_age_ms: AtomicU64,
    /// One write at a time.
    writing: Arc<tokio::sync::Mutex<()>>,
}

impl WriteTag {
    /// A new tag under `parent` (relative to the framework's namespace), made by its first
    /// write. The parent must exist when that write is sent; [`InvalidPath`](CuratorError::InvalidPath)
    /// for a bad path, before anything is sent.
    pub fn new(fw: &CuratorFramework, parent: &str) -> Result<Self> {
        path::validate(parent)?;
        let path = fresh_name(parent);
        path::validate(&path)?;
        let reap_age_ms = u64::try_from(WRITE_TAG_REAP_AGE.as_millis()).unwrap_or(u64::MAX);
        Ok(Self {
            inner: Arc::new(Inner {
                fw: fw.clone(),
                parent: parent.to_string(),
                path: std::sync::Mutex::new(path),
                state: AtomicI64::new(ABSENT),
                reap_age_ms: AtomicU64::new(reap_age_ms),
                writing: Arc::new(tokio::sync::Mutex::new(())),
            }),
        })
    }

    /// Sets the reap age (default [`WRITE_TAG_REAP_AGE`]), for this tag and its clones: how long
    /// other tags under the same parent may go unwritten before this one's first write deletes
    /// them, and the longest time after which a write in doubt whose tag is gone is still
    /// decided "not applied". Any `Duration` is accepted; past `u64::MAX` milliseconds it is
    /// that.
    pub fn with_reap_age(self, age: Duration) -> Self {
        let ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
        self.inner.reap_age_ms.store(ms, Ordering::Relaxed);
        self
    }

    /// The reap age.
    pub fn reap_age(&self) -> Duration {
        Duration::from_millis(self.inner.reap_age_ms.load(Ordering::Relaxed))
    }

    /// The tag node's path (relative to the namespace). It changes when the tag, found gone
    /// (reaped while idle), is made again under a fresh name.
    pub fn path(&self) -> String {
        self.inner.path.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The node the tag is a child of.
    pub fn parent(&self) -> &str {
        &self.inner.parent
    }

    /// The framework the tag writes with.
    pub(crate) fn framework(&self) -> &CuratorFramework {
        &self.inner.fw
    }

    /// Whether, as far as this handle knows, the tag node exists: made by a write and not found
    /// gone since. While it does, its parent was neither deleted nor made again since the
    /// tag's last write (a node with children cannot be deleted, and only this handle makes the
    /// tag).
    pub fn exists(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) != ABSENT
    }

    /// Takes the tag for one write (writes carrying a tag run one at a time).
    pub(crate) async fn lock(&self) -> TagLock {
        let guard = self.inner.writing.clone().lock_owned().await;
        TagLock { tag: self.clone(), _guard: guard }
    }
}

/// One write's hold of a tag: its operation, and the decision of its outcome.
pub(crate) struct TagLock {
    tag: WriteTag,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl TagLock {
    /// The tag handle.
    pub(crate) fn tag(&self) -> &WriteTag {
        &self.tag
    }

    fn state(&self) -> i64 {
        self.tag.inner.state.load(Ordering::Acquire)
    }

    /// Records what the tag is now; a tag found gone is made again under a fresh name.
    fn set_state(&self, state: i64) {
        let inner = &self.tag.inner;
        if state == ABSENT && inner.state.load(Ordering::Acquire) != ABSENT {
            *inner.path.lock().unwrap_or_else(|e| e.into_inner()) = fresh_name(&inner.parent);
        }
        inner.state.store(state, Ordering::Release);
    }

    /// Adds the tag's operation to `writer`: its create (empty, persistent, the ACL provider's
    /// ACL for its path) when absent, else its write at the version known.
    pub(crate) fn add_op(&self, writer: &mut zk::MultiWriter<'_>) -> Result<()> {
        let path = &self.tag.path();
        let added = match self.state() {
            ABSENT => {
                let acl = self.tag.inner.fw.acl_for_path(path);
                writer.add_create(path, &[], &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acl)))
            }
            version => writer.add_set_data(path, &[], Some(version as i32)),
        };
        added.map_err(|e| CuratorError::from_zk(path, e))
    }

    /// The write with the tag's operation was applied: the tag moved on by one. A tag just made
    /// reaps the others left behind under its parent, in the background.
    pub(crate) fn written(&self) {
        let made = self.state() == ABSENT;
        self.set_state(match self.state() {
            ABSENT => 0,
            version => i64::from((version as i32).wrapping_add(1)),
        });
        if made {
            self.reap_others();
        }
    }

    fn reap_others(&self) {
        let inner = &self.tag.inner;
        if inner.fw.is_closed() {
            return;
        }
        let (fw, parent, own, age) = (inner.fw.clone(), inner.parent.clone(), self.tag.path(), self.tag.reap_age());
        inner.fw.spawn_background(async move { reap::reap(&fw, &parent, &own, age).await });
    }

    /// The tag's operation was refused (reaped while idle, or its parent made again): nothing
    /// was written. Reads the tag so that the next write names it as it is.
    pub(crate) async fn learn(&self, session: &Session) -> Result<()> {
        let path = &self.tag.path();
        tracing::debug!(path = %path, "exists (a write tag out of step)");
        let stat = session.client().check_stat(path).await.map_err(|e| CuratorError::from_zk(path, e))?;
        self.set_state(stat.map_or(ABSENT, |s| i64::from(s.version)));
        Ok(())
    }

    /// Decides, on `session`, whether the write with the tag's operation, sent at `sent` and
    /// whose reply was lost, was applied (module docs). `Applied` gives the tag's mzxid: the
    /// write's zxid, which every node it wrote carries. Changes nothing: the caller records what
    /// was seen with [`settle`](Self::settle) once it has used the verdict (reading back the
    /// results may fail, and the decision is then made again from the same state).
    pub(crate) async fn decide(&self, session: &Session, sent: Instant) -> Result<(Verdict<i64>, Seen)> {
        let path = &self.tag.path();
        tracing::debug!(path = %path, "a write tag, after a lost reply");
        let now = synced_exists(session, path).await?;
        let before = self.state();
        let verdict = match now {
            None if sent.elapsed() >= self.tag.reap_age() => Verdict::Unknown(format!(
                "its write tag {path} is gone, and more than the reap age ({:?}) has passed since the write was \
                 sent, so it may have been applied and then reaped",
                self.tag.reap_age()
            )),
            // Never made, or reaped before the write arrived (module docs).
            None => Verdict::NotApplied,
            Some(stat) if before == ABSENT => Verdict::Applied(stat.mzxid),
            Some(stat) if i64::from(stat.version) == before => Verdict::NotApplied,
            Some(stat) if stat.version == (before as i32).wrapping_add(1) => Verdict::Applied(stat.mzxid),
            Some(_) => Verdict::Unknown(format!("its write tag {path} was changed by someone else meanwhile")),
        };
        tracing::info!(path = %path, applied = matches!(verdict, Verdict::Applied(_)), "write tag: decided a write whose reply was lost");
        let seen = Seen { state: now.map_or(ABSENT, |s| i64::from(s.version)), made: before == ABSENT };
        Ok((verdict, seen))
    }

    /// Records the tag as a decision saw it; a tag that the decided write made reaps the others
    /// left behind under its parent.
    pub(crate) fn settle(&self, seen: Seen) {
        self.set_state(seen.state);
        if seen.made && seen.state != ABSENT {
            self.reap_others();
        }
    }
}

/// The tag as a decision saw it, for [`TagLock::settle`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    state: i64,
    /// The tag was absent before the write (the write made it, if it was applied).
    made: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The tag, if made, goes with its last handle (a guaranteed delete, tracked by the
        // framework). Outside a runtime (a drop at exit) the spawn only logs, and the tag stays
        // for the reaper.
        if *self.state.get_mut() == ABSENT || self.fw.is_closed() {
            return;
        }
        let path = std::mem::take(self.path.get_mut().unwrap_or_else(|e| e.into_inner()));
        let fw = self.fw.clone();
        self.fw.spawn_background(async move {
            if let Err(err) = fw.delete().guaranteed().quietly().for_path(&path).await {
                tracing::debug!(tag = %path, error = %err, "write tag not deleted");
            }
        });
    }
}
