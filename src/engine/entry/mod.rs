//! One scheduled timeout, shared between its `Timeout` handles and the wheel.
//!
//! # Ground rules
//!
//! `state` is one word: the deadline in force (high 61 bits) and the status
//! (low 3). Every transition is one compare-and-swap of it, so exactly one
//! party wins each race, a reset against a fire included (tokio's `StateCell`):
//!
//! ```text
//!             fire (one-shot)                 cancel (any thread)
//!   EXPIRED <----------------- PENDING ----------------------------> CANCELLED
//!                            | |  ^  |                                 ^  ^
//!            fire (periodic) | |  |  | stop() collects it    cancel() |  |
//!                            v |  |  v                                |  |
//!                       RUNNING|  |  STOPPED -------------------------+  |
//!                         | |  +--+ reset: a new deadline                |
//!                         | +--------------- the run ended: re-arm       |
//!                         +--------------- cancel() during a run --------+
//! ```
//!
//! | from | to | by | pending count |
//! |---|---|---|---|
//! | `PENDING` (due) | `EXPIRED` | fire, one-shot | -1 |
//! | `PENDING` (due) | `RUNNING` | fire, periodic | = |
//! | `PENDING` | `PENDING`, another deadline | a reset of a one-shot entry | = |
//! | `RUNNING` | `PENDING`, the next deadline | the run ended: re-arm | = |
//! | `RUNNING` | `EXPIRED` + `PANICKED` | the run panicked: later runs suppressed | -1 |
//! | `RUNNING` | `STOPPED` | the run ended after `stop()`, `stop()` took back its job or ended its run on an executor, or the executor dropped the job | -1 |
//! | `PENDING`, `RUNNING` | `CANCELLED` | `cancel()`; a run in progress finishes | -1 |
//! | `PENDING` | `STOPPED` | `stop()` collects it | -1 |
//! | `STOPPED` | `CANCELLED` | `cancel()` after `stop()` | = |
//! | `EXPIRED` | `STOPPED` | `stop()` took back a one-shot job not started, or the executor dropped it unrun | = |
//!
//! - `state` holds the *true* deadline, `word`'s high bits (the driver's alone) the tick the wheel
//!   filed it at (tokio's "registered vs true deadline"). A reset writes only `state`; at the filed
//!   tick the driver fires the entry if the true deadline has come (`fire_due`), else files it
//!   again; a reset to earlier also tells the driver (`intake/producer.rs`). A status change keeps
//!   the deadline: `Timeout::deadline` reads it in every state.
//! - `RUNNING` counts as pending: the pending count goes down once, by whoever moves
//!   the entry from `PENDING` or `RUNNING` to a final state.
//! - Whoever wins the swap out of `PENDING` owns `task`. A periodic runner puts it back *before*
//!   `RUNNING -> PENDING`, and drops it if that swap fails (cancelled). So the slot's lock is
//!   contended only by a `Sleep` swapping its waker during a fire, or a cancel racing the put-back.
//! - `word`, one atomic for what no one else needs a word of its own for: the slot's lock and its
//!   task's kind (`with_task`), the flags and the filed tick. Each writer changes only its own bits,
//!   by a read-modify-write. Flags: `PERIODIC` never changes while the slot is occupied; `PANICKED`
//!   is set once, on an entry out of `PENDING`; `IN_WHEEL`, the driver's to write, says it is in a
//!   bucket: a cancel reads it to know whether to tell the driver.
//! - `prev` and `next`, the wheel's list links (`wheel/list.rs`), are the driver's; `next` also
//!   links a lane's stack of vacant entries, and `prev` holds a queued entry's lane mark
//!   (`intake/lane.rs`), written by its producer before the driver can see the key.
//! - `refs` counts who may still name the entry (`arena.rs`). Only the last
//!   reference's holder vacates it, and only the thread that took it from a free list
//!   fills it: both touch `task` without its lock.

pub(crate) mod arena;
pub(crate) mod handle;
pub(crate) mod key;
mod packed;
pub(crate) mod task;
mod thin;

