//! `Timeout`'s public methods: cancel, the state queries, `take_task`, `timer`, the deadline. The
//! type and what makes it a handle (its reference, its identity) are the engine's: see `handle.rs`.

use std::{fmt, time::Duration, time::Instant};

use crate::engine::entry::handle::Timeout;

impl Timeout {
    /// Cancels the timeout. Returns true only for the call that wins, and then the task never runs
    /// (again); false if it ran, is running, or was handed to an executor (one-shot: as Netty, not
    /// Java's executor), was cancelled before, or a periodic run panicked. A periodic task can be
    /// cancelled even from inside its own run: that run finishes, and no later one starts.
    ///
    /// The entry leaves the wheel within one tick, so its memory comes back long before its
    /// deadline. See also [`TimerTask::cancelled`](crate::TimerTask::cancelled).
    #[inline]
    pub fn cancel(&self) -> bool {
        let task = self.shared().cancel(self.key(), 0);
        task.map(|task| task.on_cancel(self)).is_some()
    }

    /// True if [`cancel`](Timeout::cancel) won.
    pub fn is_cancelled(&self) -> bool {
        self.entry().is_cancelled()
    }

    /// True if the task ran for the last time: a one-shot task ran (or is running, or its job waits
    /// on an executor), or a run of a periodic task panicked.
    pub fn is_expired(&self) -> bool {
        self.entry().is_expired()
    }

    /// True if it was returned by `stop()` without running (and not cancelled since), or if it was
    /// a periodic task whose run was in progress when `stop()` was called.
    pub fn is_stopped(&self) -> bool {
        self.entry().is_stopped()
    }

    /// True while it may still fire: neither expired, cancelled nor stopped. A periodic task stays
    /// pending during its runs, as it does in
    /// [`pending_timeouts`](crate::HashedWheelTimer::pending_timeouts).
    pub fn is_pending(&self) -> bool {
        self.entry().is_pending()
    }

    /// True if a run of the task panicked (caught and logged; a periodic task runs no more, as in
    /// Java's `ScheduledThreadPoolExecutor`).
    pub fn is_panicked(&self) -> bool {
        self.entry().is_panicked()
    }

    /// True for a task from
    /// [`schedule_at_fixed_rate`](crate::HashedWheelTimer::schedule_at_fixed_rate) or
    /// [`schedule_with_fixed_delay`](crate::HashedWheelTimer::schedule_with_fixed_delay).
    pub fn is_periodic(&self) -> bool {
        self.entry().is_periodic()
    }

    /// Takes the task of a timeout that [`stop`](crate::HashedWheelTimer::stop) returned, so it can
    /// be run elsewhere or dropped, as Netty's `timeout.task()`. `None` for a timeout that is still
    /// pending, has run, was cancelled, or whose task was already taken. The task of a periodic
    /// timeout runs once.
    pub fn take_task(&self) -> Option<Box<dyn crate::TimerTask>> {
        if !self.entry().is_stopped() {
            return None;
        }
        crate::timer_task::into_timer_task(self.entry().take_task()?)
    }

    /// The timer this timeout belongs to, Netty's `timeout.timer()`; `None` once the timer's last
    /// handle has been dropped. For use inside a task (see
    /// [`HashedWheelTimer`](crate::HashedWheelTimer)).
    pub fn timer(&self) -> Option<crate::HashedWheelTimer> {
        crate::HashedWheelTimer::of(self.shared())
    }

    /// When it is due, on the timer's clock: for a periodic task, when its next run is due (during
    /// a run, when that run was due); after a [`reset`](Timeout::reset), the new deadline. A delay
    /// too large to represent saturates to a point centuries away.
    pub fn deadline(&self) -> Instant {
        self.shared().clock.to_instant(self.entry().deadline())
    }

    /// Time left until its deadline, on the timer's own clock (so a manual or paused clock gives
    /// the answer a test expects), as `ScheduledFuture.getDelay`. Zero once the deadline has
    /// passed, and once it fired, is running, was cancelled or stopped. For a periodic task, the
    /// time to its next run.
    pub fn remaining(&self) -> Duration {
        let shared = self.shared();
        if !self.entry().is_pending() || shared.is_shutdown() {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.entry().deadline().saturating_sub(shared.clock.now()))
    }

    /// Moves a pending one-shot timeout to fire `delay` from now instead, later or earlier, keeping
    /// its task and handles: the idle-connection pattern (Netty's `IdleStateHandler`, tokio-util's
    /// `DelayQueue::reset`), done on every message.
    ///
    /// It then fires once, at the new deadline, never at the old one, never early; a deadline
    /// already past fires on the next tick. Returns true if it moved it. False, changing nothing,
    /// once it fired or is running, was cancelled, or the timer stopped, and for a periodic task; a
    /// reset racing the fire has exactly one winner.
    ///
    /// A later deadline is only written: the timer's thread does no work for it until the old
    /// deadline, then files it once, however many resets came between. An earlier one is handed to
    /// the timer's thread, as a schedule is.
    pub fn reset(&self, delay: Duration) -> bool {
        let shared = self.shared();
        shared.reset(self.key(), shared.clock.deadline_after(delay))
    }

    /// [`reset`](Timeout::reset) to an absolute deadline on the timer's clock ([which
    /// `Instant`](crate#deadlines)).
    pub fn reset_at(&self, deadline: impl Into<Instant>) -> bool {
        let shared = self.shared();
        shared.reset(self.key(), shared.clock.to_nanos(deadline.into()))
    }

    /// When the current run was due, as `java.util.TimerTask`'s `scheduledExecutionTime`: compare
    /// it inside the task with [`HashedWheelTimer::now`](crate::HashedWheelTimer::now) to skip a
    /// run that comes too late after an overrun (example on
    /// [`schedule_at_fixed_rate`](crate::HashedWheelTimer::schedule_at_fixed_rate)). The same as
    /// [`deadline`](Timeout::deadline). A run fires at the end of its due time's tick: an on-time
    /// run sees `now()` up to a tick later.
    pub fn scheduled_execution_time(&self) -> Instant {
        self.deadline()
    }
}

impl fmt::Debug for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("state", &self.entry().state_name())
            .field("periodic", &self.is_periodic())
            .field("panicked", &self.is_panicked())
            .field("deadline", &self.deadline())
            .finish()
    }
}
