//! A cheap upper bound on the time, from the CPU's timestamp counter: the
//! `now` in the `now + delay` of a new deadline.
//!
//! `Instant::now()` costs about 25 ns on the machines we measure, a quarter
//! of a schedule+cancel; reading the counter costs about 10. A deadline may
//! come a little late but never early, so an upper bound on the time will
//! do:
//!
//! - Each thread keeps an *anchor*: a counter reading bracketed by two
//!   `Instant` readings, and an upper bound on the nanoseconds per count.
//!   The bound is measured against an older reading at least
//!   `MIN_CALIBRATION` counts back (a thread that has none yet borrows the
//!   last bound any thread measured), and raised by 1/1024 to cover the
//!   kernel slewing its clock (at most 500 ppm) and measurement error.
//! - Within `SPAN` counts of the anchor (a millisecond or two), the time is
//!   at most the anchor's later reading + counts × that bound + `SLACK`.
//!   Past it, or while no bound is known, the thread reads `Instant::now()`
//!   and re-anchors.
//! - Each re-anchor checks the last bound against the real clock. If it
//!   ever fell short, or the counter ran backwards, this process stops
//!   using the counter.
//!
//! Only on x86-64 Linux, and only when the kernel keeps time with the
//! counter itself: it then found it invariant and in step across CPUs.
//! Elsewhere, and under Miri and loom, it reads `Instant::now()`. A
//! deadline comes out at most a few microseconds later than with
//! `Instant::now()`, far less than a tick.

// Without the counter (other targets, Miri, loom) only the tests use the
// extrapolation.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
    allow(dead_code)
)]

use std::sync::OnceLock;
use std::time::Instant;

use crate::clock::{saturating_nanos, Nanos};

/// Nanoseconds since the process's first timer: the scale of `now_upper`.
pub(crate) fn since_base(instant: Instant) -> Nanos {
    saturating_nanos(instant.saturating_duration_since(base()))
}

/// The instant `since_base` counts from; before every timer's start.
pub(crate) fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// At least the time now, in nanoseconds since `base()`, and at most a few
/// microseconds more.
#[inline]
pub(crate) fn now_upper() -> Nanos {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    if let Some(now) = counter::now_upper() {
        return now;
    }
    since_base(Instant::now())
}

/// Counts an anchor is extrapolated over: 1-2 ms at 2-4 GHz.
const SPAN: u64 = 1 << 22;
/// Counts between two anchors for their rate to be measured.
const MIN_CALIBRATION: u64 = 1 << 20;
/// The widest bracket an anchor may have: a wider one was interrupted.
const MAX_BRACKET: Nanos = 2_000;
/// Added to every bound: a counter read early by out-of-order execution.
const SLACK: Nanos = 1_000;
/// Nanoseconds per count, 32.32 fixed point, below which the counter runs
/// at 250 MHz or more; a slower one is not used.
const RATE_MAX: u128 = 1 << 34;

/// A counter reading bracketed by two readings of the real clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading {
    pub(crate) low: Nanos,
    pub(crate) count: u64,
    pub(crate) high: Nanos,
}

/// One thread's anchor and its bound on nanoseconds per count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extrapolator {
    /// The latest reading: what bounds are extrapolated from.
    anchor: Option<Reading>,
    /// The reading the next rate is measured from: kept until the counter
    /// has moved `MIN_CALIBRATION` past it, however often it re-anchors.
    base: Option<Reading>,
    /// Nanoseconds per count, 32.32 fixed point, rounded up; 0: unknown.
    rate: u64,
}

impl Extrapolator {
    pub(crate) const NEW: Extrapolator = Extrapolator {
        anchor: None,
        base: None,
        rate: 0,
    };

    /// At least the time when the counter read `count`; `None` if that is
    /// out of the anchor's reach or no rate is known yet.
    #[inline]
    pub(crate) fn bound(&self, count: u64) -> Option<Nanos> {
        let anchor = self.anchor?;
        let counts = count.wrapping_sub(anchor.count);
        // counts < 2^22 and rate < 2^34: the product fits.
        (self.rate != 0 && counts < SPAN)
            .then(|| anchor.high + ((counts * self.rate) >> 32) + SLACK)
    }

    /// The rate in use: 0 while unknown.
    pub(crate) fn rate(&self) -> u64 {
        self.rate
    }

