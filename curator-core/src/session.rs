//! The session manager: one task per framework that owns the current ZooKeeper client.
//!
//! ```text
//!   connect ──► Live ──Disconnected──► Suspended ──SyncConnected──► Live (Reconnected, same session)
//!                 ▲        │               │
//!                 │        │               ├─ Expired / Closed / AuthFailed ───────────┐
//!                 │        └───────────────┴─ no reply for LOST_AFTER of the timeout ──┤
//!                 └──────────────── new session (Reconnected, new_session) ◄── Lost ◄──┘
//! ```
//!
//! # When a session is presumed lost (docs/architecture.md section 3.2)
//!
//! The server may expire a session once a whole session timeout `T` has passed since it last
//! heard from the client. The client cannot see that moment, but it can bound it from below:
//! a request the server answered was received by the server after the client sent it. So the
//! manager keeps `heard`, the send time of the latest request it knows the server answered,
//! and presumes the session `Lost` at `heard + LOST_AFTER * T`, whether or not the connection
//! looks up, and before the earliest moment the server could expire it (the clocks of client and
//! server are assumed to run at the same rate, within the margin `1 - LOST_AFTER`).
//!
//! To keep `heard` fresh it sends a probe (`exists` on [`SESSION_EVENTS_PATH`], answered by any
//! server) every `T / PROBES_PER_TIMEOUT` while none is in flight. Measuring from when the
//! disconnection was *noticed* would be late: zookeeper-client notices a silent connection only
//! after 2/5 of `T` without a reply, and it declares expiry itself only after 7/5 of `T`.
//!
//! # Moves (docs/architecture.md section 3.7)
//!
//! With the ensemble tracker on, the manager also follows `/zookeeper/config` (module
//! [`ensemble`](crate::ensemble)) and moves a live session to a new client on the new servers
//! (same id and password) when the configuration leaves out every server of the current client,
//! or when the connection drops and the list changed. A move shows as one `Suspended`/`Reconnected`
//! pair at most (none if it completes within `MOVE_GRACE`), never as `Lost` by itself.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::builder::Config;
use crate::ensemble::{disjoint_servers, same_servers, Tracker};
use crate::error::CuratorError;
use crate::framework::{CuratorFramework, Inner};
use crate::retry::{ExponentialBackoffForever, RetryLoop};
use crate::state::{ConnectionState, ConnectionStateEvent};

mod end;
mod events;
pub(crate) use end::{client_ended, end_attached, Closer};
use events::{Probe, SessionEvents};

/// Pause after the first failed attempt to open a session; it doubles with each failure in a
/// row, up to [`MAX_RECONNECT_PAUSE`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Longest pause between attempts to open a session.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(5);
/// How many probes a session timeout: one every `T / PROBES_PER_TIMEOUT` while none is in flight.
const PROBES_PER_TIMEOUT: u32 = 10;
/// The session is presumed lost once `LOST_AFTER.0 / LOST_AFTER.1` of its timeout has passed
/// since the send time of the latest request the server answered.
const LOST_AFTER: (u32, u32) = (19, 20);

/// Where the manager is in a session's life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connected,
    Suspended,
}

/// Why following a client ended.
enum End {
    Lost,
    Shutdown,
    /// Move the session to the servers of the current ensemble (module
    /// [`ensemble`](crate::ensemble)). `heard` as in [`follow`]; `suspended` if `Suspended` was
    /// published (the connection dropped first).
    Move {
        heard: Instant,
        suspended: bool,
    },
}

/// How long a move of the session may leave operations waiting before `Suspended` is
/// published, if it was not already: this part of the session timeout, and at most 2 s.
const MOVE_GRACE: (u32, Duration) = (10, Duration::from_secs(2));

