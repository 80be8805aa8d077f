//! `Interval` on a manual clock: the tick sequences tokio documents for each
//! `MissedTickBehavior`, reset, the stream, a zero period and a stopped
//! timer.

mod common;

use common::{manual, poll_with, CountingWaker};
use futures::Stream;
use hashed_wheel_timer::{HashedWheelTimer, Interval, MissedTickBehavior, TimerError};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio_test::task::{self, Spawn};
use tokio_test::{assert_pending, assert_ready, assert_ready_eq};

const MS: Duration = Duration::from_millis(1);
const PERIOD: Duration = Duration::from_millis(10);

/// An interval polled by one mock task, so `is_woken` means something.
struct Ticker {
    interval: Interval,
    task: Spawn<()>,
    t0: Instant,
}

impl Ticker {
    fn new(timer: &HashedWheelTimer, behavior: MissedTickBehavior) -> Ticker {
        let mut interval = timer.interval(PERIOD);
        interval.set_missed_tick_behavior(behavior);
        Ticker {
            interval,
            task: task::spawn(()),
            t0: timer.now(),
        }
    }

    /// The next tick, as milliseconds after the interval was made.
    fn poll(&mut self) -> Poll<u128> {
        let Ticker { interval, task, t0 } = self;
        task.enter(|cx, _| interval.poll_tick(cx))
            .map(|due| (due - *t0).as_millis())
    }

    fn poll_try(&mut self) -> Poll<Result<Instant, TimerError>> {
        let Ticker { interval, task, .. } = self;
        task.enter(|cx, _| interval.poll_try_tick(cx))
    }

    fn poll_next(&mut self) -> Poll<Option<Instant>> {
        let Ticker { interval, task, .. } = self;
        task.enter(|cx, _| Pin::new(interval).poll_next(cx))
    }

    fn is_woken(&self) -> bool {
        self.task.is_woken()
    }
}

#[test]
fn the_first_tick_is_immediate_then_one_every_period() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Burst);
    assert_ready_eq!(ticker.poll(), 0);
    for n in 1..=5 {
        assert_pending!(ticker.poll());
        timer.advance(PERIOD - MS);
        assert!(!ticker.is_woken());
        assert_pending!(ticker.poll());
        timer.advance(MS);
        assert!(ticker.is_woken());
        assert_ready_eq!(ticker.poll(), 10 * n);
    }
}

#[test]
fn interval_at_starts_at_start() {
    let timer = manual(MS);
    let t0 = timer.now();
    let mut interval = timer.interval_at(t0 + MS * 5, PERIOD);
    let mut tick = task::spawn(());
    assert_pending!(tick.enter(|cx, _| interval.poll_tick(cx)));
    timer.advance(MS * 5);
    assert!(tick.is_woken());
    assert_ready_eq!(tick.enter(|cx, _| interval.poll_tick(cx)), t0 + MS * 5);
    timer.advance(PERIOD);
    assert_ready_eq!(tick.enter(|cx, _| interval.poll_tick(cx)), t0 + MS * 15);
}

/// Takes the tick at 0, then is polled again only at 35 ms: the ticks due
/// at 10, 20 and 30 ms were missed.
fn missed_three(behavior: MissedTickBehavior) -> (HashedWheelTimer, Ticker) {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, behavior);
    assert_ready_eq!(ticker.poll(), 0);
    timer.advance(MS * 35);
    (timer, ticker)
}

/// Advances to `ms` after the start, checking the tick is pending until
/// then and ready with `due` at it.
fn expect_tick_at(timer: &HashedWheelTimer, ticker: &mut Ticker, ms: u128, due: u128) {
    let now = (timer.now() - ticker.t0).as_millis();
    assert!(ms > now);
    assert_pending!(ticker.poll(), "before {ms} ms");
    timer.advance(MS * (ms - now - 1) as u32);
    assert_pending!(ticker.poll(), "1 ms before {ms} ms");
    timer.advance(MS);
    assert!(ticker.is_woken());
    assert_ready_eq!(ticker.poll(), due);
}

#[test]
fn burst_fires_the_missed_ticks_at_once_then_keeps_the_schedule() {
    let (timer, mut ticker) = missed_three(MissedTickBehavior::Burst);
    assert_ready_eq!(ticker.poll(), 10);
    assert_ready_eq!(ticker.poll(), 20);
    assert_ready_eq!(ticker.poll(), 30);
    expect_tick_at(&timer, &mut ticker, 40, 40);
    expect_tick_at(&timer, &mut ticker, 50, 50);
}

#[test]
fn delay_restarts_the_schedule_from_the_late_tick() {
    let (timer, mut ticker) = missed_three(MissedTickBehavior::Delay);
    assert_ready_eq!(ticker.poll(), 10);
    expect_tick_at(&timer, &mut ticker, 45, 45);
    expect_tick_at(&timer, &mut ticker, 55, 55);
}

#[test]
fn skip_goes_on_at_the_next_multiple_of_the_period() {
    let (timer, mut ticker) = missed_three(MissedTickBehavior::Skip);
    assert_ready_eq!(ticker.poll(), 10);
    expect_tick_at(&timer, &mut ticker, 40, 40);
    expect_tick_at(&timer, &mut ticker, 50, 50);
}

