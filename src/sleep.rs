//! `Sleep`: a future that completes at a deadline, backed by one wheel
//! entry (the waker protocol is the entry's: `Entry::wait_with`).

use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use std::{fmt, future::Future, pin::Pin};

use crate::engine::{clock::saturating_nanos, clock::Nanos, entry::key::Key, entry::task::Task};
use crate::{HashedWheelTimer, TimerError};

/// A future that completes once its deadline has passed on its timer's clock; made by
/// [`HashedWheelTimer::sleep`] and [`sleep_until`](HashedWheelTimer::sleep_until), like
/// `tokio::time::Sleep`.
///
/// It takes a place in the wheel only when first polled and pending, as in tokio: a `Sleep` never
/// polled, or already due when polled, costs no entry. From then it counts in
/// [`pending_timeouts`](HashedWheelTimer::pending_timeouts) until it fires or is dropped. It fires
/// at the end of the tick its deadline falls in (on a tokio clock, when tokio wakes the driver
/// after it): never early, at most one tick late.
///
/// On real time, only a first poll reads the clock (to file its entry): a `Sleep` polled after its
/// deadline but before the driver's next turn is pending, and that turn (a tick later at most)
/// wakes it. On a manual or paused clock every poll reads the clock: what `advance` made due is
/// ready at the next poll.
///
/// It is [`Unpin`], so unlike tokio's it needs no pinning to be polled by reference (`(&mut
/// sleep).await`, `select!`), and it keeps its timer alive. Any executor can poll it, or none: the
/// timer's thread wakes it.
///
/// # Cancellation
///
/// Dropping a `Sleep` cancels it. The cancel may wait in its thread's batch of 16, which the
/// timer's next turn takes before it fires anything; `pending_timeouts()`, `stats()`, `stop()` and
/// a schedule refused at `max_pending_timeouts` take the batches first, so they see it cancelled
/// at once: its place under the limit is free. Until then (64 ms at most) its entry keeps the
/// task's waker.
///
/// # When the timer stops
///
/// A `Sleep` neither hangs, spins, panics (as tokio's would) nor ends early on a stopped timer:
/// [`stop`](HashedWheelTimer::stop) wakes every pending one, and it (like one first polled
/// afterwards) waits out the time it had left on the process-wide
/// [`default_timer`](crate::default_timer), which cannot stop. A
/// [`tokio_clock`](crate::Builder::tokio_clock) timer on a current-thread runtime, whose clock can
/// be paused, hands them to a timer of its own on its runtime instead, so they keep to that clock;
/// if that runtime is gone (its clock can never move again), they end at once. One whose timer's
/// thread could not start (the error `new_timeout` returns as [`TimerError::WorkerSpawn`]) waits
/// on the default timer too, and if that one's cannot start either, tries again at each poll
/// (woken at once), never ending early. A loop that must end
/// on a stop checks [`is_shutdown`](HashedWheelTimer::is_shutdown), or uses
/// [`Interval::try_tick`](crate::Interval::try_tick). One warning says so the first time (see the
/// README's "Warnings").
///
/// # Examples
///
/// On a manual clock:
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
/// use tokio_test::{assert_pending, assert_ready, task};
///
/// let timer = HashedWheelTimer::builder().manual_clock().build()?;
/// let mut sleep = task::spawn(timer.sleep(Duration::from_millis(5)));
/// assert_pending!(sleep.poll());
/// timer.advance(Duration::from_millis(4));
/// assert_pending!(sleep.poll());
/// timer.advance(Duration::from_millis(1));
/// assert!(sleep.is_woken());
/// assert_ready!(sleep.poll());
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
#[must_use = "futures do nothing unless you .await or poll them"]
pub struct Sleep {
    pub(crate) timer: HashedWheelTimer,
    deadline: Instant,
    /// `deadline` on the timer's clock.
    deadline_nanos: Nanos,
    /// The entry holding our waker, or spent. Holds one of its references.
    entry: Option<Key>,
    /// The waker our entry holds, once a poll has looked at the entry; only while the entry is due
    /// at `deadline_nanos` (a reset that could not move it takes it away).
    registered: Option<Waker>,
    /// `move_after_stop` ran.
    moved: bool,
}

