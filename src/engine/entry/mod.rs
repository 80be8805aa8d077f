//! One scheduled timeout, shared between its `Timeout` handles and the wheel.
//!
//! # Ground rules
//!
//! `state` is the only arbiter. Every transition is one compare-and-swap,
//! so exactly one party wins each race:
//!
//! ```text
//!             fire (one-shot)                 cancel (any thread)
//!   EXPIRED <----------------- PENDING ----------------------------> CANCELLED
//!                              |  ^  |                                 ^  ^
//!              fire (periodic) |  |  | stop() collects it    cancel() |  |
//!                              v  |  v                                |  |
//!                         RUNNING |  STOPPED -------------------------+  |
//!                           | |   |                                      |
//!                           | +---+ the run ended: re-arm                |
//!                           +--------------- cancel() during a run ------+
//! ```
//!
//! | from | to | by | pending count |
//! |---|---|---|---|
//! | `PENDING` | `EXPIRED` | fire, one-shot | -1 |
//! | `PENDING` | `RUNNING` | fire, periodic | = |
//! | `RUNNING` | `PENDING` | the run ended: re-arm | = |
//! | `RUNNING` | `EXPIRED` + `PANICKED` | the run panicked: later runs suppressed | -1 |
//! | `RUNNING` | `STOPPED` | the run ended after `stop()`, `stop()` took back its job or ended its run on an executor, or the executor dropped the job | -1 |
//! | `PENDING`, `RUNNING` | `CANCELLED` | `cancel()`; a run in progress finishes | -1 |
//! | `PENDING` | `STOPPED` | `stop()` collects it | -1 |
//! | `STOPPED` | `CANCELLED` | `cancel()` after `stop()` | = |
//! | `EXPIRED` | `STOPPED` | `stop()` took back a one-shot job not started, or the executor dropped it unrun | = |
//! | `PENDING` | `LOCKED` -> `PENDING` + `RESET` | a reset of a one-shot entry (see `reset.rs`) | = |
//! | `PENDING` + `RESET` | `LOCKED` -> `PENDING` | the driver adopts the reset deadline | = |
//!
//! - `LOCKED` is held for a few instructions by a reset, or by the driver
//!   adopting or firing a reset entry. Cancel and `stop()` wait for it; the
//!   driver never does (see `reset.rs`). It counts as pending. `RESET`, a
//!   flag on `PENDING`, says the deadline in force is in the reset table,
//!   so a fire's one swap from bare `PENDING` fails on a moved entry.
//! - `RUNNING` counts as pending: the pending count goes down once per
//!   entry, by whoever moves it from `PENDING` or `RUNNING` to a final
//!   state.
//! - Whoever wins the swap out of `PENDING` owns `task`. A periodic runner
//!   puts the task back *before* `RUNNING -> PENDING`; if that swap fails
//!   (cancelled during the run), it drops what is left. So the slot's lock
//!   is contended only by a `Sleep` swapping its waker while the driver
//!   fires, or a cancel racing the put-back.
//! - `PANICKED` is a flag, not a state: set by a `fetch_or` on an entry
//!   already `EXPIRED` or `CANCELLED`, or in the swap `RUNNING -> EXPIRED`.
//!   No swap starts from a state carrying it; the `is_*` reads mask it off.
//! - `in_wheel` is written only by the driver: true while the entry is in a
//!   bucket. Others read it to decide whether a cancel must go to the
//!   driver's mailbox.
//! - `prev` and `next` are the wheel's list links (`wheel/list.rs`), the
//!   driver's alone; `next` also links a vacant entry's free list
//!   (`slots.rs`), and `prev` holds a queued entry's lane mark (`lane/`),
//!   written by its producer before the driver can see the key.
//! - `refs` counts who may still name the entry (`slots.rs`). Only the
//!   holder of the last reference vacates it, and only the thread that took
//!   it from a free list fills it: both touch `task` without its lock.
//! - `deadline` is where the wheel files the entry, so it changes only
//!   where the wheel cannot be looking: a one-shot's when the driver adopts
//!   a reset (under `LOCKED`, the entry in no bucket; a reset itself writes
//!   the reset table); a periodic one's by its runner, after the run, while
//!   `RUNNING` keeps it out of every queue and bucket.
//! - `periodic` never changes after the entry is built.

