//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions};

/// Logs to the test's captured output; `RUST_LOG=debug` for more.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}

/// A path nobody else uses, under the root.
pub fn unique_path(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("/{name}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

pub fn persistent() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

pub fn ephemeral() -> CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(Acls::anyone_all())
}

pub async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(session_timeout)
        .connect(connect_string)
        .await
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}
