//! The wait before a participant whose attempt to get in line failed tries again: one for the
//! latch and the selector.

use std::time::Duration;

use curator_core::RetryLoop;
use curator_core::{CuratorError, CuratorFramework};

/// The longest wait before trying again while connected.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// A participant's waits between failed attempts to get in line: backing off under the cleanup
/// loop's policy (50 ms doubling to 2 s) while connected, until connected otherwise.
#[derive(Debug)]
pub(super) struct Rejoin {
    backoff: RetryLoop,
}

impl Rejoin {
    pub(super) fn new(fw: &CuratorFramework) -> Self {
        Self { backoff: fw.cleanup_retry_loop() }
    }

    /// An attempt got in line: the next failure waits from the shortest pause again.
    pub(super) fn reset(&mut self) {
        self.backoff.reset();
    }

    /// Says why the attempt on `path` failed (a warning when retrying may fix it, an unhandled
    /// error otherwise), then waits: until connected when not connected; when connected, the
    /// next pause, cut short by any connection change.
    pub(super) async fn wait(&mut self, fw: &CuratorFramework, path: &str, err: &CuratorError) {
        let pause = self.backoff.next_pause(err).unwrap_or(MAX_PAUSE).min(MAX_PAUSE);
        if err.is_retryable() {
            tracing::warn!(path = %path, error = %err, ?pause, "could not get in line; trying again");
        } else {
            fw.report_unhandled(&format!("could not get in line for {path}; trying again"), err);
        }
        let mut states = fw.connection_state_watch();
        if !states.borrow_and_update().state.is_connected() {
            // An error: the framework is gone.
            let _ = states.wait_for(|s| s.state.is_connected() || fw.is_closed()).await;
            return;
        }
        tokio::select! {
            _ = states.changed() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}
