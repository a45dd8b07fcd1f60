//! Metrics: installs a Prometheus exporter (`metrics-exporter-prometheus`, rendering only, no
//! HTTP listener), runs a lock cycle and a `PathChildrenCache`, and prints the scrape text. A
//! service would serve `handle.render()` on its own `/metrics` endpoint. The names are tabled
//! in docs/operations.md section 6.
//!
//! `cargo run -p curator-examples --example metrics_prometheus [-- --connect host:port]`

use std::time::Duration;

use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::CreateMode;
use curator_examples::{connect_arg, init_logging, Zookeeper};
use curator_recipes::InterProcessMutex;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    // Histograms in seconds as Prometheus histograms (the exporter's default is a summary).
    let buckets = [0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10.0];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)?
        .install_recorder()?;
    curator_core::metrics::describe();

    let zk = Zookeeper::from_env(connect_arg()).await?;
    let client = zk.connect().await?;
    let base = format!("/examples/metrics-{}", std::process::id());

    let mutex = InterProcessMutex::new(&client, &format!("{base}/lock"))?;
    let guard = mutex.acquire().await?;
    tracing::info!(token = guard.fencing_token(), "holding the lock");
    guard.release().await?;

    let members = format!("{base}/members");
    let cache = PathChildrenCache::new(&client, &members, true)?;
    let mut events = cache.events();
    cache.start(StartMode::BuildInitialCache)?;
    cache.wait_initialized().await?;
    client.create().with_mode(CreateMode::Ephemeral).for_path(&format!("{members}/alpha"), b"up".to_vec()).await?;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), events.next()).await? {
        if let PathChildrenCacheEvent::ChildAdded(d) = event {
            tracing::info!("cache saw {} join", d.name());
            break;
        }
    }
    cache.close().await;
    client.delete().deleting_children_if_needed().for_path(&base).await?;
    client.close().await;
    zk.stop().await;

    println!("{}", handle.render());
    Ok(())
}
