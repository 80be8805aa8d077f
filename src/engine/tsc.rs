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
//!
//! The kernel can switch away from the counter later (it does when it finds
//! the counter unstable). So about once a second one re-anchor, whichever
//! claims it first, reads the clocksource again; if it is no longer `tsc`,
//! the fuse blows as above (a file that cannot be read is tried again a
//! second later). Schedules that do not
//! re-anchor never read it. What is left:
//!
//! - Between a switch and the next probe (up to about a second, plus one
//!   anchor's span), deadlines still come from the counter.
//! - Every re-anchor still checks the counter against the real clock, so
//!   a counter that runs slow or back blows the fuse at the next one,
//!   switch or no switch.
//! - What is not caught: a counter that changes rate within one anchor's
//!   span (`SPAN` counts, a millisecond or two at full rate). Deadlines
//!   taken from that anchor can come early by up to the time the counter
//!   lost; the next re-anchor blows the fuse unless it has caught up.

// Without the counter (other targets, Miri, loom) only the tests use the
// extrapolation.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
    allow(dead_code)
)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::engine::nanos::{saturating_nanos, Nanos};

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
/// How often the kernel's clocksource is read again.
const PROBE_INTERVAL: Nanos = 1_000_000_000;

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

/// True if the content of `current_clocksource` names the counter; `None`:
/// the file could not be read.
fn is_tsc(source: Option<&str>) -> bool {
    source.is_some_and(|s| s.trim() == "tsc")
}

const UNTESTED: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

/// Whether the process uses the counter, and when the kernel's clocksource
/// is next read again. Once off, it stays off.
pub(crate) struct Fuse {
    state: AtomicU8,
    /// Nanoseconds on `since_base`'s scale.
    next_probe: AtomicU64,
}

impl Fuse {
    pub(crate) const fn new() -> Fuse {
        Fuse {
            state: AtomicU8::new(UNTESTED),
            next_probe: AtomicU64::new(PROBE_INTERVAL),
        }
    }

    /// Whether the counter is used; the first call reads the clocksource
    /// with `read`.
    #[inline(always)]
    pub(crate) fn in_use(&self, read: impl FnOnce() -> Option<String>) -> bool {
        match self.state.load(Ordering::Relaxed) {
            ON => true,
            OFF => false,
            _ => self.probe(read),
        }
    }

    #[cold]
    fn probe(&self, read: impl FnOnce() -> Option<String>) -> bool {
        let state = if is_tsc(read().as_deref()) { ON } else { OFF };
        let _ = self
            .state
            .compare_exchange(UNTESTED, state, Ordering::Relaxed, Ordering::Relaxed);
        self.state.load(Ordering::Relaxed) == ON
    }

    /// Stops the counter's use for good.
    pub(crate) fn blow(&self) {
        self.state.store(OFF, Ordering::Relaxed);
    }

    /// At `now`, reads the clocksource again with `read` if a second has
    /// passed since the last time, and blows the fuse if the kernel no
    /// longer keeps time with the counter. Of callers at once, one reads.
    pub(crate) fn reprobe(&self, now: Nanos, read: impl FnOnce() -> Option<String>) {
        let Some(due) = self.probe_due(now) else {
            return;
        };
        if !self.claim_probe(due, now) {
            return;
        }
        // An unreadable file (say, the process is out of descriptors) is
        // tried again in a second; the counter is still checked against
        // the real clock at every re-anchor meanwhile.
        if let Some(source) = read() {
            if !is_tsc(Some(&source)) {
                tracing::warn!("the kernel's clocksource is no longer tsc: timers read the clock");
                self.blow();
            }
        }
    }

    /// The due time of the next probe if it has come at `now`.
    fn probe_due(&self, now: Nanos) -> Option<Nanos> {
        let due = self.next_probe.load(Ordering::Relaxed);
        (now >= due).then_some(due)
    }

    /// Moves the probe that was due at `due` a second past `now`; false if
    /// another caller moved it first.
    fn claim_probe(&self, due: Nanos, now: Nanos) -> bool {
        let next = now.saturating_add(PROBE_INTERVAL);
        self.next_probe
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
mod counter {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use super::{since_base, Extrapolator, Fuse, Reading, MAX_BRACKET};
    use crate::engine::nanos::Nanos;

    /// Whether this process uses the counter.
    static FUSE: Fuse = Fuse::new();
    /// The last rate any thread measured, for threads yet to measure one.
    static RATE: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static ANCHOR: Cell<Extrapolator> = const { Cell::new(Extrapolator::NEW) };
    }

    /// `super::now_upper` from the counter; `None` if it is not used.
    #[inline]
    pub(super) fn now_upper() -> Option<Nanos> {
        if !FUSE.in_use(read_source) {
            return None;
        }
        ANCHOR
            .try_with(|anchor| match anchor.get().bound(count()) {
                Some(now) => now,
                None => reanchor(anchor, &FUSE, read_source),
            })
            .ok()
    }

    /// Reads the real clock and re-anchors on it; returns its later reading.
    /// Re-reads the clocksource with `source` when `fuse` finds it due.
    #[cold]
    fn reanchor(
        anchor: &Cell<Extrapolator>,
        fuse: &Fuse,
        source: impl FnOnce() -> Option<String>,
    ) -> Nanos {
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
            fuse.blow();
        }
        anchor.set(next);
        fuse.reprobe(reading.high, source);
        reading.high
    }

