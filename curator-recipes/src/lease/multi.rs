//! [`MultiTimedLease`]: one of `count` timed leases (kazoo's `MultiNonBlockingLease`).

use std::time::Duration;

use curator_core::{path, CuratorError, CuratorFramework, Result};

use super::grant::LeaseGrant;
use super::timed::TimedLease;

/// The most slots a [`MultiTimedLease`] may have.
const MAX_SLOTS: u32 = 1000;

/// At most `count` holders at once: `count` [`TimedLease`]s on the nodes `path/0` to
/// `path/<count - 1>`, tried in order (kazoo's `MultiNonBlockingLease`). A holder takes the
/// first slot it can: its own (renewal by identity), a missing one, or one it has seen
/// unchanged for the duration plus 1%.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::MultiTimedLease;
///
/// let minute = Duration::from_secs(60);
/// let a = MultiTimedLease::new(&fw, "/crawlers", 2, minute, "host-a")?;
/// let b = MultiTimedLease::new(&fw, "/crawlers", 2, minute, "host-b")?;
/// let c = MultiTimedLease::new(&fw, "/crawlers", 2, minute, "host-c")?;
/// assert_eq!(a.try_acquire().await?.expect("a slot").path(), "/crawlers/0");
/// assert_eq!(b.try_acquire().await?.expect("a slot").path(), "/crawlers/1");
/// assert!(c.try_acquire().await?.is_none()); // two at most
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiTimedLease {
    slots: Vec<TimedLease>,
}

impl MultiTimedLease {
    /// `count` (1 to 1000) slots under `path`, each held for `duration` by `holder`'s grants;
    /// bad input as [`TimedLease::new`], or [`InvalidArgument`](CuratorError::InvalidArgument)
    /// for the count.
    pub fn new(fw: &CuratorFramework, path: &str, count: u32, duration: Duration, holder: &str) -> Result<Self> {
        path::validate(path)?;
        if count == 0 || count > MAX_SLOTS {
            return Err(CuratorError::InvalidArgument {
                path: path.to_string(),
                reason: format!("a multi lease has 1 to {MAX_SLOTS} slots, not {count}"),
            });
        }
        let slots = (0..count)
            .map(|slot| TimedLease::new(fw, &path::make_path(path, &slot.to_string()), duration, holder))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { slots })
    }

    /// One attempt on each slot in order, without waiting: the first grant, or `None`. An
    /// error on a slot (its node unreadable, a connection lost) ends the attempt with it.
    pub async fn try_acquire(&self) -> Result<Option<LeaseGrant>> {
        for slot in &self.slots {
            if let Some(grant) = slot.try_acquire().await? {
                return Ok(Some(grant));
            }
        }
        Ok(None)
    }

    /// The slots' leases, in order.
    pub fn slots(&self) -> &[TimedLease] {
        &self.slots
    }
}
