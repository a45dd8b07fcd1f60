//! The line watch: `Predicate::Leases(n)` waiters that wait on one persistent recursive watch
//! on the group's base path instead of getData watches on nodes ahead (docs/architecture.md
//! section 8.3).
//!
//! **Algorithm.** A [`Line`] belongs to one contender group (clones share it). A background task
//! keeps at most one persistent recursive watch (`addWatch`, ZooKeeper 3.6+) on the base path per
//! session generation and client, reads it continuously (nothing piles up) and hands each event
//! to the registered [`Listener`]s. An acquire that may wait on the line registers a listener
//! *before* it sends the listing it will decide on (create+getChildren, or getChildren); the
//! listener buffers the children deleted, and the contenders created, from then on. When the
//! listing says "wait", the acquire arms it with `ahead`, every contender before our node, minus
//! the buffered deletions, and it resolves:
//! - **AllGone** (hold) once fewer than `n` nodes of `ahead` are left;
//! - **Recheck** (list again) when our own node is deleted, when the connection comes back after
//!   a disconnection (deletions during the gap are not replayed to a persistent watch,
//!   ZOOKEEPER-4698), or when the session or the watch ends. A mere disconnection is waited out
//!   under the acquire's deadline (a listing sent while disconnected would wait past it).
//!
//! **Why it is correct.** The watch is on and the listener registered before the listing is
//! sent, and one session's replies and notifications come in server order: every deletion of a
//! listed node after the listing reaches the listener. A deletion is a fact (sequential names
//! never come back), so subtracting those buffered before the listing is harmless. A node leaves
//! `ahead` only on its own NodeDeleted: mutual exclusion rests on that. A contender created with
//! a lower sequence than ours (the read node of a write lock's downgrade, made with the write
//! node's sequence before it goes) joins `ahead`. Our own node's deletion comes in the same
//! stream, in zxid order: no grant on a node deleted before the last node ahead went.
//!
//! **Hybrid.** Each create and delete under the path is sent to every session watching it, a
//! herd that grows with the line: a wait uses the line only with at most [`LINE_LIMIT`] nodes
//! ahead. A group starts the watch on its second wait within the limit since the watch last
//! stopped ([`START_AFTER`]: an object used for one acquire never pays an addWatch and a
//! RemoveWatches), stops it at once when a wait sees more than [`LINE_LIMIT`] nodes ahead
//! ([`Line::stop`]), and drops it when no wait used it for [`LINE_IDLE`].
//!
//! **Probe.** On servers before 3.9 (ZOOKEEPER-4466) another watch that the same session puts on
//! the base path (a non-recursive persistent one, as a node cache's; a one-shot data watch, by
//! section 2.4) replaces the line's recursive one: deletions stop coming, and a wait would never
//! end. So a wait on the line ends with
//! [`LineEnd::Probe`] after [`LINE_PROBE`]: the acquire lists again, and if the listing lacks a
//! node still in the wait's `ahead` ([`Listener::missing`]) the line missed its deletion and is
//! stopped; the wait goes on off the line.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use curator_core::{zk, AddWatchMode, CuratorFramework, PersistentWatch, Session};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::names::sequence_in;

/// The most nodes ahead of a waiter for it to wait on the line. Measured beside Curator
/// (zero-hold contended mutex, one server, 3 interleaved repetitions, run 20261126T213659 in
/// `bench-results/2026-11-26-lock-variants.jsonl`), cycles/s on the line against the one-node
/// waits: 1,525 against 1,058 with 8 sessions and 1,312 against 996 with 16; with a limit of 32,
/// 976 against 1,001 with 32 sessions, at 1,062 against 823 µs of server CPU per cycle (every
/// create and delete is sent to every session watching). The prototype (a49c44e, no limit) fell
/// to 0.63 × and 0.39 × of the one-node waits with 64 and 128 sessions.
pub(super) const LINE_LIMIT: usize = 16;

/// How long the watch stays on without a wait that used it.
pub(super) const LINE_IDLE: Duration = Duration::from_secs(10);

