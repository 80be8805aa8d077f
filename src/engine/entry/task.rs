//! What runs when a timeout expires (a user callback, a periodic task, a future's waker), and with
//! an executor the `Job` it runs as there. A task is user code when it runs and when it is dropped
//! unrun; either may panic. The runner catches a run's panic (`dispatch.rs`), a [`UserBox`] or a
//! `ThinCallback` its drop's: a destructor's panic never unwinds out of the worker, `advance`,
//! `stop`, a dropped handle, or a destructor already unwinding.

use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::{any::Any, collections::HashMap, fmt, sync::Arc, task::Waker};

use crate::engine::clock::Nanos;
use crate::engine::entry::key::Key;
pub(crate) use crate::engine::entry::thin::ThinCallback;

/// A one-shot task. Its handle comes as `&dyn Any`, so entries need not name
/// its type (see the loop in ARCHITECTURE.md); `TimerTask` downcasts it.
pub(crate) trait Callback: Send + Sized + 'static {
    fn run(self, timeout: &dyn Any);
    /// Tells the task its cancel won.
    fn cancelled(self, timeout: &dyn Any);
}

pub(crate) enum Task {
    /// A user callback, consumed when it runs.
    Callback(ThinCallback),
    /// Taken out for each run, put back at re-arm; boxed: one-shots stay small.
    Periodic(UserBox<Periodic>),
    /// The waker of the task awaiting a `Sleep`; `None` before its first poll.
    Wake(Option<Waker>),
    /// A number for a listener (a delay queue's item), inline: no allocation.
    Notice(Notice),
}

/// A fired timeout's token, for the listener (`driver::Listener`) its timer registered under the id
/// in its high bits. Delivered on the driver, as a waker is, whatever the executor, in firing
/// order. Naming the listener by id, not holding its `Arc`, keeps it 8 bytes.
pub(crate) struct Notice(u64);

/// The bits of a notice's token; the listener's id has the rest: `LISTENER_IDS` of them.
pub(crate) const TOKEN_BITS: u32 = 40;
pub(crate) const LISTENER_IDS: usize = 1 << (64 - TOKEN_BITS);

impl Notice {
    /// A notice of `token` (below 2^`TOKEN_BITS`) to the listener `id` (below 2^24).
    pub(crate) fn new(id: u32, token: u64) -> Notice {
        debug_assert!(token >> TOKEN_BITS == 0 && id >> (64 - TOKEN_BITS) == 0);
        Notice(u64::from(id) << TOKEN_BITS | token)
    }

    /// The listener's id, and the token.
    pub(crate) fn parts(&self) -> (usize, u64) {
        (
            (self.0 >> TOKEN_BITS) as usize,
            self.0 & ((1 << TOKEN_BITS) - 1),
        )
    }
}

impl Task {
    pub(crate) fn callback(task: impl Callback) -> Task {
        Task::Callback(ThinCallback::new(task))
    }

    pub(crate) fn periodic(run: impl FnMut(&dyn Any) + Send + 'static, every: Every) -> Task {
        Task::Periodic(UserBox::new(Box::new(Periodic {
            run: Box::new(run),
            every,
        })))
    }

    /// Runs the task's `cancelled` hook, catching and logging a panic (its payload's drop's too), as
    /// Netty does: the cancel has won all the same.
    #[inline(always)]
    pub(crate) fn on_cancel(self, timeout: &dyn Any) {
        if let Task::Callback(task) = self {
            let hook = catch_unwind(AssertUnwindSafe(|| task.cancelled(timeout)));
            if let Err(panic) = hook.map_err(UserBox::new) {
                report_panic(&*panic, "in TimerTask::cancelled");
            }
        }
    }
}

/// How the next run of a periodic task is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Every {
    /// Fixed rate: the previous due time plus this period.
    Rate(Nanos),
    /// Fixed delay: the end of the previous run plus this delay.
    Delay(Nanos),
}

impl Every {
    /// When the run after one that was due at `due` and ended at `ended`
    /// is due. Saturates: a period too large to add never fires again.
    pub(crate) fn next_due(self, due: Nanos, ended: Nanos) -> Nanos {
        match self {
            Every::Rate(period) => due.saturating_add(period),
            Every::Delay(delay) => ended.saturating_add(delay),
        }
    }
}

/// One run of a periodic task, given its handle as `&dyn Any` (see `Callback`).
type PeriodicRun = dyn FnMut(&dyn Any) + Send;

pub(crate) struct Periodic {
    pub(crate) run: Box<PeriodicRun>,
    pub(crate) every: Every,
}

/// A user's boxed task whose destructor's panic is caught and logged. (An
/// `Option` so `Drop` can move the box out; it is no bigger.)
pub(crate) struct UserBox<T: ?Sized + 'static>(Option<Box<T>>);

const TAKEN: &str = "only drop and into_inner take the box";

impl<T: ?Sized + 'static> UserBox<T> {
    pub(crate) fn new(task: Box<T>) -> UserBox<T> {
        UserBox(Some(task))
    }

    /// The box itself, for running it: its drop is the caller's again.
    #[inline(always)]
    pub(crate) fn into_inner(self) -> Box<T> {
        // Skips `Drop`, which would only find the box gone.
        let mut this = std::mem::ManuallyDrop::new(self);
        this.0.take().expect(TAKEN)
    }
}

impl<T: ?Sized + 'static> Deref for UserBox<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_deref().expect(TAKEN)
    }
}

impl<T: ?Sized + 'static> DerefMut for UserBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_deref_mut().expect(TAKEN)
    }
}

impl<T: ?Sized + 'static> Drop for UserBox<T> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            drop_caught(|| drop(task));
        }
    }
}

/// Runs `drop`, a task's destructor, catching and logging its panic.
pub(crate) fn drop_caught(drop: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(drop)) {
        report_panic(&*panic, "while being dropped");
        // Its payload may panic when dropped too (`panic_any`): that one is leaked.
        let _ = catch_unwind(AssertUnwindSafe(|| std::mem::drop(panic))).map_err(std::mem::forget);
    }
}

#[cold]
#[inline(never)]
fn report_panic(panic: &(dyn Any + Send), when: &'static str) {
    tracing::warn!(
        target: "hashed_wheel_timer",
        panic = panic_message(panic),
        "a timer task panicked {when}; the timer keeps running"
    );
}

pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> &str {
    let text = panic.downcast_ref::<&str>().copied();
    text.or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string panic payload>")
}

/// A fired callback, ready to run.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// Hands jobs to the timer's executor, user code whose drop may panic too.
#[derive(Clone)]
pub(crate) struct Handoff(Arc<UserBox<dyn Fn(Job) + Send + Sync>>);

impl Handoff {
    pub(crate) fn new(execute: impl Fn(Job) + Send + Sync + 'static) -> Handoff {
        Handoff(Arc::new(UserBox::new(Box::new(execute))))
    }

    pub(crate) fn execute(&self, job: Job) {
        (self.0)(job)
    }
}

impl fmt::Debug for Handoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Executor")
    }
}

/// Where a job handed to the executor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Not started: `stop()` may take it back.
    Queued,
    Running,
}

/// The executor's jobs, by key, until their code returns: how `stop()`
/// finds fired tasks not started and periodic runs in progress.
pub(crate) type Jobs = HashMap<Key, JobState>;
