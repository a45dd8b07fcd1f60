//! Reaping the write tags left behind (docs/architecture.md section 16.2, "Tags left behind"):
//! a handle that makes its own tag lists the parent, reads the other tags' stats in one round
//! and deletes, each at the version read, those unwritten for longer than the reap age by the
//! server's clock. A tag written meanwhile fails the version check and is kept; a tag made again
//! has a fresh name (module `write_tag`), so no delete of an old name can take it.

use std::time::Duration;

use zookeeper_client as zk;

use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::path;

use super::WRITE_TAG_PREFIX;

/// Deletes the write tags under `path`, other than `own`, unwritten for longer than `age`
/// (section 16.2). Its failures are logged, never reported: it runs in the background of a
/// write that already succeeded.
pub(super) async fn reap(fw: &CuratorFramework, path: &str, own: &str, age: Duration) {
    let reaped = async {
        let stale = stale_tags(fw, path, own, age).await?;
        if stale.is_empty() {
            return Ok(0);
        }
        delete_tags(fw, path, &stale).await
    };
    match reaped.await {
        Ok(0) => {}
        Ok(n) => tracing::info!(path, reaped = n, "write tag: deleted write tags left behind"),
        Err(CuratorError::Closed) => tracing::debug!(path, "write tag: write tags not reaped: closed"),
        Err(err) => tracing::warn!(path, error = %err, "write tag: write tags left behind not reaped"),
    }
}

/// The write tags under `path`, other than `own`, whose mtime is older than `age` by the
/// server's clock, each with the version read: one listing (whose stat of `path` gives the
/// server's time: its mtime is that of the latest write of the value, ours included), then the
/// tags' stats in one round.
async fn stale_tags(fw: &CuratorFramework, path: &str, own: &str, age: Duration) -> Result<Vec<(String, i32)>> {
    let (children, parent) = fw
        .call_with_retry("get_children (write tags)", path, |session, _| async move {
            tracing::debug!(path, "write tag: listing write tags");
            session.client().get_children(path).await.map_err(|e| CuratorError::from_zk(path, e))
        })
        .await?;
    let tags: Vec<String> = children
        .iter()
        .filter(|c| c.starts_with(WRITE_TAG_PREFIX))
        .map(|c| path::make_path(path, c))
        .filter(|t| t != own)
        .collect();
    if tags.is_empty() {
        return Ok(Vec::new());
    }
    let stats = fw
        .call_with_retry("check_stat (write tags)", path, |session, _| {
            let tags = &tags;
            async move {
                let client = session.client();
                // Every read is queued before any is awaited: one round trip (section 2.1).
                let reads: Vec<_> = tags
                    .iter()
                    .map(|tag| {
                        tracing::debug!(path = %tag, "write tag: stat of a write tag");
                        client.check_stat(tag)
                    })
                    .collect();
                let mut stats = Vec::with_capacity(reads.len());
                for (read, tag) in futures::future::join_all(reads).await.into_iter().zip(tags) {
                    stats.push(read.map_err(|e| CuratorError::from_zk(tag, e))?);
                }
                Ok(stats)
            }
        })
        .await?;
    let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    Ok(tags
        .into_iter()
        .zip(stats)
        .filter_map(|(tag, stat)| {
            let stat = stat?;
            (parent.mtime.saturating_sub(stat.mtime) > age).then_some((tag, stat.version))
        })
        .collect())
}

/// Deletes each of `tags` at the version read, in one round: a tag written since (its handle
/// is alive) fails the version check and is kept. The number deleted.
async fn delete_tags(fw: &CuratorFramework, path: &str, tags: &[(String, i32)]) -> Result<usize> {
    fw.call_with_retry("delete (write tags)", path, |session, _| async move {
        let deletes = tags
            .iter()
            .map(|(tag, version)| {
                tracing::debug!(path = %tag, version, "write tag: deleting a write tag left behind");
                session.delete(tag, Some(*version))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut deleted = 0;
        for (done, (tag, _)) in futures::future::join_all(deletes).await.into_iter().zip(tags) {
            match done {
                Ok(()) => deleted += 1,
                Err(zk::Error::BadVersion) => {
                    tracing::debug!(path = %tag, "write tag: write tag written since it was read: kept")
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(CuratorError::from_zk(tag, e)),
            }
        }
        Ok(deleted)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The reaper's two rounds with a write between them, against a real server: a tag bumped
    /// after the reaper read it fails its delete's version check and is kept; a tag not
    /// written since is deleted; a tag younger than the reap age is not listed, nor our own.
    #[tokio::test]
    async fn a_tag_bumped_after_the_reaper_read_it_is_kept() {
        let server = curator_test::TestingServer::shared();
        let fw = CuratorFramework::builder().connect_string(server.connect_string()).build().expect("options");
        fw.start().expect("start");
        fw.block_until_connected(Duration::from_secs(30)).await.expect("connected");
        let path = format!("/reap-unit-{}", uuid::Uuid::new_v4());
        let name = |n: &str| format!("{WRITE_TAG_PREFIX}{n}");
        let tag = |n: &str| path::make_path(&path, &name(n));
        fw.create().for_path(&path, Vec::new()).await.expect("value");
        for n in ["left", "bumped", "own"] {
            fw.create().for_path(&tag(n), Vec::new()).await.expect("tag");
        }
        let age = Duration::from_millis(100);
        // The reaper's time is the value's mtime: write it until the server's clock is past
        // the tags' by more than `age`.
        let made = fw.check_exists().for_path(&tag("own")).await.expect("stat").expect("tag").mtime;
        let past = curator_test::eventually(Duration::from_secs(30), || async {
            fw.set_data().for_path(&path, Vec::new()).await.expect("write").mtime - made > 100
        })
        .await;
        assert!(past, "the server's clock did not move");
        fw.create().for_path(&tag("young"), Vec::new()).await.expect("young tag");

        let mut stale = stale_tags(&fw, &path, &tag("own"), age).await.expect("read");
        stale.sort();
        assert_eq!(stale, vec![(tag("bumped"), 0), (tag("left"), 0)]);
        fw.set_data().for_path(&tag("bumped"), Vec::new()).await.expect("bump");
        assert_eq!(delete_tags(&fw, &path, &stale).await.expect("delete"), 1);
        let mut kept = fw.get_children().for_path(&path).await.expect("children");
        kept.sort();
        assert_eq!(kept, vec![name("bumped"), name("own"), name("young")]);
        fw.delete().deleting_children_if_needed().for_path(&path).await.expect("cleanup");
        fw.close().await;
    }
}
