//! The driver's one routine, `turn(now)`, which every driver runs: the
//! worker thread (`worker.rs`), a tokio clock's task (`worker.rs` too),
//! and a manual clock's `advance` and `advance_to_next` (`manual.rs`), as
//! Netty's `Worker.run` and tokio's `process_at_time`.
//!
//! A turn, under the core lock: read the mailbox (take cancelled entries
//! out, file again those a reset moved earlier) -> file arrivals (at most
//! `DRAIN_CAP_PER_TICK`) -> expire every tick up to `now`; then, the lock
//! released, fire what is due, by deadline, then submission. Dispatch
//! (`dispatch.rs`) runs each task here or on the executor. A turn says when
//! to turn next; a driver that sleeps publishes that first (`plan_sleep`).

use std::sync::Arc;

use crate::engine::clock::Nanos;
use crate::engine::driver::counts::Ended;
use crate::engine::driver::{Core, Shared, IDLE};
use crate::engine::entry::key::Key;
use crate::engine::entry::Fire;
use crate::engine::intake::lane::Lane;
use crate::engine::intake::{earliest, Drain};
use crate::engine::sync::{fence, Ordering};

/// The most new timeouts the driver files per turn, as in Netty, so a flood
/// cannot stall expiry. The rest wait for the next turn: late, never early.
pub const DRAIN_CAP_PER_TICK: usize = 100_000;

/// What a `turn` tells its driver.
pub(crate) struct Turn {
    /// Something came due: a task may have scheduled work due before `next`.
    pub(crate) fired: bool,
    /// When the driver must turn again, on the timer's clock; `None`: not
    /// until something new arrives.
    pub(crate) next: Option<Nanos>,
}

impl Shared {
    /// One turn of the wheel at `now` (see the module docs).
    pub(crate) fn turn(self: &Arc<Self>, now: Nanos, due: &mut Vec<Key>) -> Turn {
        let now_tick = self.clock.ticks_at(now);
        let next = {
            let mut core = self.lock_core();
            let drained = self.prepare(&mut core, now, false);
            // With arrivals left over, expire one tick at a time, so the
            // rest is filed before later ticks fire.
            let upto = if drained.more {
                now_tick.min(core.wheel.current_tick().saturating_add(1))
            } else {
                now_tick
            };
            due.append(&mut core.ready);
            while core.wheel.expire_next(&self.slots, upto, due).is_some() {}
            self.next_turn(&core, now_tick, drained)
        };
        let fired = !due.is_empty();
        self.fire(due);
        Turn { fired, next }
    }

    /// The start of a turn, under the core lock: reads the mailbox, then
    /// files arrivals due to be filed at `now` (with `all`, every arrival,
    /// held or not). Those due in a tick already ended are ready.
    pub(crate) fn prepare(&self, core: &mut Core, now: Nanos, all: bool) -> Drain {
        let now_tick = self.clock.ticks_at(now);
        let ready_by = Some(self.clock.time_of(now_tick));
        self.answer_housekeeping(core, now_tick);
        self.read_mailbox(core, ready_by);
        self.intake.drain(DRAIN_CAP_PER_TICK, now, all, |key| {
            self.file(core, key, ready_by)
        })
    }

    /// A producer's `lane` is full of live keys: files every one, as a turn
    /// would, on the producer's thread. Returns the earliest deadline
    /// filed (`u64::MAX` for none); `None` if the timer shut down.
    pub(crate) fn file_lane(&self, lane: &Lane) -> Option<Nanos> {
        let mut core = self.lock_core();
        if self.is_shutdown() {
            return None;
        }
        let ready_by = Some(self.clock.time_of(self.clock.ticks_at(self.clock.now())));
        let mut earliest = u64::MAX;
        lane.drain(0, true, usize::MAX, &mut |key| {
            earliest = earliest.min(self.entry(key).deadline());
            self.file(&mut core, key, ready_by);
        });
        Some(earliest)
    }

    /// When to look at the lanes again for the keys a drain held: the end
    /// of the tick in which the first comes due.
    fn look_time(&self, drained: Drain) -> Option<Nanos> {
        let tick = self.clock.tick_of(drained.look_by?);
        Some(self.clock.time_of(tick))
    }

    /// When to turn again after a turn at `now_tick`: the wheel's next tick
    /// with work, the lanes' held keys, at once for arrivals left over, the
    /// next tick for housekeeping asked meanwhile. While producers cancel
    /// young, a round at the latest (see `worker.rs`).
    fn next_turn(&self, core: &Core, now_tick: u64, drained: Drain) -> Option<Nanos> {
        let at = |tick: u64| self.clock.time_of(tick);
        if drained.more {
            return Some(at(now_tick));
        }
        let cancelling_young = self.intake.take_saw_withdrawn() && !self.clock.is_manual();
        let round = core.wheel.ticks_per_round();
        let mut next = self
            .wheel_wake(core)
            .or_else(|| cancelling_young.then(|| at(now_tick.saturating_add(round))));
        next = earliest(next, self.look_time(drained));
        if self.housekeeping_requested.load(Ordering::SeqCst) {
            next = earliest(next, Some(at(now_tick.saturating_add(1))));
        }
        next
    }

