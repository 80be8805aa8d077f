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
//! | `RUNNING` | `STOPPED` | the run ended after `stop()`, or the executor dropped the job | -1 |
//! | `PENDING`, `RUNNING` | `CANCELLED` | `cancel()`; a run in progress finishes | -1 |
//! | `PENDING` | `STOPPED` | `stop()` collects it | -1 |
//! | `STOPPED` | `CANCELLED` | `cancel()` after `stop()` | = |
//! | `EXPIRED` | `STOPPED` | the executor dropped a one-shot job unrun | = |
//!
//! - `RUNNING` counts as pending, so the pending count goes down exactly
//!   once per entry: by whoever moves it from `PENDING` or `RUNNING` to a
//!   final state, and by nobody else.
//! - Whoever wins the swap out of `PENDING` owns `task` and takes it. The
//!   runner of a periodic entry puts the task back *before* it swaps
//!   `RUNNING -> PENDING`, so the next winner finds it; if that swap fails
//!   (cancelled during the run), the runner drops whatever is left in the
//!   slot. The mutex is therefore never contended except by a `Sleep`
//!   swapping its waker while the worker fires, or by a cancel racing the
//!   put-back.
//! - `PANICKED` is a flag bit, not a state: set by one `fetch_or` on an entry
//!   already `EXPIRED` or `CANCELLED` after its task panicked, or in the
//!   same swap as `RUNNING -> EXPIRED`. No swap starts from a state that
//!   carries it, and the `is_*` reads mask it off.
//! - `slot` is written only by the thread driving the wheel: the slab key + 1
//!   while the entry sits in a bucket, 0 otherwise. Other threads only read it
//!   to decide whether a cancelled entry must be queued for removal.
//! - `deadline` never changes for a one-shot entry. For a periodic one only
//!   its runner writes it: after the run's code returned, while the entry
//!   is still `RUNNING` and so in no queue and no bucket. During a run it is
//!   that run's due time.
//! - `periodic` never changes after the entry is built.

use crate::clock::Nanos;
use crate::sync::{AtomicU32, AtomicU64, AtomicU8, Mutex, MutexGuard, Ordering};
use crate::task::Task;

const PENDING: u8 = 0;
const EXPIRED: u8 = 1;
const CANCELLED: u8 = 2;
const STOPPED: u8 = 3;
const RUNNING: u8 = 4;
/// Flag bit: a run of the task panicked.
const PANICKED: u8 = 0x80;

/// What a successful `cancel` found the entry in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelOutcome {
    /// It was pending or running: the caller must decrement the pending count.
    WasPending,
    /// It had been returned by `stop()`: already uncounted.
    WasStopped,
}

pub(crate) struct Entry {
    state: AtomicU8,
    periodic: bool,
    slot: AtomicU32,
    /// Nanoseconds since the timer's start, saturated.
    deadline: AtomicU64,
    task: Mutex<Option<Task>>,
}

impl Entry {
    pub(crate) fn new(deadline: Nanos, task: Task) -> Entry {
        Entry {
            state: AtomicU8::new(PENDING),
            periodic: matches!(task, Task::Periodic(_)),
            slot: AtomicU32::new(0),
            deadline: AtomicU64::new(deadline),
            task: Mutex::new(Some(task)),
        }
    }

    pub(crate) fn deadline(&self) -> Nanos {
        self.deadline.load(Ordering::Acquire)
    }

    /// The runner of a periodic entry sets its next due time; see the
    /// ground rules.
    pub(crate) fn set_deadline(&self, deadline: Nanos) {
        self.deadline.store(deadline, Ordering::Release);
    }

