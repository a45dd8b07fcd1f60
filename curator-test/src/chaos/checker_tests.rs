//! The checker's judgement on synthetic histories.

use std::time::{Duration, Instant};

use super::record::{ChaosRecord, FaultEvent};
use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A checker and a base instant a minute ago; times are offsets from the base, so that holds
/// left open (which end when the report is made) end after all of them.
fn setup() -> (Checker, Instant) {
    let now = Instant::now();
    (Checker::new(), now.checked_sub(Duration::from_secs(60)).unwrap_or(now))
}

fn report(c: &Checker) -> Report {
    c.report(ReportInputs::default())
}

#[test]
fn overlapping_exclusive_holds_without_a_signal_are_a_violation() {
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t);
    let b = c.begin_hold_at(1, 2, true, t + ms(100));
    c.end_hold_at(a, t + ms(200));
    c.end_hold_at(b, t + ms(300));
    let r = report(&c);
    assert_eq!((r.overlaps, r.signalled_overlaps), (1, 0));
    assert!(!r.is_clean());
    assert_eq!(r.violations.len(), 1);
    assert!(r.violations[0].starts_with("overlap: hold 1 (contender 1"), "{}", r.violations[0]);
}

#[test]
fn a_loss_signal_before_the_later_grant_excuses_the_overlap() {
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t);
    c.lost(a, t + ms(50));
    c.lost(a, t + ms(500)); // only the first signal counts
    let b = c.begin_hold_at(1, 2, true, t + ms(100));
    c.end_hold_at(a, t + ms(200));
    c.end_hold_at(b, t + ms(300));
    let r = report(&c);
    assert_eq!((r.overlaps, r.signalled_overlaps), (0, 1));
    assert!(r.is_clean(), "{r:#}");
}

#[test]
fn a_loss_signal_after_the_later_grant_does_not() {
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t);
    let b = c.begin_hold_at(1, 2, true, t + ms(100));
    c.lost(a, t + ms(150));
    c.end_hold_at(a, t + ms(200));
    c.end_hold_at(b, t + ms(300));
    assert_eq!(report(&c).overlaps, 1);
}

#[test]
fn a_forced_expiry_during_the_hold_is_a_signal() {
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t + ms(10));
    // Before the hold, and of another contender: neither counts.
    c.forced_expiry(0, t);
    c.forced_expiry(1, t + ms(20));
    let b = c.begin_hold_at(1, 2, true, t + ms(100));
    c.end_hold_at(a, t + ms(200));
    c.end_hold_at(b, t + ms(300));
    assert_eq!(report(&c).overlaps, 1);

    c.forced_expiry(0, t + ms(60));
    let r = report(&c);
    assert_eq!((r.overlaps, r.signalled_overlaps, r.forced_expiries), (0, 1, 3));
}

#[test]
fn expiries_come_from_a_record_by_target_index() {
    let (c, t) = setup();
    let a = c.begin_hold_at(1, 1, true, t);
    let _b = c.begin_hold_at(0, 2, true, t + ms(100));
    c.end_hold_at(a, t + ms(200));
    let mut record = ChaosRecord::new(7, 2);
    record.expiries[1].push(t + ms(50));
    c.note_expiries(&record);
    let r = c.report(ReportInputs { record: Some(&record), ..Default::default() });
    assert_eq!((r.overlaps, r.signalled_overlaps, r.seed), (0, 1, Some(7)));
}

#[test]
fn shared_holds_conflict_only_with_exclusive_ones_and_a_contender_never_with_itself() {
    let (c, t) = setup();
    c.begin_hold_at(0, 1, false, t);
    c.begin_hold_at(1, 2, false, t + ms(10));
    assert_eq!(report(&c).overlaps, 0, "two readers at once are fine");
    // A writer's downgrade: the same contender holds write and read at once.
    c.begin_hold_at(2, 3, true, t + ms(20));
    c.begin_hold_at(2, 4, false, t + ms(30));
    // The open read holds of contenders 0 and 1 overlap contender 2's write hold.
    let r = report(&c);
    assert_eq!(r.overlaps, 2, "{r:#}");
}

