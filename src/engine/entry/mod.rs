//! One scheduled timeout, shared between its `Timeout` handles and the wheel.
//!
//! # Ground rules
//!
//! `state` is one word: the deadline in force (the high 61 bits) and the
//! status (the low 3). Every transition is one compare-and-swap of it, so
//! exactly one party wins each race, and a reset and a fire race on the
//! same word (as tokio's `StateCell`):
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
//! - The deadline in `state` is the *true* one; `filed` is the one the
//!   wheel filed the entry by, the driver's alone (tokio's "registered vs
//!   true deadline"). A reset only writes `state`. The driver, finding an
//!   entry at its filed tick, fires it only if the true deadline has come
//!   (`fire_due`), and otherwise files it again by it: a reset to later
//!   costs the driver nothing until the old deadline. A reset to earlier
//!   also tells the driver (see `engine/reset.rs`). A status change keeps
//!   the deadline, so `Timeout::deadline` reads it in every state.
//! - `RUNNING` counts as pending: the pending count goes down once per
//!   entry, by whoever moves it from `PENDING` or `RUNNING` to a final
//!   state.
//! - Whoever wins the swap out of `PENDING` owns `task`. A periodic runner
//!   puts the task back *before* `RUNNING -> PENDING`; if that swap fails
//!   (cancelled during the run), it drops what is left. So the slot's lock
//!   is contended only by a `Sleep` swapping its waker while the driver
//!   fires, or a cancel racing the put-back.
//! - `flags`: `PERIODIC` never changes while the slot is occupied;
//!   `PANICKED` is set once, on an entry already out of `PENDING`;
//!   `IN_WHEEL` is written only by the driver, true while the entry is in
//!   a bucket, and read by a cancel to decide whether the driver must take
//!   it out (the driver's mailbox).
//! - `prev` and `next` are the wheel's list links (`wheel/list.rs`), the
//!   driver's alone; `next` also links a vacant entry's free list
//!   (`slots.rs`), and `prev` holds a queued entry's lane mark (`lane/`),
//!   written by its producer before the driver can see the key.
//! - `refs` counts who may still name the entry (`slots.rs`). Only the
//!   holder of the last reference vacates it, and only the thread that took
//!   it from a free list fills it: both touch `task` without its lock.

pub(crate) mod arena;
pub(crate) mod handle;
pub(crate) mod key;
pub(crate) mod task;

use crate::engine::clock::Nanos;
use crate::engine::entry::key::Key;
use crate::engine::entry::task::Task;
use crate::engine::sync::{spin, AtomicU32, AtomicU64, AtomicU8, Ordering, UnsafeCell};

/// The status, in the low bits of `state`.
const STATUS: u64 = 0b111;
const PENDING: u64 = 0;
const RUNNING: u64 = 1;
const EXPIRED: u64 = 2;
const CANCELLED: u64 = 3;
const STOPPED: u64 = 4;
/// The largest deadline `state` holds: about 73 years after the timer's
/// start. Later ones are kept as this, and read back as never (`u64::MAX`).
const NEVER: u64 = u64::MAX >> 3;

/// `flags` bits (see the ground rules).
const PERIODIC: u8 = 1;
const IN_WHEEL: u8 = 2;
const PANICKED: u8 = 4;
/// `task_word` bits: `with_task` holds the slot; the slot holds a task.
const TASK_LOCKED: u8 = 1;
const HAS_TASK: u8 = 2;

/// `deadline` and `status` as one `state` word.
fn pack(deadline: Nanos, status: u64) -> u64 {
    deadline.min(NEVER) << 3 | status
}

/// The deadline in a `state` word.
fn deadline_in(state: u64) -> Nanos {
    match state >> 3 {
        NEVER => u64::MAX,
        deadline => deadline,
    }
}

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

/// What the driver's look at an entry due by its filed deadline found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fire {
    /// It fired: the caller owns its task.
    Won,
    /// It was cancelled or stopped meanwhile.
    Lost,
    /// A reset moved it past now: file it again.
    Later,
}

