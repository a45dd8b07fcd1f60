//! The lock tests' frameworks and the mutual-exclusion checker every lock test uses.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::ExponentialBackoffRetry;
use curator_core::{CuratorFramework, CuratorFrameworkBuilder, ErrorPolicy};
use curator_test::Timing;

use crate::fixture::{builder, connected};

/// `b` with the lock tests' retry policy: exponential backoff from 50 ms, at most 500 ms, 20
/// retries (it outlasts a leader election, where [`builder`]'s 20 x 100 ms may not).
pub fn lock_retry(b: CuratorFrameworkBuilder) -> CuratorFrameworkBuilder {
    b.retry_policy(ExponentialBackoffRetry::with_max_sleep(Duration::from_millis(50), 20, Duration::from_millis(500)))
}

/// A started, connected framework with [`builder`]'s options and [`lock_retry`] (the Standard
/// error policy, the test session timeout).
pub async fn framework(connect_string: &str) -> CuratorFramework {
    framework_with(connect_string, ErrorPolicy::Standard, Timing::new().session_timeout()).await
}

/// As [`framework`], with an error policy and a session timeout.
pub async fn framework_with(connect_string: &str, policy: ErrorPolicy, session_timeout: Duration) -> CuratorFramework {
    let b = lock_retry(builder(connect_string)).session_timeout(session_timeout).connection_state_error_policy(policy);
    connected(b).await
}
/// The sessions that watch exactly `path` (a lock's line watch, docs/architecture.md section
/// 8.3), from the server's `wchp` (a path, then one line per session; persistent watches too).
pub async fn line_watchers(connect: &str, path: &str) -> Vec<String> {
    let out = curator_test::four_letter_word(connect, "wchp").await.unwrap_or_default();
    let mut lines = out.lines().skip_while(|line| line.trim() != path);
    lines.next();
    lines.map(str::trim).take_while(|line| line.starts_with("0x")).map(str::to_string).collect()
}

/// Creates `count` contender nodes under `path` on `observer` (protected, ephemeral sequential,
/// named as a mutex's): a line of nodes that no acquire will delete. Their paths, in order.
pub async fn contenders_ahead(observer: &CuratorFramework, path: &str, count: usize) -> Vec<String> {
    let mut made = Vec::new();
    for _ in 0..count {
        let node = observer
            .create()
            .with_protection()
            .with_mode(curator_core::CreateMode::EphemeralSequential)
            .for_path(&format!("{path}/lock-"), Vec::new())
            .await
            .expect("a contender node");
        made.push(node);
    }
    made
}

/// Microseconds since the epoch (the same clock a Java peer on this machine reads).
pub fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// One hold seen by the checker.
#[derive(Debug, Clone)]
pub struct HoldRecord {
    pub who: String,
    pub start_us: u64,
    pub end_us: u64,
    /// The fencing token, where the holder has one.
    pub token: Option<i64>,
    /// Readers may overlap each other; nothing else may overlap anything.
    pub shared: bool,
}

/// Checks mutual exclusion instead of assuming it.
///
/// Holders call [`hold`](Checker::hold) (or [`hold_shared`](Checker::hold_shared) for
/// readers) while they hold the lock. It records the [start, end] times and token, flags any
/// holder that finds another exclusive holder inside, and increments a shared counter
/// non-atomically (read, yield, write) so that overlapping holds lose increments.
/// [`verify`](Checker::verify) then checks: no violation seen, no increment lost, no exclusive
/// interval overlapping another, and tokens growing with acquisition order for every pair of
/// holds that exclude each other.
#[derive(Debug, Default)]
pub struct Checker {
    exclusive: AtomicBool,
    readers: AtomicUsize,
    counter: AtomicU64,
    records: Mutex<Vec<HoldRecord>>,
    violations: Mutex<Vec<String>>,
}

impl Checker {
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self::default())
    }

    fn violation(&self, text: String) {
        self.violations.lock().unwrap().push(text);
    }

    /// An exclusive hold of `work` (zero: just a yield) by `who` with fencing token `token`.
    pub async fn hold(&self, who: &str, token: Option<i64>, work: Duration) {
        let start_us = now_us();
        if self.exclusive.swap(true, Ordering::SeqCst) {
            self.violation(format!("{who} entered while another exclusive holder was inside"));
        }
        if self.readers.load(Ordering::SeqCst) != 0 {
            self.violation(format!("{who} entered while readers were inside"));
        }
        let value = self.counter.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        self.counter.store(value + 1, Ordering::SeqCst);
        self.exclusive.store(false, Ordering::SeqCst);
        let end_us = now_us();
        self.records.lock().unwrap().push(HoldRecord { who: who.into(), start_us, end_us, token, shared: false });
    }

    /// A shared (read) hold: may overlap other shared holds, not exclusive ones. Counts with
    /// an atomic increment (readers do overlap).
    pub async fn hold_shared(&self, who: &str, token: Option<i64>, work: Duration) {
        let start_us = now_us();
        self.readers.fetch_add(1, Ordering::SeqCst);
        if self.exclusive.load(Ordering::SeqCst) {
            self.violation(format!("reader {who} entered while a writer was inside"));
        }
        tokio::task::yield_now().await;
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        if self.exclusive.load(Ordering::SeqCst) {
            self.violation(format!("a writer entered while reader {who} was inside"));
        }
        self.counter.fetch_add(1, Ordering::SeqCst);
        self.readers.fetch_sub(1, Ordering::SeqCst);
        let end_us = now_us();
        self.records.lock().unwrap().push(HoldRecord { who: who.into(), start_us, end_us, token, shared: true });
    }

    /// A hold seen elsewhere (a Java peer's ACQUIRED/RELEASED lines). Its increment happened
    /// elsewhere too: it counts towards the expected total.
    pub fn record_external(&self, record: HoldRecord) {
        self.counter.fetch_add(1, Ordering::SeqCst);
        self.records.lock().unwrap().push(record);
    }

    pub fn holds(&self) -> usize {
        self.records.lock().unwrap().len()
    }

    pub fn records(&self) -> Vec<HoldRecord> {
        self.records.lock().unwrap().clone()
    }

    /// Panics with the details unless every hold excluded the others as it should and
    /// `expected` holds were recorded.
    pub fn verify(&self, expected: usize) {
        let violations = self.violations.lock().unwrap().clone();
        assert!(violations.is_empty(), "mutual exclusion violated: {violations:#?}");
        let mut records = self.records();
        assert_eq!(records.len(), expected, "number of holds");
        assert_eq!(self.counter.load(Ordering::SeqCst) as usize, expected, "increments lost: holds overlapped");
        records.sort_by_key(|r| (r.start_us, r.end_us));
        for (i, a) in records.iter().enumerate() {
            for b in &records[i + 1..] {
                if b.start_us >= a.end_us {
                    break; // sorted by start: no later hold can overlap `a`
                }
                if a.shared && b.shared {
                    continue;
                }
                // Intervals are taken inside the hold, so touching ends are fine.
                let overlap = b.start_us < a.end_us && a.start_us < b.end_us;
                assert!(!overlap, "overlapping holds: {a:?} and {b:?}");
            }
        }
        // Tokens grow with acquisition order among holds that exclude each other.
        for (i, a) in records.iter().enumerate() {
            for b in &records[i + 1..] {
                if a.shared && b.shared {
                    continue;
                }
                if let (Some(ta), Some(tb)) = (a.token, b.token) {
                    if ta == tb {
                        continue; // the same node (a reentrant count)
                    }
                    assert!(ta < tb, "fencing tokens out of order: {a:?} before {b:?}");
                }
            }
        }
    }
}