#[test]
fn holds_one_after_another_are_clean_and_open_holds_end_now() {
    let (c, t) = setup();
    for i in 0..5u64 {
        let h = c.begin_hold_at(usize::try_from(i % 2).unwrap_or(0), i as i64, true, t + ms(i * 100));
        c.end_hold_at(h, t + ms(i * 100 + 100)); // ends exactly when the next begins
    }
    assert!(report(&c).is_clean());
    // A hold never released still counts as held when the report is made.
    c.begin_hold_at(0, 10, true, t + ms(600));
    c.begin_hold_at(1, 11, true, t + ms(700));
    assert_eq!(report(&c).overlaps, 1);
}

#[test]
fn token_inversions_are_counted_in_grant_order_over_exclusive_holds() {
    let (c, t) = setup();
    // Reported out of grant order on purpose: grant order is 5, 7, 6, 8, 8.
    for (at, token) in [(0, 5), (20, 6), (10, 7), (30, 8), (40, 8)] {
        let h = c.begin_hold_at(0, token, true, t + ms(at));
        c.end_hold_at(h, t + ms(at + 5));
    }
    c.begin_hold_at(1, 1, false, t + ms(50)); // shared holds carry no fencing promise
    let r = report(&c);
    assert_eq!(r.token_inversions, 2, "{r:#}");
    assert!(r.violations.iter().all(|v| v.starts_with("token inversion")));
}

#[test]
fn increments_overwritten_by_a_concurrent_holder_are_lost() {
    let c = Checker::new();
    // One after another: nothing lost.
    for _ in 0..3 {
        let v = c.read_counter();
        c.write_counter(v + 1);
        c.increment_done();
    }
    assert_eq!(report(&c).lost_increments, 0);
    // Two holders read the same value.
    let a = c.read_counter();
    let b = c.read_counter();
    c.write_counter(a + 1);
    c.increment_done();
    c.write_counter(b + 1);
    c.increment_done();
    let r = report(&c);
    assert_eq!((r.increments, r.counter, r.lost_increments), (5, 4, 1));
    assert!(!r.is_clean());
}

#[test]
fn acquires_open_past_the_grace_are_hung() {
    let (c, t) = setup();
    let old = t.checked_sub(ms(5_000)).unwrap_or(t);
    c.begin_acquire_at(0, old);
    let done = c.begin_acquire_at(1, old);
    c.end_acquire_at(done, t);
    c.begin_acquire(2);
    assert_eq!(c.open_acquires(), 2);
    let r = c.report(ReportInputs { hung_after: ms(1_000), ..Default::default() });
    assert_eq!((r.acquires, r.hung_acquirers), (3, 1));
    assert!(r.violations[0].starts_with("hung: acquire 0 of contender 0"), "{:?}", r.violations);
    assert_eq!(r.slow_acquires, 1, "acquire 1 waited 5 s and returned");
    assert_eq!(report(&c).hung_acquirers, 2, "with no grace every open attempt is hung");
}

#[test]
fn waits_during_the_faults_are_slow_and_only_waits_past_the_calm_are_hung() {
    let (c, t) = setup();
    // Faults went on until t + 50 s; the report is made at about t + 60 s.
    let calm = t + ms(50_000);
    c.begin_acquire_at(0, t); // open since t: 10 s past the calm
    c.begin_acquire_at(1, t + ms(55_000)); // open 5 s, all after the calm
    let slow = c.begin_acquire_at(2, t + ms(1_000));
    c.end_acquire_at(slow, t + ms(31_000)); // 30 s under faults, then granted
    let quick = c.begin_acquire_at(3, t + ms(2_000));
    c.end_acquire_at(quick, t + ms(2_500));
    let inputs =
        |secs: u64| ReportInputs { hung_after: ms(secs * 1_000), calm_since: Some(calm), ..Default::default() };

    let r = c.report(inputs(8));
    assert_eq!((r.acquires, r.hung_acquirers, r.slow_acquires), (4, 1, 1));
    assert!(r.violations[0].starts_with("hung: acquire 0 of contender 0 began at +"), "{:?}", r.violations);
    assert!(r.longest_wait_ms >= 60_000, "acquire 0 has waited about 60 s: {}", r.longest_wait_ms);
    assert!(r.longest_wait.as_deref().is_some_and(|w| w.contains("acquire 0 ") && w.contains("still open")));

    let r = c.report(inputs(20));
    assert_eq!((r.hung_acquirers, r.slow_acquires), (0, 2), "10 s past the calm is within 20 s");
    assert!(r.is_clean(), "slow acquires are not violations: {r:#}");
}

