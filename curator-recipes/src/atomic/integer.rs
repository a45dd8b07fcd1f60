//! [`DistributedAtomicInteger`]: an `i32` counter, 4 bytes big-endian (Curator's layout).

use super::number::{AtomicNumber, DistributedAtomicNumber};

impl AtomicNumber for i32 {
    const LEN: usize = 4;
    const ZERO: Self = 0;
    const ONE: Self = 1;

    fn to_bytes(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn from_exact(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(i32::from_be_bytes)
    }

    fn plus(self, delta: Self) -> Self {
        self.wrapping_add(delta)
    }

    fn negated(self) -> Self {
        self.wrapping_neg()
    }
}

/// A distributed `i32` counter, wire compatible with Curator's `DistributedAtomicInteger`:
/// 4 bytes big-endian; missing or empty reads as 0; any other length is
/// [`BadData`](curator_core::CuratorError::BadData). Works as
/// [`DistributedAtomicLong`](super::DistributedAtomicLong).
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;
