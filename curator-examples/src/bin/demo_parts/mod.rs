//! The demo's four parts and its list of checks.

pub(crate) mod config;
pub(crate) mod discovery;
pub(crate) mod locking;
pub(crate) mod membership;

use std::time::Duration;

/// The checks the demo prints; it exits 0 only if all held.
#[derive(Default)]
pub(crate) struct Checks {
    results: Vec<(String, bool, String)>,
}

impl Checks {
    /// Records and prints one check.
    pub(crate) fn record(&mut self, what: &str, ok: bool, detail: impl Into<String>) {
        let detail = detail.into();
        if ok {
            tracing::info!("  ✔ {what}  ({detail})");
        } else {
            tracing::error!("  ✘ {what}  ({detail})");
        }
        self.results.push((what.to_string(), ok, detail));
    }

    /// Prints the summary; true if every check held.
    pub(crate) fn summary(&self, took: Duration) -> bool {
        let passed = self.results.iter().filter(|r| r.1).count();
        let ok = passed == self.results.len() && !self.results.is_empty();
        tracing::info!("── {passed} of {} checks held, in {:.1} s ──", self.results.len(), took.as_secs_f64());
        ok
    }
}
