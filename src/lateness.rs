//! `LatenessHistogram`: how late a timer's fires came, in `TimerStats`.

use std::fmt;
use std::time::Duration;

use crate::engine::driver::lateness::{bucket_of, BUCKETS};

/// How late each fire came after its deadline: a histogram of fixed size (1.8 KiB), in
/// [`TimerStats::lateness`](crate::TimerStats::lateness).
///
/// A fire's lateness is the timer's clock when it fired less the deadline in force, as the timer's
/// driver saw it (a periodic task's every run counts). A fire that has to wait for its tick's end
/// counts as late by that much, so with nothing blocking the driver the lateness stays within one
/// tick plus the operating system's wake-up noise; what lies above that is the driver being held up
/// (slow callbacks on the driver, a busy machine, a stalled runtime for a `tokio_clock()` timer).
///
/// The buckets are log-scale: one per 1.024 µs below 8.2 µs, then 8 per doubling (what that makes
/// of a [`quantile`](Self::quantile) is told there). An exact zero, as on a manual or paused clock,
/// has a bucket of its own. Lateness past 18 minutes shares the last bucket.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LatenessHistogram {
    buckets: [u64; BUCKETS],
    max_nanos: u64,
}

impl LatenessHistogram {
    pub(crate) fn new(buckets: [u64; BUCKETS], max_nanos: u64) -> LatenessHistogram {
        LatenessHistogram { buckets, max_nanos }
    }

    /// Fires recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The most any fire came after its deadline; zero until one fires.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_nanos)
    }

    /// The lateness that a share `q` of fires did not exceed: `quantile(0.99)` is the 99th
    /// percentile. `q` is taken within `0.0..=1.0` (`NaN` as 0); the answer is its bucket's upper
    /// end, at most [`max`](Self::max), so at most an eighth (or 1.024 µs) above the true figure,
    /// never below it. Zero while nothing has fired.
    pub fn quantile(&self, q: f64) -> Duration {
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        // The rank of the fire asked for, from 1 (the least late) to `count`.
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        let bucket = self.buckets.iter().position(|&n| {
            seen += n;
            seen >= rank
        });
        Duration::from_nanos(bucket_end(bucket.unwrap_or(BUCKETS - 1)).min(self.max_nanos))
    }
}

/// The most lateness bucket `i` holds, in nanoseconds (the last: any), by a binary search of the
/// engine's `bucket_of`, which rises with lateness.
fn bucket_end(i: usize) -> u64 {
    // `lo` is always in a bucket at or below `i`, and everything past `hi` above it.
    let (mut lo, mut hi) = (0u64, u64::MAX);
    while lo < hi {
        let mid = lo + (hi - lo) / 2 + 1;
        if bucket_of(mid) <= i {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

impl Default for LatenessHistogram {
    /// Empty: nothing fired.
    fn default() -> LatenessHistogram {
        LatenessHistogram::new([0; BUCKETS], 0)
    }
}

impl fmt::Debug for LatenessHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatenessHistogram")
            .field("count", &self.count())
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max())
            .finish()
    }
}