/// How long a wait on the line goes before it lists again to check the line (the probe). On
/// servers before 3.9 (ZOOKEEPER-4466, docs/architecture.md section 2.4) a non-recursive
/// persistent watch that the same session sets on the base path (seen on our 3.8 test server)
/// or a one-shot data watch (section 2.4; our 3.8 server plus zookeeper-client 0.11.2 kept the
/// deletions coming in `locks_line`'s test) replaces the line's persistent recursive watch: no
/// more deletions come, and without the probe a waiter would wait for ever. The cost: a waiter on the line behind a long hold lists once per
/// `LINE_PROBE` (one getChildren every 5 s).
pub(super) const LINE_PROBE: Duration = Duration::from_secs(5);

/// The wait within [`LINE_LIMIT`] (with the watch off) that starts the watch, counted since the
/// watch last stopped: the second, so that a group used for one acquire (a new lock object per
/// acquire) never pays an addWatch and a RemoveWatches for a line it will not use.
pub(super) const START_AFTER: u32 = 2;

/// How a wait on the line ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LineEnd {
    /// Fewer than `n` nodes ahead are left: hold.
    AllGone,
    /// List again and decide.
    Recheck,
    /// [`LINE_PROBE`] went by: list again, and check the listing against the wait's `ahead`
    /// ([`Listener::missing`]) before deciding.
    Probe,
}

/// The line of one contender group: clones share it.
#[derive(Debug, Clone)]
pub(super) struct Line {
    /// The state the clones share.
    shared: Arc<Shared>,
}

/// What the group's clones, its listeners and (weakly) its task share.
#[derive(Debug)]
struct Shared {
    /// The watch and the listeners.
    state: Mutex<State>,
    /// Sent on by [`Line::stop`] (a task then checks whether it is still the line's); its
    /// tasks see the channel close when the group is dropped.
    signal: watch::Sender<()>,
}

/// The watch and the listeners of one line.
#[derive(Debug, Default)]
struct State {
    /// The task that adds (or keeps) the watch, if any.
    watch: Option<WatchKey>,
    /// The next id of a listener or task.
    next_id: u64,
    /// The listeners by id, each with the task whose watch it listens to.
    listeners: HashMap<u64, (u64, Arc<Slot>)>,
    /// The last time a wait used the line (or the watch was added).
    used: Option<Instant>,
    /// The waits within [`LINE_LIMIT`] that found the watch off since it last stopped.
    waits: u32,
}

/// Which session (generation, client epoch) a watch task (`task`, its id) serves, and whether
/// its addWatch succeeded (`on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WatchKey {
    generation: u64,
    epoch: u64,
    task: u64,
    on: bool,
}

impl WatchKey {
    /// Whether this watch is on `session`'s client: its generation, and the same client of it.
    fn serves(&self, session: &Session) -> bool {
        session.is_generation(self.generation) && session.epoch() == self.epoch
    }
}

/// One event of the watch, as listeners read it: a child deleted (its name), a contender child
/// created (its name and sequence), or a gap (the connection came back, deletions meanwhile
/// untold; or the watch is over).
#[derive(Debug, Clone)]
enum Seen {
    Deleted(String),
    Created(String, i64),
    Gap,
}

/// A listener's state: until armed, the children `deleted` and the contenders `created` (with
/// their sequence); then what it waits for (`armed`); and how the wait ended (`end`).
#[derive(Debug, Default)]
struct Listening {
    deleted: HashSet<String>,
    created: Vec<(String, i64)>,
    armed: Option<Armed>,
    end: Option<LineEnd>,
}

/// What an armed listener waits for: fewer than `n` of `ahead` (names of the contenders ahead of
/// our node `own`, sequence `own_sequence`, not yet deleted).
#[derive(Debug)]
struct Armed {
    ahead: HashSet<String>,
    own: String,
    own_sequence: i64,
    n: usize,
}

/// A listener's slot, shared with the task: its state, and the wake-up of its wait.
#[derive(Debug, Default)]
struct Slot {
    listening: Mutex<Listening>,
    notify: Notify,
}

/// Locks `m`, going on with the data of a poisoned lock (every update here is complete).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for Line {
    fn default() -> Self {
        let shared = Shared { state: Mutex::new(State::default()), signal: watch::channel(()).0 };
        Self { shared: Arc::new(shared) }
    }
}

