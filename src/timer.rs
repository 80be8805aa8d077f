//! `HashedWheelTimer`: the handle users hold, and its producer API.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::builder::Builder;
use crate::default_timer::DEFAULT;
use crate::engine::entry::{key::Key, task::Task};
use crate::engine::{clock::Nanos, clock::Source, driver::worker, driver::Config, driver::Shared};
use crate::{Timeout, TimerError};

/// A hashed timing wheel with one worker thread, Netty's `HashedWheelTimer`.
///
/// A cheap [`Clone`] handle, `Send + Sync`: share one timer across the whole application. When the
/// last handle is dropped the timer stops and its driver is waited for (not in a timer's task).
///
/// A task that owns a clone of its own timer keeps the timer alive until the task runs or is
/// cancelled (a reference cycle, like an `Arc` cycle). Inside a task, reach the timer through
/// [`Timeout::timer`] instead.
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let timer = HashedWheelTimer::new();
/// let (tx, rx) = mpsc::channel();
/// timer.new_timeout(move |_| tx.send("fired").unwrap(), Duration::from_millis(5))?;
/// assert_eq!(rx.recv().unwrap(), "fired");
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
#[derive(Clone)]
pub struct HashedWheelTimer {
    owner: Arc<Owner>,
}

/// Dropped with the last `HashedWheelTimer` handle; `Timeout`s and the worker hold `Shared` but not
/// this, so they do not keep the timer alive.
pub(crate) struct Owner {
    shared: Arc<Shared>,
    /// A tokio clock's timer for its futures once this one stopped.
    after_stop: OnceLock<HashedWheelTimer>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Never from a task (or thread) of a timer: its own driver cannot wait for itself, and
        // another's may wait for this one. A driver sees the shutdown and exits after this task.
        self.shared
            .shut_down_dropping(Shared::running_here().is_empty());
    }
}

impl Default for HashedWheelTimer {
    fn default() -> HashedWheelTimer {
        HashedWheelTimer::new()
    }
}

impl HashedWheelTimer {
    /// A timer with the defaults: 1 ms ticks, 512 buckets, no pending limit. Its thread starts with
    /// the first timeout.
    pub fn new() -> HashedWheelTimer {
        let config = Builder::default().build();
        config.unwrap_or_else(|_| unreachable!("the default settings are valid"))
    }

