//! The partitioner's task: kazoo's state machine (settle, split, lock each partition, watch),
//! one method per phase; docs/architecture.md section 21.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, EventStream, Listeners, Readiness, SessionEnd};
use futures::future::{select_all, BoxFuture, FutureExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::split::{share, SplitFn};
use super::state::{HeldPartition, PartitionState, ReleaseCause};
use crate::locks::{InterProcessMutex, LockGuard};
use crate::nodes::{GroupMember, MemberEvent};
use crate::sequential::LockLost;

/// A call of the handle, answered by the task.
pub(crate) enum Command {
    /// `release_set`: give back what is held, then allocate again.
    Release(oneshot::Sender<curator_core::Result<()>>),
}

/// What ends a phase.
enum Next {
    /// Split the set again (after the group settles).
    Allocate,
    /// The share is held: tell it and watch it.
    Hold,
    /// The handle closed or dropped: give everything back and end.
    Stop,
    /// Final: tell, give everything back, leave the group.
    Fail(CuratorError),
}

/// The partitioner's state and everything its task owns.
pub(crate) struct Task {
    fw: CuratorFramework,
    id: String,
    path: String,
    member: GroupMember,
    locks: BTreeMap<String, InterProcessMutex>,
    /// Sorted.
    partitions: Vec<String>,
    settle: Duration,
    split: SplitFn,
    states: Arc<Listeners<PartitionState>>,
    current: watch::Sender<PartitionState>,
    /// Whether the first `Allocating` was told (the initial state is `Allocating` too).
    announced: std::sync::atomic::AtomicBool,
    /// The partitions held, in set order: name, grant, when granted.
    held: Vec<(String, LockGuard, std::time::Instant)>,
}

/// Waits for the next join or leave; false once the group's stream ended (the member closed).
async fn membership_change(events: &mut EventStream<MemberEvent>) -> bool {
    loop {
        match events.next().await {
            Some(MemberEvent::Joined { .. } | MemberEvent::Left { .. }) => return true,
            Some(_) => {}
            None => return false,
        }
    }
}

/// The first of `held` to be told it may be lost, with the reason; pending while none is (or
/// none is held). `skip` leaves out partitions already known lost.
fn first_lost<'a>(
    held: &'a [(String, LockGuard, std::time::Instant)],
    skip: &'a [String],
) -> BoxFuture<'a, (String, LockLost)> {
    let watching: Vec<BoxFuture<'a, (String, LockLost)>> = held
        .iter()
        .filter(|(name, _, _)| !skip.contains(name))
        .map(|(name, guard, _)| async move { (name.clone(), guard.lost().await) }.boxed())
        .collect();
    if watching.is_empty() {
        return futures::future::pending().boxed();
    }
    select_all(watching).map(|(first, _, _)| first).boxed()
}

/// The end of the first session that made one of `held`'s nodes; pending while none ended.
fn session_end<'a>(
    fw: &CuratorFramework,
    held: &[(String, LockGuard, std::time::Instant)],
) -> BoxFuture<'a, SessionEnd> {
    let mut generations: Vec<u64> = held.iter().map(|(_, guard, _)| guard.node().generation).collect();
    generations.sort_unstable();
    generations.dedup();
    if generations.is_empty() {
        return futures::future::pending().boxed();
    }
    let ends = generations.into_iter().map(|g| {
        let mut liveness = fw.liveness(g);
        async move { liveness.ended().await }.boxed()
    });
    select_all(ends).map(|(end, _, _)| end).boxed()
}

/// The failure a session's end is.
fn session_failure(end: SessionEnd, path: &str) -> CuratorError {
    match end {
        SessionEnd::Closed => CuratorError::Closed,
        _ => CuratorError::SessionExpired { path: path.to_string() },
    }
}

