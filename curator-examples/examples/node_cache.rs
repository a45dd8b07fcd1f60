//! NodeCache: a configuration node that may not exist yet, changes, is deleted and re-created.
//!
//! `cargo run -p curator-examples --example node_cache [-- --connect host:port]`

use std::time::Duration;

use curator_cache::{NodeCache, NodeCacheEvent};
use curator_examples::{connect_arg, init_logging, Zookeeper};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = zk.connect().await?;
    let path = format!("/examples/config-{}", std::process::id());

    let cache = NodeCache::new(&client, &path)?;
    let mut events = cache.events();
    cache.start(true)?;
    cache.wait_initialized().await?;
    tracing::info!("at start: {:?}", cache.current_data().map(|d| d.path().to_string()));

    client.create().creating_parents_if_needed().for_path(&path, b"v1".to_vec()).await?;
    client.set_data().for_path(&path, b"v2".to_vec()).await?;
    client.delete().for_path(&path).await?;
    client.create().for_path(&path, b"v3".to_vec()).await?;

    // One read per change: changes that follow each other closely may show as one event with
    // the latest value.
    loop {
        let Some(event) = tokio::time::timeout(Duration::from_secs(10), events.next()).await? else { break };
        if let NodeCacheEvent::NodeChanged(data) = event {
            let value = data.as_ref().and_then(|d| d.data().map(|b| String::from_utf8_lossy(b).into_owned()));
            tracing::info!("node changed: {value:?}");
            if value.as_deref() == Some("v3") {
                break;
            }
        }
    }
    cache.close().await;
    client.delete().for_path(&path).await?;
    client.close().await;
    zk.stop().await;
    Ok(())
}
