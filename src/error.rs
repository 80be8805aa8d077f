//! The crate's one error type.

use std::time::Duration;

/// Everything that can go wrong when building or using a timer.
///
/// Each variant's `Display` text names the setting or condition that caused it, enough to fix the
/// call. Branch on the two runtime conditions with [`is_shutdown`](Self::is_shutdown) and
/// [`is_at_capacity`](Self::is_at_capacity).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimerError {
    /// `tick_duration` was zero.
    #[error("tick_duration must be greater than zero (got {0:?})")]
    ZeroTickDuration(Duration),
    /// `ticks_per_wheel` was zero.
    #[error("ticks_per_wheel must be at least 1 (got 0)")]
    ZeroTicksPerWheel,
    /// `ticks_per_wheel` was above [`MAX_TICKS_PER_WHEEL`](crate::MAX_TICKS_PER_WHEEL), 2^20.
    #[error("ticks_per_wheel must be at most 2^20 = 1048576 (got {0})")]
    TooManyTicksPerWheel(usize),
    /// One wheel turn, `tick_duration × ticks_per_wheel`, is not shorter than a timer's time, 2^61
    /// ns (about 73 years): its first tick would end past every deadline.
    #[error(
        "tick_duration ({tick:?}) × ticks_per_wheel ({ticks_per_wheel}) must be under 2^61 nanoseconds (73 years)"
    )]
    WheelDurationOverflow {
        /// The tick asked for.
        tick: Duration,
        /// The wheel size, after rounding up to a power of two.
        ticks_per_wheel: usize,
    },
    /// `max_pending_timeouts` was zero, which would refuse every timeout.
    #[error("max_pending_timeouts must be at least 1 (got 0); leave it unset for no limit")]
    ZeroMaxPendingTimeouts,
    /// `thread_name` contained a NUL byte, which no OS thread name can hold.
    #[error("thread_name must not contain a NUL byte (got {0:?})")]
    InvalidThreadName(String),
    /// A periodic task or interval was given a zero period or delay.
    #[error("{what} must be greater than zero (got {value:?})")]
    ZeroPeriod {
        /// Which argument was zero (`"period"`, `"delay"`).
        what: &'static str,
        /// The value given.
        value: Duration,
    },
    /// The timer was stopped, or its last handle dropped.
    #[error("the timer has been stopped")]
    Shutdown,
    /// The timer already holds `max_pending_timeouts` pending timeouts.
    #[error("too many pending timeouts: {pending} pending, max_pending_timeouts is {max}")]
    AtCapacity {
        /// Pending timeouts when the call was refused.
        pending: usize,
        /// The configured limit.
        max: usize,
    },
    /// `stop()` was called from a task running on the same timer, where waiting for the worker
    /// would deadlock.
    #[error("stop() was called from a task of the same timer; it would wait on itself")]
    StopFromTimerTask,
    /// `stop()` was called from a task of another timer, whose driver this timer's driver waits
    /// for: this timer's own task is stopping or advancing that one (or one whose task stops or
    /// advances that one, and so on). Waiting would deadlock, so this call is refused; the other
    /// calls go on.
    #[error("stop() was called from a task of a timer that, through stop() calls in tasks, waits for this one")]
    StopWouldDeadlock,
    /// The OS refused to start the worker thread.
    #[error("could not start the timer's worker thread: {0}")]
    WorkerSpawn(String),
    /// [`Builder::tokio_clock`](crate::Builder::tokio_clock) was built outside a tokio runtime,
    /// whose clock and tasks it needs.
    #[error("tokio_clock() must be built inside a tokio runtime (none is running on this thread)")]
    NoTokioRuntime,
    /// [`Builder::tokio_clock`](crate::Builder::tokio_clock) was built in a runtime without its
    /// time driver.
    #[error("tokio_clock() needs the runtime's time driver: build the runtime with enable_time() or enable_all()")]
    TokioTimeDisabled,
    /// Both [`Builder::manual_clock`](crate::Builder::manual_clock) and
    /// [`Builder::tokio_clock`](crate::Builder::tokio_clock) were asked for:
    /// a timer reads one clock.
    #[error("manual_clock() and tokio_clock() were both set: a timer reads one clock; pick one")]
    ClockConflict,
    /// `stop()` was called on the process-wide [`default_timer`](crate::default_timer), which
    /// cannot be stopped.
    #[error("the process-wide default timer cannot be stopped; build a timer of your own to stop")]
    StopDefaultTimer,
    /// An insert into a [`DelayQueue`](crate::DelayQueue) after its
    /// [`close`](crate::DelayQueue::close).
    #[error("the delay queue was closed: it takes no more items")]
    QueueClosed,
    /// An insert into a [`DelayQueue`](crate::DelayQueue) made while its timer had 2^24 queues
    /// live: its items' notices have no room for another queue's id, so it takes no items.
    #[error("the delay queue was made while its timer had 2^24 queues live: it takes no items")]
    TooManyQueues,
}

impl TimerError {
    /// True if the timer has been stopped.
    pub fn is_shutdown(&self) -> bool {
        matches!(self, TimerError::Shutdown)
    }

    /// True if the pending-timeout limit refused the call.
    pub fn is_at_capacity(&self) -> bool {
        matches!(self, TimerError::AtCapacity { .. })
    }
}

/// The error of a [`timeout`](crate::HashedWheelTimer::timeout) whose deadline came before its
/// future finished, or whose timer was stopped first ([`is_shutdown`](Elapsed::is_shutdown)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", if self.shutdown { "the timer was stopped before the deadline" } else { "deadline has elapsed" })]
pub struct Elapsed {
    shutdown: bool,
}

impl Elapsed {
    pub(crate) fn new(shutdown: bool) -> Elapsed {
        Elapsed { shutdown }
    }

    /// True if the timer was stopped before the deadline came, rather than the deadline passing.
    pub fn is_shutdown(&self) -> bool {
        self.shutdown
    }
}

/// So that `timeout(d, io).await??` works in a function returning `io::Result`, as with tokio's
/// `Elapsed`: an error of kind [`TimedOut`](std::io::ErrorKind::TimedOut) holding this one.
impl From<Elapsed> for std::io::Error {
    fn from(elapsed: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed)
    }
}

impl From<crate::engine::driver::counts::Refusal> for TimerError {
    fn from(refusal: crate::engine::driver::counts::Refusal) -> TimerError {
        use crate::engine::driver::counts::Refusal;
        match refusal {
            Refusal::Shutdown => TimerError::Shutdown,
            Refusal::AtCapacity { pending, max } => TimerError::AtCapacity { pending, max },
            Refusal::WorkerSpawn(why) => TimerError::WorkerSpawn(why),
        }
    }
}