pub(crate) async fn run(inner: Weak<Inner>, mut shutdown: watch::Receiver<bool>) {
    // With the tracker on, clients are detached: what closes their sessions, kept here because
    // the framework may be dropped before this task ends (module `end`).
    let closer = inner.upgrade().filter(|strong| strong.config.ensemble.enabled()).and_then(|strong| {
        Closer::new(&strong.config)
            .inspect_err(
                |err| tracing::warn!(error = %err, "no closer for detached sessions (they expire on the server)"),
            )
            .ok()
    });
    let closer = closer.as_ref();
    let mut generation = 0u64;
    loop {
        let Some((mut client, mut servers)) = connect(&inner, &mut shutdown, None).await else { return };
        // The answer to the first request of the session proves the server heard us after now.
        let mut asked = Instant::now();
        let Some(mut events) = SessionEvents::new(&client).await else { continue };
        generation += 1;
        let Some(strong) = inner.upgrade() else { return abandon(closer, client, Some(&shutdown)).await };
        CuratorFramework::set_live(&strong, client.clone(), generation);
        let state = if client.state() == zk::SessionState::ConnectedReadOnly {
            ConnectionState::ReadOnly
        } else if generation == 1 {
            ConnectionState::Connected
        } else {
            ConnectionState::Reconnected
        };
        publish(&strong, state, client.session_id().0, generation, generation > 1);
        drop(strong);
        // The session that is over, and (if a server may still take it) what closes it.
        let (session, alive) = loop {
            let (heard, suspended) =
                match follow(&inner, &client, &servers, events, asked, generation, &mut shutdown).await {
                    End::Shutdown => return abandon(closer, client, Some(&shutdown)).await,
                    End::Lost => {
                        let alive = (!client.state().is_terminated()).then(|| client.session().clone());
                        break (client.session_id().0, alive);
                    }
                    End::Move { heard, suspended } => (heard, suspended),
                };
            match move_session(&inner, client, heard, suspended, generation, &mut shutdown).await {
                Moved::To(next, next_servers, next_asked, next_events) => {
                    (client, servers, asked, events) = (next, next_servers, next_asked, next_events);
                }
                Moved::Lost(session, alive) => break (session, alive),
                // Never published, so close() does not know of it: end it here either way.
                Moved::Shutdown(Some(client)) => return abandon(closer, client, None).await,
                Moved::Shutdown(None) => return,
            }
        };
        // Abandon the session: a detached client (tracker on) sent no CloseSession when it was
        // dropped, so close the session if a server still takes it, as a client that is not
        // detached does when dropped (section 3.2).
        if let (Some(info), Some(closer)) = (alive, closer.cloned()) {
            crate::background::spawn_detached(async move { closer.close(info).await });
        }
        let Some(strong) = inner.upgrade() else { return };
        CuratorFramework::set_empty(&strong);
        publish(&strong, ConnectionState::Lost, session, generation, false);
    }
}

/// The manager stops while it holds `client`. If `close()` stopped it (`shutdown` says so),
/// `close()` ends the session; `shutdown` is `None` for a client `close()` cannot know of. If every handle of the framework was dropped without `close()` (the shutdown sender
/// went with the framework), the manager ends it here, in its own task, so that the ephemeral
/// nodes and locks of the session go at once: a client that is not detached sends CloseSession
/// when dropped; a detached one (tracker on) is closed by `closer`. Nothing of this runs in a
/// `Drop`, so dropping the last handle outside a runtime neither panics nor blocks; if the
/// runtime itself is gone, so is this task, and the session expires on the server.
async fn abandon(closer: Option<&Closer>, client: zk::Client, shutdown: Option<&watch::Receiver<bool>>) {
    if shutdown.is_some_and(|closing| *closing.borrow()) {
        return;
    }
    tracing::debug!(session = %client.session_id(), "the framework stopped without ending this session: ending it");
    match closer {
        Some(closer) => closer.end(client).await,
        None => end_attached(client).await,
    }
}

/// How a move ended.
enum Moved {
    /// The client that has the session now, the connect string it was opened with, when it was
    /// opened, and its session events.
    To(zk::Client, String, Instant, SessionEvents),
    /// The session is presumed lost: its id, and what closes it if a server may still take it.
    Lost(i64, Option<zk::SessionInfo>),
    /// The framework shut down, with the new client if one was opened (never published).
    Shutdown(Option<zk::Client>),
}

