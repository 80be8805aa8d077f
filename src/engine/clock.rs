//! The timer's own time: nanoseconds since its start, and tick arithmetic.
//!
//! A real clock reads `Instant::now()`. A manual clock is a counter that only
//! [`HashedWheelTimer::advance`](crate::HashedWheelTimer::advance) moves, so
//! tests are exact. A tokio clock reads `tokio::time::Instant::now()` on the
//! timer's runtime, so a paused runtime's time (`start_paused`,
//! `tokio::time::advance`, auto-advance) is the timer's time. Either way every deadline is stored as `u64` nanoseconds
//! since start, saturating at `u64::MAX` (about 584 years): a huge delay
//! never overflows and never fires.

use std::time::{Duration, Instant};

use crate::engine::sync::{AtomicU64, Ordering};
use crate::engine::tsc;

pub(crate) use crate::engine::nanos::{saturating_nanos, Nanos};

pub(crate) struct Clock {
    start: Instant,
    /// `start` on `tsc::now_upper`'s scale.
    start_since_base: Nanos,
    manual: Option<Manual>,
    tokio: Option<TokioTime>,
    tick_nanos: u64,
    /// The last tick the clock can reach: the one before a saturated
    /// deadline's, so that a saturated deadline never fires.
    last_tick: u64,
}

/// A clock that only `advance` moves.
struct Manual {
    /// What `now()` reads: the time of the tick being fired, during `advance`.
    now: AtomicU64,
    /// Where the running `advance` will leave `now`.
    target: AtomicU64,
}

/// A tokio runtime's clock.
struct TokioTime {
    /// The runtime whose clock this is: read it from any thread.
    handle: tokio::runtime::Handle,
    start: tokio::time::Instant,
}

impl TokioTime {
    /// Nanoseconds since `start` on the runtime's clock. Inside one of its
    /// tasks the clock is at hand; elsewhere the runtime is entered for the
    /// read (outside a runtime, tokio would read the real clock).
    fn now(&self) -> Nanos {
        let now = if tokio::task::try_id().is_some() {
            tokio::time::Instant::now()
        } else {
            let _entered = self.handle.enter();
            tokio::time::Instant::now()
        };
        saturating_nanos(now.saturating_duration_since(self.start))
    }
}

/// Which clock a timer reads.
pub(crate) enum Source {
    Real,
    Manual,
    /// The clock of the runtime this handle belongs to.
    Tokio(tokio::runtime::Handle),
}

impl Clock {
    #[cfg(test)]
    pub(crate) fn new(tick_nanos: u64, manual: bool) -> Clock {
        Clock::of(
            tick_nanos,
            if manual { Source::Manual } else { Source::Real },
        )
    }

