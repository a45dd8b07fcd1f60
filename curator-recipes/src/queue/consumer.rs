//! The consuming task: one per started queue with a consumer.
//!
//! ```text
//! List : getChildren+watch(P) -> names starting with queue-, sorted (module order)
//!        NoNode (P deleted, CURATOR-308): create P again (persistent, as Curator) -> List
//!        error: report it, pause (retry policy's pause, else the cleanup backoff) -> List
//! Take : each name whose time has come, in order: take it (module take) -> List
//!        priority queue, after `refresh_after` items: the watch fired -> List (re-sort)
//!        none: wait for the watch, the first delayed name's time, or stop -> List
//! ```
//! Stop (the queue's `close`) is looked at between items and while waiting; in lock-safe mode
//! it also abandons the item in hand (module take).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::CuratorError;
use futures::FutureExt;
use tokio::sync::watch;

use super::order::QUEUE_ITEM_NAME;
use super::shared::{self, QueueEvent, Shared};
use super::take;

/// Runs until `stop` says so or the framework closes.
pub(crate) async fn run<T: Send + Sync + 'static>(q: Arc<Shared<T>>, mut stop: watch::Receiver<bool>) {
    let mut pauses = q.fw.retry_loop();
    let mut backoff = q.fw.cleanup_retry_loop();
    while !*stop.borrow() {
        tracing::debug!(path = %q.path, "queue: getChildren+watch");
        let listed = tokio::select! {
            listed = q.fw.get_children().for_path_and_watch(&q.path) => listed,
            _ = stop.changed() => return,
        };
        let (mut names, mut fired) = match listed {
            Ok((names, _, watch)) => (names, Box::pin(watch.changed())),
            Err(CuratorError::Closed) => return,
            Err(CuratorError::NoNode { .. }) => {
                tracing::debug!(path = %q.path, "queue: the path is gone (deleted, or its parent reaped): create it again");
                if let Err(err) = shared::create_path(&q.fw, &q.path).await {
                    pause(&q, &mut stop, &mut pauses, &mut backoff, err).await;
                }
                continue;
            }
            Err(err) => {
                pause(&q, &mut stop, &mut pauses, &mut backoff, err).await;
                continue;
            }
        };
        pauses.reset();
        backoff.reset();
        names.retain(|name| name.starts_with(QUEUE_ITEM_NAME));
        q.order.sort(&mut names);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let ready = names.iter().take_while(|name| q.order.delay(name, now).is_zero()).count();
        if ready == 0 {
            let first_due = names.first().map(|name| q.order.delay(name, now));
            tokio::select! {
                _ = &mut fired => {}
                _ = tokio::time::sleep(first_due.unwrap_or(Duration::MAX)), if first_due.is_some() => {}
                _ = stop.changed() => return,
            }
            continue;
        }
        for (taken, name) in names[..ready].iter().enumerate() {
            if *stop.borrow() || q.fw.is_closed() {
                return;
            }
            // Curator's `minItemsBeforeRefresh`: a changed queue is sorted again first.
            if q.refresh_after.is_some_and(|min| taken >= min) && (&mut fired).now_or_never().is_some() {
                tracing::debug!(path = %q.path, taken, "queue: children changed: listing again");
                break;
            }
            take::take(&q, name, &mut stop).await;
        }
    }
}

/// Reports `err` and waits before the next listing: the retry policy's pause while it allows
/// one, then the cleanup loop's backoff (the task never gives up while the queue is open).
async fn pause<T: Send + Sync + 'static>(
    q: &Shared<T>,
    stop: &mut watch::Receiver<bool>,
    pauses: &mut curator_core::RetryLoop,
    backoff: &mut curator_core::RetryLoop,
    err: CuratorError,
) {
    tracing::warn!(path = %q.path, error = %err, "queue: consuming task error; going on after a pause");
    let wait = pauses.next_pause(&err).or_else(|| backoff.next_pause(&err)).unwrap_or(Duration::from_secs(1));
    q.events.publish(QueueEvent::Error { error: err });
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = stop.changed() => {}
    }
}
