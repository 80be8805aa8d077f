//! Scheduling a one-shot callback: `new_timeout` and its kin, after a delay or at a deadline.

use std::time::{Duration, Instant};

use crate::engine::entry::task::Task;
use crate::{HashedWheelTimer, Timeout, TimerError, TimerTask};

impl HashedWheelTimer {
    /// Schedules `task` to run once, `delay` from now, on the worker thread (or the
    /// [`executor`](crate::Builder::executor), if the timer has one).
    ///
    /// Callable from any thread, with or without a tokio runtime; it takes no lock. A zero delay
    /// fires on the next tick; a delay too large to represent saturates at the end of the timer's
    /// time, 73 years on, which real time never reaches. A panicking task is caught and logged, and
    /// the timer keeps running. Whatever the task returns (say, the `Result` of a channel send) is
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`TimerError::Shutdown`] after [`stop`](Self::stop), [`TimerError::AtCapacity`] at
    /// `max_pending_timeouts`, and [`TimerError::WorkerSpawn`] if the worker thread could not
    /// start. The pending count is unchanged by a refused call.
    #[inline]
    pub fn new_timeout<F, R>(&self, task: F, delay: Duration) -> Result<Timeout, TimerError>
    where
        F: FnOnce(&Timeout) -> R + Send + 'static,
    {
        self.new_timeout_task(move |t: &Timeout| drop(task(t)), delay)
    }

    /// [`new_timeout`](Self::new_timeout) for any [`TimerTask`].
    #[inline]
    pub fn new_timeout_task<T: TimerTask>(
        &self,
        task: T,
        delay: Duration,
    ) -> Result<Timeout, TimerError> {
        self.schedule_entry(self.now_and_after(delay), Task::callback(task))
    }

    /// [`new_timeout`](Self::new_timeout) at an absolute `deadline` on this timer's clock ([which
    /// `Instant`](crate#deadlines)), as `java.util.Timer.schedule(task, Date)`: never early, at
    /// most a tick late; a deadline already past fires on the next tick. The same errors and
    /// counting as `new_timeout`.
    pub fn new_timeout_at<F, R>(
        &self,
        task: F,
        deadline: impl Into<Instant>,
    ) -> Result<Timeout, TimerError>
    where
        F: FnOnce(&Timeout) -> R + Send + 'static,
    {
        self.new_timeout_task_at(move |t: &Timeout| drop(task(t)), deadline)
    }

    /// [`new_timeout_task`](Self::new_timeout_task) at an absolute `deadline`, as
    /// [`new_timeout_at`](Self::new_timeout_at).
    pub fn new_timeout_task_at<T: TimerTask>(
        &self,
        task: T,
        deadline: impl Into<Instant>,
    ) -> Result<Timeout, TimerError> {
        self.schedule_entry(self.now_and_at(deadline.into()), Task::callback(task))
    }
}
