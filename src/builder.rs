//! `Builder`: every setting of a timer, checked in one place.

use std::time::Duration;

use crate::engine::{clock::Source, clock::NEVER, driver::Config, entry::task::Handoff};
use crate::{Executor, HashedWheelTimer, TimerError};

/// The largest `ticks_per_wheel` accepted: 2^20 buckets, 8 MiB of them. A wheel's buckets are
/// allocated whole when it is built, and a bigger one buys nothing: deadlines past one round wait
/// in an ordered map of later rounds, which costs only what it holds. (Netty allows 2^30, which
/// here would take 8 GiB.) At a 1 ms tick, one round is about 17 minutes.
pub const MAX_TICKS_PER_WHEEL: usize = 1 << 20;

/// Configures a [`HashedWheelTimer`]; made by [`HashedWheelTimer::builder`]. Each setting's default
/// is on its method (the README's "Settings and errors" has them in one table).
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
///
/// let timer = HashedWheelTimer::builder()
///     .tick_duration(Duration::from_millis(10))
///     .ticks_per_wheel(512)
///     .max_pending_timeouts(100_000)
///     .thread_name("rpc-timer")
///     .build()?;
/// assert_eq!(timer.tick_duration(), Duration::from_millis(10));
///
/// let err = HashedWheelTimer::builder().tick_duration(Duration::ZERO).build().unwrap_err();
/// assert!(err.to_string().contains("tick_duration"));
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until .build() is called"]
pub struct Builder {
    tick_duration: Duration,
    ticks_per_wheel: usize,
    max_pending_timeouts: Option<usize>,
    thread_name: String,
    manual_clock: bool,
    tokio_clock: bool,
    executor: Option<Handoff>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            tick_duration: Duration::from_millis(1),
            ticks_per_wheel: 512,
            max_pending_timeouts: None,
            thread_name: "hashed-wheel-timer".to_owned(),
            manual_clock: false,
            tokio_clock: false,
            executor: None,
        }
    }
}

impl Builder {
    /// The length of one tick. Default 1 ms, the resolution sleep-like code wants; Netty's default,
    /// 100 ms, batches more fires per wake-up.
    ///
    /// A tick under 1 ms is honoured, not clamped: the worker only wakes for ticks that have work,
    /// so a short tick costs nothing while idle. How precisely it wakes then depends on the OS
    /// (tens of microseconds on Linux).
    pub fn tick_duration(mut self, tick: Duration) -> Builder {
        self.tick_duration = tick;
        self
    }

    /// Buckets per wheel round. Default 512; rounded up to a power of two; at most
    /// [`MAX_TICKS_PER_WHEEL`] (2^20), or `build` fails with [`TimerError::TooManyTicksPerWheel`].
    pub fn ticks_per_wheel(mut self, ticks: usize) -> Builder {
        self.ticks_per_wheel = ticks;
        self
    }

    /// Refuse new timeouts while this many are pending. Default: no limit.
    ///
    /// Every pending timeout counts: callbacks, periodic tasks, delay queue items, and the entries
    /// of futures (`Sleep`, `timeout`, `Interval`). Only the first three are refused, with
    /// [`TimerError::AtCapacity`]: a future has no error to give and must
    /// not end early, so it is filed past the limit, bounded by the tasks that hold it.
    pub fn max_pending_timeouts(mut self, max: usize) -> Builder {
        self.max_pending_timeouts = Some(max);
        self
    }

