//! Persistent watches: their guide is the crate root's "Persistent watches" section (lib.rs).

use std::sync::Arc;

use curator_core::readd_pause;
use curator_core::zk::{EventType, SessionState, WatchedEvent};
use curator_core::RetryLoop;
use curator_core::{
    AddWatchMode, ConnectionState, ConnectionStateEvent, CuratorError, CuratorFramework, PersistentWatch, Result,
};
use curator_core::{EventStream, ListenerId, Listeners};
use curator_core::{LifeState, Lifecycle, Readiness};
use tokio::sync::watch;

/// Why a [`Reset`] was published: the watch was (re-)added on the server, and events of the
/// time it was not there are not replayed (ZOOKEEPER-4698): re-read what you need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetCause {
    /// The first successful add after [`PersistentWatcher::start`].
    Started,
    /// Added again on the same session after the connection came back.
    Reconnected,
    /// Added on a new session after the one before ended (expired, or declared lost).
    NewSession,
}

/// The watch was registered with the server (Curator's reset listeners): after this, every
/// change in its scope is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset {
    /// The framework's session generation the watch is registered on.
    pub generation: u64,
    /// Why it was (re-)added.
    pub cause: ResetCause,
}

/// A persistent watch on a path (the node only, or with `recursive` the node and everything
/// below it) that stays set through connection cuts and session expiry. The node need not
/// exist.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_core::zk::EventType;
/// use curator_recipes::{PersistentWatcher, ResetCause};
///
/// let watcher = PersistentWatcher::new(&fw, "/services", true)?;
/// let mut events = watcher.events();
/// let mut resets = watcher.resets();
/// watcher.add_listener(|event| tracing::info!(path = %event.path, kind = ?event.event_type, "changed"));
/// watcher.start()?;
/// watcher.ready().await?; // the watch is in place
/// assert_eq!(resets.next().await.map(|r| r.cause), Some(ResetCause::Started));
///
/// fw.create().creating_parents_if_needed().for_path("/services/web", Vec::new()).await?;
/// let event = events.next().await.expect("an event");
/// assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/services"));
/// let event = events.next().await.expect("an event");
/// assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/services/web"));
/// watcher.close().await;
/// assert!(events.next().await.is_none(), "closing ends the streams");
/// # Ok(()) }
/// ```
///
/// # How it works
/// One task per watcher (started by [`start`](Self::start)) adds the watch with core's
/// [`PersistentWatch`] on the framework's current session, under the framework's retry policy,
/// and publishes a [`Reset`]. It then hands every node event to the listeners.
/// [`PersistentWatch::next`] adds the watch again after a reconnection on the same session and
/// hands out the `SyncConnected` event after that: the task then publishes a
/// [`ResetCause::Reconnected`]. When the session ends (the watch reports it, or the framework
/// reports it `Lost`, or a newer session is connected), the task adds the watch on the next
/// session and publishes a [`ResetCause::NewSession`]. If the retry policy gives up, the task
/// tries again, backing off up to 2 s, and sooner at the next connection-state change; an error
/// no retry mends (no permission, say) also goes to the framework's unhandled-error listeners,
/// once until the watch is in place again.
///
/// # Events
/// Listeners receive the node events (`NodeCreated`, `NodeDeleted`, `NodeDataChanged`, and for
/// a non-recursive watch `NodeChildrenChanged`), with paths relative to the framework's
/// namespace. Session events (disconnections, reconnections) are not forwarded, unlike
/// Curator's: follow [`resets`](Self::resets), or the framework's connection states, instead.
/// The one exception is the end: when the **framework** closes, listeners receive one last
/// event of type `Session` with state `Closed` (as Curator's listeners do), and then the
/// streams end. When the **watcher** is closed ([`close`](Self::close), or dropped), no final
/// event is sent: the streams end after the events already queued, and callbacks hear
/// nothing more.
pub struct PersistentWatcher {
    fw: CuratorFramework,
    path: String,
    mode: AddWatchMode,
    events: Arc<Listeners<WatchedEvent>>,
    resets: Arc<Listeners<Reset>>,
    lifecycle: Lifecycle,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for PersistentWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentWatcher")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("state", &self.lifecycle.state())
            .finish_non_exhaustive()
    }
}

