//! The process-wide default timer, and free functions that use it.

use std::future::IntoFuture;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{HashedWheelTimer, Interval, Sleep, Timeout, TimeoutFuture, TimerError};

/// The process-wide timer: 1 ms ticks, 512 buckets, no pending limit.
///
/// Built on first use; its worker thread starts with the first timeout,
/// parks when nothing is pending and lives as long as the process. Every
/// free function of this crate (`sleep`, `timeout`, `interval`, ...) uses
/// it, so a program needs no setup. It needs no tokio runtime.
///
/// It is shared by the whole process: calling [`stop`](HashedWheelTimer::stop)
/// on it stops it for every user, for good. Build your own timer with
/// [`HashedWheelTimer::builder`] for other settings or a life of its own.
///
/// ```
/// use hashed_wheel_timer::default_timer;
/// use std::time::Duration;
///
/// let timer = default_timer();
/// assert_eq!(timer.tick_duration(), Duration::from_millis(1));
/// assert_eq!(timer.ticks_per_wheel(), 512);
/// assert!(std::ptr::eq(timer, default_timer()));
/// ```
pub fn default_timer() -> &'static HashedWheelTimer {
    static DEFAULT: OnceLock<HashedWheelTimer> = OnceLock::new();
    DEFAULT.get_or_init(HashedWheelTimer::new)
}

/// Sleeps `duration` on the [default timer](default_timer); see
/// [`HashedWheelTimer::sleep`].
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// hashed_wheel_timer::sleep(Duration::from_millis(5)).await;
/// # }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    default_timer().sleep(duration)
}

/// Sleeps until `deadline` on the [default timer](default_timer); see
/// [`HashedWheelTimer::sleep_until`].
pub fn sleep_until(deadline: Instant) -> Sleep {
    default_timer().sleep_until(deadline)
}

/// Runs `future` with a deadline `duration` from now, on the
/// [default timer](default_timer); see [`HashedWheelTimer::timeout`].
///
/// ```
/// use hashed_wheel_timer::timeout;
/// use std::time::Duration;
///
/// # futures::executor::block_on(async {
/// let answer = timeout(Duration::from_secs(1), async { 42 }).await;
/// assert_eq!(answer, Ok(42));
/// let never = timeout(Duration::from_millis(1), std::future::pending::<()>()).await;
/// assert!(never.is_err());
/// # });
/// ```
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> TimeoutFuture<F::IntoFuture> {
    default_timer().timeout(duration, future)
}

/// Runs `future` with a deadline at `deadline`, on the
/// [default timer](default_timer); see [`HashedWheelTimer::timeout_at`].
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> TimeoutFuture<F::IntoFuture> {
    default_timer().timeout_at(deadline, future)
}

/// An [`Interval`] on the [default timer](default_timer), first tick now;
/// see [`HashedWheelTimer::interval`] (a zero period becomes one tick).
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut interval = hashed_wheel_timer::interval(Duration::from_millis(2));
/// for _ in 0..3 {
///     interval.tick().await;
/// }
/// # }
/// ```
pub fn interval(period: Duration) -> Interval {
    default_timer().interval(period)
}

/// An [`Interval`] on the [default timer](default_timer), first tick at
/// `start`; see [`HashedWheelTimer::interval_at`].
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    default_timer().interval_at(start, period)
}

/// [`interval`], but a zero period is an error.
///
/// # Errors
///
/// [`TimerError::ZeroPeriod`] if `period` is zero.
pub fn try_interval(period: Duration) -> Result<Interval, TimerError> {
    default_timer().try_interval(period)
}

/// [`interval_at`], but a zero period is an error.
///
/// # Errors
///
/// [`TimerError::ZeroPeriod`] if `period` is zero.
pub fn try_interval_at(start: Instant, period: Duration) -> Result<Interval, TimerError> {
    default_timer().try_interval_at(start, period)
}

/// Runs `task` once, `delay` from now, on the [default timer](default_timer)'s
/// thread; see [`HashedWheelTimer::new_timeout`].
///
/// # Errors
///
/// As [`HashedWheelTimer::new_timeout`]: [`TimerError::Shutdown`] if the
/// default timer was stopped, [`TimerError::WorkerSpawn`] if its thread
/// could not start.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let (tx, rx) = mpsc::channel();
/// hashed_wheel_timer::new_timeout(move |_| tx.send(()).unwrap(), Duration::from_millis(1))?;
/// rx.recv().unwrap();
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
pub fn new_timeout<F, R>(task: F, delay: Duration) -> Result<Timeout, TimerError>
where
    F: FnOnce(&Timeout) -> R + Send + 'static,
{
    default_timer().new_timeout(task, delay)
}

/// Runs `task` once at `deadline`, on the [default timer](default_timer)'s
/// thread; see [`HashedWheelTimer::new_timeout_at`].
///
/// # Errors
///
/// As [`new_timeout`].
///
/// ```
/// use std::sync::mpsc;
/// use std::time::{Duration, Instant};
///
/// let (tx, rx) = mpsc::channel();
/// let at = Instant::now() + Duration::from_millis(1);
/// hashed_wheel_timer::new_timeout_at(move |_| tx.send(()).unwrap(), at)?;
/// rx.recv().unwrap();
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
pub fn new_timeout_at<F, R>(task: F, deadline: Instant) -> Result<Timeout, TimerError>
where
    F: FnOnce(&Timeout) -> R + Send + 'static,
{
    default_timer().new_timeout_at(task, deadline)
}