    /// Clears `housekeeping_requested`, at most once per tick (every turn
    /// on a manual clock), before `read_mailbox`: a producer that pushes to
    /// the mailbox after it sees the flag clear and asks again, or its key
    /// is read.
    fn answer_housekeeping(&self, core: &mut Core, now_tick: u64) {
        if !self.clock.is_manual() && core.last_housekeeping.is_some_and(|last| last >= now_tick) {
            return;
        }
        core.last_housekeeping = Some(now_tick);
        self.housekeeping_requested.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes each cancelled entry of the mailbox out of the wheel, and
    /// files again, by its new deadline, each one a reset moved earlier:
    /// out of its bucket, or out of its lane if it still waits there (one
    /// the intake hands over later is filed by its new deadline then).
    fn read_mailbox(&self, core: &mut Core, ready_by: Option<Nanos>) {
        while let Some(key) = self.mailbox.pop() {
            let entry = self.entry(key);
            if !entry.is_waiting() {
                if core.wheel.remove(&self.slots, key) {
                    self.slots.release_locked(key); // the wheel's reference
                }
            } else if entry.in_wheel() {
                // Moved earlier than where it is filed: file it again.
                let filed = self.clock.tick_of(entry.filed());
                if self.clock.tick_of(entry.deadline()) < filed {
                    core.wheel.remove(&self.slots, key);
                    self.file(core, key, ready_by); // with the wheel's reference
                }
            } else if self.intake.withdraw(entry, key) {
                // Ours now, with the queue's reference: `file` adopts it.
                self.file(core, key, ready_by);
            }
            self.slots.release_locked(key); // the mailbox's
        }
    }

    /// Files a key taken from the intake or out of its bucket, by its
    /// deadline in force, unless it was cancelled or stopped. A
    /// one-shot entry due by `ready_by` (the end of the last tick ended) is
    /// ready: this turn fires it, as that tick's expiry would have. A
    /// periodic one waits for the next tick, so a task runs at most once a
    /// tick.
    pub(crate) fn file(&self, core: &mut Core, key: Key, ready_by: Option<Nanos>) {
        let entry = self.entry(key);
        if !entry.is_waiting() {
            self.slots.release_locked(key);
            return;
        }
        let deadline = entry.file_by_deadline();
        if ready_by.is_some_and(|now| deadline <= now) && !entry.is_periodic() {
            // A cancel from now on finds it in no bucket: the fire's swap
            // decides, and releases the reference.
            core.ready.push(key);
            return;
        }
        let wheel = &mut core.wheel;
        wheel.insert(&self.slots, key);
        // Pairs with the fence in `Shared::cancel`: a cancel that raced
        // the insert either sees it filed or is seen here.
        fence(Ordering::SeqCst);
        if self.entry(key).is_cancelled() && wheel.remove(&self.slots, key) {
            self.slots.release_locked(key);
        }
    }

    /// A driver about to sleep until `wake` (`None`: until woken) publishes
    /// it in `planned_wake`, then looks at what producers queued meanwhile
    /// (`file_late_arrivals`). Returns when to wake; `Err`: turn at once.
    pub(crate) fn plan_sleep(&self, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        // A deadline a tick or more before the wake-up would fire late.
        let planned = wake.map_or(IDLE, |wake| wake.saturating_sub(self.config.tick_nanos));
        self.planned_wake.store(planned, Ordering::SeqCst);
        // Pairs with the producer's push; fence; load of `planned_wake`.
        fence(Ordering::SeqCst);
        if self.is_shutdown() {
            return Err(());
        }
        self.file_late_arrivals(wake)
    }

    /// When to wake for the wheel: the end of its next tick with work, when
    /// all of that tick is due and none of it is more than a tick late.
    fn wheel_wake(&self, core: &Core) -> Option<Nanos> {
        Some(self.clock.time_of(core.wheel.next_work_tick()?))
    }

    /// After publishing `wake`: runs a turn's start (`prepare`) on what
    /// producers queued while the driver was busy (they saw it busy and did
    /// not wake it). Returns when to wake (`wake`, or sooner for held
    /// keys); `Err` to turn at once: more is queued than a drain takes, or
    /// something filed is due before `wake`. Young keys stay held here too,
    /// or the driver would spin beside a busy producer, filing each timeout
    /// just before its cancel.
    fn file_late_arrivals(&self, wake: Option<Nanos>) -> Result<Option<Nanos>, ()> {
        let mut core = self.lock_core();
        let drained = self.prepare(&mut core, self.clock.now(), false);
        let sooner = self
            .wheel_wake(&core)
            .is_some_and(|filed| wake.map_or(true, |wake| filed < wake));
        if drained.more || sooner || !core.ready.is_empty() {
            return Err(());
        }
        Ok(earliest(wake, self.look_time(drained)))
    }

    /// Fires `due` in deadline order (stable: equal deadlines keep
    /// submission order), skipping what was cancelled, and filing again
    /// what a reset moved past now. Once the timer is stopped, nothing more
    /// starts.
    pub(crate) fn fire(self: &Arc<Self>, due: &mut Vec<Key>) {
        if due.is_empty() {
            return;
        }
        // By the deadline in force, each read once: a sort whose keys change
        // under it (a reset on another thread) panics.
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
            match entry.fire_due(now) {
                Fire::Won => {}
                Fire::Lost => {
                    self.slots.release(key);
                    continue;
                }
                Fire::Later => {
                    moved.push(key);
                    continue;
                }
            }
            if !entry.is_periodic() {
                // A periodic entry stays counted while it runs.
                self.counts.uncount(1, Ended::Fired);
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
            .for_each(|key| self.file(&mut core, key, None));
    }
}
