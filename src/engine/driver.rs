//! Turning the wheel: the steps the worker thread and a manual `advance`
//! share. Each step runs under the core lock; callbacks run after it is
//! released, so they may schedule, cancel or stop freely.
//!
//! One step: remove cancelled entries -> file new entries (at most
//! `DRAIN_CAP_PER_TICK` per step) -> collect what is due -> fire it, ordered by
//! deadline, then by submission. Firing hands each task to `dispatch.rs`,
//! which runs it here or on the executor; a periodic entry comes back
//! through the intake when its run ends.

use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use crate::engine::clock::{saturating_nanos, Nanos};
use crate::engine::counts::Ended;
use crate::engine::entry::{Entry, Fire};
use crate::engine::intake::{earliest, Drain};
use crate::engine::key::Key;
use crate::engine::shared::{Core, Shared, IDLE};
use crate::engine::sync::{fence, AtomicU64, Ordering};
use crate::engine::task::Task;
use crate::engine::wheel::Wheel;

/// The most new timeouts the worker files into buckets per tick, as in
/// Netty: a flood of new timeouts cannot stall expiry. The rest wait in the
/// queue for the next tick, so they may fire late, never early.
pub const DRAIN_CAP_PER_TICK: usize = 100_000;

impl Shared {
    /// Answers `housekeeping_requested`, at most once per tick unless
    /// `force`: clears it, then removes cancelled entries from their buckets.
    /// The caller files the queue right after.
    pub(crate) fn remove_cancelled(&self, core: &mut Core, now_tick: u64, force: bool) {
        if !force && core.last_housekeeping.is_some_and(|last| last >= now_tick) {
            return;
        }
        core.last_housekeeping = Some(now_tick);
        self.housekeeping_requested.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while let Some(key) = self.cancelled.pop() {
            self.remove_from_wheel(core, key);
            self.slots.release_locked(key); // the cancel queue's reference
        }
    }

    /// Takes a cancelled entry out of the wheel, if it is there, with the
    /// timer's reference.
    fn remove_from_wheel(&self, core: &mut Core, key: Key) {
        if core.wheel.remove(&self.slots, key) {
            self.slots.release_locked(key);
        }
    }

    /// Files up to `DRAIN_CAP` new entries due to be filed at tick `now`
    /// (see `hold.rs`). Says whether more are waiting, and by when the
    /// driver must look again for the keys it holds.
    pub(crate) fn drain_intake(&self, core: &mut Core, now: u64) -> Drain {
        let Core { wheel, holds, .. } = core;
        self.intake
            .drain(DRAIN_CAP_PER_TICK, holds, now, |key| self.file(wheel, key))
    }

    /// Puts a key taken from the intake (or out of its bucket) into its
    /// bucket, by the deadline a reset moved it to if one did, unless it
    /// was cancelled (or stopped) on the way.
    pub(crate) fn file(&self, wheel: &mut Wheel, key: Key) {
        let entry = self.entry(key);
        if !entry.is_waiting() {
            self.slots.release_locked(key);
            return;
        }
        entry.adopt_reset(|| self.reset_deadline(key), || {});
        wheel.insert(&self.slots, key);
        // Pairs with the fence in `Shared::cancel`: a cancel that raced
        // the insert either sees it filed or is seen here.
        fence(Ordering::SeqCst);
        if self.entry(key).is_cancelled() && wheel.remove(&self.slots, key) {
            self.slots.release_locked(key);
        }
    }

    /// The worker, at tick `now`, about to sleep until the time `wake`
    /// (`None`: until woken): publishes that in `planned_wake`, then looks
    /// at what producers queued meanwhile (see `file_late_arrivals`).
    /// Returns when to wake, or `Err` to go round again at once.
    pub(crate) fn plan_sleep(&self, now: u64, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        // A deadline a tick or more before the wake-up would fire late.
        let planned = wake.map_or(IDLE, |wake| wake.saturating_sub(self.config.tick_nanos));
        self.planned_wake.store(planned, Ordering::SeqCst);
        // Pairs with the producer's push; fence; load of `planned_wake`.
        fence(Ordering::SeqCst);
        if self.is_shutdown() {
            return Err(());
        }
        self.file_late_arrivals(now, wake)
    }

