//! Interop with Apache Curator 5.4's `DistributedAtomicLong`, `DistributedAtomicInteger` and
//! `SharedCount` (Debian's jars): a Java peer (tests/java/AtomicPeer.java) and Rust clients
//! change the same nodes. Concurrent increments from both sides, optimistic and promoted to a
//! shared mutex, end with the value equal to the increments both sides reported successful,
//! each reported value distinct; each side reads what the other wrote, both reject a corrupted
//! node; a `SharedCount` hears the other side's writes, and a stale `trySetCount` fails on
//! both sides. Missing `javac` or jars fail the test with a message saying what to install.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{CuratorError, CuratorFramework};
use curator_recipes::{
    AtomicValue, CachedAtomicInteger, DistributedAtomicInteger, DistributedAtomicLong, PromotedToLock, WRITE_TAG_PREFIX,
};
use curator_recipes::{SharedCount, SharedCountEvent, VersionedValue};
use curator_test::{eventually, Timing};
use tests::fixture::{init_tracing, unique_path, Fixture};
use tests::java::LinePeer;

/// Curator's atomics and a `SharedCount` in a Java process.
struct JavaPeer {
    peer: LinePeer,
    /// The counts the Java `SharedCount`'s listener heard (`countHasChanged`), in order.
    changes: Arc<Mutex<Vec<i32>>>,
}

impl JavaPeer {
    async fn start(connect: &str) -> JavaPeer {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let heard = changes.clone();
        let peer = LinePeer::with_events("AtomicPeer", &[connect], move |line| {
            let Some(count) = line.strip_prefix("CHANGED ") else { return false };
            heard.lock().unwrap().push(count.parse().expect("a count"));
            true
        })
        .await;
        JavaPeer { peer, changes }
    }

    /// Sends `line` and returns the answer, ERROR included.
    async fn try_command(&mut self, line: &str) -> String {
        self.peer.try_command(line).await
    }

    /// Sends `line` and returns the answer's words after its first; panics on ERROR.
    async fn command(&mut self, line: &str) -> Vec<String> {
        let answer = self.try_command(line).await;
        assert!(!answer.starts_with("ERROR"), "the java peer failed {line:?}: {answer}");
        answer.split_whitespace().skip(1).map(str::to_string).collect()
    }

    /// Curator's `get()` of the `kind` (`long` or `int`) number at `path`.
    async fn get(&mut self, kind: &str, path: &str) -> i64 {
        self.command(&format!("GET {kind} {path}")).await[0].parse().expect("a number")
    }

    /// Curator's `add(delta)`: (succeeded, pre, post).
    async fn add(&mut self, kind: &str, path: &str, delta: i64) -> (bool, i64, i64) {
        let words = self.command(&format!("ADD {kind} {path} {delta}")).await;
        (words[0] == "true", words[1].parse().expect("pre"), words[2].parse().expect("post"))
    }

    /// Curator's `SharedCount`: `getCount()` and `getVersionedValue()`, (count, version, value).
    async fn count(&mut self) -> (i32, i32, i32) {
        let words = self.command("COUNT_GET").await;
        (words[0].parse().expect("count"), words[1].parse().expect("version"), words[2].parse().expect("value"))
    }

    /// [`count`](Self::count) once Java's copy is at `version` (polled within the deadline).
    async fn count_at(&mut self, version: i32) -> (i32, i32, i32) {
        let deadline = tokio::time::Instant::now() + Timing::new().deadline();
        loop {
            let now = self.count().await;
            if now.1 >= version {
                return now;
            }
            assert!(tokio::time::Instant::now() < deadline, "Java's count stayed at {now:?}, want version {version}");
            tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
        }
    }

    /// Keeps the Java count's `getVersionedValue()` as `name`: (version, value).
    async fn snapshot(&mut self, name: &str) -> (i32, i32) {
        let words = self.command(&format!("COUNT_SNAPSHOT {name}")).await;
        (words[1].parse().expect("version"), words[2].parse().expect("value"))
    }

    /// Whether the Java count's listener has heard `count`.
    async fn heard(&self, count: i32) -> bool {
        let changes = self.changes.clone();
        eventually(Timing::new().deadline(), || {
            let changes = changes.clone();
            async move { changes.lock().unwrap().contains(&count) }
        })
        .await
    }

    async fn quit(self) {
        self.peer.quit().await;
    }
}