    /// The worker thread's name. Default `"hashed-wheel-timer"`.
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = name.into();
        self
    }

    /// Use a manual clock: the timer has no thread, and time moves only when
    /// [`HashedWheelTimer::advance`] is called, which fires what is due on the calling thread. For
    /// exact, never-flaky tests. Take deadlines from [`HashedWheelTimer::now`], not
    /// `Instant::now()`.
    ///
    /// With [`tokio_clock`](Builder::tokio_clock) too, `build` fails with
    /// [`TimerError::ClockConflict`].
    pub fn manual_clock(mut self) -> Builder {
        self.manual_clock = true;
        self
    }

    /// Use the clock of the tokio runtime that `build` is called in, and drive the wheel from a
    /// task on that runtime instead of a thread.
    ///
    /// The timer reads `tokio::time::Instant`, so a paused runtime moves it exactly as it moves
    /// `tokio::time`: `#[tokio::test(start_paused = true)]`, `tokio::time::advance` and
    /// auto-advance fire what comes due. Its futures, callbacks, [`now`](HashedWheelTimer::now) and
    /// [`Timeout::remaining`](crate::Timeout::remaining) all follow that clock; take deadlines from
    /// it ([which to use](crate#deadlines)). [`advance`](HashedWheelTimer::advance) does nothing:
    /// use `tokio::time::advance`.
    ///
    /// It also suits production code that wants no extra thread, and costs less for futures in
    /// tasks (see [`set_global_default`](crate::set_global_default)). Its timeouts fire where tokio
    /// fires its own sleeps, at tokio's first millisecond after each deadline (never early).
    ///
    /// Callbacks run on the driver task, so a slow one delays its runtime thread as well as later
    /// timeouts: give heavy ones an [`executor`](Builder::executor). The timer shuts down with its
    /// runtime, and fires late (never early) while every worker, or the one whose LIFO slot holds
    /// its woken driver task, is blocked: see the README's "When a worker is stuck".
    ///
    /// `build` fails with [`TimerError::NoTokioRuntime`] outside a runtime,
    /// [`TimerError::TokioTimeDisabled`] in one built without `enable_time()`, and
    /// [`TimerError::ClockConflict`] with [`manual_clock`](Builder::manual_clock) too.
    ///
    /// ```
    /// use hashed_wheel_timer::HashedWheelTimer;
    /// use std::time::Duration;
    ///
    /// #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// async fn run() {
    ///     let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    ///     let start = tokio::time::Instant::now();
    ///     timer.sleep(Duration::from_secs(3600)).await; // no real hour
    ///     assert!(tokio::time::Instant::now() - start >= Duration::from_secs(3600));
    /// }
    /// # run();
    /// # assert!(HashedWheelTimer::builder().tokio_clock().build().is_err());
    /// ```
    pub fn tokio_clock(mut self) -> Builder {
        self.tokio_clock = true;
        self
    }

    /// Runs callbacks on `executor` instead of the worker thread (Netty's `taskExecutor`), so a
    /// slow callback no longer delays the ticks. See [`Executor`] for what a job guarantees, and
    /// [`TokioExecutor`](crate::TokioExecutor) for a tokio runtime. Default:
    /// callbacks run on the worker (or, on a manual clock, on the thread calling
    /// [`advance`](HashedWheelTimer::advance)).
    ///
    /// Future wakers are woken on the worker either way.
    pub fn executor(mut self, executor: impl Executor) -> Builder {
        self.executor = Some(Handoff::new(move |job| executor.execute(job)));
        self
    }

    /// Checks the settings and makes the timer.
    ///
    /// # Errors
    ///
    /// A zero tick, zero or more than 2^20 ticks per wheel, a wheel turn of 2^61 ns (73 years) or more, a
    /// zero `max_pending_timeouts`, or a thread name with a NUL byte: each gets its own
    /// [`TimerError`] naming the value.
    pub fn build(self) -> Result<HashedWheelTimer, TimerError> {
        let tick = self.tick_duration;
        if tick.is_zero() {
            return Err(TimerError::ZeroTickDuration(tick));
        }
        let ticks_per_wheel = match self.ticks_per_wheel {
            0 => return Err(TimerError::ZeroTicksPerWheel),
            n if n > MAX_TICKS_PER_WHEEL => return Err(TimerError::TooManyTicksPerWheel(n)),
            n => n.next_power_of_two(),
        };
        // A turn ends before the end of time, so even the first tick's deadlines can come.
        let turn = tick.checked_mul(ticks_per_wheel as u32); // at most 2^20 ticks
        if turn.is_none_or(|turn| turn.as_nanos() >= u128::from(NEVER)) {
            return Err(TimerError::WheelDurationOverflow {
                tick,
                ticks_per_wheel,
            });
        }
        let tick_nanos = tick.as_nanos() as u64; // less than a turn
        if self.max_pending_timeouts == Some(0) {
            return Err(TimerError::ZeroMaxPendingTimeouts);
        }
        if self.thread_name.contains('\0') {
            return Err(TimerError::InvalidThreadName(self.thread_name));
        }
        let source = match (self.manual_clock, self.tokio_clock) {
            (false, false) => Source::Real,
            (true, false) => Source::Manual,
            (false, true) => Source::Tokio(tokio_runtime()?),
            (true, true) => return Err(TimerError::ClockConflict),
        };
        let config = Config {
            executor: self.executor,
            tick_nanos,
            ticks_per_wheel,
            max_pending: self.max_pending_timeouts,
            #[cfg(feature = "metrics")]
            publish: Box::new(crate::publish::Publisher::new(&self.thread_name)),
            thread_name: self.thread_name,
        };
        Ok(HashedWheelTimer::from_config(config, source))
    }
}

/// The runtime `tokio_clock` runs on: the current one, with its time driver.
fn tokio_runtime() -> Result<tokio::runtime::Handle, TimerError> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| TimerError::NoTokioRuntime)?;
    // tokio has no query for its time driver: making a sleep without one
    // panics, here rather than in the driver task.
    let probe = std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO)));
    probe.map_err(|_| TimerError::TokioTimeDisabled)?;
    Ok(handle)
}
