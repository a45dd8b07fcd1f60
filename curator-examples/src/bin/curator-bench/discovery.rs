//! Service discovery scenario `discovery_cache` (issue 14): how long a `ServiceCache` of a
//! service with many instances takes to load, and how long a new registration takes to reach
//! every cache.
//!
//! A registrar framework registers `--instances N` instances (1000 by default) of the service
//! `bench` under `<path>/services` through its `ServiceDiscovery`: `DYNAMIC` (ephemeral) nodes
//! with ids `i-<n>` and a small map payload, written with Java's class name for it
//! (`java.util.HashMap`) so the nodes are the bytes Curator's side writes. Then `--caches C`
//! frameworks (5 by default), each its own session with a `ServiceDiscovery` of its own, start a
//! `ServiceCache` of `bench` one after the other; an init sample runs from just before
//! `ServiceCache::start()` to the return of its `ready()` (the instances present are loaded then) and the line
//! `discovery_cache_init` reports the median over the caches as p50 (`ops` = N). Then the
//! registrar registers `--adds A` more instances (scripts/bench-discovery gives 200) one at a
//! time; an event sample runs from just before `register()` to the moment the **last** cache's
//! listener hears `ServiceCacheEvent::Added` with the new id, and the next registration starts
//! only then (line `discovery_cache_event`, with the first cache's latency and the
//! `register()` call's own). `--listen stream` hears the events through `ServiceCache::events()`
//! in a task per cache instead of a listener callback (callbacks run on the blocking pool, one
//! thread hop more).

use std::time::{Duration, Instant};

