//! The producer side: `schedule`, `cancel`, `reset` and `release`, from any thread, without a lock.
//!
//! **Waking the driver.** A driver about to sleep publishes in `planned_wake` the earliest deadline
//! it would still fire in time (`IDLE`: parked for good, `BUSY`: awake), then looks at the queues
//! once more. A producer pushes, then reads `planned_wake`, and unparks it only for an earlier
//! deadline. A `SeqCst` fence on each side (store; fence; load) means one sees the other: no
//! wake-up is lost, and a later deadline costs none. `housekeeping_requested` does the same for
//! what has no deadline (a cancel that must reach the driver's mailbox, the shared queue's
//! backlog): the first ask after the driver cleared the flag unparks it, and the driver clears it
//! at most once a tick (each turn on a clock that can be paused). A cancel asks only if the plan
//! is to sleep past the tick's end.
//!
//! **Reset** follows the entry's rule (`entry/mod.rs`: the wheel keeps the entry where it was
//! filed); an earlier deadline also goes to the mailbox, waking the driver if it would sleep past
//! it, and the driver moves the entry out of its bucket or lane.

use crate::engine::clock::Nanos;
use crate::engine::driver::{
    counts::Ended, counts::Refusal, dispatch::each_then_first_panic, Shared,
};
use crate::engine::entry::{arena::MAX_ENTRIES, key::Key, task::Task};
use crate::engine::entry::{prefetch, CancelOutcome, Entry};
use crate::engine::intake::lane::{take_time, Lane, BATCH_WAIT_NANOS};
use crate::engine::sync::{fence, yield_now, Ordering};

impl Shared {
    /// Counts, queues and, if needed, wakes the driver. `now`, the reading `deadline` was made
    /// from, times the key in its lane (`take_time`). The entry gets two references, the timer's
    /// and the caller's.
    #[inline(always)]
    pub(crate) fn schedule(&self, now: Nanos, deadline: Nanos, task: Task) -> Result<Key, Refusal> {
        if self.is_shutdown() {
            return Err(Refusal::Shutdown);
        }
        // One look-up of this thread's lane for the whole schedule.
        let lane = self.intake.lane_here();
        let now = lane.map_or(now, |lane| lane.not_before(now));
        if self.counts.reserve(&task).is_err() {
            self.reserve_at_the_limit(&task)?;
        }
        let taken = lane
            .and_then(|lane| lane.pop_free(&self.slots))
            .or_else(|| self.slots.take_key().map(|key| (key, self.entry(key))));
        let Some((key, entry)) = taken else {
            self.counts.unreserve();
            return Err(Refusal::AtCapacity {
                pending: self.counts.pending(),
                max: MAX_ENTRIES,
            });
        };
        entry.occupy(deadline, task, 2);
        let at = take_time(now, deadline, self.urgent_nanos);
        let queued = match lane {
            Some(lane) => lane.try_push(key, entry, now, at).then_some(false),
            None => Some(self.intake.push_shared(key, entry)),
        };
        // `None`: its ring full, and the timer shut down; it was never queued.
        let queued = queued.or_else(|| self.push_after_filing(lane?, key, now, at));
        if !queued.is_some_and(|look| self.after_push(look, entry)) && entry.try_stop() {
            self.counts.unreserve();
            // Dropped here, not left in the slot: the queue's reference may
            // be the last, released by the driver under the core lock.
            drop(entry.take_task());
            // Ours, and the queue's if it was never handed over.
            self.release(key, 1 + u32::from(queued.is_none()));
            return Err(Refusal::Shutdown);
        }
        Ok(key)
    }

    /// `reserve` at the limit. The cancels waiting in batches have ended their timeouts for their
    /// users: counts them, waits for those another thread took to be counted, and tries again.
    /// Refuses only if the latest count is at the limit and no batched cancel ended before it was
    /// read: none left in a batch, none being counted, no batch counted since (another thread may
    /// have taken the place a batch freed).
    #[cold]
    fn reserve_at_the_limit(&self, task: &Task) -> Result<(), Refusal> {
        let counts = &self.counts;
        loop {
            self.cancel_batched();
            fence(Ordering::Acquire); // a taker of a cell found empty is seen counting
            while counts.counting.load(Ordering::Acquire) > 0 {
                yield_now();
            }
            let batches = counts.batches_counted.load(Ordering::Acquire);
            if counts.reserve(task).is_ok() {
                return Ok(());
            }
            let pending = counts.pending_latest();
            let batched = self.intake.lanes().any(Lane::has_batch);
            fence(Ordering::Acquire);
            let counting = counts.counting.load(Ordering::Acquire) > 0;
            let counted = counts.batches_counted.load(Ordering::Acquire) != batches;
            let max = counts.limit();
            if pending >= max && !batched && !counting && !counted {
                return Err(Refusal::AtCapacity { pending, max });
            }
        }
    }

