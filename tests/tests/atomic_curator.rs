//! Apache Curator's `TestDistributedAtomicLong` and `TestCachedAtomicCounter` (whose scenarios
//! we run on `CachedAtomicInteger` too, as Curator's covers the long only), in Rust, with
//! our own tests of bad input and corrupted nodes.
//!
//! Not ported: `TestCachedAtomicCounter.testWithError` overrides `DistributedAtomicLong`'s
//! methods with a fake (our `CachedAtomicLong` takes the real type; a reservation that does
//! not succeed is shown with a contended counter instead, `cached_reservation_not_succeeding`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::CuratorError;
use curator_core::{ExponentialBackoffRetry, RetryNTimes, RetryOneTime};
use curator_recipes::{
    CachedAtomicInteger, CachedAtomicLong, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicValue,
    PromotedToLock, WRITE_TAG_PREFIX,
};
use curator_test::{eventually, Timing};
use tests::fixture::{init_tracing, unique_path, Fixture};

fn one_time() -> RetryOneTime {
    RetryOneTime::new(Duration::from_millis(1))
}

/// Follows `TestDistributedAtomicLong.testCorruptedValue`: a node holding "foo" is a typed
/// error (Curator: a RuntimeException), for reads and for changes alike.
#[tokio::test]
async fn corrupted_value() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("corrupted");
    f.fw.create().for_path(&path, b"foo".to_vec()).await.expect("create");
    let dal = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    let err = dal.get().await.expect_err("corrupted");
    assert!(
        matches!(&err, CuratorError::BadData { reason, .. } if reason.contains("8 bytes expected, found 3")),
        "{err}"
    );
    assert!(matches!(dal.increment().await, Err(CuratorError::BadData { .. })));
    assert_eq!(f.fw.get_data().for_path(&path).await.expect("read"), b"foo", "nothing written over it");
    // A 4-byte counter read as a long is corrupted too, and the other way round.
    let int_path = unique_path("corrupted-int");
    let dai = DistributedAtomicInteger::new(&f.fw, &int_path, one_time()).expect("integer");
    assert_eq!(dai.increment().await.expect("increment").post_value, 1);
    let as_long = DistributedAtomicLong::new(&f.fw, &int_path, one_time()).expect("counter");
    assert!(matches!(as_long.get().await, Err(CuratorError::BadData { .. })));
    f.close().await;
}

/// Follows `TestDistributedAtomicLong.testCompareAndSet`: a compare-and-set succeeds once,
/// fails on a stale expectation, and fails when another client changed the node between
/// (Curator forces a bad version from inside `valueToBytes`; here another handle increments).
#[tokio::test]
async fn compare_and_set() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("cas");
    let dal = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    assert!(!dal.compare_and_set(0, 1).await.expect("cas").succeeded(), "a missing node is never compared");
    dal.force_set(1).await.expect("force set");
    assert!(dal.compare_and_set(1, 5).await.expect("cas").succeeded());
    assert!(!dal.compare_and_set(1, 5).await.expect("cas").succeeded());
    let other = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    other.increment().await.expect("increment");
    let stale = dal.compare_and_set(5, 10).await.expect("cas");
    assert!(!stale.succeeded());
    assert_eq!(stale.pre_value, 6, "the value found is reported");
    assert_eq!(dal.get().await.expect("get").post_value, 6);
    f.close().await;
}

/// Follows `TestDistributedAtomicLong.testForceSet`: increments racing forced resets to 0
/// leave a small value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_set() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("force");
    let dal = Arc::new(DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter"));
    let setter = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    let incrementer = {
        let dal = dal.clone();
        tokio::spawn(async move {
            for _ in 0..100 {
                dal.increment().await.expect("increment");
            }
        })
    };
    for _ in 0..100 {
        setter.force_set(0).await.expect("force set");
    }
    incrementer.await.expect("incrementer");
    setter.force_set(0).await.expect("force set");
    assert!(dal.get().await.expect("get").pre_value < 10);
    f.close().await;
}