/// Moves the session of `old` to the servers of the current ensemble (module
/// [`ensemble`](crate::ensemble)). First `old` is dropped: clients are detached while the tracker
/// is on, so that sends no CloseSession, and a dropped client does not reconnect and take the
/// session back from the new one (a removed server may go on serving). Then a client with the
/// same session id and password is opened on the new servers. The session slot is empty
/// meanwhile, so operations wait. `Suspended` is published if the move takes longer than
/// [`MOVE_GRACE`] (unless it already was), `Reconnected` once it succeeds after `Suspended`;
/// the session is lost if a server says it expired or it is presumed lost first (`heard`,
/// section 3.2).
async fn move_session(
    inner: &Weak<Inner>,
    old: zk::Client,
    heard: Instant,
    mut suspended: bool,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> Moved {
    let Some(strong) = inner.upgrade() else { return Moved::Shutdown(None) };
    let (info, timeout) = (old.session().clone(), old.session_timeout());
    let id = info.id();
    tracing::info!(session = %id, connect_string = %strong.config.ensemble.current(), "moving the session to the new ensemble");
    CuratorFramework::set_empty(&strong);
    let grace = (timeout / MOVE_GRACE.0).min(MOVE_GRACE.1);
    let lost_at = tokio::time::Instant::from_std(heard + timeout * LOST_AFTER.0 / LOST_AFTER.1);
    let grace_at = tokio::time::Instant::now() + grace;
    let ended = old.state_watcher();
    drop((old, strong));
    if !suspended {
        // Still connected: let the old client flush and end before the session moves, or the
        // server's dropping its connection for the move would make it reconnect and take the
        // session back. Holders of clones let go when `client_gone` resolves (now).
        client_ended(ended, grace).await;
    }
    let opened = {
        let (weak, mut shutdown, resume) = (inner.clone(), shutdown.clone(), info.clone());
        let attempt = async move {
            let (client, servers) = connect(&weak, &mut shutdown, Some(resume)).await?;
            let asked = Instant::now();
            let events = SessionEvents::new(&client).await?;
            Some((client, servers, asked, events))
        };
        tokio::pin!(attempt);
        loop {
            tokio::select! {
                opened = &mut attempt => break opened.ok_or(false),
                _ = tokio::time::sleep_until(grace_at), if !suspended => {
                    let Some(strong) = inner.upgrade() else { return Moved::Shutdown(None) };
                    suspended = true;
                    publish(&strong, ConnectionState::Suspended, id.0, generation, false);
                }
                _ = tokio::time::sleep_until(lost_at) => {
                    tracing::warn!(session = %id, "the session could not be moved before most of a session timeout passed: presuming it lost");
                    break Err(true);
                }
            }
        }
    };
    let Some(strong) = inner.upgrade().filter(|_| !*shutdown.borrow()) else {
        return Moved::Shutdown(opened.ok().map(|(client, ..)| client));
    };
    match opened {
        Ok((client, servers, asked, events)) => {
            CuratorFramework::set_live(&strong, client.clone(), generation);
            tracing::info!(session = %id, connect_string = %servers, "the session moved to the new ensemble");
            if suspended {
                publish(&strong, ConnectionState::Reconnected, id.0, generation, false);
            }
            Moved::To(client, servers, asked, events)
        }
        // Presumed lost in time: a server may still take the session, so close it.
        Err(true) => Moved::Lost(id.0, Some(info)),
        // Expired (or ended while its events were set up).
        Err(false) => Moved::Lost(id.0, None),
    }
}

/// Opens a new session, retrying until one is had or the framework shuts down.
///
/// One attempt is one pass over the servers of the connect string (zookeeper-client's
/// `fail_eagerly`): the client bounds each server's TCP connect and handshake by its own
/// connection timeout (2/5 of the session timeout) and the whole pass by the session timeout.
/// The framework's connection timeout plays no part here: it is how long an *operation* waits
/// for a connection (docs/architecture.md section 3.4), as in Curator. Between attempts the
/// manager backs off under [`ExponentialBackoffForever`], from [`RECONNECT_PAUSE`] to
/// [`MAX_RECONNECT_PAUSE`]; the first failure of a streak is a warning, the others are debug
/// events, and the session that ends a streak is logged once with the number of failures.
///
/// Fatal causes (docs/architecture.md section 3.1): after a failed attempt, [`crate::tls::diagnose`]
/// asks the servers whether TLS is why (a wrong CA, a refused client certificate, a plain client
/// on a secure port or the reverse); if so the typed [`CuratorError::Tls`] is recorded, so that
/// operations and `block_until_connected` fail with it at once, and the manager keeps retrying
/// with its backoff (a server's certificate can be replaced while we wait). A refused credential
/// (AUTH_FAILED: a wrong SASL password) is final: [`CuratorError::AuthFailed`] is recorded and
/// the manager stops, as ZooKeeper's Java client gives up its handle on AUTH_FAILED.
///
/// The servers are those of the current ensemble (module [`ensemble`](crate::ensemble)),
/// returned with the client. With `resume`, the client re-establishes that session instead of
/// opening a new one, and `None` comes back as soon as a server says it expired.
async fn connect(
    inner: &Weak<Inner>,
    shutdown: &mut watch::Receiver<bool>,
    resume: Option<zk::SessionInfo>,
) -> Option<(zk::Client, String)> {
    let mut retry =
        RetryLoop::new(Arc::new(ExponentialBackoffForever::new(RECONNECT_PAUSE, MAX_RECONNECT_PAUSE)), None);
    let mut failures = 0u32;
    let mut tls_failing = false;
    loop {
        if *shutdown.borrow() {
            return None;
        }
        let (connector, connect_string, tls, refused) = {
            let strong = inner.upgrade()?;
            let config = &strong.config;
            let mut connector = match connector(config, config.ensemble.enabled()) {
                Ok(connector) => connector,
                // Checked at build(); an error here would be a bug, reported as the attempt's.
                Err(err) => {
                    CuratorFramework::set_connect_failure(&strong, err);
                    return None;
                }
            };
            if let Some(session) = &resume {
                connector = connector.with_session(session.clone());
            }
            (connector, config.ensemble.current(), config.tls.clone(), crate::sasl::auth_failed_detail(config))
        };
        tracing::debug!(connect_string = %connect_string, tls = tls.is_some(), "opening a session");
        let attempt = open(connector, &connect_string, tls.is_some());
        let error = tokio::select! {
            _ = shutdown.changed() => return None,
            result = attempt => match result {
                Ok(client) => {
                    if let Some(strong) = inner.upgrade() {
                        CuratorFramework::set_connect_error(&strong, None);
                    }
                    if failures == 0 {
                        tracing::info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session opened");
                    } else {
                        tracing::info!(session = %client.session_id(), timeout = ?client.session_timeout(), failures, "session opened after failed attempts");
                    }
                    return Some((client, connect_string));
                }
                Err(zk::Error::SessionExpired) if resume.is_some() => {
                    tracing::warn!(connect_string = %connect_string, "the session expired before it could be moved");
                    return None;
                }
                // With `fail_eagerly`, a pass in which no server gave a session ends so; the
                // reason of each server is logged by zookeeper-client at debug level.
                Err(zk::Error::NoHosts) => "no server answered with a session".to_string(),
                // Refused credentials are final, as for ZooKeeper's Java client (AUTH_FAILED
                // ends its handle for good): retrying cannot make a wrong password right, and
                // each retry would be one more failed login in the server's log. The manager
                // stops; operations fail at once with AuthFailed until the framework is closed.
                Err(zk::Error::AuthFailed) => {
                    let detail = refused;
                    tracing::error!(connect_string = %connect_string, "{detail}");
                    crate::metrics::connect_failed();
                    let strong = inner.upgrade()?;
                    CuratorFramework::set_connect_failure(&strong, CuratorError::AuthFailed { detail });
                    return None;
                }
                Err(err) => err.to_string(),
            },
        };
        failures += 1;
        crate::metrics::connect_failed();
        // zookeeper-client keeps each server's reason to itself: ask the servers whether TLS is
        // the reason (crate::tls), off the runtime's threads and bounded per server; on the
        // first failure of a streak, and again after each failure while TLS is the reason, so
        // that the recorded cause stays true (one probe connection per failed attempt at most).
        let diagnosis = if failures == 1 || tls_failing {
            let connect_string = connect_string.clone();
            let probe = tokio::task::spawn_blocking(move || crate::tls::diagnose(&connect_string, tls.as_ref()));
            tokio::select! {
                _ = shutdown.changed() => return None,
                found = probe => found.ok().flatten(),
            }
        } else {
            None
        };
        let shown = diagnosis.as_ref().map_or_else(|| error.clone(), ToString::to_string);
        if failures == 1 {
            tracing::warn!(connect_string = %connect_string, error = %shown, "could not open a session; retrying with backoff");
        } else {
            tracing::debug!(connect_string = %connect_string, error = %shown, failures, "could not open a session");
        }
        let strong = inner.upgrade()?;
        let pause =
            retry.next_pause(&CuratorError::NotConnected { detail: error.clone() }).unwrap_or(MAX_RECONNECT_PAUSE);
        let was_failing = std::mem::replace(&mut tls_failing, diagnosis.is_some());
        match diagnosis {
            Some(found) => CuratorFramework::set_connect_failure(&strong, found),
            None => {
                if was_failing {
                    // TLS is no longer the reason: operations wait for a connection again.
                    CuratorFramework::set_connect_error(&strong, None);
                }
                CuratorFramework::set_connect_error(&strong, Some(error));
            }
        }
        drop(strong);
        tokio::select! {
            _ = shutdown.changed() => return None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// How a client is opened. `detached`: dropping its last clone does not close the session;
/// the framework's clients are, while the ensemble tracker is on, so that a session can move
/// to another client (module [`ensemble`](crate::ensemble)); a [`Closer`] then closes it.
/// The builder's authentication, SASL and TLS options are applied here, so that every client
/// of the framework (the sessions' and [`Closer`]'s) has them; open it with [`open`].
fn connector(config: &Config, detached: bool) -> Result<zk::Connector, CuratorError> {
    let mut connector = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_readonly(config.can_be_read_only)
        .with_fail_eagerly();
    for (scheme, auth) in &config.auth {
        connector = connector.with_auth(scheme, auth);
    }
    if let Some(sasl) = &config.sasl {
        connector = connector.with_sasl(sasl.options());
    }
    if let Some(tls) = &config.tls {
        connector = connector.with_tls(tls.options()?);
    }
    if detached {
        connector = connector.with_detached();
    }
    Ok(connector)
}

/// Opens a client from `connector` on `servers`, over TLS if the framework has it.
async fn open(connector: zk::Connector, servers: &str, tls: bool) -> Result<zk::Client, zk::Error> {
    if tls {
        connector.secure_connect(servers).await
    } else {
        connector.connect(servers).await
    }
}

/// A path nobody creates, under ZooKeeper's reserved `/zookeeper`: a persistent watch on it
/// receives nothing but session events, in order.
pub const SESSION_EVENTS_PATH: &str = "/zookeeper/curator-rs-session-events";

/// Follows one session's events until it is lost or the framework shuts down. `heard`: a time
/// before which the server is known to have heard from us.
async fn follow(
    inner: &Weak<Inner>,
    client: &zk::Client,
    servers: &str,
    mut events: SessionEvents,
    mut heard: Instant,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    let mut phase = Phase::Connected;
    let negotiated = client.session_timeout();
    let lost_after = negotiated * LOST_AFTER.0 / LOST_AFTER.1;
    let mut probes = tokio::time::interval((negotiated / PROBES_PER_TIMEOUT).max(Duration::from_millis(1)));
    probes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probe: Option<Probe> = None;
    // While suspended: whether a server still takes the session (module `end`).
    let mut resumable: Option<end::Resumable> = None;
    let Some(strong) = inner.upgrade() else { return End::Shutdown };
    let mut tracker = Tracker::new(strong.config.ensemble.clone(), client);
    drop(strong);
    loop {
        let lost_at = tokio::time::Instant::from_std(heard + lost_after);
        let idle = probe.is_none();
        let answered = async {
            match probe.as_mut() {
                Some(p) => (&mut p.answer).await,
                None => std::future::pending().await,
            }
        };
        let resumed = async {
            match resumable.as_mut() {
                Some(r) => r.await,
                None => std::future::pending().await,
            }
        };
        let state = tokio::select! {
            _ = shutdown.changed() => return End::Shutdown,
            alive = resumed => {
                resumable = None;
                if alive {
                    continue;
                }
                tracing::warn!(session = %client.session_id(), "the session was closed or expired on the server while disconnected: a server refused to resume it");
                crate::metrics::session_ended(zk::SessionState::Expired);
                return End::Lost;
            }
            _ = tokio::time::sleep_until(lost_at) => {
                tracing::warn!(session = %client.session_id(), silent = ?heard.elapsed(), "no answer from the server for most of a session timeout: presuming the session lost");
                crate::metrics::session_presumed_lost();
                return End::Lost;
            }
            _ = probes.tick(), if idle => {
                probe = Some(Probe::send(client));
                continue;
            }
            ok = answered => {
                if let Some(p) = probe.take() {
                    if ok {
                        heard = heard.max(p.sent);
                        // The connection works: no need to ask whether the session lives. Not
                        // at the reconnection itself: zookeeper-client says SyncConnected on
                        // the server's handshake reply, and a session closed from outside at
                        // that moment loses the connection again right after, unreported.
                        if phase == Phase::Connected {
                            resumable = None;
                        }
                    }
                }
                continue;
            }
            state = events.next() => state,
            changed = tracker.next(client) => {
                // No server of this client is in the ensemble any more, so the one it is
                // connected to is leaving: move before that server drops the connection.
                if changed && phase == Phase::Connected && disjoint_servers(servers, &tracker.ensemble().current()) {
                    return End::Move { heard, suspended: false };
                }
                continue;
            }
        };
        let Some(strong) = inner.upgrade() else { return End::Shutdown };
        match (state, phase) {
            (zk::SessionState::Disconnected, Phase::Connected) => {
                phase = Phase::Suspended;
                publish(&strong, ConnectionState::Suspended, client.session_id().0, generation, false);
                // Reconnect to the servers of the current ensemble if they changed.
                let ensemble = &strong.config.ensemble;
                if ensemble.enabled() && !same_servers(servers, &ensemble.current()) {
                    return End::Move { heard, suspended: true };
                }
                // Under ErrorPolicy::Session, learn at once whether the session still lives: it
                // may have been closed from outside, and the client's own reconnection may take
                // seconds to find out, while holders trust the session. A probe that reaches a
                // server before the client's own reconnection takes the session's connection,
                // and the client then reconnects once more (one more Suspended/Reconnected,
                // harmless under this policy). Under Standard the Suspended just published
                // already tells every holder, and no probe disturbs the reconnection.
                if strong.config.error_policy == crate::ErrorPolicy::Session {
                    resumable = Closer::new(&strong.config).ok().map(|closer| closer.resumable(client));
                }
            }
            (zk::SessionState::SyncConnected, Phase::Suspended) => {
                phase = Phase::Connected;
                // Probe again as soon as the one in flight (sent before the reconnection) is
                // answered: the reconnection moved `heard`, and the next answer shows it.
                probes.reset_immediately();
                tracker.read(client);
                publish(&strong, ConnectionState::Reconnected, client.session_id().0, generation, false);
            }
            (zk::SessionState::ConnectedReadOnly, _) => {
                phase = Phase::Connected;
                publish(&strong, ConnectionState::ReadOnly, client.session_id().0, generation, false);
            }
            (s, _) if s.is_terminated() => {
                tracing::warn!(session = %client.session_id(), state = %s, "session ended");
                crate::metrics::session_ended(s);
                return End::Lost;
            }
            _ => {}
        }
    }
}

fn publish(inner: &Arc<Inner>, state: ConnectionState, session_id: i64, generation: u64, new_session: bool) {
    inner.hub.publish(ConnectionStateEvent {
        state,
        session_id,
        generation,
        new_session,
        at: Instant::now(),
        seq: 0, // numbered by the hub
    });
}
