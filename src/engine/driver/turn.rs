//! `turn(now)`, the one routine every driver runs (Netty's `Worker.run`, tokio's
//! `process_at_time`). Under the core lock: read the mailbox, file the arrivals due (`prepare`),
//! expire every tick up to `now`. Then, unlocked, fire what is due, by deadline then submission
//! (`dispatch.rs`), and say when to turn next; a sleeping driver publishes it (`plan_sleep`).

use std::sync::Arc;

use crate::engine::clock::{earliest, saturating_nanos, Nanos};
use crate::engine::driver::{counts::Ended, Core, Shared, IDLE};
use crate::engine::entry::{key::Key, task::Task, Fire};
use crate::engine::intake::lane::{Lane, BATCH_WAIT_NANOS};
use crate::engine::sync::{fence, Ordering};

/// The most new timeouts the driver files per turn from its shared queue (threads with no lane
/// of their own, re-armed periodic tasks), as in Netty, so a flood cannot stall expiry. The rest
/// wait for the next turn: late, never early. A lane holds 16,384 and its thread files the rest.
pub const DRAIN_CAP_PER_TICK: usize = 100_000;

pub(crate) struct Turn {
    /// Something came due: a task may have scheduled work due before `next`.
    pub(crate) fired: bool,
    /// A task ran or a waker was woken: not only entries a reset moved later.
    pub(crate) ran: bool,
    /// When to turn again, on the timer's clock; `None`: when something arrives.
    pub(crate) next: Option<Nanos>,
}

impl Shared {
    /// The time it takes counts as `driver_busy`: one pair of readings.
    pub(crate) fn turn(self: &Arc<Self>, now: Nanos, due: &mut Vec<Key>) -> Turn {
        let started = std::time::Instant::now();
        self.cancel_batched(); // first
        let now_tick = self.clock.ticks_at(now);
        let next = {
            let mut core = self.lock_core();
            let more = self.prepare(&mut core, now, false);
            // Arrivals left over: expire one tick, filing them before the next.
            let upto = if more {
                now_tick.min(core.wheel.current_tick().saturating_add(1))
            } else {
                now_tick
            };
            while core.wheel.expire_next(&self.slots, upto, due).is_some() {}
            let mut kept = None; // in the tick under way, not due yet
            if upto == now_tick && self.clock.tokio_runtime().is_some() {
                let paused = !self.clock.reads_real_time(); // then a round's list too
                kept = core.wheel.expire_due_by(&self.slots, now, paused, due);
            }
            // After the wheel's keys: a tie fires in filing order, and the
            // wheel's were filed first (`fire` sorts stably).
            due.append(&mut core.ready);
            earliest(self.next_turn(&mut core, now_tick, more), kept)
        };
        let fired = !due.is_empty();
        let ran = self.fire(due);
        self.counts.note_busy(saturating_nanos(started.elapsed()));
        #[cfg(feature = "metrics")]
        self.config.publish.turned(self, now, next);
        Turn { fired, ran, next }
    }

    /// The start of a turn: mailbox, then arrivals due (`all`: held ones too).
    pub(crate) fn prepare(&self, core: &mut Core, now: Nanos, all: bool) -> bool {
        let ready_by = Some(self.clock.ready_by(now));
        self.answer_housekeeping(core, self.clock.ticks_at(now));
        self.read_mailbox(core, ready_by);
        self.take_held(core, now, ready_by, all);
        self.intake.drain(DRAIN_CAP_PER_TICK, all, |key| {
            self.file(core, key, ready_by)
        })
    }