    /// When the worker must wake for what the wheel holds: at the end of
    /// the next tick with work, or a little later if one wake-up can then
    /// fire the tick after it too, none more than a tick late (see
    /// `Wheel::one_wake_for_two_ticks`). A tokio clock's driver wakes at
    /// tick ends only: tokio's own timers round a wake-up up to its next
    /// millisecond, so one planned between two would come late.
    pub(crate) fn wheel_wake(&self, core: &mut Core) -> Option<Nanos> {
        let tick = core.wheel.next_work_tick()?;
        let end = self.clock.time_of(tick);
        if self.clock.is_tokio() {
            return Some(end);
        }
        Some(
            core.wheel
                .one_wake_for_two_ticks(&self.slots, tick)
                .map_or(end, |both| both.max(end)),
        )
    }

    /// The worker, after publishing that it sleeps until `wake`: looks at
    /// what producers queued while it was busy (they saw it busy and did
    /// not wake it). Files what must not wait, and returns when it must
    /// wake instead (`wake`, or sooner for keys it holds); `Err` if it must
    /// go round again at once: more is queued than one drain takes, or
    /// something filed is due before `wake`.
    ///
    /// Going round again whenever the intake was not empty would keep the
    /// worker spinning beside a busy producer, filing each timeout just
    /// before its producer cancels it.
    fn file_late_arrivals(&self, now: u64, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        let mut core = self.lock_core();
        if !self.moved.is_empty() {
            return Err(()); // a reset moved a deadline earlier: file it
        }
        let arrivals = self.intake.arrivals(&mut core.holds);
        let wake = earliest(wake, arrivals.look_by.map(|tick| self.clock.time_of(tick)));
        if !arrivals.more {
            return Ok(wake);
        }
        let drained = self.drain_intake(&mut core, now);
        let sooner = self
            .wheel_wake(&mut core)
            .is_some_and(|filed| wake.map_or(true, |wake| filed < wake));
        if drained.more || sooner {
            return Err(());
        }
        Ok(earliest(
            wake,
            drained.look_by.map(|tick| self.clock.time_of(tick)),
        ))
    }

    /// One worker step: everything due up to `now_tick` lands in `due`.
    /// Says whether the intake still holds entries due to be filed (the
    /// cap was hit), and by when the worker must look at those it holds.
    ///
    /// `now` is the time: a worker woken between two tick ends also fires
    /// what in the next tick is due by then (see `wheel_wake`).
    pub(crate) fn step(&self, now: Nanos, now_tick: u64, due: &mut Vec<Key>) -> Drain {
        let mut core = self.lock_core();
        self.remove_cancelled(&mut core, now_tick, false);
        self.refile_moved(&mut core);
        let drained = self.drain_intake(&mut core, now_tick);
        while core.wheel.expire_next(&self.slots, now_tick, due).is_some() {}
        core.wheel.expire_due_next_tick(&self.slots, now, due);
        self.refile_moved_due(&mut core, due, now);
        drained
    }

