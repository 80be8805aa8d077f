//! `Timeout`: the handle to one scheduled task.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use crate::entry::Entry;
use crate::shared::Shared;

/// A handle to a task scheduled on a [`HashedWheelTimer`](crate::HashedWheelTimer),
/// as returned by `new_timeout`. Netty's `Timeout`.
///
/// It is cheap to clone (two reference counts); every clone refers to the
/// same timeout. Dropping handles does not cancel: call [`cancel`].
///
/// A timeout ends in exactly one of three ways: it *expires* (its task ran),
/// it is *cancelled*, or it is returned by
/// [`stop`](crate::HashedWheelTimer::stop) without running.
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
///
/// let timer = HashedWheelTimer::builder().manual_clock().build()?;
/// let t = timer.new_timeout(|_| println!("request timed out"), Duration::from_millis(100))?;
/// assert!(t.cancel(), "the response arrived first");
/// assert!(!t.cancel(), "only the first cancel wins");
/// timer.advance(Duration::from_secs(1));
/// assert!(t.is_cancelled() && !t.is_expired());
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
///
/// [`cancel`]: Timeout::cancel
#[derive(Clone)]
pub struct Timeout {
    entry: Arc<Entry>,
    shared: Arc<Shared>,
}

impl Timeout {
    pub(crate) fn from_parts(entry: Arc<Entry>, shared: Arc<Shared>) -> Timeout {
        Timeout { entry, shared }
    }

    /// Cancels the timeout. Returns true only for the call that wins, and
    /// then the task never runs; false if it already ran, is running, or
    /// was cancelled before.
    ///
    /// The entry leaves the wheel within one tick, so its memory comes back
    /// long before its deadline. A task implementing
    /// [`TimerTask::cancelled`](crate::TimerTask::cancelled) hears of it on
    /// this thread.
    pub fn cancel(&self) -> bool {
        match self.shared.cancel(&self.entry) {
            Some(task) => {
                task.on_cancel(self);
                true
            }
            None => false,
        }
    }

    /// True if [`cancel`](Timeout::cancel) won.
    pub fn is_cancelled(&self) -> bool {
        self.entry.is_cancelled()
    }

    /// True if the deadline passed and the task was run (or is running).
    pub fn is_expired(&self) -> bool {
        self.entry.is_expired()
    }

    /// True if it was returned by `stop()` without running (and not
    /// cancelled since).
    pub fn is_stopped(&self) -> bool {
        self.entry.is_stopped()
    }

    /// True while it may still fire: neither expired, cancelled nor stopped.
    pub fn is_pending(&self) -> bool {
        self.entry.is_pending()
    }

    /// Takes the task of a timeout that [`stop`](crate::HashedWheelTimer::stop)
    /// returned, so it can be run elsewhere or dropped, as Netty's
    /// `timeout.task()`. `None` for a timeout that is still pending, has
    /// run, was cancelled, or whose task was already taken.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::new();
    /// timer.new_timeout(|_| println!("ran after stop"), Duration::from_secs(60))?;
    /// for t in timer.stop()? {
    ///     if let Some(task) = t.take_task() {
    ///         task.run(&t);
    ///     }
    /// }
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn take_task(&self) -> Option<Box<dyn crate::TimerTask>> {
        if !self.entry.is_stopped() {
            return None;
        }
        match self.entry.take_task()? {
            crate::task::Task::Callback(task) => Some(task),
            crate::task::Task::Wake(_) => None,
        }
    }

    /// The timer this timeout belongs to, Netty's `timeout.timer()`; `None`
    /// once the timer's last handle has been dropped. Use it inside a task
    /// rather than capturing a timer clone, which would keep the timer
    /// alive while the task waits.
    ///
    /// ```
    /// use hashed_wheel_timer::{HashedWheelTimer, Timeout};
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// timer.new_timeout(|t: &Timeout| {
    ///     // Retry once, a second later.
    ///     if let Some(timer) = t.timer() {
    ///         let _ = timer.new_timeout(|_| println!("retrying"), Duration::from_secs(1));
    ///     }
    /// }, Duration::from_secs(1))?;
    /// timer.advance(Duration::from_secs(1));
    /// assert_eq!(timer.pending_timeouts(), 1);
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn timer(&self) -> Option<crate::HashedWheelTimer> {
        self.shared.owner().map(crate::HashedWheelTimer::from_owner)
    }

    /// When it is due, on the timer's clock. A delay too large to represent
    /// saturates to a point centuries away.
    pub fn deadline(&self) -> Instant {
        self.shared.clock.to_instant(self.entry.deadline())
    }
}

impl PartialEq for Timeout {
    /// Two handles are equal if they refer to the same timeout.
    fn eq(&self, other: &Timeout) -> bool {
        Arc::ptr_eq(&self.entry, &other.entry)
    }
}

impl Eq for Timeout {}

impl Hash for Timeout {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.entry).hash(state);
    }
}

impl fmt::Debug for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.is_expired() {
            "expired"
        } else if self.is_cancelled() {
            "cancelled"
        } else if self.is_stopped() {
            "stopped"
        } else {
            "pending"
        };
        f.debug_struct("Timeout")
            .field("state", &state)
            .field("deadline", &self.deadline())
            .finish()
    }
}