    /// The kernel's clocksource; `None` if it cannot be read.
    fn read_source() -> Option<String> {
        let source = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
        std::fs::read_to_string(source).ok()
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

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_due_re_anchor_re_probes() {
            // Not the process's fuse: the other tests keep the counter.
            let fuse = Fuse::new();
            assert!(fuse.in_use(|| Some("tsc\n".into())));
            fuse.next_probe.store(0, Ordering::Relaxed); // due now
            let anchor = Cell::new(Extrapolator::NEW);
            // A re-anchor interrupted thrice skips the probe: try again.
            for _ in 0..100 {
                reanchor(&anchor, &fuse, || Some("hpet\n".into()));
                if !fuse.in_use(|| unreachable!()) {
                    return;
                }
            }
            panic!("a due re-anchor did not re-probe");
        }
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
    fn only_tsc_keeps_the_counter() {
        assert!(is_tsc(Some("tsc\n")));
        assert!(is_tsc(Some("tsc")));
        for other in ["hpet\n", "kvm-clock\n", "acpi_pm\n", "tsc2\n", "", "\n"] {
            assert!(!is_tsc(Some(other)), "{other:?}");
        }
        assert!(!is_tsc(None), "unreadable");
    }

    /// A fuse past its first probe, which found `tsc`.
    fn on() -> Fuse {
        let fuse = Fuse::new();
        assert!(fuse.in_use(|| Some("tsc\n".into())));
        fuse
    }

    #[test]
    fn the_first_use_probes_once() {
        let fuse = Fuse::new();
        assert!(!fuse.in_use(|| Some("hpet\n".into())));
        assert!(!fuse.in_use(|| panic!("probed twice")));
        let fuse = on();
        assert!(fuse.in_use(|| panic!("probed twice")));
    }

    #[test]
    fn a_re_probe_is_due_only_after_the_interval() {
        let fuse = on();
        let switched = || Some("hpet\n".into());
        // The first is due a second after the base: the first use probed.
        fuse.reprobe(PROBE_INTERVAL - 1, || panic!("probed early"));
        fuse.reprobe(PROBE_INTERVAL, || Some("tsc\n".into()));
        // The next, a second after that one.
        fuse.reprobe(2 * PROBE_INTERVAL - 1, || panic!("probed early"));
        assert!(fuse.in_use(|| unreachable!()));
        let mut read = false;
        fuse.reprobe(2 * PROBE_INTERVAL, || {
            read = true;
            switched()
        });
        assert!(read, "not probed when due");
        assert!(!fuse.in_use(|| unreachable!()));
    }

    #[test]
    fn a_late_re_probe_counts_the_interval_from_itself() {
        let fuse = on();
        fuse.reprobe(10 * PROBE_INTERVAL, || Some("tsc\n".into()));
        fuse.reprobe(11 * PROBE_INTERVAL - 1, || panic!("probed early"));
        assert_eq!(
            fuse.probe_due(11 * PROBE_INTERVAL),
            Some(11 * PROBE_INTERVAL)
        );
    }

    #[test]
    fn of_two_claimants_one_re_probes() {
        let fuse = on();
        let now = PROBE_INTERVAL + 5;
        // Both find it due before either claims it.
        let first = fuse.probe_due(now).unwrap();
        let second = fuse.probe_due(now).unwrap();
        assert!(fuse.claim_probe(first, now));
        assert!(!fuse.claim_probe(second, now), "claimed twice");
        // And one after the other, the second finds nothing due.
        let fuse = on();
        let reads = std::cell::Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            Some("tsc\n".into())
        };
        fuse.reprobe(now, read);
        fuse.reprobe(now, read);
        assert_eq!(reads.get(), 1);
    }

    #[test]
    fn of_many_threads_at_once_one_re_probes() {
        let fuse = on();
        let reads = AtomicU64::new(0);
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    barrier.wait();
                    fuse.reprobe(PROBE_INTERVAL, || {
                        reads.fetch_add(1, Ordering::Relaxed);
                        Some("tsc\n".into())
                    });
                });
            }
        });
        assert_eq!(reads.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_unreadable_clocksource_is_read_again_a_second_later() {
        let fuse = on();
        fuse.reprobe(PROBE_INTERVAL, || None);
        assert!(fuse.in_use(|| unreachable!()), "a failed read keeps it");
        fuse.reprobe(2 * PROBE_INTERVAL, || Some("hpet\n".into()));
        assert!(!fuse.in_use(|| unreachable!()), "the next read decides");
    }

    #[test]
    fn a_switch_away_from_tsc_blows_the_fuse_for_good() {
        for source in [Some("hpet\n"), Some("kvm-clock\n"), Some("")] {
            let fuse = on();
            fuse.reprobe(PROBE_INTERVAL, || source.map(String::from));
            assert!(!fuse.in_use(|| unreachable!()), "{source:?}");
            // Even if the kernel switches back.
            fuse.reprobe(3 * PROBE_INTERVAL, || Some("tsc\n".into()));
            assert!(!fuse.in_use(|| unreachable!()), "{source:?}");
        }
        let fuse = on();
        fuse.reprobe(PROBE_INTERVAL, || Some("tsc\n".into()));
        assert!(fuse.in_use(|| unreachable!()), "tsc keeps it");
        fuse.blow();
        assert!(!fuse.in_use(|| unreachable!()), "a broken bound");
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
