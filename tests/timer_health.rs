//! The figures that show a timer's health in `stats()`: the lateness
//! histogram, `driver_wakeups` and `driver_busy`.

mod common;

use common::manual;
use hashed_wheel_timer::{HashedWheelTimer, LatenessHistogram, Timeout};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn assert_empty(h: &LatenessHistogram) {
    assert_eq!(h.count(), 0, "{h:?}");
    assert_eq!(h.max(), Duration::ZERO, "{h:?}");
    for q in [0.0, 0.5, 0.99, 1.0] {
        assert_eq!(h.quantile(q), Duration::ZERO, "quantile({q}) of {h:?}");
    }
}

#[test]
fn a_new_timers_lateness_histogram_is_empty() {
    assert_empty(&manual(MS).stats().lateness);
    assert_empty(&HashedWheelTimer::new().stats().lateness);
    assert_empty(&LatenessHistogram::default());
    let s = manual(MS).stats();
    assert_eq!((s.driver_wakeups, s.driver_busy), (0, Duration::ZERO));
}

/// On the manual clock every fire happens at its deadline's tick end: a
/// deadline on a tick boundary fires with no lateness at all.
#[test]
fn on_the_manual_clock_fires_on_time_are_not_late() {
    let timer = manual(MS);
    for i in 1..=50u32 {
        timer.new_timeout(|_| {}, MS * i).unwrap();
    }
    timer
        .schedule_at_fixed_rate(|_: &Timeout| {}, MS * 5, MS * 7)
        .unwrap();
    timer.advance(MS * 100);
    let h = timer.stats().lateness;
    assert_eq!(h.count(), 50 + 14, "{h:?}");
    assert_eq!(h.max(), Duration::ZERO);
    assert_eq!(h.quantile(1.0), Duration::ZERO);
    assert_eq!(timer.stats().max_lateness, Duration::ZERO);
}

/// A fire is late on the manual clock only when the clock jumped past its
/// deadline while a callback ran: here one at 10 ms moves it to 40 ms.
#[test]
fn on_the_manual_clock_a_fire_is_late_when_a_callback_moved_the_clock_past_it() {
    let timer = manual(MS);
    let clock = timer.clone();
    timer
        .new_timeout(move |_| clock.advance(MS * 30), MS * 10)
        .unwrap();
    timer.new_timeout(|_| {}, MS * 25).unwrap(); // fires at 40: 15 late
    timer.new_timeout(|_| {}, MS * 40).unwrap(); // on time
    timer.new_timeout(|_| {}, MS * 60).unwrap(); // on time
    timer.advance(MS * 100);
    let s = timer.stats();
    let h = s.lateness;
    assert_eq!(h.count(), 4, "{h:?}");
    assert_eq!(h.max(), MS * 15);
    assert_eq!(s.max_lateness, MS * 15);
    assert_eq!(h.quantile(0.75), Duration::ZERO, "three of four on time");
    assert_eq!(h.quantile(0.99), MS * 15);
    assert_eq!(h.quantile(1.0), MS * 15);
}

/// Quantiles of a known spread of lateness (0 to 99 ms, one each): never
/// below the true one, at most an eighth above it (or its bucket's 1.024 µs).
#[test]
fn quantiles_are_within_an_eighth_above_the_true_figure() {
    let timer = manual(MS);
    let clock = timer.clone();
    timer
        .new_timeout(move |_| clock.advance(MS * 100), MS)
        .unwrap();
    // Due at 2..=101 ms; all fire at 101 ms, 99..=0 ms late.
    for i in 2..=101u32 {
        timer.new_timeout(|_| {}, MS * i).unwrap();
    }
    timer.advance(MS * 200);
    let h = timer.stats().lateness;
    assert_eq!(h.count(), 101);
    // The exact lateness, sorted: the first callback's 0, then 0..=99 ms.
    let mut exact: Vec<Duration> = (0..100u32).map(|i| MS * i).collect();
    exact.insert(0, Duration::ZERO);
    for q in [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0] {
        let rank = ((q * 101.0_f64).ceil() as usize).clamp(1, 101);
        let truth = exact[rank - 1];
        let got = h.quantile(q);
        assert!(got >= truth, "quantile({q}) = {got:?} below {truth:?}");
        assert!(
            got <= truth + truth / 8 + Duration::from_nanos(1024),
            "quantile({q}) = {got:?}, more than an eighth above {truth:?}"
        );
    }
    assert_eq!(h.max(), MS * 99);
    assert_eq!(h.quantile(f64::NAN), Duration::ZERO, "NaN reads as 0");
    assert_eq!(h.quantile(7.0), MS * 99, "past 1 reads as 1");
}

/// On tokio's paused clock, `advance(50 ms)` past a 10 ms deadline is a
/// fire 40 ms late, within a tick (1 ms).
#[tokio::test(start_paused = true)]
async fn on_tokios_paused_clock_advancing_50ms_past_a_10ms_deadline_is_40ms_late() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    timer
        .new_timeout(
            move |_| {
                let _ = tx.send(());
            },
            MS * 10,
        )
        .unwrap();
    tokio::time::advance(MS * 50).await;
    rx.await.unwrap();
    let h = timer.stats().lateness;
    assert_eq!(h.count(), 1, "{h:?}");
    for got in [h.max(), h.quantile(0.5), h.quantile(0.99)] {
        assert!(
            got >= MS * 39 && got <= MS * 41,
            "{got:?}, not 40 ms within a tick: {h:?}"
        );
    }
}

/// A driver that wakes counts each wake-up; one with nothing pending
/// sleeps without waking, however far time moves.
#[tokio::test(start_paused = true)]
async fn driver_wakeups_count_the_drivers_wake_ups_and_an_idle_one_adds_none() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    assert_eq!(timer.stats().driver_wakeups, 0);
    let mut woken = Vec::new();
    for _ in 0..4 {
        timer.sleep(MS * 10).await;
        woken.push(timer.stats().driver_wakeups);
    }
    // Each sleep's fire wakes the driver task (counted when it runs).
    assert!(woken.windows(2).all(|w| w[0] < w[1]), "{woken:?}");
    assert!(woken[3] >= 3, "{woken:?}");
    tokio::time::sleep(MS).await; // the driver task runs, and parks idle
    let s = timer.stats();
    assert_eq!(s.worker_wakeups, s.driver_wakeups, "one figure, two names");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let idle = timer.stats();
    assert_eq!(idle.driver_wakeups, s.driver_wakeups, "idle: {idle:?}");
}

/// `driver_busy` grows by the time the driver spends firing: here a
/// callback that takes 300 ms of real time on the manual clock's driver.
/// Not 30 ms: the first advance, which fires nothing, is timed in real time
/// too, and a thread held off the CPU for 30 ms inside it would fail `before`.
#[test]
fn driver_busy_grows_when_the_driver_works() {
    let timer = manual(MS);
    timer.advance(MS * 5);
    let before = timer.stats().driver_busy;
    assert!(before < MS * 300, "{before:?}");
    timer
        .new_timeout(|_| std::thread::sleep(MS * 300), MS)
        .unwrap();
    timer.advance(MS * 5);
    let after = timer.stats().driver_busy;
    assert!(after >= before + MS * 300, "{before:?} -> {after:?}");
}
