//! Leases held for a time, with no session tie: [`TimedLease`] (kazoo's `NonBlockingLease`)
//! and [`MultiTimedLease`] (kazoo's `MultiNonBlockingLease`). Design: docs/architecture.md
//! section 20.

mod multi;
mod record;
mod timed;

pub use multi::MultiTimedLease;
pub use timed::{LeaseGrant, LeaseLost, TimedLease};