impl Line {
    /// A listener on the line, if its watch is on for `session`: registered now, before the
    /// listing that the caller is about to send.
    pub(super) fn listen(&self, session: &Session) -> Option<Listener> {
        let mut state = lock(&self.shared.state);
        let key = state.watch?;
        if !(key.on && key.serves(session)) {
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        let slot = Arc::new(Slot::default());
        state.listeners.insert(id, (key.task, slot.clone()));
        Some(Listener { shared: self.shared.clone(), id, slot, generation: key.generation })
    }

    /// Counts a wait within [`LINE_LIMIT`] that found the watch off, and on the
    /// [`START_AFTER`]th since the watch last stopped starts adding the watch on `base`
    /// (contenders named after `names`) for `session` in the background, unless a task adds or
    /// keeps it for that session already. Not awaited.
    pub(super) fn start(&self, fw: &CuratorFramework, session: &Session, base: &str, names: &'static [&str]) {
        let mut state = lock(&self.shared.state);
        if state.watch.is_some_and(|k| k.serves(session)) {
            return;
        }
        state.waits += 1;
        if state.waits < START_AFTER {
            return;
        }
        state.waits = 0;
        let key = WatchKey { generation: session.generation(), epoch: session.epoch(), task: state.next_id, on: false };
        state.next_id += 1;
        state.watch = Some(key);
        state.used = Some(Instant::now());
        let task = Task {
            shared: Arc::downgrade(&self.shared),
            fw: fw.clone(),
            base: base.to_string(),
            sort_names: names,
            key,
            signal: self.shared.signal.subscribe(),
        };
        curator_core::spawn_detached(task.run(session.clone()));
    }

    /// Stops the line now, if a watch is on (or being added), saying `why`: its task ends,
    /// dropping the watcher (RemoveWatches), and its listeners end with Recheck. The waits
    /// that start it again are counted from zero.
    pub(super) fn stop(&self, base: &str, why: &'static str) {
        let mut state = lock(&self.shared.state);
        let Some(key) = state.watch.take() else { return };
        state.waits = 0;
        drop(state);
        tracing::debug!(path = %base, task = key.task, why, "stopping the line");
        self.shared.signal.send_replace(());
    }
}

/// The background task of one watch: its line (`shared`, not kept alive by it), the framework
/// (for the session's liveness and the client's end), the base path and the names the
/// contenders' sequences follow, its key, and the line's signal (sent on by [`Line::stop`],
/// closed when the group is dropped).
struct Task {
    shared: Weak<Shared>,
    fw: CuratorFramework,
    base: String,
    sort_names: &'static [&'static str],
    key: WatchKey,
    signal: watch::Receiver<()>,
}

impl Task {
    /// Adds the watch, then reads it until the session, the client, the framework or the group
    /// ends, or the line is idle; then drops it.
    async fn run(mut self, session: Session) {
        tracing::debug!(path = %self.base, "addWatch (persistent recursive: the line)");
        // The framework's watch: added again on the same session after a reconnection, before
        // the SyncConnected event is handed out (zookeeper-client 0.11.2 does not), and never
        // polled after the session ended (zookeeper-client would panic).
        let added = PersistentWatch::add_on(&self.fw, &session, &self.base, AddWatchMode::PersistentRecursive).await;
        // The task must not keep the session's client (and with it the session) open.
        drop(session);
        let mut watcher = match added {
            Ok(watcher) => watcher,
            Err(e) => {
                tracing::debug!(path = %self.base, error = %e, "addWatch failed: today's waits");
                return self.end();
            }
        };
        {
            let Some(shared) = self.shared.upgrade() else { return };
            let mut state = lock(&shared.state);
            let Some(key) = state.watch.as_mut().filter(|k| k.task == self.key.task) else { return };
            key.on = true;
            state.used = Some(Instant::now());
        }
        let mut liveness = self.fw.liveness(self.key.generation);
        let gone = self.fw.client_gone(self.key.epoch);
        tokio::pin!(gone);
        while let Some(idle_at) = self.idle_at() {
            let event = tokio::select! {
                biased;
                // The group was dropped, or the line stopped.
                changed = self.signal.changed() => if changed.is_err() || !self.current() { break } else { continue },
                _ = liveness.ended() => break,
                _ = &mut gone => break,
                _ = tokio::time::sleep_until(idle_at) => continue,
                event = watcher.next() => event,
            };
            // None once the session ended (after its terminal event). A watch that could not be
            // added again after a reconnection is silent: end.
            let Some(event) = event.filter(|_| watcher.is_registered()) else { break };
            if let Some(seen) = self.seen(&event) {
                let Some(shared) = self.shared.upgrade() else { break };
                for (_, slot) in lock(&shared.state).listeners.values().filter(|(task, _)| *task == self.key.task) {
                    slot.apply(&seen);
                }
            }
        }
        self.end();
        // Dropped unfired, the watcher makes zookeeper-client send RemoveWatches(base, Any) once no
        // other watcher of this client is on the base path (it sends none while one is): the
        // server drops the persistent watch.
        drop(watcher);
        tracing::debug!(path = %self.base, "line watch removed (stopped, idle, or its session, client or group ended)");
    }

