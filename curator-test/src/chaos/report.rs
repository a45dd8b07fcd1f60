//! [`Report`]: the verdict on a chaos run, for a test's assertion and a soak's summary line.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use super::record::ChaosRecord;

/// What [`Checker::report`](super::Checker::report) needs beyond the checker's own ledger.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportInputs<'a> {
    /// The injector's record: the seed and the faults by kind go into the report.
    pub record: Option<&'a ChaosRecord>,
    /// Lock nodes left behind by no live contender, as the scenario counted them.
    pub orphans: u64,
    /// Locks that nobody could acquire any more at the end, as the scenario found them.
    pub wedged_locks: u64,
    /// An acquire attempt still open at report time is hung if it has been open this long
    /// since `calm_since` (or since it began, if later). Zero: every open attempt is hung; see
    /// also [`Checker::settle`](super::Checker::settle). Attempts that took longer than this
    /// and did end are counted as [`Report::slow_acquires`], not as hung.
    pub hung_after: Duration,
    /// When the faults stopped and everything was put back (the record's
    /// [`ended`](ChaosRecord::ended)). `None`: attempts are judged from when they began.
    ///
    /// An acquire must end within a bounded time after its connection settles. While faults
    /// keep coming, a waiter can be overtaken again and again (each session it loses sends it
    /// to the back of the queue); that is starvation under faults, reported as
    /// [`slow_acquires`](Report::slow_acquires). An attempt still open `hung_after` after the
    /// faults stopped is hung: no fault excuses it any more.
    pub calm_since: Option<std::time::Instant>,
}

/// The verdict on a chaos run. [`is_clean`](Self::is_clean) when nothing went wrong;
/// `Display` gives a summary line and the faults by kind (`{:#}` adds the violations found),
/// [`to_json`](Self::to_json) and [`to_key_values`](Self::to_key_values) one line for a soak
/// log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The injector's seed, when a record was given.
    pub seed: Option<u64>,
    /// Holds reported.
    pub holds: u64,
    /// Of those, exclusive ones.
    pub exclusive_holds: u64,
    /// Pairs of conflicting holds at once where the earlier holder had not been signalled: the
    /// safety violation.
    pub overlaps: u64,
    /// Pairs of conflicting holds at once where the earlier holder had been signalled (lost or
    /// expired) before the later grant: expected under faults.
    pub signalled_overlaps: u64,
    /// Read-modify-writes of the shared counter completed.
    pub increments: u64,
    /// The counter's final value.
    pub counter: u64,
    /// Increments overwritten by a concurrent holder (`increments - counter`), less the
    /// excused ones.
    pub lost_increments: u64,
    /// Increments overwritten by a holder whose session had been expired by force, unknown to
    /// it, before the other's grant (see [`Checker::report`](super::Checker::report)).
    pub excused_lost_increments: u64,
    /// Exclusive grants whose token was not above every earlier exclusive grant's.
    pub token_inversions: u64,
    /// Acquire attempts reported.
    pub acquires: u64,
    /// Acquire attempts still open [`hung_after`](ReportInputs::hung_after) after the faults
    /// stopped ([`calm_since`](ReportInputs::calm_since)).
    pub hung_acquirers: u64,
    /// Acquire attempts that returned, or were still open, after waiting longer than
    /// [`hung_after`](ReportInputs::hung_after) while faults went on: starvation, not a
    /// violation (see [`ReportInputs::calm_since`]).
    pub slow_acquires: u64,
    /// The longest wait of any acquire attempt (open ones up to report time), in milliseconds.
    pub longest_wait_ms: u64,
    /// The longest wait, in words: who waited, from when, and what happened meanwhile.
    pub longest_wait: Option<String>,
    /// As given in [`ReportInputs::orphans`].
    pub orphans: u64,
    /// As given in [`ReportInputs::wedged_locks`].
    pub wedged_locks: u64,
    /// Forced session expiries the checker knew of.
    pub forced_expiries: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Faults skipped, by kind.
    pub skipped_faults: BTreeMap<&'static str, u64>,
    /// Things the injector could not put right at the end.
    pub restore_errors: u64,
    /// The first few violations, in words.
    pub violations: Vec<String>,
}