/// Follows `TestDistributedAtomicLong.testSimulation` (20 threads x 50 increments there; 10
/// clients x 20 here): optimistic tries with promotion to a mutex under contention; every
/// successful increment reports a value larger than its client's previous one, both phases are
/// used, and the final value is the number of successes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulation() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("simulation");
    let lock = format!("{path}-lock");
    let (optimistic, promoted, successes) =
        (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let mut clients = Vec::new();
    for _ in 0..10 {
        let fw = f.client().await;
        let (path, lock) = (path.clone(), lock.clone());
        let (optimistic, promoted, successes) = (optimistic.clone(), promoted.clone(), successes.clone());
        clients.push(tokio::spawn(async move {
            let policy = || ExponentialBackoffRetry::new(Duration::from_millis(3), 3);
            let dal = DistributedAtomicLong::with_promotion(
                &fw,
                &path,
                policy(),
                PromotedToLock::new(&lock).expect("lock").retry_policy(policy()),
            )
            .expect("counter");
            let mut previous = -1;
            for _ in 0..20 {
                let value = dal.increment().await.expect("increment");
                if value.succeeded() {
                    assert!(value.post_value > previous, "values go up");
                    previous = value.post_value;
                    successes.fetch_add(1, Ordering::SeqCst);
                }
                optimistic.fetch_add(value.stats.optimistic_tries, Ordering::SeqCst);
                promoted.fetch_add(value.stats.promoted_lock_tries, Ordering::SeqCst);
            }
            drop(dal);
            fw.close().await;
        }));
    }
    for client in clients {
        client.await.expect("client");
    }
    assert!(optimistic.load(Ordering::SeqCst) > 0);
    assert!(promoted.load(Ordering::SeqCst) > 0, "contention promoted some increments to the mutex");
    let dal = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    assert_eq!(dal.get().await.expect("get").post_value, i64::from(successes.load(Ordering::SeqCst)));
    f.close().await;
}

/// Follows `TestDistributedAtomicLong.testBasic`: increment, decrement, add and subtract on a
/// missing node (parents made as needed), one optimistic try each, with pre and post values.
#[tokio::test]
async fn basic() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = format!("{}/foo/bar/counter", unique_path("basic"));
    let dal = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    let steps = [
        (dal.increment().await, 0, 1),
        (dal.decrement().await, 1, 0),
        (dal.add(10).await, 0, 10),
        (dal.subtract(5).await, 10, 5),
    ];
    for (value, pre, post) in steps {
        let value = value.expect("change");
        assert!(value.succeeded());
        assert_eq!(value.stats.optimistic_tries, 1);
        assert_eq!(value.stats.promoted_lock_tries, 0);
        assert_eq!((value.pre_value, value.post_value), (pre, post));
    }
    assert_eq!(f.fw.get_data().for_path(&path).await.expect("read"), 5i64.to_be_bytes(), "8 bytes big-endian");
    f.close().await;
}

/// Follows `TestCachedAtomicCounter.testBasic`: 200 numbers from blocks of 100, in order.
#[tokio::test]
async fn cached_basic() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("cached");
    let dal = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    let cached = CachedAtomicLong::new(dal, 100).expect("cached");
    for i in 0..200 {
        let value = cached.next().await.expect("next");
        assert!(value.succeeded());
        assert_eq!((value.pre_value, value.post_value), (i, i + 1));
    }
    let check = DistributedAtomicLong::new(&f.fw, &path, one_time()).expect("counter");
    assert_eq!(check.get().await.expect("get").post_value, 200, "two blocks reserved");
    f.close().await;
}

/// Follows `TestCachedAtomicCounter.testBasic` on Curator's `CachedAtomicInteger`: 200
/// numbers from blocks of 100, in order, the counter holding 4 bytes (Curator's integer).
#[tokio::test]
async fn cached_integer_basic() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("cached-int");
    let dai = DistributedAtomicInteger::new(&f.fw, &path, one_time()).expect("counter");
    let cached = CachedAtomicInteger::new(dai, 100).expect("cached");
    for i in 0..200 {
        let value = cached.next().await.expect("next");
        assert!(value.succeeded());
        assert_eq!((value.pre_value, value.post_value), (i, i + 1));
    }
    assert_eq!(f.fw.get_data().for_path(&path).await.expect("read"), 200i32.to_be_bytes(), "two blocks of 4 bytes");
    f.close().await;
}

/// Ours: an integer block reserved at the top of `i32` wraps as Java's `int` (and Curator's
/// `CachedAtomicInteger`) does, and a cache factor below 1 is a typed error.
#[tokio::test]
async fn cached_integer_wraps_and_refuses_bad_factor() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("cached-int-wrap");
    let dai = DistributedAtomicInteger::new(&f.fw, &path, one_time()).expect("counter");
    dai.force_set(i32::MAX - 1).await.expect("set");
    let cached = CachedAtomicInteger::new(dai, 3).expect("cached");
    let mut got = Vec::new();
    for _ in 0..3 {
        let value = cached.next().await.expect("next");
        assert!(value.succeeded());
        got.push((value.pre_value, value.post_value));
    }
    assert_eq!(got, [(i32::MAX - 1, i32::MAX), (i32::MAX, i32::MIN), (i32::MIN, i32::MIN + 1)]);
    let check = DistributedAtomicInteger::new(&f.fw, &path, one_time()).expect("counter");
    assert_eq!(check.get().await.expect("get").post_value, i32::MIN + 1, "the block's end, wrapped");
    let dai = DistributedAtomicInteger::new(&f.fw, &path, one_time()).expect("counter");
    assert!(matches!(CachedAtomicInteger::new(dai, 0), Err(CuratorError::InvalidArgument { .. })));
    let dai = DistributedAtomicInteger::new(&f.fw, &path, one_time()).expect("counter");
    assert!(matches!(CachedAtomicInteger::new(dai, -5), Err(CuratorError::InvalidArgument { .. })));
    f.close().await;
}

