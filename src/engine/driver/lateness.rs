//! How late fires came, in log-scale buckets: lateness in units of 1.024 µs, rounded up (only an
//! exact zero is in bucket 0), a bucket per unit below 8, then `SUB` per doubling; past 2^30 units
//! (18 minutes), the last. The driver records alone (one turn at a time): relaxed loads and stores,
//! no read-modify-write. std's atomics under loom too: no ordering rests on them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets per doubling.
const SUB: u64 = 8;
const UNIT_SHIFT: u32 = 10;
pub(crate) const BUCKETS: usize = 224;

/// The bucket of `nanos` of lateness; it rises with `nanos`.
pub(crate) fn bucket_of(nanos: u64) -> usize {
    let units = nanos.div_ceil(1 << UNIT_SHIFT).min((1 << 30) - 1);
    if units < SUB {
        return units as usize;
    }
    let top = u64::from(63 - units.leading_zeros()); // 3 or more
    ((top - 2) * SUB + ((units >> (top - 3)) & (SUB - 1))) as usize
}

pub(crate) struct Lateness {
    counts: [AtomicU64; BUCKETS],
    max: AtomicU64,
}

impl Default for Lateness {
    fn default() -> Lateness {
        Lateness {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            max: AtomicU64::new(0),
        }
    }
}

impl Lateness {
    /// A fire `nanos` late; the driver's alone.
    #[inline]
    pub(crate) fn record(&self, nanos: u64) {
        let count = &self.counts[bucket_of(nanos)];
        count.store(count.load(Relaxed) + 1, Relaxed);
        if nanos > self.max.load(Relaxed) {
            self.max.store(nanos, Relaxed);
        }
    }

    /// The counts by bucket and the most, in nanoseconds, as they stand.
    pub(crate) fn read(&self) -> ([u64; BUCKETS], u64) {
        let counts = std::array::from_fn(|i| self.counts[i].load(Relaxed));
        (counts, self.max.load(Relaxed))
    }
}
