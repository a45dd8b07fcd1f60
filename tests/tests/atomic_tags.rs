//! Ours: write tags left behind are reaped (docs/architecture.md section 16.2). A handle that
//! makes its tag deletes every other tag unwritten for longer than the reap age, each at the
//! version it read; a live handle whose idle tag was reaped makes it again on its next write.
//! The version check itself (a tag bumped after the reaper read it is kept) is a unit test of
//! the reaper's two rounds in `curator-recipes/src/atomic/optimistic.rs`, since no public call
//! stops between them.
//!
//! Tags can't be given an old mtime, so these tests use a short reap age and wait, by polling a
//! scratch node's mtime with a deadline, until the server's clock has passed it.

use std::time::Duration;

use curator_core::CuratorFramework;
use curator_core::{ExponentialBackoffRetry, RetryNTimes};
use curator_recipes::{DistributedAtomicLong, WRITE_TAG_PREFIX};
use curator_test::{eventually, Timing};
use tests::fixture::{init_tracing, unique_path, Fixture};
use tests::zk::server_clock_past;

/// Short enough for a test, long enough for a write and its decision on a loaded machine.
const AGE: Duration = Duration::from_millis(300);

/// The write tags under `path`, sorted.
async fn tags(fw: &CuratorFramework, path: &str) -> Vec<String> {
    let mut tags: Vec<String> = fw
        .get_children()
        .for_path(path)
        .await
        .expect("children")
        .into_iter()
        .filter(|c| c.starts_with(WRITE_TAG_PREFIX))
        .collect();
    tags.sort();
    tags
}

/// The mtime (ms) of `path/tag`.
async fn mtime(fw: &CuratorFramework, path: &str, tag: &str) -> i64 {
    fw.check_exists().for_path(&format!("{path}/{tag}")).await.expect("exists").expect("tag").mtime
}

/// A handle forgotten without its drop (as a crashed process leaves its tag) and a tag made by
/// hand are deleted by the next handle's first write, once older than its reap age; a child
/// that is not a write tag is kept. Before reaping, both tags stayed for good.
#[tokio::test]
async fn tags_left_behind_are_reaped_by_the_next_first_write() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("reaped");
    let policy = || ExponentialBackoffRetry::new(Duration::from_millis(5), 10);
    let crashed = DistributedAtomicLong::new(&f.fw, &path, policy()).expect("counter");
    assert_eq!(crashed.increment().await.expect("increment").post_value, 1);
    std::mem::forget(crashed);
    let by_hand = format!("{WRITE_TAG_PREFIX}by-hand");
    f.fw.create().for_path(&format!("{path}/{by_hand}"), Vec::new()).await.expect("tag by hand");
    f.fw.create().for_path(&format!("{path}/not-a-tag"), Vec::new()).await.expect("other child");
    let left = tags(&f.fw, &path).await;
    assert_eq!(left.len(), 2, "{left:?}");
    let newest = mtime(&f.fw, &path, &by_hand).await;
    server_clock_past(&f.fw, &format!("{path}-clock"), newest, AGE).await;

    let next = DistributedAtomicLong::new(&f.fw, &path, policy()).expect("counter").write_tag_reap_age(AGE);
    assert_eq!(next.increment().await.expect("increment").post_value, 2);
    let reaped = eventually(Timing::new().deadline(), || async {
        let now = tags(&f.fw, &path).await;
        now.len() == 1 && !left.contains(&now[0])
    })
    .await;
    assert!(reaped, "left behind: {:?} of {left:?}", tags(&f.fw, &path).await);
    assert!(f.fw.check_exists().for_path(&format!("{path}/not-a-tag")).await.expect("exists").is_some());
    assert_eq!(next.get().await.expect("get").post_value, 2);

    drop(next);
    assert!(eventually(Timing::new().deadline(), || async { tags(&f.fw, &path).await.is_empty() }).await);
    f.fw.delete().deleting_children_if_needed().for_path(&path).await.expect("cleanup");
    f.close().await;
}

/// A live handle idle past the reap age loses its tag to another handle's first write, then
/// writes again at once: its next increment succeeds in one try even with no retries allowed
/// (before, the missing tag cost a try counted as a conflict: with no retry the increment did
/// not succeed), it makes its tag again under a fresh name, and increments from both handles
/// stay exact.
#[tokio::test]
async fn idle_handle_whose_tag_was_reaped_writes_again() {
    init_tracing();
    let f = Fixture::shared().await;
    let path = unique_path("idle");
    let idle = DistributedAtomicLong::new(&f.fw, &path, RetryNTimes::new(0, Duration::ZERO)).expect("counter");
    assert_eq!(idle.increment().await.expect("increment").post_value, 1);
    let idle_tag = tags(&f.fw, &path).await;
    assert_eq!(idle_tag.len(), 1);
    let idle_mtime = mtime(&f.fw, &path, &idle_tag[0]).await;
    server_clock_past(&f.fw, &format!("{path}-clock"), idle_mtime, AGE).await;

    let policy = || ExponentialBackoffRetry::new(Duration::from_millis(5), 30);
    let other = DistributedAtomicLong::new(&f.fw, &path, policy()).expect("counter").write_tag_reap_age(AGE);
    assert_eq!(other.increment().await.expect("increment").post_value, 2);
    let reaped = eventually(Timing::new().deadline(), || async {
        let now = tags(&f.fw, &path).await;
        now.len() == 1 && now != idle_tag
    })
    .await;
    assert!(reaped, "the idle tag was not reaped: {:?}", tags(&f.fw, &path).await);

    let again = idle.increment().await.expect("increment");
    assert!(again.succeeded(), "{again:?}");
    assert_eq!((again.pre_value, again.post_value, again.stats.optimistic_tries), (2, 3, 1));
    let now = tags(&f.fw, &path).await;
    assert_eq!(now.len(), 2, "the idle handle made its tag again: {now:?}");
    // Under a fresh name: a delete aimed at the reaped one (a reaper's, resent after a lost
    // reply) can never take the new tag.
    assert!(!now.contains(&idle_tag[0]), "{now:?}");

    // Both handles, concurrently (the idle one's increments may not succeed, with no retry):
    // every success counted once.
    let (a, b) = tokio::join!(
        async {
            let mut n = 0;
            for _ in 0..40 {
                n += u32::from(idle.increment().await.expect("increment").succeeded());
            }
            n
        },
        async {
            let mut n = 0;
            for _ in 0..40 {
                n += u32::from(other.increment().await.expect("increment").succeeded());
            }
            n
        }
    );
    assert_eq!(other.get().await.expect("get").post_value, 3 + i64::from(a + b));
    drop((idle, other));
    f.fw.delete().deleting_children_if_needed().for_path(&path).await.expect("cleanup");
    f.close().await;
}
