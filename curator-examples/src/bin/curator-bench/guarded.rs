//! `guarded_set`: what guarding a write by a hold costs (issue 29), and carrying a write tag too
//! (issue 40). One session holds an `InterProcessMutex` and writes one node `--cycles` times
//! with a plain `set_data`, then as many times with the guard's `set_data` (a multi of the
//! hold's `check` and the write), then as many with a guarded transaction that also bumps a
//! `WriteTag` (so that a lost reply is decided exactly); one result line each (`"write":
//! "plain"`, `"guarded"` or `"guarded_tagged"`), with the latency per write and the requests the
//! server received per write (`zk_packets_received`, read quiet before and after).

use std::time::Instant;

use curator_core::{CuratorFramework, Result, WriteTag};
use curator_recipes::{InterProcessMutex, LockGuard};
use serde_json::json;

use crate::args::Args;
use crate::report::{line, micros, Counter};

/// How a phase writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Plain,
    Guarded,
    GuardedTagged,
}

impl Write {
    fn name(self) -> &'static str {
        match self {
            Write::Plain => "plain",
            Write::Guarded => "guarded",
            Write::GuardedTagged => "guarded_tagged",
        }
    }
}

/// One write of `data` to `path`.
async fn write(
    how: Write,
    fw: &CuratorFramework,
    guard: &LockGuard,
    tag: &WriteTag,
    path: &str,
    data: Vec<u8>,
) -> Result<()> {
    match how {
        Write::Plain => fw.set_data().for_path(path, data).await.map(|_| ()),
        Write::Guarded => guard.set_data(path, data).await.map(|_| ()),
        Write::GuardedTagged => {
            guard.transaction().set_data(path, data, None).with_write_tag(tag).commit().await.map(|_| ())
        }
    }
}

pub(crate) async fn guarded_set(args: &Args) -> Result<Vec<String>> {
    let fw = crate::client(args).await?;
    crate::ensure_path(&fw, &args.path).await?;
    let target = format!("{}/config", args.path);
    fw.create().if_missing().for_path(&target, Vec::new()).await?;
    let tag = WriteTag::new(&fw, &target)?;
    let guard = InterProcessMutex::new(&fw, &format!("{}/lock", args.path))?.acquire().await?;
    let counter = Counter::new(&args.connect);
    let mut lines = Vec::new();
    for how in [Write::Plain, Write::Guarded, Write::GuardedTagged] {
        for i in 0..args.warmup {
            write(how, &fw, &guard, &tag, &target, (i as u64).to_be_bytes().to_vec()).await?;
        }
        let before = counter.quiet().await?;
        let mut samples = Vec::with_capacity(args.cycles);
        let started = Instant::now();
        for i in 0..args.cycles {
            let t = Instant::now();
            write(how, &fw, &guard, &tag, &target, (i as u64).to_be_bytes().to_vec()).await?;
            samples.push(micros(t.elapsed()));
        }
        let wall = started.elapsed();
        let requests = counter.quiet().await?.saturating_sub(before);
        let per_op = requests as f64 / args.cycles.max(1) as f64;
        let extra = json!({"write": how.name(), "requests_per_op": (per_op * 100.0).round() / 100.0});
        lines.push(line("guarded_set", 1, args.cycles, wall, &mut samples, extra));
    }
    guard.release().await?;
    drop(tag);
    fw.close().await;
    Ok(lines)
}