use crate::engine::clock::Nanos;
use crate::engine::key::Key;
use crate::engine::packed_task::{Kind, PackedTask};
use crate::engine::sync::{spin, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering, UnsafeCell};
use crate::engine::task::Task;

const PENDING: u8 = 0;
const EXPIRED: u8 = 1;
const CANCELLED: u8 = 2;
const STOPPED: u8 = 3;
const RUNNING: u8 = 4;
/// Held for a moment by a reset or the driver (see `reset.rs`).
const LOCKED: u8 = 5;
/// Flag bit: a run of the task panicked.
const PANICKED: u8 = 0x80;
/// Flag bit on `PENDING`: the deadline in force is in the reset table.
const RESET: u8 = 0x20;
const FLAGS: u8 = PANICKED | RESET;
/// `PENDING` with its deadline moved by a reset.
const MOVED: u8 = PENDING | RESET;
/// Flag bit of `task_word`: `with_task` holds the task.
const TASK_LOCKED: u8 = 0x80;

/// What a successful `cancel` found the entry in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelOutcome {
    /// It was waiting: the caller uncounts it, and alone may touch the
    /// task (`take_task_won`).
    Waiting,
    /// A periodic run was in progress: the caller uncounts it; the runner
    /// may still be putting the task back.
    Running,
    /// It had been returned by `stop()`: already uncounted.
    Stopped,
}

pub(crate) struct Entry {
    state: AtomicU8,
    periodic: AtomicBool,
    in_wheel: AtomicBool,
    refs: AtomicU32,
    /// Wheel and free-list links: a key + 1, 0 for none.
    prev: AtomicU32,
    next: AtomicU32,
    /// The [`Kind`] of what `task` holds, with `TASK_LOCKED` set while
    /// `with_task` reads or writes it.
    task_word: AtomicU8,
    /// Nanoseconds since the timer's start, saturated.
    deadline: AtomicU64,
    task: UnsafeCell<PackedTask>,
}

// SAFETY: `task`, the one field not `Sync` by itself, is touched only by
// `with_task`, under `TASK_LOCKED`, or by `with_task_alone`, when no other
// thread can reach it: never by two threads at once. `Task` is `Send`.
unsafe impl Sync for Entry {}

// The task's tag shares the lock's byte: 40 bytes, not 48.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 40);

impl Entry {
    /// An unused slot of the arena.
    pub(crate) fn vacant() -> Entry {
        Entry {
            state: AtomicU8::new(STOPPED),
            periodic: AtomicBool::new(false),
            in_wheel: AtomicBool::new(false),
            task_word: AtomicU8::new(Kind::Empty as u8),
            refs: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            next: AtomicU32::new(0),
            deadline: AtomicU64::new(0),
            task: UnsafeCell::new(PackedTask::EMPTY),
        }
    }

    /// A standalone pending entry, for unit tests.
    #[cfg(test)]
    pub(crate) fn new(deadline: Nanos, task: Task) -> Entry {
        let entry = Entry::vacant();
        entry.occupy(deadline, task, 1);
        entry
    }

