//! Background operations: the callback gets a `CuratorEvent`; events without a callback go to
//! the framework's listeners.
//!
//! `cargo run -p curator-examples --example background_callbacks [-- --connect host:port]`

use std::time::Duration;

use curator_core::{CreateMode, CuratorEvent, CuratorFramework};
use curator_examples::{connect_arg, init_logging, Zookeeper};
use tokio::sync::mpsc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = CuratorFramework::builder().connect_string(zk.connect_string()).namespace("examples").build()?;
    client.start()?;
    client.block_until_connected(Duration::from_secs(10)).await?;

    let (tx, mut rx) = mpsc::unbounded_channel::<CuratorEvent>();
    let to_listeners = tx.clone();
    client.add_listener(move |_: &CuratorFramework, e: CuratorEvent| drop(to_listeners.send(e)));

    let path = format!("/background-{}", std::process::id());
    let cb = move |_: &CuratorFramework, e: CuratorEvent| drop(tx.send(e));
    client.create().with_mode(CreateMode::Ephemeral).for_path(&path, b"hello".to_vec()).in_background(cb.clone());
    let created = rx.recv().await.ok_or("no event")?;
    tracing::info!(kind = ?created.event_type, name = ?created.name, code = created.result_code, "callback");

    client.get_data().for_path(&path).in_background_to_listeners();
    let read = rx.recv().await.ok_or("no event")?;
    tracing::info!(kind = ?read.event_type, data = ?read.data.map(String::from_utf8), "listener");

    client.delete().for_path("/does-not-exist").in_background(cb);
    let failed = rx.recv().await.ok_or("no event")?;
    tracing::info!(kind = ?failed.event_type, code = failed.result_code, error = ?failed.error.map(|e| e.to_string()), "failure as an event");

    client.close().await;
    zk.stop().await;
    Ok(())
}
