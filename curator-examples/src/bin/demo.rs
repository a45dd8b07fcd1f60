//! The demo: what the framework is for, in four short parts, on a ZooKeeper it starts itself
//! (or the one `--connect host:port` or `ZK_CONNECT` names).
//!
//! 1. Locking: 30 workers, each its own session, take turns on one `InterProcessMutex` and
//!    increment a counter node under it.
//! 2. Membership: workers join a group with `GroupMember`; a coordinator sees joins and leaves
//!    as they happen, including one whose session is expired on purpose (it comes back by itself).
//! 3. Configuration: a read/write lock guards a config node; readers read concurrently, a writer
//!    updates it, and every reader's `NodeCache` shows the new value.
//! 4. Service discovery: three instances register, a client's provider hands them out round
//!    robin, one instance's process dies and the provider stops returning it.
//!
//! Every check is printed; the exit code is 0 only if all of them held. Everything it creates is
//! under one namespace, deleted at the end.
//!
//! `cargo run -p curator-examples --bin demo [-- --connect host:port]`

use std::process::ExitCode;
use std::time::{Duration, Instant};

use curator_core::{CuratorFramework, Result};
use curator_examples::{connect_arg, Zookeeper};

mod demo_parts;

use demo_parts::{config, discovery, locking, membership, Checks};

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        "info,zookeeper_client=off,curator_core=warn,curator_test=warn,curator_recipes=warn,curator_cache=warn,curator_discovery=warn".into()
    });
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).without_time().compact().try_init();

    let started = Instant::now();
    let zk = match Zookeeper::from_env(connect_arg()).await {
        Ok(zk) => zk,
        Err(e) => {
            tracing::error!("could not start ZooKeeper: {e}");
            return ExitCode::FAILURE;
        }
    };
    if zk.is_embedded() {
        tracing::info!("started an embedded ZooKeeper at {}", zk.connect_string());
    } else {
        tracing::info!("using the ZooKeeper at {}", zk.connect_string());
    }
    let namespace = format!("curator-demo-{:08x}", fastrand::u32(..));
    // Fail fast, within the connection timeout, when nothing answers at the connect string.
    match framework(zk.connect_string(), &namespace, Duration::from_secs(10)).await {
        Ok(probe) => probe.close().await,
        Err(e) => {
            tracing::error!("cannot reach ZooKeeper at {}: {e}", zk.connect_string());
            zk.stop().await;
            return ExitCode::FAILURE;
        }
    }
    let mut checks = Checks::default();
    let outcome = run(zk.connect_string(), &namespace, &mut checks).await;
    if let Err(e) = &outcome {
        checks.record("the demo ran to the end", false, e.to_string());
    }
    if let Err(e) = cleanup(zk.connect_string(), &namespace).await {
        checks.record("nothing left behind", false, e.to_string());
    }
    zk.stop().await;
    let ok = checks.summary(started.elapsed());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn run(connect: &str, namespace: &str, checks: &mut Checks) -> Result<()> {
    tracing::info!("── 1. locking ──");
    locking::run(connect, namespace, checks).await?;
    tracing::info!("── 2. membership ──");
    membership::run(connect, namespace, checks).await?;
    tracing::info!("── 3. configuration ──");
    config::run(connect, namespace, checks).await?;
    tracing::info!("── 4. service discovery ──");
    discovery::run(connect, namespace, checks).await?;
    Ok(())
}

/// How long the demo waits for a connection before it gives up.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// A started framework under the demo's namespace.
pub(crate) async fn framework(connect: &str, namespace: &str, session_timeout: Duration) -> Result<CuratorFramework> {
    let fw = CuratorFramework::builder()
        .connect_string(connect)
        .namespace(namespace)
        .session_timeout(session_timeout)
        .connection_timeout(CONNECTION_TIMEOUT)
        .build()?;
    fw.start()?;
    fw.block_until_connected(CONNECTION_TIMEOUT).await?;
    Ok(fw)
}

/// Deletes the demo's namespace and everything under it.
async fn cleanup(connect: &str, namespace: &str) -> Result<()> {
    let fw = framework(connect, namespace, Duration::from_secs(10)).await?;
    let root = fw.using_namespace(None)?;
    root.delete().deleting_children_if_needed().quietly().for_path(&format!("/{namespace}")).await?;
    let left = root.check_exists().for_path(&format!("/{namespace}")).await?;
    fw.close().await;
    match left {
        None => Ok(()),
        Some(_) => Err(curator_core::CuratorError::IllegalState(format!("/{namespace} still exists"))),
    }
}
