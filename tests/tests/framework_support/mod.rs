//! Helpers shared by the framework tests.
#![allow(dead_code)]

use curator_core::{
    ConnectionState, ConnectionStateEvent, ConnectionStateStream, CuratorFramework, CuratorFrameworkBuilder,
};
use curator_test::Timing;

/// A path no other test uses.
pub fn unique(name: &str) -> String {
    format!("/{name}-{:016x}", fastrand::u64(..))
}

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)]
pub use common::{builder, init_tracing};

/// A started and connected framework.
pub async fn connected(b: CuratorFrameworkBuilder) -> CuratorFramework {
    common::start(b).await
}

/// A framework through a fresh proxy in front of the shared server, started and connected, with
/// a stream of its transitions from the start.
pub async fn proxied_with_states() -> (curator_test::ChaosProxy, CuratorFramework, ConnectionStateStream) {
    let server = curator_test::TestingServer::shared();
    let proxy = curator_test::ChaosProxy::start(&server.connect_string()).await.expect("proxy");
    let fw = builder(&proxy.connect_string()).build().expect("valid options");
    let states = fw.connection_state_stream();
    fw.start().expect("start");
    fw.block_until_connected(Timing::new().deadline()).await.expect("connected");
    (proxy, fw, states)
}

/// Reads transitions until one has `state` (and passes `check`), returning all read so far.
pub async fn wait_for(
    stream: &mut ConnectionStateStream,
    state: ConnectionState,
    check: impl Fn(&ConnectionStateEvent) -> bool,
) -> Vec<ConnectionStateEvent> {
    let mut seen = Vec::new();
    let deadline = Timing::new().deadline();
    let found = tokio::time::timeout(deadline, async {
        while let Some(event) = stream.next().await {
            let done = event.state == state && check(&event);
            seen.push(event);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "never saw {state:?}; saw {:?}",
        seen.iter().map(|e| e.state).collect::<Vec<_>>()
    );
    seen
}
