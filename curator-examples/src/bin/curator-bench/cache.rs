//! Cache scenarios: `children_cache` (PathChildrenCache with data), `tree_cache` (CuratorCache,
//! recursive), and ours, `cache_memory` (resident memory with `--children C` cached).
//!
//! A writer session creates C children of 100 bytes before the cache starts (`tree_cache`
//! spreads them over `--parents P` children of the cached node); the init time runs from
//! `start()` to the initialized event, and the init line carries the memory the cache grew by,
//! per node: resident (`rss_bytes_per_node`) and live heap (`heap_bytes_per_node`, counted by
//! alloc.rs: the counterpart of the Java peer's used heap after a collection). Then the writer
//! creates M children one at a time; each event latency runs from just before its `create()`
//! to the cache's add callback. Everything the scenario made is deleted at the end, so that a
//! series of runs does not grow the server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use curator_cache::{
    ChildData, CuratorCache, CuratorCacheListenerBuilder, PathChildrenCache, PathChildrenCacheEvent, StartMode,
};
use curator_core::zk::{Acls, CreateMode};
use curator_core::{CuratorError, CuratorFramework, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;

use crate::alloc::live_bytes;
use crate::args::Args;
use crate::report::{line, memory_kib, micros, percentile, round};

/// Creates in flight while filling the cache's parent.
const FILL_WINDOW: usize = 1000;
const DATA_LEN: usize = 100;

/// Which cache a scenario runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Children,
    Tree,
}

/// A started cache and how its events reach us: `Some(name)` for an add, `None` for initialized.
enum Running {
    Children(PathChildrenCache),
    Tree(CuratorCache),
}

impl Running {
    async fn close(&self) {
        match self {
            Running::Children(c) => c.close().await,
            Running::Tree(c) => c.close().await,
        }
    }
}

fn name_of(d: &ChildData) -> String {
    d.name().to_string()
}

async fn start(
    fw: &CuratorFramework,
    kind: Kind,
    dir: &str,
) -> Result<(Running, mpsc::UnboundedReceiver<(Option<String>, Instant)>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let running = match kind {
        Kind::Children => {
            let cache = PathChildrenCache::new(fw, dir, true)?;
            cache.add_listener(move |e: &PathChildrenCacheEvent| match e {
                PathChildrenCacheEvent::ChildAdded(d) => drop(tx.send((Some(name_of(d)), Instant::now()))),
                PathChildrenCacheEvent::Initialized(_) => drop(tx.send((None, Instant::now()))),
                _ => {}
            });
            cache.start(StartMode::PostInitializedEvent)?;
            Running::Children(cache)
        }
        Kind::Tree => {
            let cache = CuratorCache::build(fw, dir, &[])?;
            let init = tx.clone();
            cache.add_listener(
                CuratorCacheListenerBuilder::new()
                    .for_creates(move |d| drop(tx.send((Some(name_of(d)), Instant::now()))))
                    .for_initialized(move || drop(init.send((None, Instant::now()))))
                    .build(),
            );
            cache.start()?;
            Running::Tree(cache)
        }
    };
    Ok((running, rx))
}

/// Creates `n` nodes of 100 bytes under `dir`, pipelined: children of `dir` itself when
/// `parents` is 1, else spread evenly over `parents` children of `dir` (`p-000`, ...), so no
/// listing comes near the server's packet limit at 50,000 nodes. Paths are made as they are
/// sent, so the fill leaves no large free heap behind for the cache to reuse unmeasured.
async fn fill(writer: &CuratorFramework, dir: &str, n: usize, parents: usize) -> Result<()> {
    let session = writer.session().await?;
    let client = session.client();
    let data = [b'x'; DATA_LEN];
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let parent_of = |i: usize| if parents > 1 { format!("{dir}/p-{:03}", i % parents) } else { dir.to_string() };
    let dirs = if parents > 1 { parents } else { 0 };
    let mut in_flight = FuturesUnordered::new();
    for i in 0..dirs + n {
        if in_flight.len() >= FILL_WINDOW {
            if let Some(r) = in_flight.next().await {
                r?;
            }
        }
        let (path, bytes) = if i < dirs {
            (parent_of(i), &[][..])
        } else {
            (format!("{}/pre-{:06}", parent_of(i - dirs), i - dirs), &data[..])
        };
        let (client, options) = (&client, &options);
        in_flight.push(async move {
            client.create(&path, bytes, options).await.map(drop).map_err(|e| CuratorError::from_zk(&path, e))
        });
    }
    while let Some(r) = in_flight.next().await {
        r?;
    }
    Ok(())
}

/// Deletes `dir` and everything below it (the `p-` parents' children too, as `fill` makes
/// them), deletes pipelined, so that a series of runs leaves the server no bigger than one run
/// does. Only the parents are listed: a listing of every leaf would double the requests.
async fn clear(writer: &CuratorFramework, dir: &str) -> Result<()> {
    let session = writer.session().await?;
    let client = session.client();
    let zk = |path: &str, e| CuratorError::from_zk(path, e);
    let names = client.list_children(dir).await.map_err(|e| zk(dir, e))?;
    let children: Vec<String> = names.iter().map(|n| format!("{dir}/{n}")).collect();
    let mut leaves = Vec::new();
    for (name, path) in names.iter().zip(&children) {
        if name.starts_with("p-") {
            let below = client.list_children(path).await.map_err(|e| zk(path, e))?;
            leaves.extend(below.into_iter().map(|n| format!("{path}/{n}")));
        }
    }
    for paths in [leaves, children, vec![dir.to_string()]] {
        let mut in_flight = FuturesUnordered::new();
        for path in &paths {
            if in_flight.len() >= FILL_WINDOW {
                if let Some(r) = in_flight.next().await {
                    r?;
                }
            }
            let client = &client;
            in_flight.push(async move { client.delete(path, None).await.map_err(|e| zk(path, e)) });
        }
        while let Some(r) = in_flight.next().await {
            r?;
        }
    }
    Ok(())
}

