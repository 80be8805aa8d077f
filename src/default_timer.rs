//! The process-wide default timer, and free functions that use it.

use std::sync::{Arc, OnceLock};
use std::{cell::RefCell, future::IntoFuture, rc::Rc};

use arc_swap::ArcSwapOption;
use std::time::{Duration, Instant};

use crate::{HashedWheelTimer, Interval, Sleep, Timeout, TimeoutFuture, TimerError};

/// The process-wide timer: 1 ms ticks, 512 buckets, no pending limit.
///
/// Built on first use, with no tokio runtime needed; its worker thread parks when nothing is
/// pending and lives as long as the process. The free functions use it unless [`set_default`] set
/// another timer on the calling thread; `default_timer()` always returns this one.
///
/// Shared by the whole process, it cannot be stopped:
/// [`stop`](HashedWheelTimer::stop) on it returns [`TimerError::StopDefaultTimer`]. Build your own
/// timer for other settings or a life of its own.
///
/// Its thread wakes futures from outside any runtime: for futures in tasks, [`set_global_default`]
/// says what costs less.
pub fn default_timer() -> &'static HashedWheelTimer {
    DEFAULT.get_or_init(HashedWheelTimer::new)
}

pub(crate) static DEFAULT: OnceLock<HashedWheelTimer> = OnceLock::new();

thread_local! {
    /// The timers `set_default` made this thread's default, one per live guard: the last rules.
    static CURRENT: RefCell<Vec<Rc<HashedWheelTimer>>> = const { RefCell::new(Vec::new()) };
}

/// Makes `timer` the one the free functions ([`sleep`], [`timeout`], [`interval`], [`new_timeout`],
/// ...) use on this thread, until the returned guard is dropped; then the one before comes back.
/// Guards nest, as `tracing::subscriber::set_default`'s do, and one dropped out of order (two in a
/// struct's fields drop first to last) takes only its own timer away. So code written against the
/// free functions can be tested as it is, on a paused tokio runtime's clock
/// ([`Builder::tokio_clock`](crate::Builder::tokio_clock)) or a manual one; test on a
/// `current_thread` runtime, as `#[tokio::test]` does by default. While the guard lives, its timer
/// stays this thread's default even once it is shut down (stopped, or its tokio runtime gone): a
/// future made then waits out its time elsewhere ([`Sleep`]'s "When the timer stops"), and
/// [`new_timeout`] gets [`TimerError::Shutdown`]. ([`set_global_default`]'s gives way instead.)
pub fn set_default(timer: HashedWheelTimer) -> DefaultGuard {
    let timer = Rc::new(timer);
    CURRENT.with(|current| current.borrow_mut().push(timer.clone()));
    DefaultGuard(timer)
}

/// Makes `timer` the one the free functions, [`current_timer`] and the constructors built on it use
/// on every thread without a [`set_default`] of its own, in place of the process-wide
/// [`default_timer`], until another call replaces it. Returns the one it replaces. Once `timer` is
/// shut down (stopped, or its tokio runtime gone), they use the process-wide one again.
///
/// For `main`: a [`tokio_clock`](crate::Builder::tokio_clock) timer, made in the runtime, turns its
/// wheel on the runtime's own wake-ups and wakes tasks where they run, so `timeout` and `sleep` in
/// tasks cost less than on the process-wide timer's thread (the README's loopback app). Tests,
/// which share a process, use [`set_default`].
///
/// ```
/// use hashed_wheel_timer::{current_timer, set_global_default, HashedWheelTimer};
/// use std::time::Duration;
///
/// #[tokio::main(worker_threads = 2)]
/// async fn main() {
///     let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
///     set_global_default(timer.clone());
///     // On every worker: no thread of the timer's own.
///     let on_worker = tokio::spawn(async { current_timer() }).await.unwrap();
///     assert!(on_worker.is_same(&timer));
///     hashed_wheel_timer::sleep(Duration::from_millis(1)).await;
/// }
/// ```
pub fn set_global_default(timer: HashedWheelTimer) -> Option<HashedWheelTimer> {
    let previous = GLOBAL.swap(Some(Arc::new(timer)))?;
    Some(Arc::try_unwrap(previous).unwrap_or_else(|shared| (*shared).clone()))
}

/// The timer `set_global_default` set: read without a lock, written rarely.
static GLOBAL: ArcSwapOption<HashedWheelTimer> = ArcSwapOption::const_empty();

/// Restores the previous default timer when dropped; see [`set_default`]. It belongs to the thread
/// that made it.
#[must_use = "the default is restored as soon as the guard is dropped"]
#[derive(Debug)]
pub struct DefaultGuard(Rc<HashedWheelTimer>);

