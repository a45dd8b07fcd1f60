//! The consuming task: one per started queue with a consumer.
//!
//! ```text
//! List : getChildren+watch(P) -> names starting with queue-, sorted (module order)
//!        NoNode (P deleted, CURATOR-308): create P again (persistent, as Curator) -> List
//!        error: report it, pause (retry policy's pause, else the cleanup backoff) -> List
//! Take : each name whose time has come, in order: take it (module take) -> List
//!        priority queue, after `refresh_after` items: the watch fired -> List (re-sort)
//!        none: wait for the watch, the first delayed name's time, or stop -> List
//!        no item handled (each held by another consumer, or failed): exists+watch on each
//!        holder's lock node, then wait for the listing's watch, a lock's deletion, stop, or
//!        (after a failure) the cleanup backoff, 50 ms doubling to 2 s -> List
//! ```
//! Stop (the queue's `close`) is looked at between items and while waiting; in lock-safe mode
//! it also abandons the item in hand (module take).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::CuratorError;
use futures::future::{select_all, BoxFuture};
use futures::FutureExt;
use tokio::sync::watch;

use super::order::QUEUE_ITEM_NAME;
use super::shared::{self, QueueEvent, Shared};
use super::take::{self, Taken};

/// Runs until `stop` says so or the framework closes.
pub(crate) async fn run<T: Send + Sync + 'static>(q: Arc<Shared<T>>, mut stop: watch::Receiver<bool>) {
    let mut pauses = q.fw.retry_loop();
    let mut backoff = q.fw.cleanup_retry_loop();
    // Pauses after passes in which every take failed: the cleanup backoff, reset by progress.
    let mut failed_passes = q.fw.cleanup_retry_loop();
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
        let (mut handled, mut failed, mut held) = (false, false, Vec::new());
        for (taken, name) in names[..ready].iter().enumerate() {
            if *stop.borrow() || q.fw.is_closed() {
                return;
            }
            // Curator's `minItemsBeforeRefresh`: a changed queue is sorted again first.
            if q.refresh_after.is_some_and(|min| taken >= min) && (&mut fired).now_or_never().is_some() {
                tracing::debug!(path = %q.path, taken, "queue: children changed: listing again");
                handled = true;
                break;
            }
            match take::take(&q, name, &mut stop).await {
                Taken::Handled => handled = true,
                Taken::HeldElsewhere(lock) => held.push(lock),
                Taken::Failed => failed = true,
            }
        }
        if handled {
            failed_passes.reset();
            continue;
        }
        // Nothing moved: listing again at once would only meet the same locks (a loop of
        // getChildren and creates for as long as another consumer holds an item).
        let pause = if failed { failed_passes.next_pause_after_failure() } else { None };
        tracing::debug!(path = %q.path, held = held.len(), ?pause, "queue: no item handled: waiting for a change");
        tokio::select! {
            _ = &mut fired => {}
            () = lock_released(&q.fw, &held) => {}
            () = tokio::time::sleep(pause.unwrap_or(Duration::MAX)), if pause.is_some() => {}
            _ = stop.changed() => return,
        }
    }
}

/// Resolves once one of the lock nodes at `locks` is deleted (another consumer let its item
/// go, or finished it), or is gone already, or its watch ends with the session; pending when
/// there are none.
fn lock_released(fw: &curator_core::CuratorFramework, locks: &[String]) -> impl Future<Output = ()> + Send + 'static {
    let (fw, locks) = (fw.clone(), locks.to_vec());
    async move {
        if locks.is_empty() {
            return futures::future::pending().await;
        }
        let Ok(session) = fw.session().await else { return };
        let client = session.client().clone();
        let mut watches: Vec<BoxFuture<'static, ()>> = Vec::new();
        for lock in &locks {
            tracing::debug!(path = %lock, "queue: exists+watch (another consumer's lock)");
            match client.check_and_watch_stat(lock).await {
                Ok((Some(_), watcher)) => watches.push(watcher.changed().map(|_| ()).boxed()),
                // Gone already, or no answer: look again now.
                Ok((None, _)) | Err(_) => return,
            }
        }
        select_all(watches).await;
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