    pub(crate) fn of(tick_nanos: u64, source: Source) -> Clock {
        tsc::base(); // first: a start before the base would be clamped to it
        let mut start = Instant::now();
        let (mut manual, mut tokio) = (None, None);
        match source {
            Source::Real => {}
            Source::Manual => {
                manual = Some(Manual {
                    now: AtomicU64::new(0),
                    target: AtomicU64::new(0),
                })
            }
            Source::Tokio(handle) => {
                let tokio_start = {
                    let _entered = handle.enter();
                    tokio::time::Instant::now()
                };
                start = tokio_start.into_std();
                tokio = Some(TokioTime {
                    handle,
                    start: tokio_start,
                });
            }
        }
        Clock {
            start,
            start_since_base: tsc::since_base(start),
            manual,
            tokio,
            tick_nanos,
            last_tick: tick_of(u64::MAX, tick_nanos) - 1,
        }
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// True for a tokio runtime's clock.
    pub(crate) fn is_tokio(&self) -> bool {
        self.tokio.is_some()
    }

    /// `at`, a time on this clock, as the tokio runtime's `Instant`, for a
    /// tokio clock's driver to sleep until.
    pub(crate) fn tokio_instant(&self, at: Nanos) -> Option<tokio::time::Instant> {
        let tokio = self.tokio.as_ref()?;
        Some(
            tokio
                .start
                .checked_add(Duration::from_nanos(at))
                .unwrap_or_else(|| tokio.start + FAR_FUTURE),
        )
    }

    pub(crate) fn now(&self) -> Nanos {
        match &self.manual {
            Some(manual) => manual.now.load(Ordering::Acquire),
            None => match &self.tokio {
                Some(tokio) => tokio.now(),
                None => saturating_nanos(self.start.elapsed()),
            },
        }
    }

    /// Moves a manual clock forward to `to`; never backwards.
    pub(crate) fn set_manual(&self, to: Nanos) {
        if let Some(manual) = &self.manual {
            manual.now.fetch_max(to, Ordering::AcqRel);
        }
    }

    /// The target of a manual clock's `advance`; `None` on a real clock.
    pub(crate) fn manual_target(&self) -> Option<&AtomicU64> {
        self.manual.as_ref().map(|manual| &manual.target)
    }

    /// `now() >= deadline`. On a real clock, a deadline beyond the cheap
    /// upper bound of `tsc.rs` has surely not passed, and then the exact
    /// clock is not read.
    pub(crate) fn has_passed(&self, deadline: Nanos) -> bool {
        self.has_passed_by(deadline, self.upper_bound())
    }

    /// `has_passed`, given `upper`, an `upper_bound()` just read: a caller
    /// that needs the reading for more than this reads the clock once.
    #[inline(always)]
    pub(crate) fn has_passed_by(&self, deadline: Nanos, upper: Nanos) -> bool {
        deadline <= upper && self.now() >= deadline
    }

    /// At least `now()`: on a real clock, at most a few microseconds more,
    /// read cheaply (see `tsc.rs`); on a manual or tokio clock, `now()`.
    #[inline(always)]
    pub(crate) fn upper_bound(&self) -> Nanos {
        match &self.manual {
            Some(manual) => manual.now.load(Ordering::Acquire),
            None if self.tokio.is_some() => self.now(),
            None => self.upper_now(),
        }
    }

    /// At least `now()`, and at most a few microseconds more.
    #[inline(always)]
    fn upper_now(&self) -> Nanos {
        tsc::now_upper().saturating_sub(self.start_since_base)
    }

    /// `delay` from now: never earlier, and on a real clock at most a few
    /// microseconds later (see `tsc.rs`). A zero delay reads the exact
    /// clock: "now" must have passed by the first look, as tokio's
    /// `sleep(ZERO)` has, not a microsecond later.
    #[inline(always)]
    pub(crate) fn deadline_after(&self, delay: Duration) -> Nanos {
        let now = match &self.manual {
            Some(manual) => manual.now.load(Ordering::Acquire),
            None if delay.is_zero() || self.tokio.is_some() => self.now(),
            None => self.upper_now(),
        };
        now.saturating_add(saturating_nanos(delay))
    }

    pub(crate) fn to_instant(&self, nanos: Nanos) -> Instant {
        saturating_add(self.start, Duration::from_nanos(nanos))
    }

    /// `instant` on this clock, saturated: 0 for an instant before the
    /// timer's start, `u64::MAX` past what `u64` nanoseconds hold.
    pub(crate) fn to_nanos(&self, instant: Instant) -> Nanos {
        saturating_nanos(instant.saturating_duration_since(self.start))
    }

    /// The first tick whose end is at or after `deadline`.
    pub(crate) fn tick_of(&self, deadline: Nanos) -> u64 {
        tick_of(deadline, self.tick_nanos)
    }

    /// The last tick that has fully ended at `now`, but never the tick of
    /// a saturated deadline (`u64::MAX`): that one means never.
    pub(crate) fn ticks_at(&self, now: Nanos) -> u64 {
        (now / self.tick_nanos).min(self.last_tick)
    }

    /// When tick `tick` ends.
    pub(crate) fn time_of(&self, tick: u64) -> Nanos {
        tick.saturating_mul(self.tick_nanos)
    }
}

/// The first tick whose end is at or after `deadline`, for ticks of
/// `tick_nanos`.
pub(crate) fn tick_of(deadline: Nanos, tick_nanos: u64) -> u64 {
    deadline.div_ceil(tick_nanos)
}

/// How far ahead an instant too large to represent is clamped to: 30 years,
/// as tokio does, far beyond any real deadline yet safe to add to an `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `at + by`, clamped to `FAR_FUTURE` after `at` where that overflows
/// `Instant`: deadline arithmetic never panics.
pub(crate) fn saturating_add(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_of_rounds_up_to_the_tick_end() {
        let clock = Clock::new(10, true);
        assert_eq!(clock.tick_of(0), 0);
        assert_eq!(clock.tick_of(1), 1);
        assert_eq!(clock.tick_of(10), 1);
        assert_eq!(clock.tick_of(11), 2);
        for deadline in 0..1_000u64 {
            let tick = clock.tick_of(deadline);
            assert!(clock.time_of(tick) >= deadline, "never early");
            assert!(
                tick == 0 || clock.time_of(tick - 1) < deadline,
                "first such tick"
            );
        }
    }

    #[test]
    fn a_saturated_deadline_is_beyond_every_reachable_tick() {
        // Ticks that divide u64::MAX exactly, and ticks that do not.
        for tick_nanos in [1, 3, 5, 17, 1_000, 1_000_000, u64::MAX] {
            let clock = Clock::new(tick_nanos, true);
            let last = clock.ticks_at(u64::MAX);
            assert!(last < clock.tick_of(u64::MAX), "{tick_nanos}");
            assert!(last < u64::MAX, "{tick_nanos}: a next tick exists");
            assert_eq!(
                clock.ticks_at(u64::MAX - 1),
                last.min((u64::MAX - 1) / tick_nanos)
            );
        }
    }

    #[test]
    fn huge_values_saturate() {
        let clock = Clock::new(1_000_000, true);
        assert_eq!(clock.deadline_after(Duration::MAX), u64::MAX);
        assert_eq!(clock.time_of(u64::MAX), u64::MAX);
        let _ = clock.to_instant(u64::MAX);
    }

    #[test]
    fn instants_round_trip_and_saturate() {
        let clock = Clock::new(1_000_000, true);
        let start = clock.to_instant(0);
        assert_eq!(clock.to_nanos(start), 0);
        assert_eq!(clock.to_nanos(clock.to_instant(12_345)), 12_345);
        let before = start.checked_sub(Duration::from_secs(1));
        assert_eq!(before.map(|b| clock.to_nanos(b)).unwrap_or(0), 0);
        assert!(saturating_add(start, Duration::MAX) > start);
        assert_eq!(
            clock.to_nanos(saturating_add(start, Duration::MAX)),
            FAR_FUTURE.as_nanos() as u64
        );
    }

    #[test]
    fn a_real_deadline_is_never_before_now_plus_the_delay() {
        // Holds however slowly this runs: a delay only moves the deadline on.
        let clock = Clock::new(1_000_000, false);
        for _ in 0..if cfg!(miri) { 100 } else { 100_000 } {
            let now = clock.now();
            assert!(clock.deadline_after(Duration::from_nanos(7)) >= now + 7);
        }
    }

    #[test]
    fn a_zero_delay_has_passed_at_once() {
        let clock = Clock::new(1_000_000, false);
        for _ in 0..if cfg!(miri) { 10 } else { 10_000 } {
            assert!(clock.has_passed(clock.deadline_after(Duration::ZERO)));
        }
    }

    #[test]
    fn has_passed_agrees_with_now() {
        let clock = Clock::new(1_000_000, false);
        let soon = clock.now() + 2_000_000;
        assert!(!clock.has_passed(u64::MAX), "the far future");
        assert!(clock.has_passed(0), "the start");
        // Never true early; holds however slowly this runs.
        loop {
            let passed = clock.has_passed(soon);
            if passed {
                assert!(clock.now() >= soon, "said passed before it had");
                break;
            }
        }
        let manual = Clock::new(10, true);
        manual.set_manual(50);
        assert!(manual.has_passed(50) && !manual.has_passed(51));
    }

    #[test]
    fn manual_clock_only_moves_forward() {
        let clock = Clock::new(1, true);
        clock.set_manual(50);
        clock.set_manual(20);
        assert_eq!(clock.now(), 50);
    }
}