    /// When to turn next; a round at most while producers cancel young (not on a clock that can
    /// be paused, whose auto-advance would jump a round for it: tokio's own timers would not).
    fn next_turn(&self, core: &mut Core, now_tick: u64, more: bool) -> Option<Nanos> {
        let at = |tick: u64| self.clock.time_of(tick);
        if more {
            return Some(at(now_tick));
        }
        let cancelling_young =
            std::mem::take(&mut core.saw_withdrawn) && self.clock.reads_real_time();
        let in_a_round = at(now_tick.saturating_add(self.config.ticks_per_wheel as u64));
        // The end of the next tick with work: all of it due, none of it more than a tick late.
        let mut next = core.wheel.next_work_tick().map(at);
        next = next.or(cancelling_young.then_some(in_a_round));
        next = earliest(next, self.held_time(core));
        if self.housekeeping_requested.load(Ordering::SeqCst) {
            next = earliest(next, Some(at(now_tick.saturating_add(1))));
        }
        next
    }

    /// Clears `housekeeping_requested`, at most once a tick (each turn on a clock that can stop:
    /// a paused one would move to the next tick for it), then fences, before `read_mailbox`: a
    /// producer mailing after that sees the flag clear and asks again, or its key is read.
    fn answer_housekeeping(&self, core: &mut Core, now_tick: u64) {
        let once_a_tick = self.clock.reads_real_time();
        if once_a_tick && core.last_housekeeping.is_some_and(|last| last >= now_tick) {
            return;
        }
        core.last_housekeeping = Some(now_tick);
        self.housekeeping_requested.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes cancelled entries out of the wheel, and files again those a
    /// reset moved earlier, from their bucket or, if still queued, their lane.
    fn read_mailbox(&self, core: &mut Core, ready_by: Option<Nanos>) {
        while let Some(key) = self.mailbox.pop() {
            let entry = self.entry(key);
            if !entry.is_waiting() {
                if core.wheel.remove(&self.slots, key) {
                    self.release_locked(key); // the wheel's reference
                }
            } else if entry.in_wheel() {
                let filed = core.wheel.filed_tick(&self.slots, key);
                if self.clock.tick_of(entry.deadline()) < filed {
                    core.wheel.remove(&self.slots, key);
                    self.file(core, key, ready_by); // with the wheel's reference
                }
            } else if self.intake.withdraw(entry, key) {
                // Ours now, with the queue's reference: `file` adopts it.
                self.file(core, key, ready_by);
            }
            self.release_locked(key); // the mailbox's
        }
    }

    /// Files a key from the intake or its bucket by its deadline in force, unless cancelled or
    /// stopped: in the wheel, where its tick's keys fire in filing order, or, a one-shot due by
    /// `ready_by` whose tick the wheel passed, ready: this turn fires it. A periodic one waits a
    /// tick, to run at most once a tick.
    pub(crate) fn file(&self, core: &mut Core, key: Key, ready_by: Option<Nanos>) {
        let entry = self.entry(key);
        if !entry.is_waiting() {
            self.release_locked(key);
            return;
        }
        let (deadline, wheel) = (entry.deadline(), &mut core.wheel);
        let tick = self.clock.tick_of(deadline);
        let passed = tick <= wheel.current_tick();
        if ready_by.is_some_and(|now| deadline <= now) && passed && !entry.is_periodic() {
            // A cancel from now on finds it in no bucket: the fire's swap
            // decides, and releases the reference.
            core.ready.push(key);
            return;
        }
        wheel.insert(&self.slots, key, tick);
        // Pairs with the fence in `leave_removal_to_driver`: a cancel that
        // raced the insert either sees it filed or is seen here.
        fence(Ordering::SeqCst);
        if self.entry(key).is_cancelled() && wheel.remove(&self.slots, key) {
            self.release_locked(key);
        }
    }

    /// Publishes a sleep until `wake` (`None`: until woken) in `planned_wake`,
    /// then looks again (`file_late_arrivals`). `Err`: turn at once.
    pub(crate) fn plan_sleep(&self, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        // A deadline a tick or more before the wake-up would fire late: it wakes the driver.
        let planned = wake.map_or(IDLE, |wake| wake.saturating_sub(self.config.tick_nanos) + 1);
        self.planned_wake.store(planned, Ordering::SeqCst);
        // Pairs with the producer's push; fence; load of `planned_wake`.
        fence(Ordering::SeqCst);
        if self.is_shutdown() {
            return Err(());
        }
        self.file_late_arrivals(wake)
    }

    /// `prepare` for keys queued while the driver looked busy (so unwoken): when to wake, sooner
    /// for held keys and batched cancels (`wake_for_batch`); `Err`: turn at once. Young keys are
    /// held too, or the driver would spin by a busy producer, filing each just before its cancel.
    fn file_late_arrivals(&self, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        let mut core = self.lock_core();
        let now = self.clock.now();
        let more = self.prepare(&mut core, now, false);
        let filed = core
            .wheel
            .next_work_tick()
            .map(|tick| self.clock.time_of(tick));
        let sooner = filed.is_some_and(|filed| wake.is_none_or(|wake| filed < wake));
        if more || sooner || !core.ready.is_empty() {
            return Err(());
        }
        let wake = earliest(wake, self.held_time(&mut core));
        // A plan that long must see the batches: each owner's line, so only then.
        let batch_by = now.saturating_add(BATCH_WAIT_NANOS);
        if wake.is_none_or(|wake| wake > batch_by) && self.intake.lanes().any(Lane::has_batch) {
            return Ok(Some(self.clock.time_of(self.clock.tick_of(batch_by))));
        }
        Ok(wake)
    }

    /// Fires `due` by deadline, ties in order, skipping the cancelled and filing
    /// again those a reset moved later. After a stop, nothing more starts. True if any fired.
    pub(crate) fn fire(self: &Arc<Self>, due: &mut Vec<Key>) -> bool {
        let mut ran = false;
        if due.is_empty() {
            return ran;
        }
        // By the deadline in force, each read once: a sort whose keys change
        // under it (a reset on another thread) panics.
        let deadline = |key: &Key| self.entry(*key).deadline();
        if due.windows(2).any(|w| deadline(&w[0]) > deadline(&w[1])) {
            due.sort_by_cached_key(deadline);
        }
        let now = self.clock.now();
        // Before any fire: the entries it fires are due by `now`.
        self.fired_by.fetch_max(now, Ordering::Release);
        #[cfg(feature = "metrics")]
        let lateness = self.config.publish.lateness();
        let (mut moved, mut fired_at) = (Vec::new(), now); // read again after a task run here
        let mut keys = due.drain(..);
        while let Some(key) = keys.next() {
            if self.is_shutdown() {
                self.set_aside(std::iter::once(key).chain(keys).chain(moved));
                return ran;
            }
            let entry = self.entry(key);
            match entry.fire_due(now) {
                Fire::Lost => self.release(key, 1),
                Fire::Later => moved.push(key),
                Fire::Won => {
                    ran = true;
                    if !entry.is_periodic() {
                        // A periodic entry stays counted while it runs.
                        self.counts.uncount(1, Ended::Fired);
                    }
                    let late = fired_at.saturating_sub(entry.deadline());
                    self.counts.lateness.record(late);
                    #[cfg(feature = "metrics")]
                    lateness.record(std::time::Duration::from_nanos(late));
                    match entry.take_task() {
                        Some(task @ (Task::Callback(_) | Task::Periodic(_)))
                            if self.config.executor.is_none() =>
                        {
                            self.dispatch(key, task);
                            fired_at = self.clock.now();
                        }
                        Some(task) => self.dispatch(key, task),
                        None => self.release(key, 1),
                    }
                }
            }
        }
        if !moved.is_empty() {
            self.file_again(moved);
        }
        ran
    }

    #[cold]
    fn file_again(&self, keys: Vec<Key>) {
        let mut core = self.lock_core();
        if self.is_shutdown() {
            drop(core);
            self.set_aside(keys.into_iter());
            return;
        }
        keys.into_iter()
            .for_each(|key| self.file(&mut core, key, None));
    }
}
