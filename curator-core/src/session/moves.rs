//! Moving a session (docs/architecture.md section 3.7): with the ensemble tracker on, the manager
//! follows `/zookeeper/config` (docs/architecture.md section 3.7) and moves a live session
//! to a new client on the new servers (same id and password) when the configuration leaves out
//! every server of the current client, or when the connection drops and the list changed (module
//! `follow` decides). A move shows as one `Suspended`/`Reconnected` pair at most (none if it
//! completes within [`MOVE_GRACE`]), never as `Lost` by itself; a session that cannot be moved
//! before it is presumed lost (section 3.2) is lost.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::close::client_ended;
use super::connect::connect;
use super::follow::LOST_AFTER;
use super::{Manager, Opened, SessionEvents};
use crate::state::ConnectionState;

/// How long a move of the session may leave operations waiting before `Suspended` is
/// published, if it was not already: this part of the session timeout, and at most 2 s.
const MOVE_GRACE: (u32, Duration) = (10, Duration::from_secs(2));

/// How a move ended.
pub(super) enum Moved {
    /// The client that has the session now.
    To(Opened),
    /// The session is presumed lost: its id, and what closes it if a server may still take it.
    Lost(i64, Option<zk::SessionInfo>),
    /// The framework shut down, with the new client if one was opened (never published).
    Shutdown(Option<zk::Client>),
}

impl Manager {
    /// Moves the session of `old` to the servers of the current ensemble (module
    /// docs/architecture.md section 3.7). First `old` is dropped: clients are detached while the tracker
    /// is on, so that sends no CloseSession, and a dropped client does not reconnect and take the
    /// session back from the new one (a removed server may go on serving). Then a client with the
    /// same session id and password is opened on the new servers. The session slot is empty
    /// meanwhile, so operations wait. `Suspended` is published if the move takes longer than
    /// [`MOVE_GRACE`] (unless it already was), `Reconnected` once it succeeds after `Suspended`;
    /// the session is lost if a server says it expired or it is presumed lost first (`heard`,
    /// section 3.2).
    pub(super) async fn move_session(
        &mut self,
        old: Opened,
        heard: Instant,
        mut suspended: bool,
        generation: u64,
    ) -> Moved {
        let Some(strong) = self.shared.upgrade() else { return Moved::Shutdown(None) };
        // The old session's events are followed no more.
        let Opened { client: old, events, .. } = old;
        drop(events);
        let (info, timeout) = (old.session().clone(), old.session_timeout());
        let id = info.id();
        tracing::info!(session = %id, connect_string = %strong.config.ensemble.current(), "moving the session to the new ensemble");
        strong.set_empty();
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
            let (weak, mut shutdown, resume) = (self.shared.clone(), self.shutdown.clone(), info.clone());
            let attempt = async move {
                let (client, servers) = connect(&weak, &mut shutdown, Some(resume)).await?;
                let asked = Instant::now();
                let events = SessionEvents::new(&client).await?;
                Some(Opened { client, servers, asked, events, tracker: None })
            };
            tokio::pin!(attempt);
            loop {
                tokio::select! {
                    opened = &mut attempt => break opened.ok_or(false),
                    _ = tokio::time::sleep_until(grace_at), if !suspended => {
                        let Some(strong) = self.shared.upgrade() else { return Moved::Shutdown(None) };
                        suspended = true;
                        strong.publish(ConnectionState::Suspended, id.0, generation, false);
                    }
                    _ = tokio::time::sleep_until(lost_at) => {
                        tracing::warn!(session = %id, "the session could not be moved before most of a session timeout passed: presuming it lost");
                        break Err(true);
                    }
                }
            }
        };
        let Some(strong) = self.shared.upgrade().filter(|_| !*self.shutdown.borrow()) else {
            return Moved::Shutdown(opened.ok().map(|opened| opened.client));
        };
        match opened {
            Ok(opened) => {
                strong.set_live(opened.client.clone(), generation);
                tracing::info!(session = %id, connect_string = %opened.servers, "the session moved to the new ensemble");
                if suspended {
                    strong.publish(ConnectionState::Reconnected, id.0, generation, false);
                }
                Moved::To(opened)
            }
            // Presumed lost in time: a server may still take the session, so close it.
            Err(true) => Moved::Lost(id.0, Some(info)),
            // Expired (or ended while its events were set up).
            Err(false) => Moved::Lost(id.0, None),
        }
    }
}
