//! A `metrics` recorder for the metrics tests (`metrics.rs`, `metrics_recipes.rs`): it keeps
//! every value by key, and reads them back by name and labels.
//!
//! The facade's recorder is global to a process: a test binary installs this one on first use
//! ([`recorder`]) and runs its metrics tests one at a time ([`SERIAL`]), asserting on the
//! difference a test's events made.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ::metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use curator_test::{eventually, Timing};

/// A recorder that keeps every value, by key: counters and gauges as atomics, histograms as
/// their samples.
#[derive(Default)]
pub struct TestRecorder {
    counters: Mutex<HashMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<String, Arc<Samples>>>,
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl ::metrics::HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// `name{k1=v1,k2=v2}`, labels sorted by key.
fn key_text(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

fn text_of(key: &Key) -> String {
    let labels: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
    key_text(key.name(), &labels)
}

fn slot<T: Default>(map: &Mutex<HashMap<String, Arc<T>>>, key: String) -> Arc<T> {
    map.lock().unwrap().entry(key).or_default().clone()
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(slot(&self.counters, text_of(key)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(slot(&self.gauges, text_of(key)))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(slot(&self.histograms, text_of(key)))
    }
}

/// The process's recorder, installed on first use.
pub fn recorder() -> &'static TestRecorder {
    static RECORDER: OnceLock<&'static TestRecorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder: &'static TestRecorder = Box::leak(Box::default());
        ::metrics::set_global_recorder(recorder).expect("the only recorder of this process");
        recorder
    })
}

/// One test at a time: the recorder sees the whole process.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A counter's value with exactly `labels` (0 if never moved).
pub fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    recorder().counters.lock().unwrap().get(&key_text(name, labels)).map_or(0, |c| c.load(Ordering::Acquire))
}

/// The sum of a counter over every value of its other labels, given `labels`.
pub fn counter_sum(name: &str, labels: &[(&str, &str)]) -> u64 {
    let prefix = format!("{name}{{");
    let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    recorder()
        .counters
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| {
            let have: Vec<&str> = k[prefix.len()..k.len() - 1].split(',').collect();
            wanted.iter().all(|w| have.contains(&w.as_str()))
        })
        .map(|(_, c)| c.load(Ordering::Acquire))
        .sum()
}

/// A gauge's value with exactly `labels` (NaN if never set).
pub fn gauge(name: &str, labels: &[(&str, &str)]) -> f64 {
    let bits = recorder().gauges.lock().unwrap().get(&key_text(name, labels)).map(|g| g.load(Ordering::Acquire));
    bits.map_or(f64::NAN, f64::from_bits)
}

/// A histogram's samples with exactly `labels`, oldest first.
pub fn samples(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    let histograms = recorder().histograms.lock().unwrap();
    histograms.get(&key_text(name, labels)).map(|h| h.0.lock().unwrap().clone()).unwrap_or_default()
}

/// Polls `check` until it holds, within the test deadline: a hook may run just after the event
/// it records was handed over.
pub async fn settles(what: &str, check: impl Fn() -> bool) {
    let ok = eventually(Timing::new().deadline(), || {
        let ok = check();
        async move { ok }
    })
    .await;
    assert!(ok, "{what}");
}
