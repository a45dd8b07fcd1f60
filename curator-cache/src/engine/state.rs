//! The engine's states: whether the map follows the server ([`SyncState`]), where the watch's
//! session stands ([`Link`]), and what the next load owes the cache's commands.

use std::time::Duration;

use curator_core::Result;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long a catch-up after a reconnection waits for the framework to report the
/// reconnection, so that listeners hear "reconnected" before what changed meanwhile.
pub(super) const RECONNECT_GRACE: Duration = Duration::from_millis(100);

/// Whether the map follows the server, and when the next load starts.
///
/// ```text
///  start; a command; a lost, new or replaced session; a failed read;
///  a change of the root on servers before 3.9            any ──► Wanted { not_before: None }
///  the watch is back after a disconnection          InSync ──► Wanted { not_before: now + grace }
///      (not_before: None when the framework reported the reconnection first)
///  the framework reports the reconnection   Wanted, BackingOff ──► Wanted { not_before: None }
///  not_before is past                                   Wanted ──► Loading
///  the load is done and its difference reported        Loading ──► InSync
///  the load failed                                     Loading ──► BackingOff (pause from the RetryLoop)
///  the connection changed meanwhile (reported first)   Loading ──► Wanted { not_before: None }
///  the pause is over                                BackingOff ──► Wanted { not_before: None }
/// ```
pub(super) enum SyncState {
    /// The map follows the server; node events are applied one by one.
    InSync,
    /// A load is needed; it starts once `not_before` (if any) is past.
    Wanted { not_before: Option<Instant> },
    /// A load runs.
    Loading,
    /// The last load failed; another starts once `until` is past (the pause comes from the
    /// engine's retry loop, which keeps doubling it until a load succeeds).
    BackingOff { until: Instant },
}

impl SyncState {
    /// Whether a load should start now.
    pub(super) fn load_due(&self) -> bool {
        match self {
            SyncState::Wanted { not_before } => not_before.is_none_or(|at| Instant::now() >= at),
            SyncState::InSync | SyncState::Loading | SyncState::BackingOff { .. } => false,
        }
    }

    /// Resolves when a wait set by the state is over: the grace after a reconnection, or a
    /// pause after a failed load. Never resolves otherwise.
    pub(super) async fn wait_over(&self) {
        match self {
            SyncState::Wanted { not_before: Some(at) } | SyncState::BackingOff { until: at } => {
                tokio::time::sleep_until(*at).await
            }
            SyncState::Wanted { not_before: None } | SyncState::InSync | SyncState::Loading => {
                std::future::pending().await
            }
        }
    }
}

/// Where the session of the watch stands, as the watch and the framework report it. The
/// framework and the watch report a reconnection separately, in either order.
///
/// ```text
///  framework reports a reconnection   Up ──► Announced      Down ──► DownAnnounced
///  watch reports Disconnected         Up ──► Down      Announced ──► DownAnnounced
///  watch is back (SyncConnected)    Down ──► Up (load after a grace)
///                           DownAnnounced ──► Up (load now)
///  a load is done            Announced ──► Up  DownAnnounced ──► Down
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Link {
    /// Connected; nothing pending.
    Up,
    /// The framework reported a reconnection of this session that the watch has not shown.
    Announced,
    /// The watch reported a disconnection.
    Down,
    /// The watch reported a disconnection, and the framework already the reconnection.
    DownAnnounced,
}

impl Link {
    /// The framework reported a reconnection of this session.
    pub(super) fn announced(self) -> Self {
        match self {
            Link::Up | Link::Announced => Link::Announced,
            Link::Down | Link::DownAnnounced => Link::DownAnnounced,
        }
    }

    /// The watch reported `Disconnected`.
    pub(super) fn disconnected(self) -> Self {
        match self {
            Link::Up | Link::Down => Link::Down,
            Link::Announced | Link::DownAnnounced => Link::DownAnnounced,
        }
    }

    /// A load is done: an announcement is used up.
    pub(super) fn settled(self) -> Self {
        match self {
            Link::Up | Link::Announced => Link::Up,
            Link::Down | Link::DownAnnounced => Link::Down,
        }
    }
}

/// What the cache's commands asked of the next load.
#[derive(Default)]
pub(super) struct NextLoad {
    /// Replace the map without events ([`Command::Rebuild`]).
    pub(super) silent: bool,
    /// Told how the next load ends.
    pub(super) waiters: Vec<oneshot::Sender<Result<()>>>,
}