use crate::engine::clock::{Nanos, NEVER};
use crate::engine::entry::{key::Key, packed::Packed, packed::NONE, task::Task};
use crate::engine::sync::{spin, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use std::task::Waker;

const STATUS: u64 = 0b111;
const PENDING: u64 = 0;
const RUNNING: u64 = 1;
const EXPIRED: u64 = 2;
const CANCELLED: u64 = 3;
const STOPPED: u64 = 4;
/// `word`: this bit while `with_task` holds the slot's lock; above it, the kind of task the slot
/// holds (`packed.rs`), then the flags; from `TICK_SHIFT` up, the filed tick's low bits.
const TASK_LOCKED: u32 = 1;
const KIND: u32 = 0b11110;
const PERIODIC: u32 = 1 << 5;
const IN_WHEEL: u32 = 1 << 6;
const PANICKED: u32 = 1 << 7;
const TICK_SHIFT: u32 = 8;
/// How far past the wheel's current tick the filed tick's bits reach: the wheel files no entry
/// further ahead (`wheel/mod.rs`).
pub(crate) const TICKS_AHEAD: u64 = (1 << (32 - TICK_SHIFT)) - 1;

fn kind_in(word: u32) -> u8 {
    ((word & KIND) >> 1) as u8
}

fn pack(deadline: Nanos, status: u64) -> u64 {
    deadline.min(NEVER) << 3 | status
}

fn deadline_in(state: u64) -> Nanos {
    state >> 3
}

/// What a successful `cancel` found the entry in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelOutcome {
    /// The caller uncounts it, and alone may touch the task (`take_task_won`).
    Waiting,
    /// The caller uncounts it; a periodic runner may still put the task back.
    Running,
    /// Returned by `stop()`: already uncounted.
    Stopped,
}

/// What `Entry::fire_due` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fire {
    /// It fired: the caller owns its task.
    Won,
    /// It was cancelled or stopped meanwhile.
    Lost,
    /// A reset moved it past now: file it again.
    Later,
}

/// Starts loading `at`'s cache line without waiting for it, for a read or cancel about to come, so
/// the miss overlaps other work (`Shard::take`) or other misses (`Shared::cancel_all`). x86-64 only.
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn prefetch<T>(at: &T) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it reads nothing into the
        // program, writes nothing, and cannot fault on any address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((at as *const T).cast()) };
    }
}

/// The most references an entry takes: half the count's range, leaving room for what is in flight.
const MAX_REFS: u32 = u32::MAX / 2;

/// 32 bytes: entries share cache lines (see `arena.rs`).
pub(crate) struct Entry {
    state: AtomicU64,
    /// The lock, the task's kind, the flags and the filed tick (ground rules).
    word: AtomicU32,
    refs: AtomicU32,
    /// Wheel and free-list links: a key + 1, 0 for none.
    prev: AtomicU32,
    next: AtomicU32,
    task: UnsafeCell<Packed>,
    #[cfg(loom)]
    loom_marks: AtomicU32,
}

// SAFETY: `task`, the one field not `Sync` by itself, is touched only by
// `with_task`, under `TASK_LOCKED`, or by `with_task_alone`, when no other
// thread can reach it: never by two threads at once. `Task` is `Send`.
unsafe impl Sync for Entry {}

// On 64-bit targets; a 32-bit one's pointers make it smaller.
#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

impl Entry {
    pub(crate) fn vacant() -> Entry {
        Entry {
            state: AtomicU64::new(STOPPED),
            word: AtomicU32::new(0),
            refs: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            next: AtomicU32::new(0),
            task: UnsafeCell::new(Packed::EMPTY),
            #[cfg(loom)]
            loom_marks: AtomicU32::new(0),
        }
    }

