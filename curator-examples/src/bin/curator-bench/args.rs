//! The harness's arguments: `--key value` pairs; unknown keys are ignored.

/// Parsed arguments.
#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub connect: String,
    pub scenario: String,
    pub path: String,
    pub clients: usize,
    pub cycles: usize,
    pub warmup: usize,
    pub window: usize,
    pub read_pct: u32,
    pub children: usize,
    pub adds: usize,
    /// Ours: `tree_cache`'s parents the `--children` are spread over (`--parents`, 1 by
    /// default: all children of the cached node itself).
    pub parents: usize,
    /// Ours: run on tokio's current-thread runtime (`--runtime current`).
    pub current_thread: bool,
    /// Ours: `waiters` with `--mode queued` uses a QueuedMutex; `queue`'s mode, `plain` (the
    /// default) or `lock-safe`.
    pub mode: String,
    /// Ours: `group_leave`'s members (`--members`, 100 by default).
    pub members: usize,
    /// Ours: `group_leave`'s observers (`--observers`, 5 by default).
    pub observers: usize,
    /// Ours: how `group_leave`'s members leave (`--leave session`, the default: the member's
    /// framework closes; `--leave member`: `GroupMember::close()` deletes its node).
    pub leave: String,
    /// Ours: `serve`'s server fsyncs its log (`--force-sync yes|no`, yes by default).
    pub force_sync: bool,
    /// Ours: `discovery_cache`'s instances registered up front (`--instances`, 1000 by default).
    pub instances: usize,
    /// Ours: `discovery_cache`'s caches (`--caches`, 5 by default).
    pub caches: usize,
    /// Ours: how `discovery_cache` hears a cache's events (`--listen callback`, the default: a
    /// listener callback; `--listen stream`: a task reading `ServiceCache::events()`).
    pub listen: String,
    /// Ours: `leader_failover`'s participants (`--participants`, 2 by default).
    pub participants: usize,
    /// Ours: `leader_failover`'s handoffs (`--handoffs`, 100 by default).
    pub handoffs: usize,
    /// Ours: `atomic_increments`'s sessions (`--sessions`, 1 by default).
    pub sessions: usize,
    /// Ours: `atomic_increments`'s increments per session (`--increments`, 1000 by default).
    pub increments: usize,
    /// Ours: `atomic_increments` runs for this many seconds instead (`--seconds`, 0: off).
    pub seconds: f64,
    /// Ours: `atomic_increments`'s untimed increments per session first (`--warmup-increments`,
    /// 20 by default).
    pub warmup_increments: usize,
    /// Ours: the counter's `RetryNTimes` (`--retry-times`, 20 by default).
    pub retry_times: u32,
    /// Ours: its sleep in milliseconds (`--retry-sleep-ms`, 1 by default).
    pub retry_sleep_ms: u64,
    /// Ours: `queue`'s consumer sessions (`--consumers`, 4 by default).
    pub consumers: usize,
    /// Ours: `queue`'s timed items (`--items`, 2000 by default).
    pub items: usize,
    /// Ours: `queue`'s item size in bytes (`--item-size`, 64 by default).
    pub item_size: usize,
    /// Ours: `queue`'s untimed items put and taken first (`--warmup-items`, 20 by default).
    pub warmup_items: usize,
}

impl Args {
    pub(crate) fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            connect: "127.0.0.1:2181".into(),
            scenario: String::new(),
            path: "/bench/rust".into(),
            clients: 1,
            cycles: 1000,
            warmup: 0,
            window: 64,
            read_pct: 90,
            children: 1000,
            adds: 1000,
            parents: 1,
            current_thread: false,
            mode: String::new(),
            members: 100,
            observers: 5,
            force_sync: true,
            leave: "session".into(),
            instances: 1000,
            caches: 5,
            listen: "callback".into(),
            participants: 2,
            handoffs: 100,
            sessions: 1,
            increments: 1000,
            seconds: 0.0,
            warmup_increments: 20,
            retry_times: 20,
            retry_sleep_ms: 1,
            consumers: 4,
            items: 2000,
            item_size: 64,
            warmup_items: 20,
        };
        while let Some(key) = it.next() {
            let Some(value) = it.next() else { return Err(format!("{key} needs a value")) };
            let num = |v: &str| v.parse::<usize>().map_err(|_| format!("{key}: not a number: {v}"));
            match key.as_str() {
                "--connect" => a.connect = value,
                "--scenario" => a.scenario = value,
                "--path" => a.path = value,
                "--clients" => a.clients = num(&value)?.max(1),
                "--cycles" => a.cycles = num(&value)?,
                "--warmup" => a.warmup = num(&value)?,
                "--window" => a.window = num(&value)?.max(1),
                "--read-pct" => a.read_pct = num(&value)?.min(100) as u32,
                "--children" => a.children = num(&value)?,
                "--adds" => a.adds = num(&value)?,
                "--parents" => a.parents = num(&value)?.max(1),
                "--runtime" => a.current_thread = value == "current",
                "--mode" => a.mode = value,
                "--members" => a.members = num(&value)?.max(1),
                "--observers" => a.observers = num(&value)?.max(1),
                "--leave" => a.leave = value,
                "--force-sync" => a.force_sync = value != "no",
                "--instances" => a.instances = num(&value)?.max(1),
                "--caches" => a.caches = num(&value)?.max(1),
                "--listen" => a.listen = value,
                "--participants" => a.participants = num(&value)?.max(2),
                "--handoffs" => a.handoffs = num(&value)?.max(1),
                "--sessions" => a.sessions = num(&value)?.max(1),
                "--increments" => a.increments = num(&value)?.max(1),
                "--seconds" => {
                    a.seconds = value
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .ok_or_else(|| format!("{key}: not a number of seconds: {value}"))?
                }
                "--warmup-increments" => a.warmup_increments = num(&value)?,
                "--retry-times" => {
                    a.retry_times = u32::try_from(num(&value)?).map_err(|_| format!("{key}: too large"))?
                }
                "--retry-sleep-ms" => a.retry_sleep_ms = num(&value)? as u64,
                "--consumers" => a.consumers = num(&value)?.max(1),
                "--items" => a.items = num(&value)?.max(1),
                "--item-size" => a.item_size = num(&value)?,
                "--warmup-items" => a.warmup_items = num(&value)?,
                _ => {}
            }
        }
        if a.scenario.is_empty() {
            return Err("--scenario is required".into());
        }
        Ok(a)
    }
}
