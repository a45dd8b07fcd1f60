//! Deadlines from one place ([`Timing`]) and polling instead of sleeping ([`eventually`]).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{SessionState, StateWatcher};

/// Environment variable that scales every [`Timing`] (a float, default `1.0`), like Curator's
/// `timing-multiple` system property. Raise it on slow machines.
pub const TIMING_MULTIPLE_ENV: &str = "CURATOR_TEST_TIMING_MULTIPLE";

const BASE_SESSION_TIMEOUT: Duration = Duration::from_secs(4);
const BASE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
const BASE_DEADLINE: Duration = Duration::from_secs(30);

/// Generous deadlines for tests, from one place, like Apache Curator's `Timing`.
///
/// Every value is a base value times a multiple: the `CURATOR_TEST_TIMING_MULTIPLE` environment
/// variable (default 1.0) times whatever [`Timing::multiple`] added.
///
/// | value | base |
/// |---|---|
/// | [`session_timeout`](Timing::session_timeout) | 4 s |
/// | [`connection_timeout`](Timing::connection_timeout) | 2 s |
/// | [`deadline`](Timing::deadline) | 30 s |
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    multiple: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self::new()
    }
}

impl Timing {
    /// Timing scaled by `CURATOR_TEST_TIMING_MULTIPLE` (1.0 when unset or not a positive number).
    pub fn new() -> Self {
        let multiple = std::env::var(TIMING_MULTIPLE_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|m| m.is_finite() && *m > 0.0)
            .unwrap_or(1.0);
        Timing { multiple }
    }

    /// A session timeout to ask the server for.
    pub fn session_timeout(&self) -> Duration {
        self.scale(BASE_SESSION_TIMEOUT)
    }

    /// A connection timeout to give a client.
    pub fn connection_timeout(&self) -> Duration {
        self.scale(BASE_CONNECTION_TIMEOUT)
    }

    /// How long a test waits for something that should happen (30 s by default): the deadline
    /// to give [`eventually`] and to `tokio::time::timeout` around awaited events.
    pub fn deadline(&self) -> Duration {
        self.scale(BASE_DEADLINE)
    }

    /// This timing with every value multiplied by `f` (ignored unless a positive finite number).
    pub fn multiple(&self, f: f64) -> Timing {
        if f.is_finite() && f > 0.0 {
            Timing { multiple: self.multiple * f }
        } else {
            *self
        }
    }

    fn scale(&self, base: Duration) -> Duration {
        base.mul_f64(self.multiple)
    }
}

/// Polls `check` until it returns true (then `true`) or `deadline` has passed (then `false`).
///
/// `check` runs at once, then again after short, growing pauses (10 ms up to 200 ms), and once
/// more at the deadline. Use it instead of sleeping as a means of synchronisation.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// let n = AtomicU32::new(0);
/// let done = curator_test::eventually(Duration::from_secs(5), || async {
///     n.fetch_add(1, Ordering::SeqCst) >= 3
/// })
/// .await;
/// assert!(done);
/// # }
/// ```
pub async fn eventually<F, Fut>(deadline: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = Instant::now() + deadline;
    let mut pause = Duration::from_millis(10);
    loop {
        if check().await {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        tokio::time::sleep(pause.min(end - now)).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Waits until `watcher` reports `wanted` (true) or `deadline` passes (false).
///
/// Returns true at once if `wanted` is the latest state. Returns false early when the session
/// reaches a different terminal state (Expired, Closed, AuthFailed), since nothing follows one.
///
/// A `StateWatcher` keeps only the latest state, so a short-lived state can be missed: after a
/// cut connection through a local proxy, `Disconnected` lasts about a millisecond before
/// `SyncConnected`. To see every transition in order, watch a path
/// (`Client::watch(path, AddWatchMode::Persistent)`): its watcher also receives session events.
pub async fn wait_for_state(watcher: &mut StateWatcher, wanted: SessionState, deadline: Duration) -> bool {
    let current = watcher.state();
    if current == wanted {
        return true;
    }
    if current.is_terminated() {
        return false;
    }
    let wait = async {
        loop {
            let state = watcher.changed().await;
            if state == wanted {
                return true;
            }
            if state.is_terminated() {
                return false;
            }
        }
    };
    tokio::time::timeout(deadline, wait).await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiple_scales_every_value() {
        let t = Timing { multiple: 1.0 };
        assert_eq!(t.deadline(), Duration::from_secs(30));
        assert_eq!(t.session_timeout(), Duration::from_secs(4));
        assert_eq!(t.connection_timeout(), Duration::from_secs(2));
        let half = t.multiple(0.5);
        assert_eq!(half.session_timeout(), Duration::from_secs(2));
        assert_eq!(half.multiple(4.0).deadline(), Duration::from_secs(60));
        assert_eq!(t.multiple(-1.0), t);
        assert_eq!(t.multiple(f64::NAN), t);
    }

    #[tokio::test]
    async fn eventually_gives_up_at_the_deadline() {
        let start = Instant::now();
        let mut calls = 0;
        let ok = eventually(Duration::from_millis(300), || {
            calls += 1;
            async { false }
        })
        .await;
        assert!(!ok);
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(calls > 2);
    }
}