async fn wait_init(rx: &mut mpsc::UnboundedReceiver<(Option<String>, Instant)>) -> Result<Instant> {
    let wait = async {
        while let Some((name, at)) = rx.recv().await {
            if name.is_none() {
                return Some(at);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(300), wait)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| CuratorError::IllegalState("the cache never reported initialized".into()))
}

async fn cache_scenario(args: &Args, kind: Kind, scenario: &str) -> Result<Vec<String>> {
    let writer = crate::client(args).await?;
    let fw = crate::client(args).await?;
    let dir = format!("{}/cache", args.path);
    crate::ensure_path(&writer, &dir).await?;
    let parents = if kind == Kind::Tree { args.parents } else { 1 };
    fill(&writer, &dir, args.children, parents).await?;

    let (before, _) = memory_kib();
    let heap_before = live_bytes();
    let started = Instant::now();
    let (cache, mut rx) = start(&fw, kind, &dir).await?;
    let initialized = wait_init(&mut rx).await?;
    let init = initialized - started;
    let (after, peak) = memory_kib();
    let heap = live_bytes() - heap_before;
    let nodes = args.children.max(1) as f64;
    let per_node = after.saturating_sub(before) as f64 * 1024.0 / nodes;
    let mut init_samples = vec![micros(init)];
    let extra = json!({
        "children": args.children, "parents": parents, "rss_bytes_per_node": per_node.round(),
        "heap_bytes_per_node": (heap as f64 / nodes).round(),
        "rss_before_kib": before, "rss_after_kib": after, "peak_rss_kib": peak,
    });
    let init_line = line(&format!("{scenario}_init"), 1, args.children, init, &mut init_samples, extra);

    // Adds, one at a time; the events are matched by name.
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let data = vec![b'y'; DATA_LEN];
    let mut first = None;
    let mut creates = Vec::with_capacity(args.adds);
    for i in 0..args.adds {
        let name = format!("add-{i:06}");
        let t = Instant::now();
        first.get_or_insert(t);
        sent.lock().map_err(|_| CuratorError::IllegalState("poisoned".into()))?.insert(name.clone(), t);
        writer.create().for_path(&format!("{dir}/{name}"), data.clone()).await?;
        creates.push(micros(t.elapsed()));
    }
    let mut latencies = Vec::with_capacity(args.adds);
    let mut last = Instant::now();
    let collect = async {
        while latencies.len() < args.adds {
            let Some((Some(name), at)) = rx.recv().await else { continue };
            let Some(t) = sent.lock().ok().and_then(|m| m.get(&name).copied()) else { continue };
            latencies.push(micros(at.saturating_duration_since(t)));
            last = at;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), collect)
        .await
        .map_err(|_| CuratorError::IllegalState("not every add reached the cache".into()))?;
    let span = last.saturating_duration_since(first.unwrap_or(last));
    // The writer's create alone: what of an event's latency is the server's, not the cache's.
    let extra = json!({"children": args.children, "create_p50_us": round(percentile(&mut creates, 50.0))});
    let event_line = line(&format!("{scenario}_event"), 1, args.adds, span, &mut latencies, extra);
    cache.close().await;
    fw.close().await;
    clear(&writer, &dir).await?;
    writer.close().await;
    Ok(vec![init_line, event_line])
}

pub(crate) async fn children_cache(args: &Args) -> Result<Vec<String>> {
    cache_scenario(args, Kind::Children, "children_cache").await
}

pub(crate) async fn tree_cache(args: &Args) -> Result<Vec<String>> {
    cache_scenario(args, Kind::Tree, "tree_cache").await
}

/// Resident memory of a PathChildrenCache and a CuratorCache holding `--children` children of
/// 100 bytes, measured as the growth of this process's RSS from before the cache started.
pub(crate) async fn cache_memory(args: &Args) -> Result<Vec<String>> {
    let writer = crate::client(args).await?;
    let dir = format!("{}/cache", args.path);
    crate::ensure_path(&writer, &dir).await?;
    fill(&writer, &dir, args.children, 1).await?;
    let mut lines = Vec::new();
    for (kind, name) in [(Kind::Children, "children_cache"), (Kind::Tree, "tree_cache")] {
        let fw = crate::client(args).await?;
        let (before, _) = memory_kib();
        let started = Instant::now();
        let (cache, mut rx) = start(&fw, kind, &dir).await?;
        let initialized = wait_init(&mut rx).await?;
        let (after, peak) = memory_kib();
        let grown = after.saturating_sub(before);
        let per_10k = grown as f64 * 10_000.0 / args.children.max(1) as f64;
        let init = initialized - started;
        let mut s = vec![micros(init)];
        lines.push(line(
            "cache_memory",
            1,
            args.children,
            init,
            &mut s,
            json!({"cache": name, "rss_growth_kib": grown, "kib_per_10k_children": per_10k.round(), "peak_rss_kib": peak}),
        ));
        cache.close().await;
        fw.close().await;
    }
    clear(&writer, &dir).await?;
    writer.close().await;
    Ok(lines)
}
