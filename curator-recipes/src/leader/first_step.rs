//! The first outcome of a participant's start ([`curator_core::Lifecycle`]): for the
//! latch and the selector, ready once our node exists, or refused. One helper of each for both.

use std::convert::Infallible;
use std::future::Future;

use curator_core::Readiness;
use curator_core::{CuratorError, CuratorFramework};

use crate::sequential::cleanup::NodeReporter;

/// Runs `attempt`, an acquire that reports our node's path to `ours`, and reports `readiness`
/// ready as soon as that path is known (our node exists: the participant is in line), unless a
/// first outcome was reported already (also when `attempt` ends with our node made, granted).
/// Returns `attempt`'s output; dropping the future drops `attempt` (and runs its cleanup).
pub(super) async fn ready_once_in_line<T>(
    attempt: impl Future<Output = T>,
    ours: &NodeReporter,
    readiness: &Readiness,
) -> T {
    if readiness.is_reported() {
        return attempt.await;
    }
    let mut path = ours.subscribe();
    let in_line = async {
        // An error: the reporter is gone, and the participant with it; nothing to report.
        if path.wait_for(Option::is_some).await.is_ok() {
            readiness.ready();
        }
        std::future::pending::<Infallible>().await
    };
    let out = tokio::select! {
        out = attempt => out,
        never = in_line => match never {},
    };
    // The attempt may have made our node and ended (granted) in one poll, before `in_line` ran.
    if ours.borrow().is_some() {
        readiness.ready();
    }
    out
}

/// The first attempt of the participant `what` (of id `id`) to get in line at `path` was refused for good
/// (`err`, [`CuratorError::is_permanent`]): the framework's unhandled-error listeners hear it,
/// as they hear a later attempt's refusal (`rejoin.rs`) and as Curator's hear its latch's
/// (CURATOR-365), and then `readiness` is refused, which closes the participant (ignored if a
/// first outcome was reported already: the listeners are then the only ones told).
pub(super) fn refuse_first(
    fw: &CuratorFramework,
    readiness: &Readiness,
    (what, path, id): (&str, &str, &str),
    err: CuratorError,
) {
    tracing::warn!(path = %path, id = %id, error = %err, "{what}: the first attempt to get in line was refused; it ends");
    fw.report_unhandled(&format!("{what} {path}: could not get in line; it ends"), &err);
    readiness.refused(err);
}
