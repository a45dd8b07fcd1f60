//! The queue interop tests' helpers (`queue_interop.rs`, `queue_variants_interop.rs`): Apache
//! Curator's queues in a Java process (`tests/java/QueuePeer.java`), Rust consumers that log
//! what they are handed, and waits on both; and, for every queue test, the lock nodes under a
//! lock path ([`lock_nodes`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::children;
use crate::java::LinePeer;
use curator_core::{CuratorFramework, WRITE_TAG_PREFIX};
use curator_recipes::{DistributedQueue, QueueBuilder, QueueEvent, StringSerializer};
use curator_test::{eventually, Timing};

/// Who consumed which item, in the order they were consumed: `(consumer, item)`.
pub type Log = Arc<Mutex<Vec<(String, String)>>>;

/// The test deadline ([`Timing::deadline`]).
pub fn deadline() -> Duration {
    Timing::new().deadline()
}

/// Curator's queues in a Java process.
pub struct JavaPeer {
    peer: LinePeer,
    /// What the Java consumers were handed (`ITEM <id> <item> <ms>`), as `("java-<id>", item)`.
    consumed: Log,
    /// When (Java's epoch ms) each item was handed to a Java consumer, by item.
    handed_at: Arc<Mutex<HashMap<String, u64>>>,
}

impl JavaPeer {
    /// Runs `tests/java/QueuePeer.java` against `connect` and waits for its `READY`; what its
    /// consumers are handed goes to `consumed`.
    pub async fn start(connect: &str, consumed: &Log) -> JavaPeer {
        let heard = consumed.clone();
        let handed_at: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let times = handed_at.clone();
        let peer = LinePeer::with_events("QueuePeer", &[connect], move |line| {
            // `ITEM <id> <item> <epoch ms>`
            let words: Vec<&str> = line.split(' ').collect();
            let ["ITEM", id, item, at] = words[..] else { return false };
            times.lock().unwrap().insert(item.to_string(), at.parse().expect("ITEM's time in ms"));
            heard.lock().unwrap().push((format!("java-{id}"), item.to_string()));
            true
        })
        .await;
        JavaPeer { peer, consumed: consumed.clone(), handed_at }
    }

    /// Sends `line` and returns the answer, ERROR included.
    pub async fn try_command(&mut self, line: &str) -> String {
        self.peer.try_command(line).await
    }

    /// Sends `line` and returns the answer; panics on ERROR.
    pub async fn command(&mut self, line: &str) -> String {
        self.peer.command(line).await
    }

    /// Starts Curator's queue `kind` (`queue`, `priority`, `delay`) with a consumer `id` on a
    /// session of its own, lock-safe under `lock` if given.
    pub async fn consume(&mut self, id: &str, kind: &str, path: &str, lock: Option<&str>) {
        let answer = self.command(&format!("CONSUME {id} {kind} {path} {}", lock.unwrap_or("-"))).await;
        assert_eq!(answer, format!("STARTED {id}"));
    }

    /// Starts Curator's producer-only queue `kind` as `id`.
    pub async fn produce(&mut self, id: &str, kind: &str, path: &str) {
        assert_eq!(self.command(&format!("PRODUCE {id} {kind} {path}")).await, format!("STARTED {id}"));
    }

    /// Curator's `put` of `<prefix>-0` .. `<prefix>-<n-1>` on queue `id`, one node each.
    pub async fn put_n(&mut self, id: &str, prefix: &str, n: usize) {
        assert_eq!(self.command(&format!("PUTN {id} - {prefix} {n}")).await, format!("PUT {n}"));
    }

    /// Curator's `putMulti` of `items` (one node) on queue `id`; `arg` is the priority or the
    /// delay's epoch ms, `-` for a plain queue.
    pub async fn put_multi(&mut self, id: &str, arg: &str, items: &[&str]) {
        let answer = self.command(&format!("PUTMULTI {id} {arg} {}", items.join(" "))).await;
        assert_eq!(answer, format!("PUT {}", items.len()));
    }

    /// Creates `path/queue-<seq>` holding `data` with Curator's client; returns the node's name.
    pub async fn raw(&mut self, path: &str, data: &[u8]) -> String {
        let hex: String = if data.is_empty() { "-".into() } else { data.iter().map(|b| format!("{b:02x}")).collect() };
        let answer = self.command(&format!("RAW {path} {hex}")).await;
        answer.strip_prefix("RAW ").expect("RAW <name>").to_string()
    }