    /// Fires `due` in deadline order (stable: equal deadlines keep
    /// submission order). Entries cancelled meanwhile are skipped. Between
    /// two tasks it looks for a shutdown: once the timer is stopped, a run
    /// in progress finishes and nothing else starts.
    ///
    /// An entry a reset moved past now is filed again instead (see
    /// `reset.rs`).
    pub(crate) fn fire(self: &Arc<Self>, due: &mut Vec<Key>) {
        if due.is_empty() {
            return;
        }
        // By the deadline in force: a reset may have moved one in its tick.
        // Each read once: a reset on another thread may move it meanwhile,
        // and a sort whose keys change under it panics.
        let deadline = |key: &Key| self.deadline_of(*key);
        if due.windows(2).any(|w| deadline(&w[0]) > deadline(&w[1])) {
            due.sort_by_cached_key(deadline);
        }
        let now = self.clock.now();
        let mut moved = Vec::new();
        let mut keys = due.drain(..);
        while let Some(key) = keys.next() {
            if self.is_shutdown() {
                self.set_aside(std::iter::once(key).chain(keys).chain(moved));
                return;
            }
            let entry = self.entry(key);
            match entry.fire_due(now, || self.reset_deadline(key)) {
                Fire::Won => {}
                Fire::Lost => {
                    self.slots.release(key);
                    continue;
                }
                Fire::Moved => {
                    moved.push(key);
                    continue;
                }
            }
            if !entry.is_periodic() {
                // A periodic entry stays counted while it runs.
                self.uncount(1, Ended::Fired);
            }
            self.counts
                .note_lateness(now.saturating_sub(entry.deadline()));
            match entry.take_task() {
                Some(task) => self.dispatch(key, task),
                None => self.slots.release(key),
            }
        }
        if !moved.is_empty() {
            self.file_again(moved);
        }
    }

    /// Files again entries a reset moved past the time they came due by.
    #[cold]
    fn file_again(&self, keys: Vec<Key>) {
        let mut core = self.lock_core();
        if self.is_shutdown() {
            drop(core);
            self.set_aside(keys.into_iter());
            return;
        }
        keys.into_iter()
            .for_each(|key| self.file(&mut core.wheel, key));
    }

    /// Due entries that will not fire, as the timer shut down: stopped and
    /// uncounted at once, and kept for `stop()` to return (the driver is
    /// out of the wheel's reach by then; see `shut_down`).
    #[cold]
    fn set_aside(&self, keys: impl Iterator<Item = Key>) {
        let mut released = Vec::new();
        {
            let mut core = self.lock_core();
            for key in keys {
                if self.try_stop(key) {
                    core.unfired.push(key);
                    self.uncount(1, Ended::Stopped);
                } else {
                    released.push(key); // cancelled meanwhile
                }
            }
        }
        released.into_iter().for_each(|key| self.slots.release(key));
    }

    /// Manual clock: moves time forward by `by`, firing every due tick on
    /// this thread, with the clock reading each tick's time as it fires.
    pub(crate) fn advance(self: &Arc<Self>, by: Duration) {
        let Some(target) = self.clock.manual_target() else {
            crate::engine::notice::warn(format_args!(
                "advance() does nothing on a timer with a real clock, or a tokio clock \
                 (move that one with tokio::time::advance)"
            ));
            return;
        };
        let by = saturating_nanos(by);
        if self.is_driving_here() {
            // Called from a task this thread runs inside an outer `advance`:
            // the task takes `by`. The clock moves on at once, and the outer
            // call processes the extended range, firing what came due
            // meanwhile late, as a slow task makes a real worker do.
            let to = self.clock.now().saturating_add(by);
            self.clock.set_manual(to);
            target.fetch_max(to, Ordering::AcqRel);
            return;
        }
        let _driving = self.driver.lock().unwrap_or_else(|p| p.into_inner());
        self.as_driver(|| self.drive_to(target, by));
    }