impl Report {
    /// True when no violation was found: no unsignalled overlap, no lost increment, no token
    /// inversion, no hung acquirer, no orphan, no wedged lock, and everything restored.
    pub fn is_clean(&self) -> bool {
        self.problems().iter().all(|&(_, n)| n == 0)
    }

    /// The counts that must be zero.
    fn problems(&self) -> [(&'static str, u64); 7] {
        [
            ("overlaps", self.overlaps),
            ("lost_increments", self.lost_increments),
            ("token_inversions", self.token_inversions),
            ("hung_acquirers", self.hung_acquirers),
            ("orphans", self.orphans),
            ("wedged_locks", self.wedged_locks),
            ("restore_errors", self.restore_errors),
        ]
    }

    /// The counts that describe the run.
    fn volume(&self) -> [(&'static str, u64); 10] {
        [
            ("holds", self.holds),
            ("exclusive_holds", self.exclusive_holds),
            ("signalled_overlaps", self.signalled_overlaps),
            ("excused_lost_increments", self.excused_lost_increments),
            ("increments", self.increments),
            ("counter", self.counter),
            ("acquires", self.acquires),
            ("forced_expiries", self.forced_expiries),
            ("slow_acquires", self.slow_acquires),
            ("longest_wait_ms", self.longest_wait_ms),
        ]
    }

    /// The report as one line of JSON: the seed (or `null`), `clean`, every count, `faults`
    /// and `skipped_faults` as objects by kind, and `violations` as an array of strings.
    pub fn to_json(&self) -> String {
        let seed = self.seed.map_or_else(|| "null".to_string(), |s| s.to_string());
        let mut out = format!("{{\"seed\":{seed}");
        write!(out, ",\"clean\":{}", self.is_clean()).ok();
        for (key, n) in self.problems().into_iter().chain(self.volume()) {
            write!(out, ",\"{key}\":{n}").ok();
        }
        for (key, map) in [("faults", &self.faults), ("skipped_faults", &self.skipped_faults)] {
            let fields: Vec<String> = map.iter().map(|(k, n)| format!("{}:{n}", json_string(k))).collect();
            write!(out, ",\"{key}\":{{{}}}", fields.join(",")).ok();
        }
        let violations: Vec<String> = self.violations.iter().map(|v| json_string(v)).collect();
        write!(out, ",\"violations\":[{}]}}", violations.join(",")).ok();
        out
    }

    /// The report as one line of `key=value` pairs (no violation texts): `seed=42 clean=true
    /// overlaps=0 ... fault.cut=3 skipped.expire=1`.
    pub fn to_key_values(&self) -> String {
        let mut out = match self.seed {
            Some(seed) => format!("seed={seed}"),
            None => "seed=none".to_string(),
        };
        write!(out, " clean={}", self.is_clean()).ok();
        for (key, n) in self.problems().into_iter().chain(self.volume()) {
            write!(out, " {key}={n}").ok();
        }
        for (prefix, map) in [("fault", &self.faults), ("skipped", &self.skipped_faults)] {
            for (kind, n) in map {
                write!(out, " {prefix}.{kind}={n}").ok();
            }
        }
        out
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                write!(out, "\\u{:04x}", u32::from(c)).ok();
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn by_kind(map: &BTreeMap<&'static str, u64>) -> String {
    map.iter().map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(" ")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seed {
            Some(seed) => write!(f, "chaos seed={seed} ")?,
            None => write!(f, "chaos ")?,
        }
        f.write_str(if self.is_clean() { "CLEAN:" } else { "VIOLATIONS:" })?;
        for (key, n) in self.problems() {
            write!(f, " {key}={n}")?;
        }
        f.write_str(";")?;
        for (key, n) in self.volume() {
            write!(f, " {key}={n}")?;
        }
        f.write_str("\nfaults:")?;
        if self.faults.is_empty() {
            f.write_str(" none")?;
        } else {
            write!(f, " {}", by_kind(&self.faults))?;
        }
        if !self.skipped_faults.is_empty() {
            write!(f, "; skipped: {}", by_kind(&self.skipped_faults))?;
        }
        if f.alternate() {
            for v in &self.violations {
                write!(f, "\n  {v}")?;
            }
            if let Some(longest) = &self.longest_wait {
                write!(f, "\nlongest wait: {longest}")?;
            }
        }
        Ok(())
    }
}
