//! The optimistic loop of the atomic recipes and its promotion to a mutex (Curator's
//! `DistributedAtomicValue` internals and `PromotedToLock`), and the write tag that makes a
//! write whose reply was lost decidable (docs/architecture.md section 16.2).
//!
//! ```text
//! apply(make):
//!   optimistic, under the recipe's retry policy (conflicts count as retryable):
//!     read P ──► make(value) ──► multi [write P at the version read, bump our tag] ──► done
//!       │                          │ BadVersion / NodeExists / NoNode on P: conflict, retry
//!       └ an operation whose previous one succeeded (our tag exists) starts from the node
//!         as that write left it (its data, version + 1) instead (no read); if P or our tag
//!         changed since, nothing was written and the same try goes on from a read
//!         (not a conflict)
//!                                  │ outcome unknown: sync, read the tag's version:
//!                                  │     bumped ─► it was applied: done
//!                                  │     not, or gone within the reap age
//!                                  │           ─► it was not: retry as a connection error
//!                                  │     changed by someone else, or gone past the reap age
//!                                  │           ─► OutcomeUnknown: read the value and decide
//!   conflicts exhausted and promotion configured:
//!     acquire the mutex (up to max_lock_time) ─► the same tries under the promoted policy
//!
//! the write made our tag: in the background, list P, stat the other tags (one round),
//!   delete those unwritten for longer than the reap age, each at the version read
//! our tag found gone (reaped while idle): send the same write again, making it
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::make_parents;
use curator_core::{path, zk, CuratorError, CuratorFramework, Result};
use curator_core::{RetryLoop, RetryPolicy};
use tokio::sync::Mutex;

pub use super::promotion::PromotedToLock;
use super::promotion::{is_conflict, ConflictsToo};
use super::result::{AtomicStats, AtomicValue};
use super::tag::{WRITE_TAG_PREFIX, WRITE_TAG_REAP_AGE};
use crate::locks::InterProcessMutex;

/// What we know of our write tag's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// Not created (or gone).
    Absent,
    /// Exists at this version; only our writes change it.
    At(i32),
}

/// The value's node as our last write left it.
#[derive(Debug, Clone)]
struct Basis {
    data: Vec<u8>,
    version: i32,
}

/// What a handle keeps between its operations (held for a whole operation).
#[derive(Debug)]
struct Own {
    /// Our write tag.
    tag: Tag,
    /// The node as our last write left it: where the next try starts, without
    /// a read of its own. Sound while our tag exists: a write of `P` at `version` that also
    /// bumps our tag at its version applies only if `P` was neither written nor deleted since
    /// the read (it cannot be deleted while our tag is under it, and only we make our tag).
    basis: Option<Basis>,
}

/// How a write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    /// The node changed, appeared or went since it was read: a conflict.
    Conflict,
    /// A speculative write (from the basis kept since the previous operation) found the node
    /// or our tag changed since: nothing was written, and the try goes on from a fresh read.
    Stale,
}