    /// The body of `advance`, with the driver lock held.
    fn drive_to(self: &Arc<Self>, target: &AtomicU64, by: Nanos) {
        target.fetch_max(self.clock.now().saturating_add(by), Ordering::AcqRel);
        let mut due = Vec::new();
        while !self.is_shutdown() {
            let upto = self.clock.ticks_at(target.load(Ordering::Acquire));
            let (fired_tick, current, more, look_by) = {
                let mut core = self.lock_core();
                let current = core.wheel.current_tick();
                self.remove_cancelled(&mut core, current, true);
                self.refile_moved(&mut core);
                let drained = self.drain_intake(&mut core, current);
                let more = drained.more;
                // With intake left over, go one tick at a time, as the
                // worker would, so the rest is filed before later ticks;
                // and stop where held keys are due to be filed.
                let limit = if more {
                    upto.min(current.saturating_add(1))
                } else {
                    drained.look_by.map_or(upto, |look| upto.min(look))
                };
                let tick = core.wheel.expire_next(&self.slots, limit, &mut due);
                let at = self.clock.time_of(tick.unwrap_or(current));
                self.refile_moved_due(&mut core, &mut due, at);
                (tick, core.wheel.current_tick(), more, drained.look_by)
            };
            self.clock
                .set_manual(self.clock.time_of(fired_tick.unwrap_or(current)));
            self.fire(&mut due);
            // Done once the wheel is at `upto` with nothing fired, nothing
            // more to file, and no held key due to be filed by `upto`.
            let held_due = look_by.is_some_and(|look| look <= upto);
            if fired_tick.is_none() && !more && current >= upto && !held_due {
                break;
            }
        }
        self.clock.set_manual(target.load(Ordering::Acquire));
    }

    /// Stops the timer and returns every entry that never ran, marked
    /// stopped, each with a reference for the caller. With `wait`, first
    /// waits until no thread drives the wheel, so that nothing fires after
    /// this returns.
    ///
    /// Every state change and uncount happens under the core lock, so a
    /// second `stop()` that gets the lock after this one finds them done;
    /// wakers and releases, which may run user code, come after it.
    pub(crate) fn shut_down(&self, wait: bool) -> Vec<Key> {
        self.begin_shutdown();
        if wait {
            self.wait_for_driver();
        }
        fence(Ordering::SeqCst);
        let mut all = Vec::new();
        let mut released = Vec::new();
        {
            let mut core = self.lock_core();
            // Jobs first: a periodic run that ends on an executor from now
            // on sees the shutdown, and one that ended is in the intake.
            let mut uncounted = self.reclaim_jobs(&mut all);
            let mut drained = Vec::new();
            core.wheel.drain_all(&self.slots, &mut drained);
            self.intake.close();
            self.intake.drain_all(|key| drained.push(key));
            while let Some(key) = self.cancelled.pop().or_else(|| self.moved.pop()) {
                self.slots.release_locked(key);
            }
            for key in drained {
                if self.try_stop(key) {
                    uncounted += 1;
                    all.push(key);
                } else {
                    released.push(key);
                }
            }
            all.append(&mut core.unfired);
            self.uncount(uncounted, Ended::Stopped);
        }
        released.into_iter().for_each(|key| self.slots.release(key));
        // Futures are woken, not returned: they see the shutdown and end.
        all.retain(|&key| {
            let future = wake_if_future(self.entry(key));
            if future {
                self.slots.release(key);
            }
            !future
        });
        all.sort_by_key(|&key| self.entry(key).deadline());
        self.shutdown_hooks.run();
        all
    }

    /// Waits until no thread drives the wheel: the worker has exited, and
    /// no `advance` is running. A second caller waits too: the first holds
    /// the worker's lock until its join returns.
    fn wait_for_driver(&self) {
        {
            let mut worker = self.worker.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(handle) = worker.take() {
                // The worker may not have published its `Thread` when
                // `begin_shutdown` tried to unpark it: unpark it here too.
                handle.thread().unpark();
                let _ = handle.join();
            }
        }
        if !self.is_driving_here() {
            drop(self.driver.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }
}

/// On `stop()`: if a stopped entry belongs to a future, wakes it, so it is
/// polled again and completes, and returns true.
fn wake_if_future(entry: &Entry) -> bool {
    let waker = entry.with_task(|slot| match slot.take() {
        Some(Task::Wake(waker)) => Ok(waker),
        other => {
            *slot = other;
            Err(())
        }
    });
    match waker {
        Ok(waker) => {
            waker.into_iter().for_each(Waker::wake);
            true
        }
        Err(()) => false,
    }
}
