//! What runs when a timeout expires: a user callback, a periodic task, or a
//! future's waker.
//!
//! A user's task is user code twice over: when it runs, and when it is
//! dropped without running (cancelled, stopped, or freed with its timer).
//! Either may panic. The runner catches a run's panic (`dispatch.rs`); a
//! [`UserBox`] catches its drop's, wherever that happens, so a panicking
//! destructor never unwinds out of the worker, `advance`, `stop`, a
//! dropped handle, or a destructor already unwinding.

use std::any::Any;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

use crate::engine::clock::Nanos;
use crate::engine::handle::Timeout;

/// A task to run once when its [`Timeout`] expires, Netty's `TimerTask`.
///
/// Every `FnOnce(&Timeout) + Send + 'static` closure is a `TimerTask`, so
/// most code never names this trait. Implement it on your own type when you
/// also want to hear about cancellation.
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerTask};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// struct Retry { gave_up: Arc<AtomicBool> }
///
/// impl TimerTask for Retry {
///     fn run(self: Box<Self>, _timeout: &Timeout) {
///         // resend the request ...
///     }
///     fn cancelled(self: Box<Self>, _timeout: &Timeout) {
///         self.gave_up.store(true, Ordering::SeqCst);
///     }
/// }
///
/// let timer = HashedWheelTimer::builder().manual_clock().build()?;
/// let gave_up = Arc::new(AtomicBool::new(false));
/// let t = timer.new_timeout_task(Retry { gave_up: gave_up.clone() }, Duration::from_secs(1))?;
/// assert!(t.cancel());
/// assert!(gave_up.load(Ordering::SeqCst));
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
pub trait TimerTask: Send + 'static {
    /// Runs the task. Called at most once, after the deadline has passed,
    /// on the timer's worker thread (or the thread calling
    /// [`advance`](crate::HashedWheelTimer::advance) on a manual clock), or
    /// on the [`Executor`](crate::Executor) the timer was built with.
    ///
    /// A panic is caught and logged; the timeout then reports
    /// [`Timeout::is_panicked`].
    fn run(self: Box<Self>, timeout: &Timeout);

    /// Called instead of [`run`](TimerTask::run), on the cancelling thread,
    /// when [`Timeout::cancel`] wins (also for a timeout that
    /// [`stop`](crate::HashedWheelTimer::stop) returned and that is
    /// cancelled afterwards). Does nothing by default.
    fn cancelled(self: Box<Self>, timeout: &Timeout) {
        let _ = timeout;
    }
}

impl<F> TimerTask for F
where
    F: FnOnce(&Timeout) + Send + 'static,
{
    fn run(self: Box<Self>, timeout: &Timeout) {
        (*self)(timeout)
    }
}

/// The payload of an entry.
pub(crate) enum Task {
    /// A user callback, consumed when it runs.
    Callback(UserBox<dyn TimerTask>),
    /// A periodic task: taken out for each run, put back when it re-arms.
    /// Boxed so that one-shot entries stay as small as before.
    Periodic(UserBox<Periodic>),
    /// The waker of the task awaiting a `Sleep`; `None` before its first poll.
    Wake(Option<Waker>),
}

impl Task {
    /// A user callback.
    pub(crate) fn callback(task: Box<dyn TimerTask>) -> Task {
        Task::Callback(UserBox::new(task))
    }

    /// A periodic task.
    pub(crate) fn periodic(task: Periodic) -> Task {
        Task::Periodic(UserBox::new(Box::new(task)))
    }

    /// Runs what a cancellation owes the task: the `cancelled` hook. A
    /// panic in it is caught and logged, as Netty does: the cancel has won
    /// all the same.
    #[inline(always)]
    pub(crate) fn on_cancel(self, timeout: &Timeout) {
        if let Task::Callback(task) = self {
            let task = task.into_inner();
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| task.cancelled(timeout))) {
                report_panic(&*panic, "in TimerTask::cancelled");
            }
        }
    }

    /// The task as a [`TimerTask`] that runs it once, for
    /// [`Timeout::take_task`]; `None` for a waker. From here on it is the
    /// caller's, and so is its drop.
    pub(crate) fn into_timer_task(self) -> Option<Box<dyn TimerTask>> {
        match self {
            Task::Callback(task) => Some(task.into_inner()),
            Task::Periodic(task) => Some(task.into_inner()),
            Task::Wake(_) => None,
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

/// The payload of a periodic entry.
pub(crate) struct Periodic {
    task: Box<dyn FnMut(&Timeout) + Send>,
    every: Every,
}

impl Periodic {
    /// Whatever `task` returns is dropped, as Netty's `void run`.
    pub(crate) fn new<R>(
        mut task: impl FnMut(&Timeout) -> R + Send + 'static,
        every: Every,
    ) -> Periodic {
        Periodic {
            task: Box::new(move |t: &Timeout| drop(task(t))),
            every,
        }
    }

    pub(crate) fn run_once(&mut self, timeout: &Timeout) {
        (self.task)(timeout)
    }

    /// When the run after one due at `due` that ended at `ended` is due.
    pub(crate) fn next_due(&self, due: Nanos, ended: Nanos) -> Nanos {
        self.every.next_due(due, ended)
    }
}

/// A stopped periodic task handed out by [`Timeout::take_task`] runs once.
impl TimerTask for Periodic {
    fn run(mut self: Box<Self>, timeout: &Timeout) {
        self.run_once(timeout)
    }
}

/// A user's boxed task whose drop is guarded: a panic in the task's
/// destructor is caught and logged. (An `Option` so that `Drop` can move
/// the box out; a `Box<dyn _>` in an `Option` is no bigger.)
pub(crate) struct UserBox<T: ?Sized + 'static>(Option<Box<T>>);

impl<T: ?Sized + 'static> UserBox<T> {
    pub(crate) fn new(task: Box<T>) -> UserBox<T> {
        UserBox(Some(task))
    }

    /// The box itself, for running it: its drop is the caller's again.
    #[inline(always)]
    pub(crate) fn into_inner(self) -> Box<T> {
        // Not dropped: its `Drop` would only find the box gone, in a call.
        let mut this = std::mem::ManuallyDrop::new(self);
        match this.0.take() {
            Some(task) => task,
            None => unreachable!("only drop and into_inner take the box"),
        }
    }
}

impl<T: ?Sized + 'static> Deref for UserBox<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_deref()
            .expect("only drop and into_inner take the box")
    }
}

impl<T: ?Sized + 'static> DerefMut for UserBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_deref_mut()
            .expect("only drop and into_inner take the box")
    }
}

impl<T: ?Sized + 'static> Drop for UserBox<T> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(task))) {
                report_panic(&*panic, "while being dropped");
            }
        }
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

/// The message of a caught panic, if it has one.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_counts_from_the_due_time_fixed_delay_from_the_end() {
        let (due, ended) = (1_000, 1_700);
        assert_eq!(Every::Rate(500).next_due(due, ended), 1_500);
        assert_eq!(Every::Delay(500).next_due(due, ended), 2_200);
    }

    #[test]
    fn next_due_saturates() {
        assert_eq!(Every::Rate(u64::MAX).next_due(1, 1), u64::MAX);
        assert_eq!(Every::Delay(2).next_due(0, u64::MAX - 1), u64::MAX);
    }
}