impl PersistentWatcher {
    /// A watcher of `path` (relative to the framework's namespace), recursive or not. Nothing
    /// is sent before [`start`](Self::start).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path ZooKeeper would refuse.
    pub fn new(fw: &CuratorFramework, path: &str, recursive: bool) -> Result<Self> {
        curator_core::path::validate(path)?;
        let mode = if recursive { AddWatchMode::PersistentRecursive } else { AddWatchMode::Persistent };
        Ok(Self {
            fw: fw.clone(),
            path: path.to_string(),
            mode,
            events: Arc::new(Listeners::new()),
            resets: Arc::new(Listeners::new()),
            // On a closed framework it starts, to tell its listeners so (the final event).
            lifecycle: Lifecycle::tolerating_closed_framework("PersistentWatcher"),
            shutdown: watch::Sender::new(false),
        })
    }

    /// Starts watching (Curator's `start`). Sync: the watch is added by the watcher's task
    /// ([`ready`](Self::ready) waits for the first attempt; [`resets`](Self::resets) tells each
    /// time it is in place). Works before the framework is connected or started, and on a
    /// closed framework: listeners then get the final `Closed` event, queued before `start`
    /// returns.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`] (after
    /// [`close`](Self::close)), [`CuratorError::NoRuntime`] outside a tokio runtime, each naming
    /// `PersistentWatcher` ([`Lifecycle`](curator_core::Lifecycle)): nothing started
    /// then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.fw, |started| {
            self.events.start(started.handle().clone());
            self.resets.start(started.handle().clone());
            if self.fw.is_closed() {
                // Told now, not by a task that a close right after this could outrun.
                tracing::debug!(path = %self.path, "persistent watcher started on a closed framework");
                self.events.publish(WatchedEvent::new_session(SessionState::Closed));
                self.events.close();
                self.resets.close();
                return Ok(());
            }
            let task = Task {
                fw: self.fw.clone(),
                path: self.path.clone(),
                mode: self.mode,
                events: self.events.clone(),
                resets: self.resets.clone(),
                shutdown: self.shutdown.subscribe(),
                states: self.fw.connection_state_watch(),
                pauses: self.fw.cleanup_retry_loop(),
                dead_epoch: 0,
                reported: false,
                readiness: started.readiness(),
            };
            // The task lives as long as the watcher, and ends by itself when the framework
            // closes (it sees the `Closed` state, or `Closed` from the retry loop).
            started.spawn(task.run());
            Ok(())
        })
    }

    /// Waits for the outcome of the first attempt to add the watch: `Ok` once it is in place,
    /// or once an attempt failed with an error the watcher goes on retrying (a connection
    /// loss, a framework not started yet); at once after a start on a closed framework.
    ///
    /// # Errors
    /// An attempt refused for good ([`CuratorError::is_permanent`]): the watcher is closed
    /// then ([`state`](Self::state) `Closed`, streams ended). [`CuratorError::NotStarted`]
    /// before `start`, [`CuratorError::AlreadyClosed`] if closed first,
    /// [`CuratorError::Closed`] if its framework closed first.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the watcher is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused first attempt.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// Stops the watcher (Curator's `close`): its task ends, which drops the watch
    /// (zookeeper-client then removes it from the server), and the streams end after the
    /// events already queued. No final event is sent. Idempotent: a second call, or one on a
    /// watcher never started (which can then no longer start), does nothing more; dropping the
    /// watcher does the same.
    pub async fn close(&self) {
        self.shut();
    }

    /// The close, for `close` and drop.
    fn shut(&self) {
        let was_started = self.lifecycle.close().is_some();
        self.shutdown.send_replace(true);
        self.events.close();
        self.resets.close();
        if was_started {
            tracing::debug!(path = %self.path, "persistent watcher closed");
        }
    }

    /// The watched path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the watch covers everything below the path too.
    pub fn is_recursive(&self) -> bool {
        self.mode == AddWatchMode::PersistentRecursive
    }

    /// Adds a callback for every node event (see the type's docs); it runs on the blocking
    /// pool, in event order (Curator's `getListenable().addListener`).
    pub fn add_listener(&self, listener: impl Fn(&WatchedEvent) + Send + Sync + 'static) -> ListenerId {
        self.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener added with [`add_listener`](Self::add_listener); events already queued
    /// for it are still delivered. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.events.remove(id)
    }

    /// An ordered stream of the node events from now on (before `start`: all of them).
    pub fn events(&self) -> EventStream<WatchedEvent> {
        self.events.stream()
    }

    /// Adds a callback run each time the watch is (re-)added on the server (Curator's
    /// `getResetListenable().addListener`), on the blocking pool.
    pub fn add_reset_listener(&self, listener: impl Fn() + Send + Sync + 'static) -> ListenerId {
        self.resets.add_callback(Arc::new(move |_: &Reset| listener()))
    }

    /// Removes a listener added with [`add_reset_listener`](Self::add_reset_listener). False if
    /// it was not there.
    pub fn remove_reset_listener(&self, id: ListenerId) -> bool {
        self.resets.remove(id)
    }

    /// An ordered stream of every (re-)add of the watch from now on, with its cause.
    pub fn resets(&self) -> EventStream<Reset> {
        self.resets.stream()
    }
}