/// One write of the value's node.
#[derive(Debug, Clone, Copy)]
enum Write<'a> {
    /// Create it (it was missing).
    Create(&'a [u8]),
    /// Set it, if it is still at this version.
    Set(&'a [u8], i32),
}

/// The node of an atomic value and how to change it.
#[derive(Debug)]
pub(crate) struct Engine {
    fw: CuratorFramework,
    path: String,
    tag_path: String,
    policy: Arc<dyn RetryPolicy>,
    promoted: Option<(PromotedToLock, InterProcessMutex)>,
    /// Held for a whole operation: the tag's version is exact only if one write at a time uses it.
    own: Mutex<Own>,
    /// Other handles' tags unwritten for longer are reaped when we make ours.
    reap_age: Duration,
}

impl Engine {
    pub(crate) fn new(
        fw: &CuratorFramework,
        value_path: &str,
        policy: Arc<dyn RetryPolicy>,
        promoted: Option<PromotedToLock>,
    ) -> Result<Self> {
        path::validate(value_path)?;
        let promoted = match promoted {
            Some(p) => {
                let mutex = InterProcessMutex::new(fw, &p.lock_path)?;
                Some((p, mutex))
            }
            None => None,
        };
        let tag_path = path::make_path(value_path, &format!("{WRITE_TAG_PREFIX}{}", uuid::Uuid::new_v4()));
        Ok(Self {
            fw: fw.clone(),
            path: value_path.to_string(),
            tag_path,
            policy,
            promoted,
            own: Mutex::new(Own { tag: Tag::Absent, basis: None }),
            reap_age: WRITE_TAG_REAP_AGE,
        })
    }

    pub(crate) fn set_reap_age(&mut self, age: Duration) {
        self.reap_age = age;
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// A loop under the recipe's policy; with `conflicts`, conflicts are retried too.
    fn retry_loop(&self, policy: &Arc<dyn RetryPolicy>, conflicts: bool) -> RetryLoop {
        let policy: Arc<dyn RetryPolicy> =
            if conflicts { Arc::new(ConflictsToo(policy.clone())) } else { policy.clone() };
        RetryLoop::new(policy, Some(&self.fw))
    }

    /// The node's data and stat; `None` when it is missing.
    async fn read(&self) -> Result<Option<(Vec<u8>, zk::Stat)>> {
        let session = self.fw.session().await?;
        tracing::trace!(path = %self.path, "atomic: get_data");
        match session.client().get_data(&self.path).await {
            // Values are compared and parsed decoded (section 3.10).
            Ok((data, stat)) => Ok(Some((self.fw.decode_data(&self.path, data)?, stat))),
            Err(zk::Error::NoNode) => Ok(None),
            Err(err) => Err(CuratorError::from_zk(&self.path, err)),
        }
    }

    /// Reads the value under the recipe's policy: `None` when the node is missing.
    pub(crate) async fn get(&self) -> Result<Option<Vec<u8>>> {
        let mut retry = self.retry_loop(&self.policy, false);
        loop {
            match self.read().await {
                Ok(found) => return Ok(found.map(|(data, _)| data)),
                Err(err) => retry.on_error(err).await?,
            }
        }
    }

    /// Writes `write` and bumps our tag in one transaction; when written, `own.basis` is the
    /// node as the write left it (else it is cleared). `Written`,
    /// `Conflict` (the node changed, appeared or went), `Stale` (only when `speculative`: the
    /// node or our tag changed since the basis was read), or `Err` for anything else; a write
    /// whose outcome is unknown is decided first (`resolve`), and is an `Err` (retryable) only
    /// when it was not applied.
    async fn write(&self, own: &mut Own, write: Write<'_>, speculative: bool) -> Result<Outcome> {
        let data = match write {
            Write::Create(d) | Write::Set(d, _) => d,
        };
        // Stored as the framework stores data (section 3.10); the basis keeps the value itself.
        let stored = self.fw.encode_data(&self.path, data)?;
        self.fw.check_data(&self.path, &stored)?;
        let session = self.fw.session().await?;
        let client = session.client();
        if let Write::Create(_) = write {
            make_parents(&self.fw, client, &self.path, true).await?;
        }
        let acl = self.fw.acl_for_path(&self.path);
        let tag_acl = self.fw.acl_for_path(&self.tag_path);
        let persistent = zk::CreateMode::Persistent;
        let mut resent = false;
        own.basis = None;
        loop {
            let tag = &mut own.tag;
            let making_tag = *tag == Tag::Absent;
            let mut multi = session.multi();
            match write {
                Write::Create(_) => multi.add_create(&self.path, &stored, persistent, &acl)?,
                Write::Set(_, version) => multi.add_set_data(&self.path, &stored, Some(version))?,
            }
            match *tag {
                Tag::Absent => multi.add_create(&self.tag_path, &[], persistent, &tag_acl)?,
                Tag::At(version) => multi.add_set_data(&self.tag_path, &[], Some(version))?,
            }
            tracing::debug!(path = %self.path, tag = ?*tag, write = ?write_kind(write), "atomic: versioned write");
            let sent = Instant::now();
            let commit = multi.commit();
            match commit.await {
                Ok(_) => {
                    *tag = bumped(*tag);
                    // A create makes version 0, a set the version after the one it named.
                    own.basis = Some(match write {
                        Write::Create(d) => Basis { data: d.to_vec(), version: 0 },
                        Write::Set(d, version) => Basis { data: d.to_vec(), version: version.wrapping_add(1) },
                    });
                    if making_tag {
                        self.reap_others();
                    }
                    return Ok(Outcome::Written);
                }
                Err(zk::MultiWriteError::OperationFailed { index: 0, source }) => {
                    let err = CuratorError::from_zk(&self.path, source);
                    if !is_conflict(&err) {
                        return Err(err);
                    }
                    return Ok(if speculative { Outcome::Stale } else { Outcome::Conflict });
                }
                Err(zk::MultiWriteError::OperationFailed { source, .. }) => {
                    // Our tag is not as we thought: reaped by another handle while we were idle
                    // (or deleted with its parent, which was then made again). Nothing was
                    // written: learn it and send the same write again at once (it is no
                    // conflict), once; a second miss counts as a conflict. A speculative
                    // write is not sent again: its basis may predate the node's deletion.
                    tracing::debug!(tag = %self.tag_path, error = %source, "atomic: write tag out of step, reading it");
                    let now = self.read_tag(client).await?;
                    let changed = now != *tag;
                    *tag = now;
                    if speculative {
                        return Ok(Outcome::Stale);
                    }
                    if changed && !resent {
                        resent = true;
                        continue;
                    }
                    return Ok(Outcome::Conflict);
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    let err = CuratorError::from_zk(&self.path, source);
                    if !err.is_retryable() {
                        return Err(err);
                    }
                    drop(session);
                    if !self.resolve(tag, sent).await? {
                        return Err(err);
                    }
                    if making_tag {
                        self.reap_others();
                    }
                    return Ok(Outcome::Written);
                }
            }
        }
    }

    /// Reaps, in the background, the other write tags of our node left unwritten for longer
    /// than the reap age (`reap`). Called when we made our tag: a first write, or one after
    /// our tag was found gone.
    fn reap_others(&self) {
        if self.fw.is_closed() {
            return;
        }
        let (fw, path, own, age) = (self.fw.clone(), self.path.clone(), self.tag_path.clone(), self.reap_age);
        self.fw.spawn_background(async move { super::reap::reap(&fw, &path, &own, age).await });
    }

    async fn read_tag(&self, client: &zk::Client) -> Result<Tag> {
        match client.check_stat(&self.tag_path).await {
            Ok(Some(stat)) => Ok(Tag::At(stat.version)),
            Ok(None) => Ok(Tag::Absent),
            Err(err) => Err(CuratorError::from_zk(&self.tag_path, err)),
        }
    }

    /// Decides whether the write just sent with the tag at `tag` was applied: only our
    /// writes change the tag, one at a time, so it was applied if and only if the tag moved
    /// on by one. The `sync` first makes the read see everything the server ordered before it,
    /// the lost write included if it was ever going to be applied (a request of an earlier
    /// connection either reached the leader before the session moved, or is refused). Runs
    /// under the cleanup loop: until it knows, or the framework closes. Updates `tag`.
    ///
    /// A tag found gone means "not applied" while less than the reap age has passed since the
    /// write was `sent`: a tag bumped by it has an mtime after `sent`, and a reaper deletes
    /// only tags whose mtime is older than the reap age by the server's clock. Later, it might
    /// have been applied and then reaped: the outcome is unknown, an error.
    async fn resolve(&self, tag: &mut Tag, sent: Instant) -> Result<bool> {
        let before = *tag;
        let mut retry = self.fw.cleanup_retry_loop();
        let now = loop {
            let attempt = async {
                let session = self.fw.session().await?;
                let client = session.client();
                let sync = client.sync(&self.tag_path);
                let read = client.check_stat(&self.tag_path);
                match sync.await {
                    Ok(()) | Err(zk::Error::NoNode) => {}
                    Err(err) => return Err(CuratorError::from_zk(&self.tag_path, err)),
                }
                match read.await {
                    Ok(Some(stat)) => Ok(Tag::At(stat.version)),
                    Ok(None) => Ok(Tag::Absent),
                    Err(err) => Err(CuratorError::from_zk(&self.tag_path, err)),
                }
            };
            match attempt.await {
                Ok(now) => break now,
                Err(err) => retry.on_error(err).await?,
            }
        };
        if now == Tag::Absent && sent.elapsed() >= self.reap_age {
            *tag = now;
            return Err(CuratorError::OutcomeUnknown {
                path: self.path.clone(),
                reason: format!(
                    "its write tag {} is gone, and more than the reap age ({:?}) has passed since the write, so it may have been applied and then reaped",
                    self.tag_path, self.reap_age
                ),
            });
        }
        let applied = match (before, now) {
            // Never made, or reaped before the write arrived (see above).
            (_, Tag::Absent) => false,
            (Tag::Absent, Tag::At(_)) => true,
            (Tag::At(v), Tag::At(n)) if n == v.wrapping_add(1) => true,
            (Tag::At(v), Tag::At(n)) if n == v => false,
            (Tag::At(_), Tag::At(_)) => {
                *tag = now;
                return Err(CuratorError::OutcomeUnknown {
                    path: self.path.clone(),
                    reason: format!("its write tag {} was changed by someone else meanwhile", self.tag_path),
                });
            }
        };
        tracing::info!(path = %self.path, tag = ?now, applied, "atomic: decided a write whose reply was lost");
        *tag = now;
        Ok(applied)
    }

    /// One try: read, make the new value, write it at the version read. `Ok(Some((pre,
    /// post)))` when written, `Ok(None)` on a conflict. `pre` is `None` for a missing node.
    /// The read is skipped when `own.basis` holds the node as our last write left it: a
    /// `speculative` basis (kept since the previous operation) that turns out stale costs the
    /// write, not the try, which goes on from a read.
    async fn try_once<F>(
        &self,
        own: &mut Own,
        make: &F,
        last_pre: &mut Option<Vec<u8>>,
        mut speculative: bool,
    ) -> Result<Option<(Option<Vec<u8>>, Vec<u8>)>>
    where
        F: Fn(Option<&[u8]>) -> Result<Vec<u8>>,
    {
        loop {
            let current = match own.basis.take() {
                Some(Basis { data, version }) => Some((data, version)),
                None => {
                    speculative = false;
                    self.read().await?.map(|(data, stat)| (data, stat.version))
                }
            };
            let pre = current.as_ref().map(|(d, _)| d.clone());
            *last_pre = pre.clone();
            let new = make(pre.as_deref())?;
            let write = match &current {
                Some((_, version)) => Write::Set(&new, *version),
                None => Write::Create(&new),
            };
            match self.write(own, write, speculative).await? {
                Outcome::Written => return Ok(Some((pre, new))),
                Outcome::Conflict => return Ok(None),
                Outcome::Stale => speculative = false,
            }
        }
    }

    /// Tries under `policy` until written, out of tries (`Ok(None)`) or failed (`Err`). `first`
    /// is the optimistic phase, the operation's first: its first try may start from the basis
    /// left by the previous operation's write (the promoted phase's tries are counted as such).
    async fn tries<F>(
        &self,
        own: &mut Own,
        policy: &Arc<dyn RetryPolicy>,
        make: &F,
        count: &mut u32,
        last_pre: &mut Option<Vec<u8>>,
        first: bool,
    ) -> Result<Option<(Option<Vec<u8>>, Vec<u8>)>>
    where
        F: Fn(Option<&[u8]>) -> Result<Vec<u8>>,
    {
        let mut retry = self.retry_loop(policy, true);
        // The basis is sound only while our tag exists (`Own::basis`).
        let mut speculative = first && matches!(own.tag, Tag::At(_));
        if !speculative {
            own.basis = None;
        }
        loop {
            *count += 1;
            curator_core::metrics::atomic_try(!first);
            let err = match self.try_once(own, make, last_pre, speculative).await {
                Ok(Some(done)) => return Ok(Some(done)),
                Ok(None) => CuratorError::BadVersion { path: self.path.clone() },
                Err(err) => err,
            };
            speculative = false;
            match retry.on_error(err).await {
                Ok(()) => own.basis = None,
                Err(err) if is_conflict(&err) => return Ok(None),
                Err(err) => return Err(err),
            }
        }
    }

    /// Sets the value to `make(current)` atomically: optimistically, then under the promoted
    /// mutex if configured. Raw bytes; a missing node is `None` to `make` and an empty
    /// `pre_value`.
    pub(crate) async fn apply<F>(&self, make: F) -> Result<AtomicValue<Vec<u8>>>
    where
        F: Fn(Option<&[u8]>) -> Result<Vec<u8>>,
    {
        let mut own = self.own.lock().await;
        let mut stats = AtomicStats::default();
        let mut last_pre = None;
        let started = Instant::now();
        let done = self.tries(&mut own, &self.policy, &make, &mut stats.optimistic_tries, &mut last_pre, true).await;
        stats.optimistic_time = started.elapsed();
        let done = match (done?, &self.promoted) {
            (Some(done), _) => Some(done),
            (None, None) => None,
            (None, Some((promoted, mutex))) => {
                curator_core::metrics::atomic_promoted();
                let started = Instant::now();
                let guard = match promoted.max_lock_time {
                    Some(max) => mutex.acquire_timeout(max).await?,
                    None => Some(mutex.acquire().await?),
                };
                let done = match guard {
                    Some(guard) => {
                        tracing::debug!(path = %self.path, lock = %promoted.lock_path, "atomic: promoted to the mutex");
                        let done = self
                            .tries(
                                &mut own,
                                &promoted.retry_policy,
                                &make,
                                &mut stats.promoted_lock_tries,
                                &mut last_pre,
                                false,
                            )
                            .await;
                        guard.release().await?;
                        done?
                    }
                    None => None,
                };
                stats.promoted_time = started.elapsed();
                done
            }
        };
        Ok(match done {
            Some((pre, post)) => {
                AtomicValue { succeeded: true, pre_value: pre.unwrap_or_default(), post_value: post, stats }
            }
            None => {
                let pre = last_pre.unwrap_or_default();
                AtomicValue { succeeded: false, post_value: pre.clone(), pre_value: pre, stats }
            }
        })
    }

    /// One compare-and-set: written only if the node exists and `matches` its data.
    pub(crate) async fn compare_and_set<M>(&self, matches: M, new: &[u8]) -> Result<AtomicValue<Vec<u8>>>
    where
        M: Fn(&[u8]) -> Result<bool>,
    {
        let mut own = self.own.lock().await;
        let mut retry = self.retry_loop(&self.policy, false);
        let mut stats = AtomicStats::default();
        let started = Instant::now();
        loop {
            stats.optimistic_tries += 1;
            curator_core::metrics::atomic_try(false);
            let attempt = async {
                let Some((data, stat)) = self.read().await? else { return Ok((false, Vec::new())) };
                if !matches(&data)? {
                    return Ok((false, data));
                }
                let written = self.write(&mut own, Write::Set(new, stat.version), false).await?;
                Ok((written == Outcome::Written, data))
            };
            match attempt.await {
                Ok((succeeded, pre)) => {
                    stats.optimistic_time = started.elapsed();
                    let post = if succeeded { new.to_vec() } else { pre.clone() };
                    return Ok(AtomicValue { succeeded, pre_value: pre, post_value: post, stats });
                }
                Err(err) => retry.on_error(err).await?,
            }
        }
    }

    /// Creates the node with `value` if it is missing: true if this call created it.
    pub(crate) async fn initialize(&self, value: &[u8]) -> Result<bool> {
        let mut own = self.own.lock().await;
        let mut retry = self.retry_loop(&self.policy, false);
        loop {
            match self.write(&mut own, Write::Create(value), false).await {
                Ok(created) => return Ok(created == Outcome::Written),
                Err(err) => retry.on_error(err).await?,
            }
        }
    }

    /// Sets the value whatever it is (Curator's `forceSet`): set, else create, else set.
    pub(crate) async fn force_set(&self, value: &[u8]) -> Result<()> {
        match self.fw.set_data().for_path(&self.path, value.to_vec()).await {
            Err(CuratorError::NoNode { .. }) => {}
            other => return other.map(drop),
        }
        match self.fw.create().creating_parent_containers_if_needed().for_path(&self.path, value.to_vec()).await {
            Err(CuratorError::NodeExists { .. }) => {
                self.fw.set_data().for_path(&self.path, value.to_vec()).await.map(drop)
            }
            other => other.map(drop),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Our tag, if any, goes with us (a guaranteed delete, tracked by the framework).
        let tag = self.own.get_mut().tag;
        if tag == Tag::Absent || self.fw.is_closed() {
            return;
        }
        let (fw, tag_path) = (self.fw.clone(), self.tag_path.clone());
        let work = async move {
            if let Err(err) = fw.delete().guaranteed().quietly().for_path(&tag_path).await {
                tracing::debug!(tag = %tag_path, error = %err, "atomic: write tag not deleted");
            }
        };
        // Outside a runtime (a drop at exit) the spawn only logs, and the tag stays for the
        // reaper (16.2).
        self.fw.spawn_background(work);
    }
}

fn bumped(tag: Tag) -> Tag {
    match tag {
        Tag::Absent => Tag::At(0),
        Tag::At(v) => Tag::At(v.wrapping_add(1)),
    }
}

fn write_kind(write: Write<'_>) -> &'static str {
    match write {
        Write::Create(_) => "create",
        Write::Set(..) => "set",
    }
}

#[cfg(test)]
mod tests;