impl HashedWheelTimer {
    /// A future that completes `duration` from now, on this timer; see [`Sleep`]. A duration too
    /// large to represent saturates at the end of the timer's time, about 73 years on: real time
    /// never gets there; a paused tokio clock moved there completes it, as it completes
    /// `tokio::time::sleep(Duration::MAX)`; on a manual clock it never completes, as a saturated
    /// callback never runs there.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::new();
    /// futures::executor::block_on(timer.sleep(Duration::from_millis(2)));
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let clock = &self.shared().clock;
        let nanos = clock.deadline_after(duration);
        Sleep::new(self.clone(), clock.to_instant(nanos), nanos)
    }

    /// A future that completes at `deadline` on this timer's clock ([which
    /// `Instant`](crate#deadlines)); at once if it has passed.
    pub fn sleep_until(&self, deadline: impl Into<Instant>) -> Sleep {
        let deadline = deadline.into();
        let nanos = self.shared().clock.to_nanos(deadline);
        Sleep::new(self.clone(), deadline, nanos)
    }
}

impl Sleep {
    fn new(timer: HashedWheelTimer, deadline: Instant, deadline_nanos: Nanos) -> Sleep {
        Sleep {
            timer,
            deadline,
            deadline_nanos,
            entry: None,
            registered: None,
            moved: false,
        }
    }

    /// The timer that holds our entry, and on whose clock `deadline_nanos` is: ours, or its
    /// `after_stop` timer once ours stopped.
    fn home(&self) -> &HashedWheelTimer {
        if self.moved {
            self.timer.after_stop()
        } else {
            &self.timer
        }
    }

    /// Replaces the entry, giving up our reference to the old one.
    fn set_entry(&mut self, entry: Option<Key>) {
        if let Some(old) = std::mem::replace(&mut self.entry, entry) {
            self.home().shared().release(old, 1);
        }
    }