    /// Fills a vacant slot with a pending entry named by `refs` holders.
    #[inline(always)]
    pub(crate) fn occupy(&self, deadline: Nanos, task: Task, refs: u32) {
        self.periodic
            .store(matches!(task, Task::Periodic(_)), Ordering::Relaxed);
        self.in_wheel.store(false, Ordering::Relaxed);
        self.prev.store(0, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.deadline.store(deadline, Ordering::Relaxed);
        let old = self.with_task_alone(|slot| slot.replace(task));
        debug_assert!(old.is_none(), "a vacant slot holds no task");
        self.refs.store(refs, Ordering::Relaxed);
        self.state.store(PENDING, Ordering::Release);
    }

    #[inline]
    pub(crate) fn next_link(&self) -> Option<Key> {
        Key::unpack(self.next.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn set_next_link(&self, key: Option<Key>) {
        self.next.store(key.map_or(0, Key::pack), Ordering::Release);
    }

    /// Where the entry waits in a lane, or 0; in `prev`, as an entry is in
    /// a lane or in a bucket, never both.
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
        self.deadline.load(Ordering::Acquire)
    }

    /// A periodic entry's runner sets its next due time.
    pub(crate) fn set_deadline(&self, deadline: Nanos) {
        self.deadline.store(deadline, Ordering::Release);
    }

    pub(crate) fn is_periodic(&self) -> bool {
        self.periodic.load(Ordering::Relaxed)
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire) & !FLAGS
    }

    /// Waiting to fire, or (periodic) running and due to fire again.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self.state(), PENDING | RUNNING | LOCKED)
    }

