//! Connection-state listener: prints Connected, then Lost and Reconnected (new session) when the
//! session is expired on purpose, then Closed.
//!
//! `cargo run -p curator-examples --example connection_states [-- --connect host:port]`

use std::time::Duration;

use curator_core::{ConnectionState, CuratorFramework};
use curator_examples::{connect_arg, init_logging, Zookeeper};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = CuratorFramework::builder()
        .connect_string(zk.connect_string())
        .session_timeout(Duration::from_secs(5))
        .build()?;
    client.add_connection_state_listener(|_, e| {
        tracing::info!(state = ?e.state, session = format_args!("{:#x}", e.session_id), new_session = e.new_session, "state");
    });
    let mut states = client.connection_state_stream();
    client.start()?;
    client.block_until_connected(Duration::from_secs(10)).await?;

    let session = client.session().await?;
    curator_test::expire_session(zk.connect_string(), session.client().session()).await?;
    while let Some(e) = states.next().await {
        if e.state == ConnectionState::Reconnected && e.new_session {
            break;
        }
    }
    client.close().await;
    zk.stop().await;
    Ok(())
}
