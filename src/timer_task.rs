//! `TimerTask`: what a user's callback is, Netty's `TimerTask`, and how the
//! engine's `Callback` runs it.

use std::any::Any;

use crate::engine::entry::task::{Callback, Task, ThinCallback};
use crate::Timeout;

/// A task to run once when its [`Timeout`] expires, Netty's `TimerTask`.
///
/// Every `FnOnce(&Timeout) + Send + 'static` closure is a `TimerTask`, so most code never names
/// this trait. Implement it on your own type when you also want to hear about cancellation.
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
    /// Runs the task. Called at most once, after the deadline has passed, on the timer's worker
    /// thread (or the thread calling [`advance`](crate::HashedWheelTimer::advance) on a manual
    /// clock), or on the [`Executor`](crate::Executor) the timer was built with.
    ///
    /// A panic is caught and logged; the timeout then reports [`Timeout::is_panicked`].
    fn run(self: Box<Self>, timeout: &Timeout);

    /// Called instead of [`run`](TimerTask::run), on the cancelling thread, when
    /// [`Timeout::cancel`] wins (also for a timeout that [`stop`](crate::HashedWheelTimer::stop)
    /// returned and that is cancelled afterwards). Does nothing by default.
    fn cancelled(self: Box<Self>, timeout: &Timeout) {
        let _ = timeout;
    }

    /// How the timer runs it: [`run`](TimerTask::run) in a box of its own, as the timer keeps it in
    /// one with more beside it. A closure runs where it is. Not for implementing.
    #[doc(hidden)]
    fn run_in_place(self, timeout: &Timeout)
    where
        Self: Sized,
    {
        TimerTask::run(Box::new(self), timeout)
    }

    /// [`cancelled`](TimerTask::cancelled) as `run_in_place` runs `run`. Not for implementing.
    #[doc(hidden)]
    fn cancelled_in_place(self, timeout: &Timeout)
    where
        Self: Sized,
    {
        TimerTask::cancelled(Box::new(self), timeout)
    }
}

impl<F> TimerTask for F
where
    F: FnOnce(&Timeout) + Send + 'static,
{
    fn run(self: Box<Self>, timeout: &Timeout) {
        (*self)(timeout)
    }

    fn run_in_place(self, timeout: &Timeout) {
        self(timeout)
    }

    fn cancelled_in_place(self, _: &Timeout) {}
}

/// The engine hands a callback its own `Timeout` as `&dyn Any` (see ARCHITECTURE.md, "Where the
/// types loop"), and nothing else.
pub(crate) fn timeout_of(handle: &dyn Any) -> &Timeout {
    handle
        .downcast_ref()
        .expect("the engine hands a callback its Timeout")
}

impl<T: TimerTask> Callback for T {
    #[inline]
    fn run(self, timeout: &dyn Any) {
        self.run_in_place(timeout_of(timeout))
    }

    #[inline]
    fn cancelled(self, timeout: &dyn Any) {
        self.cancelled_in_place(timeout_of(timeout))
    }
}

/// The task of a stopped timeout as a [`TimerTask`] that runs it once, for [`Timeout::take_task`];
/// `None` for a future's waker. A delay-queue item's task, run, hands the item to the queue's
/// stream, as its deadline would have.
pub(crate) fn into_timer_task(task: Task) -> Option<Box<dyn TimerTask>> {
    match task {
        Task::Callback(task) => Some(Box::new(Stored(task))),
        Task::Periodic(task) => {
            let mut task = task.into_inner();
            Some(Box::new(move |timeout: &Timeout| (task.run)(timeout)))
        }
        Task::Wake(_) => None,
        Task::Notice(notice) => Some(Box::new(move |t: &Timeout| t.shared().deliver(notice))),
    }
}

/// A callback as the engine stored it.
struct Stored(ThinCallback);

impl TimerTask for Stored {
    fn run(self: Box<Self>, timeout: &Timeout) {
        self.0.run(timeout)
    }

    fn cancelled(self: Box<Self>, timeout: &Timeout) {
        self.0.cancelled(timeout)
    }
}
