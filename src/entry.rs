//! One scheduled timeout, shared between its `Timeout` handles and the wheel.
//!
//! # Ground rules
//!
//! `state` is the only arbiter. Every transition out of `PENDING` is one
//! compare-and-swap, so exactly one party wins:
//!
//! ```text
//!            fire (worker)            cancel (any thread)
//! EXPIRED <---------------- PENDING ----------------------> CANCELLED
//!                              |                                ^
//!                              | stop() collects it             | cancel()
//!                              v                                |
//!                           STOPPED  ---------------------------+
//! ```
//!
//! - Whoever wins the swap out of `PENDING` owns `task` and takes it; nobody
//!   else touches it afterwards. The mutex is therefore never contended except
//!   by a `Sleep` swapping its waker while the worker fires.
//! - The winner out of `PENDING` (and only it) decrements the timer's pending
//!   count. `STOPPED -> CANCELLED` does not: `stop()` already counted it.
//! - `slot` is written only by the thread driving the wheel: the slab key + 1
//!   while the entry sits in a bucket, 0 otherwise. Other threads only read it
//!   to decide whether a cancelled entry must be queued for removal.
//! - `deadline` never changes after the entry is built.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::task::Task;

const PENDING: u8 = 0;
const EXPIRED: u8 = 1;
const CANCELLED: u8 = 2;
const STOPPED: u8 = 3;

/// What a successful `cancel` found the entry in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelOutcome {
    /// It was pending: the caller must decrement the pending count.
    WasPending,
    /// It had been returned by `stop()`: already uncounted.
    WasStopped,
}

pub(crate) struct Entry {
    state: AtomicU8,
    slot: AtomicU32,
    /// Nanoseconds since the timer's start, saturated.
    deadline: u64,
    task: Mutex<Option<Task>>,
}

impl Entry {
    pub(crate) fn new(deadline: u64, task: Task) -> Entry {
        Entry {
            state: AtomicU8::new(PENDING),
            slot: AtomicU32::new(0),
            deadline,
            task: Mutex::new(Some(task)),
        }
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.deadline
    }

    pub(crate) fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) == PENDING
    }

    pub(crate) fn is_expired(&self) -> bool {
        self.state.load(Ordering::Acquire) == EXPIRED
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLED
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOPPED
    }

    /// `PENDING -> EXPIRED`. True for the single winner, who then owns the task.
    pub(crate) fn try_expire(&self) -> bool {
        self.transition(PENDING, EXPIRED)
    }

    /// `PENDING -> STOPPED`, used by `stop()` for what never ran.
    pub(crate) fn try_stop(&self) -> bool {
        self.transition(PENDING, STOPPED)
    }

    /// `PENDING | STOPPED -> CANCELLED`. `None` if it had already expired or
    /// been cancelled.
    pub(crate) fn try_cancel(&self) -> Option<CancelOutcome> {
        if self.transition(PENDING, CANCELLED) {
            return Some(CancelOutcome::WasPending);
        }
        if self.transition(STOPPED, CANCELLED) {
            return Some(CancelOutcome::WasStopped);
        }
        None
    }

    fn transition(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Takes the task; only the winner of a transition out of `PENDING` calls it.
    pub(crate) fn take_task(&self) -> Option<Task> {
        self.lock_task().take()
    }

    /// The task slot, for a `Sleep` that swaps its waker.
    pub(crate) fn lock_task(&self) -> MutexGuard<'_, Option<Task>> {
        // A panic never happens while the lock is held (no user code runs
        // under it), but recover from poisoning rather than propagate it.
        self.task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The slab key while the entry sits in the wheel.
    pub(crate) fn slot(&self) -> Option<usize> {
        match self.slot.load(Ordering::SeqCst) {
            0 => None,
            key_plus_one => Some(key_plus_one as usize - 1),
        }
    }

    pub(crate) fn set_slot(&self, key: Option<usize>) {
        let raw = key.map_or(0, |key| key as u32 + 1);
        self.slot.store(raw, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state.load(Ordering::Acquire) {
            PENDING => "pending",
            EXPIRED => "expired",
            CANCELLED => "cancelled",
            _ => "stopped",
        };
        f.debug_struct("Entry")
            .field("state", &state)
            .field("deadline_nanos", &self.deadline)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry::new(0, Task::Callback(Box::new(|_: &crate::Timeout| {})))
    }

    #[test]
    fn fire_and_cancel_exclude_each_other() {
        let e = entry();
        assert!(e.try_expire());
        assert_eq!(e.try_cancel(), None);
        assert!(!e.try_expire());

        let e = entry();
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasPending));
        assert!(!e.try_expire());
        assert_eq!(e.try_cancel(), None);
    }

    #[test]
    fn stopped_can_be_cancelled_once_without_recount() {
        let e = entry();
        assert!(e.try_stop());
        assert!(!e.try_expire());
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasStopped));
        assert_eq!(e.try_cancel(), None);
    }

    #[test]
    fn slot_round_trips() {
        let e = entry();
        assert_eq!(e.slot(), None);
        e.set_slot(Some(0));
        assert_eq!(e.slot(), Some(0));
        e.set_slot(Some(41));
        assert_eq!(e.slot(), Some(41));
        e.set_slot(None);
        assert_eq!(e.slot(), None);
    }
}