/// One increment as a side reported it.
#[derive(Debug, Clone)]
struct Increment {
    who: String,
    succeeded: bool,
    pre: i64,
    post: i64,
    optimistic_tries: u32,
    promoted_lock_tries: u32,
}

impl Increment {
    fn rust(who: &str, value: &AtomicValue<i64>) -> Increment {
        Increment {
            who: who.to_string(),
            succeeded: value.succeeded(),
            pre: value.pre_value,
            post: value.post_value,
            optimistic_tries: value.stats.optimistic_tries,
            promoted_lock_tries: value.stats.promoted_lock_tries,
        }
    }

    /// From the peer's `INC <thread> <pre> <post> <tries> <lock tries>` or `MISS <thread> <pre>
    /// <tries> <lock tries>` lines.
    fn java(line: &str) -> Increment {
        let words: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> i64 { words[i].parse().unwrap_or_else(|_| panic!("a number in {line:?}")) };
        let tries = |i: usize| -> u32 { words[i].parse().unwrap_or_else(|_| panic!("a count in {line:?}")) };
        match words[0] {
            "INC" => Increment {
                who: format!("java-{}", words[1]),
                succeeded: true,
                pre: n(2),
                post: n(3),
                optimistic_tries: tries(4),
                promoted_lock_tries: tries(5),
            },
            "MISS" => Increment {
                who: format!("java-{}", words[1]),
                succeeded: false,
                pre: n(2),
                post: n(2),
                optimistic_tries: tries(3),
                promoted_lock_tries: tries(4),
            },
            _ => panic!("not an increment: {line:?}"),
        }
    }
}

/// The policies of the concurrent run: optimistic tries, and promotion to a mutex or not.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// 11 optimistic tries, 5 ms apart; an increment that runs out does not succeed.
    Optimistic,
    /// 2 optimistic tries, then the mutex on the lock path, under which 11 tries 5 ms apart.
    Promoted,
}

/// Increments per session.
const K: usize = 150;
/// Sessions per side.
const SESSIONS: usize = 2;

