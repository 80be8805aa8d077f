//! Deadlines more ticks ahead than an entry's filed tick keeps (2^24 - 1: 4.66 hours of 1 ms
//! ticks, 16.8 s of 1 µs ones): the wheel files them that far and again from there, and they fire,
//! cancel, reset, come back from `stop()` and are reached by `advance_to_next` as near ones do: at
//! their tick's end, never early.

mod common;

use common::manual;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);
/// The ticks an entry's own bits reach past the wheel's current tick.
const REACH: u32 = (1 << 24) - 1;

/// Each callback's (index, the timer's time when it ran).
type Seen = Arc<Mutex<Vec<(usize, Instant)>>>;

/// Timeouts whose callbacks record (their index, the timer's time when each ran).
fn schedule(timer: &HashedWheelTimer, delays: &[Duration]) -> (Seen, Vec<Timeout>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let timeouts = delays
        .iter()
        .enumerate()
        .map(|(i, &delay)| {
            let seen = seen.clone();
            let task = move |t: &Timeout| seen.lock().unwrap().push((i, t.timer().unwrap().now()));
            timer.new_timeout(task, delay).unwrap()
        })
        .collect();
    (seen, timeouts)
}

#[test]
fn far_timeouts_fire_at_their_ticks_end_in_order_with_near_ones() {
    let timer = manual(MS);
    let start = timer.now();
    let delays = [
        MS * 3,
        MS * (REACH - 1),
        MS * REACH,
        MS * REACH + MS,
        MS * REACH * 3 + MS * 7,
        Duration::from_secs(6 * 3600),
    ];
    let (seen, timeouts) = schedule(&timer, &delays);
    let mut order: Vec<usize> = (0..delays.len()).collect();
    order.sort_by_key(|&i| delays[i]);
    for &i in &order {
        timer.advance(start + delays[i] - timer.now() - MS / 2);
        assert!(!timeouts[i].is_expired(), "timeout {i} early");
        timer.advance(MS / 2);
        assert!(
            timeouts[i].is_expired(),
            "timeout {i} not at its tick's end"
        );
    }
    let seen = seen.lock().unwrap();
    let fired: Vec<(usize, Duration)> = seen.iter().map(|&(i, at)| (i, at - start)).collect();
    let expected: Vec<(usize, Duration)> = order.iter().map(|&i| (i, delays[i])).collect();
    assert_eq!(fired, expected);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_far_timeout_cancels_resets_and_comes_back_from_stop() {
    let timer = manual(MS);
    let start = timer.now();
    let far = MS * REACH * 2;
    let (seen, t) = schedule(&timer, &[far, far, far, far, far]);
    timer.advance(MS * 100); // all filed in the wheel
    assert!(t[0].cancel(), "a far one cancels");
    assert!(t[1].reset(MS * 10), "a far one moves near");
    assert!(t[2].reset(far * 2), "and further");
    timer.advance(MS * 10);
    assert_eq!(seen.lock().unwrap().len(), 1, "the one moved near fired");
    assert!(t[1].is_expired());
    timer.advance(far - MS * 100);
    assert!(
        t[3].is_expired() && t[4].is_expired(),
        "the far ones fired at their ticks"
    );
    assert!(!t[2].is_expired() && !t[0].is_expired());
    assert_eq!(timer.pending_timeouts(), 1);
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped.len(), 1, "the one moved further comes back");
    assert_eq!(stopped[0], t[2]);
    assert_eq!(t[2].deadline(), start + MS * 100 + far * 2);
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled, stats.stopped), (3, 1, 1));
}

#[test]
fn advance_to_next_reaches_a_far_timeout_in_one_call() {
    let timer = manual(MS);
    let far = Duration::from_secs(5 * 3600) + MS * 3;
    let (seen, t) = schedule(&timer, &[far]);
    timer.advance(MS * 100);
    assert_eq!(timer.advance_to_next(), Some(far - MS * 100));
    assert!(t[0].is_expired());
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn microsecond_ticks_reach_a_minute_ahead() {
    let us = Duration::from_micros(1);
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .tick_duration(us)
        .build()
        .unwrap();
    let start = timer.now();
    let (seen, t) = schedule(&timer, &[Duration::from_secs(60), Duration::from_secs(17)]);
    timer.advance(Duration::from_secs(17) - us);
    assert!(!t[1].is_expired());
    timer.advance(us);
    assert!(t[1].is_expired() && !t[0].is_expired());
    timer.advance(Duration::from_secs(43) - us);
    assert!(!t[0].is_expired(), "early");
    timer.advance(us);
    assert!(t[0].is_expired());
    let at: Vec<Duration> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|&(_, at)| at - start)
        .collect();
    assert_eq!(at, [Duration::from_secs(17), Duration::from_secs(60)]);
}
