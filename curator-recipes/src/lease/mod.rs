//! Leases held for a time, with no session tie: [`TimedLease`] (kazoo's `NonBlockingLease`)
//! and [`MultiTimedLease`] (kazoo's `MultiNonBlockingLease`). Design: docs/architecture.md
//! section 20.

mod grant;
mod multi;
mod node;
mod record;
mod timed;

pub use grant::{LeaseGrant, LeaseLost};
pub use multi::MultiTimedLease;
pub use timed::TimedLease;