/// Java (`SESSIONS` threads, a session each) and Rust (`SESSIONS` sessions) increment the
/// counter at a new path `K` times each, all at once, under `mode`; checks the outcome and
/// returns every increment reported, both sides'.
async fn increment_from_both_sides(mode: Mode) -> Vec<Increment> {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-atomic");
    let lock = format!("{path}-lock");
    let mut java = JavaPeer::start(&f.connect_string()).await;

    let (retries, lock_retries) = match mode {
        Mode::Optimistic => (10, None),
        Mode::Promoted => (1, Some(10)),
    };
    let mut counters = Vec::new();
    for _ in 0..SESSIONS {
        let fw = f.client().await;
        let policy = RetryNTimes::new(retries, Duration::from_millis(5));
        let counter = match lock_retries {
            None => DistributedAtomicLong::new(&fw, &path, policy),
            Some(n) => DistributedAtomicLong::with_promotion(
                &fw,
                &path,
                policy,
                PromotedToLock::new(&lock)
                    .expect("lock path")
                    .retry_policy(RetryNTimes::new(n, Duration::from_millis(5)))
                    .max_lock_time(Timing::new().deadline()),
            ),
        };
        counters.push((fw, counter.expect("counter")));
    }

    let command = match lock_retries {
        None => format!("INCREMENT long {path} {SESSIONS} {K} {retries} 5"),
        Some(n) => format!("INCREMENT long {path} {SESSIONS} {K} {retries} 5 {lock} {n} 5"),
    };
    assert_eq!(java.try_command(&command).await, "STARTED", "the java clients connected");
    // The Java threads start now; so do ours.
    let mut tasks = Vec::new();
    for (i, (fw, counter)) in counters.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let who = format!("rust-{i}");
            let mut seen = Vec::new();
            for _ in 0..K {
                seen.push(Increment::rust(&who, &counter.increment().await.expect("increment")));
            }
            (fw, counter, seen)
        }));
    }
    let mut increments = Vec::new();
    let mut counters = Vec::new();
    for task in tasks {
        let (fw, counter, seen) = task.await.expect("rust incrementer");
        increments.extend(seen);
        counters.push((fw, counter));
    }
    let java_done = loop {
        let line = java.peer.answer("INCREMENT").await;
        assert!(!line.starts_with("ERROR"), "the java incrementers failed: {line}");
        if let Some(done) = line.strip_prefix("DONE ") {
            break done.to_string();
        }
        increments.push(Increment::java(&line));
    };

    // Each side's own count of its successes and failures agrees with its lines.
    let java_ok = increments.iter().filter(|i| i.who.starts_with("java") && i.succeeded).count();
    let java_missed = increments.iter().filter(|i| i.who.starts_with("java") && !i.succeeded).count();
    assert_eq!(java_done, format!("{java_ok} {java_missed}"), "the java peer's totals");
    assert_eq!(increments.len(), 2 * SESSIONS * K, "every increment reported once");

    // Exact: the successful increments wrote 1, 2, ..., n, each once, whichever side made it.
    let mut posts: Vec<i64> = increments.iter().filter(|i| i.succeeded).map(|i| i.post).collect();
    posts.sort_unstable();
    let n = posts.len() as i64;
    let twice: Vec<i64> = posts.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    let beyond: Vec<i64> = posts.iter().copied().filter(|p| !(1..=n).contains(p)).collect();
    assert!(
        twice.is_empty() && beyond.is_empty(),
        "each successful increment must write a value of its own, 1..={n}: reported twice {twice:?}, out of range {beyond:?}"
    );
    for i in increments.iter().filter(|i| i.succeeded) {
        assert_eq!(i.post, i.pre + 1, "an increment adds one: {i:?}");
    }
    let check =
        DistributedAtomicLong::new(&f.fw, &path, RetryNTimes::new(3, Duration::from_millis(10))).expect("counter");
    assert_eq!(check.get().await.expect("get").post_value, n, "Rust reads the number of successes");
    assert_eq!(java.get("long", &path).await, n, "Curator reads the number of successes");
    for side in ["java", "rust"] {
        assert!(
            increments.iter().any(|i| i.who.starts_with(side) && (!i.succeeded || i.optimistic_tries > 1)),
            "the {side} side never lost a race: the sides did not collide"
        );
    }

    // Curator's increments ran beside our write tags, one per Rust handle, children of the
    // counter's node: its recipe reads and writes the node's data only.
    let mut tags = tests::children(&f.fw, &path).await;
    tags.sort();
    assert_eq!(tags.len(), SESSIONS, "our handles' write tags: {tags:?}");
    assert!(tags.iter().all(|t| t.starts_with(WRITE_TAG_PREFIX)), "{tags:?}");
    let fws: Vec<CuratorFramework> = counters.into_iter().map(|(fw, _counter)| fw).collect(); // dropped: tags go
    let gone = eventually(Timing::new().deadline(), || async { tests::children(&f.fw, &path).await.is_empty() }).await;
    assert!(gone, "write tags left behind: {:?}", tests::children(&f.fw, &path).await);
    for fw in fws {
        fw.close().await;
    }

    java.quit().await;
    f.close().await;
    increments
}

/// Curator's `DistributedAtomicLong` (2 threads, a session each) and ours (2 sessions)
/// increment one counter 150 times each, at once, optimistically (11 tries each): the final
/// value, read by both sides, equals the number of increments reported successful by both, and
/// the values reported by successful increments are exactly 1..=n, so none was counted twice or
/// lost; some increments were retried, so the sides did collide. Our handles' write tags
/// (`P/curator-rs-write-tag-<uuid>`, children of the counter's node) are there all along:
/// Curator's recipe is not bothered by them, and they are gone once our handles are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_increment_one_counter_exactly() {
    increment_from_both_sides(Mode::Optimistic).await;
}

/// The same with promotion to a mutex on both sides: after 2 optimistic tries, Curator's
/// `PromotedToLock` and ours take the same `InterProcessMutex` path and try again under it. The
/// total is still exact, and both sides' `AtomicStats` (Curator's `getPromotedLockTries()`,
/// our `promoted_lock_tries`) show increments made under the mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_increment_exactly_when_promoted_to_a_shared_mutex() {
    let increments = increment_from_both_sides(Mode::Promoted).await;
    let promoted =
        |side: &str| increments.iter().filter(|i| i.who.starts_with(side) && i.promoted_lock_tries > 0).count();
    assert!(promoted("java") > 0, "no Curator increment was promoted to the mutex");
    assert!(promoted("rust") > 0, "no Rust increment was promoted to the mutex");
}