    /// Curator's `put(item, arg)` on queue `id`: `arg` is the priority, the delay's epoch ms or
    /// the item id, `-` for a plain queue.
    pub async fn put(&mut self, id: &str, arg: &str, item: &str) {
        assert_eq!(self.command(&format!("PUT {id} {arg} {item}")).await, "PUT");
    }

    /// Curator's `DistributedIdQueue.remove(item_id)` on queue `id`: how many items it removed.
    pub async fn remove(&mut self, id: &str, item_id: &str) -> usize {
        let answer = self.command(&format!("REMOVE {id} {item_id}")).await;
        answer.strip_prefix("REMOVED ").and_then(|n| n.parse().ok()).expect("REMOVED <n>")
    }

    /// Starts Curator's `QueueSharder` `id` on `path`, led on `leader`, with a threshold of
    /// `threshold` nodes; its shards' consumers print their items as `consume`'s do.
    pub async fn sharder(&mut self, id: &str, path: &str, leader: &str, threshold: usize) {
        let answer = self.command(&format!("SHARDER {id} {path} {leader} {threshold}")).await;
        assert_eq!(answer, format!("STARTED {id}"));
    }

    /// The shard paths of Curator's sharder `id` (`getQueuePaths`), sorted.
    pub async fn shards(&mut self, id: &str) -> Vec<String> {
        let answer = self.command(&format!("SHARDS {id}")).await;
        let mut words = answer.split(' ');
        assert_eq!(words.next(), Some("SHARDS"), "{answer}");
        let n: usize = words.next().and_then(|n| n.parse().ok()).expect("SHARDS <n>");
        let paths: Vec<String> = words.map(str::to_string).collect();
        assert_eq!(paths.len(), n, "{answer}");
        paths
    }

    /// Closes Curator's queue or sharder `id` and its client.
    pub async fn stop(&mut self, id: &str) {
        assert_eq!(self.command(&format!("STOP {id}")).await, format!("STOPPED {id}"));
    }

    /// When (the epoch ms, Java's clock) `item` was handed to a Java consumer, if it was.
    pub fn handed_at(&self, item: &str) -> Option<u64> {
        self.handed_at.lock().unwrap().get(item).copied()
    }

    /// The items the Java consumers were handed so far, in order.
    pub fn items(&self) -> Vec<String> {
        self.consumed
            .lock()
            .unwrap()
            .iter()
            .filter(|(who, _)| who.starts_with("java"))
            .map(|(_, i)| i.clone())
            .collect()
    }

    /// The Java consumers' items once there are `n` of them (within the deadline).
    pub async fn wait_items(&self, n: usize) -> Vec<String> {
        let consumed = self.consumed.clone();
        let count = move || consumed.lock().unwrap().iter().filter(|(who, _)| who.starts_with("java")).count();
        let reached = eventually(deadline(), || {
            let count = count.clone();
            async move { count() >= n }
        })
        .await;
        assert!(reached, "the java consumers were handed {:?}, want {n} items", self.items());
        self.items()
    }

    /// Sends `QUIT`, expects `BYE` and waits for the process to exit successfully.
    pub async fn quit(self) {
        self.peer.quit().await;
    }
}

/// A Rust queue's builder on `path` (lock-safe under `lock` if given) whose consumer logs each
/// item as `(who, item)` and then works on it for `work`; build it as any kind of queue.
pub fn logging_builder(
    fw: &CuratorFramework,
    path: &str,
    lock: Option<&str>,
    (who, work): (&str, Duration),
    log: &Log,
) -> QueueBuilder<String> {
    let (log, who) = (log.clone(), who.to_string());
    let builder = DistributedQueue::builder(fw, path, StringSerializer).consumer(move |item: String| {
        log.lock().unwrap().push((who.clone(), item));
        async move {
            // The work an item takes: long enough that Curator's consumers get their share.
            tokio::time::sleep(work).await;
            Ok::<(), String>(())
        }
    });
    match lock {
        Some(lock) => builder.lock_path(lock),
        None => builder,
    }
}