    /// Starts configuring a timer; see [`Builder`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn from_config(config: Config, source: Source) -> HashedWheelTimer {
        let owner = Arc::new_cyclic(|weak: &std::sync::Weak<Owner>| {
            let shared = Shared::new(config, source);
            let _ = shared.owner.set(weak.clone());
            Owner {
                shared,
                after_stop: OnceLock::new(),
            }
        });
        if let Some(runtime) = owner.shared.clock.tokio_runtime() {
            worker::spawn_on_tokio(&owner.shared, runtime);
        }
        HashedWheelTimer { owner }
    }

    /// The handle of the timer `shared` belongs to, if it still has one.
    pub(crate) fn of(shared: &Shared) -> Option<HashedWheelTimer> {
        let owner = shared.owner()?.downcast::<Owner>().ok()?;
        Some(HashedWheelTimer { owner })
    }

    /// True if both are handles of the same timer.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    ///
    /// let timer = HashedWheelTimer::new();
    /// assert!(timer.is_same(&timer.clone()));
    /// assert!(!timer.is_same(&HashedWheelTimer::new()));
    /// ```
    pub fn is_same(&self, other: &HashedWheelTimer) -> bool {
        Arc::ptr_eq(&self.owner, &other.owner)
    }

    #[inline(always)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.owner.shared
    }

    #[inline(always)]
    pub(crate) fn now_and_after(&self, delay: Duration) -> (Nanos, Nanos) {
        self.shared().clock.now_and_after(delay)
    }

    pub(crate) fn now_and_at(&self, deadline: Instant) -> (Nanos, Nanos) {
        let clock = &self.shared().clock;
        (clock.now(), clock.to_nanos(deadline))
    }

    /// Schedules `task` at `deadline` as read `now` (see `Shared::schedule`). Inlined: a `Result`
    /// returned through memory stalls its caller's first read of the `Timeout` in it.
    #[inline(always)]
    pub(crate) fn schedule_entry(
        &self,
        (now, deadline): (Nanos, Nanos),
        task: Task,
    ) -> Result<Timeout, TimerError> {
        let key = self.schedule_key(now, deadline, task)?;
        Ok(Timeout::from_parts(key, self.shared()))
    }

    /// [`schedule_entry`](Self::schedule_entry), for a caller that keeps the entry's key and gives
    /// back its reference: a `Sleep`, a delay queue's slot.
    #[inline(always)]
    pub(crate) fn schedule_key(
        &self,
        now: u64,
        deadline: u64,
        task: Task,
    ) -> Result<Key, TimerError> {
        let shared = self.shared();
        if shared.clock.is_real() {
            #[cfg(test)] // a test's stand-in for a thread the system will not start
            if shared.config.thread_name == tests::UNSPAWNABLE {
                return Err(TimerError::WorkerSpawn("refused for a test".to_owned()));
            }
            worker::ensure_started(shared)?; // a manual or tokio clock has no thread
        }
        Ok(shared.schedule(now, deadline, task)?)
    }

    /// Timeouts scheduled that have not yet expired, been cancelled, or been returned by `stop()`.
    /// Each timeout leaves this count exactly once. A periodic task counts as one for its whole
    /// life, runs included, until it is cancelled, ended by a panic, or stopped.
    pub fn pending_timeouts(&self) -> usize {
        self.shared().totals().pending
    }

    /// Stops the timer: ends and joins the worker, and returns by deadline every timeout that
    /// neither expired nor was cancelled; those never fire, and report [`Timeout::is_stopped`].
    /// Afterwards `pending_timeouts()` is 0, new timeouts get [`TimerError::Shutdown`], and another
    /// call returns an empty `Vec`.
    ///
    /// A task already running finishes, and no other starts: the worker (or a manual
    /// [`advance`](Self::advance) on another thread) looks for the shutdown between two tasks, and
    /// `stop` waits for it. Timeouts of the same tick not started are returned, and so are tasks
    /// handed to an [`Executor`](crate::Executor) whose job has not started (it will not run them).
    /// Each timeout has then fired, been cancelled, or been returned by exactly one `stop` call; of
    /// two calls at once, the second returns what the first left. A periodic task whose run is in
    /// progress is not returned: that run finishes (`stop` waits for it on the worker, not on an
    /// executor), and the task ends [`is_stopped`](Timeout::is_stopped), no longer pending.
    ///
    /// Pending futures are woken, not returned, and neither hang nor spin: see
    /// [`Sleep`](crate::Sleep#when-the-timer-stops).
    ///
    /// # Errors
    ///
    /// [`TimerError::StopFromTimerTask`] if called from a task running on this timer, or from its
    /// driver (a task's drop), which it would wait on. [`TimerError::StopWouldDeadlock`] if called
    /// from a task of another timer whose driver this one's waits for, through `stop()` or
    /// [`advance`](Self::advance) calls in their tasks (timers whose tasks stop each other).
    /// [`TimerError::StopDefaultTimer`] on the process-wide
    /// [`default_timer`](crate::default_timer), which keeps running.
    ///
    /// # Examples
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::new();
    /// let t = timer.new_timeout(|_| {}, Duration::from_secs(3600))?;
    /// let never_ran = timer.stop()?;
    /// assert_eq!(never_ran, vec![t]);
    /// assert!(timer.new_timeout(|_| {}, Duration::ZERO).unwrap_err().is_shutdown());
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn stop(&self) -> Result<Vec<Timeout>, TimerError> {
        let shared = self.shared();
        if shared.in_own_task() {
            return Err(TimerError::StopFromTimerTask);
        }
        if DEFAULT.get().is_some_and(|default| default.is_same(self)) {
            return Err(TimerError::StopDefaultTimer);
        }
        let Some(_waiting) = shared.wait_for_driver() else {
            return Err(TimerError::StopWouldDeadlock);
        };
        let timeout = |key| Timeout::from_parts(key, shared);
        Ok(shared.shut_down(true).into_iter().map(timeout).collect())
    }

    /// Where this timer's futures wait out their time once it stopped (`Sleep`'s "When the timer
    /// stops"): the default timer, or for a clock that can be paused one made on its runtime.
    pub(crate) fn after_stop(&self) -> &HashedWheelTimer {
        let clock = &self.shared().clock;
        let Some(runtime) = clock.tokio_runtime().filter(|_| !clock.reads_real_time()) else {
            return crate::default_timer();
        };
        self.owner.after_stop.get_or_init(|| {
            let _entered = runtime.enter();
            let timer = HashedWheelTimer::builder().tokio_clock().build();
            timer.unwrap_or_else(|_| unreachable!("built inside its runtime"))
        })
    }

    /// True once [`stop`](Self::stop) has been called.
    pub fn is_shutdown(&self) -> bool {
        self.shared().is_shutdown()
    }

    /// Manual clock only: moves time forward by `by` and, before returning, fires on this thread
    /// every timeout due by then, tick by tick, [`now`](Self::now) reading each tick's time during
    /// its callbacks. A periodic task runs once for each run due by then: with one pending, a huge
    /// `by` (`Duration::MAX`: the clock's end, 73 years on) in effect never returns.
    ///
    /// From a task this `advance` runs, it stands for a task that takes `by` to run: the clock
    /// moves on by `by` at once, and the running `advance` goes on to the later time, firing what
    /// fell due meanwhile late (a periodic task doing this on every run never lets it end). From a
    /// job on an [`Executor`](crate::Executor) thread it is an ordinary `advance`, but as from a
    /// task if an `advance` of this timer runs meanwhile (which may wait for the job); and so from
    /// a task of another timer whose driver waits for this one's, through `advance` or `stop()`
    /// calls in tasks (timers whose tasks advance each other), where waiting would deadlock.
    ///
    /// On a timer with a real clock it does nothing but log a warning. (Example:
    /// [`Sleep`](crate::Sleep).)
    pub fn advance(&self, by: Duration) {
        self.shared().advance(by);
    }

    /// Manual clock only: advances to the end of the next tick in which a pending timeout is due,
    /// fires what is due there, and returns how far time moved: a test need not guess durations.
    /// `None`, with time unmoved, when nothing pending can fire (nothing pending, or only deadlines
    /// too far to represent), after [`stop`](Self::stop), and on a real or tokio clock.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// let timer = HashedWheelTimer::builder().manual_clock().build()?;
    /// let retry = timer.new_timeout(|_| {}, Duration::from_millis(1500))?;
    /// let idle = timer.new_timeout(|_| {}, Duration::from_secs(30))?;
    /// assert_eq!(timer.advance_to_next(), Some(Duration::from_millis(1500)));
    /// assert!(retry.is_expired() && !idle.is_expired());
    /// assert_eq!(timer.advance_to_next(), Some(Duration::from_millis(28_500)));
    /// assert_eq!(timer.advance_to_next(), None, "nothing left");
    /// # Ok::<(), hashed_wheel_timer::TimerError>(())
    /// ```
    pub fn advance_to_next(&self) -> Option<Duration> {
        self.shared().advance_to_next()
    }

    /// The timer's current time: real time, or the manual clock's.
    pub fn now(&self) -> Instant {
        let clock = &self.shared().clock;
        clock.to_instant(clock.now())
    }

    /// The length of one tick.
    pub fn tick_duration(&self) -> Duration {
        Duration::from_nanos(self.shared().config.tick_nanos)
    }

    /// Buckets per wheel round (a power of two).
    pub fn ticks_per_wheel(&self) -> usize {
        self.shared().config.ticks_per_wheel
    }

    /// True if this timer uses a manual clock.
    pub fn is_manual_clock(&self) -> bool {
        self.shared().clock.is_manual()
    }
}

