//! The write tag's names: its node-name prefix and the default age after which another
//! handle's tag counts as left behind (docs/architecture.md section 16.2). The optimistic loop
//! makes tags with them and the reaper finds and ages them, each importing them from here.

use std::time::Duration;

/// Name prefix of a write tag, a child of the value's node (section 5).
pub const WRITE_TAG_PREFIX: &str = "curator-rs-write-tag-";

/// How long another handle's write tag may go without a write before a handle that makes its
/// own tag deletes it as left behind (by a process that crashed, was killed or lost power):
/// one hour, unless set with `write_tag_reap_age` on the handle. It must exceed the longest
/// time a handle may take to decide a write whose reply was lost (docs/architecture.md
/// section 16.2); a live handle whose idle tag was reaped just makes it again.
pub const WRITE_TAG_REAP_AGE: Duration = Duration::from_secs(60 * 60);