/// `DistributedAtomicInteger` from both sides on one node: a missing node and an empty one read
/// as 0 on both; what Rust writes Curator reads, and the other way round, negative numbers and
/// Java's wrapping past `i32::MAX` included (4 bytes big-endian). A node holding 3 bytes is
/// rejected by both: Curator's "Corrupted data" exception, our `BadData`, for reads and
/// increments, and the node is left as it was. A longer node is where the sides differ: Curator
/// reads the first 4 bytes, ours is `BadData`. A `CachedAtomicInteger`'s block reservation is
/// a 4-byte add Curator reads, and a block reserved after Java's add starts past it.
#[tokio::test]
async fn integers_written_by_one_side_are_read_by_the_other() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-int");
    let mut java = JavaPeer::start(&f.connect_string()).await;
    let int =
        DistributedAtomicInteger::new(&f.fw, &path, RetryNTimes::new(3, Duration::from_millis(10))).expect("counter");

    // Missing, then empty: 0 for both.
    assert_eq!(int.get().await.expect("get").post_value, 0);
    assert_eq!(java.get("int", &path).await, 0);
    f.fw.create().for_path(&path, Vec::new()).await.expect("an empty node");
    assert_eq!(int.get().await.expect("get").post_value, 0);
    assert_eq!(java.get("int", &path).await, 0);

    // Rust writes, Java reads; Java writes, Rust reads.
    let added = int.add(41).await.expect("add");
    assert!(added.succeeded());
    assert_eq!((added.pre_value, added.post_value), (0, 41));
    assert_eq!(java.get("int", &path).await, 41);
    assert_eq!(java.add("int", &path, 1).await, (true, 41, 42));
    assert_eq!(int.get().await.expect("get").post_value, 42);
    assert_eq!(java.command(&format!("TRYSET int {path} -7")).await, ["true", "42", "-7"]);
    assert_eq!(int.get().await.expect("get").post_value, -7);
    assert!(int.try_set(i32::MAX).await.expect("try_set").succeeded());
    assert_eq!(java.add("int", &path, 1).await, (true, i64::from(i32::MAX), i64::from(i32::MIN)), "Java wraps");
    assert_eq!(int.get().await.expect("get").post_value, i32::MIN);
    assert_eq!(f.fw.get_data().for_path(&path).await.expect("read"), i32::MIN.to_be_bytes());

    // Java creates a missing node, Rust reads it.
    let fresh = unique_path("interop-int-fresh");
    assert_eq!(java.add("int", &fresh, 5).await, (true, 0, 5));
    let other =
        DistributedAtomicInteger::new(&f.fw, &fresh, RetryNTimes::new(3, Duration::from_millis(10))).expect("counter");
    assert_eq!(other.get().await.expect("get").post_value, 5);

    // 3 bytes: both sides refuse to read or change it.
    let corrupt = unique_path("interop-int-corrupt");
    f.fw.create().for_path(&corrupt, vec![1, 2, 3]).await.expect("a corrupted node");
    let bad = DistributedAtomicInteger::new(&f.fw, &corrupt, RetryNTimes::new(3, Duration::from_millis(10)))
        .expect("counter");
    for answer in
        [java.try_command(&format!("GET int {corrupt}")).await, java.try_command(&format!("ADD int {corrupt} 1")).await]
    {
        assert!(answer.starts_with("ERROR") && answer.contains("Corrupted data"), "Curator: {answer}");
    }
    let err = bad.get().await.expect_err("corrupted");
    assert!(
        matches!(&err, CuratorError::BadData { reason, .. } if reason.contains("4 bytes expected, found 3")),
        "{err}"
    );
    assert!(matches!(bad.increment().await, Err(CuratorError::BadData { .. })));
    assert_eq!(f.fw.get_data().for_path(&corrupt).await.expect("read"), [1, 2, 3], "nothing written over it");

    // A known difference, where we are stricter: a longer node (here a long's 8 bytes) is read
    // by Curator's integer as its first 4 bytes, and is BadData to ours.
    let long = unique_path("interop-int-long");
    f.fw.create().for_path(&long, ((5i64 << 32) | 9).to_be_bytes().to_vec()).await.expect("a long");
    assert_eq!(java.get("int", &long).await, 5, "Curator reads the first 4 bytes");
    let as_int =
        DistributedAtomicInteger::new(&f.fw, &long, RetryNTimes::new(3, Duration::from_millis(10))).expect("counter");
    assert!(matches!(as_int.get().await, Err(CuratorError::BadData { .. })));

    // CachedAtomicInteger: each block is one add of the factor, in Curator's 4 bytes.
    let ids_path = unique_path("interop-int-cached");
    let counter = DistributedAtomicInteger::new(&f.fw, &ids_path, RetryNTimes::new(3, Duration::from_millis(10)))
        .expect("counter");
    let ids = CachedAtomicInteger::new(counter, 3).expect("cached");
    let mut handed = Vec::new();
    for _ in 0..3 {
        handed.push(ids.next().await.expect("next").pre_value);
    }
    assert_eq!(handed, [0, 1, 2]);
    assert_eq!(java.get("int", &ids_path).await, 3, "Curator reads the reserved block's end");
    assert_eq!(java.add("int", &ids_path, 10).await, (true, 3, 13));
    assert_eq!(ids.next().await.expect("next").pre_value, 13, "the next block starts after Java's add");
    assert_eq!(java.get("int", &ids_path).await, 16);

    drop((int, other, bad, as_int, ids));
    java.quit().await;
    f.close().await;
}

