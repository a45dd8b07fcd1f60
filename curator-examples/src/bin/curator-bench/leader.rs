//! Leader election scenario `leader_failover`: how long the next leader takes to learn that it
//! leads once the leader closes.
//!
//! `--participants N` participants (2 by default; ids `p-<i>`), each a `LeaderLatch` on a
//! framework of its own (its own session), join `<path>/election` one after the other, so
//! `p-000` leads first. Then, `--handoffs H` times (100 by default): the leader closes its latch;
//! a sample runs from just before `close()` to the moment the next participant's listener hears
//! `LatchEvent::IsLeader`. The closed participant then rejoins with a new latch on the same
//! framework (at the end of the line), so N take part in every handoff.
//!
//! Server requests per handoff: the server's `zk_packets_received` (the `mntr` four-letter
//! word, less the `mntr` readings themselves, which the server counts too), read once the
//! server has been quiet for 10 ms before the close and again once it is quiet after the new
//! leader's event; the rejoin falls outside. Requests per cycle count the rejoin too: from the
//! same reading before the close to one once the server is quiet after the rejoin (a latch's
//! join costs more than its handoff when it watches every node ahead, docs/architecture.md
//! section 8.3); that reading also keeps the rejoin's requests out of the next handoff's count.
//! The Java side (`bench/java/LeaderBench.java`) does
//! the same with Curator's `LeaderLatch`. Besides the contract's keys the line carries the
//! median and mean requests per handoff and how long `close()` took.

use std::time::{Duration, Instant};

use curator_core::{CuratorError, CuratorFramework, Result};
use curator_recipes::{LatchEvent, LeaderLatch};
use serde_json::json;
use tokio::sync::mpsc;

use crate::args::Args;
use crate::report::{line, micros, percentile, round, Counter};

/// How long a handoff may take before the run fails.
const HANDOFF_DEADLINE: Duration = Duration::from_secs(30);

/// Becoming leader, as a listener heard it: (participant, when).
type Elected = (usize, Instant);

fn participant_id(i: usize) -> String {
    format!("p-{i:03}")
}

/// Starts participant `i`'s latch on `fw`; returns once its node is in line.
async fn join(fw: &CuratorFramework, dir: &str, i: usize, tx: &mpsc::UnboundedSender<Elected>) -> Result<LeaderLatch> {
    let tx = tx.clone();
    let latch = LeaderLatch::builder(fw, dir)
        .id(participant_id(i))
        .listener(move |event: &LatchEvent| {
            if let LatchEvent::IsLeader(_) = event {
                let _ = tx.send((i, Instant::now()));
            }
        })
        .build()?;
    latch.start()?;
    latch.ready().await?; // in line: participants join in order
    Ok(latch)
}

/// The next election of a participant other than `previous`.
async fn elected(rx: &mut mpsc::UnboundedReceiver<Elected>, previous: Option<usize>) -> Result<Elected> {
    let wait = async {
        while let Some((i, at)) = rx.recv().await {
            if Some(i) != previous {
                return Some((i, at));
            }
        }
        None
    };
    tokio::time::timeout(HANDOFF_DEADLINE, wait)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| CuratorError::IllegalState(format!("no new leader within {HANDOFF_DEADLINE:?}")))
}

pub(crate) async fn leader_failover(args: &Args) -> Result<Vec<String>> {
    let (n, h) = (args.participants.max(2), args.handoffs.max(1));
    let dir = format!("{}/election", args.path);
    let counter = Counter::new(&args.connect);

    let fws = crate::clients(args, n).await?;
    crate::ensure_path(&fws[0], &dir).await?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Elected>();
    let mut latches = Vec::with_capacity(n);
    for (i, fw) in fws.iter().enumerate() {
        latches.push(join(fw, &dir, i, &tx).await?);
    }
    if elected(&mut rx, None).await?.0 != 0 {
        return Err(CuratorError::IllegalState(format!("{} should lead first", participant_id(0))));
    }

    let mut leader = 0;
    let mut samples = Vec::with_capacity(h);
    let mut closes = Vec::with_capacity(h);
    let mut requests = Vec::with_capacity(h);
    let mut cycles = Vec::with_capacity(h);
    for _ in 0..h {
        let p0 = counter.quiet().await?;
        let t0 = Instant::now();
        latches[leader].close().await;
        closes.push(micros(t0.elapsed()));
        let (next, at) = elected(&mut rx, Some(leader)).await?;
        samples.push(micros(at.saturating_duration_since(t0)));
        requests.push(counter.quiet().await?.saturating_sub(p0) as f64);
        latches[leader] = join(&fws[leader], &dir, leader, &tx).await?; // at the end of the line
        cycles.push(counter.quiet().await?.saturating_sub(p0) as f64);
        leader = next;
    }

    let wall = Duration::from_secs_f64(samples.iter().sum::<f64>() / 1e6);
    let mean_requests = requests.iter().sum::<f64>() / h as f64;
    let mean_cycle = cycles.iter().sum::<f64>() / h as f64;
    let extra = json!({
        "participants": n,
        "handoffs": h,
        "requests_per_handoff_p50": percentile(&mut requests, 50.0),
        "requests_per_handoff_mean": (mean_requests * 100.0).round() / 100.0,
        "requests_per_cycle_p50": percentile(&mut cycles, 50.0),
        "requests_per_cycle_mean": (mean_cycle * 100.0).round() / 100.0,
        "close_p50_us": round(percentile(&mut closes, 50.0)),
        "close_p99_us": round(percentile(&mut closes, 99.0)),
    });
    let result = line("leader_failover", n, h, wall, &mut samples, extra);

    for latch in &latches {
        latch.close().await;
    }
    for fw in &fws {
        fw.close().await;
    }
    Ok(vec![result])
}
