//! `curator-bench`: our side of the side-by-side benchmark harness (`../shared/bench/run.sh`,
//! `RUST_BENCH_CMD=target/release/curator-bench`). It follows the harness's contract: `--key
//! value` arguments, one JSON object per result line on stdout, logs on stderr, exit 3 for an
//! unknown scenario. Every client is its own session, and everything goes through the project's
//! public API, as a user would write it.
//!
//! Scenarios: `raw_sync`, `raw_async`, `raw_versioned`, `lock`, `rwlock`, `children_cache`, `tree_cache` (the
//! harness's), and ours: `waiters` (one framework, `--clients N` acquirers of one mutex as
//! tasks), `cache_memory` (resident memory with `--children C` cached), `group_leave`
//! (`--members M --observers O` GroupMembers, each its own session: from a member's session
//! ending to every observer's leave event; see group.rs) and `discovery_cache` (`--instances N
//! --caches C --adds A`: a `ServiceCache`'s first load of N instances, and a registration's way
//! to every cache; see discovery.rs) and `leader_failover` (`--participants N --handoffs H`
//! `LeaderLatch`es, each its own session: from the leader's `close()` to the next leader's
//! is-leader event; see leader.rs) and `atomic_increments` (`--sessions S --increments I` or
//! `--seconds D`: a `DistributedAtomicLong` incremented by S sessions in optimistic mode; see
//! atomic.rs) and `queue` (`--consumers C --items N --item-size B --mode plain|lock-safe`: one
//! producer and C consumer sessions on one `DistributedQueue`, items per second put and taken;
//! see queue.rs) and `guarded_set` (`--cycles N`: one session writes a node N times with a
//! plain `set_data`, then N times with a mutex guard's guarded `set_data`; latency and requests
//! per write of each; see guarded.rs) and `discovery_scale` (`--instances N`: one `ServiceCache`'s
//! load time and resident memory per instance; see discovery.rs) and `sessions` (`--clients N`
//! frameworks in one process, each holding a lock node and a `NodeCache`: connect time, resident
//! memory and threads per framework; see sessions.rs). Not a scenario: `--scenario serve [--force-sync no]`
//! starts a throwaway ZooKeeper (curator-test's `TestingServer`), prints its connect string and
//! stops it when stdin closes (scripts/bench-group, scripts/bench-discovery, scripts/bench-leader,
//! scripts/bench-atomic and scripts/bench-queue use it).

mod alloc;
mod args;
mod atomic;
mod cache;
mod discovery;
mod group;
mod guarded;
mod leader;
mod locks;
mod queue;
mod raw;
mod report;
mod sessions;

use std::process::ExitCode;
use std::time::Duration;

use args::Args;
use curator_core::ExponentialBackoffRetry;
use curator_core::{CreateMode, CuratorFramework, Result};

/// Counts live heap bytes for the cache scenarios' memory per node (alloc.rs).
#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Exit code for a scenario we do not know.
const UNSUPPORTED: u8 = 3;

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CURATOR_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("curator-bench: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = if args.current_thread {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("curator-bench: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match args.scenario.as_str() {
            "raw_sync" => raw::raw_sync(&args).await.map(Some),
            "raw_async" => raw::raw_async(&args).await.map(Some),
            "raw_versioned" => raw::raw_versioned(&args).await.map(Some),
            "lock" => locks::lock(&args).await.map(Some),
            "rwlock" => locks::rwlock(&args).await.map(Some),
            "waiters" => locks::waiters(&args).await.map(Some),
            "children_cache" => cache::children_cache(&args).await.map(Some),
            "tree_cache" => cache::tree_cache(&args).await.map(Some),
            "cache_memory" => cache::cache_memory(&args).await.map(Some),
            "group_leave" => group::group_leave(&args).await.map(Some),
            "discovery_cache" => discovery::discovery_cache(&args).await.map(Some),
            "discovery_scale" => discovery::discovery_scale(&args).await.map(Some),
            "sessions" => sessions::sessions(&args).await.map(Some),
            "leader_failover" => leader::leader_failover(&args).await.map(Some),
            "atomic_increments" => atomic::atomic_increments(&args).await.map(Some),
            "queue" => queue::queue(&args).await.map(Some),
            "guarded_set" => guarded::guarded_set(&args).await.map(Some),
            "serve" => serve(&args).await.map(|()| Some(Vec::new())),
            _ => Ok(None),
        }
    });
    match result {
        Ok(Some(lines)) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("curator-bench: unsupported scenario {:?}", args.scenario);
            ExitCode::from(UNSUPPORTED)
        }
        Err(e) => {
            eprintln!("curator-bench: {} failed: {e}", args.scenario);
            ExitCode::FAILURE
        }
    }
}

/// Starts a standalone ZooKeeper like the shared harness's (`tickTime=2000`, fsync unless
/// `--force-sync no`), prints its connect string, and stops it once stdin is closed.
async fn serve(args: &Args) -> Result<()> {
    let mut server = curator_test::TestingServer::builder()
        .tick_time(Duration::from_secs(2))
        .force_sync(args.force_sync)
        .start()
        .await
        .map_err(|e| curator_core::CuratorError::IllegalState(format!("no ZooKeeper: {e}")))?;
    println!("{}", server.connect_string());
    eprintln!(
        "curator-bench: ZooKeeper at {} (forceSync={}), pid {:?}",
        server.connect_string(),
        args.force_sync,
        server.pid()
    );
    let mut sink = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    let _ = server.stop().await;
    Ok(())
}

/// A started, connected framework: one session, as each benchmark client is.
pub(crate) async fn client(args: &Args) -> Result<CuratorFramework> {
    let fw = CuratorFramework::builder()
        .connect_string(&args.connect)
        .session_timeout(Duration::from_secs(30))
        .connection_timeout(Duration::from_secs(15))
        .retry_policy(ExponentialBackoffRetry::new(Duration::from_millis(100), 5))
        .build()?;
    fw.start()?;
    fw.block_until_connected(Duration::from_secs(30)).await?;
    Ok(fw)
}

/// `n` clients, connected concurrently.
pub(crate) async fn clients(args: &Args, n: usize) -> Result<Vec<CuratorFramework>> {
    futures::future::try_join_all((0..n).map(|_| client(args))).await
}

/// Creates `path` and its parents (persistent), as the harness allows.
pub(crate) async fn ensure_path(fw: &CuratorFramework, path: &str) -> Result<()> {
    match fw.create().creating_parents_if_needed().with_mode(CreateMode::Persistent).for_path(path, Vec::new()).await {
        Ok(_) | Err(curator_core::CuratorError::NodeExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
