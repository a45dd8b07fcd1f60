//! InterProcessReadWriteLock: readers share, a writer excludes, and a writer may downgrade to a
//! read lock without letting anyone in between.
//!
//! `cargo run -p curator-examples --example read_write_lock [-- --connect host:port]`

use std::time::Duration;

use curator_examples::{connect_arg, init_logging, Zookeeper};
use curator_recipes::InterProcessReadWriteLock;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = zk.connect().await?;
    let path = format!("/examples/rwlock-{}", std::process::id());

    let a = InterProcessReadWriteLock::new(&client, &path)?;
    let b = InterProcessReadWriteLock::new(&client, &path)?;
    let ra = a.read_lock().acquire().await?;
    let rb = b.read_lock().acquire().await?;
    tracing::info!("two readers at once: {} and {}", ra.path(), rb.path());
    ra.release().await?;
    rb.release().await?;

    let write = a.write_lock().acquire().await?;
    tracing::info!("writer holds {}", write.path());
    let blocked = b.read_lock().acquire_timeout(Duration::from_millis(200)).await?;
    tracing::info!("another reader while writing: {}", if blocked.is_some() { "got in (wrong!)" } else { "waits" });
    let read = a.read_lock().acquire().await?; // downgrade: taken while holding the write lock
    write.release().await?;
    tracing::info!("downgraded to a read lock: {}", read.path());
    let upgrade = a.write_lock().acquire().await;
    tracing::info!("upgrading read -> write is refused: {:?}", upgrade.err().map(|e| e.to_string()));
    read.release().await?;
    client.close().await;
    zk.stop().await;
    Ok(())
}