use curator_core::{CuratorError, Result};
use curator_discovery::{
    JsonInstanceSerializer, ServiceCache, ServiceCacheEvent, ServiceDiscovery, ServiceInstance, ServiceType,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::args::Args;
use crate::report::{line, micros, percentile, round};

/// The service's name, the same on Curator's side.
const SERVICE: &str = "bench";
/// Java's class of the payload, written as Jackson's `"@class"`, as Curator's side writes it.
const PAYLOAD_CLASS: &str = "java.util.HashMap";
/// How many up-front registrations run at once.
const REGISTER_WINDOW: usize = 64;
/// How long a registration may take to reach every cache.
const EVENT_DEADLINE: Duration = Duration::from_secs(30);

/// An addition as one cache saw it: (cache, instance id, when its listener ran).
type Seen = (usize, String, Instant);

fn instance(n: usize) -> ServiceInstance<Value> {
    ServiceInstance::builder(SERVICE)
        .id(format!("i-{n:05}"))
        .address("10.0.0.1")
        .port(8000 + (n % 1000) as i32)
        .payload(json!({"zone": format!("z-{}", n % 4), "weight": (n % 10) as i64}))
        .service_type(ServiceType::Dynamic)
        .build()
}

fn discovery(fw: &curator_core::CuratorFramework, base: &str) -> Result<ServiceDiscovery<Value>> {
    ServiceDiscovery::builder(fw, base)
        .serializer(JsonInstanceSerializer::new().payload_class(PAYLOAD_CLASS))
        .build()
        .map_err(into_curator)
}

fn into_curator(e: curator_discovery::DiscoveryError) -> CuratorError {
    match e {
        curator_discovery::DiscoveryError::Curator(e) => e,
        other => CuratorError::IllegalState(other.to_string()),
    }
}

/// Registers instances `0..n` with `registrar`, [`REGISTER_WINDOW`] at a time.
async fn register_all(registrar: &ServiceDiscovery<Value>, n: usize) -> Result<()> {
    use futures::stream::TryStreamExt;
    futures::stream::iter((0..n).map(|i| Ok::<_, CuratorError>(instance(i))))
        .map_ok(|inst| async move { registrar.register(inst).await.map_err(into_curator) })
        .try_buffer_unordered(REGISTER_WINDOW)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

pub(crate) async fn discovery_cache(args: &Args) -> Result<Vec<String>> {
    let (n, c, adds) = (args.instances.max(1), args.caches.max(1), args.adds);
    let base = format!("{}/services", args.path);

    // The registrar and its N instances, registered up front (not timed).
    let registrar_fw = crate::client(args).await?;
    let registrar = discovery(&registrar_fw, &base)?;
    register_all(&registrar, n).await?;

    // The caches: each on its own framework, started one after the other.
    let cache_fws = crate::clients(args, c).await?;
    let mut discoveries = Vec::with_capacity(c);
    let mut caches: Vec<ServiceCache<Value>> = Vec::with_capacity(c);
    let mut inits = Vec::with_capacity(c);
    let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
    for (j, fw) in cache_fws.iter().enumerate() {
        let d = discovery(fw, &base)?;
        let cache = d.service_cache_builder(SERVICE).build().map_err(into_curator)?;
        let tx = tx.clone();
        if args.listen == "stream" {
            let mut events = cache.events();
            tokio::spawn(async move {
                while let Some(event) = events.next().await {
                    if let ServiceCacheEvent::Added(instance) = event {
                        let _ = tx.send((j, instance.id.clone(), Instant::now()));
                    }
                }
            });
        } else {
            cache.add_listener(move |event: &ServiceCacheEvent<Value>| {
                if let ServiceCacheEvent::Added(instance) = event {
                    let _ = tx.send((j, instance.id.clone(), Instant::now()));
                }
            });
        }
        let t0 = Instant::now();
        cache.start().map_err(into_curator)?;
        cache.ready().await.map_err(into_curator)?;
        inits.push(micros(t0.elapsed()));
        let loaded = cache.instances().len();
        if loaded != n {
            return Err(CuratorError::IllegalState(format!("cache {j} loaded {loaded} instances, not {n}")));
        }
        discoveries.push(d);
        caches.push(cache);
    }
    drop(tx);
    let per_cache_init: Vec<f64> = inits.iter().copied().map(round).collect();
    // ops_per_s: instances loaded per second by a cache, on the mean load time.
    let init_wall = Duration::from_secs_f64(inits.iter().sum::<f64>() / 1e6 / c as f64);
    let init_line = line(
        "discovery_cache_init",
        c + 1,
        n,
        init_wall,
        &mut inits.clone(),
        json!({
            "instances": n,
            "caches": c,
            "per_cache_init_us": per_cache_init,
            "init_max_us": round(inits.iter().copied().fold(0.0, f64::max)),
        }),
    );

    // The additions, one at a time.
    let mut all = Vec::with_capacity(adds);
    let mut first = Vec::with_capacity(adds);
    let mut registers = Vec::with_capacity(adds);
    let mut per_cache = vec![Vec::with_capacity(adds); c];
    let started = Instant::now();
    let mut last = started;
    for k in 0..adds {
        let inst = instance(n + k);
        let id = inst.id.clone();
        let t0 = Instant::now();
        registrar.register(inst).await.map_err(into_curator)?;
        registers.push(micros(t0.elapsed()));
        let mut seen: Vec<Option<Instant>> = vec![None; c];
        let wait = async {
            while seen.iter().any(Option::is_none) {
                let Some((j, added, at)) = rx.recv().await else { return false };
                if added == id {
                    seen[j].get_or_insert(at);
                } else {
                    tracing::warn!(cache = j, instance = %added, expected = %id, "unexpected addition");
                }
            }
            true
        };
        if !tokio::time::timeout(EVENT_DEADLINE, wait).await.unwrap_or(false) {
            let missing: Vec<usize> = (0..c).filter(|j| seen[*j].is_none()).collect();
            return Err(CuratorError::IllegalState(format!("caches {missing:?} never saw {id} added")));
        }
        let times: Vec<Instant> = seen.into_iter().flatten().collect();
        let (Some(earliest), Some(latest)) = (times.iter().min(), times.iter().max()) else { continue };
        first.push(micros(earliest.saturating_duration_since(t0)));
        all.push(micros(latest.saturating_duration_since(t0)));
        for (j, at) in times.iter().enumerate() {
            per_cache[j].push(micros(at.saturating_duration_since(t0)));
        }
        last = *latest;
    }
    let wall = last.saturating_duration_since(started);
    let per_p50: Vec<f64> = per_cache.iter_mut().map(|s| round(percentile(s, 50.0))).collect();
    let per_p99: Vec<f64> = per_cache.iter_mut().map(|s| round(percentile(s, 99.0))).collect();
    let event_line = line(
        "discovery_cache_event",
        c + 1,
        adds,
        wall,
        &mut all,
        json!({
            "instances": n,
            "caches": c,
            "first_cache_p50_us": round(percentile(&mut first, 50.0)),
            "first_cache_p99_us": round(percentile(&mut first, 99.0)),
            "per_cache_p50_us": per_p50,
            "per_cache_p99_us": per_p99,
            "register_p50_us": round(percentile(&mut registers, 50.0)),
            "register_p99_us": round(percentile(&mut registers, 99.0)),
            "listen": args.listen,
        }),
    );

    for cache in &caches {
        cache.close().await;
    }
    for d in &discoveries {
        d.close().await;
    }
    registrar.close().await;
    for fw in cache_fws.iter().chain(std::iter::once(&registrar_fw)) {
        fw.close().await;
    }
    Ok(vec![init_line, event_line])
}

/// Scenario `discovery_scale` (issue 30): one `ServiceCache`'s first load of a service with
/// `--instances N` instances, and what the loaded instances cost in resident memory.
///
/// A registrar framework registers the N instances up front, [`REGISTER_WINDOW`] at a time (not
/// timed). Then the process reads its resident memory (`VmRSS`), one more framework starts a
/// `ServiceCache` of the service, and the sample runs from just before `ServiceCache::start()` to
/// the return of its `ready()`; the memory is read again once the load is done. The line's p50,
/// p99 and `init_us` are that one load; `rss_bytes_per_instance` is the memory's growth over N
/// (the cache's framework and its session included, as Curator's side counts them too).
pub(crate) async fn discovery_scale(args: &Args) -> Result<Vec<String>> {
    let n = args.instances.max(1);
    let base = format!("{}/services", args.path);

    let registrar_fw = crate::client(args).await?;
    let registrar = discovery(&registrar_fw, &base)?;
    register_all(&registrar, n).await?;

    let before = crate::report::memory_kib().0;
    let fw = crate::client(args).await?;
    let d = discovery(&fw, &base)?;
    let cache = d.service_cache_builder(SERVICE).build().map_err(into_curator)?;
    let t0 = Instant::now();
    cache.start().map_err(into_curator)?;
    cache.ready().await.map_err(into_curator)?;
    let load = t0.elapsed();
    let after = crate::report::memory_kib().0;
    let loaded = cache.instances().len();
    if loaded != n {
        return Err(CuratorError::IllegalState(format!("the cache loaded {loaded} instances, not {n}")));
    }
    let load_us = round(micros(load));
    let rss_per = after.saturating_sub(before) as f64 * 1024.0 / n as f64;
    let result = line(
        "discovery_scale",
        1,
        n,
        load,
        &mut [load_us],
        json!({
            "instances": n,
            "init_us": load_us,
            "rss_bytes_per_instance": rss_per.round(),
            "rss_before_bytes": before * 1024,
            "rss_after_bytes": after * 1024,
        }),
    );

    cache.close().await;
    d.close().await;
    registrar.close().await;
    fw.close().await;
    registrar_fw.close().await;
    Ok(vec![result])
}
