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
//! asks the servers at once whether the session still lives (section 3.2).

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
        let Opened { client, servers, asked, events } = opened;
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
        let Some(strong) = self.shared.upgrade() else { return End::Shutdown };
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
                _ = self.shutdown.changed() => return End::Shutdown,
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
                    // Under ErrorPolicy::Session, learn at once whether the session still lives: it
                    // may have been closed from outside, and the client's own reconnection may take
                    // seconds to find out, while holders trust the session. A probe that reaches a
                    // server before the client's own reconnection takes the session's connection,
                    // and the client then reconnects once more (one more Suspended/Reconnected,
                    // harmless under this policy). Under Standard the Suspended just published
                    // already tells every holder, and no probe disturbs the reconnection.
                    if strong.config.error_policy == ErrorPolicy::Session {
                        resumable = self.closer.as_ref().map(|closer| closer.resumable(client));
                    }
                }
                (zk::SessionState::SyncConnected, Phase::Suspended) => {
                    phase = Phase::Connected;
                    // Probe again as soon as the one in flight (sent before the reconnection) is
                    // answered: the reconnection moved `heard`, and the next answer shows it.
                    probes.reset_immediately();
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