/// A listener that pushes the node name of each `BadItem` event to `bad`.
pub fn bad_items_to(bad: &Arc<Mutex<Vec<String>>>) -> impl Fn(&QueueEvent) + Send + Sync + 'static {
    let bad = bad.clone();
    move |event| {
        if let QueueEvent::BadItem { node, .. } = event {
            bad.lock().unwrap().push(node.clone());
        }
    }
}

/// A plain Rust `DistributedQueue` of [`logging_builder`]; its `BadItem` node names go to `bad`.
pub fn rust_consumer(
    fw: &CuratorFramework,
    path: &str,
    lock: Option<&str>,
    who_work: (&str, Duration),
    log: &Log,
    bad: &Arc<Mutex<Vec<String>>>,
) -> DistributedQueue<String> {
    let queue = logging_builder(fw, path, lock, who_work, log).build().expect("valid queue");
    queue.add_listener(bad_items_to(bad));
    queue
}

/// The items of `log` consumed by Rust consumers, in order.
pub fn rust_items(log: &Log) -> Vec<String> {
    log.lock().unwrap().iter().filter(|(who, _)| who.starts_with("rust")).map(|(_, i)| i.clone()).collect()
}

/// Waits until Rust consumers have consumed `n` items and returns them.
pub async fn wait_rust_items(log: &Log, n: usize) -> Vec<String> {
    let reached = eventually(deadline(), || async { rust_items(log).len() >= n }).await;
    assert!(reached, "the rust consumers consumed {:?}, want {n} items", rust_items(log));
    rust_items(log)
}

/// `<prefix>-0` .. `<prefix>-<n-1>`.
pub fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Waits until `path` has no children.
pub async fn drained(fw: &CuratorFramework, path: &str) {
    let empty = eventually(deadline(), || async { children(fw, path).await.is_empty() }).await;
    assert!(empty, "{path} still holds {:?}", children(fw, path).await);
}

/// The lock nodes under a queue's lock path `locks`: its children but the write tags of our
/// queue handles (docs/architecture.md section 5), which are not locks and stay while a handle
/// that has finished a lock-safe take lives.
pub async fn lock_nodes(fw: &CuratorFramework, locks: &str) -> Vec<String> {
    let mut nodes = children(fw, locks).await;
    nodes.retain(|n| !n.starts_with(WRITE_TAG_PREFIX));
    nodes
}

/// Waits until the lock path `locks` holds no lock node ([`lock_nodes`]).
pub async fn locks_released(fw: &CuratorFramework, locks: &str) {
    let empty = eventually(deadline(), || async { lock_nodes(fw, locks).await.is_empty() }).await;
    assert!(empty, "{locks} still holds the lock nodes {:?}", lock_nodes(fw, locks).await);
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64
}

/// How a run with consumers on both sides went: items consumed more than once, items never
/// consumed, and who took whose.
#[derive(Debug)]
pub struct Tally {
    /// Items consumed more than once.
    pub twice: usize,
    /// Expected items never consumed.
    pub missing: usize,
    /// Items consumed by java of java's, java of rust's, rust of java's, rust of rust's
    /// (consumers and items named `java...` and `rust...`).
    pub cross: [usize; 4],
}

impl Tally {
    /// Counts `consumed` (`(consumer, item)`) against the `expected` items.
    pub fn of(consumed: &[(String, String)], expected: &[String]) -> Tally {
        let mut times: HashMap<&str, usize> = HashMap::new();
        for (_, item) in consumed {
            *times.entry(item.as_str()).or_default() += 1;
        }
        let by = |consumer: &str, producer: &str| {
            consumed.iter().filter(|(who, item)| who.starts_with(consumer) && item.starts_with(producer)).count()
        };
        Tally {
            twice: times.values().filter(|&&n| n > 1).count(),
            missing: expected.iter().filter(|item| !times.contains_key(item.as_str())).count(),
            cross: [by("java", "java"), by("java", "rust"), by("rust", "java"), by("rust", "rust")],
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [jj, jr, rj, rr] = self.cross;
        write!(
            f,
            "{} twice, {} missing; java took {jj} of java's and {jr} of rust's, rust took {rj} of java's and {rr} of rust's",
            self.twice, self.missing
        )
    }
}
