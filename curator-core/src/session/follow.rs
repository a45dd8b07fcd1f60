//! Following one session (docs/architecture.md section 3.1, step 4): its events become
//! connection states (`Disconnected` → `Suspended`, `SyncConnected` after that → `Reconnected`,
//! `ConnectedReadOnly` → `ReadOnly`, a terminal state → lost), until it is lost, the framework
//! shuts down, or the session must move to other servers (module `moves`).
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
//! To keep `heard` fresh it sends a probe (`exists` on
//! [`SESSION_EVENTS_PATH`](super::SESSION_EVENTS_PATH), answered by any server) every
//! `T / PROBES_PER_TIMEOUT` while none is in flight. Measuring from when the disconnection was
//! *noticed* would be late: zookeeper-client notices a silent connection only after 2/5 of `T`
//! without a reply, and it declares expiry itself only after 7/5 of `T`.
//!
//! Under `ErrorPolicy::Session`, after a disconnection the manager's [`Closer`](super::Closer)
//! asks the servers whether the session still lives, without taking the connection from
//! the client's own reconnection (section 3.2).

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::events::Probe;
use super::{close, Manager, Opened};
use crate::ensemble::{disjoint_servers, same_servers, Tracker};
use crate::state::{ConnectionState, ErrorPolicy};

/// How many probes a session timeout: one every `T / PROBES_PER_TIMEOUT` while none is in flight.
const PROBES_PER_TIMEOUT: u32 = 10;
/// The session is presumed lost once `LOST_AFTER.0 / LOST_AFTER.1` of its timeout has passed
/// since the send time of the latest request the server answered.
pub(super) const LOST_AFTER: (u32, u32) = (19, 20);

/// Where the manager is in a session's life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connected,
    Suspended,
}

/// Why following a client ended.
pub(super) enum End {
    Lost,
    Shutdown,
    /// Move the session to the servers of the current ensemble (module
    /// docs/architecture.md section 3.7). `heard` as in [`Manager::follow`]; `suspended` if
    /// `Suspended` was published (the connection dropped first).
    Move {
        heard: Instant,
        suspended: bool,
    },
}

impl Manager {
    /// Follows the session of `opened`, of `generation`, until it is lost, the framework shuts
    /// down, or it must move. `heard`, a time before which the server is known to have heard
    /// from us, starts at `opened.asked`.
    pub(super) async fn follow(&mut self, opened: &mut Opened, generation: u64) -> End {
        let Opened { client, servers, asked, events, tracker } = opened;
        let (client, servers) = (&*client, servers.as_str());
        let mut heard = *asked;
        let mut phase = Phase::Connected;
        let negotiated = client.session_timeout();
        let lost_after = negotiated * LOST_AFTER.0 / LOST_AFTER.1;
        let mut probes = tokio::time::interval((negotiated / PROBES_PER_TIMEOUT).max(Duration::from_millis(1)));
        probes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut probe: Option<Probe> = None;
        // While suspended: whether a server still takes the session (module `close`).
        let mut resumable: Option<close::Resumable> = None;
        // The question is dropped at the reconnection; if no probe confirms the connection by
        // then, it is asked again (a loss right after the handshake goes unreported).
        let mut confirm_by: Option<tokio::time::Instant> = None;
        // The round trip of the latest answered probe, and when a question was last asked (its
        // first attempt sent) or answered that the session lives: both put off the next question
        // (`close::first_question`). `asking_from`: when the current question's first attempt
        // goes out.
        let mut rtt = Duration::ZERO;
        let mut asked_at: Option<Instant> = None;
        let mut asking_from = Instant::now();
        let mut reconnected_at = Instant::now();
        let quiet = negotiated / PROBES_PER_TIMEOUT;
        let Some(strong) = self.shared.upgrade() else { return End::Shutdown };
        let tracker = tracker.insert(Tracker::new(strong.config.ensemble.clone(), client));
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
            let unconfirmed = async {
                match confirm_by {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let state = tokio::select! {
                _ = self.shutdown.changed() => return End::Shutdown,
                alive = resumed => {
                    resumable = None;
                    if alive {
                        asked_at = Some(Instant::now());
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
                _ = unconfirmed => {
                    confirm_by = None;
                    if phase == Phase::Connected {
                        asking_from = Instant::now();
                        resumable = self.closer.as_ref().map(|closer| closer.resumable(client, Duration::ZERO));
                    }
                    continue;
                }
                _ = probes.tick(), if idle => {
                    probe = Some(Probe::send(client));
                    continue;
                }
                ok = answered => {
                    if let Some(p) = probe.take() {
                        if ok {
                            heard = heard.max(p.sent);
                            rtt = p.sent.elapsed();
                            // The connection works: no need to ask whether the session lives.
                            if phase == Phase::Connected {
                                resumable = None;
                                confirm_by = None;
                            }
                        } else if confirm_by.is_some() && phase == Phase::Connected && p.sent >= reconnected_at {
                            // zookeeper-client says SyncConnected on the server's handshake
                            // reply; a session closed from outside at that moment loses the
                            // connection again right after, unreported but for this failure.
                            confirm_by = None;
                            asking_from = Instant::now();
                            resumable = self.closer.as_ref().map(|closer| closer.resumable(client, Duration::ZERO));
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
            let Some(strong) = self.shared.upgrade() else { return End::Shutdown };
            match (state, phase) {
                (zk::SessionState::Disconnected, Phase::Connected) => {
                    phase = Phase::Suspended;
                    strong.publish(ConnectionState::Suspended, client.session_id().0, generation, false);
                    // Reconnect to the servers of the current ensemble if they changed.
                    let ensemble = &strong.config.ensemble;
                    if ensemble.enabled() && !same_servers(servers, &ensemble.current()) {
                        return End::Move { heard, suspended: true };
                    }
                    // Under ErrorPolicy::Session, learn soon whether the session still lives: it
                    // may have been closed from outside, and the client's own reconnection may take
                    // seconds to find out, while holders trust the session. Asking takes the
                    // session's connection from a reconnection under way, so not before one had
                    // time to finish (`close::first_question`). Under Standard the Suspended just
                    // published already tells every holder, and nobody asks.
                    confirm_by = None;
                    if strong.config.error_policy == ErrorPolicy::Session {
                        let first = close::first_question(rtt, asked_at.map(|at| at.elapsed()), quiet);
                        asking_from = Instant::now() + first;
                        resumable = self.closer.as_ref().map(|closer| closer.resumable(client, first));
                    }
                }
                (zk::SessionState::SyncConnected, Phase::Suspended) => {
                    phase = Phase::Connected;
                    // Probe again as soon as the one in flight (sent before the reconnection) is
                    // answered: the reconnection moved `heard`, and the next answer shows it.
                    probes.reset_immediately();
                    reconnected_at = Instant::now();
                    // Stop asking whether the session lives: an attempt now would take the
                    // connection just won. Ask after all if no probe confirms it in time.
                    if resumable.take().is_some() {
                        if Instant::now() >= asking_from {
                            // An attempt went out: it may yet take this connection.
                            asked_at = Some(Instant::now());
                        }
                        confirm_by = Some(tokio::time::Instant::now() + close::confirm_bound(rtt));
                    }
                    tracker.read(client);
                    strong.publish(ConnectionState::Reconnected, client.session_id().0, generation, false);
                }
                (zk::SessionState::ConnectedReadOnly, _) => {
                    phase = Phase::Connected;
                    strong.publish(ConnectionState::ReadOnly, client.session_id().0, generation, false);
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
}
