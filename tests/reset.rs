//! `Timeout::reset`/`reset_at`, `remaining`, `new_timeout_at`, and
//! `Sleep::reset`, on the manual clock: never early, exactly once, at the
//! deadline in force; and `stats()`'s identities across all of it.

mod common;

use common::{manual, Fired, QueueExecutor};
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError, TimerStats};
use std::time::{Duration, Instant};
use tokio_test::{assert_pending, assert_ready, task};

const MS: Duration = Duration::from_millis(1);
/// Old enough that the timer has filed a far timeout into the wheel: it
/// holds one in its lane until it is 64-96 ms old (see the README's "How it
/// works"). A reset before this finds it in its lane, after it in the wheel.
const FILED: Duration = Duration::from_millis(70);

/// Advances a tick at a time, at most `limit` ticks, until `fired` holds
/// more than `before` entries; returns the time since `start` then, in ms.
fn next_fire(timer: &HashedWheelTimer, fired: &Fired, start: Instant, limit: u32) -> Option<u128> {
    let before = fired.count();
    for _ in 0..limit {
        timer.advance(MS);
        if fired.count() > before {
            return Some((timer.now() - start).as_millis());
        }
    }
    None
}

/// The identity `stats()` keeps at every quiet moment.
fn assert_adds_up(s: TimerStats) {
    assert_eq!(
        s.scheduled,
        s.fired + s.cancelled + s.stopped + s.pending as u64,
        "{s:?}"
    );
}

#[test]
fn a_reset_later_fires_once_at_the_new_deadline_in_the_lane_or_the_wheel() {
    for reset_after in [Duration::from_millis(10), FILED + MS * 10] {
        let timer = manual(MS);
        let start = timer.now();
        let fired = Fired::default();
        let t = fired.schedule(&timer, 0, MS * 100);
        timer.advance(reset_after);
        assert!(t.reset(MS * 200), "pending: moved");
        let due = reset_after.as_millis() + 200;
        assert_eq!(t.deadline(), start + reset_after + MS * 200);
        assert_eq!(
            next_fire(&timer, &fired, start, 1000),
            Some(due),
            "after {reset_after:?}"
        );
        assert_eq!(next_fire(&timer, &fired, start, 1000), None, "once");
        assert!(t.is_expired());
        assert_eq!(timer.pending_timeouts(), 0);
    }
}

#[test]
fn a_reset_earlier_fires_at_the_new_deadline_in_the_lane_or_the_wheel() {
    for reset_after in [Duration::from_millis(10), FILED + MS * 10] {
        let timer = manual(MS);
        let start = timer.now();
        let fired = Fired::default();
        let t = fired.schedule(&timer, 0, MS * 500);
        timer.advance(reset_after);
        assert!(t.reset(MS * 5));
        let due = reset_after.as_millis() + 5;
        assert_eq!(
            next_fire(&timer, &fired, start, 1000),
            Some(due),
            "after {reset_after:?}"
        );
        assert_eq!(
            next_fire(&timer, &fired, start, 1000),
            None,
            "not at the old deadline"
        );
    }
}

#[test]
fn a_reset_earlier_fires_in_time_within_one_big_advance() {
    let timer = manual(MS);
    let start = timer.now();
    let fired = Fired::default();
    let t = fired.schedule(&timer, 0, MS * 500);
    timer.advance(FILED);
    assert!(t.reset_at(start + MS * 100));
    timer.advance(MS * 1000);
    let times = fired.times();
    assert_eq!(times.len(), 1);
    assert_eq!(times[0].1 - start, MS * 100, "at its tick, not later");
}

#[test]
fn a_reset_to_the_past_fires_on_the_next_tick() {
    let timer = manual(MS);
    let start = timer.now();
    let fired = Fired::default();
    let t = fired.schedule(&timer, 0, MS * 300);
    timer.advance(FILED);
    assert!(t.reset_at(start));
    assert_eq!(t.remaining(), Duration::ZERO, "due already");
    assert_eq!(next_fire(&timer, &fired, start, 10), Some(71));
}

