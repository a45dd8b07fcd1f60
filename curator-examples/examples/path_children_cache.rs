//! PathChildrenCache: membership. Members join as ephemeral nodes; the cache reports joins,
//! updates and leaves, one request per change.
//!
//! `cargo run -p curator-examples --example path_children_cache [-- --connect host:port]`

use std::time::Duration;

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::CreateMode;
use curator_examples::{connect_arg, init_logging, Zookeeper};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = zk.connect().await?;
    let dir = format!("/examples/members-{}", std::process::id());
    client.create().creating_parents_if_needed().for_path(&dir, Vec::new()).await?;

    let cache = PathChildrenCache::new(&client, &dir, true)?;
    let mut events = cache.events();
    cache.start(StartMode::PostInitializedEvent)?;
    for name in ["alpha", "beta"] {
        client.create().with_mode(CreateMode::Ephemeral).for_path(&format!("{dir}/{name}"), b"up".to_vec()).await?;
    }
    client.set_data().for_path(&format!("{dir}/alpha"), b"busy".to_vec()).await?;
    client.delete().for_path(&format!("{dir}/beta")).await?;

    let mut left = 5; // initialized, 2 adds, 1 update, 1 remove
    while left > 0 {
        let Some(event) = tokio::time::timeout(Duration::from_secs(10), events.next()).await? else { break };
        match &event {
            PathChildrenCacheEvent::ChildAdded(d) => tracing::info!("joined {}", d.name()),
            PathChildrenCacheEvent::ChildUpdated(d) => {
                tracing::info!("updated {} -> {:?}", d.name(), d.data().map(String::from_utf8_lossy))
            }
            PathChildrenCacheEvent::ChildRemoved(d) => tracing::info!("left {}", d.name()),
            PathChildrenCacheEvent::Initialized(initial) => tracing::info!("initialized with {}", initial.len()),
            other => tracing::info!("{other:?}"),
        }
        left -= 1;
    }
    let members: Vec<_> = cache.current_data().iter().map(|d| d.name().to_string()).collect();
    tracing::info!("members now: {members:?}");
    cache.close().await;
    client.delete().deleting_children_if_needed().for_path(&dir).await?;
    client.close().await;
    zk.stop().await;
    Ok(())
}
