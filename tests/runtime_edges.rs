//! The crate inside and across tokio runtimes, as tokio code uses it: tokio-clock timers on paused
//! and real runtimes, mixed with tokio's own timers, odd advances, runtimes shut down under pending
//! futures, defaults and guards, futures polled in odd ways. Time moves on tokio's paused clock;
//! the few real-clock tests assert nothing tighter than seconds.

mod common;

use common::paused::{ms, tokio_clock};
use common::{poll_with, CountingWaker};
use std::future::pending;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

const YEAR: Duration = Duration::from_secs(86_400 * 365);

/// Lets the driver task and the woken tasks run.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A sleep and tokio's in one `select!` on auto-advance: the earlier wins, at its own instant.
#[tokio::test(start_paused = true)]
async fn select_with_tokios_sleep_takes_the_earlier_at_its_instant() {
    let timer = tokio_clock();
    for (ours, theirs) in [(10, 20), (20, 10), (7, 7), (1, 1000)] {
        let start = Instant::now();
        let ours_won = tokio::select! {
            biased;
            _ = timer.sleep(ms(ours)) => true,
            _ = tokio::time::sleep(ms(theirs)) => false,
        };
        let took = Instant::now() - start;
        assert_eq!(ours_won, ours <= theirs, "{ours} vs {theirs}");
        assert!(took >= ms(ours.min(theirs)), "early: {took:?}");
        assert!(took <= ms(ours.min(theirs) + 1), "late: {took:?}");
    }
    assert_eq!(timer.pending_timeouts(), 0);
}

/// `join!` of the crate's futures and tokio's ends when the last does, on auto-advance.
#[tokio::test(start_paused = true)]
async fn join_with_tokios_timers_ends_with_the_last() {
    let timer = tokio_clock();
    let start = Instant::now();
    let mut interval = timer.interval(ms(3));
    let (_, _, r, _) = tokio::join!(
        timer.sleep(ms(50)),
        tokio::time::sleep(ms(70)),
        timer.timeout(ms(30), pending::<()>()),
        async {
            for _ in 0..10 {
                interval.tick().await;
            }
        }
    );
    assert!(r.is_err());
    let took = Instant::now() - start;
    assert!(took >= ms(70) && took <= ms(71), "{took:?}");
}

/// Sub-millisecond advances never make a sleep early; it is ready within a tick of its deadline.
#[tokio::test(start_paused = true)]
async fn sub_millisecond_advances_are_never_early() {
    let timer = tokio_clock();
    let (counter, waker) = CountingWaker::new();
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_micros(2_500));
    assert!(poll_with(&mut sleep, &waker).is_pending());
    let step = Duration::from_micros(130);
    loop {
        tokio::time::advance(step).await;
        settle().await;
        let now = Instant::now() - start;
        match poll_with(&mut sleep, &waker) {
            Poll::Ready(()) => {
                assert!(now >= Duration::from_micros(2_500), "early at {now:?}");
                assert!(now <= Duration::from_micros(3_500 + 130), "late: {now:?}");
                break;
            }
            Poll::Pending => assert!(now < Duration::from_micros(3_500 + 130), "late: {now:?}"),
        }
    }
    assert!(counter.wakes() <= 2, "woken {} times", counter.wakes());
}

/// A pending sleep is not woken while time moves short of its deadline: no spin.
#[tokio::test(start_paused = true)]
async fn a_pending_sleep_is_not_woken_before_its_deadline() {
    let timer = tokio_clock();
    let (counter, waker) = CountingWaker::new();
    let mut sleep = timer.sleep(ms(100));
    let mut far = timer.sleep(Duration::MAX);
    assert!(poll_with(&mut sleep, &waker).is_pending());
    assert!(poll_with(&mut far, &waker).is_pending());
    for _ in 0..99 {
        tokio::time::advance(ms(1)).await;
        settle().await;
    }
    assert_eq!(counter.wakes(), 0);
    assert!(poll_with(&mut sleep, &waker).is_pending());
    tokio::time::advance(ms(1)).await;
    settle().await;
    assert_eq!(counter.wakes(), 1);
    assert!(poll_with(&mut sleep, &waker).is_ready());
    assert!(poll_with(&mut far, &waker).is_pending());
}