impl fmt::Debug for HashedWheelTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashedWheelTimer")
            .field("tick_duration", &self.tick_duration())
            .field("ticks_per_wheel", &self.ticks_per_wheel())
            .field("pending_timeouts", &self.pending_timeouts())
            .field("manual_clock", &self.is_manual_clock())
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine_tests::worker::eventually;

    /// A timer of this thread name gets `WorkerSpawn` when its thread would start.
    pub(crate) const UNSPAWNABLE: &str = "unspawnable";

    /// Entries filed in the wheel (not those still in the intake).
    pub(crate) fn in_wheel(timer: &HashedWheelTimer) -> usize {
        timer.shared().lock_core().wheel.len(&timer.shared().slots)
    }

    pub(crate) const MS: Duration = Duration::from_millis(1);
    /// Long enough for the driver to file a far timeout: a `HOLD` and a `BATCH` (`intake/lane.rs`).
    pub(crate) const PAST_THE_HOLD: Duration = crate::engine::intake::lane::HOLD.saturating_add(
        Duration::from_nanos(crate::engine::intake::lane::BATCH_NANOS),
    );
    const RING: usize = 1 << crate::engine::intake::lane::RING_BITS;

    /// The hold (`intake/lane.rs`): a far timeout waits in its lane until it is `HOLD` old, so a
    /// cancel meanwhile never involves the driver: it withdraws the timeout, which its last handle
    /// frees. A near one waits there until due.
    #[test]
    fn a_far_timeout_waits_in_its_lane_and_a_withdrawn_one_is_freed_by_its_last_handle() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        // A cancel from another thread withdraws too.
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| assert!(t.cancel()));
        });
        drop(t);
        assert_eq!(timer.shared().live(), 0, "freed with no tick");
        assert_eq!(timer.shared().intake.len(), 1, "a withdrawn cell");
        timer.advance(PAST_THE_HOLD);
        assert_eq!(timer.shared().intake.len(), 0);
        assert_eq!(in_wheel(&timer), 0);
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        let other = t.clone();
        assert!(t.cancel(), "withdrawn from the lane");
        drop(t);
        assert_eq!(timer.shared().live(), 1, "a handle still names it");
        assert!(other.is_cancelled() && !other.is_expired());
        drop(other);
        assert_eq!(timer.shared().live(), 0, "the last handle freed it");
        let far = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        let young = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        timer.advance(MS * 10);
        assert_eq!(in_wheel(&timer), 0, "both held");
        assert!(young.cancel(), "withdrawn from the lane");
        drop(young);
        assert_eq!(timer.shared().live(), 1, "its slot is back at once");
        timer.advance(crate::engine::intake::lane::HOLD - MS * 11);
        assert_eq!(in_wheel(&timer), 0, "held a hold at least");
        timer.advance(PAST_THE_HOLD - crate::engine::intake::lane::HOLD + MS);
        assert_eq!(in_wheel(&timer), 1, "filed by a hold and a batch");
        assert!(far.cancel());

        let held = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        let near = timer.new_timeout(|_| {}, MS * 5).unwrap();
        timer.advance(MS * 4);
        assert_eq!(in_wheel(&timer), 0, "both held, the near one until due");
        timer.advance(MS);
        assert!(near.is_expired() && held.cancel() && in_wheel(&timer) == 0);
        let fine = HashedWheelTimer::builder()
            .manual_clock()
            .tick_duration(MS / 10);
        let fine = fine.build().unwrap();
        let far = fine.new_timeout(|_| {}, MS * 1000).unwrap();
        fine.advance(crate::engine::intake::lane::HOLD - MS);
        assert_eq!(in_wheel(&fine), 0, "held a hold at 0.1 ms too");
        fine.advance(PAST_THE_HOLD - crate::engine::intake::lane::HOLD + MS);
        assert!(in_wheel(&fine) == 1 && far.cancel());
    }

    /// A driver turning on a thread with a lane (`advance`; on a runtime, a worker) frees slots to
    /// that lane, for the thread's next schedule, not to the shared free list.
    #[test]
    fn a_slot_the_driver_frees_goes_to_the_lane_of_the_thread_it_turns_on() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let t = timer.new_timeout(|_| {}, MS * 1000).unwrap();
        timer.advance(PAST_THE_HOLD); // filed
        let free_here = || timer.shared().intake.lane_if_made().unwrap().free_len();
        let (before, key) = (free_here(), t.key());
        assert!(in_wheel(&timer) == 1 && t.cancel());
        drop(t);
        timer.advance(MS); // the driver takes it out and frees it
        let freed_here = free_here() - before;
        assert_eq!((in_wheel(&timer), freed_here), (0, 1), "on this lane");
        let reused = timer.new_timeout(|_| {}, MS).unwrap().key();
        assert_eq!(reused, key, "reused first");
    }

    #[test]
    fn a_full_ring_files_its_oldest_half_and_a_cancelled_entry_gives_its_slot_back_in_a_tick() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let idle = |delay| timer.new_timeout(|_| {}, delay).unwrap();
        let ts: Vec<_> = (0..RING + 10).map(|_| idle(MS * 1000)).collect();
        assert_eq!(in_wheel(&timer), RING / 2, "no driver ran");
        assert_eq!(timer.shared().intake.len(), RING / 2 + 10);
        timer.advance(MS * 1000);
        assert!(ts.iter().all(Timeout::is_expired), "none lost");
        drop(ts);
        // Timeouts cancelled young never fill it: no worker drains this
        // lane, so its owner must make room itself.
        for _ in 0..3 * RING {
            assert!(idle(Duration::from_secs(60)).cancel());
        }
        let queued = timer.shared().intake.len();
        assert!(queued < RING, "{queued} cells still queued");
        assert_eq!(timer.shared().live(), 0, "every slot came back");
        let after = idle(MS);
        timer.advance(MS);
        assert!(after.is_expired(), "a key after the reclaimed cells fires");
        drop(after);
        let live = || timer.shared().live();
        let mut ts: Vec<_> = (0..100).map(|i| idle(MS * (1000 + i))).collect();
        timer.advance(PAST_THE_HOLD);
        assert_eq!(in_wheel(&timer), 100);
        // Cancelled in a bucket (those cancelled while queued are freed at once: above).
        ts.drain(..60).for_each(|t| assert!(t.cancel()));
        timer.advance(MS);
        assert_eq!(in_wheel(&timer), 40, "removed at the next tick, not at 1 s");
        assert_eq!(live(), 40, "freed within a tick of the cancel");
        timer.advance(MS * 2000);
        assert!(ts.iter().all(Timeout::is_expired));
        assert_eq!(live(), 40, "a fired entry is kept while a handle names it");
        drop(ts);
        assert_eq!(live(), 0);
        // Stopped ones come back when their handles go.
        drop(idle(MS));
        let stopped = timer.stop().unwrap();
        assert_eq!((stopped.len(), live()), (1, 1));
        drop(stopped);
        assert_eq!(live(), 0);
    }

    #[test]
    fn the_sleeping_worker_removes_cancelled_entries() {
        let timer = HashedWheelTimer::new();
        let idle = |delay| timer.new_timeout(|_| {}, delay).unwrap();
        let keep = idle(Duration::from_secs(600));
        // Each deadline earlier than the last, so each wakes the worker.
        let ts: Vec<_> = (0..1000).map(|i| idle(MS * (300_000 - i))).collect();
        // Each is filed once a hold old (`intake/lane.rs`).
        assert!(eventually(|| in_wheel(&timer) == 1001), "filed");
        ts.iter().for_each(|t| assert!(t.cancel()));
        let removed = eventually(|| in_wheel(&timer) == 1);
        assert!(removed, "the worker woke to remove them");
        drop(ts);
        // Entries cancelled while queued, due after its planned wake-up (no
        // unpark), are freed as it sleeps: a cancel withdraws its entry from
        // this thread's lane, or, if the worker took it, asks for housekeeping.
        for _ in 0..10_000 {
            assert!(idle(Duration::from_secs(900)).cancel());
        }
        assert!(eventually(|| timer.shared().live() == 1), "all freed");
        assert_eq!(in_wheel(&timer), 1);
        assert!(keep.cancel());
    }
}
