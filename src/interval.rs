//! `Interval`: ticks at a fixed period, reusing one `Sleep`.

use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use std::{future::poll_fn, pin::Pin};

use futures::Stream;

use crate::engine::clock::saturating_add;
use crate::{default_timer, HashedWheelTimer, Sleep, TimerError};

/// How late a tick may be polled before it counts as missed, as in tokio; raised to one timer tick
/// for coarse wheels, whose ticks all fire up to a tick late.
const MISSED_TICK_TOLERANCE: Duration = Duration::from_millis(5);

/// What an [`Interval`] does when ticks were missed, because the code between `tick()` calls ran
/// longer than the period; as in tokio. With a period of 50 ms and a tick due at 0 ms polled only
/// at 170 ms, the following ticks are due at:
///
/// | behaviour | due at (ms) |
/// |---|---|
/// | `Burst` | 50, 100, 150 at once, then 200, 250, ... |
/// | `Delay` | 220, 270, 320, ... |
/// | `Skip` | 200, 250, 300, ... |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MissedTickBehavior {
    /// Fixed rate: the missed ticks fire at once, as fast as they are polled, until the interval is
    /// back on its schedule.
    #[default]
    Burst,
    /// Fixed delay: the next tick is one period after the late one was polled, and the schedule
    /// moves with it.
    Delay,
    /// Skip the missed ticks and go on at the next multiple of the period on the original schedule.
    Skip,
}

impl MissedTickBehavior {
    /// When the tick after a missed one, due at `due` and polled at `now`, is due.
    fn next_due(self, due: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => saturating_add(due, period),
            MissedTickBehavior::Delay => saturating_add(now, period),
            MissedTickBehavior::Skip => {
                let late = now.saturating_duration_since(due).as_nanos();
                let left = period.as_nanos() - late % period.as_nanos();
                saturating_add(now, nanos_to_duration(left))
            }
        }
    }
}

/// `nanos` (less than a `Duration`'s range here) as a `Duration`.
fn nanos_to_duration(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    Duration::new(secs, (nanos % NANOS_PER_SEC) as u32)
}

/// Ticks at a fixed period on a [`HashedWheelTimer`]; made by [`HashedWheelTimer::interval`] and
/// [`interval_at`](HashedWheelTimer::interval_at). Like `tokio::time::Interval`, down to
/// [`MissedTickBehavior`].
///
/// Each tick completes at the end of the wheel tick its due time falls in; [`tick`](Interval::tick)
/// returns the instant it was due, not when it completed. It holds one wheel entry while a tick is
/// awaited, and is also a [`Stream`] of those instants.
///
/// # Cancellation
///
/// `tick()` is cancel safe: a tick is taken only when it returns. Dropping the `Interval` cancels
/// its pending entry.
///
/// # When the timer stops
///
/// It neither hangs nor spins: `tick()` goes on ticking each period, waited out elsewhere (see
/// [`Sleep`](crate::Sleep)). To end the loop on a stop, check [`HashedWheelTimer::is_shutdown`], or
/// use [`try_tick`](Interval::try_tick), which errs at once, or the stream, which ends. Once the
/// wait ends at once (a `tokio_clock()` timer's current-thread runtime gone), each tick waits out a
/// period on the process-wide [`default_timer`](crate::default_timer).
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hashed_wheel_timer::TimerError> {
/// let timer = HashedWheelTimer::new();
/// let mut interval = timer.interval(Duration::from_millis(5));
/// let first = interval.tick().await; // the first tick is immediate
/// let second = interval.tick().await;
/// assert_eq!(second - first, Duration::from_millis(5));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Interval {
    /// Due at the next tick.
    sleep: Sleep,
    /// The wait of a period on the default timer, once `sleep` ends at once (its runtime gone).
    pace: Option<Sleep>,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
    /// When `poll_try_tick` first saw the timer stopped: the ticks due later are `Shutdown`.
    stop_seen: Option<Instant>,
}

impl HashedWheelTimer {
    /// An [`Interval`] whose first tick is now and then every `period` (example on [`Interval`]).
    ///
    /// A zero period cannot tick. Where tokio panics, this raises it to one tick of this timer (its
    /// resolution) and logs a `tracing` warning; [`try_interval`](Self::try_interval) returns the
    /// error instead.
    pub fn interval(&self, period: Duration) -> Interval {
        self.interval_at(self.now(), period)
    }

    /// An [`Interval`] whose first tick is at `start` ([which `Instant`](crate#deadlines)) and then
    /// every `period`; a zero period is handled as by [`interval`](Self::interval).
    pub fn interval_at(&self, start: impl Into<Instant>, period: Duration) -> Interval {
        let start = start.into();
        self.try_interval_at(start, period).unwrap_or_else(|error| {
            crate::engine::notice::warn(format_args!(
                "interval: {error}; using one tick as the period"
            ));
            self.interval_at(start, self.tick_duration())
        })
    }

