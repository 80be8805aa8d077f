//! The timer's own time: nanoseconds since its start, and tick arithmetic.
//!
//! A real clock reads `Instant::now()`. A manual clock is a counter that only
//! [`HashedWheelTimer::advance`](crate::HashedWheelTimer::advance) moves, so
//! tests are exact. Either way every deadline is stored as `u64` nanoseconds
//! since start, saturating at `u64::MAX` (about 584 years): a huge delay
//! never overflows and never fires.

use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};

/// Nanoseconds since the timer's start.
pub(crate) type Nanos = u64;

pub(crate) struct Clock {
    start: Instant,
    manual: Option<Manual>,
    tick_nanos: u64,
}

/// A clock that only `advance` moves.
struct Manual {
    /// What `now()` reads: the time of the tick being fired, during `advance`.
    now: AtomicU64,
    /// Where the running `advance` will leave `now`.
    target: AtomicU64,
}

impl Clock {
    pub(crate) fn new(tick_nanos: u64, manual: bool) -> Clock {
        Clock {
            start: Instant::now(),
            manual: manual.then(|| Manual {
                now: AtomicU64::new(0),
                target: AtomicU64::new(0),
            }),
            tick_nanos,
        }
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    pub(crate) fn now(&self) -> Nanos {
        match &self.manual {
            Some(manual) => manual.now.load(Ordering::Acquire),
            None => saturating_nanos(self.start.elapsed()),
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

    pub(crate) fn deadline_after(&self, delay: Duration) -> Nanos {
        self.now().saturating_add(saturating_nanos(delay))
    }

    pub(crate) fn to_instant(&self, nanos: Nanos) -> Instant {
        let far_future = Duration::from_secs(86_400 * 365 * 30);
        self.start
            .checked_add(Duration::from_nanos(nanos))
            .unwrap_or_else(|| self.start + far_future)
    }

    /// The first tick whose end is at or after `deadline`.
    pub(crate) fn tick_of(&self, deadline: Nanos) -> u64 {
        deadline.div_ceil(self.tick_nanos)
    }

    /// The last tick that has fully ended at `now`.
    pub(crate) fn ticks_at(&self, now: Nanos) -> u64 {
        now / self.tick_nanos
    }

    /// When tick `tick` ends.
    pub(crate) fn time_of(&self, tick: u64) -> Nanos {
        tick.saturating_mul(self.tick_nanos)
    }
}

pub(crate) fn saturating_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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
    fn huge_values_saturate() {
        let clock = Clock::new(1_000_000, true);
        assert_eq!(clock.deadline_after(Duration::MAX), u64::MAX);
        assert_eq!(clock.time_of(u64::MAX), u64::MAX);
        let _ = clock.to_instant(u64::MAX);
    }

    #[test]
    fn manual_clock_only_moves_forward() {
        let clock = Clock::new(1, true);
        clock.set_manual(50);
        clock.set_manual(20);
        assert_eq!(clock.now(), 50);
    }
}