#[test]
fn many_resets_in_a_row_fire_once_at_the_last_deadline() {
    let timer = manual(MS);
    let start = timer.now();
    let fired = Fired::default();
    let t = fired.schedule(&timer, 0, MS * 100);
    // Later, earlier, later again, each a tick apart, across the filing.
    let mut due = 0;
    for (i, delay) in [150u64, 20, 300, 90, 400, 75, 120]
        .iter()
        .cycle()
        .take(60)
        .enumerate()
    {
        assert!(t.reset(MS * *delay as u32), "reset {i}");
        due = (timer.now() - start).as_millis() + *delay as u128;
        timer.advance(MS);
        assert_eq!(fired.count(), 0, "early, at reset {i}");
    }
    assert_eq!(next_fire(&timer, &fired, start, 1000), Some(due));
    assert_eq!(next_fire(&timer, &fired, start, 1000), None, "once");
    let s = timer.stats();
    assert_eq!(
        (s.scheduled, s.fired, s.pending),
        (1, 1, 0),
        "a reset counts nowhere"
    );
}

#[test]
fn a_reset_fails_and_changes_nothing_once_it_fired_was_cancelled_or_stopped() {
    let timer = manual(MS);
    let fired = Fired::default();
    let ran = fired.schedule(&timer, 0, MS);
    timer.advance(MS);
    assert!(ran.is_expired());
    assert!(!ran.reset(MS * 10));
    assert!(ran.is_expired());

    let cancelled = fired.schedule(&timer, 1, MS * 10);
    assert!(cancelled.cancel());
    assert!(!cancelled.reset(MS * 10));

    let periodic = timer
        .schedule_at_fixed_rate(|_: &Timeout| {}, MS * 5, MS * 5)
        .unwrap();
    assert!(!periodic.reset(MS * 50), "a periodic task is not moved");

    let stopped = fired.schedule(&timer, 2, MS * 10);
    let returned = timer.stop().unwrap();
    assert!(returned.contains(&stopped));
    assert!(!stopped.reset(MS * 10));
    assert!(stopped.is_stopped());
    timer.advance(MS * 100);
    assert_eq!(fired.labels(), vec![0]);
}

#[test]
fn a_reset_from_inside_the_running_task_fails() {
    let timer = manual(MS);
    let result = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = result.clone();
    timer
        .new_timeout(
            move |t: &Timeout| *seen.lock().unwrap() = Some(t.reset(MS)),
            MS,
        )
        .unwrap();
    timer.advance(MS * 5);
    assert_eq!(*result.lock().unwrap(), Some(false), "running: it fired");
}

#[test]
fn a_cancelled_or_stopped_reset_timeout_reports_its_new_deadline() {
    let timer = manual(MS);
    let start = timer.now();
    let t = timer.new_timeout(|_| {}, MS * 100).unwrap();
    timer.advance(FILED);
    assert!(t.reset(MS * 500));
    assert!(t.cancel());
    assert_eq!(t.deadline(), start + FILED + MS * 500);

    let t = timer.new_timeout(|_| {}, MS * 100).unwrap();
    assert!(t.reset(MS * 300));
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0].deadline(), start + FILED + MS * 300);
}

#[test]
fn equal_deadlines_after_resets_all_fire_in_one_tick() {
    let timer = manual(MS);
    let start = timer.now();
    let fired = Fired::default();
    let handles: Vec<Timeout> = (0..20)
        .map(|i| fired.schedule(&timer, i, MS * (50 + 40 * i as u32)))
        .collect();
    timer.advance(MS * 30);
    for t in &handles {
        assert!(t.reset_at(start + MS * 400));
    }
    timer.advance(MS * 399 - MS * 30);
    assert_eq!(fired.count(), 0, "none early");
    timer.advance(MS);
    assert_eq!(fired.count(), 20);
}

