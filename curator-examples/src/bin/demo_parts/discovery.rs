//! Part 4: service discovery. Three instances of a `search` service register, each from a
//! process of its own (here: a framework each); a client's provider hands them out round robin;
//! one instance's process dies (its session ends, unannounced) and the provider stops returning
//! it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use curator_core::{CuratorError, Result};
use curator_discovery::{DiscoveryError, ServiceDiscovery, ServiceInstance, ServiceProvider, UriSpec};
use serde_json::json;

use super::Checks;

const BASE: &str = "/services";
const SERVICE: &str = "search";
const PORTS: [u16; 3] = [8081, 8082, 8083];
/// The instance whose process dies.
const DIES: usize = 1;

/// Discovery's errors, as the demo's.
fn demo<T>(result: std::result::Result<T, DiscoveryError>) -> Result<T> {
    result.map_err(|e| CuratorError::IllegalState(format!("discovery: {e}")))
}

/// Polls `check` for up to 10 s.
async fn within_10s(mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await; // poll interval
    }
    check()
}

pub(crate) async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    let spec = demo(UriSpec::parse("{scheme}://{address}:{port}/search"))?;
    let mut processes = Vec::new();
    for (shard, port) in PORTS.into_iter().enumerate() {
        let fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
        let instance = ServiceInstance::builder(SERVICE)
            .address("127.0.0.1")
            .port(port)
            .payload(json!({ "shard": shard }))
            .uri_spec(spec.clone())
            .build();
        let discovery = demo(ServiceDiscovery::builder(&fw, BASE).this_instance(instance).build())?;
        demo(discovery.start())?;
        demo(discovery.ready().await)?;
        tracing::info!("  registered {SERVICE} at 127.0.0.1:{port}");
        processes.push((fw, discovery));
    }

    let client_fw = crate::framework(connect, namespace, Duration::from_secs(10)).await?;
    let client = demo(ServiceDiscovery::<serde_json::Value>::builder(&client_fw, BASE).build())?;
    let provider = demo(client.service_provider(SERVICE, ServiceProvider::builder()))?;
    demo(provider.start())?;
    demo(provider.ready().await)?;
    let all = within_10s(|| provider.all_instances().len() == PORTS.len()).await;
    checks.record("the client found every instance", all, format!("{} instances", provider.all_instances().len()));
    let picks: Vec<String> =
        (0..2 * PORTS.len()).filter_map(|_| provider.instance()).map(|i| i.build_uri(&HashMap::new())).collect();
    for uri in &picks {
        tracing::info!("  round robin picked {uri}");
    }
    let (first, second) = picks.split_at(picks.len() / 2);
    let mut distinct = first.to_vec();
    distinct.sort();
    distinct.dedup();
    checks.record(
        "round robin handed out each instance in turn",
        first == second && distinct.len() == PORTS.len(),
        format!("{} picks", picks.len()),
    );

    // One instance's process dies: its session ends, and it unregisters nothing.
    let dead_port = PORTS[DIES];
    let (dead_fw, dead_discovery) = processes.remove(DIES);
    tracing::info!("  the process of 127.0.0.1:{dead_port} dies");
    dead_fw.close().await;
    drop(dead_discovery);
    let gone = within_10s(|| {
        (0..2 * PORTS.len()).filter_map(|_| provider.instance()).all(|i| i.port != Some(i32::from(dead_port)))
    })
    .await;
    checks.record("the provider stopped returning the dead instance", gone, format!("127.0.0.1:{dead_port}"));

    provider.close().await;
    client.close().await;
    client_fw.close().await;
    for (fw, discovery) in processes {
        discovery.close().await;
        fw.close().await;
    }
    Ok(())
}
