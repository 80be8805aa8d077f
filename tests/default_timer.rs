//! The process-wide default timer and the free functions over it. Real
//! clock; nothing here stops the default timer, which the whole test
//! binary shares.

use hashed_wheel_timer::{default_timer, TimerError};
use std::future::pending;
use std::sync::mpsc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
fn it_is_one_lazily_built_timer_with_the_documented_settings() {
    let timer = default_timer();
    assert!(std::ptr::eq(timer, default_timer()));
    assert_eq!(timer.tick_duration(), MS);
    assert_eq!(timer.ticks_per_wheel(), 512);
    assert!(!timer.is_manual_clock());
    let from_another_thread = std::thread::spawn(|| default_timer() as *const _ as usize)
        .join()
        .unwrap();
    assert_eq!(from_another_thread, timer as *const _ as usize);
}

#[test]
fn the_free_functions_use_it() {
    futures::executor::block_on(async {
        let sleep = hashed_wheel_timer::sleep(MS * 2);
        let deadline = sleep.deadline();
        sleep.await;
        assert!(default_timer().now() >= deadline);

        hashed_wheel_timer::sleep_until(default_timer().now() + MS).await;

        let err = hashed_wheel_timer::timeout(MS, pending::<()>()).await;
        assert!(err.is_err());
        let at = default_timer().now() + MS;
        assert_eq!(hashed_wheel_timer::timeout_at(at, async { 1 }).await, Ok(1));

        let mut interval = hashed_wheel_timer::interval(MS);
        let first = interval.tick().await;
        assert_eq!(interval.tick().await - first, MS);
        let start = default_timer().now();
        let mut interval = hashed_wheel_timer::interval_at(start, MS);
        assert_eq!(interval.tick().await, start);
    });
}

#[test]
fn a_zero_period_is_an_error() {
    let err = hashed_wheel_timer::try_interval(Duration::ZERO).unwrap_err();
    assert!(matches!(err, TimerError::ZeroPeriod { what: "period", .. }));
    let start = default_timer().now();
    assert!(hashed_wheel_timer::try_interval_at(start, Duration::ZERO).is_err());
}

#[test]
fn new_timeout_runs_a_callback_on_it() {
    let (tx, rx) = mpsc::channel();
    let t = hashed_wheel_timer::new_timeout(move |_| tx.send("fired").unwrap(), MS).unwrap();
    assert_eq!(rx.recv().unwrap(), "fired");
    assert!(t.is_expired());
}
