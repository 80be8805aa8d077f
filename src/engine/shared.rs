//! State shared by every handle of one timer, and the producer side:
//! `schedule` and `cancel`, from any thread, without a lock.
//!
//! # Waking the worker
//!
//! The worker publishes in `planned_wake` the earliest deadline it would
//! fire within a tick if it slept as planned (`IDLE` when parked for good,
//! `BUSY` while awake). A producer pushes, then reads `planned_wake`, and
//! unparks only if its deadline is earlier; the worker stores it, then
//! looks at the queues again before it parks. A `SeqCst` fence on each side
//! (store; fence; load) means one of them sees the other: no wake-up is
//! lost, and a later deadline costs no unpark.
//!
//! `housekeeping_requested` works the same way for what has no deadline: a
//! key in the mailbox (a cancel that came after the worker took the
//! entry), every `SHARED_LOOK_EVERY`-th key on the shared queue. The first
//! ask after the worker cleared the flag unparks it, and the worker clears
//! it at most once a tick, so a flood costs a wake-up or two a tick. A lane
//! filling up asks once per drain (see `lane/`).

use std::any::Any;
use std::cell::Cell;
use std::sync::{Arc, OnceLock, Weak};
use std::thread::{JoinHandle, Thread};

use crossbeam_queue::SegQueue;

use crate::engine::clock::{Clock, Nanos, Source};
use crate::engine::counts::{Counts, Totals};
use crate::engine::entry::{CancelOutcome, Entry};
use crate::engine::intake::{Intake, Queued};
use crate::engine::key::Key;
use crate::engine::lane::{urgent_nanos, withdraw};
use crate::engine::refusal::Refusal;
use crate::engine::shutdown_hooks::{ShutdownHook, ShutdownHooks};
use crate::engine::slots::{Slots, MAX_ENTRIES};
#[cfg(test)]
use crate::engine::sync::AtomicUsize;
use crate::engine::sync::{fence, AtomicBool, AtomicU64, LocalKey, Mutex, MutexGuard, Ordering};
use crate::engine::task::Handoff;
use crate::engine::task::Jobs;
use crate::engine::task::Task;
use crate::engine::wheel::Wheel;

/// `planned_wake` while the worker is awake: no producer needs to unpark it.
pub(crate) const BUSY: u64 = 0;
/// `planned_wake` while the worker is parked with nothing to wait for.
pub(crate) const IDLE: u64 = u64::MAX;

#[cfg(not(loom))]
thread_local! {
    /// The id of the timer whose task is running on this thread, or 0.
    static RUNNING_TASK_OF: Cell<u64> = const { Cell::new(0) };
    /// The id of the manual-clock timer this thread is advancing, or 0.
    static DRIVING: Cell<u64> = const { Cell::new(0) };
}

#[cfg(loom)]
loom::thread_local! {
    static RUNNING_TASK_OF: Cell<u64> = Cell::new(0);
    static DRIVING: Cell<u64> = Cell::new(0);
}

/// Runs `f` with `marker` set to `id`, restored after it, even on a panic.
#[inline]
fn marked<R>(marker: &'static LocalKey<Cell<u64>>, id: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(&'static LocalKey<Cell<u64>>, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.with(|id| id.set(self.1));
        }
    }
    let _restore = Restore(marker, marker.with(|old| old.replace(id)));
    f()
}

pub(crate) struct Config {
    pub(crate) executor: Option<Handoff>,
    pub(crate) tick_nanos: u64,
    pub(crate) ticks_per_wheel: usize,
    pub(crate) max_pending: Option<usize>,
    pub(crate) thread_name: String,
}

/// What only the driver touches, and `stop()` once the driver is done.
pub(crate) struct Core {
    pub(crate) wheel: Wheel,
    /// The tick of the last housekeeping.
    pub(crate) last_housekeeping: Option<u64>,
    /// Due entries not fired as the timer shut down meanwhile: stopped,
    /// uncounted, each with the timer's reference, for `stop()` to return.
    pub(crate) unfired: Vec<Key>,
    /// Entries already due when filed (a deadline in the past, a zero
    /// delay), each with the timer's reference: the turn that filed them
    /// fires them, without waiting for a tick.
    pub(crate) ready: Vec<Key>,
}

