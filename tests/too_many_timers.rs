//! More than `TOO_MANY_TIMERS` live timers logs one error, as Netty does.
//! Its own test binary: the live-timer count is process-wide.

mod common;

use common::Logs;
use hashed_wheel_timer::{HashedWheelTimer, TOO_MANY_TIMERS};

fn errors(logs: &Logs) -> usize {
    logs.text()
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("too many HashedWheelTimer"))
        .count()
}

#[test]
fn one_error_when_more_than_64_timers_are_live() {
    let logs = Logs::default();
    let _guard = tracing::subscriber::set_default(logs.subscriber());

    let manual = || HashedWheelTimer::builder().manual_clock().build().unwrap();
    let mut timers: Vec<_> = (0..TOO_MANY_TIMERS).map(|_| manual()).collect();
    assert_eq!(errors(&logs), 0, "64 timers are fine");
    // Clones are the same timer and do not count.
    let clones: Vec<_> = timers.iter().map(HashedWheelTimer::clone).collect();
    assert_eq!(errors(&logs), 0);
    timers.push(manual());
    assert_eq!(errors(&logs), 1, "the 65th logs an error");
    timers.push(manual());
    assert_eq!(errors(&logs), 1, "only once");
    drop(clones);
}
