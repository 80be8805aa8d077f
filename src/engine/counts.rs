//! What the timer counts: the pending count, and the totals behind
//! `stats()`: timeouts scheduled, fired, cancelled and stopped.
//!
//! Each timeout counted as scheduled leaves the pending count exactly once,
//! and only then is counted as fired, cancelled or stopped (invariant 5):
//! at any quiet moment `scheduled = fired + cancelled + stopped + pending`.
//! A refused call counts nowhere.
//!
//! Producers count on their own lane, in owner-only fields (plain loads and
//! stores): `scheduled` at a schedule, `cancelled` at a winning cancel. The
//! driver counts what fires or stops, and producers with no lane count
//! here. Without a `max_pending_timeouts`, the pending count is computed
//! from these totals; with one, a shared count is kept too, so a schedule
//! checks it in one step.
//!
//! # Reading while others count
//!
//! A timeout is often cancelled on another thread than the one that
//! scheduled it, so one lane's `cancelled` may count another lane's
//! schedule, and the driver's `fired` counts every lane's. Summed lane by
//! lane, a racing reader could count an end before its schedule and see
//! fewer than zero pending. So `totals` reads every count of an end first
//! (`fired`, `stopped`, every `cancelled`), then every `scheduled`. Counts
//! are stored with `Release` and read with `Acquire`, and a schedule is
//! counted before anyone can end it (before its key is queued or its handle
//! returned), so a schedule whose end the first pass saw is in the second:
//! `pending = scheduled - ended` is never below zero (clamped there all the
//! same), nor above what was scheduled by the end of the read.

use crate::engine::lane::Lane;
use crate::engine::refusal::Refusal;
use crate::engine::slots::MAX_ENTRIES;
use crate::engine::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::engine::task::Task;

/// How a timeout left the pending count, other than by a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its deadline came: run, woken or handed to the executor; or a
    /// periodic run panicked, ending it.
    Fired,
    /// `stop()` ended it before it ran (or a periodic task between runs).
    Stopped,
}

/// The shared counts.
pub(crate) struct Counts {
    /// `max_pending_timeouts`, if any.
    limit: Option<usize>,
    /// Pending timeouts, kept only with a limit (see the module docs).
    pending: AtomicUsize,
    /// Scheduled and cancelled by threads with no lane.
    scheduled: AtomicU64,
    cancelled: AtomicU64,
    fired: AtomicU64,
    stopped: AtomicU64,
    /// Times the worker woke from a park.
    worker_wakeups: AtomicU64,
    /// The most a timeout fired after its deadline, in nanoseconds.
    max_lateness: AtomicU64,
}

/// The totals, for `stats()`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    pub(crate) scheduled: u64,
    pub(crate) fired: u64,
    pub(crate) cancelled: u64,
    pub(crate) stopped: u64,
    pub(crate) pending: usize,
    pub(crate) worker_wakeups: u64,
    pub(crate) max_lateness_nanos: u64,
    pub(crate) queued: usize,
}

impl Counts {
    pub(crate) fn new(limit: Option<usize>) -> Counts {
        Counts {
            limit,
            pending: AtomicUsize::new(0),
            scheduled: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            stopped: AtomicU64::new(0),
            worker_wakeups: AtomicU64::new(0),
            max_lateness: AtomicU64::new(0),
        }
    }

    /// Pending timeouts: the limit's count, or else the totals' (see
    /// `totals` for the arguments).
    pub(crate) fn pending(
        &self,
        lanes_cancelled: impl FnOnce() -> u64,
        lanes_scheduled: impl FnOnce() -> u64,
    ) -> usize {
        match self.limit {
            Some(_) => self.pending.load(Ordering::Acquire),
            None => self.totals(lanes_cancelled, lanes_scheduled).pending,
        }
    }

    /// Counts one more pending timeout, on `lane` (this thread's) if any, or
    /// says why it cannot. A future's waker counts but is not refused by
    /// the limit: a `Sleep` has no error to
    /// report and must not end early, and futures are bounded by the tasks
    /// that hold them.
    #[inline(always)]
    pub(crate) fn reserve(&self, lane: Option<&Lane>, task: &Task) -> Result<(), Refusal> {
        if let Some(limit) = self.limit {
            let max = match task {
                Task::Wake(_) => MAX_ENTRIES,
                _ => limit,
            };
            self.pending
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                    (p < max).then_some(p + 1)
                })
                .map_err(|pending| Refusal::AtCapacity { pending, max })?;
        }
        // Without a limit, the arena enforces the hard one.
        match lane {
            Some(lane) => lane.count_scheduled(1),
            None => drop(self.scheduled.fetch_add(1, Ordering::Release)),
        }
        Ok(())
    }

    /// Undoes `reserve`, for a schedule refused after it.
    #[cold]
    pub(crate) fn unreserve(&self, lane: Option<&Lane>) {
        if self.limit.is_some() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        match lane {
            Some(lane) => lane.count_scheduled(1u64.wrapping_neg()),
            None => drop(self.scheduled.fetch_sub(1, Ordering::Release)),
        }
    }

    /// A cancel won: uncounts the timeout, on `lane` (this thread's) if any.
    #[inline(always)]
    pub(crate) fn uncount_cancelled(&self, lane: Option<&Lane>) {
        if self.limit.is_some() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        match lane {
            Some(lane) => lane.count_cancelled(),
            None => drop(self.cancelled.fetch_add(1, Ordering::Release)),
        }
    }

    /// `n` pending timeouts fired or were stopped.
    pub(crate) fn uncount(&self, n: usize, how: Ended) {
        if n == 0 {
            return;
        }
        if self.limit.is_some() {
            self.pending.fetch_sub(n, Ordering::AcqRel);
        }
        let total = match how {
            Ended::Fired => &self.fired,
            Ended::Stopped => &self.stopped,
        };
        total.fetch_add(n as u64, Ordering::Release);
    }

    /// The worker woke from a park. It alone counts them.
    pub(crate) fn note_wakeup(&self) {
        let wakeups = &self.worker_wakeups;
        wakeups.store(wakeups.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// A timeout fired `nanos` after its deadline.
    #[inline]
    pub(crate) fn note_lateness(&self, nanos: u64) {
        if nanos > self.max_lateness.load(Ordering::Relaxed) {
            self.max_lateness.fetch_max(nanos, Ordering::Relaxed);
        }
    }

    /// The totals, each read once in the module docs' order, the lanes'
    /// counts summed by `lanes_cancelled` and `lanes_scheduled`. Pending is
    /// the difference, so the totals add up even while others count; all are
    /// current only at a quiet moment. `queued` is left 0 for the caller.
    pub(crate) fn totals(
        &self,
        lanes_cancelled: impl FnOnce() -> u64,
        lanes_scheduled: impl FnOnce() -> u64,
    ) -> Totals {
        let fired = self.fired.load(Ordering::Acquire);
        let stopped = self.stopped.load(Ordering::Acquire);
        let cancelled = lanes_cancelled().wrapping_add(self.cancelled.load(Ordering::Acquire));
        let scheduled = lanes_scheduled().wrapping_add(self.scheduled.load(Ordering::Acquire));
        let ended = fired.saturating_add(cancelled).saturating_add(stopped);
        let pending = scheduled.saturating_sub(ended);
        Totals {
            scheduled,
            fired,
            cancelled,
            stopped,
            pending: usize::try_from(pending).unwrap_or(usize::MAX),
            worker_wakeups: self.worker_wakeups.load(Ordering::Relaxed),
            max_lateness_nanos: self.max_lateness.load(Ordering::Relaxed),
            queued: 0,
        }
    }
}