    pub(crate) fn is_periodic(&self) -> bool {
        self.periodic
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire) & !PANICKED
    }

    /// Waiting to fire, or (periodic) running and due to fire again.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self.state(), PENDING | RUNNING)
    }

    /// Waiting in the intake or the wheel: the one state that can fire.
    pub(crate) fn is_waiting(&self) -> bool {
        self.state() == PENDING
    }

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

    /// Fires: `PENDING -> EXPIRED`, or `PENDING -> RUNNING` if periodic.
    /// True for the single winner, who then owns the task.
    pub(crate) fn try_fire(&self) -> bool {
        let to = if self.periodic { RUNNING } else { EXPIRED };
        self.transition(PENDING, to)
    }

    /// `RUNNING -> PENDING`: a periodic run ended and the entry is re-armed.
    /// False if it was cancelled during the run.
    pub(crate) fn try_rearm(&self) -> bool {
        self.transition(RUNNING, PENDING)
    }

    /// `RUNNING -> EXPIRED` with the panic flag: a periodic run panicked,
    /// and no later run starts. False if it was cancelled during the run
    /// (the flag is then set on `CANCELLED`).
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

    /// `PENDING -> STOPPED`, used by `stop()` for what never ran.
    pub(crate) fn try_stop(&self) -> bool {
        self.transition(PENDING, STOPPED)
    }

    /// `RUNNING | EXPIRED -> STOPPED`: a run ended after `stop()`, or the
    /// executor dropped a job without running it. `Some(true)` if it was
    /// running, so the caller must decrement the pending count; `None` if it
    /// was neither (cancelled meanwhile).
    pub(crate) fn try_stop_fired(&self) -> Option<bool> {
        if self.transition(RUNNING, STOPPED) {
            return Some(true);
        }
        self.transition(EXPIRED, STOPPED).then_some(false)
    }

    /// `PENDING | RUNNING | STOPPED -> CANCELLED`. `None` if it had already
    /// expired or been cancelled. One swap when it is pending.
    pub(crate) fn try_cancel(&self) -> Option<CancelOutcome> {
        let Err(mut current) =
            self.state
                .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        else {
            return Some(CancelOutcome::WasPending);
        };
        // Not waiting: running, stopped, or over. A periodic entry can move
        // between PENDING and RUNNING meanwhile, so retry on what we saw.
        loop {
            let outcome = match current {
                PENDING | RUNNING => CancelOutcome::WasPending,
                STOPPED => CancelOutcome::WasStopped,
                _ => return None,
            };
            match self.state.compare_exchange(
                current,
                CANCELLED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
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
    pub(crate) fn take_task(&self) -> Option<Task> {
        self.lock_task().take()
    }

    /// Puts a periodic task back before its entry is re-armed.
    pub(crate) fn put_task(&self, task: Task) {
        *self.lock_task() = Some(task);
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

    /// The state's name, for `Debug`.
    pub(crate) fn state_name(&self) -> &'static str {
        match self.state() {
            PENDING => "pending",
            RUNNING => "running",
            EXPIRED => "expired",
            CANCELLED => "cancelled",
            _ => "stopped",
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("state", &self.state_name())
            .field("periodic", &self.periodic)
            .field("panicked", &self.is_panicked())
            .field("deadline_nanos", &self.deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::periodic::{Every, Periodic};

    fn entry() -> Entry {
        Entry::new(0, Task::Callback(Box::new(|_: &crate::Timeout| {})))
    }

    fn periodic() -> Entry {
        let task = Periodic::new(|_: &crate::Timeout| {}, Every::Rate(10));
        Entry::new(0, Task::Periodic(Box::new(task)))
    }

    /// A periodic entry in the middle of a run.
    fn running() -> Entry {
        let e = periodic();
        assert!(e.try_fire());
        e
    }

    #[test]
    fn fire_and_cancel_exclude_each_other() {
        let e = entry();
        assert!(e.try_fire());
        assert!(e.is_expired() && !e.is_pending());
        assert_eq!(e.try_cancel(), None);
        assert!(!e.try_fire());

        let e = entry();
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasPending));
        assert!(!e.try_fire());
        assert_eq!(e.try_cancel(), None);
    }

    #[test]
    fn stopped_can_be_cancelled_once_without_recount() {
        let e = entry();
        assert!(e.try_stop());
        assert!(!e.try_fire());
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasStopped));
        assert_eq!(e.try_cancel(), None);
    }

    #[test]
    fn a_periodic_entry_runs_and_rearms_until_cancelled() {
        let e = periodic();
        assert!(e.is_periodic());
        for _ in 0..3 {
            assert!(e.try_fire());
            assert!(e.is_running() && e.is_pending() && !e.is_expired());
            assert!(!e.try_fire(), "never two runs at once");
            assert!(!e.try_stop(), "stop() does not collect a running entry");
            assert!(e.try_rearm());
            assert!(e.is_waiting());
        }
        assert!(!e.try_rearm(), "only a running entry re-arms");
    }

    #[test]
    fn cancel_during_a_run_wins_once_and_blocks_the_rearm() {
        let e = running();
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasPending));
        assert_eq!(e.try_cancel(), None);
        assert!(!e.try_rearm());
        assert!(e.is_cancelled() && !e.is_pending());
        assert!(!e.try_fire());
    }

    #[test]
    fn a_panicking_run_ends_the_entry_and_flags_it() {
        let e = running();
        assert!(e.try_end_panicked());
        assert!(e.is_expired() && e.is_panicked() && !e.is_pending());
        assert_eq!(e.try_cancel(), None, "nothing left to cancel");
        assert!(!e.try_fire() && !e.try_rearm() && !e.try_stop());

        // Cancelled during the run that then panicked: stays cancelled.
        let e = running();
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasPending));
        assert!(!e.try_end_panicked());
        assert!(e.is_cancelled() && e.is_panicked());

        // A one-shot that panicked stays expired.
        let e = entry();
        assert!(e.try_fire());
        e.mark_panicked();
        assert!(e.is_expired() && e.is_panicked());
    }

    #[test]
    fn a_fired_entry_can_end_stopped_once() {
        let e = running();
        assert_eq!(e.try_stop_fired(), Some(true), "running: uncount");
        assert!(e.is_stopped());
        assert_eq!(e.try_stop_fired(), None);

        let e = entry();
        assert!(e.try_fire());
        assert_eq!(
            e.try_stop_fired(),
            Some(false),
            "expired: already uncounted"
        );
        assert!(e.is_stopped());

        let e = running();
        assert!(e.try_cancel().is_some());
        assert_eq!(e.try_stop_fired(), None, "cancel won");
    }

    #[test]
    fn cancel_finds_a_periodic_entry_whatever_its_phase() {
        // A cancel that first guesses PENDING and finds RUNNING retries.
        let e = running();
        assert!(e.try_rearm());
        assert!(e.try_fire());
        assert_eq!(e.try_cancel(), Some(CancelOutcome::WasPending));
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