    /// Makes `next` the anchor, and measures the rate once the counter has
    /// moved far enough; until then it uses `known`, a rate another thread
    /// measured (0 for none). False if the counter broke the last bound: it
    /// ran slower than the rate allowed, or backwards.
    pub(crate) fn reanchor(&mut self, next: Reading, known: u64) -> bool {
        let sound = self.anchor.map_or(true, |last| self.held(last, next));
        self.anchor = Some(next);
        if !sound {
            self.rate = 0;
            return false;
        }
        let base = *self.base.get_or_insert(next);
        let counts = next.count - base.count; // no underflow: `held` checked
        if counts >= MIN_CALIBRATION {
            // The longest the interval can have been, per count.
            let most = u128::from(next.high.saturating_sub(base.low));
            let rate = (most << 32) / u128::from(counts);
            let rate = rate + (rate >> 10) + 1;
            self.rate = if rate < RATE_MAX { rate as u64 } else { 0 };
            self.base = Some(next);
        } else if self.rate == 0 && u128::from(known) < RATE_MAX {
            self.rate = known;
        }
        true
    }

    /// True if the counter moved forward from `last` to `next`, and no
    /// slower than the rate allowed.
    fn held(&self, last: Reading, next: Reading) -> bool {
        let Some(counts) = next.count.checked_sub(last.count) else {
            return false;
        };
        let bound = u128::from(last.high)
            + ((u128::from(counts) * u128::from(self.rate)) >> 32)
            + u128::from(SLACK);
        self.rate == 0 || bound >= u128::from(next.low)
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
mod counter {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
    use std::time::Instant;

    use super::{since_base, Extrapolator, Reading, MAX_BRACKET};
    use crate::clock::Nanos;

    const UNTESTED: u8 = 0;
    const ON: u8 = 1;
    const OFF: u8 = 2;

    /// Whether this process uses the counter.
    static STATE: AtomicU8 = AtomicU8::new(UNTESTED);
    /// The last rate any thread measured, for threads yet to measure one.
    static RATE: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static ANCHOR: Cell<Extrapolator> = const { Cell::new(Extrapolator::NEW) };
    }

    /// `super::now_upper` from the counter; `None` if it is not used.
    #[inline]
    pub(super) fn now_upper() -> Option<Nanos> {
        if !in_use() {
            return None;
        }
        ANCHOR
            .try_with(|anchor| match anchor.get().bound(count()) {
                Some(now) => now,
                None => reanchor(anchor),
            })
            .ok()
    }

    /// Reads the real clock and re-anchors on it; returns its later reading.
    #[cold]
    fn reanchor(anchor: &Cell<Extrapolator>) -> Nanos {
        let Some(reading) = (0..3)
            .map(|_| read())
            .find(|r| r.high - r.low <= MAX_BRACKET)
        else {
            return since_base(Instant::now()); // interrupted thrice: no anchor
        };
        let mut next = anchor.get();
        if next.reanchor(reading, RATE.load(Ordering::Relaxed)) {
            RATE.store(next.rate(), Ordering::Relaxed);
        } else {
            tracing::warn!("the CPU's timestamp counter broke its bound: timers read the clock");
            STATE.store(OFF, Ordering::Relaxed);
        }
        anchor.set(next);
        reading.high
    }

    #[inline(always)]
    fn in_use() -> bool {
        match STATE.load(Ordering::Relaxed) {
            ON => true,
            OFF => false,
            _ => probe(),
        }
    }

    #[cold]
    fn probe() -> bool {
        let source = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
        let tsc = std::fs::read_to_string(source).is_ok_and(|s| s.trim() == "tsc");
        let state = if tsc { ON } else { OFF };
        let _ = STATE.compare_exchange(UNTESTED, state, Ordering::Relaxed, Ordering::Relaxed);
        STATE.load(Ordering::Relaxed) == ON
    }

    /// The counter, as soon as the CPU gets to it.
    #[inline]
    fn count() -> u64 {
        // SAFETY: `rdtsc` exists on every x86-64 CPU; it reads a register
        // and touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// The counter between two readings of the real clock. `rdtscp` waits
    /// for the first reading to finish, and the second (`Instant::now`
    /// fences before its own read) for it.
    fn read() -> Reading {
        let low = since_base(Instant::now());
        let mut cpu = 0;
        // SAFETY: as `count`; `cpu` is a local the instruction writes.
        let count = unsafe { core::arch::x86_64::__rdtscp(&mut cpu) };
        let high = since_base(Instant::now());
        Reading { low, count, high }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(miri))]
    use proptest::prelude::*;

    /// A counter at `per_ns` counts per nanosecond of the real clock.
    fn reading(at: Nanos, per_ns: f64, width: Nanos) -> Reading {
        Reading {
            low: at,
            count: (at as f64 * per_ns) as u64 + 1_000_000,
            high: at + width,
        }
    }

    #[test]
    fn no_bound_before_a_rate_is_known_or_past_the_span() {
        let mut ex = Extrapolator::NEW;
        assert_eq!(ex.bound(5), None, "no anchor");
        assert!(ex.reanchor(reading(0, 3.0, 50), 0));
        assert_eq!(ex.bound(reading(10, 3.0, 0).count), None, "no rate yet");
        assert!(ex.reanchor(reading(1_000_000, 3.0, 50), 0));
        let near = reading(1_100_000, 3.0, 0);
        assert!(ex.bound(near.count).is_some());
        let far = reading(1_000_000 + SPAN, 3.0, 0);
        assert_eq!(ex.bound(far.count), None, "past the span");
    }

    #[test]
    fn re_anchoring_often_still_measures_the_rate() {
        // A busy thread re-anchors on every call until it knows the rate:
        // the base it measures from must stay put meanwhile.
        let mut ex = Extrapolator::NEW;
        let mut at = 0;
        while ex.rate() == 0 {
            assert!(ex.reanchor(reading(at, 3.0, 50), 0));
            at += 1_000; // 3,000 counts per call
            assert!(at < 10 * MIN_CALIBRATION, "never learned the rate");
        }
        assert!(ex.bound(reading(at, 3.0, 0).count).is_some());
    }

    #[test]
    fn a_new_thread_borrows_a_known_rate() {
        let mut measured = Extrapolator::NEW;
        measured.reanchor(reading(0, 3.0, 50), 0);
        measured.reanchor(reading(1_000_000, 3.0, 50), 0);
        let mut fresh = Extrapolator::NEW;
        fresh.reanchor(reading(2_000_000, 3.0, 50), measured.rate());
        assert_eq!(fresh.rate(), measured.rate());
        assert!(fresh.bound(reading(2_000_100, 3.0, 0).count).is_some());
    }

    #[test]
    fn a_counter_that_slows_down_or_runs_back_blows_the_fuse() {
        let mut ex = Extrapolator::NEW;
        ex.reanchor(reading(0, 3.0, 50), 0);
        assert!(ex.reanchor(reading(1_000_000, 3.0, 50), 0));
        let mut slowed = reading(2_000_000, 3.0, 50);
        slowed.count -= 1_000_000; // ran at a third of its rate
        assert!(!ex.clone().reanchor(slowed, 0));
        let mut back = reading(3_000_000, 3.0, 50);
        back.count = 0;
        assert!(!ex.reanchor(back, 0));
    }

    #[test]
    fn the_bound_is_never_below_the_real_clock() {
        // Holds however slowly this runs: a delay only raises the bound.
        for _ in 0..if cfg!(miri) { 100 } else { 200_000 } {
            let before = since_base(Instant::now());
            assert!(now_upper() >= before);
        }
    }

    // Proptest reads the working directory, which Miri's isolation forbids.
    #[cfg(not(miri))]
    proptest! {
        /// Whatever the counter's rate, brackets and slewing (within the
        /// kernel's 500 ppm), no bound is below the true time.
        #[test]
        fn bounds_hold_under_jitter_and_slew(
            per_ns in 0.3f64..5.0,
            widths in proptest::collection::vec(0u64..MAX_BRACKET, 4),
            gaps in proptest::collection::vec(MIN_CALIBRATION / 2..40 * MIN_CALIBRATION, 3),
            slews in proptest::collection::vec(-500e-6f64..500e-6, 3),
            probes in proptest::collection::vec(0u64..SPAN, 8),
        ) {
            // True time advances by `gap` counts at each step, at a rate
            // slewed by up to 500 ppm from the counter's.
            let mut ex = Extrapolator::NEW;
            let mut count = 1_000_000u64;
            let mut at = 0f64;
            for step in 0..3 {
                let (low, width) = (at as Nanos, widths[step]);
                // The count lands anywhere inside its bracket.
                let within = (width / 2) as f64;
                let r = Reading { low, count: count + (within * per_ns) as u64, high: low + width };
                prop_assert!(ex.reanchor(r, 0), "a sound counter never blows the fuse");
                let ns_per_count = (1.0 + slews[step]) / per_ns;
                for &p in &probes {
                    if let Some(bound) = ex.bound(r.count + p) {
                        let truth = r.low as f64 + within + p as f64 * ns_per_count;
                        prop_assert!(bound as f64 >= truth, "bound {bound} < truth {truth}");
                    }
                }
                count += gaps[step];
                at += gaps[step] as f64 * ns_per_count;
            }
        }
    }
}
