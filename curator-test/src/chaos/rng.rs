//! [`ChaosRng`]: a tiny seeded generator, so that a chaos run can be repeated from its seed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A seeded pseudo-random generator (SplitMix64): the same seed gives the same numbers on every
/// machine and every run. Not for cryptography; good enough to pick faults, targets and
/// durations.
///
/// ```
/// use curator_test::chaos::ChaosRng;
/// let mut a = ChaosRng::new(7);
/// let mut b = ChaosRng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChaosRng {
    state: u64,
}

impl ChaosRng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> ChaosRng {
        ChaosRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0). Multiply-and-shift: the bias is below `n / 2^64`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index into a slice of `len` elements (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        // usize fits in u64 on every platform tokio runs on; the result is below len.
        self.below(len as u64) as usize
    }

    /// A float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (never for `p <= 0`, always for `p >= 1`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A duration between `lo` and `hi` inclusive, in whole milliseconds (`lo` when `hi < lo`).
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let lo_ms = millis(lo);
        let span = millis(hi).saturating_sub(lo_ms);
        Duration::from_millis(lo_ms + self.below(span.saturating_add(1)))
    }

    /// An exponentially distributed duration with mean `mean`, in whole milliseconds: the gaps
    /// between events that come at random at a steady rate.
    pub fn exponential(&mut self, mean: Duration) -> Duration {
        let x = -(1.0 - self.unit()).ln();
        Duration::from_millis((x * millis(mean) as f64).round() as u64)
    }

    /// A new generator seeded from this one: a sub-sequence whose length does not disturb
    /// this generator's later numbers.
    pub fn fork(&mut self) -> ChaosRng {
        ChaosRng::new(self.next_u64())
    }

    /// A seed from the environment variable `var` (decimal, or hex with `0x`), or a fresh one
    /// from the clock when it is unset or unreadable. Either way the seed is logged (at info
    /// level, with the variable's name) so that a failed run can be repeated.
    pub fn seed_from_env(var: &str) -> u64 {
        let parsed = std::env::var(var).ok().and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
        });
        let seed = parsed.unwrap_or_else(|| {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
            // Mixed once so that runs started close together get unrelated seeds.
            ChaosRng::new(nanos as u64 ^ u64::from(std::process::id())).next_u64()
        });
        tracing::info!(seed, "chaos seed (run again with {var}={seed})");
        seed
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // The first outputs for seed 1234567, as printed by the reference C implementation.
        let mut rng = ChaosRng::new(1_234_567);
        let first: Vec<u64> = (0..5).map(|_| rng.next_u64()).collect();
        assert_eq!(
            first,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821
            ]
        );
    }

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let draw = |seed| {
            let mut rng = ChaosRng::new(seed);
            (0..100).map(|_| rng.below(1000)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    #[test]
    fn ranges_hold() {
        let mut rng = ChaosRng::new(1);
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.index(0), 0);
        let lo = Duration::from_millis(10);
        let hi = Duration::from_millis(20);
        let mut seen_lo = false;
        let mut seen_hi = false;
        for _ in 0..10_000 {
            assert!(rng.below(7) < 7);
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
            let d = rng.between(lo, hi);
            assert!(d >= lo && d <= hi, "{d:?}");
            seen_lo |= d == lo;
            seen_hi |= d == hi;
        }
        assert!(seen_lo && seen_hi, "between() is inclusive at both ends");
        assert_eq!(rng.between(hi, lo), hi);
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }

    #[test]
    fn exponential_has_roughly_its_mean() {
        let mut rng = ChaosRng::new(9);
        let mean = Duration::from_millis(100);
        let n = 20_000u32;
        let total: Duration = (0..n).map(|_| rng.exponential(mean)).sum();
        let avg = total / n;
        assert!(avg > Duration::from_millis(95) && avg < Duration::from_millis(105), "{avg:?}");
    }

    #[test]
    fn forks_do_not_disturb_the_parent() {
        let mut a = ChaosRng::new(5);
        let mut b = ChaosRng::new(5);
        let mut child = a.fork();
        for _ in 0..10 {
            child.next_u64();
        }
        b.next_u64();
        assert_eq!(a.next_u64(), b.next_u64());
    }
}
