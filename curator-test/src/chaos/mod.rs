//! Tools for seeded, repeatable chaos tests of distributed locks (or anything that holds
//! something through a ZooKeeper session).
//!
//! - [`ChaosRng`]: a small seeded generator; [`ChaosRng::seed_from_env`] reads a seed to
//!   repeat a run or makes (and logs) a new one.
//! - [`Fault`] and [`FaultKind`]: the faults a chaos run can inject.

mod fault;
mod rng;

pub use fault::{Fault, FaultKind};
pub use rng::ChaosRng;