    /// This thread's `lane` is full: files its oldest half and pushes again.
    #[cold]
    fn push_after_filing(&self, lane: &Lane, key: Key, now: Nanos, at: Nanos) -> Option<bool> {
        let earliest = self.file_lane(lane)?;
        // Pairs with the driver's store of `planned_wake`; fence; look (see
        // `plan_sleep`), which takes the lock `file_lane` held.
        fence(Ordering::SeqCst);
        if earliest < self.planned_wake.load(Ordering::SeqCst) {
            self.unpark_worker();
        }
        lane.try_push(key, self.entry(key), now, at)
            .then_some(false)
    }

    /// Queues a re-armed periodic entry with the timer's reference, waking the driver if it must.
    /// False if the timer shut down meanwhile (`stop()` may have drained the queue first): the
    /// caller takes the entry back with `try_stop`. The queue keeps the reference either way.
    pub(crate) fn enqueue(&self, key: Key) -> bool {
        let entry = self.entry(key);
        self.after_push(self.intake.push_shared(key, entry), entry)
    }

    /// The rest of `schedule` and `enqueue`, once the entry is queued:
    /// `look` asks the driver to look at the shared queue.
    #[inline(always)]
    fn after_push(&self, look: bool, entry: &Entry) -> bool {
        let deadline = entry.deadline();
        fence(Ordering::SeqCst);
        if self.is_shutdown() {
            return false;
        }
        if look {
            self.request_housekeeping();
        }
        if deadline < self.planned_wake.load(Ordering::SeqCst) {
            self.unpark_worker();
        }
        true
    }

    /// For a caller holding a reference to `key`, giving up `given` of them (1: a `Sleep`, its
    /// entry's only holder): the task if it won.
    #[inline(always)]
    pub(crate) fn cancel(&self, key: Key, given: u32) -> Option<Task> {
        let (task, counted) = self.cancel_uncounted(key, given)?;
        self.counts.uncount(usize::from(counted), Ended::Cancelled);
        Some(task)
    }

    /// `cancel`, giving up `given` references to `key` with the queue's, in one count-down:
    /// the task if it won, and whether the caller (a batch: once) lowers the pending count.
    #[inline(always)]
    fn cancel_uncounted(&self, key: Key, given: u32) -> Option<(Task, bool)> {
        let entry = self.entry(key);
        let Some(outcome) = entry.try_cancel() else {
            self.release(key, given);
            return None;
        };
        let withdrawn = self.intake.withdraw(entry, key); // unseen: the queue's ref is ours
        if !withdrawn {
            self.leave_removal_to_driver(key, entry);
        } else if !self.clock.reads_real_time() && !self.clock.is_manual() {
            // A paused tokio clock would move to the time planned for it: plan again.
            self.look_if_asleep_past(self.intake.lane_if_made(), 0);
        }
        let task = match outcome {
            CancelOutcome::Waiting => entry.take_task_won(),
            _ => entry.take_task(),
        };
        self.release(key, given + u32::from(withdrawn));
        let counted = outcome != CancelOutcome::Stopped;
        // Not `unwrap_or`: it would drop the unused default, a call per cancel.
        Some((task.unwrap_or_else(|| Task::Wake(None)), counted))
    }

    /// `cancel(key, 1)`, batched on this thread's lane, for a dropped `Sleep` and a delay
    /// queue's removal: half of them find the entry and its lane cell in another core's cache,
    /// and a batch loads them all at once. Each turn takes the batches before it fires, as
    /// `stop()` and a count's reader do, and a turn comes within 64 ms (`wake_for_batch`).
    #[inline(always)]
    pub(crate) fn cancel_later(&self, key: Key) {
        match self.intake.lane_if_made() {
            Some(lane) if !self.is_shutdown() => match lane.batch_cancel(key) {
                true => self.cancel_all(lane),
                false => self.wake_for_batch(lane),
            },
            _ => drop(self.cancel(key, 1)),
        }
    }

    /// A cancel waits in `lane`'s batch: wakes the driver if it plans to sleep longer than
    /// `BATCH_WAIT_NANOS` (invariant 6: memory comes back). The fence pairs with the driver's
    /// store of `planned_wake`, then look at the batches (`file_late_arrivals`): either it sees
    /// this one and wakes in time, or we see its plan.
    #[inline(always)]
    fn wake_for_batch(&self, lane: &Lane) {
        fence(Ordering::SeqCst);
        // `planned_wake` is a tick before the wake-up; `BUSY` (0): awake, it will look.
        self.look_if_asleep_past(Some(lane), BATCH_WAIT_NANOS);
    }

    /// Asks the driver to look if it plans to sleep more than `slack` from now. The last reading
    /// of `lane` (this thread's), no later than the clock's, spares a reading under load.
    #[inline(always)]
    fn look_if_asleep_past(&self, lane: Option<&Lane>, slack: Nanos) {
        let planned = self.planned_wake.load(Ordering::SeqCst);
        let seen = lane.map_or(0, |lane| lane.not_before(0));
        if planned > seen.saturating_add(slack) && planned > self.clock.now().saturating_add(slack)
        {
            self.request_housekeeping();
        }
    }

