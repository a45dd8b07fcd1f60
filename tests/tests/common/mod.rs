//! What every test-support module builds on: logging, and frameworks with the test timings.
#![allow(dead_code)]

use std::time::Duration;

use curator_core::retry::RetryNTimes;
use curator_core::{CuratorFramework, CuratorFrameworkBuilder};
use curator_test::Timing;

/// Logs to the test's captured output; `RUST_LOG=debug` for more.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// A builder for `connect_string` with the test timings (session 4 s, connection 2 s, scaled by
/// `CURATOR_TEST_TIMING_MULTIPLE`) and a retry policy that outlasts a short cut.
pub fn builder(connect_string: &str) -> CuratorFrameworkBuilder {
    let timing = Timing::new();
    CuratorFramework::builder()
        .connect_string(connect_string)
        .session_timeout(timing.session_timeout())
        .connection_timeout(timing.connection_timeout())
        .retry_policy(RetryNTimes::new(20, Duration::from_millis(100)))
}

/// Builds, starts and waits (up to the test deadline) for the first connection.
pub async fn start(b: CuratorFrameworkBuilder) -> CuratorFramework {
    let fw = b.build().expect("valid options");
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    fw
}
