//! What the timer counts: the pending count, and the totals behind
//! `stats()`: timeouts scheduled, fired, cancelled and stopped.
//!
//! Every timeout that counts as scheduled leaves the pending count exactly
//! once, and is counted there, and only there, as fired, cancelled or
//! stopped (invariant 5): so at any quiet moment
//! `scheduled = fired + cancelled + stopped + pending`. A refused call
//! counts nowhere.
//!
//! Producers count on their own lane, in owner-only fields (plain loads and
//! stores, no read-modify-write): `scheduled` at a schedule, `cancelled` at
//! a winning cancel. Without a `max_pending_timeouts` to enforce, the
//! pending count is then the lanes' `scheduled - cancelled` plus a shared
//! count, which the driver lowers for what fires or stops, and producers
//! with no lane use. With a limit, the shared count alone is the pending
//! count, so that a schedule can check it in one step; the lanes then only
//! keep the totals.

use crate::engine::lane::Lane;
use crate::engine::refusal::Refusal;
use crate::engine::slots::MAX_ENTRIES;
use crate::engine::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::engine::task::Task;

/// How a timeout left the pending count, other than by a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its deadline came: it was run or woken, or handed to the executor
    /// to run; or a periodic run panicked, ending it.
    Fired,
    /// `stop()` ended it before it ran (or a periodic task between runs).
    Stopped,
}

/// The shared counts.
pub(crate) struct Counts {
    /// Pending timeouts, less those the lanes count (see the module docs).
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
    pub(crate) fn new() -> Counts {
        Counts {
            pending: AtomicUsize::new(0),
            scheduled: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            stopped: AtomicU64::new(0),
            worker_wakeups: AtomicU64::new(0),
            max_lateness: AtomicU64::new(0),
        }
    }

    /// Pending timeouts: the shared count plus `lanes`, the lanes' share
    /// when they keep one. Those may be read a moment apart, so a racing
    /// reader can see a count off by the timeouts in flight; never below 0.
    pub(crate) fn pending(&self, lanes: u64) -> usize {
        let shared = self.pending.load(Ordering::Acquire) as u64;
        shared.wrapping_add(lanes).min(i64::MAX as u64) as i64 as usize
    }

    /// Counts one more pending timeout, on `lane` (this thread's) if there
    /// is one, or says why it cannot. `limit` is `max_pending_timeouts`:
    /// without one, the lanes keep the pending count.
    ///
    /// A future's waker counts but is not refused by the limit: a `Sleep`
    /// has no error to report and must not end early, and futures are
    /// bounded by the tasks that hold them.
    #[inline(always)]
    pub(crate) fn reserve(
        &self,
        lane: Option<&Lane>,
        limit: Option<usize>,
        task: &Task,
    ) -> Result<(), Refusal> {
        if let Some(limit) = limit {
            let max = match task {
                Task::Wake(_) => MAX_ENTRIES,
                _ => limit,
            };
            self.pending
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                    (p < max).then_some(p + 1)
                })
                .map_err(|pending| Refusal::AtCapacity { pending, max })?;
        } else if lane.is_none() {
            // The arena enforces the hard limit.
            self.pending.fetch_add(1, Ordering::AcqRel);
        }
        match lane {
            Some(lane) => lane.count_scheduled(1),
            None => drop(self.scheduled.fetch_add(1, Ordering::Relaxed)),
        }
        Ok(())
    }

    /// Undoes `reserve`, for a schedule refused after it.
    #[cold]
    pub(crate) fn unreserve(&self, lane: Option<&Lane>, limited: bool) {
        if limited || lane.is_none() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        match lane {
            Some(lane) => lane.count_scheduled(1u64.wrapping_neg()),
            None => drop(self.scheduled.fetch_sub(1, Ordering::Relaxed)),
        }
    }

    /// A cancel won a pending timeout: uncounts it, on `lane` (this
    /// thread's) if there is one.
    #[inline(always)]
    pub(crate) fn uncount_cancelled(&self, lane: Option<&Lane>, limited: bool) {
        if limited || lane.is_none() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        match lane {
            Some(lane) => lane.count_cancelled(),
            None => drop(self.cancelled.fetch_add(1, Ordering::Relaxed)),
        }
    }

    /// `n` pending timeouts fired or were stopped.
    pub(crate) fn uncount(&self, n: usize, how: Ended) {
        if n == 0 {
            return;
        }
        self.pending.fetch_sub(n, Ordering::AcqRel);
        let total = match how {
            Ended::Fired => &self.fired,
            Ended::Stopped => &self.stopped,
        };
        total.fetch_add(n as u64, Ordering::Relaxed);
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

    /// The totals, each read once: consistent only at a quiet moment.
    /// `lanes` reads the lanes' (scheduled, cancelled); `pending` and
    /// `queued` are read after them.
    pub(crate) fn totals(
        &self,
        lanes: impl FnOnce() -> (u64, u64),
        pending: impl FnOnce() -> usize,
        queued: usize,
    ) -> Totals {
        // Lowered totals first, so a racing reader sees fewer ended than
        // scheduled rather than more.
        let fired = self.fired.load(Ordering::Acquire);
        let stopped = self.stopped.load(Ordering::Acquire);
        let (lane_scheduled, lane_cancelled) = lanes();
        let cancelled = lane_cancelled.wrapping_add(self.cancelled.load(Ordering::Acquire));
        let scheduled = lane_scheduled.wrapping_add(self.scheduled.load(Ordering::Acquire));
        Totals {
            scheduled,
            fired,
            cancelled,
            stopped,
            pending: pending(),
            worker_wakeups: self.worker_wakeups.load(Ordering::Relaxed),
            max_lateness_nanos: self.max_lateness.load(Ordering::Relaxed),
            queued,
        }
    }
}