    /// Waiting in the intake or the wheel: the one state that can fire.
    pub(crate) fn is_waiting(&self) -> bool {
        matches!(self.state(), PENDING | LOCKED)
    }

    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.state() == RUNNING
    }

    pub(crate) fn is_expired(&self) -> bool {
        self.state() == EXPIRED
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state() == CANCELLED
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.state() == STOPPED
    }

    pub(crate) fn is_panicked(&self) -> bool {
        self.state.load(Ordering::Acquire) & PANICKED != 0
    }

    /// `PENDING -> EXPIRED`, or `RUNNING` if periodic; for tests (the
    /// driver uses `fire_due`, which minds resets).
    #[cfg(test)]
    pub(crate) fn try_fire(&self) -> bool {
        let to = if self.is_periodic() { RUNNING } else { EXPIRED };
        self.transition(PENDING, to)
    }

    /// `RUNNING -> PENDING`: a periodic run ended and the entry is re-armed.
    /// False if it was cancelled during the run.
    pub(crate) fn try_rearm(&self) -> bool {
        self.transition(RUNNING, PENDING)
    }

    /// `RUNNING -> EXPIRED | PANICKED`: a periodic run panicked. False if
    /// it was cancelled during the run (the flag goes on `CANCELLED`).
    pub(crate) fn try_end_panicked(&self) -> bool {
        if self.transition(RUNNING, EXPIRED | PANICKED) {
            return true;
        }
        self.mark_panicked();
        false
    }

    /// Sets the panic flag on an entry that already left `PENDING`.
    pub(crate) fn mark_panicked(&self) {
        self.state.fetch_or(PANICKED, Ordering::AcqRel);
    }

    /// `PENDING -> STOPPED`, for `stop()`, on an entry in no bucket; a
    /// reset deadline (`reset_deadline`) becomes its deadline.
    pub(crate) fn try_stop(&self, reset_deadline: impl FnOnce() -> Nanos) -> bool {
        let mut stopped = false;
        let mut moved = false;
        spin(|| {
            let current = self.state.load(Ordering::Acquire);
            match current {
                PENDING => {
                    stopped = self.transition(PENDING, STOPPED);
                    stopped
                }
                MOVED => {
                    moved = self.transition(MOVED, LOCKED);
                    moved
                }
                LOCKED => false, // a reset, for a few instructions
                _ => true,
            }
        });
        if moved {
            self.deadline.store(reset_deadline(), Ordering::Release);
            self.state.store(STOPPED, Ordering::Release);
            stopped = true;
        }
        stopped
    }

    /// `RUNNING | EXPIRED -> STOPPED`: a run ended after `stop()`, or the
    /// executor dropped a job unrun. `Some(true)` if it was running (the
    /// caller uncounts it); `None` if cancelled meanwhile.
    pub(crate) fn try_stop_fired(&self) -> Option<bool> {
        if self.try_stop_running() {
            return Some(true);
        }
        self.transition(EXPIRED, STOPPED).then_some(false)
    }

    /// `RUNNING -> STOPPED`: `stop()` ends a periodic run in progress on
    /// an executor, which finishes and is not re-armed. True if it was
    /// running: the caller uncounts it.
    pub(crate) fn try_stop_running(&self) -> bool {
        self.transition(RUNNING, STOPPED)
    }

    /// `PENDING | RUNNING | STOPPED -> CANCELLED`; `None` if it had expired
    /// or was cancelled. One swap when it is pending.
    #[inline(always)]
    pub(crate) fn try_cancel(&self) -> Option<CancelOutcome> {
        let Err(mut current) =
            self.state
                .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        else {
            return Some(CancelOutcome::Waiting);
        };
        // Moved, running, stopped or over. A periodic entry may go between
        // PENDING and RUNNING meanwhile: retry on what was seen.
        loop {
            let outcome = match current {
                PENDING | MOVED => CancelOutcome::Waiting,
                RUNNING => CancelOutcome::Running,
                STOPPED => CancelOutcome::Stopped,
                LOCKED => {
                    // A reset, for a few instructions.
                    spin(|| self.state.load(Ordering::Acquire) != LOCKED);
                    current = self.state.load(Ordering::Acquire);
                    continue;
                }
                _ => return None,
            };
            // A moved entry keeps the flag: its deadline stays readable.
            let to = CANCELLED | (current & RESET);
            match self
                .state
                .compare_exchange(current, to, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(outcome),
                Err(actual) => current = actual,
            }
        }
    }

    fn transition(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Takes the task; only the winner of a transition out of `PENDING` calls it.
    #[inline(always)]
    pub(crate) fn take_task(&self) -> Option<Task> {
        self.with_task(Option::take)
    }

    /// Takes the task without the slot's lock, for the cancel that won the
    /// entry from `PENDING` (`CancelOutcome::Waiting`). Nobody else touches
    /// the slot then: the fire, `stop()` and a periodic runner touch it
    /// only after their own transition, which the cancel excluded (a
    /// runner put it back before `RUNNING -> PENDING`, which the cancel's
    /// swap read); a `Sleep` swaps its waker only while polled, never while
    /// it cancels; `Timeout::take_task` needs `STOPPED`.
    #[inline(always)]
    pub(crate) fn take_task_won(&self) -> Option<Task> {
        self.with_task_alone(Option::take)
    }

    /// Puts a periodic task back before its entry is re-armed.
    pub(crate) fn put_task(&self, task: Task) {
        let old = self.with_task(|slot| slot.replace(task));
        drop(old); // outside the lock: dropping a task runs user code
    }

    /// Runs `f` on the task slot under its lock, a bit of the byte that
    /// keeps the task's kind (a `Mutex` would take 16 bytes). Almost never
    /// contended, and `f` only moves values, so waiters spin. `f` must not
    /// run user code: no drop, no waker call.
    #[inline(always)]
    pub(crate) fn with_task<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        let mut kind = Kind::Empty;
        spin(|| {
            let word = self.task_word.load(Ordering::Relaxed);
            kind = Kind::from_bits(word);
            word & TASK_LOCKED == 0
                && self
                    .task_word
                    .compare_exchange_weak(
                        word,
                        word | TASK_LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
        });
        // SAFETY: this thread set `TASK_LOCKED`, and `Unpacked` clears it only
        // after putting the task back, so nobody else touches the slot
        // meanwhile; `kind` is what the last holder stored.
        unsafe { self.unpacked(kind) }.with(f)
    }

    /// `with_task` without the lock (a read-modify-write saved), for the one
    /// thread that may touch the slot: its filler, the holder of its last
    /// reference, or the cancel that won it (`take_task_won`).
    #[inline(always)]
    fn with_task_alone<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        let word = self.task_word.load(Ordering::Relaxed);
        debug_assert!(word & TASK_LOCKED == 0, "nobody else holds it");
        // SAFETY: only the filler, the holder of the last reference or the
        // winning cancel calls this, and nothing else touches `task` until
        // it returns. The acquire that made this thread the one (free-list
        // pop, last `release`, winning swap) orders it after every earlier
        // access.
        unsafe { self.unpacked(Kind::from_bits(word)) }.with(f)
    }

    /// Moves the task out of its slot until the returned guard drops.
    ///
    /// # Safety
    ///
    /// The caller has the slot to itself until the guard drops, and `kind`
    /// is the kind stored with what the slot holds.
    #[inline(always)]
    unsafe fn unpacked(&self, kind: Kind) -> Unpacked<'_> {
        // SAFETY: the caller's contract: the slot is ours, and `kind` is
        // what the last `put` into it returned.
        let task = self.task.with_mut(|slot| unsafe { (*slot).take(kind) });
        Unpacked { entry: self, task }
    }

    /// True while the entry sits in the wheel.
    pub(crate) fn in_wheel(&self) -> bool {
        self.in_wheel.load(Ordering::SeqCst)
    }

    pub(crate) fn set_in_wheel(&self, in_wheel: bool) {
        self.in_wheel.store(in_wheel, Ordering::SeqCst);
    }

    /// The state's name, for `Debug`.
    pub(crate) fn state_name(&self) -> &'static str {
        match self.state() {
            PENDING | LOCKED => "pending",
            RUNNING => "running",
            EXPIRED => "expired",
            CANCELLED => "cancelled",
            _ => "stopped",
        }
    }
}

