//! Recording the tracing events a test's code emits, to assert what is logged (and what is
//! not). The tests using it run on a current-thread runtime, so that the framework's tasks
//! (the session manager, background cleanups) run on the test's thread, where the recorder is
//! the default subscriber.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// Every event seen: level, target and message.
#[derive(Clone, Default)]
pub struct Events(Arc<Mutex<Vec<(tracing::Level, String, String)>>>);

impl Events {
    /// The events at `level` whose target starts with `target`, as `target: message`.
    pub fn at(&self, level: tracing::Level, target: &str) -> Vec<String> {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .filter(|(l, t, _)| *l == level && t.starts_with(target))
            .map(|(_, t, m)| format!("{t}: {m}"))
            .collect()
    }

    /// Forgets the events seen so far.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Every event, as `LEVEL target: message`.
    pub fn all(&self) -> Vec<String> {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter().map(|(l, t, m)| format!("{l} {t}: {m}")).collect()
    }
}

struct Recorder(Events);

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let meta = event.metadata();
        (self.0).0.lock().unwrap_or_else(|e| e.into_inner()).push((
            *meta.level(),
            meta.target().to_string(),
            message.0,
        ));
    }
}

/// Records the events of this thread (and logs warnings to the test's output) until the guard
/// is dropped.
pub fn record_events() -> (Events, tracing::subscriber::DefaultGuard) {
    let events = Events::default();
    let subscriber = tracing_subscriber::registry().with(Recorder(events.clone())).with(
        tracing_subscriber::fmt::layer().with_test_writer().with_filter(tracing_subscriber::filter::LevelFilter::WARN),
    );
    (events, tracing::subscriber::set_default(subscriber))
}
