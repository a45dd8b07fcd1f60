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
//! - [`Checker`]: contenders report grants, loss signals, releases and acquire attempts, and
//!   do read-modify-writes of a shared counter; [`Checker::report`] then finds overlapping
//!   holds nobody was warned about, lost increments, token inversions and hung acquirers,
//!   in a [`Report`].
//!
//! A scenario looks like this (the lock itself comes from elsewhere):
//!
//! ```no_run
//! # async fn f(proxies: Vec<std::sync::Arc<curator_test::ChaosProxy>>, clients: Vec<zookeeper_client::Client>)
//! # -> Result<(), curator_test::TestingError> {
//! use std::time::{Duration, Instant};
//! use curator_test::chaos::{ChaosRng, Checker, Injector, ReportInputs, Target};
//!
//! let seed = ChaosRng::seed_from_env("CHAOS_SEED");
//! let targets: Vec<Target> =
//!     proxies.iter().zip(&clients).map(|(p, c)| Target::for_client(p.clone(), c)).collect();
//! let checker = Checker::new();
//! let injector = Injector::builder(seed).targets(targets.clone()).build().await?;
//! let until = Instant::now() + Duration::from_secs(60);
//! let chaos = injector.spawn(until);
//! // ... contenders i = 0.. loop until `until`: begin_acquire, lock, end_acquire,
//! // targets[i].set_holding(true), begin_hold, read/await/write the counter, end_hold ...
//! let record = chaos.await.expect("the injector panicked");
//! checker.note_expiries(&record);
//! checker.settle(Duration::from_secs(30)).await;
//! let report = checker.report(ReportInputs { record: Some(&record), ..Default::default() });
//! assert!(report.is_clean(), "{report:#}");
//! # Ok(()) }
//! ```

mod analysis;
mod apply;
mod checker;
mod fault;
mod injector;
mod ledger;
mod plan;
mod record;
mod report;
mod rng;
mod target;

#[cfg(test)]
mod checker_tests;

pub use checker::{AcquireId, Checker, HoldId};
pub use fault::{Fault, FaultKind};
pub use injector::{Injector, InjectorBuilder};
pub use plan::Planned;
pub use record::{ChaosRecord, FaultEvent};
pub use report::{Report, ReportInputs};
pub use rng::ChaosRng;
pub use target::{Ensemble, SessionSource, Target};