/// The next `Changed` of `events` with `count`, within the deadline.
async fn changed_to(events: &mut curator_core::EventStream<SharedCountEvent>, count: i32) -> VersionedValue<i32> {
    let wait = async {
        while let Some(event) = events.next().await {
            if let SharedCountEvent::Changed(v) = event {
                if v.value == count {
                    return v;
                }
            }
        }
        panic!("the events ended before a change to {count}");
    };
    tokio::time::timeout(Timing::new().deadline(), wait)
        .await
        .unwrap_or_else(|_| panic!("our SharedCount never heard {count}"))
}

/// Curator's `SharedCount` and ours on one node: Java's `setCount` reaches our listener, our
/// `try_set` reaches Java's `countHasChanged`; a `trySetCount` with a value read before the
/// other side wrote fails, Java's after our write and ours after Java's; both then hold the
/// same count at the same version, the node's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_counts_see_each_others_values() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("interop-count");
    let mut java = JavaPeer::start(&f.connect_string()).await;
    assert_eq!(java.command(&format!("COUNT_OPEN {path} 0")).await, ["0", "0"], "Java made the node");
    let count = SharedCount::new(&f.fw, &path, 100).expect("count");
    let mut events = count.events();
    count.start().expect("start");
    count.ready().await.expect("start");
    assert_eq!(count.versioned_value().expect("count"), VersionedValue { version: 0, value: 0 }, "Java's seed");

    // Java sets, we hear it.
    assert!(java.command("COUNT_SET 5").await.is_empty());
    assert_eq!(changed_to(&mut events, 5).await, VersionedValue { version: 1, value: 5 });

    // We set, Java hears it.
    let seen = count.versioned_value().expect("count");
    assert!(count.try_set(&seen, 6).await.expect("try_set"), "nobody wrote since we read");
    assert!(java.heard(6).await, "Java's listener never heard 6: {:?}", java.changes.lock().unwrap());
    assert_eq!(java.count().await, (6, 2, 6));

    // Java's stale try fails after our write.
    assert_eq!(java.snapshot("before-rust").await, (2, 6));
    let ours = count.versioned_value().expect("count");
    assert!(count.try_set(&ours, 7).await.expect("try_set"));
    assert_eq!(java.command("COUNT_TRYSET before-rust 8").await, ["false"], "Java's stale trySetCount");
    // Not a wait for Java's listener: when the failed trySetCount re-read the node first,
    // Curator's watcher finds nothing newer and tells no listener.
    assert_eq!(java.count_at(3).await, (7, 3, 7));

    // Ours fails after Java's write.
    let stale = count.versioned_value().expect("count");
    assert_eq!(stale, VersionedValue { version: 3, value: 7 });
    assert_eq!(java.snapshot("after-rust").await, (3, 7));
    assert_eq!(java.command("COUNT_TRYSET after-rust 9").await, ["true"]);
    assert!(!count.try_set(&stale, 10).await.expect("try_set"), "our stale try_set");

    // Both agree, with the node.
    assert_eq!(changed_to(&mut events, 9).await, VersionedValue { version: 4, value: 9 });
    assert_eq!(count.versioned_value().expect("count"), VersionedValue { version: 4, value: 9 });
    assert_eq!(java.count().await, (9, 4, 9));
    let (data, stat) = f.fw.get_data().for_path_with_stat(&path).await.expect("read");
    assert_eq!((data, stat.version), (9i32.to_be_bytes().to_vec(), 4));
    assert!(!java.changes.lock().unwrap().contains(&8) && !java.changes.lock().unwrap().contains(&10));

    count.close().await;
    java.quit().await;
    f.close().await;
}