/// `Duration::MAX` and a far-future instant never complete early, and do not keep the paused
/// runtime busy: tokio's own sleep beside them still auto-advances.
#[tokio::test(start_paused = true)]
async fn far_future_sleeps_let_the_paused_clock_auto_advance() {
    let timer = tokio_clock();
    let mut max = timer.sleep(Duration::MAX);
    let start = Instant::now();
    let mut far = timer.sleep_until(start + YEAR * 50);
    let mut far_done = false;
    for wait in [ms(5), YEAR, YEAR * 30, YEAR * 30] {
        tokio::select! {
            _ = &mut max => panic!("Duration::MAX completed"),
            _ = &mut far, if !far_done => {
                assert!(Instant::now() - start >= YEAR * 50, "early");
                far_done = true;
            }
            _ = tokio::time::sleep(wait) => {}
        }
    }
    assert!(far.is_elapsed());
    assert_eq!(timer.pending_timeouts(), 1, "the Duration::MAX one");
}

/// A duration too large to represent never completes ("A duration too large to represent never
/// completes", `HashedWheelTimer::sleep`), even once tokio's paused clock, which has no such
/// end, is advanced past the end of the timer's time (73 years); what is due fires, and the wheel
/// and tokio's auto-advance go on afterwards.
#[tokio::test(start_paused = true)]
async fn a_saturated_deadline_never_comes_on_tokios_clock_advanced_past_the_timers_end() {
    let timer = tokio_clock();
    let fired = common::Counter::default();
    timer.new_timeout(fired.task(), YEAR * 10).unwrap();
    let late = timer.new_timeout(|_| {}, YEAR * 200).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut max = timer.sleep(Duration::MAX);
    let mut huge = timer.sleep(YEAR * 200);
    assert!(poll_with(&mut huge, &waker).is_pending());
    let queue = timer.delay_queue();
    queue.insert("never", Duration::MAX).unwrap();
    tokio::time::advance(YEAR * 100).await;
    settle().await;
    assert_eq!(fired.get(), 1);
    assert!(!late.is_expired(), "a 200-year timeout fired at 100 years");
    assert!(
        poll_with(&mut huge, &waker).is_pending(),
        "a 200-year sleep ended at 100 years"
    );
    assert!(
        poll_with(&mut max, &waker).is_pending(),
        "Duration::MAX ended"
    );
    assert!(futures::poll!(futures::StreamExt::next(&mut &queue)).is_pending());
    let later = timer.sleep(ms(3));
    assert!(!later.is_elapsed());
    queue.insert("late", YEAR * 300).unwrap();
    assert!(futures::poll!(futures::StreamExt::next(&mut &queue)).is_pending());
    // No driver spinning at the end of time, so tokio's own timers still auto-advance.
    let before = timer.stats().worker_wakeups;
    settle().await;
    let woke = timer.stats().worker_wakeups - before;
    assert!(woke <= 2, "the driver woke {woke} times with nothing due: a spin");
    tokio::time::sleep(YEAR).await;
    assert!(!late.is_expired());
    assert!(poll_with(&mut max, &waker).is_pending());
}

/// The same on the manual clock, advanced past its end.
#[test]
fn a_saturated_deadline_never_comes_on_a_manual_clock_advanced_past_its_end() {
    let timer = common::manual(ms(1));
    let late = timer.new_timeout(|_| {}, YEAR * 200).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut huge = timer.sleep(YEAR * 200);
    assert!(poll_with(&mut huge, &waker).is_pending());
    timer.advance(YEAR * 100);
    timer.advance(Duration::MAX);
    assert!(!late.is_expired(), "a 200-year timeout fired at 100 years");
    assert!(
        poll_with(&mut huge, &waker).is_pending(),
        "a 200-year sleep ended"
    );
    assert!(poll_with(&mut timer.sleep(Duration::MAX), &waker).is_pending());
    assert_eq!(timer.advance_to_next(), None);
}
