//! `guarded_set`: what guarding a write by a hold costs (issue 29). One session holds an
//! `InterProcessMutex` and writes one node `--cycles` times with a plain `set_data`, then as
//! many times with the guard's `set_data` (a multi of the hold's `check` and the write); one
//! result line each (`"write": "plain"` or `"guarded"`), with the latency per write and the
//! requests the server received per write (`zk_packets_received`, read quiet before and after).

use std::time::Instant;

use curator_core::{CreateMode, CuratorError, CuratorFramework, Result};
use curator_recipes::{InterProcessMutex, LockGuard};
use serde_json::json;

use crate::args::Args;
use crate::report::{line, micros, Counter};

/// How a phase writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Plain,
    Guarded,
}

/// One write of `data` to `path`.
async fn write(how: Write, fw: &CuratorFramework, guard: &LockGuard, path: &str, data: Vec<u8>) -> Result<()> {
    match how {
        Write::Plain => fw.set_data().for_path(path, data).await.map(|_| ()),
        Write::Guarded => guard.set_data(path, data).await.map(|_| ()),
    }
}

pub(crate) async fn guarded_set(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let target = format!("{}/config", args.path);
    match fw.create().with_mode(CreateMode::Persistent).for_path(&target, Vec::new()).await {
        Ok(_) | Err(CuratorError::NodeExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let guard = InterProcessMutex::new(&fw, &format!("{}/lock", args.path))?.acquire().await?;
    let counter = Counter::new(&args.connect);
    let mut lines = Vec::new();
    for how in [Write::Plain, Write::Guarded] {
        for i in 0..args.warmup {
            write(how, &fw, &guard, &target, (i as u64).to_be_bytes().to_vec()).await?;
        }
        let before = counter.quiet().await?;
        let mut samples = Vec::with_capacity(args.cycles);
        let started = Instant::now();
        for i in 0..args.cycles {
            let t = Instant::now();
            write(how, &fw, &guard, &target, (i as u64).to_be_bytes().to_vec()).await?;
            samples.push(micros(t.elapsed()));
        }
        let wall = started.elapsed();
        let requests = counter.quiet().await?.saturating_sub(before);
        let per_op = requests as f64 / args.cycles.max(1) as f64;
        let name = if how == Write::Plain { "plain" } else { "guarded" };
        let extra = json!({"write": name, "requests_per_op": (per_op * 100.0).round() / 100.0});
        lines.push(line("guarded_set", 1, args.cycles, wall, &mut samples, extra));
    }
    guard.release().await?;
    fw.close().await;
    Ok(lines)
}
