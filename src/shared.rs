//! State shared by every handle of one timer, and the producer side:
//! `schedule` and `cancel`, callable from any thread without a lock.
//!
//! # Waking the worker
//!
//! The worker publishes the tick it sleeps until in `planned_wake`
//! (`u64::MAX` when parked for good, 0 while it is busy and will look at the
//! queue anyway). A producer pushes, then reads `planned_wake`, and unparks
//! only if its deadline is earlier, or if `INTAKE_BATCH` new timeouts are
//! queued. The worker stores `planned_wake`, then
//! re-checks the queue before it parks. A `SeqCst` fence on each side
//! (store; fence; load) means at least one of them sees the other, so no
//! wake-up is lost and a later deadline costs no unpark.
//!
//! Cancellations use the same pattern with `cleanup_requested`: the first
//! cancel of an entry that sits in a bucket sets it and unparks; the worker
//! clears it at most once per tick, so a flood of cancels costs at most a
//! wake-up or two per tick, and a cancelled entry leaves its bucket within
//! a tick.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};

use crossbeam_queue::SegQueue;

use crate::clock::{Clock, Nanos};
use crate::entry::{CancelOutcome, Entry};
use crate::task::Task;
use crate::wheel::Wheel;
use crate::TimerError;

/// Hard limit on pending timeouts even with no `max_pending_timeouts`:
/// the wheel's slab links are `u32` (key + 1), so it must stay well below
/// 2^32 entries, cancelled-but-not-yet-removed ones included.
pub(crate) const HARD_MAX_PENDING: usize = 1 << 31;

/// How many new timeouts may wait in the intake for a sleeping worker. A
/// later deadline alone does not wake it, but a batch this big does: the
/// filing is spread out instead of piling up for the tick the worker wakes
/// at (100,000 sleeps then took 12 ms to file before any could fire), and
/// entries cancelled while still queued are freed within a batch.
pub(crate) const INTAKE_BATCH: usize = 1024;

/// `planned_wake` while the worker is awake: no producer needs to unpark it.
pub(crate) const BUSY: u64 = 0;
/// `planned_wake` while the worker is parked with nothing to wait for.
pub(crate) const IDLE: u64 = u64::MAX;

thread_local! {
    /// The id of the timer whose task is running on this thread, or 0.
    static RUNNING_TASK_OF: Cell<u64> = const { Cell::new(0) };
}

pub(crate) struct Config {
    pub(crate) tick_nanos: u64,
    pub(crate) ticks_per_wheel: usize,
    pub(crate) max_pending: Option<usize>,
    pub(crate) thread_name: String,
}

/// What only the thread driving the wheel touches.
pub(crate) struct Core {
    pub(crate) wheel: Wheel,
    /// The tick at which cancellations were last removed.
    pub(crate) last_cleanup: Option<u64>,
}

pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pending: AtomicUsize,
    shutdown: AtomicBool,
    pub(crate) intake: SegQueue<Arc<Entry>>,
    pub(crate) cancelled: SegQueue<Arc<Entry>>,
    pub(crate) cleanup_requested: AtomicBool,
    pub(crate) planned_wake: AtomicU64,
    core: Mutex<Core>,
    /// Serialises manual `advance` calls.
    pub(crate) driver: Mutex<()>,
    pub(crate) worker: Mutex<Option<JoinHandle<()>>>,
    worker_thread: OnceLock<Thread>,
}

impl Shared {
    pub(crate) fn new(config: Config, manual: bool) -> Shared {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            clock: Clock::new(config.tick_nanos, manual),
            core: Mutex::new(Core {
                wheel: Wheel::new(config.ticks_per_wheel),
                last_cleanup: None,
            }),
            config,
            pending: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            intake: SegQueue::new(),
            cancelled: SegQueue::new(),
            cleanup_requested: AtomicBool::new(false),
            planned_wake: AtomicU64::new(BUSY),
            driver: Mutex::new(()),
            worker: Mutex::new(None),
            worker_thread: OnceLock::new(),
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    pub(crate) fn uncount(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::AcqRel);
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.unpark_worker();
    }