/// Ours, in place of `TestCachedAtomicCounter.testWithError`: when reserving a block does not
/// succeed (its only try lost to another writer), `next` does not succeed either, and a later
/// call tries again.
#[tokio::test]
async fn cached_reservation_not_succeeding() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("cached-fail");
    let blocked = DistributedAtomicLong::new(&f.fw, &path, RetryNTimes::new(0, Duration::ZERO)).expect("counter");
    blocked.initialize(0).await.expect("initialize");
    let cached = CachedAtomicLong::new(blocked, 10).expect("cached");
    // Keep the node changing so that the reservation's single try keeps losing.
    let writer = {
        let fw = f.client().await;
        let path = path.clone();
        tokio::spawn(async move {
            let other = DistributedAtomicLong::new(&fw, &path, RetryNTimes::new(0, Duration::ZERO)).expect("counter");
            loop {
                let _ = other.force_set(0).await;
            }
        })
    };
    let failed =
        eventually(Timing::new().deadline(), || async { !cached.next().await.expect("next").succeeded() }).await;
    writer.abort();
    assert!(failed, "a reservation that lost its only try does not succeed");
    assert!(eventually(Timing::new().deadline(), || async { cached.next().await.expect("next").succeeded() }).await);
    f.close().await;
}

/// Ours: bad input is a typed error, before anything is sent.
#[tokio::test]
async fn bad_input() {
    init_tracing();
    let f = Fixture::shared().await;
    assert!(matches!(DistributedAtomicLong::new(&f.fw, "no-slash", one_time()), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(DistributedAtomicValue::new(&f.fw, "/a//b", one_time()), Err(CuratorError::InvalidPath { .. })));
    assert!(matches!(PromotedToLock::new("/x/"), Err(CuratorError::InvalidPath { .. })));
    let dal = DistributedAtomicLong::new(&f.fw, &unique_path("bad"), one_time()).expect("counter");
    assert!(matches!(CachedAtomicLong::new(dal, 0), Err(CuratorError::InvalidArgument { .. })));
    let value = DistributedAtomicValue::new(&f.fw, &unique_path("big"), one_time()).expect("value");
    assert!(matches!(value.try_set(&vec![0; 2 << 20]).await, Err(CuratorError::DataTooLarge { .. })));
    f.close().await;
}

/// Ours: `DistributedAtomicValue` on bytes, `initialize` once, and the write tag (a child of
/// the node) goes when the handle is dropped.
#[tokio::test]
async fn value_initialize_and_write_tag() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("bytes");
    let value = DistributedAtomicValue::new(&f.fw, &path, one_time()).expect("value");
    assert_eq!(value.get().await.expect("get").post_value, Vec::<u8>::new(), "missing reads as empty");
    assert!(value.initialize(b"a").await.expect("initialize"));
    assert!(!value.initialize(b"b").await.expect("initialize"));
    let set = value.try_set(b"c").await.expect("try set");
    assert!(set.succeeded());
    assert_eq!((set.pre_value.as_slice(), set.post_value.as_slice()), (&b"a"[..], &b"c"[..]));
    assert!(value.compare_and_set(b"c", b"d").await.expect("cas").succeeded());
    let children = f.fw.get_children().for_path(&path).await.expect("children");
    assert_eq!(children.len(), 1);
    assert!(children[0].starts_with(WRITE_TAG_PREFIX), "{children:?}");
    let stat = f.fw.check_exists().for_path(&format!("{path}/{}", children[0])).await.expect("exists").expect("tag");
    assert_eq!(stat.version, 2, "one bump per write after the one that made it");
    assert_eq!(stat.ephemeral_owner, 0, "persistent: it outlives a session");
    drop(value);
    assert!(
        eventually(Timing::new().deadline(), || async {
            f.fw.get_children().for_path(&path).await.expect("children").is_empty()
        })
        .await,
        "the tag is deleted with its handle"
    );
    f.close().await;
}