impl Task {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fw: CuratorFramework,
        id: String,
        path: String,
        member: GroupMember,
        locks: BTreeMap<String, InterProcessMutex>,
        settle: Duration,
        split: SplitFn,
        states: Arc<Listeners<PartitionState>>,
        current: watch::Sender<PartitionState>,
    ) -> Self {
        let partitions = locks.keys().cloned().collect();
        Self {
            fw,
            id,
            path,
            member,
            locks,
            partitions,
            settle,
            split,
            states,
            current,
            announced: std::sync::atomic::AtomicBool::new(false),
            held: Vec::new(),
        }
    }

    /// Tells `state`; an allocation started over while still allocating is not told twice.
    fn publish(&self, state: PartitionState) {
        let again = matches!(state, PartitionState::Allocating)
            && matches!(*self.current.borrow(), PartitionState::Allocating)
            && self.announced.swap(true, std::sync::atomic::Ordering::Relaxed);
        if again {
            return;
        }
        tracing::debug!(path = %self.path, member = %self.id, state = ?StateName(&state), "partition state");
        self.current.send_replace(state.clone());
        self.states.publish(state);
    }

    /// The task: runs the phases until the handle closes or a failure, then gives everything
    /// back. `done` turns true once nothing of this member is left.
    pub(crate) async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        readiness: Readiness,
        done: watch::Sender<bool>,
    ) {
        // Subscribed before the member starts, so that no join goes unseen.
        let mut events = self.member.events();
        let end = self.life(&mut events, &mut commands, &readiness).await;
        if let Next::Fail(err) = end {
            self.publish(PartitionState::Failure(err.clone()));
            readiness.refused(err.clone());
            let _ = self.release_all().await;
            self.member.close().await;
            // Final: a release_set from now on hears the failure, until the handle goes.
            while let Some(Command::Release(reply)) = commands.recv().await {
                let _ = reply.send(Err(err.clone()));
            }
        }
        let _ = self.release_all().await;
        self.member.close().await;
        let _ = done.send(true);
    }

    async fn life(
        &mut self,
        events: &mut EventStream<MemberEvent>,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        readiness: &Readiness,
    ) -> Next {
        if let Err(err) = self.member.start() {
            return Next::Fail(err);
        }
        let first = async {
            self.member.ready().await?;
            self.member.wait_initialized().await
        };
        tokio::select! {
            outcome = first => match outcome {
                Ok(()) => readiness.ready(),
                Err(err) => return Next::Fail(err),
            },
            command = commands.recv() => {
                if let Next::Stop = self.on_command(command).await {
                    return Next::Stop;
                }
            }
        }
        loop {
            self.publish(PartitionState::Allocating);
            let next = match self.allocate(events, commands).await {
                Next::Hold => self.hold(events, commands).await,
                other => other,
            };
            match next {
                Next::Allocate => continue,
                end => return end,
            }
        }
    }

    /// A command, in any phase: a release gives back what is held and starts over.
    async fn on_command(&mut self, command: Option<Command>) -> Next {
        match command {
            None => Next::Stop,
            Some(Command::Release(reply)) => {
                let released = self.release_all().await;
                let _ = reply.send(released);
                Next::Allocate
            }
        }
    }

    /// Gives back every partition held; the first error, after trying them all.
    async fn release_all(&mut self) -> curator_core::Result<()> {
        let mut outcome = Ok(());
        for (name, guard, _) in self.held.drain(..) {
            tracing::debug!(path = %guard.path(), partition = %name, "release partition");
            if let Err(err) = guard.release().await {
                if outcome.is_ok() {
                    outcome = Err(err);
                }
            }
        }
        outcome
    }

    /// Allocating: waits for the group to settle, then takes this member's share. `Hold` when
    /// the share is held, else what ended the phase.
    async fn allocate(
        &mut self,
        events: &mut EventStream<MemberEvent>,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Next {
        // kazoo's PatientChildrenWatch: no join or leave for `settle`.
        let quiet = tokio::time::sleep(self.settle);
        tokio::pin!(quiet);
        loop {
            tokio::select! {
                () = &mut quiet => break,
                changed = membership_change(events) => {
                    if !changed {
                        return Next::Fail(self.member_gone());
                    }
                    quiet.as_mut().reset(Instant::now() + self.settle);
                }
                command = commands.recv() => match self.on_command(command).await {
                    Next::Allocate => quiet.as_mut().reset(Instant::now() + self.settle),
                    end => return end,
                },
            }
        }
        let members: Vec<String> = self.member.current_members().into_keys().collect();
        let mine = share(&self.split, &self.id, &members, &self.partitions);
        tracing::debug!(path = %self.path, member = %self.id, ?members, share = ?mine, "split");
        for name in mine {
            let Some(mutex) = self.locks.get(&name) else { continue };
            let acquired = tokio::select! {
                acquired = mutex.acquire() => acquired,
                changed = membership_change(events) => {
                    if !changed {
                        return Next::Fail(self.member_gone());
                    }
                    // Not settled after all: give back what was taken, and start over.
                    let _ = self.release_all().await;
                    return Next::Allocate;
                }
                command = commands.recv() => return self.on_command(command).await,
            };
            match acquired {
                Ok(guard) => self.held.push((name, guard, std::time::Instant::now())),
                Err(err) if err.is_permanent() || matches!(err, CuratorError::Closed) => return Next::Fail(err),
                Err(err) => {
                    // The retry policy gave up: start over once the group settles again.
                    tracing::debug!(path = %self.path, partition = %name, error = %err, "partition not taken");
                    let _ = self.release_all().await;
                    return self.pause(commands).await;
                }
            }
        }
        Next::Hold
    }

    /// A settle time's pause before the next allocation, answering commands.
    async fn pause(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Next {
        tokio::select! {
            () = tokio::time::sleep(self.settle) => Next::Allocate,
            command = commands.recv() => self.on_command(command).await,
        }
    }

    /// Acquired, then Release: holds the share until the group changes or a partition may be
    /// lost, then waits for `release_set`.
    async fn hold(
        &mut self,
        events: &mut EventStream<MemberEvent>,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Next {
        let mut known_lost: Vec<String> = Vec::new();
        // A partition lost while the others were being taken is told at once.
        if let Some((name, reason)) =
            self.held.iter().find_map(|(n, g, _)| g.lost_watch().borrow().map(|reason| (n.clone(), reason)))
        {
            return match self.on_lost(&mut known_lost, name, reason) {
                // Never shown as acquired: given back, and taken again once the group settles.
                Next::Allocate => {
                    let _ = self.release_all().await;
                    self.pause(commands).await
                }
                end => end,
            };
        }
        let held = self
            .held
            .iter()
            .map(|(name, guard, at)| HeldPartition::new(name.clone(), (**guard).clone(), *at))
            .collect();
        self.publish(PartitionState::Acquired(held));
        let cause = tokio::select! {
            changed = membership_change(events) => {
                if !changed {
                    return Next::Fail(self.member_gone());
                }
                ReleaseCause::MembershipChanged
            }
            (name, reason) = first_lost(&self.held, &known_lost) => match self.on_lost(&mut known_lost, name, reason) {
                Next::Allocate => ReleaseCause::MayBeLost { reason },
                end => return end,
            },
            end = session_end(&self.fw, &self.held) => return Next::Fail(session_failure(end, &self.path)),
            command = commands.recv() => return self.on_command(command).await,
        };
        self.publish(PartitionState::Release(cause));
        self.released(commands, known_lost).await
    }

    /// What a possible loss means: a lost session (or a closed framework) is a failure, as in
    /// kazoo; anything else a release. `Allocate` stands for "release".
    fn on_lost(&self, known_lost: &mut Vec<String>, name: String, reason: LockLost) -> Next {
        tracing::debug!(path = %self.path, partition = %name, %reason, "partition may be lost");
        let failure = match reason {
            LockLost::SessionLost => {
                let path = self.locks.get(&name).map(|_| super::builder::lock_path(&self.path, &name));
                Some(CuratorError::SessionExpired { path: path.unwrap_or_default() })
            }
            LockLost::Closed => Some(CuratorError::Closed),
            _ => None,
        };
        known_lost.push(name);
        match failure {
            Some(err) => Next::Fail(err),
            None => Next::Allocate,
        }
    }

    /// Release: waits for `release_set`; a session lost meanwhile is a failure (kazoo's
    /// `LOST` after `SUSPENDED`).
    async fn released(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>, mut known_lost: Vec<String>) -> Next {
        loop {
            tokio::select! {
                command = commands.recv() => return self.on_command(command).await,
                end = session_end(&self.fw, &self.held) => return Next::Fail(session_failure(end, &self.path)),
                (name, reason) = first_lost(&self.held, &known_lost) => {
                    if let end @ Next::Fail(_) = self.on_lost(&mut known_lost, name, reason) {
                        return end;
                    }
                }
            }
        }
    }

    /// The error when the group's stream ends under us: the framework closed, or the member
    /// was refused.
    fn member_gone(&self) -> CuratorError {
        CuratorError::Closed
    }
}

/// A state's name, for traces.
struct StateName<'a>(&'a PartitionState);

impl std::fmt::Debug for StateName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            PartitionState::Allocating => f.write_str("Allocating"),
            PartitionState::Acquired(held) => {
                f.debug_list().entries(held.iter().map(|p| (p.name(), p.fencing_token()))).finish()
            }
            PartitionState::Release(cause) => write!(f, "Release({cause:?})"),
            PartitionState::Failure(err) => write!(f, "Failure({err})"),
        }
    }
}