    /// Whether this task's watch is still the line's (not stopped, nor replaced).
    fn current(&self) -> bool {
        let Some(shared) = self.shared.upgrade() else { return false };
        let state = lock(&shared.state);
        state.watch.is_some_and(|k| k.task == self.key.task)
    }

    /// When the line goes idle, or `None` if it is idle now (or the group is gone): no wait
    /// used it for [`LINE_IDLE`] and none is waiting on it.
    fn idle_at(&self) -> Option<Instant> {
        let shared = self.shared.upgrade()?;
        let state = lock(&shared.state);
        let (now, ours) = (Instant::now(), self.key.task);
        let at = state.used.unwrap_or(now) + LINE_IDLE;
        // While a wait is on the line, look again a period later.
        let waiting =
            state.listeners.values().any(|(task, slot)| *task == ours && lock(&slot.listening).armed.is_some());
        (at > now || waiting).then(|| at.max(now + LINE_IDLE * u32::from(waiting)))
    }

    /// What listeners read of `event`: deletions and creations of children, and gaps.
    fn seen(&self, event: &zk::WatchedEvent) -> Option<Seen> {
        match event.event_type {
            // A disconnection is waited out; any other state is a reconnection or an end.
            zk::EventType::Session => (event.session_state != zk::SessionState::Disconnected).then_some(Seen::Gap),
            zk::EventType::NodeDeleted | zk::EventType::NodeCreated => {
                let name = event.path.strip_prefix(self.base.as_str())?.strip_prefix('/')?;
                if name.contains('/') {
                    return None;
                }
                if event.event_type == zk::EventType::NodeDeleted {
                    return Some(Seen::Deleted(name.to_string()));
                }
                sequence_in(name, self.sort_names).map(|sequence| Seen::Created(name.to_string(), sequence))
            }
            _ => None,
        }
    }

    /// Forgets the watch (if still ours) and ends every listener with Recheck.
    fn end(&self) {
        let Some(shared) = self.shared.upgrade() else { return };
        let mut state = lock(&shared.state);
        if state.watch.is_some_and(|k| k.task == self.key.task) {
            state.watch = None;
            state.waits = 0;
        }
        for (_, slot) in state.listeners.values().filter(|(task, _)| *task == self.key.task) {
            slot.apply(&Seen::Gap);
        }
    }
}

impl Slot {
    /// Applies one event, and wakes the wait if it resolved.
    fn apply(&self, seen: &Seen) {
        let mut l = lock(&self.listening);
        if l.end.is_some() {
            return;
        }
        match (seen, l.armed.as_mut()) {
            (Seen::Gap, _) => l.end = Some(LineEnd::Recheck),
            (Seen::Deleted(name), None) => drop(l.deleted.insert(name.clone())),
            (Seen::Created(name, sequence), None) => l.created.push((name.clone(), *sequence)),
            (Seen::Deleted(name), Some(armed)) if *name == armed.own => l.end = Some(LineEnd::Recheck),
            (Seen::Deleted(name), Some(armed)) => {
                if armed.ahead.remove(name) {
                    tracing::debug!(node = %name, left = armed.ahead.len(), "node ahead deleted (line)");
                }
            }
            (Seen::Created(name, sequence), Some(armed)) => {
                if *sequence < armed.own_sequence && *name != armed.own {
                    armed.ahead.insert(name.clone());
                }
            }
        }
        l.resolve();
        if l.end.is_some() {
            self.notify.notify_one();
        }
    }
}

