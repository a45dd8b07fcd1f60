//! Queue scenario `queue`: items per second put and taken through one `DistributedQueue`, one
//! producer and C consumers (issue 17).
//!
//! `--consumers C` consumer sessions (4 by default), each a framework of its own with its own
//! started `DistributedQueue` on `<path>/queue` with a consumer, and one producer session with a
//! producer-only queue on the same path. `--mode plain` (the default) or `--mode lock-safe`
//! (Curator's `lockPath` mode, lock path `<path>/locks`). Items are UTF-8 text of
//! `--item-size` bytes (64 by default): `<sequence number>:<put time in ns>:` padded with `.`,
//! the put time taken just before `put` is called, on a clock shared by producer and consumers
//! (one process). The producer first puts `--warmup-items W` untimed items (20 by default) and
//! waits for them to be consumed; then, once the server is quiet, it puts `--items N` items
//! (2,000 by default) one after the other, each `put` returning once its node is created, while
//! the consumers take them.
//!
//! The line: `put_items_per_s` is N over the time from the first timed put's start to the last
//! put's return (the producer alone, with `put_p50_us` / `put_p99_us` per `put` call);
//! `taken_items_per_s` (also `ops_per_s`) is N over the time from the first timed put's start to
//! the last timed item's consumption; `p50_us` / `p99_us` are end to end, from an item's put time
//! to its consumer being called with it; `requests_per_item` is the server's requests (`mntr`'s
//! `zk_packets_received`, read once the server is quiet before the first timed put and again
//! after the last item is consumed) per timed item, all sessions together. Correctness, over all
//! items, warm-up included: `missing` (never consumed; the wait ends when no item came for
//! [`STALL`]), `delivered_twice` (extra deliveries, counted again after the queues are closed),
//! `left_in_queue` (item nodes still there at the end) and `queue_events` (errors, bad items,
//! failed consumers and lost locks reported by the queues). Plain mode promises at most once, so
//! an item delivered twice fails the run; lock-safe mode promises exactly once, so a missing item
//! or a node left behind fails it too. A failed check is an error exit. The Java side is
//! `bench/java/QueueBench.java`, Curator 5.4's `DistributedQueue`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::{CuratorError, Result};
use curator_recipes::{ConsumerError, DistributedQueue, QueueEvent, StringSerializer};
use serde_json::json;
use tokio::sync::mpsc;

use crate::args::Args;
use crate::report::{line, micros, percentile, round, Counter};

/// The wait for items ends once none came for this long.
const STALL: Duration = Duration::from_secs(30);

/// One delivery of an item to a consumer.
struct Taken {
    seq: usize,
    /// The item's put time and the time its consumer was called, ns since the run's origin.
    put_ns: u64,
    taken_ns: u64,
}

/// The item `seq` put at `put_ns`, padded to `size` bytes (or longer if its header is).
fn item(seq: usize, put_ns: u64, size: usize) -> String {
    let mut text = format!("{seq}:{put_ns}:");
    text.push_str(&".".repeat(size.saturating_sub(text.len())));
    text
}