pub(crate) struct Shared {
    pub(crate) id: u64,
    /// A timeout due within this long of its push is filed at once, not
    /// held (see `lane/`).
    urgent_nanos: u64,
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pub(crate) slots: Slots,
    pub(crate) counts: Counts,
    shutdown: AtomicBool,
    /// New and re-armed entries, each with the timer's reference.
    pub(crate) intake: Intake,
    /// Entries cancelled after the driver took them, to take out of the
    /// wheel, and entries a reset moved earlier, to file again (see
    /// `reset.rs`): each with a reference.
    pub(crate) mailbox: SegQueue<Key>,
    pub(crate) housekeeping_requested: AtomicBool,
    pub(crate) planned_wake: AtomicU64,
    /// Rounds of the worker's loop, for tests.
    #[cfg(test)]
    pub(crate) worker_rounds: AtomicUsize,
    /// Calls to `unpark_worker`, for tests.
    #[cfg(test)]
    pub(crate) unparks: AtomicUsize,
    core: Mutex<Core>,
    /// Jobs in the executor's hands (see `dispatch.rs`).
    pub(crate) jobs: Mutex<Jobs>,
    /// Serialises manual `advance` calls.
    pub(crate) driver: Mutex<()>,
    pub(crate) worker: Mutex<Option<JoinHandle<()>>>,
    worker_thread: OnceLock<Thread>,
    /// How producers wake a driver that is a tokio task, not a thread.
    driver_notify: OnceLock<Arc<tokio::sync::Notify>>,
    /// The face's handle, weakly, for `Timeout::timer()`, kept unnamed.
    owner: OnceLock<Weak<dyn Any + Send + Sync>>,
    /// Told when the timer shuts down (see `shutdown_hooks.rs`).
    pub(crate) shutdown_hooks: ShutdownHooks,
}

impl Shared {
    pub(crate) fn new(config: Config, source: Source) -> Shared {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Shared {
            id,
            urgent_nanos: urgent_nanos(config.tick_nanos),
            clock: Clock::of(config.tick_nanos, source),
            core: Mutex::new(Core {
                wheel: Wheel::new(config.ticks_per_wheel, config.tick_nanos),
                last_housekeeping: None,
                unfired: Vec::new(),
                ready: Vec::new(),
            }),
            slots: Slots::new(),
            counts: Counts::new(config.max_pending),
            config,
            shutdown: AtomicBool::new(false),
            intake: Intake::new(id),
            mailbox: SegQueue::new(),
            housekeeping_requested: AtomicBool::new(false),
            planned_wake: AtomicU64::new(BUSY),
            #[cfg(test)]
            worker_rounds: AtomicUsize::new(0),
            #[cfg(test)]
            unparks: AtomicUsize::new(0),
            jobs: Mutex::new(Jobs::new()),
            driver: Mutex::new(()),
            worker: Mutex::new(None),
            worker_thread: OnceLock::new(),
            driver_notify: OnceLock::new(),
            owner: OnceLock::new(),
            shutdown_hooks: ShutdownHooks::default(),
        }
    }

    pub(crate) fn set_owner(&self, owner: Weak<dyn Any + Send + Sync>) {
        let _ = self.owner.set(owner);
    }

    /// The timer's handle, if it still has one.
    pub(crate) fn owner(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.owner.get()?.upgrade()
    }

    pub(crate) fn pending(&self) -> usize {
        self.counts.pending()
    }

    /// The totals behind `stats()`.
    pub(crate) fn totals(&self) -> Totals {
        Totals {
            queued: self.intake.len(),
            ..self.counts.totals()
        }
    }

    #[inline(always)]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Calls `hook` when the timer shuts down, or now if it has.
    pub(crate) fn on_shutdown(&self, hook: &Arc<dyn ShutdownHook>) {
        self.shutdown_hooks.add(hook);
        if self.is_shutdown() {
            hook.shut_down();
        }
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.unpark_worker();
    }