impl Drop for DefaultGuard {
    fn drop(&mut self) {
        // Its timer drops with `self.0`, outside the thread-local's borrow: the drop may stop it.
        let _ =
            CURRENT.try_with(|current| current.borrow_mut().retain(|t| !Rc::ptr_eq(t, &self.0)));
    }
}

/// The timer the free functions use on this thread: the one [`set_default`] installed, else the one
/// [`set_global_default`] set (while it runs), else the process-wide [`default_timer`].
/// [`DelayQueue::new`](crate::DelayQueue::new) and
/// [`Timeout::new`](crate::tower::timeout::Timeout::new) in the `tower` module build on it, as
/// tokio-util's and tower's use the ambient runtime.
///
/// ```
/// use hashed_wheel_timer::{current_timer, default_timer, set_default, HashedWheelTimer};
///
/// assert!(current_timer().is_same(default_timer()));
/// let manual = HashedWheelTimer::builder().manual_clock().build()?;
/// let _guard = set_default(manual.clone());
/// assert!(current_timer().is_same(&manual));
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
pub fn current_timer() -> HashedWheelTimer {
    with_default(HashedWheelTimer::clone)
}

/// Runs `f` on this thread's default timer: `set_default`'s, the global or the process-wide one.
fn with_default<R>(f: impl FnOnce(&HashedWheelTimer) -> R) -> R {
    match CURRENT.try_with(|current| current.borrow().last().map(|t| (**t).clone())) {
        Ok(Some(timer)) => f(&timer),
        _ => match &*GLOBAL.load() {
            Some(timer) if !timer.is_shutdown() => f(timer),
            _ => f(default_timer()),
        },
    }
}

/// Sleeps `duration` on the [default timer](default_timer); see [`HashedWheelTimer::sleep`].
pub fn sleep(duration: Duration) -> Sleep {
    with_default(|timer| timer.sleep(duration))
}

/// Sleeps until `deadline` ([which `Instant`](crate#deadlines)) on the [default
/// timer](default_timer); see [`HashedWheelTimer::sleep_until`].
pub fn sleep_until(deadline: impl Into<Instant>) -> Sleep {
    with_default(|timer| timer.sleep_until(deadline))
}

/// Runs `future` with a deadline `duration` from now, on the [default timer](default_timer); see
/// [`TimeoutFuture`].
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> TimeoutFuture<F::IntoFuture> {
    with_default(|timer| timer.timeout(duration, future))
}

/// Runs `future` with a deadline at `deadline` ([which `Instant`](crate#deadlines)), on the
/// [default timer](default_timer); see [`HashedWheelTimer::timeout_at`].
pub fn timeout_at<F: IntoFuture>(
    deadline: impl Into<Instant>,
    future: F,
) -> TimeoutFuture<F::IntoFuture> {
    with_default(|timer| timer.timeout_at(deadline, future))
}

/// An [`Interval`] on the [default timer](default_timer), first tick now; see
/// [`HashedWheelTimer::interval`].
pub fn interval(period: Duration) -> Interval {
    with_default(|timer| timer.interval(period))
}

/// An [`Interval`] on the [default timer](default_timer), first tick at `start` ([which
/// `Instant`](crate#deadlines)); see [`HashedWheelTimer::interval_at`].
pub fn interval_at(start: impl Into<Instant>, period: Duration) -> Interval {
    with_default(|timer| timer.interval_at(start, period))
}

/// [`interval`], but a zero period is an error, [`TimerError::ZeroPeriod`].
pub fn try_interval(period: Duration) -> Result<Interval, TimerError> {
    with_default(|timer| timer.try_interval(period))
}

/// [`interval_at`], but a zero period is an error, [`TimerError::ZeroPeriod`].
pub fn try_interval_at(
    start: impl Into<Instant>,
    period: Duration,
) -> Result<Interval, TimerError> {
    with_default(|timer| timer.try_interval_at(start, period))
}

/// Runs `task` once, `delay` from now, on the [default timer](default_timer)'s thread; see
/// [`HashedWheelTimer::new_timeout`], also for the errors.
pub fn new_timeout<F, R>(task: F, delay: Duration) -> Result<Timeout, TimerError>
where
    F: FnOnce(&Timeout) -> R + Send + 'static,
{
    with_default(|timer| timer.new_timeout(task, delay))
}

/// Runs `task` once at `deadline` ([which `Instant`](crate#deadlines)), on the [default
/// timer](default_timer)'s thread; errors and all as [`HashedWheelTimer::new_timeout_at`].
pub fn new_timeout_at<F, R>(task: F, deadline: impl Into<Instant>) -> Result<Timeout, TimerError>
where
    F: FnOnce(&Timeout) -> R + Send + 'static,
{
    with_default(|timer| timer.new_timeout_at(task, deadline))
}