// Who may still name the entry: `refs` (see `slots.rs` and the ground
// rules above). The holder of the last reference vacates the slot, and
// the count alone says who that is.
impl Entry {
    /// Empties a slot whose last reference is gone; returns any task left.
    #[inline(always)]
    pub(crate) fn vacate(&self) -> Option<Task> {
        if Kind::from_bits(self.task_word.load(Ordering::Relaxed)) == Kind::Empty {
            return None; // the common case: fired or cancelled, task taken
        }
        self.with_task_alone(Option::take)
    }

    pub(crate) fn retain(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference; true for the last one.
    ///
    /// The count alone decides: once this returns, the caller names the
    /// entry no more, and another holder may free the slot and the next
    /// schedule fill it. So nothing is read from the entry after the
    /// decrement. (A flag read after it, for a withdrawn entry, once let a
    /// release that was not the last free the reused slot a second time.)
    #[inline(always)]
    pub(crate) fn release(&self) -> bool {
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The cancel that won the entry withdrew it from its lane, taking over
    /// the queue's reference: it gives that reference up. Never the last:
    /// the caller holds one too.
    #[inline(always)]
    pub(crate) fn release_withdrawn_reference(&self) {
        let last = self.release();
        debug_assert!(!last, "a cancel's caller holds a reference too");
    }
}

impl Drop for Entry {
    /// Drops a task still in the slot: the union would not.
    fn drop(&mut self) {
        drop(self.vacate());
    }
}

/// A task moved out of its slot; its drop, even unwinding, puts it back
/// and stores its kind, which clears `TASK_LOCKED`.
struct Unpacked<'a> {
    entry: &'a Entry,
    task: Option<Task>,
}

impl Unpacked<'_> {
    #[inline(always)]
    fn with<R>(mut self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        f(&mut self.task)
    }
}

impl Drop for Unpacked<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let task = self.task.take();
        // SAFETY: `unpacked`'s caller has the slot to itself until now, and
        // `take` left it empty.
        let kind = self
            .entry
            .task
            .with_mut(|slot| unsafe { (*slot).put(task) });
        self.entry.task_word.store(kind as u8, Ordering::Release);
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("state", &self.state_name())
            .field("periodic", &self.is_periodic())
            .field("panicked", &self.is_panicked())
            .field("deadline_nanos", &self.deadline())
            .finish()
    }
}

mod reset;
#[cfg(test)]
mod tests;

pub(crate) use reset::Fire;