    pub(crate) fn lock_core(&self) -> MutexGuard<'_, Core> {
        // No user code runs under this lock (see `Slots::release_locked`);
        // recover rather than propagate.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_worker_thread(&self, thread: Thread) {
        let _ = self.worker_thread.set(thread);
    }

    #[inline]
    pub(crate) fn has_worker_thread(&self) -> bool {
        self.worker_thread.get().is_some()
    }

    pub(crate) fn is_worker_thread(&self) -> bool {
        self.worker_thread
            .get()
            .is_some_and(|t| t.id() == std::thread::current().id())
    }

    pub(crate) fn unpark_worker(&self) {
        #[cfg(test)]
        self.unparks.fetch_add(1, Ordering::Relaxed);
        if let Some(thread) = self.worker_thread.get() {
            thread.unpark();
        } else if let Some(notify) = self.driver_notify.get() {
            notify.notify_one();
        }
    }

    pub(crate) fn set_driver_notify(&self, notify: Arc<tokio::sync::Notify>) {
        let _ = self.driver_notify.set(notify);
    }

    /// True while this thread runs a task of this timer.
    pub(crate) fn in_own_task(&self) -> bool {
        RUNNING_TASK_OF.with(|id| id.get() == self.id)
    }

    /// Runs `f` marked as a task of this timer, for `in_own_task`.
    pub(crate) fn as_own_task<R>(&self, f: impl FnOnce() -> R) -> R {
        marked(&RUNNING_TASK_OF, self.id, f)
    }

    /// True while this thread is inside a manual `advance` of this timer.
    pub(crate) fn is_driving_here(&self) -> bool {
        DRIVING.with(|id| id.get() == self.id)
    }

    /// Runs `f` marked as driving this timer, for `is_driving_here`.
    pub(crate) fn as_driver<R>(&self, f: impl FnOnce() -> R) -> R {
        marked(&DRIVING, self.id, f)
    }

    /// The entry named by `key`.
    #[inline]
    pub(crate) fn entry(&self, key: Key) -> &Entry {
        self.slots.get(key)
    }

    /// The producer path: counts, queues and, if needed, wakes the worker.
    /// `now` is the reading `deadline` was made from, which says how long
    /// the key may wait in its lane (see `lane/`). The entry gets two
    /// references, the timer's and the caller's. Also returns the key's
    /// lane mark (or 0), for `cancel_at`.
    #[inline(always)]
    pub(crate) fn schedule(
        &self,
        now: Nanos,
        deadline: Nanos,
        task: Task,
    ) -> Result<(Key, u32), Refusal> {
        if self.is_shutdown() {
            return Err(Refusal::Shutdown);
        }
        // One look-up of this thread's lane for the whole schedule.
        let lane = self.intake.lane_here();
        self.counts.reserve(&task)?;
        let free = lane.and_then(|lane| lane.pop_free(&self.slots));
        let taken = free.or_else(|| {
            let keep = |key, entry: &Entry| lane.is_some_and(|lane| lane.push_free(key, entry));
            let key = self.slots.take_key(keep)?;
            Some((key, self.entry(key)))
        });
        let Some((key, entry)) = taken else {
            self.counts.unreserve();
            return Err(Refusal::AtCapacity {
                pending: self.pending(),
                max: MAX_ENTRIES,
            });
        };
        entry.occupy(deadline, task, 2);
        let urgent = self.is_urgent(now, deadline);
        let queued = self.intake.push_on(lane, key, entry, now, urgent);
        let mark = queued.mark;
        if !self.after_push(queued, entry) && self.try_stop(key) {
            self.counts.unreserve();
            // Dropped here, not left in the slot: the queue's reference may
            // be the last, released by the driver under the core lock.
            drop(entry.take_task());
            self.release(key);
            return Err(Refusal::Shutdown);
        }
        Ok((key, mark))
    }

    /// Queues a pending entry (new, or a periodic one re-armed) with the
    /// timer's reference, and wakes the worker if it would fire it more
    /// than a tick late. False if the timer shut down meanwhile: `stop()`
    /// may have drained the queue before the push, so the caller takes
    /// the entry back with `try_stop` (true: stopped, for the caller to
    /// uncount; false: `stop()` returned it). The queue keeps the
    /// timer's reference either way.
    pub(crate) fn enqueue(&self, key: Key) -> bool {
        let entry = self.entry(key);
        let now = self.clock.now();
        let urgent = self.is_urgent(now, entry.deadline());
        self.after_push(self.intake.push(key, entry, now, urgent), entry)
    }

    /// True if a timeout due at `deadline`, made at `now`, is not held.
    #[inline(always)]
    fn is_urgent(&self, now: Nanos, deadline: Nanos) -> bool {
        deadline < now.saturating_add(self.urgent_nanos)
    }

    /// The rest of `enqueue`, once the entry is queued.
    #[inline(always)]
    fn after_push(&self, queued: Queued, entry: &Entry) -> bool {
        let deadline = entry.deadline();
        fence(Ordering::SeqCst);
        if self.is_shutdown() {
            return false;
        }
        if queued.look {
            self.request_housekeeping();
        }
        if queued.wake || deadline < self.planned_wake.load(Ordering::SeqCst) {
            self.unpark_worker();
        }
        true
    }

    /// `PENDING -> STOPPED` for `key`.
    pub(crate) fn try_stop(&self, key: Key) -> bool {
        self.entry(key).try_stop()
    }

    /// The cancel path, for a caller holding a reference to `key`; `mark`
    /// is the lane mark `schedule` returned (or 0), so the lane's cell is
    /// reached without reading the entry. Returns the task if the caller
    /// won, for its `cancelled` hook.
    #[inline(always)]
    pub(crate) fn cancel_at(&self, key: Key, mark: u32) -> Option<Task> {
        let cell = self.intake.cell_at(mark);
        let entry = self.entry(key);
        let outcome = entry.try_cancel()?;
        if outcome != CancelOutcome::Stopped {
            self.counts.uncount_cancelled();
        }
        let withdrawn = cell.is_some_and(|cell| withdraw(cell, key))
            || (entry.queue_mark() != mark && self.intake.withdraw(entry, key));
        if withdrawn {
            // The worker never saw it. The queue's reference is ours, and
            // the caller holds one too: not the last.
            entry.release_withdrawn_reference();
        } else {
            self.leave_removal_to_worker(key, entry);
        }
        let task = match outcome {
            CancelOutcome::Waiting => entry.take_task_won(),
            _ => entry.take_task(),
        };
        // Not `unwrap_or`: it would drop the unused default, a call per cancel.
        Some(task.unwrap_or_else(|| Task::Wake(None)))
    }

    /// `cancel_at`, then `release`: for a `Sleep`, its entry's only holder.
    /// Returns the task if this cancel won it, for the caller to drop.
    pub(crate) fn cancel_and_release(&self, key: Key, mark: u32) -> Option<Task> {
        let task = self.cancel_at(key, mark);
        self.release(key);
        task
    }

    /// A cancelled entry the worker took from the intake: the worker
    /// takes it out of the wheel (through the mailbox) or finds it
    /// cancelled as it files it.
    fn leave_removal_to_worker(&self, key: Key, entry: &Entry) {
        // Pairs with the worker's fence after it files an entry: either it
        // sees CANCELLED and removes the entry at once, or we see it filed.
        fence(Ordering::SeqCst);
        if entry.in_wheel() {
            self.slots.retain(key);
            self.mailbox.push(key);
            // Pairs with the worker clearing the flag before it reads the
            // mailbox: it sees our push, or we see the flag clear.
            fence(Ordering::SeqCst);
        }
        self.request_housekeeping();
    }

    /// Gives up one reference to `key`. The last vacates the slot.
    #[inline(always)]
    pub(crate) fn release(&self, key: Key) {
        let entry = self.entry(key);
        if entry.release() {
            drop(entry.vacate()); // may run user code: before the lane
            self.keep_free(key, entry);
        }
    }

    /// Keeps a vacated slot on this thread's lane, or frees it to the arena.
    #[inline(always)]
    fn keep_free(&self, key: Key, entry: &Entry) {
        if !self.intake.push_free(key, entry) {
            self.slots.push_free(key);
        }
    }

    /// Entries handed out and not yet freed; for tests.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.slots.live() - self.intake.free_in_lanes()
    }

    fn request_housekeeping(&self) {
        if !self.housekeeping_requested.load(Ordering::Relaxed)
            && !self.housekeeping_requested.swap(true, Ordering::SeqCst)
        {
            self.unpark_worker();
        }
    }
}