impl Drop for PersistentWatcher {
    fn drop(&mut self) {
        self.shut();
    }
}

/// How the task ended.
enum End {
    /// The watcher was closed.
    Stopped,
    /// The framework was closed.
    FrameworkClosed,
}

/// How following one watch ended.
enum Follow {
    End(End),
    /// Its session is over: add the watch on the next one.
    SessionEnded,
}

/// The watcher's task: adds the watch, forwards its events, adds it again.
struct Task {
    fw: CuratorFramework,
    path: String,
    mode: AddWatchMode,
    events: Arc<Listeners<WatchedEvent>>,
    resets: Arc<Listeners<Reset>>,
    shutdown: watch::Receiver<bool>,
    states: watch::Receiver<ConnectionStateEvent>,
    /// Pauses between rounds of adding after the framework's retry policy gave up, and
    /// between failed re-adds on the same session: the cleanup loop, paced by the core's one
    /// re-add schedule (`readd_pause`: 50 ms doubling to 2 s after every failure, until the
    /// framework closes). Reset whenever the watch is in place.
    pauses: RetryLoop,
    /// Clients up to this epoch (`Session::epoch`) are known to be over (their session was
    /// lost, or moved to a later client): no watch is added on them.
    dead_epoch: u64,
    /// An error no retry mends was reported since the watch was last in place (reported once
    /// per streak, then only logged at debug level).
    reported: bool,
    /// The outcome of the first attempt ([`PersistentWatcher::ready`]).
    readiness: Readiness,
}

impl Task {
    async fn run(mut self) {
        let end = self.add_and_follow().await;
        if matches!(end, End::FrameworkClosed) {
            self.readiness.refused(CuratorError::Closed); // if nothing was reported yet
            tracing::debug!(path = %self.path, "persistent watcher: the framework closed");
            // After the watcher's own close() the listeners are closed and this is dropped.
            self.events.publish(WatchedEvent::new_session(SessionState::Closed));
        }
        self.events.close();
        self.resets.close();
    }

    async fn add_and_follow(&mut self) -> End {
        let mut cause = ResetCause::Started;
        loop {
            let added = {
                let mut shutdown = self.shutdown.clone();
                tokio::select! {
                    biased;
                    _ = stopped(&mut shutdown) => return End::Stopped,
                    added = self.add() => added,
                }
            };
            let mut watch = match added {
                Ok(watch) => watch,
                Err(_) if self.fw.is_closed() => return End::FrameworkClosed,
                Err(err) => match self.pause_after(err).await {
                    Some(end) => return end,
                    None => continue,
                },
            };
            self.announce(watch.generation(), cause);
            match self.follow(&mut watch).await {
                Follow::End(end) => return end,
                Follow::SessionEnded => {
                    tracing::debug!(path = %self.path, generation = watch.generation(), "persistent watcher: session over");
                    self.dead_epoch = self.dead_epoch.max(watch.epoch());
                    cause = ResetCause::NewSession;
                }
            }
        }
    }

    /// Adds the watch on the current session under the framework's retry policy.
    async fn add(&self) -> Result<PersistentWatch> {
        let (fw, path, mode, dead) = (&self.fw, self.path.as_str(), self.mode, self.dead_epoch);
        fw.call_with_retry("persistent_watcher_add", path, |session, _| async move {
            if session.epoch() <= dead {
                // The framework has not noticed yet that this session is over.
                return Err(CuratorError::ConnectionLoss {
                    path: path.to_string(),
                    detail: "waiting for a new session".into(),
                });
            }
            PersistentWatch::add_on(fw, &session, path, mode).await
        })
        .await
    }

    /// The watch is in place: tells the reset listeners.
    fn announce(&mut self, generation: u64, cause: ResetCause) {
        self.pauses.reset();
        self.reported = false;
        tracing::debug!(path = %self.path, generation, ?cause, "persistent watcher: watch added");
        self.resets.publish(Reset { generation, cause });
        self.readiness.ready(); // after the reset: `ready` then finds it queued
    }

