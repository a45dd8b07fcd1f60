//! `raw_sync` and `raw_async`: create(EPHEMERAL_SEQUENTIAL) + delete pairs on the session's raw
//! client (`Session::client`), the limit every recipe is measured against. `raw_versioned`: the
//! limit of any counter kept in one node, however many clients share it (`atomic_increments`).

use std::time::Instant;

use curator_core::zk::{Acls, Client, CreateMode};
use curator_core::{CuratorError, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;

use crate::args::Args;
use crate::report::{line, micros};

pub(crate) async fn raw_sync(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let session = fw.session().await?;
    let client = session.client();
    let prefix = format!("{}/n-", args.path);
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let zk = |e| CuratorError::from_zk(&prefix, e);
    let mut samples = Vec::with_capacity(args.cycles);
    let mut started = Instant::now();
    for i in 0..args.warmup + args.cycles {
        if i == args.warmup {
            started = Instant::now();
        }
        let t = Instant::now();
        let (_, seq) = client.create(&prefix, &[], &options).await.map_err(zk)?;
        client.delete(&format!("{prefix}{seq}"), None).await.map_err(zk)?;
        if i >= args.warmup {
            samples.push(micros(t.elapsed()));
        }
    }
    let wall = started.elapsed();
    drop(session); // a Session must not outlive its use: close() ends the session when it is gone
    fw.close().await;
    Ok(vec![line("raw_sync", 1, args.cycles, wall, &mut samples, json!({}))])
}

/// `raw_versioned`: one session writes an 8-byte counter node at the version its previous
/// write returned, one write after the other (`--cycles` of them): no read, no conflict, one
/// request and one round trip per increment. No client of a counter in one versioned node can
/// make more increments per second than this: each successful write names the version the
/// previous one made, so it is sent only once the previous one is committed and its new version
/// known to the writer (a reply, as here, or a read, which is no sooner); the server commits them
/// one by one, each with its own fsync under forceSync=yes. `atomic_increments` at any number of
/// sessions is bounded by this scenario's rate on the same server.
pub(crate) async fn raw_versioned(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let session = fw.session().await?;
    let client = session.client();
    let path = format!("{}/counter", args.path);
    let zk = |e| CuratorError::from_zk(&path, e);
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let (stat, _) = client.create(&path, &0i64.to_be_bytes(), &options).await.map_err(zk)?;
    let (mut value, mut version) = (0i64, stat.version);
    let mut samples = Vec::with_capacity(args.cycles);
    let mut started = Instant::now();
    for i in 0..args.warmup + args.cycles {
        if i == args.warmup {
            started = Instant::now();
        }
        let t = Instant::now();
        value += 1;
        version = client.set_data(&path, &value.to_be_bytes(), Some(version)).await.map_err(zk)?.version;
        if i >= args.warmup {
            samples.push(micros(t.elapsed()));
        }
    }
    let wall = started.elapsed();
    drop(session);
    fw.close().await;
    Ok(vec![line("raw_versioned", 1, args.cycles, wall, &mut samples, json!({}))])
}

pub(crate) async fn raw_async(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let session = fw.session().await?;
    let prefix = format!("{}/n-", args.path);
    let mut warm = Vec::new();
    pipelined(session.client(), &prefix, args.warmup, args.window, &mut warm).await?;
    let mut samples = Vec::with_capacity(args.cycles);
    let started = Instant::now();
    pipelined(session.client(), &prefix, args.cycles, args.window, &mut samples).await?;
    let wall = started.elapsed();
    drop(session);
    fw.close().await;
    Ok(vec![line("raw_async", 1, args.cycles, wall, &mut samples, json!({"window": args.window}))])
}

/// `n` create+delete pairs with at most `window` in flight; each delete is issued from its
/// create's completion. Samples run from the create's issue to the delete's completion.
async fn pipelined(client: &Client, prefix: &str, n: usize, window: usize, samples: &mut Vec<f64>) -> Result<()> {
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let pair = |t: Instant| {
        let create = client.create(prefix, &[], &options);
        async move {
            let (_, seq) = create.await.map_err(|e| CuratorError::from_zk(prefix, e))?;
            let path = format!("{prefix}{seq}");
            client.delete(&path, None).await.map_err(|e| CuratorError::from_zk(&path, e))?;
            Ok::<_, CuratorError>(micros(t.elapsed()))
        }
    };
    let mut in_flight = FuturesUnordered::new();
    let mut issued = 0;
    while issued < n || !in_flight.is_empty() {
        while issued < n && in_flight.len() < window {
            in_flight.push(pair(Instant::now()));
            issued += 1;
        }
        if let Some(done) = in_flight.next().await {
            samples.push(done?);
        }
    }
    Ok(())
}
