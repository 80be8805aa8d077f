//! What runs when a timeout expires: a user callback, a periodic task, or a
//! future's waker.

use std::task::Waker;

use crate::periodic::Periodic;
use crate::Timeout;

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
    Callback(Box<dyn TimerTask>),
    /// A periodic task: taken out for each run, put back when it re-arms.
    /// Boxed so that one-shot entries stay as small as before.
    Periodic(Box<Periodic>),
    /// The waker of the task awaiting a `Sleep`; `None` before its first poll.
    Wake(Option<Waker>),
}

impl Task {
    /// Runs what a cancellation owes the task: the `cancelled` hook.
    #[inline(always)]
    pub(crate) fn on_cancel(self, timeout: &Timeout) {
        if let Task::Callback(task) = self {
            task.cancelled(timeout);
        }
    }

    /// The task as a [`TimerTask`] that runs it once, for
    /// [`Timeout::take_task`]; `None` for a waker.
    pub(crate) fn into_timer_task(self) -> Option<Box<dyn TimerTask>> {
        match self {
            Task::Callback(task) => Some(task),
            Task::Periodic(task) => Some(task),
            Task::Wake(_) => None,
        }
    }
}