    /// Fills a vacant slot with a pending entry named by `refs` holders.
    #[inline(always)]
    pub(crate) fn occupy(&self, deadline: Nanos, task: Task, refs: u32) {
        let periodic = matches!(task, Task::Periodic(_));
        // A vacant slot's kind is `NONE`: only flags to set.
        self.marks()
            .store(if periodic { PERIODIC } else { 0 }, Ordering::Relaxed);
        self.prev.store(0, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        let old = self.with_task_alone(|slot| slot.replace(task));
        debug_assert!(old.is_none(), "a vacant slot holds no task");
        self.refs.store(refs, Ordering::Relaxed);
        self.state.store(pack(deadline, PENDING), Ordering::Release);
    }

    /// The flags and the filed tick: `word`; under loom a word of their own, as sharing one with
    /// the lock only adds order, and the models' interleavings then fit in memory.
    #[inline(always)]
    fn marks(&self) -> &AtomicU32 {
        #[cfg(loom)]
        return &self.loom_marks;
        #[cfg(not(loom))]
        &self.word
    }

    #[inline]
    pub(crate) fn next_link(&self) -> Option<Key> {
        Key::unpack(self.next.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn set_next_link(&self, key: Option<Key>) {
        self.next.store(key.map_or(0, Key::pack), Ordering::Release);
    }

    /// Where the entry waits in a lane, or 0; kept in `prev` (ground rules).
    #[inline(always)]
    pub(crate) fn set_queue_mark(&self, mark: u32) {
        self.prev.store(mark, Ordering::Relaxed);
    }

    /// The last `set_queue_mark`, or a wheel link written since.
    #[inline(always)]
    pub(crate) fn queue_mark(&self) -> u32 {
        self.prev.load(Ordering::Relaxed)
    }

    pub(crate) fn prev_link(&self) -> Option<Key> {
        Key::unpack(self.prev.load(Ordering::Relaxed))
    }

    pub(crate) fn set_prev_link(&self, key: Option<Key>) {
        self.prev.store(key.map_or(0, Key::pack), Ordering::Relaxed);
    }

    #[inline(always)]
    pub(crate) fn deadline(&self) -> Nanos {
        deadline_in(self.state.load(Ordering::Acquire))
    }

    /// The tick the wheel filed it at, no earlier than the wheel's `current` (driver only): the
    /// first tick from `current` with the low bits kept.
    #[inline(always)]
    pub(crate) fn filed_tick(&self, current: u64) -> u64 {
        let low = u64::from(self.marks().load(Ordering::Relaxed) >> TICK_SHIFT);
        current + (low.wrapping_sub(current) & TICKS_AHEAD)
    }

    /// The wheel files it at `tick` (driver only): keeps the tick's low bits, sets `IN_WHEEL`.
    pub(crate) fn set_filed(&self, tick: u64) {
        let word = self.marks().load(Ordering::Relaxed);
        debug_assert!(word & IN_WHEEL == 0, "filed twice");
        let tick_bits = (word ^ (tick as u32) << TICK_SHIFT) >> TICK_SHIFT << TICK_SHIFT;
        self.marks()
            .fetch_xor(tick_bits | IN_WHEEL, Ordering::SeqCst);
    }

    fn status(&self) -> u64 {
        self.state.load(Ordering::Acquire) & STATUS
    }

    fn has_flag(&self, flag: u32) -> bool {
        self.marks().load(Ordering::SeqCst) & flag != 0
    }

    pub(crate) fn is_periodic(&self) -> bool {
        self.has_flag(PERIODIC)
    }

    /// Waiting to fire, or (periodic) running and due to fire again.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self.status(), PENDING | RUNNING)
    }

    /// Waiting in the intake or the wheel: the one state that can fire.
    pub(crate) fn is_waiting(&self) -> bool {
        self.status() == PENDING
    }

    pub(crate) fn is_expired(&self) -> bool {
        self.status() == EXPIRED
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.status() == CANCELLED
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.status() == STOPPED
    }

    /// True once its task is gone: fired, or taken (`stop()`'s `take_task`), not in `with_task`.
    pub(crate) fn task_gone(&self) -> bool {
        kind_in(self.word.load(Ordering::Acquire)) == NONE
    }

    pub(crate) fn is_panicked(&self) -> bool {
        self.has_flag(PANICKED)
    }

    pub(crate) fn mark_panicked(&self) {
        self.marks().fetch_or(PANICKED, Ordering::AcqRel);
    }

    pub(crate) fn in_wheel(&self) -> bool {
        self.has_flag(IN_WHEEL)
    }

    /// Out of the wheel (driver only), which `set_filed` put it in.
    pub(crate) fn set_out_of_wheel(&self) {
        self.marks().fetch_and(!IN_WHEEL, Ordering::SeqCst);
    }

    /// One compare-and-swap of `state`: `change` maps the status and
    /// deadline seen to the new word, or `None`. Returns the word replaced.
    #[inline(always)]
    fn update(&self, mut change: impl FnMut(u64, Nanos) -> Option<u64>) -> Option<u64> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                change(state & STATUS, deadline_in(state))
            })
            .ok()
    }

    fn transition(&self, from: u64, to: u64) -> bool {
        self.update(|status, deadline| (status == from).then(|| pack(deadline, to)))
            .is_some()
    }

    /// At the filed tick: fires the entry if its true deadline has come.
    pub(crate) fn fire_due(&self, now: Nanos) -> Fire {
        let to = if self.is_periodic() { RUNNING } else { EXPIRED };
        let mut fire = Fire::Lost;
        self.update(|status, deadline| {
            fire = match status {
                PENDING if deadline > now => Fire::Later,
                PENDING => Fire::Won,
                _ => Fire::Lost,
            };
            (fire == Fire::Won).then(|| pack(deadline, to))
        });
        fire
    }

    /// Moves a pending one-shot entry's deadline to `to`; returns the old
    /// one, or `None`, changing nothing, if it is not pending.
    pub(crate) fn try_reset(&self, to: Nanos) -> Option<Nanos> {
        let old = self.update(|status, _| (status == PENDING).then(|| pack(to, PENDING)))?;
        Some(deadline_in(old))
    }

    /// A periodic run ended: re-arm at `next`; false if cancelled or stopped.
    pub(crate) fn try_rearm(&self, next: Nanos) -> bool {
        self.update(|status, _| (status == RUNNING).then(|| pack(next, PENDING)))
            .is_some()
    }

    /// A periodic run panicked; false if cancelled meanwhile (flag set anyway).
    pub(crate) fn try_end_panicked(&self) -> bool {
        self.mark_panicked();
        self.transition(RUNNING, EXPIRED)
    }

    pub(crate) fn try_stop(&self) -> bool {
        self.transition(PENDING, STOPPED)
    }

    /// A run ended after `stop()`, or a job was dropped unrun: `Some(true)`
    /// if it was running (the caller uncounts it), `None` if cancelled.
    pub(crate) fn try_stop_fired(&self) -> Option<bool> {
        let fired = || self.transition(EXPIRED, STOPPED).then_some(false);
        self.try_stop_running().then_some(true).or_else(fired)
    }

    /// `stop()` ends a periodic run on an executor. True: the caller uncounts it.
    pub(crate) fn try_stop_running(&self) -> bool {
        self.transition(RUNNING, STOPPED)
    }

    /// `None` if it had expired or was cancelled.
    #[inline(always)]
    pub(crate) fn try_cancel(&self) -> Option<CancelOutcome> {
        let mut outcome = None;
        self.update(|status, deadline| {
            outcome = match status {
                PENDING => Some(CancelOutcome::Waiting),
                RUNNING => Some(CancelOutcome::Running),
                STOPPED => Some(CancelOutcome::Stopped),
                _ => None,
            };
            outcome.map(|_| pack(deadline, CANCELLED))
        })?;
        outcome
    }

    #[inline(always)]
    pub(crate) fn take_task(&self) -> Option<Task> {
        self.with_task(Option::take)
    }

    /// Takes the task without the lock, for the cancel that won the entry from `PENDING`. Nobody
    /// else touches the slot then: the fire, `stop()` and a runner do only after their own
    /// transition, which the cancel excluded (a runner put it back before `RUNNING -> PENDING`,
    /// which the cancel's swap read); a `Sleep` swaps its waker only while polled, never while it
    /// cancels; `Timeout::take_task` needs `STOPPED`.
    #[inline(always)]
    pub(crate) fn take_task_won(&self) -> Option<Task> {
        self.with_task_alone(Option::take)
    }

    /// A future's poll: stores `waker`, unless the slot holds one that wakes the same task, *then*
    /// reads the state; the fire swaps the state *before* it takes the waker. So the fire takes the
    /// new waker or the poll sees the entry spent: no wake-up is lost. True if it may fire.
    pub(crate) fn wait_with(&self, waker: &Waker) -> bool {
        fn stored(slot: &mut Option<Task>) -> Option<&mut Option<Waker>> {
            match slot {
                Some(Task::Wake(stored)) => Some(stored),
                _ => None,
            }
        }
        if !self.is_pending() {
            return false;
        }
        let same = self.with_task(|slot| {
            stored(slot).is_none_or(|w| w.as_ref().is_some_and(|w| w.will_wake(waker)))
        });
        if !same {
            // Cloned and dropped outside the slot's lock: both run waker code.
            let fresh = waker.clone();
            let stale = self.with_task(|slot| match stored(slot) {
                Some(w) => w.replace(fresh),
                None => Some(fresh), // fired meanwhile
            });
            drop(stale);
        }
        self.is_pending()
    }

    /// Puts a periodic task back before its entry is re-armed.
    pub(crate) fn put_task(&self, task: Task) {
        let old = self.with_task(|slot| slot.replace(task));
        drop(old); // outside the lock: dropping a task runs user code
    }

    /// Runs `f` on the slot under `TASK_LOCKED` (a `Mutex` is 8 bytes more);
    /// waiters spin. `f` must run no user code: no drop, no waker call.
    #[inline(always)]
    pub(crate) fn with_task<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        let mut word = 0;
        spin(|| {
            word = self.word.load(Ordering::Relaxed);
            word & TASK_LOCKED == 0
                && self
                    .word
                    .compare_exchange_weak(
                        word,
                        word | TASK_LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
        });
        // SAFETY: this thread set `TASK_LOCKED`, which `Unlock` clears only
        // as it returns or unwinds, so nobody else touches the slot meanwhile.
        self.task
            .with_mut(|slot| unsafe { self.open(slot, word | TASK_LOCKED, f) })
    }

    /// `with_task` without the lock (one read-modify-write saved).
    #[inline(always)]
    fn with_task_alone<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        let word = self.word.load(Ordering::Relaxed);
        debug_assert!(word & TASK_LOCKED == 0);
        // SAFETY: only the filler, the last reference's holder or the winning
        // cancel (`take_task_won`) calls this, and nothing else touches `task`
        // until it returns. The acquire that chose this thread (free-list pop,
        // last `release`, winning swap) orders it after every earlier access.
        self.task
            .with_mut(|slot| unsafe { self.open(slot, word, f) })
    }

    /// Runs `f` on the task `slot` holds, packed back as `f` returns or unwinds.
    ///
    /// # Safety
    ///
    /// Nobody else touches `slot` until this returns, and `word` was read after its last write
    /// of the kind (with `TASK_LOCKED` if this thread holds the lock).
    #[inline(always)]
    unsafe fn open<R>(
        &self,
        slot: *mut Packed,
        word: u32,
        f: impl FnOnce(&mut Option<Task>) -> R,
    ) -> R {
        // SAFETY: the caller's promise; `word` holds the kind of the task packed there, and the
        // `Unlock` below writes the slot again before anyone else may read it.
        let task = unsafe { slot.read().unpack(kind_in(word)) };
        let mut guard = Unlock {
            entry: self,
            slot,
            task,
            word,
        };
        f(&mut guard.task)
    }

    pub(crate) fn state_name(&self) -> &'static str {
        match self.status() {
            PENDING => "pending",
            RUNNING => "running",
            EXPIRED => "expired",
            CANCELLED => "cancelled",
            _ => "stopped",
        }
    }

    /// Empties a slot whose last reference is gone; returns any task left.
    #[inline(always)]
    pub(crate) fn vacate(&self) -> Option<Task> {
        if kind_in(self.word.load(Ordering::Relaxed)) == NONE {
            return None; // the common case: fired or cancelled, task taken
        }
        self.with_task_alone(Option::take)
    }

    /// One more reference; past `MAX_REFS` (leaked handles) it aborts, as `Arc` does, not wrap.
    pub(crate) fn retain(&self) {
        if self.refs.fetch_add(1, Ordering::Relaxed) >= MAX_REFS {
            std::process::abort();
        }
    }

    /// Drops `n` references at once; true if they were the last. Nothing is
    /// read after: another holder may then free the slot and refill it.
    #[inline(always)]
    pub(crate) fn release(&self, n: u32) -> bool {
        self.refs.fetch_sub(n, Ordering::AcqRel) == n
    }
}

impl Drop for Entry {
    /// Drops the task left in the slot, which `Packed` alone would leak.
    fn drop(&mut self) {
        drop(self.vacate());
    }
}

/// The task taken out of `slot`; its drop (even unwinding) packs it back and unlocks.
struct Unlock<'a> {
    entry: &'a Entry,
    slot: *mut Packed,
    task: Option<Task>,
    /// `open`'s: the kind it found, and `TASK_LOCKED` if it holds the lock.
    word: u32,
}

impl Drop for Unlock<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let (kind, packed) = Packed::pack(self.task.take());
        // SAFETY: the slot is still this thread's alone (`open`), and its bytes were moved out.
        unsafe { self.slot.write(packed) };
        // The kind's bits and the lock flip; the flags and the tick stay as others wrote them.
        let flip = (u32::from(kind) << 1 ^ self.word) & (KIND | TASK_LOCKED);
        self.entry.word.fetch_xor(flip, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
