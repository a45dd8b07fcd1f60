//! Result lines: nearest-rank percentiles, JSON objects, resident memory, and the server's
//! request counter (`Counter`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use curator_core::{CuratorError, Result};
use serde_json::{json, Map, Value};

/// Our implementation's name in the table.
pub(crate) const IMPL: &str = "curator-rs 0.1";

/// Nearest-rank percentile of `samples` (microseconds), which it sorts.
pub(crate) fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    samples[rank.min(samples.len()) - 1]
}

pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A result line with the required keys and any extra ones.
pub(crate) fn line(
    scenario: &str,
    clients: usize,
    ops: usize,
    wall: Duration,
    latencies_us: &mut [f64],
    extra: Value,
) -> String {
    let mut obj = Map::new();
    obj.insert("impl".into(), json!(IMPL));
    obj.insert("scenario".into(), json!(scenario));
    obj.insert("clients".into(), json!(clients));
    obj.insert("ops".into(), json!(ops));
    let secs = wall.as_secs_f64();
    obj.insert("ops_per_s".into(), json!(if secs > 0.0 { ops as f64 / secs } else { 0.0 }));
    obj.insert("p50_us".into(), json!(round(percentile(latencies_us, 50.0))));
    obj.insert("p99_us".into(), json!(round(percentile(latencies_us, 99.0))));
    if let Value::Object(extra) = extra {
        obj.extend(extra);
    }
    Value::Object(obj).to_string()
}

/// The server counts as quiet when two `mntr` readings this far apart agree.
const QUIET: Duration = Duration::from_millis(10);
/// The longest wait for quiet; the reading is taken anyway after it.
const QUIET_DEADLINE: Duration = Duration::from_secs(2);

/// Reads the server's request counter through `mntr`.
pub(crate) struct Counter {
    addr: String,
    /// Readings so far: each is a packet the server counts.
    readings: AtomicU64,
}

impl Counter {
    pub(crate) fn new(connect: &str) -> Counter {
        let addr = connect.split(',').next().unwrap_or(connect).to_string();
        Counter { addr, readings: AtomicU64::new(0) }
    }

    /// `zk_packets_received`, less our readings.
    pub(crate) async fn packets(&self) -> Result<u64> {
        let readings = self.readings.fetch_add(1, Ordering::Relaxed) + 1;
        let mntr = curator_test::four_letter_word(&self.addr, "mntr")
            .await
            .map_err(|e| CuratorError::IllegalState(format!("mntr: {e}")))?;
        mntr.lines()
            .filter_map(|l| l.strip_prefix("zk_packets_received"))
            .find_map(|v| v.trim().parse::<u64>().ok())
            .map(|p| p.saturating_sub(readings))
            .ok_or_else(|| CuratorError::IllegalState("no zk_packets_received in mntr (is mntr allowed?)".into()))
    }

    /// The counter once two readings [`QUIET`] apart agree (or after [`QUIET_DEADLINE`]).
    pub(crate) async fn quiet(&self) -> Result<u64> {
        let deadline = Instant::now() + QUIET_DEADLINE;
        let mut before = self.packets().await?;
        loop {
            tokio::time::sleep(QUIET).await; // the quiet interval
            let now = self.packets().await?;
            if now == before || Instant::now() > deadline {
                return Ok(now);
            }
            before = now;
        }
    }
}

pub(crate) fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Resident and peak resident memory of this process in KiB (Linux `/proc/self/status`).
pub(crate) fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// User plus system CPU seconds this process has used so far (Linux `/proc/self/stat`, in the
/// kernel's fixed 100 Hz user ticks); 0 where it cannot be read.
pub(crate) fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}