#[test]
fn remaining_counts_down_on_the_timers_clock() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| {}, MS * 100).unwrap();
    assert_eq!(t.remaining(), MS * 100);
    timer.advance(MS * 30);
    assert_eq!(t.remaining(), MS * 70);
    t.reset(MS * 10);
    assert_eq!(t.remaining(), MS * 10);
    timer.advance(MS * 10);
    assert!(t.is_expired());
    assert_eq!(t.remaining(), Duration::ZERO);

    let cancelled = timer.new_timeout(|_| {}, MS * 100).unwrap();
    cancelled.cancel();
    assert_eq!(cancelled.remaining(), Duration::ZERO);

    let periodic = timer
        .schedule_at_fixed_rate(|_: &Timeout| {}, MS * 10, MS * 25)
        .unwrap();
    assert_eq!(periodic.remaining(), MS * 10);
    timer.advance(MS * 10);
    assert_eq!(periodic.remaining(), MS * 25, "to its next run");
    timer.advance(MS * 5);
    assert_eq!(periodic.remaining(), MS * 20);

    let stopped = timer.new_timeout(|_| {}, MS * 100).unwrap();
    timer.stop().unwrap();
    assert_eq!(stopped.remaining(), Duration::ZERO);
    assert_eq!(periodic.remaining(), Duration::ZERO);
}

#[test]
fn new_timeout_at_fires_at_its_deadline_never_early() {
    let timer = manual(MS);
    timer.advance(MS / 3); // deadlines off the tick grid
    let start = timer.now();
    let at = start + Duration::from_micros(4_500);
    let t = timer.new_timeout_at(|_| {}, at).unwrap();
    assert_eq!(t.deadline(), at);
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(Duration::from_micros(4_499));
    assert!(!t.is_expired(), "not before its deadline");
    timer.advance(MS);
    assert!(t.is_expired(), "at the end of the deadline's tick");

    // Already past: the next tick.
    let past = timer.new_timeout_at(|_| {}, start).unwrap();
    assert!(!past.is_expired());
    timer.advance(MS);
    assert!(past.is_expired());
}

#[test]
fn new_timeout_at_refuses_as_new_timeout_does_and_counts_nowhere_then() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1)
        .build()
        .unwrap();
    let at = timer.now() + MS * 10;
    timer.new_timeout_at(|_| {}, at).unwrap();
    assert!(matches!(
        timer.new_timeout_at(|_| {}, at),
        Err(TimerError::AtCapacity { .. })
    ));
    let s = timer.stats();
    assert_eq!(
        (s.scheduled, s.pending),
        (1, 1),
        "the refused call counts nowhere"
    );
    timer.stop().unwrap();
    assert_eq!(
        timer.new_timeout_at(|_| {}, at).unwrap_err(),
        TimerError::Shutdown
    );
    let s = timer.stats();
    assert_eq!((s.scheduled, s.stopped, s.pending), (1, 1, 0));
}

#[test]
fn stats_add_up_after_schedule_cancel_reset_fire_and_stop() {
    for max_pending in [None, Some(1_000)] {
        let mut builder = HashedWheelTimer::builder().manual_clock();
        if let Some(max) = max_pending {
            builder = builder.max_pending_timeouts(max);
        }
        let timer = builder.build().unwrap();
        let handles: Vec<Timeout> = (0..40u32)
            .map(|i| timer.new_timeout(|_| {}, MS * (5 + 10 * i)).unwrap())
            .collect();
        assert_adds_up(timer.stats());
        for t in handles.iter().step_by(4) {
            t.cancel();
        }
        for t in handles.iter().skip(1).step_by(4) {
            t.reset(MS * 1_000);
        }
        // Cancels from another thread, which has a lane of its own.
        std::thread::scope(|s| {
            s.spawn(|| {
                handles.iter().skip(2).step_by(8).for_each(|t| {
                    t.cancel();
                })
            });
        });
        assert_adds_up(timer.stats());
        timer.advance(MS * 200);
        let mid = timer.stats();
        assert_adds_up(mid);
        assert_eq!(mid.cancelled, 15);
        assert!(mid.fired > 0 && mid.pending > 0, "{mid:?}");
        timer.stop().unwrap();
        let end = timer.stats();
        assert_adds_up(end);
        assert_eq!(end.scheduled, 40);
        assert_eq!(end.pending, 0);
        assert_eq!(end.stopped, mid.pending as u64, "the rest stopped");
        // A cancel after stop() changes no total.
        handles.last().unwrap().cancel();
        assert_eq!(timer.stats(), end);
        assert_eq!(end.worker_wakeups, 0, "no worker on a manual clock");
    }
}

