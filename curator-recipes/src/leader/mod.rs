//! Leader election: their guide is the crate root's "Leader election" section (lib.rs).

mod first_step;
mod leadership;
pub(crate) mod participant;
mod rejoin;
mod selector;
pub use selector::{LeaderSelector, LeaderSelectorBuilder, SelectorEvent, TermEnd};

pub use crate::sequential::LEADER_LATCH_NAME;
pub use leadership::Leadership;
pub use participant::Participant;

// The latch and the observer (issue 15, branch `latch`).
mod latch;
mod observe;
pub use latch::{CloseMode, LatchEvent, LatchState, LeaderLatch, LeaderLatchBuilder};
pub use observe::{Leader, LeaderObserver, Proclamation};

// A leader proclaims (issue 31 item 7).
mod proclaim;
pub use proclaim::PROCLAIMED_NODE_NAME;