    /// Cancels and releases each key of `lane`'s batch, their entries and lane cells loaded first.
    fn cancel_all(&self, lane: &Lane) {
        self.counts.counting.fetch_add(1, Ordering::AcqRel); // before the keys leave the cells
        let keys = lane.take_batch();
        let entries = || keys.iter().flatten().map(|&key| self.entry(key));
        entries().for_each(prefetch);
        entries().for_each(|entry| self.intake.prefetch_cell(entry));
        let mut counted = 0;
        let won = keys.map(|key| {
            let (task, won) = self.cancel_uncounted(key?, 1)?;
            counted += usize::from(won);
            Some(task)
        });
        self.counts.uncount(counted, Ended::Cancelled);
        self.counts.batches_counted.fetch_add(1, Ordering::Release);
        self.counts.counting.fetch_sub(1, Ordering::Release);
        each_then_first_panic(won.into_iter().flatten(), drop); // may run user code: after the count
    }

    /// Most lanes' batches are empty: dead threads', idle ones'. A waker that panics in drop is the
    /// dropping thread's, not the caller's (a turn, `stop()`, a count's reader), nor other lanes'.
    pub(crate) fn cancel_batched(&self) {
        let batches = self.intake.lanes().filter(|lane| lane.has_batch());
        batches.for_each(|lane| drop(self.catch_task(|| self.cancel_all(lane))));
    }

    /// The driver took the cancelled entry: it takes it out of the wheel
    /// (through the mailbox), or finds it cancelled as it files it.
    fn leave_removal_to_driver(&self, key: Key, entry: &Entry) {
        // Pairs with the driver's fence after it files an entry: either it
        // sees CANCELLED and removes the entry at once, or we see it filed.
        fence(Ordering::SeqCst);
        if entry.in_wheel() {
            self.mail(key);
        }
        // A driver waking within a tick takes it then (invariant 6): only a longer sleep is cut.
        self.look_if_asleep_past(self.intake.lane_if_made(), 0);
    }

    /// Puts `key` in the driver's mailbox, with a reference. The fence pairs with the
    /// driver's store of `planned_wake` or clearing of `housekeeping_requested`, then
    /// read of the mailbox: it sees our key, or we see its plan or the flag.
    fn mail(&self, key: Key) {
        self.entry(key).retain();
        self.mailbox.push(key);
        fence(Ordering::SeqCst);
    }

    /// Gives up `n` references to `key` (0: nothing). The last vacates the slot.
    #[inline(always)]
    pub(crate) fn release(&self, key: Key, n: u32) {
        let entry = self.entry(key);
        if n > 0 && entry.release(n) {
            drop(entry.vacate()); // may run user code: before the lane
            self.free_slot(key, entry);
        }
    }

    /// `release(key, 1)` under the core lock, where no user code may run: the task must be gone.
    pub(crate) fn release_locked(&self, key: Key) {
        let entry = self.entry(key);
        if entry.release(1) {
            let left = entry.vacate();
            #[cfg(any(debug_assertions, loom))]
            assert!(left.is_none(), "a task was dropped under the core lock");
            drop(left);
            self.free_slot(key, entry);
        }
    }

    /// A vacant slot goes to this thread's lane if it has room (a driver turning on a worker feeds
    /// that worker's schedules), else to the shared free list. (A timer's own thread takes an index
    /// from the pool here, one of 256, as it does when a callback schedules: 64 timers warn.)
    #[inline(always)]
    fn free_slot(&self, key: Key, entry: &Entry) {
        let lane = self.intake.lane_if_made();
        if !lane.is_some_and(|lane| lane.push_free(key, entry)) {
            self.slots.push_free(key);
        }
    }

    /// Moves a pending one-shot timeout's deadline to `to`. False, changing
    /// nothing, if it is periodic, no longer pending, or shutting down.
    pub(crate) fn reset(&self, key: Key, to: Nanos) -> bool {
        let entry = self.entry(key);
        if entry.is_periodic() || self.is_shutdown() {
            return false;
        }
        let Some(old) = entry.try_reset(to) else {
            return false;
        };
        // The entry is filed no later than the tick of its old deadline.
        // Ticks (a division each) only for the rarer reset to earlier.
        if to < old && self.clock.tick_of(to) < self.clock.tick_of(old) {
            self.mail(key);
            if to < self.planned_wake.load(Ordering::SeqCst) {
                self.unpark_worker();
            }
        }
        true
    }

    fn request_housekeeping(&self) {
        if !self.housekeeping_requested.load(Ordering::Relaxed)
            && !self.housekeeping_requested.swap(true, Ordering::SeqCst)
        {
            self.unpark_worker();
        }
    }
}
