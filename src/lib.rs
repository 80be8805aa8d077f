//! A Netty-style hashed timing wheel for tokio code and plain threads.
//!
//! One worker thread per timer turns a wheel of 512 buckets. Any thread hands it work with
//! [`HashedWheelTimer::new_timeout`]: the call pushes onto a lock-free queue and returns a
//! [`Timeout`] you can cancel. The worker files new timeouts into buckets and fires what is due.
//!
//! ```
//! use hashed_wheel_timer::HashedWheelTimer;
//! use std::time::Duration;
//!
//! let timer = HashedWheelTimer::new();
//! let t = timer.new_timeout(|_| println!("request 42 timed out"), Duration::from_secs(5))?;
//! // ... the response arrives:
//! assert!(t.cancel());
//! # Ok::<(), hashed_wheel_timer::TimerError>(())
//! ```
//!
//! # Async: sleep, timeout, interval
//!
//! The futures feel like `tokio::time`'s, and run on the wheel:
//! [`HashedWheelTimer::sleep`] and [`sleep_until`](HashedWheelTimer::sleep_until) give a [`Sleep`],
//! [`timeout`](HashedWheelTimer::timeout) a [`TimeoutFuture`] that fails with [`Elapsed`], and
//! [`interval`](HashedWheelTimer::interval) an [`Interval`] with tokio's [`MissedTickBehavior`].
//! The free functions [`sleep`], [`timeout`], [`interval`], [`new_timeout`] and friends use a
//! process-wide [`default_timer`].
//!
//! ```
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hashed_wheel_timer::TimerError> {
//! hashed_wheel_timer::sleep(Duration::from_millis(5)).await;
//!
//! let slow = hashed_wheel_timer::sleep(Duration::from_secs(10));
//! let result = hashed_wheel_timer::timeout(Duration::from_millis(5), slow).await;
//! assert!(result.is_err());
//!
//! let mut interval = hashed_wheel_timer::interval(Duration::from_millis(1));
//! interval.tick().await;
//! # Ok(())
//! # }
//! ```
//!
//! They work on any runtime or none; see [`Sleep`] for what they cost, and for what a
//! [`stop`](HashedWheelTimer::stop) does to them.
//!
//! # The wheel
//!
//! Time is cut into ticks (default 1 ms). A timeout fires at the end of the tick its deadline falls
//! in (on a tokio clock, when tokio wakes the driver after it): never early, and at most one tick
//! (plus wake-up noise) late. Scheduling and cancelling are O(1) and lock-free for the caller; a
//! cancelled timeout leaves its bucket within a tick. Unlike Netty's, the buckets hold only the
//! current round (later rounds wait in order and move in once), so a tick costs what fires, not
//! what waits, and an idle timer makes no wake-ups; nor does an empty tick
//! ([`Builder::tick_duration`]).
//!
//! The README's "When to choose it" weighs it against `tokio::time`, with the measurements.
//!
//! # Metrics
//!
//! [`HashedWheelTimer::stats`] returns a [`TimerStats`] of totals that add up, and of the driver's
//! health. With the cargo feature `metrics`, each timer's driver publishes these figures through
//! the [`metrics`](https://docs.rs/metrics) facade, to whatever exporter is the global recorder:
//!
//! | name | kind | what |
//! |---|---|---|
//! | `hashed_wheel_timer_pending` | gauge | [`TimerStats::pending`] |
//! | `hashed_wheel_timer_scheduled` | gauge | [`TimerStats::scheduled`] |
//! | `hashed_wheel_timer_fired` | gauge | [`TimerStats::fired`] |
//! | `hashed_wheel_timer_cancelled` | gauge | [`TimerStats::cancelled`] |
//! | `hashed_wheel_timer_stopped` | gauge | [`TimerStats::stopped`] |
//! | `hashed_wheel_timer_driver_wakeups` | gauge | [`TimerStats::driver_wakeups`] |
//! | `hashed_wheel_timer_driver_busy_seconds` | gauge | [`TimerStats::driver_busy`], in seconds |
//! | `hashed_wheel_timer_lateness_seconds` | histogram | each fire's lateness, in seconds ([`TimerStats::lateness`]) |
//!
//! Each is labelled `thread` with the timer's [`thread_name`](Builder::thread_name). The gauges are
//! set at most once per 100 ms of the timer's clock, before the driver sleeps longer (or idles)
//! and at [`stop`](HashedWheelTimer::stop); each fire's lateness as it fires.
//!
//! # Delay queues, periodic tasks, tower
//!
//! [`HashedWheelTimer::delay_queue`] gives a [`DelayQueue`], tokio-util's on the wheel, shared by
//! `Clone + Send + Sync` handles whose methods take `&self`; [`HashedWheelTimer::delay_map`] a
//! [`DelayMap`] of deadlines by a key of your own. [`HashedWheelTimer::schedule_at_fixed_rate`] and
//! [`schedule_with_fixed_delay`](HashedWheelTimer::schedule_with_fixed_delay) run a task again and
//! again, as Java's `ScheduledThreadPoolExecutor` does, but a panicking run does not take the timer
//! down. With the cargo feature `tower`, `TimeoutLayer` is tower's timeout layer on the wheel (see
//! the `tower` module).
//!
//! Callbacks run on the worker thread by default, so a slow one delays every later tick, as in
//! Netty; [`Builder::executor`] hands them to an [`Executor`] instead, such as [`TokioExecutor`].
//!
//! # Testing
//!
//! [`Builder::manual_clock`] gives a timer with no thread whose time moves only by
//! [`HashedWheelTimer::advance`] (or [`advance_to_next`](HashedWheelTimer::advance_to_next)):
//! exact, never flaky. [`Builder::tokio_clock`] gives one on the tokio runtime's clock, which
//! `start_paused`, `tokio::time::advance` and auto-advance move. [`set_default`] makes the free
//! functions use such a timer on this thread ([`set_global_default`] on every thread, for `main`).
//!
//! # Deadlines
//!
//! [`HashedWheelTimer::new_timeout_at`] schedules at an absolute deadline, [`Timeout::remaining`]
//! tells the time left, and [`Timeout::reset`] (or [`reset_at`](Timeout::reset_at)) moves a pending
//! timeout in place. Every function that takes a deadline (`sleep_until`, `timeout_at`,
//! `interval_at`, `new_timeout_at`, `insert_at`, `reset_at`, [`Sleep::reset`]) takes a
//! `std::time::Instant` or a `tokio::time::Instant`, so code written for tokio passes its instants
//! as they are. Take the deadline from the clock the timer reads:
//!
//! - real clock: `std::time::Instant::now() + d` or
//!   `tokio::time::Instant::now() + d` (the same time, outside a paused
//!   runtime);
//! - tokio clock: `tokio::time::Instant::now() + d`, or `timer.now() + d`;
//!   on a paused runtime `std::time::Instant::now()` is another time;
//! - manual clock: [`timer.now()`](HashedWheelTimer::now) `+ d`: neither
//!   `Instant::now()` follows [`advance`](HashedWheelTimer::advance).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod builder;
mod default_timer;
mod delay_map;
mod delay_queue;
mod engine;
#[cfg(test)]
mod engine_tests;
mod error;
mod executor;
mod interval;
mod lateness;
#[cfg(all(test, loom))]
mod loom_models;
mod one_shot;
mod periodic;
#[cfg(feature = "metrics")]
mod publish;
mod sleep;
mod stats;
mod timeout;
mod timeout_future;
mod timer;
mod timer_task;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;

pub use builder::{Builder, MAX_TICKS_PER_WHEEL};
pub use default_timer::{
    current_timer, default_timer, interval, interval_at, new_timeout, new_timeout_at, set_default,
    set_global_default, sleep, sleep_until, timeout, timeout_at, try_interval, try_interval_at,
    DefaultGuard,
};
pub use delay_map::DelayMap;
pub use delay_queue::{DelayKey, DelayQueue, Expired};
pub use engine::driver::turn::DRAIN_CAP_PER_TICK;
/// A handle to a task scheduled on a [`HashedWheelTimer`], as returned by `new_timeout`. Netty's
/// `Timeout`.
///
/// It is cheap to clone (two reference counts) and 8 bytes in size, an `Option<Timeout>` too;
/// every clone refers to the same timeout. Dropping handles does not cancel: call [`cancel`].
///
/// A one-shot timeout ends in exactly one way: it *expires* (its task ran), is *cancelled*, or is
/// *stopped* (returned by [`stop`](crate::HashedWheelTimer::stop) without running). A periodic one
/// (from [`schedule_at_fixed_rate`] or [`schedule_with_fixed_delay`]) stays pending across its
/// runs:
///
/// | | `is_pending` | `is_expired` | `is_cancelled` | `is_stopped` |
/// |---|---|---|---|---|
/// | waiting to run | yes | | | |
/// | one-shot: ran or running | | yes | | |
/// | periodic: running, more runs to come | yes | | | |
/// | periodic: a run panicked | | yes | | |
/// | [`cancel`] won | | | yes | |
/// | returned by `stop`, or ended by it | | | | yes |
///
/// [`is_panicked`](Timeout::is_panicked) is true on top of that when a run of the task panicked.
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
/// [`schedule_at_fixed_rate`]: crate::HashedWheelTimer::schedule_at_fixed_rate
/// [`schedule_with_fixed_delay`]: crate::HashedWheelTimer::schedule_with_fixed_delay
pub use engine::entry::handle::Timeout;
pub use engine::entry::handle::TOO_MANY_TIMERS;
pub use error::{Elapsed, TimerError};
pub use executor::{Executor, Job, TokioExecutor};
pub use interval::{Interval, MissedTickBehavior};
pub use lateness::LatenessHistogram;
pub use sleep::Sleep;
pub use stats::TimerStats;
pub use timeout_future::TimeoutFuture;
pub use timer::HashedWheelTimer;
pub use timer_task::TimerTask;
#[cfg(feature = "tower")]
pub use tower::TimeoutLayer;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