    /// [`interval`](Self::interval), but a zero period is an error, [`TimerError::ZeroPeriod`].
    pub fn try_interval(&self, period: Duration) -> Result<Interval, TimerError> {
        self.try_interval_at(self.now(), period)
    }

    /// [`interval_at`](Self::interval_at), but a zero period is an error,
    /// [`TimerError::ZeroPeriod`].
    pub fn try_interval_at(
        &self,
        start: impl Into<Instant>,
        period: Duration,
    ) -> Result<Interval, TimerError> {
        if period.is_zero() {
            return Err(TimerError::ZeroPeriod {
                what: "period",
                value: period,
            });
        }
        Ok(Interval {
            sleep: self.sleep_until(start),
            pace: None,
            period,
            missed_tick_behavior: MissedTickBehavior::default(),
            stop_seen: None,
        })
    }
}

impl Interval {
    /// Waits for the next tick and returns the instant it was due. Cancel safe; after a stop it
    /// keeps ticking (see the type's docs).
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Like [`tick`](Self::tick), but an error once the timer has stopped:
    /// [`TimerError::Shutdown`] for every tick not yet due when it first sees the stop, so a loop
    /// that runs late (missed ticks) ends too.
    pub async fn try_tick(&mut self) -> Result<Instant, TimerError> {
        poll_fn(|cx| self.poll_try_tick(cx)).await
    }

    /// Polls for the next tick: `tick()` for hand-written futures. Only a waker of the latest poll
    /// is woken.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        self.poll_next_tick(cx).map(|(due, _)| due)
    }

    /// Polls for the next tick, as [`try_tick`](Self::try_tick).
    pub fn poll_try_tick(&mut self, cx: &mut Context<'_>) -> Poll<Result<Instant, TimerError>> {
        let timer = &self.sleep.timer;
        if timer.is_shutdown() {
            let seen = *self.stop_seen.get_or_insert_with(|| timer.now());
            if self.sleep.deadline() > seen || !self.sleep.is_elapsed() {
                return Poll::Ready(Err(TimerError::Shutdown)); // at once: end the loop
            }
        }
        self.poll_next_tick(cx)
            .map(|(due, result)| result.map(|()| due))
    }

    /// Waits for the tick, takes it and schedules the next one.
    fn poll_next_tick(&mut self, cx: &mut Context<'_>) -> Poll<(Instant, Result<(), TimerError>)> {
        let result = ready!(self.sleep.poll_elapsed(cx));
        // Its runtime gone, a wait not yet due ended at once: wait a period on the default timer.
        let sleep = &self.sleep;
        if result.is_err() && !sleep.is_elapsed() && sleep.timer.after_stop().is_shutdown() {
            let pace = self
                .pace
                .get_or_insert_with(|| default_timer().sleep(self.period));
            let _ = ready!(pace.poll_elapsed(cx));
            self.pace = None;
        }
        let due = self.sleep.deadline();
        let timer = &self.sleep.timer;
        let now = timer.now();
        let tolerance = MISSED_TICK_TOLERANCE.max(timer.tick_duration());
        let next = if now > saturating_add(due, tolerance) {
            self.missed_tick_behavior.next_due(due, now, self.period)
        } else {
            saturating_add(due, self.period)
        };
        self.sleep.reset(next);
        Poll::Ready((due, result))
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Restarts the schedule: the next tick is now.
    pub fn reset_immediately(&mut self) {
        self.reset_after(Duration::ZERO);
    }

    /// Restarts the schedule: the next tick is `after` from now.
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(saturating_add(self.sleep.timer.now(), after));
    }

    /// Restarts the schedule: the next tick is at `deadline` ([which `Instant`](crate#deadlines)).
    pub fn reset_at(&mut self, deadline: impl Into<Instant>) {
        self.sleep.reset(deadline);
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What it does when ticks are missed.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets what it does when ticks are missed.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
    }
}

impl Stream for Interval {
    type Item = Instant;

    /// The next tick's due instant; `None` once the timer has stopped, and from then on (see
    /// [`Interval::try_tick`]).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_try_tick(cx).map(Result::ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn next_due_follows_tokio_and_never_overflows() {
        use MissedTickBehavior::{Burst, Delay, Skip};
        let t0 = Instant::now();
        // Exactly on a later multiple: skip to the one after.
        assert_eq!(Skip.next_due(t0, t0 + MS * 100, MS * 50) - t0, MS * 150);
        // Huge periods saturate.
        for b in [Burst, Delay, Skip] {
            assert!(b.next_due(t0, t0 + MS, Duration::MAX) > t0);
        }
        assert_eq!(
            nanos_to_duration(1_500_000_001),
            Duration::new(1, 500_000_001)
        );
    }
}