    /// After a round of adding failed: waits for a pause or the next connection-state change.
    /// `Some` when the task must end.
    async fn pause_after(&mut self, err: CuratorError) -> Option<End> {
        if !self.readiness.is_reported() {
            if err.is_permanent() {
                // Refused for good at the first attempt: said by `ready`, and the watcher closes.
                tracing::debug!(path = %self.path, error = %err, "persistent watcher: refused; closing");
                self.readiness.refused(err);
                return Some(End::Stopped);
            }
            self.readiness.ready(); // a failure it goes on retrying
        }
        // Whether a retry may mend the error (and the framework is open): then it is no news.
        let mendable = self.pauses.pause_for(&err).is_some();
        let pause = readd_pause(&mut self.pauses, &err);
        if mendable {
            tracing::debug!(path = %self.path, error = %err, ?pause, "persistent watcher: could not add the watch; trying again");
        } else if matches!(err, CuratorError::NotStarted { .. }) {
            // Not started yet: wait for the framework to connect.
            tracing::debug!(path = %self.path, error = %err, "persistent watcher: waiting for the framework");
        } else if self.reported {
            tracing::debug!(path = %self.path, error = %err, ?pause, "persistent watcher: could not add the watch; trying again");
        } else {
            self.reported = true;
            self.fw.report_unhandled(&format!("persistent watcher could not add its watch on {}", self.path), &err);
        }
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => Some(End::Stopped),
            changed = self.states.changed() => changed.is_err().then_some(End::FrameworkClosed),
            _ = tokio::time::sleep(pause) => None,
        }
    }

    /// Whether the latest connection state says that the framework closed or that the
    /// session of generation `generation` is over.
    fn session_over(&mut self, generation: u64) -> Option<Follow> {
        let latest = self.states.borrow_and_update();
        if latest.state == ConnectionState::Closed {
            return Some(Follow::End(End::FrameworkClosed));
        }
        latest.session_end(generation).map(|_| Follow::SessionEnded)
    }

    /// Forwards the watch's events until its session is over or the task must end.
    async fn follow(&mut self, watch: &mut PersistentWatch) -> Follow {
        let generation = watch.generation();
        // A Disconnected was seen: the next SyncConnected comes after `next()` added the
        // watch again (or failed to).
        let mut down = false;
        // When to try `register_again` after a failed re-add on this session.
        let mut register_at: Option<tokio::time::Instant> = None;
        loop {
            if let Some(over) = self.session_over(generation) {
                return over;
            }
            let mut shutdown = self.shutdown.clone();
            let retry_due = async move {
                match register_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = stopped(&mut shutdown) => return Follow::End(End::Stopped),
                changed = self.states.changed() => {
                    if changed.is_err() {
                        return Follow::End(End::FrameworkClosed);
                    }
                }
                _ = retry_due => {
                    register_at = None;
                    match watch.register_again().await {
                        Ok(()) => self.announce(generation, ResetCause::Reconnected),
                        Err(_) if self.fw.is_closed() => return Follow::End(End::FrameworkClosed),
                        Err(CuratorError::SessionExpired { .. }) => return Follow::SessionEnded,
                        Err(err) => register_at = Some(self.pause_before_register(&err)),
                    }
                }
                event = watch.next() => match event {
                    None => return Follow::SessionEnded,
                    Some(event) if event.event_type == EventType::Session => match event.session_state {
                        SessionState::Disconnected => down = true,
                        SessionState::SyncConnected if down => {
                            down = false;
                            if watch.is_registered() {
                                self.announce(generation, ResetCause::Reconnected);
                                register_at = None;
                            } else if register_at.is_none() {
                                register_at = Some(tokio::time::Instant::now());
                            }
                        }
                        _ => {}
                    },
                    Some(event) => self.events.publish(event),
                },
            }
        }
    }

    /// When to try adding the watch again on the same session after `err`.
    fn pause_before_register(&mut self, err: &CuratorError) -> tokio::time::Instant {
        let pause = readd_pause(&mut self.pauses, err);
        tracing::debug!(path = %self.path, error = %err, ?pause, "persistent watcher: could not add the watch again");
        tokio::time::Instant::now() + pause
    }
}

/// Resolves once the watcher is closed (or its handle is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // The `Ref` is dropped here, so the task's future stays `Send`.
    let _ = shutdown.wait_for(|stop| *stop).await.is_ok();
}