/// The sequence number and put time of an item.
fn parse(item: &str) -> Option<(usize, u64)> {
    let mut fields = item.split(':');
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Every delivery so far, per item.
struct Deliveries {
    /// Per item: its first delivery's (put, taken) ns, and how many deliveries.
    first: Vec<Option<(u64, u64)>>,
    count: Vec<u32>,
    distinct: usize,
}

impl Deliveries {
    fn new(total: usize) -> Self {
        Self { first: vec![None; total], count: vec![0; total], distinct: 0 }
    }

    fn add(&mut self, t: Taken) {
        let Some(count) = self.count.get_mut(t.seq) else { return };
        *count += 1;
        if *count == 1 {
            self.first[t.seq] = Some((t.put_ns, t.taken_ns));
            self.distinct += 1;
        }
    }

    /// Receives until the items `range` were all delivered, or none came for [`STALL`].
    async fn wait_for(&mut self, rx: &mut mpsc::UnboundedReceiver<Taken>, range: std::ops::Range<usize>) {
        while self.count[range.clone()].contains(&0) {
            match tokio::time::timeout(STALL, rx.recv()).await {
                Ok(Some(t)) => self.add(t),
                Ok(None) | Err(_) => return,
            }
        }
    }
}

fn nanos(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

pub(crate) async fn queue(args: &Args) -> Result<Vec<String>> {
    let lock_safe = match args.mode.as_str() {
        "" | "plain" => false,
        "lock-safe" => true,
        other => {
            let reason = format!("--mode {other}: want plain or lock-safe");
            return Err(CuratorError::InvalidArgument { path: args.path.clone(), reason });
        }
    };
    let mode = if lock_safe { "lock-safe" } else { "plain" };
    let consumers = args.consumers.max(1);
    let (warm, timed) = (args.warmup_items, args.items.max(1));
    let total = warm + timed;
    let queue_path = format!("{}/queue", args.path);
    let lock_path = format!("{}/locks", args.path);
    let server = Counter::new(&args.connect);
    let origin = Instant::now();

    let fws = crate::clients(args, consumers + 1).await?;
    let producer = DistributedQueue::builder(&fws[0], &queue_path, StringSerializer).build()?;
    producer.start()?;
    producer.ready().await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let events = Arc::new(AtomicU64::new(0));
    let mut queues = Vec::with_capacity(consumers);
    for fw in &fws[1..] {
        let tx = tx.clone();
        let mut builder = DistributedQueue::builder(fw, &queue_path, StringSerializer).consumer(move |item: String| {
            let taken_ns = nanos(origin);
            let sent = match parse(&item) {
                Some((seq, put_ns)) => tx.send(Taken { seq, put_ns, taken_ns }).map_err(|_| "the run is over".into()),
                None => Err(ConsumerError::from(format!("not a benchmark item: {item:?}"))),
            };
            std::future::ready(sent)
        });
        if lock_safe {
            builder = builder.lock_path(&lock_path);
        }
        let queue = builder.build()?;
        let counted = events.clone();
        queue.add_listener(move |event| {
            if !matches!(event, QueueEvent::Consumed { .. }) {
                tracing::warn!(?event, "curator-bench: queue event");
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        queue.start()?;
        queue.ready().await?;
        queues.push(queue);
    }
    drop(tx);

    // Warm-up: untimed items, all consumed before the timed phase.
    let mut seen = Deliveries::new(total);
    for seq in 0..warm {
        producer.put(&item(seq, nanos(origin), args.item_size)).await?;
    }
    seen.wait_for(&mut rx, 0..warm).await;

    let p0 = server.quiet().await?;
    let mut put_latencies = Vec::with_capacity(timed);
    let first_put = nanos(origin);
    for seq in warm..total {
        let t0 = Instant::now();
        producer.put(&item(seq, nanos(origin), args.item_size)).await?;
        put_latencies.push(micros(t0.elapsed()));
    }
    let last_put = nanos(origin);
    seen.wait_for(&mut rx, warm..total).await;
    let p1 = server.quiet().await?;

    // Late deliveries (a second one of an item) would come before the queues are closed.
    for queue in &queues {
        queue.close().await;
    }
    producer.close().await;
    drop(queues);
    while let Ok(t) = rx.try_recv() {
        seen.add(t);
    }
    let left = match fws[0].get_children().for_path(&queue_path).await {
        Ok(children) => children.len(),
        Err(CuratorError::NoNode { .. }) => 0,
        Err(e) => return Err(e),
    };
    for fw in &fws {
        fw.close().await;
    }

    let missing = seen.count.iter().filter(|&&c| c == 0).count();
    let twice: u64 = seen.count.iter().map(|&c| u64::from(c.saturating_sub(1))).sum();
    let timed_firsts: Vec<(u64, u64)> = seen.first[warm..].iter().flatten().copied().collect();
    let delivered = timed_firsts.len();
    let last_taken = timed_firsts.iter().map(|&(_, taken)| taken).max().unwrap_or(first_put);
    let mut latencies: Vec<f64> =
        timed_firsts.iter().map(|&(put, taken)| taken.saturating_sub(put) as f64 / 1000.0).collect();
    let put_wall = Duration::from_nanos(last_put - first_put);
    let take_wall = Duration::from_nanos(last_taken.saturating_sub(first_put));
    let per_s = |n: usize, wall: Duration| if wall.is_zero() { 0.0 } else { round(n as f64 / wall.as_secs_f64()) };
    let events = events.load(Ordering::Relaxed);
    // At most once (plain) or exactly once, each item removed (lock-safe).
    let correct = twice == 0 && (!lock_safe || (missing == 0 && left == 0));

    let extra = json!({
        "mode": mode,
        "consumers": consumers,
        "items": timed,
        "warmup_items": warm,
        "item_size": args.item_size,
        "put_items_per_s": per_s(timed, put_wall),
        "taken_items_per_s": per_s(delivered, take_wall),
        "put_p50_us": round(percentile(&mut put_latencies, 50.0)),
        "put_p99_us": round(percentile(&mut put_latencies, 99.0)),
        "requests_per_item": (p1.saturating_sub(p0) as f64 / timed as f64 * 100.0).round() / 100.0,
        "missing": missing,
        "delivered_twice": twice,
        "left_in_queue": left,
        "queue_events": events,
        "correct": correct,
        "put_wall_s": (put_wall.as_secs_f64() * 1000.0).round() / 1000.0,
        "wall_s": (take_wall.as_secs_f64() * 1000.0).round() / 1000.0,
    });
    let result = line("queue", consumers, delivered, take_wall, &mut latencies, extra);
    if !correct {
        eprintln!("curator-bench: queue: {result}");
        return Err(CuratorError::IllegalState(format!(
            "the queue is wrong in {mode} mode: {missing} of {total} items missing, {twice} delivered twice, {left} nodes left"
        )));
    }
    Ok(vec![result])
}