    pub(crate) fn lock_core(&self) -> MutexGuard<'_, Core> {
        // No user code runs under this lock; recover rather than propagate.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_worker_thread(&self, thread: Thread) {
        let _ = self.worker_thread.set(thread);
    }

    pub(crate) fn is_worker_thread(&self) -> bool {
        self.worker_thread
            .get()
            .is_some_and(|t| t.id() == std::thread::current().id())
    }

    pub(crate) fn unpark_worker(&self) {
        if let Some(thread) = self.worker_thread.get() {
            thread.unpark();
        }
    }

    /// True while this thread runs a task of this timer.
    pub(crate) fn in_own_task(&self) -> bool {
        RUNNING_TASK_OF.with(|id| id.get() == self.id)
    }

    /// Runs `f` marked as a task of this timer, for `in_own_task`.
    pub(crate) fn as_own_task<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(u64);
        impl Drop for Restore {
            fn drop(&mut self) {
                RUNNING_TASK_OF.with(|id| id.set(self.0));
            }
        }
        let _restore = Restore(RUNNING_TASK_OF.with(|id| id.replace(self.id)));
        f()
    }

    /// Counts one more pending timeout, or says why it cannot.
    ///
    /// A future's waker counts but is not refused by `max_pending_timeouts`:
    /// a `Sleep` has no error to report and must not end early, and futures
    /// are bounded by the tasks that hold them.
    fn reserve(&self, task: &Task) -> Result<(), TimerError> {
        let max = match task {
            Task::Wake(_) => HARD_MAX_PENDING,
            _ => self.config.max_pending.unwrap_or(HARD_MAX_PENDING),
        };
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p < max).then_some(p + 1)
            })
            .map(drop)
            .map_err(|pending| TimerError::AtCapacity { pending, max })
    }

    /// The producer path: counts, queues and, if needed, wakes the worker.
    pub(crate) fn schedule(&self, deadline: Nanos, task: Task) -> Result<Arc<Entry>, TimerError> {
        if self.is_shutdown() {
            return Err(TimerError::Shutdown);
        }
        self.reserve(&task)?;
        let entry = Arc::new(Entry::new(deadline, task));
        self.intake.push(entry.clone());
        fence(Ordering::SeqCst);
        if self.is_shutdown() && entry.try_stop() {
            // `stop()` may have drained the queue before our push: take the
            // entry back. Had `stop()` taken it, it is in its returned Vec,
            // and must stay stopped there (not cancelled, as `try_cancel`
            // would make it).
            self.uncount(1);
            return Err(TimerError::Shutdown);
        }
        let planned = self.planned_wake.load(Ordering::SeqCst);
        if self.clock.tick_of(deadline) < planned
            || (planned != BUSY && self.intake.len() >= INTAKE_BATCH)
        {
            self.unpark_worker();
        }
        Ok(entry)
    }

    /// The cancel path. Returns the task, if the caller won, for its
    /// `cancelled` hook.
    pub(crate) fn cancel(&self, entry: &Arc<Entry>) -> Option<Task> {
        let outcome = entry.try_cancel()?;
        if outcome == CancelOutcome::WasPending {
            self.uncount(1);
        }
        // Pairs with the worker's fence after it files an entry: either it
        // sees CANCELLED and removes the entry at once, or we see its slot.
        fence(Ordering::SeqCst);
        if entry.slot().is_some() {
            self.cancelled.push(entry.clone());
            // Pairs with the worker clearing `cleanup_requested` before it
            // drains `cancelled`: it sees our push, or we see the flag clear.
            fence(Ordering::SeqCst);
            self.request_cleanup();
        }
        Some(entry.take_task().unwrap_or(Task::Wake(None)))
    }

    fn request_cleanup(&self) {
        if !self.cleanup_requested.load(Ordering::Relaxed)
            && !self.cleanup_requested.swap(true, Ordering::SeqCst)
        {
            self.unpark_worker();
        }
    }
}
