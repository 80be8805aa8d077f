//! Why a timeout is refused, the pending count, and the totals behind `stats()`, which add up as
//! `TimerStats` says (invariant 5). The pending count never goes below zero: a timeout leaves it
//! only after `reserve` (what ends it exists only after), and one atomic's changes have one order.

use crate::engine::driver::lateness::Lateness;
use crate::engine::entry::{arena::MAX_ENTRIES, task::Task};
use crate::engine::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Why the engine refused a new timeout; the face makes it a `TimerError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The timer has been stopped.
    Shutdown,
    /// The timer holds as many pending timeouts as it may.
    AtCapacity { pending: usize, max: usize },
    /// The worker thread could not be started.
    WorkerSpawn(String),
}

/// How a timeout left the pending count: its total's index in `Counts::ended_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its deadline came (run, woken or handed off), or a periodic run panicked.
    Fired,
    /// `stop()` ended it before it ran (or a periodic task between runs).
    Stopped,
    /// A cancel won.
    Cancelled,
}

#[derive(Default)]
pub(crate) struct Counts {
    limit: usize,
    pending: AtomicUsize,
    /// Takers of batched cancels still counting them, and batches counted so far
    /// (`Shared::cancel_all`; `reserve_at_the_limit` reads both).
    pub(crate) counting: AtomicUsize,
    pub(crate) batches_counted: AtomicU64,
    /// Set when a shutdown that waited for the driver has stopped everything: what `pending` still
    /// holds is a schedule racing it, to be refused (`unreserve`), so the totals count it nowhere.
    ended: AtomicBool,
    /// Timeouts that left `pending`, by how they ended (`Ended`).
    ended_by: [AtomicU64; 3],
    /// Times a sleeping driver woke; nanoseconds it spent turning. Only the driver writes these.
    driver_wakeups: AtomicU64,
    driver_busy: AtomicU64,
    pub(crate) lateness: Lateness,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Totals {
    pub(crate) scheduled: u64,
    pub(crate) fired: u64,
    pub(crate) cancelled: u64,
    pub(crate) stopped: u64,
    pub(crate) pending: usize,
    pub(crate) driver_wakeups: u64,
    pub(crate) driver_busy_nanos: u64,
}

impl Counts {
    pub(crate) fn new(limit: Option<usize>) -> Counts {
        Counts {
            limit: limit.unwrap_or(MAX_ENTRIES),
            ..Counts::default()
        }
    }

    /// The most timeouts pending at once: `max_pending_timeouts` or the arena's size.
    pub(crate) fn limit(&self) -> usize {
        self.limit.min(MAX_ENTRIES)
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// The pending count read by a read-modify-write: the latest, where a load may be stale.
    pub(crate) fn pending_latest(&self) -> usize {
        self.pending.fetch_add(0, Ordering::AcqRel)
    }

    /// Counts one more pending timeout, or says why not; never refuses a
    /// future's waker (see `Builder::max_pending_timeouts`).
    #[inline(always)]
    pub(crate) fn reserve(&self, task: &Task) -> Result<(), Refusal> {
        let max = self.limit;
        if max == MAX_ENTRIES || matches!(task, Task::Wake(_)) {
            // The arena enforces this one.
            self.pending.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        }
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p < max).then_some(p + 1)
            })
            .map(drop)
            .map_err(|pending| Refusal::AtCapacity { pending, max })
    }

    /// Called by a shutdown that waited for the driver, once it stopped and counted everything.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Undoes `reserve`, for a schedule refused after it.
    #[cold]
    pub(crate) fn unreserve(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    #[inline(always)]
    pub(crate) fn uncount(&self, n: usize, how: Ended) {
        if n == 0 {
            return;
        }
        self.ended_by[how as usize].fetch_add(n as u64, Ordering::Release);
        self.pending.fetch_sub(n, Ordering::AcqRel);
    }

    pub(crate) fn note_wakeup(&self) {
        self.driver_wakeups.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_busy(&self, nanos: u64) {
        self.driver_busy.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The totals, exact only when quiet.
    pub(crate) fn totals(&self) -> Totals {
        let mut pending = self.pending.load(Ordering::Acquire);
        if self.ended.load(Ordering::Acquire) {
            pending = 0; // schedules racing the shutdown, each to be refused
        }
        let [fired, stopped, cancelled] =
            std::array::from_fn(|i| self.ended_by[i].load(Ordering::Acquire));
        Totals {
            scheduled: (pending as u64) + fired + cancelled + stopped,
            fired,
            cancelled,
            stopped,
            pending,
            driver_wakeups: self.driver_wakeups.load(Ordering::Relaxed),
            driver_busy_nanos: self.driver_busy.load(Ordering::Relaxed),
        }
    }
}
