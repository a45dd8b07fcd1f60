//! Leader election, wire compatible with Apache Curator 5.x: Rust and Java participants of one
//! election agree on one leader.
//!
//! | recipe | nodes under the path `P` | leadership lasts |
//! |---|---|---|
//! | `LeaderLatch` | `P/_c_<uuid>-latch-<seq>`, data = participant id | until close, step down or loss |
//! | `LeaderSelector` | `P/_c_<uuid>-lock-<seq>` (a mutex), data = participant id | while the leadership function runs |
//!
//! Both are built on the crate's sequential-node core, as the locks are: a participant's node is
//! ephemeral sequential, the first in line leads, and each waiter watches the node(s) just
//! ahead of it (no herd when the leader goes).
//!
//! Past Curator: a term of leadership is a [`Leadership`] with a fencing token (the czxid of the
//! leader's node) and a `lost()` future that resolves before anyone else can be made leader;
//! [`Participant`]s are read from node data in one round trip.

mod first_step;
mod leadership;
pub(crate) mod participant;
mod rejoin;
mod selector;
pub use selector::{LeaderSelector, LeaderSelectorBuilder, SelectorEvent, TermEnd};

pub use crate::sequential::{HeldNode, LockLost, LEADER_LATCH_NAME, MUTEX_LOCK_NAME};
pub use leadership::Leadership;
pub use participant::Participant;

// The latch and the observer (issue 15, branch `latch`).
mod latch;
mod observe;
pub use latch::{CloseMode, LatchEvent, LatchState, LeaderLatch, LeaderLatchBuilder};
pub use observe::{Leader, LeaderObserver};