/// On a cache line of its own (see `arena.rs`).
#[repr(align(64))]
pub(crate) struct Entry {
    state: AtomicU64,
    /// The deadline the wheel filed it by (the driver's).
    filed: AtomicU64,
    refs: AtomicU32,
    /// Wheel and free-list links: a key + 1, 0 for none.
    prev: AtomicU32,
    next: AtomicU32,
    flags: AtomicU8,
    /// `TASK_LOCKED` while `with_task` reads or writes `task`, and
    /// `HAS_TASK` while it holds one.
    task_word: AtomicU8,
    task: UnsafeCell<Option<Task>>,
}

// SAFETY: `task`, the one field not `Sync` by itself, is touched only by
// `with_task`, under `TASK_LOCKED`, or by `with_task_alone`, when no other
// thread can reach it: never by two threads at once. `Task` is `Send`.
unsafe impl Sync for Entry {}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

impl Entry {
    /// An unused slot of the arena.
    pub(crate) fn vacant() -> Entry {
        Entry {
            state: AtomicU64::new(STOPPED),
            filed: AtomicU64::new(0),
            refs: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            next: AtomicU32::new(0),
            flags: AtomicU8::new(0),
            task_word: AtomicU8::new(0),
            task: UnsafeCell::new(None),
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
        let periodic = matches!(task, Task::Periodic(_));
        self.flags
            .store(if periodic { PERIODIC } else { 0 }, Ordering::Relaxed);
        self.prev.store(0, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.filed.store(deadline, Ordering::Relaxed);
        let old = self.with_task_alone(|slot| slot.replace(task));
        debug_assert!(old.is_none(), "a vacant slot holds no task");
        self.refs.store(refs, Ordering::Relaxed);
        self.state.store(pack(deadline, PENDING), Ordering::Release);
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

    /// The deadline in force, in every state.
    #[inline(always)]
    pub(crate) fn deadline(&self) -> Nanos {
        deadline_in(self.state.load(Ordering::Acquire))
    }

    /// The deadline the wheel filed it by (driver only).
    #[inline(always)]
    pub(crate) fn filed(&self) -> Nanos {
        self.filed.load(Ordering::Relaxed)
    }

    /// The driver files it by the deadline in force.
    pub(crate) fn file_by_deadline(&self) -> Nanos {
        let deadline = self.deadline();
        self.filed.store(deadline, Ordering::Relaxed);
        deadline
    }

    fn status(&self) -> u64 {
        self.state.load(Ordering::Acquire) & STATUS
    }

    fn has_flag(&self, flag: u8) -> bool {
        self.flags.load(Ordering::SeqCst) & flag != 0
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

    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.status() == RUNNING
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

    pub(crate) fn is_panicked(&self) -> bool {
        self.has_flag(PANICKED)
    }

    /// Sets the panic flag on an entry that already left `PENDING`.
    pub(crate) fn mark_panicked(&self) {
        self.flags.fetch_or(PANICKED, Ordering::AcqRel);
    }

    /// True while the entry sits in the wheel.
    pub(crate) fn in_wheel(&self) -> bool {
        self.has_flag(IN_WHEEL)
    }

    pub(crate) fn set_in_wheel(&self, in_wheel: bool) {
        if in_wheel {
            self.flags.fetch_or(IN_WHEEL, Ordering::SeqCst);
        } else {
            self.flags.fetch_and(!IN_WHEEL, Ordering::SeqCst);
        }
    }

    /// One compare-and-swap of `state`: `change` maps the status seen to
    /// the new word (`None`: no change). Returns the word replaced.
    #[inline(always)]
    fn update(&self, mut change: impl FnMut(u64, Nanos) -> Option<u64>) -> Option<u64> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                change(state & STATUS, deadline_in(state))
            })
            .ok()
    }

    /// Moves `from` to `to`, keeping the deadline.
    fn transition(&self, from: u64, to: u64) -> bool {
        self.update(|status, deadline| (status == from).then(|| pack(deadline, to)))
            .is_some()
    }

    /// The driver, at `now`, on an entry due by its filed deadline: fires
    /// it (`PENDING -> EXPIRED`, or `RUNNING` if periodic) if its deadline
    /// in force has come.
    pub(crate) fn fire_due(&self, now: Nanos) -> Fire {
        let to = if self.is_periodic() { RUNNING } else { EXPIRED };
        let mut later = false;
        let fired = self.update(|status, deadline| {
            later = status == PENDING && deadline > now;
            (status == PENDING && !later).then(|| pack(deadline, to))
        });
        match (fired, later) {
            (Some(_), _) => Fire::Won,
            (None, true) => Fire::Later,
            (None, false) => Fire::Lost,
        }
    }

    /// `PENDING -> EXPIRED`, or `RUNNING` if periodic, whatever the
    /// deadline; for tests.
    #[cfg(test)]
    pub(crate) fn try_fire(&self) -> bool {
        self.fire_due(u64::MAX) == Fire::Won
    }

    /// A reset: moves a pending one-shot entry's deadline to `to`. Returns
    /// the deadline it replaced; `None`, changing nothing, if it is not
    /// pending.
    pub(crate) fn try_reset(&self, to: Nanos) -> Option<Nanos> {
        let old = self.update(|status, _| (status == PENDING).then(|| pack(to, PENDING)))?;
        Some(deadline_in(old))
    }

    /// `RUNNING -> PENDING` at `next`: a periodic run ended and the entry
    /// is re-armed. False if it was cancelled or stopped during the run.
    pub(crate) fn try_rearm(&self, next: Nanos) -> bool {
        self.update(|status, _| (status == RUNNING).then(|| pack(next, PENDING)))
            .is_some()
    }

    /// `RUNNING -> EXPIRED | PANICKED`: a periodic run panicked. False if
    /// it was cancelled during the run (the flag goes on `CANCELLED`).
    pub(crate) fn try_end_panicked(&self) -> bool {
        self.mark_panicked();
        self.transition(RUNNING, EXPIRED)
    }

    /// `PENDING -> STOPPED`, for `stop()`.
    pub(crate) fn try_stop(&self) -> bool {
        self.transition(PENDING, STOPPED)
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
    /// or was cancelled.
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

    /// Runs `f` on the task slot under its lock, a bit of `task_word` (a
    /// `Mutex` would take 8 bytes more). Almost never contended, and `f`
    /// only moves values, so waiters spin. `f` must not run user code: no
    /// drop, no waker call.
    #[inline(always)]
    pub(crate) fn with_task<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        spin(|| {
            let word = self.task_word.load(Ordering::Relaxed);
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
        // SAFETY: this thread set `TASK_LOCKED`, which `Unlock` clears only
        // as it returns (or unwinds), so nobody else touches the slot
        // meanwhile.
        self.task
            .with_mut(|slot| f(&mut Unlock(self, unsafe { &mut *slot })))
    }

    /// `with_task` without the lock (a read-modify-write saved), for the one
    /// thread that may touch the slot: its filler, the holder of its last
    /// reference, or the cancel that won it (`take_task_won`).
    #[inline(always)]
    fn with_task_alone<R>(&self, f: impl FnOnce(&mut Option<Task>) -> R) -> R {
        debug_assert!(self.task_word.load(Ordering::Relaxed) & TASK_LOCKED == 0);
        // SAFETY: only the filler, the holder of the last reference or the
        // winning cancel calls this, and nothing else touches `task` until
        // it returns. The acquire that made this thread the one (free-list
        // pop, last `release`, winning swap) orders it after every earlier
        // access.
        self.task
            .with_mut(|slot| f(&mut Unlock(self, unsafe { &mut *slot })))
    }

    /// The state's name, for `Debug`.
    pub(crate) fn state_name(&self) -> &'static str {
        match self.status() {
            PENDING => "pending",
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
        if self.task_word.load(Ordering::Relaxed) & HAS_TASK == 0 {
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

/// The task slot, borrowed; its drop, even unwinding, records whether it
/// holds a task and clears `TASK_LOCKED`.
struct Unlock<'a>(&'a Entry, &'a mut Option<Task>);

impl std::ops::Deref for Unlock<'_> {
    type Target = Option<Task>;

    fn deref(&self) -> &Option<Task> {
        self.1
    }
}

impl std::ops::DerefMut for Unlock<'_> {
    fn deref_mut(&mut self) -> &mut Option<Task> {
        self.1
    }
}

impl Drop for Unlock<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let word = if self.1.is_some() { HAS_TASK } else { 0 };
        self.0.task_word.store(word, Ordering::Release);
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

#[cfg(test)]
mod tests;
