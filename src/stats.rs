//! `TimerStats`: what a timer has done, for dashboards and tests.

use std::time::Duration;

use crate::{HashedWheelTimer, LatenessHistogram};

/// A snapshot of a timer's counters, from [`HashedWheelTimer::stats`].
///
/// The totals count since the timer was built. Each timeout that was scheduled leaves
/// [`pending`](TimerStats::pending) exactly once, and is then counted once as fired, cancelled or
/// stopped. `scheduled` is the sum of the four, so every snapshot holds (and `pending` never reads
/// below zero or above `scheduled`):
///
/// `scheduled == fired + cancelled + stopped + pending`
///
/// Read while timeouts end on other threads, one ending at that instant may count both where it
/// ended and in `pending`: `scheduled` is then one above the truth for each, and the next snapshot
/// reads lower. It never reads below the timeouts scheduled before the call; quiet, it is exact.
///
/// A refused call (an error from `new_timeout`, say) counts nowhere. A periodic task counts once in
/// `scheduled`, and once where it ends. A [`reset`](crate::Timeout::reset) counts nowhere: it is
/// the same timeout. A [`Sleep`](crate::Sleep) counts when its first poll files it, and a dropped
/// one counts as cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TimerStats {
    /// Timeouts scheduled: callbacks, periodic tasks, and futures' entries.
    pub scheduled: u64,
    /// Timeouts whose deadline came and that ran, or were woken, or were handed to the executor to
    /// run (one such job that `stop()` later took back unstarted still counts here); and periodic
    /// tasks ended by a panicking run.
    pub fired: u64,
    /// Timeouts whose cancel won (a dropped pending `Sleep` included).
    pub cancelled: u64,
    /// Timeouts that `stop()` ended before they ran, or between two runs or during one: those it
    /// returned (but one-shot jobs it took back: `fired`), pending futures' entries, woken instead.
    pub stopped: u64,
    /// Timeouts pending now, as [`HashedWheelTimer::pending_timeouts`].
    pub pending: usize,
    /// Times the driver (the worker thread, or for a `tokio_clock()` timer its task) woke from
    /// sleep: at its planned wake-up, or early for a new deadline. 0 on a manual clock. An idle
    /// timer adds none.
    pub driver_wakeups: u64,
    /// The same figure as [`driver_wakeups`](TimerStats::driver_wakeups), under its first name.
    pub worker_wakeups: u64,
    /// Time the driver spent turning the wheel and firing (callbacks run on it included), not
    /// asleep, on the real clock (`std::time::Instant`, whatever clock the timer reads); on a
    /// manual clock, inside [`advance`](HashedWheelTimer::advance). Read once before and once after
    /// each turn, never per timeout.
    pub driver_busy: Duration,
    /// How late each fire came after its deadline; see [`LatenessHistogram`].
    pub lateness: LatenessHistogram,
    /// The same as [`lateness.max()`](LatenessHistogram::max).
    pub max_lateness: Duration,
    /// Timeouts queued for the timer's thread and not yet filed into the wheel: the drain backlog.
    /// It counts cells of cancelled timeouts the thread has not yet skipped, and timeouts held in
    /// their lanes on purpose (see the README's "How it works"), so it is not 0 under load; a
    /// backlog that keeps growing means the thread falls behind.
    pub queued: usize,
}

impl HashedWheelTimer {
    /// A snapshot of this timer's counters; see [`TimerStats`].
    pub fn stats(&self) -> TimerStats {
        let totals = self.shared().totals();
        let (buckets, max_lateness) = self.shared().counts.lateness.read();
        TimerStats {
            scheduled: totals.scheduled,
            fired: totals.fired,
            cancelled: totals.cancelled,
            stopped: totals.stopped,
            pending: totals.pending,
            driver_wakeups: totals.driver_wakeups,
            worker_wakeups: totals.driver_wakeups,
            driver_busy: Duration::from_nanos(totals.driver_busy_nanos),
            lateness: LatenessHistogram::new(buckets, max_lateness),
            max_lateness: Duration::from_nanos(max_lateness),
            queued: self.shared().intake.len(),
        }
    }
}