    /// Our timer stopped (or its thread could not start) before the deadline: the wait goes on on
    /// its `after_stop` timer, for the time that was left on ours.
    #[cold]
    fn move_after_stop(&mut self) {
        self.set_entry(None);
        let clock = &self.timer.shared().clock;
        let left = self.deadline_nanos.saturating_sub(clock.now());
        self.moved = true;
        let home = &self.home().shared().clock;
        self.deadline_nanos = home.deadline_after(Duration::from_nanos(left));
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            crate::engine::notice::warn(format_args!(
                "a Sleep, timeout or Interval of a stopped timer, or of one whose thread could \
                 not start, now waits out its deadline on the default timer, or on its tokio \
                 runtime's clock (said once per process)"
            ));
        }
    }

    /// `deadline` as `deadline_nanos`: on our timer's clock; once moved, on the `after_stop`
    /// timer's: read off it where both clocks read the same time (a shift from the last deadline
    /// would carry a saturation, at that clock's start); from a manual one, shifted as the move
    /// shifted it.
    fn nanos_of(&self, deadline: Instant) -> Nanos {
        // Not moved, `home()` is our timer.
        if !self.moved || !self.timer.shared().clock.is_manual() {
            return self.home().shared().clock.to_nanos(deadline);
        }
        match deadline.checked_duration_since(self.deadline) {
            Some(later) => self.deadline_nanos.saturating_add(saturating_nanos(later)),
            None => self
                .deadline_nanos
                .saturating_sub(saturating_nanos(self.deadline - deadline)),
        }
    }

    /// The instant it completes at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True once the deadline has passed on the timer's clock, whether or not the future has been
    /// polled since. After the timer stopped, on the clock where the wait went on (see "When the
    /// timer stops").
    pub fn is_elapsed(&self) -> bool {
        let clock = &self.home().shared().clock;
        clock.has_come(self.deadline_nanos, clock.now())
    }

    /// Moves the deadline ([which `Instant`](crate#deadlines)), earlier or later, even after
    /// completion: the `Sleep` is then pending again until the new deadline.
    ///
    /// An earlier deadline moves the entry in place, as [`Timeout::reset`](crate::Timeout::reset)
    /// does, with no poll needed; a past one wakes the task at once, with no entry. A later one (an
    /// idle timeout reset per message) reads no clock and swaps the entry's deadline, one
    /// compare-and-swap as in tokio; the timer files the entry again when its older deadline
    /// comes, so the task is never woken before its deadline.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    /// use tokio_test::{assert_pending, assert_ready, task};
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let mut sleep = task::spawn(timer.sleep(Duration::from_millis(10)));
    /// assert_pending!(sleep.poll());
    /// sleep.reset(timer.now() + Duration::from_millis(3));
    /// timer.advance(Duration::from_millis(3));
    /// assert!(sleep.is_woken());
    /// assert_ready!(sleep.poll());
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn reset(&mut self, deadline: impl Into<Instant>) {
        let deadline = deadline.into();
        let earlier = deadline < self.deadline;
        self.deadline_nanos = self.nanos_of(deadline);
        self.deadline = deadline;
        let Some(key) = self.entry else {
            return;
        };
        let shared = self.home().shared();
        // A later deadline reads no clock: one swap of the entry's word, as tokio's.
        if !earlier || self.deadline_nanos > shared.clock.now() {
            // The timer's one reset. If it cannot move the entry, it fired or the timer
            // stopped: the task was woken, and its next poll files a new entry or completes.
            if !shared.reset(key, self.deadline_nanos) {
                self.registered = None; // due at the old deadline: the next poll asks it
            }
            return;
        }
        // Due already: no tick to wait for. A cancel lost to the driver or
        // to `stop()` means the task was woken already.
        let cancelled = shared.cancel(key, 1);
        self.entry = None;
        if let Some(Task::Wake(Some(waker))) = cancelled {
            waker.wake();
        }
    }

    /// Polls for the deadline: `Ok` once it has passed, `Err(Shutdown)` once it has passed after
    /// our timer stopped and the wait moved to the `after_stop` timer, or at once if that one
    /// stopped too (its tokio runtime is gone). When it reads the clock: see the type's docs.
    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TimerError>> {
        // Moved: `Shutdown` if our timer stopped, not if its thread could not start.
        let done = (!self.moved || !self.timer.is_shutdown())
            .then_some(())
            .ok_or(TimerError::Shutdown);
        let shared = self.home().shared();
        let clock = &shared.clock;
        if let Some(key) = self.entry {
            if !clock.reads_real_time() && clock.has_come(self.deadline_nanos, clock.now()) {
                return Poll::Ready(done);
            }
            // Our entry holds a waker of this task and will wake it.
            let registered = matches!(&self.registered, Some(w) if w.will_wake(cx.waker()));
            if registered && shared.surely_pending(self.deadline_nanos) {
                return Poll::Pending;
            }
            if shared.entry(key).wait_with(cx.waker()) {
                if !registered {
                    self.registered = Some(cx.waker().clone());
                }
                return Poll::Pending;
            }
            // Spent: it fired (maybe just now), or the timer stopped. Only
            // a deadline still ahead (a reset since) needs a new entry.
        }
        // One reading for "elapsed?" and, if not, the push.
        let now = clock.now();
        if clock.has_come(self.deadline_nanos, now) {
            return Poll::Ready(done);
        }
        let task = Task::Wake(Some(cx.waker().clone()));
        match self.home().schedule_key(now, self.deadline_nanos, task) {
            Ok(key) => {
                self.set_entry(Some(key));
                self.registered = self.registered.take().filter(|w| w.will_wake(cx.waker()));
                Poll::Pending
            }
            Err(TimerError::Shutdown | TimerError::WorkerSpawn(_)) if !self.moved => {
                self.move_after_stop();
                self.poll_elapsed(cx)
            }
            Err(TimerError::Shutdown) => {
                self.set_entry(None);
                Poll::Ready(Err(TimerError::Shutdown))
            }
            Err(error) => {
                // The default timer's thread could not start either, or the timer holds 2^28
                // entries: yield and retry rather than end early or hang. Said once.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    let what = format_args!("a Sleep could not be scheduled ({error}); it retries");
                    crate::engine::notice::warn(what);
                });
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_elapsed(cx).map(|_| ())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.entry.take() {
            self.home().shared().cancel_later(key);
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("registered", &self.entry.is_some())
            .finish()
    }
}

#[cfg(test)]
#[path = "sleep_tests.rs"]
mod tests;
