//! InterProcessMutex: three sessions take turns; each hold has a fencing token and a way to
//! learn that the lock may be lost. The lock is held while its guard lives: bind it (`let guard
//! = lock.acquire().await?;`); a bare `lock.acquire().await?;` drops it and releases at once.
//! The last turn is Curator's style, `acquire(); try { .. } finally { release(); }`: the guard's
//! `keep()` leaves the count to the handle's `release()`.
//!
//! `cargo run -p curator-examples --example mutex [-- --connect host:port]`

use std::time::Duration;

use curator_core::CuratorFramework;
use curator_examples::{connect_arg, init_logging, Zookeeper};
use curator_recipes::InterProcessMutex;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let zk = Zookeeper::from_env(connect_arg()).await?;
    let path = format!("/examples/mutex-{}", std::process::id());
    let mut tasks = Vec::new();
    for worker in 0..3 {
        let (connect, path) = (zk.connect_string().to_string(), path.clone());
        tasks.push(tokio::spawn(async move {
            let client = CuratorFramework::builder().connect_string(connect).build()?;
            client.start()?;
            client.block_until_connected(Duration::from_secs(10)).await?;
            let lock = InterProcessMutex::new(&client, &path)?;
            for _ in 0..2 {
                let guard = lock.acquire().await?;
                tracing::info!(
                    worker,
                    token = format_args!("{:#x}", guard.fencing_token()),
                    node = guard.path(),
                    "holding"
                );
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    why = guard.lost() => tracing::warn!(worker, "lock may be lost: {why}"),
                }
                guard.release().await?;
            }
            lock.acquire().await?.keep();
            tracing::info!(worker, held = lock.is_acquired_in_this_process(), "holding, Curator's style");
            lock.release().await?;
            client.close().await;
            Ok::<_, curator_core::CuratorError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    zk.stop().await;
    Ok(())
}