impl Listening {
    /// AllGone once fewer than `n` nodes ahead are left.
    fn resolve(&mut self) {
        let gone = self.armed.as_ref().is_some_and(|a| a.ahead.len() < a.n);
        self.end = self.end.or(gone.then_some(LineEnd::AllGone));
    }
}

/// One acquire's registration on the line (dropped, it is unregistered): its line, its id there,
/// its slot, and the session generation of the watch it listens to.
#[derive(Debug)]
pub(super) struct Listener {
    shared: Arc<Shared>,
    id: u64,
    slot: Arc<Slot>,
    generation: u64,
}

impl Listener {
    /// Arms the listener for a wait of our node `own` (sequence `own_sequence`) behind `ahead`
    /// (names), until fewer than `n` of them are left; `false` if the listener is already over
    /// (a gap, or the watch ended) or of another session than `session`: then the wait is
    /// today's. Resets the line's idle clock.
    pub(super) fn arm(&self, session: &Session, ahead: Vec<String>, own: &str, own_sequence: i64, n: usize) -> bool {
        let mut l = lock(&self.slot.listening);
        if l.end.is_some() || !session.is_generation(self.generation) {
            return false;
        }
        if l.deleted.contains(own) {
            l.end = Some(LineEnd::Recheck);
            return true;
        }
        let created =
            std::mem::take(&mut l.created).into_iter().filter(|(name, seq)| *seq < own_sequence && name != own);
        let mut ahead: HashSet<String> = ahead.into_iter().chain(created.map(|(name, _)| name)).collect();
        ahead.retain(|name| !l.deleted.contains(name));
        tracing::debug!(node = %own, ahead = ahead.len(), "waiting on the line");
        l.deleted = HashSet::new();
        l.armed = Some(Armed { ahead, own: own.to_string(), own_sequence, n });
        l.resolve();
        drop(l);
        lock(&self.shared.state).used = Some(Instant::now());
        true
    }

    /// Waits for the armed listener's end; Recheck as soon as the framework gives the session
    /// up or closes; Probe after [`LINE_PROBE`] (the listener stays armed, for
    /// [`missing`](Self::missing)). Cancel safe.
    pub(super) async fn wait(&self, fw: &CuratorFramework) -> LineEnd {
        let mut liveness = fw.liveness(self.generation);
        let probe = tokio::time::sleep(LINE_PROBE);
        tokio::pin!(probe);
        let end = loop {
            if let Some(end) = lock(&self.slot.listening).end {
                break end;
            }
            tokio::select! {
                biased;
                _ = liveness.ended() => break LineEnd::Recheck,
                _ = self.slot.notify.notified() => {}
                _ = &mut probe => break LineEnd::Probe,
            }
        };
        tracing::debug!(end = ?end, "the wait on the line ended");
        end
    }

    /// After a probe: a node still in the wait's `ahead` that `children` (a listing sent after
    /// the probe) lacks, deleted without its NodeDeleted reaching the line, which is then broken;
    /// `None` if there is none, or if the line ended this wait with a gap (which explains it).
    /// A deletion whose event came just before the listing's reply but is not yet handed to the
    /// listener would show as missing too: rare (the deletion falls within the listing's round
    /// trip), and it only stops a working line, never decides a hold.
    pub(super) fn missing(&self, children: &[String]) -> Option<String> {
        let l = lock(&self.slot.listening);
        if l.end == Some(LineEnd::Recheck) {
            return None;
        }
        let ahead = &l.armed.as_ref()?.ahead;
        ahead.iter().find(|name| !children.contains(name)).cloned()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        lock(&self.shared.state).listeners.remove(&self.id);
    }
}
