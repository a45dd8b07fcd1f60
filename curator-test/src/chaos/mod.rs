//! Tools for seeded, repeatable chaos tests of distributed locks (or anything that holds
//! something through a ZooKeeper session).
//!
//! The pieces:
//! - [`ChaosRng`]: a small seeded generator; [`ChaosRng::seed_from_env`] reads a seed to
//!   repeat a run or makes (and logs) a new one.
//! - [`Target`]: one client under test, connected through a [`ChaosProxy`](crate::ChaosProxy),
//!   with a way to find its session and a flag that says it is holding.
//! - [`Ensemble`]: the servers, a [`TestingServer`](crate::TestingServer) or a
//!   [`TestingCluster`](crate::TestingCluster) behind a tokio mutex.
//! - [`Injector`]: picks [`Fault`]s at random from the seed and does them one at a time until
//!   a deadline, leaves everything as it found it, and returns a [`ChaosRecord`].

mod apply;
mod fault;
mod injector;
mod plan;
mod record;
mod rng;
mod target;

pub use fault::{Fault, FaultKind};
pub use injector::{Injector, InjectorBuilder};
pub use plan::Planned;
pub use record::{ChaosRecord, FaultEvent};
pub use rng::ChaosRng;
pub use target::{Ensemble, SessionSource, Target};
