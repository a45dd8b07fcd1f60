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
//!                                  │ reply lost: the core's write tag decides (curator-core
//!                                  │   `WriteTag`): applied ─► done; not ─► retry as a
//!                                  │   connection error; unknown ─► OutcomeUnknown
//!   conflicts exhausted and promotion configured:
//!     acquire the mutex (up to max_lock_time) ─► the same tries under the promoted policy
//!
//! our tag found gone (reaped while idle): send the same write again, making it (the tag
//!   itself, its reaping of others and its decisions are curator-core's `WriteTag`)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::make_parents;
use curator_core::{path, zk, CreateMode, CuratorError, CuratorFramework, Result, WriteTag, WRITE_TAG_PREFIX};
use curator_core::{RetryLoop, RetryPolicy};
use tokio::sync::Mutex;

pub use super::promotion::PromotedToLock;
use super::promotion::{is_conflict, ConflictsToo};
use super::result::{AtomicStats, AtomicValue};
use crate::locks::InterProcessMutex;

/// The value's node as our last write left it.
#[derive(Debug, Clone)]
struct Basis {
    data: Vec<u8>,
    version: i32,
}

/// What a handle keeps between its operations (held for a whole operation).
#[derive(Debug)]
struct Own {
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
    /// Our write tag (curator-core's): bumped by every write, it decides lost replies.
    tag: WriteTag,
    policy: Arc<dyn RetryPolicy>,
    promoted: Option<(PromotedToLock, InterProcessMutex)>,
    /// Held for a whole operation.
    own: Mutex<Own>,
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
        Ok(Self {
            fw: fw.clone(),
            path: value_path.to_string(),
            tag: WriteTag::new(fw, value_path)?,
            policy,
            promoted,
            own: Mutex::new(Own { basis: None }),
        })
    }

    pub(crate) fn set_reap_age(&mut self, age: Duration) {
        self.tag = self.tag.clone().with_reap_age(age);
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

    /// Writes `write` and bumps our tag in one transaction (curator-core's tagged
    /// `commit_once`); when written, `own.basis` is the node as the write left it (else it is
    /// cleared). `Written`, `Conflict` (the node changed, appeared or went), `Stale` (only when
    /// `speculative`: the node or our tag changed since the basis was read), or `Err` for
    /// anything else; a write whose reply was lost is decided by the tag first, and is an `Err`
    /// (retryable) only when it was not applied.
    async fn write(&self, own: &mut Own, write: Write<'_>, speculative: bool) -> Result<Outcome> {
        if let Write::Create(_) = write {
            let session = self.fw.session().await?;
            make_parents(&self.fw, session.client(), &self.path, true).await?;
        }
        own.basis = None;
        let mut resent = false;
        loop {
            tracing::debug!(path = %self.path, tag_made = self.tag.exists(), write = ?write_kind(write), "atomic: versioned write");
            // Stored as the framework stores data (section 3.10); the basis keeps the value itself.
            let transaction = match write {
                Write::Create(d) => self.fw.transaction().create(&self.path, d.to_vec(), CreateMode::Persistent),
                Write::Set(d, version) => self.fw.transaction().set_data(&self.path, d.to_vec(), Some(version)),
            };
            match transaction.with_write_tag(&self.tag).commit_once().await {
                Ok(_) => {
                    // A create makes version 0, a set the version after the one it named.
                    own.basis = Some(match write {
                        Write::Create(d) => Basis { data: d.to_vec(), version: 0 },
                        Write::Set(d, version) => Basis { data: d.to_vec(), version: version.wrapping_add(1) },
                    });
                    return Ok(Outcome::Written);
                }
                Err(err) if err.path() == Some(self.path.as_str()) && is_conflict(&err) => {
                    return Ok(if speculative { Outcome::Stale } else { Outcome::Conflict });
                }
                // Our tag is not as we thought: reaped by another handle while we were idle (or
                // deleted with its parent, which was then made again). Nothing was written, and
                // the core read the tag again: send the same write again at once (it is no
                // conflict), once; a second miss counts as a conflict. A speculative write is not
                // sent again: its basis may predate the node's deletion.
                Err(err) if is_tag(&self.path, &err) => {
                    tracing::debug!(error = %err, "atomic: write tag out of step");
                    if speculative {
                        return Ok(Outcome::Stale);
                    }
                    if !resent {
                        resent = true;
                        continue;
                    }
                    return Ok(Outcome::Conflict);
                }
                Err(err) => return Err(err),
            }
        }
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
        let mut speculative = first && self.tag.exists();
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
        // Each write carries our tag, so a lost reply is decided, never sent twice on a guess
        // (section 16.2); holding `own` keeps the tag to one write at a time, as every write of
        // this handle.
        let mut own = self.own.lock().await;
        own.basis = None;
        let set = || self.fw.transaction().set_data(&self.path, value.to_vec(), None).with_write_tag(&self.tag);
        match set().commit().await {
            Err(CuratorError::NoNode { path }) if path == self.path => {}
            other => return other.map(drop),
        }
        let session = self.fw.session().await?;
        make_parents(&self.fw, session.client(), &self.path, true).await?;
        drop(session);
        let create = self.fw.transaction().create(&self.path, value.to_vec(), CreateMode::Persistent);
        match create.with_write_tag(&self.tag).commit().await {
            Err(CuratorError::NodeExists { path }) if path == self.path => set().commit().await.map(drop),
            other => other.map(drop),
        }
    }
}

/// Whether `err` is about one of the write tags under `value_path` (ours, found out of step).
fn is_tag(value_path: &str, err: &CuratorError) -> bool {
    err.path().is_some_and(|p| {
        let (parent, name) = path::parent_and_node(p);
        parent == value_path && name.starts_with(WRITE_TAG_PREFIX)
    })
}

fn write_kind(write: Write<'_>) -> &'static str {
    match write {
        Write::Create(_) => "create",
        Write::Set(..) => "set",
    }
}

#[cfg(test)]
mod tests;
