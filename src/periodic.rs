//! Periodic tasks: `schedule_at_fixed_rate` and `schedule_with_fixed_delay`, on the engine's
//! `Periodic` (`task.rs`), run and re-armed once each run returns, so runs never overlap
//! (`dispatch.rs`).

use std::{any::Any, time::Duration};

use crate::engine::{clock::saturating_nanos, clock::Nanos, entry::task::Every, entry::task::Task};
use crate::{HashedWheelTimer, Timeout, TimerError};

/// The user's task as the engine runs it, every `value` (a period or delay, by `make`), refusing
/// zero: its handle erased (see `Callback`), whatever it returns dropped, as Netty's `void run`.
fn periodic<R>(
    mut task: impl FnMut(&Timeout) -> R + Send + 'static,
    what: &'static str,
    value: Duration,
    make: fn(Nanos) -> Every,
) -> Result<Task, TimerError> {
    if value.is_zero() {
        return Err(TimerError::ZeroPeriod { what, value });
    }
    let run = move |timeout: &dyn Any| drop(task(crate::timer_task::timeout_of(timeout)));
    Ok(Task::periodic(run, make(saturating_nanos(value))))
}

impl HashedWheelTimer {
    /// Runs `task` first after `initial_delay`, then every `period`, at a fixed rate: each run is
    /// due at the previous run's due time plus `period`, so the schedule never drifts. Java's
    /// `scheduleAtFixedRate`.
    ///
    /// After an overrun (a run longer than `period`, or a held-up timer) the runs that fell due
    /// come back to back, never at the same time: the next run is armed only when the previous one
    /// returns, even on a multi-threaded [`Executor`](crate::Executor). Inside a run,
    /// [`Timeout::scheduled_execution_time`] says when it was due, so a task can skip late runs.
    ///
    /// The returned [`Timeout`] stands for every run, one [pending
    /// timeout](Self::pending_timeouts): [`cancel`](Timeout::cancel) stops all later runs (one in
    /// progress finishes). A run that panics is caught and logged, suppresses all later runs and
    /// shows in [`Timeout::is_panicked`]; other timeouts carry on. A run falls due at the end of
    /// its due time's tick, and a task runs at most once a tick: a period shorter than a tick runs
    /// once per tick, and a task whose period is a tick or less, once behind, stays behind (its
    /// [`scheduled_execution_time`](Timeout::scheduled_execution_time) says by how much).
    ///
    /// # Errors
    ///
    /// [`TimerError::ZeroPeriod`] for a zero `period`, and every error of
    /// [`new_timeout`](Self::new_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use hashed_wheel_timer::{HashedWheelTimer, Timeout};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let start = timer.now();
    /// let due = Arc::new(Mutex::new(Vec::new()));
    /// let record = due.clone();
    /// let heartbeat = timer.schedule_at_fixed_rate(
    ///     move |t: &Timeout| record.lock().unwrap().push(t.scheduled_execution_time() - start),
    ///     Duration::from_secs(1),
    ///     Duration::from_secs(5),
    /// )?;
    /// timer.advance(Duration::from_secs(12));
    /// let secs = |s: &[u64]| s.iter().map(|&s| Duration::from_secs(s)).collect::<Vec<_>>();
    /// assert_eq!(*due.lock().unwrap(), secs(&[1, 6, 11]));
    /// assert_eq!(timer.pending_timeouts(), 1, "one task, however many runs");
    ///
    /// assert!(heartbeat.cancel());
    /// timer.advance(Duration::from_secs(60));
    /// assert_eq!(due.lock().unwrap().len(), 3, "no run after cancel");
    ///
    /// let err = timer.schedule_at_fixed_rate(|_| {}, Duration::ZERO, Duration::ZERO);
    /// assert!(err.unwrap_err().to_string().contains("period"));
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn schedule_at_fixed_rate<F, R>(
        &self,
        task: F,
        initial_delay: Duration,
        period: Duration,
    ) -> Result<Timeout, TimerError>
    where
        F: FnMut(&Timeout) -> R + Send + 'static,
    {
        let task = periodic(task, "period", period, Every::Rate)?;
        self.schedule_entry(self.now_and_after(initial_delay), task)
    }

    /// Runs `task` first after `initial_delay`, then again and again, each run due `delay` after
    /// the previous run *ended*: a fixed delay between runs, as Java's `scheduleWithFixedDelay`. A
    /// slow run pushes every later run back; there is nothing to catch up.
    ///
    /// Everything else is as for [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    ///
    /// # Errors
    ///
    /// [`TimerError::ZeroPeriod`] for a zero `delay`, and every error of
    /// [`new_timeout`](Self::new_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use hashed_wheel_timer::{HashedWheelTimer, Timeout};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let polls = Arc::new(AtomicU32::new(0));
    /// let count = polls.clone();
    /// let poller = timer.schedule_with_fixed_delay(
    ///     move |t: &Timeout| {
    ///         if count.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
    ///             t.cancel(); // done: no fourth run
    ///         }
    ///     },
    ///     Duration::ZERO,
    ///     Duration::from_millis(100),
    /// )?;
    /// timer.advance(Duration::from_secs(10));
    /// assert_eq!(polls.load(Ordering::SeqCst), 3);
    /// assert!(poller.is_cancelled());
    /// assert_eq!(timer.pending_timeouts(), 0);
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn schedule_with_fixed_delay<F, R>(
        &self,
        task: F,
        initial_delay: Duration,
        delay: Duration,
    ) -> Result<Timeout, TimerError>
    where
        F: FnMut(&Timeout) -> R + Send + 'static,
    {
        let task = periodic(task, "delay", delay, Every::Delay)?;
        self.schedule_entry(self.now_and_after(initial_delay), task)
    }
}