#[test]
fn stats_count_futures_periodic_tasks_and_executor_jobs() {
    let jobs = QueueExecutor::default();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(jobs.clone())
        .build()
        .unwrap();
    let mut done = task::spawn(timer.sleep(MS * 5));
    let mut dropped = task::spawn(timer.sleep(MS * 50));
    assert_pending!(done.poll());
    assert_pending!(dropped.poll());
    drop(dropped);
    let periodic = timer
        .schedule_at_fixed_rate(|_: &Timeout| {}, MS, MS * 2)
        .unwrap();
    timer.new_timeout(|_| {}, MS * 3).unwrap();
    timer.advance(MS * 10);
    assert_ready!(done.poll());
    jobs.run_all();
    let s = timer.stats();
    assert_adds_up(s);
    // Two sleeps, the periodic task, the callback.
    assert_eq!((s.scheduled, s.fired, s.cancelled), (4, 2, 1), "{s:?}");
    assert!(s.max_lateness <= MS, "on time, within its tick: {s:?}");
    periodic.cancel();
    let s = timer.stats();
    assert_adds_up(s);
    assert_eq!(s.cancelled, 2);
}

#[test]
fn max_lateness_shows_a_late_fire() {
    let timer = manual(MS * 10);
    timer.advance(MS);
    timer.new_timeout(|_| {}, MS).unwrap(); // due at 2 ms, fires at 10 ms
    timer.advance(MS * 50);
    assert_eq!(timer.stats().max_lateness, MS * 8);
}

#[test]
fn a_sleep_reset_later_does_not_wake_its_task_at_the_old_deadline() {
    let timer = manual(MS);
    let mut sleep = task::spawn(timer.sleep(MS * 100));
    assert_pending!(sleep.poll());
    for i in 1..=5u32 {
        timer.advance(MS * 50);
        let to = timer.now() + MS * 100;
        sleep.reset(to);
        assert!(!sleep.is_woken(), "woken at an old deadline, round {i}");
    }
    timer.advance(MS * 99);
    assert!(!sleep.is_woken());
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    let s = timer.stats();
    assert_eq!((s.scheduled, s.fired), (1, 1), "one entry all along: {s:?}");
}

/// A `Sleep` reset later, then left alone, may be woken once at the deadline
/// its entry kept (its poll is then pending, and files the entry again), and
/// completes at its own deadline, within a tick.
#[test]
fn a_sleep_reset_later_and_left_alone_completes_at_its_deadline() {
    let timer = manual(MS);
    let mut sleep = task::spawn(timer.sleep(MS * 100));
    assert_pending!(sleep.poll());
    timer.advance(MS * 10);
    sleep.reset(timer.now() + MS * 100);
    assert_pending!(sleep.poll());
    let deadline = sleep.deadline();
    let mut early_wakes = 0;
    loop {
        if sleep.is_woken() {
            if sleep.poll().is_ready() {
                break;
            }
            early_wakes += 1;
        }
        assert!(timer.now() <= deadline + MS, "not woken by its deadline");
        timer.advance(MS);
    }
    assert!(timer.now() >= deadline, "never early");
    assert!(early_wakes <= 1, "{early_wakes} early wakes");
}

/// An idle timeout reset a little later, then left alone: tokio's `Sleep` wakes its task once, at
/// the new deadline. Main's woke it once early too, at the entry's older deadline (a later reset
/// within half the wait left the entry alone).
#[test]
fn a_sleep_reset_a_little_later_is_woken_only_at_its_new_deadline() {
    let timer = manual(MS);
    let mut sleep = task::spawn(timer.sleep(MS * 100));
    assert_pending!(sleep.poll());
    timer.advance(MS * 10);
    let deadline = timer.now() + MS * 100; // 10 ms past the first one
    sleep.reset(deadline);
    assert_pending!(sleep.poll());
    for _ in 0..99 {
        timer.advance(MS);
        assert!(
            !sleep.is_woken(),
            "woken at {:?}, before {deadline:?}",
            timer.now()
        );
    }
    timer.advance(MS);
    assert_eq!(timer.now(), deadline);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}
