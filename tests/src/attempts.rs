//! Counting the session manager's attempts to open a session, from its own tracing events, to
//! show that a failing connection is retried with backoff (or not at all), never in a storm.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// Counts the "opening a session" events (one per attempt) emitted on this thread while the
/// guard of [`count_attempts`] lives. Run the test on a current-thread runtime, where the
/// session manager's task runs on the test's thread.
#[derive(Clone, Default)]
pub struct Attempts(Arc<AtomicUsize>);

impl Attempts {
    /// Attempts so far.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

struct Counter(Attempts);

impl<S: tracing::Subscriber> Layer<S> for Counter {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Message(bool);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" && format!("{value:?}") == "opening a session" {
                    self.0 = true;
                }
            }
        }
        let mut message = Message(false);
        event.record(&mut message);
        if message.0 {
            (self.0).0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Starts counting attempts on this thread (and logs warnings to the test's output); counting
/// stops when the guard is dropped.
pub fn count_attempts() -> (Attempts, tracing::subscriber::DefaultGuard) {
    let attempts = Attempts::default();
    let subscriber = tracing_subscriber::registry().with(Counter(attempts.clone())).with(
        tracing_subscriber::fmt::layer().with_test_writer().with_filter(tracing_subscriber::filter::LevelFilter::WARN),
    );
    (attempts, tracing::subscriber::set_default(subscriber))
}