#[tokio::test]
async fn settle_waits_for_open_acquires() {
    let c = Checker::new();
    let id = c.begin_acquire(0);
    assert!(!c.settle(ms(50)).await);
    let other = c.clone();
    tokio::spawn(async move { other.end_acquire(id) });
    assert!(c.settle(Duration::from_secs(10)).await);
}

#[test]
fn clones_share_one_ledger_across_threads() {
    let c = Checker::new();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let h = c.begin_hold(i, 0, false);
                    c.end_hold(h);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread panicked");
    }
    assert_eq!(report(&c).holds, 400);
}

#[test]
fn reports_render_as_text_json_and_key_values() {
    let mut record = ChaosRecord::new(42, 1);
    let event = |fault, skipped: Option<&str>| FaultEvent {
        offset: ms(5),
        fault,
        target: Some(0),
        member: None,
        skipped: skipped.map(str::to_string),
    };
    record.push(event(Fault::Cut, None));
    record.push(event(Fault::Cut, None));
    record.push(event(Fault::Expire, Some("gone")));
    let (c, t) = setup();
    c.begin_hold_at(0, 1, true, t);
    c.begin_hold_at(1, 2, true, t + ms(1));
    let r = c.report(ReportInputs { record: Some(&record), orphans: 1, ..Default::default() });

    let text = r.to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("chaos seed=42 VIOLATIONS: overlaps=1 "), "{text}");
    assert!(first.contains(" orphans=1 ") && first.contains(" holds=2 "), "{text}");
    assert_eq!(lines.next(), Some("faults: cut=2; skipped: expire=1"));
    assert_eq!(lines.next(), None);
    assert!(format!("{r:#}").lines().nth(2).is_some_and(|l| l.starts_with("  overlap: ")));

    let json = r.to_json();
    assert!(json.starts_with("{\"seed\":42,\"clean\":false,\"overlaps\":1,"), "{json}");
    assert!(json.contains(",\"faults\":{\"cut\":2},\"skipped_faults\":{\"expire\":1},"), "{json}");
    assert!(json.contains("\"violations\":[\"overlap: hold 1 "), "{json}");
    assert!(json.ends_with("\"]}") && !json.contains('\n'));

    let kv = r.to_key_values();
    assert!(kv.starts_with("seed=42 clean=false overlaps=1 "), "{kv}");
    assert!(kv.ends_with(" fault.cut=2 skipped.expire=1"), "{kv}");

    let clean = Checker::new().report(ReportInputs::default());
    assert!(clean.is_clean());
    assert_eq!(clean.to_string(), format!("{clean:#}"));
    assert!(clean.to_string().starts_with("chaos CLEAN: overlaps=0"));
    assert!(clean.to_json().starts_with("{\"seed\":null,\"clean\":true,"));
}

#[test]
fn a_lost_increment_is_excused_only_by_a_forced_expiry_its_holder_was_not_told_of() {
    // Hold a reads 0, its session is expired by force, b is granted and reads 0 too, then both
    // write 1: one increment is lost, and the forced expiry excuses it.
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t);
    c.forced_expiry(0, t + ms(10));
    let b = c.begin_hold_at(1, 2, true, t + ms(20));
    c.increment(b, 0);
    c.end_hold_at(b, t + ms(30));
    c.increment(a, 0);
    c.end_hold_at(a, t + ms(40));
    let r = report(&c);
    assert_eq!((r.increments, r.counter, r.lost_increments, r.excused_lost_increments), (2, 1, 0, 1));
    assert!(r.is_clean(), "{r:#}");
    assert!(r.violations.iter().any(|v| v.starts_with("excused lost increment: hold 0")), "{:?}", r.violations);

    // The same, but a's holder had been told before b's grant: it wrote anyway, a violation.
    let (c, t) = setup();
    let a = c.begin_hold_at(0, 1, true, t);
    c.forced_expiry(0, t + ms(10));
    c.lost(a, t + ms(15));
    let b = c.begin_hold_at(1, 2, true, t + ms(20));
    c.increment(b, 0);
    c.end_hold_at(b, t + ms(30));
    c.increment(a, 0);
    c.end_hold_at(a, t + ms(40));
    let r = report(&c);
    assert_eq!((r.lost_increments, r.excused_lost_increments), (1, 0));
    assert!(!r.is_clean());
    assert!(r.violations.iter().any(|v| v.starts_with("lost increment: hold 0")), "{:?}", r.violations);
}