#[test]
fn a_tick_a_little_late_is_not_a_missed_tick() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Delay);
    assert_ready_eq!(ticker.poll(), 0);
    timer.advance(MS * 13); // 3 ms late: within tokio's 5 ms
    assert_ready_eq!(ticker.poll(), 10);
    expect_tick_at(&timer, &mut ticker, 20, 20);
}

#[test]
fn reset_restarts_the_schedule_from_now() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Burst);
    assert_ready_eq!(ticker.poll(), 0);
    assert_pending!(ticker.poll());
    timer.advance(MS * 4);
    ticker.interval.reset();
    expect_tick_at(&timer, &mut ticker, 14, 14);

    ticker.interval.reset_immediately();
    assert_ready_eq!(ticker.poll(), 14);

    ticker.interval.reset_after(MS * 3);
    expect_tick_at(&timer, &mut ticker, 17, 17);

    ticker.interval.reset_at(ticker.t0 + MS * 19);
    expect_tick_at(&timer, &mut ticker, 19, 19);
    expect_tick_at(&timer, &mut ticker, 29, 29);
}

#[test]
fn it_is_a_stream_of_due_instants() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Burst);
    let t0 = ticker.t0;
    assert_ready_eq!(ticker.poll_next(), Some(t0));
    assert_pending!(ticker.poll_next());
    timer.advance(PERIOD);
    assert!(ticker.is_woken());
    assert_ready_eq!(ticker.poll_next(), Some(t0 + PERIOD));
}

#[test]
fn a_zero_period_is_an_error_not_a_panic() {
    let timer = manual(MS);
    let expected = TimerError::ZeroPeriod {
        what: "period",
        value: Duration::ZERO,
    };
    assert_eq!(timer.try_interval(Duration::ZERO).unwrap_err(), expected);
    let at = timer
        .try_interval_at(timer.now(), Duration::ZERO)
        .unwrap_err();
    assert_eq!(at, expected);
    assert_eq!(at.to_string(), "period must be greater than zero (got 0ns)");
    assert!(timer.try_interval(Duration::from_nanos(1)).is_ok());
}

#[test]
fn the_infallible_form_raises_a_zero_period_to_one_tick() {
    let timer = manual(MS * 3);
    let mut interval = timer.interval(Duration::ZERO);
    assert_eq!(interval.period(), timer.tick_duration());
    let mut tick = task::spawn(());
    let first = assert_ready!(tick.enter(|cx, _| interval.poll_tick(cx)));
    assert_pending!(tick.enter(|cx, _| interval.poll_tick(cx)));
    timer.advance(MS * 3);
    let second = assert_ready!(tick.enter(|cx, _| interval.poll_tick(cx)));
    assert_eq!(second - first, MS * 3, "one tick apart, not a busy loop");
}

#[test]
fn a_huge_period_saturates_without_panicking() {
    let timer = manual(MS);
    let mut interval = timer.interval(Duration::MAX);
    let mut tick = task::spawn(());
    assert_ready!(tick.enter(|cx, _| interval.poll_tick(cx)));
    assert_pending!(tick.enter(|cx, _| interval.poll_tick(cx)));
    timer.advance(Duration::from_secs(86_400 * 365));
    assert!(!tick.is_woken());
    interval.reset();
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    assert_pending!(tick.enter(|cx, _| interval.poll_tick(cx)));
}

#[test]
fn dropping_it_cancels_its_entry() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Burst);
    assert_ready!(ticker.poll());
    assert_pending!(ticker.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    drop(ticker);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn only_the_task_that_polled_last_is_woken() {
    let timer = manual(MS);
    let mut interval = timer.interval(PERIOD);
    let (a, waker_a) = CountingWaker::new();
    let (b, waker_b) = CountingWaker::new();
    let mut tick = |waker| {
        let mut tick = Box::pin(interval.tick());
        poll_with(&mut tick, waker)
    };
    assert!(tick(&waker_a).is_ready());
    assert!(tick(&waker_a).is_pending());
    assert!(tick(&waker_b).is_pending());
    timer.advance(PERIOD);
    assert_eq!((a.wakes(), b.wakes()), (0, 1));
}

#[test]
fn after_stop_it_never_hangs() {
    let timer = manual(MS);
    let mut ticker = Ticker::new(&timer, MissedTickBehavior::Burst);
    // A period no stall of a loaded machine outlasts: the last poll waits it out on the real clock.
    ticker.interval = timer.interval(Duration::from_secs(100));
    assert_ready!(ticker.poll());
    assert_pending!(ticker.poll());
    timer.stop().unwrap();
    assert!(ticker.is_woken(), "the stop woke the pending tick");
    assert_eq!(assert_ready!(ticker.poll_try()), Err(TimerError::Shutdown));
    assert_ready_eq!(ticker.poll_next(), None, "the stream ends");
    // tick() neither spins nor hangs: it waits out the period on the
    // default timer (see tests/after_stop.rs for the loop).
    assert_pending!(ticker.poll(), "tick() does not complete at once");
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn accessors() {
    let timer = manual(MS);
    let mut interval = timer.interval(PERIOD);
    assert_eq!(interval.period(), PERIOD);
    assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Burst);
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Skip);
}
