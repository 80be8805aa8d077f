//! Invariant 7 and bad input: panics are caught, extreme delays behave,
//! bad settings get typed errors naming the value.

mod common;

use common::{manual, Fired};
use hashed_wheel_timer::{HashedWheelTimer, TimerError, MAX_TICKS_PER_WHEEL};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_panicking_callback_does_not_stop_the_timer() {
    let timer = manual(MS);
    let fired = Fired::default();
    fired.schedule(&timer, 0, MS);
    timer.new_timeout(|_| panic!("boom"), MS * 2).unwrap();
    timer
        .new_timeout(|_| std::panic::panic_any(42u8), MS * 2)
        .unwrap();
    fired.schedule(&timer, 1, MS * 2);
    fired.schedule(&timer, 2, MS * 3);
    timer.advance(MS * 3);
    assert_eq!(fired.labels(), vec![0, 1, 2]);
    assert_eq!(timer.pending_timeouts(), 0);
    // Still accepting and firing.
    fired.schedule(&timer, 3, MS);
    timer.advance(MS);
    assert_eq!(fired.count(), 4);
}

#[test]
fn a_panicking_callback_does_not_stop_the_worker_thread() {
    let timer = HashedWheelTimer::new();
    timer
        .new_timeout(|_| panic!("boom"), Duration::ZERO)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), MS * 2)
        .unwrap();
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a later timeout still fires");
}

#[test]
fn zero_delay_fires_on_the_next_tick() {
    let timer = manual(MS * 10);
    timer.advance(MS * 3); // mid-tick
    let fired = Fired::default();
    let t = fired.schedule(&timer, 0, Duration::ZERO);
    timer.advance(MS * 6);
    assert!(
        !t.is_expired(),
        "the tick ending at 10 ms has not ended yet"
    );
    timer.advance(MS);
    assert!(t.is_expired());
}

#[test]
fn duration_max_never_fires_and_never_panics() {
    let timer = manual(MS);
    let t = timer
        .new_timeout(|_| panic!("must never fire"), Duration::MAX)
        .unwrap();
    let u = timer
        .new_timeout(|_| panic!("must never fire"), Duration::MAX / 2)
        .unwrap();
    for _ in 0..5 {
        timer.advance(Duration::from_secs(86_400 * 365 * 100));
    }
    timer.advance(Duration::MAX);
    timer.advance(Duration::MAX);
    assert!(!t.is_expired());
    assert_eq!(timer.pending_timeouts(), 2);
    let _ = t.deadline();
    assert!(t.cancel() && u.cancel());
}

#[test]
fn duration_max_on_a_real_clock_does_not_spin() {
    let timer = HashedWheelTimer::new();
    let t = timer
        .new_timeout(|_| panic!("must never fire"), Duration::MAX)
        .unwrap();
    assert!(t.is_pending());
    assert_eq!(timer.stop().unwrap(), vec![t]);
}

#[test]
fn bad_builder_values_give_errors_that_name_them() {
    let zero_tick = HashedWheelTimer::builder()
        .tick_duration(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(zero_tick, TimerError::ZeroTickDuration(Duration::ZERO));
    assert!(zero_tick.to_string().contains("tick_duration"));

    let zero_wheel = HashedWheelTimer::builder()
        .ticks_per_wheel(0)
        .build()
        .unwrap_err();
    assert_eq!(zero_wheel, TimerError::ZeroTicksPerWheel);
    assert!(zero_wheel.to_string().contains("ticks_per_wheel"));

    // Netty's bound, 2^30, is refused: its buckets alone would take 8 GiB.
    let netty_max = HashedWheelTimer::builder()
        .manual_clock()
        .ticks_per_wheel(1 << 30)
        .build()
        .unwrap_err();
    assert_eq!(netty_max, TimerError::TooManyTicksPerWheel(1 << 30));
    assert!(netty_max.to_string().contains("1073741824"));

    let huge = HashedWheelTimer::builder()
        .ticks_per_wheel(MAX_TICKS_PER_WHEEL + 1)
        .build()
        .unwrap_err();
    assert_eq!(
        huge,
        TimerError::TooManyTicksPerWheel(MAX_TICKS_PER_WHEEL + 1)
    );
    assert!(huge
        .to_string()
        .contains(&(MAX_TICKS_PER_WHEEL + 1).to_string()));

    let overflow = HashedWheelTimer::builder()
        .tick_duration(Duration::from_secs(u64::MAX / 1_000_000_000))
        .ticks_per_wheel(1024)
        .build()
        .unwrap_err();
    assert!(matches!(
        overflow,
        TimerError::WheelDurationOverflow {
            ticks_per_wheel: 1024,
            ..
        }
    ));
    assert!(overflow.to_string().contains("1024"));

    let max_tick = HashedWheelTimer::builder()
        .tick_duration(Duration::MAX)
        .ticks_per_wheel(1)
        .build()
        .unwrap_err();
    assert!(matches!(max_tick, TimerError::WheelDurationOverflow { .. }));

    let zero_pending = HashedWheelTimer::builder()
        .max_pending_timeouts(0)
        .build()
        .unwrap_err();
    assert_eq!(zero_pending, TimerError::ZeroMaxPendingTimeouts);

    let nul = HashedWheelTimer::builder()
        .thread_name("a\0b")
        .build()
        .unwrap_err();
    assert!(matches!(nul, TimerError::InvalidThreadName(_)));
}

#[test]
fn odd_but_valid_settings_work() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .ticks_per_wheel(3)
        .tick_duration(Duration::from_nanos(1))
        .build()
        .unwrap();
    assert_eq!(timer.ticks_per_wheel(), 4, "rounded up to a power of two");
    let fired = Fired::default();
    fired.schedule(&timer, 0, Duration::from_nanos(10));
    timer.advance(Duration::from_nanos(10));
    assert_eq!(fired.count(), 1);

    // The largest wheel (8 MiB of buckets) works.
    let big = HashedWheelTimer::builder()
        .manual_clock()
        .ticks_per_wheel(MAX_TICKS_PER_WHEEL)
        .build()
        .unwrap();
    let fired = Fired::default();
    fired.schedule(&big, 0, Duration::from_millis(700_000_000));
    fired.schedule(&big, 1, Duration::from_millis(3));
    big.advance(Duration::from_millis(3));
    assert_eq!(fired.labels(), vec![1]);
}

#[test]
fn advance_on_a_real_clock_does_nothing() {
    let timer = HashedWheelTimer::new();
    let before = timer.now();
    timer.advance(Duration::from_secs(3600));
    assert!(timer.now() - before < Duration::from_secs(3600));
}

/// Defect 5 of the outside review: with 1 ns ticks the wheel can reach the
/// last tick there is, where `current + 1` overflowed (a panic in debug
/// builds; in release the entry was filed where nothing looks).
#[test]
fn the_last_tick_there_is_neither_overflows_nor_fires() {
    let timer = manual(Duration::from_nanos(1));
    let early = timer.new_timeout(|_| {}, MS).unwrap();
    timer.advance(Duration::MAX);
    assert!(early.is_expired());
    let never = || |_: &hashed_wheel_timer::Timeout| panic!("saturated: must never fire");
    let t = timer.new_timeout(never(), Duration::ZERO).unwrap();
    let u = timer.new_timeout(never(), Duration::MAX).unwrap();
    let p = timer
        .schedule_at_fixed_rate(|_| panic!("never"), MS, MS)
        .unwrap();
    timer.advance(Duration::MAX);
    timer.advance(MS);
    assert!(t.is_pending() && u.is_pending() && p.is_pending());
    assert_eq!(timer.pending_timeouts(), 3);
    assert!(t.cancel(), "found where it was filed");
    timer.advance(MS);
    assert_eq!(timer.stop().unwrap(), vec![u, p], "stop finds the rest");
    assert_eq!(timer.pending_timeouts(), 0);
}

/// Defect 6 of the outside review: the arena built each 40 KiB chunk on
/// the stack before boxing it, which overflowed small thread stacks in
/// debug builds.
#[test]
fn scheduling_works_from_a_thread_with_a_64_kib_stack() {
    let spawned = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(|| {
            let timer = manual(MS);
            for _ in 0..3 {
                // A fresh timer: its first schedule opens the first chunk.
                let fresh = manual(MS);
                fresh.new_timeout(|_| {}, MS).unwrap();
                fresh.advance(MS);
            }
            let ts: Vec<_> = (0..5_000)
                .map(|i| timer.new_timeout(|_| {}, MS * (i % 7)).unwrap())
                .collect();
            timer.advance(MS * 7);
            ts.iter().all(|t| t.is_expired())
        })
        .unwrap();
    assert!(spawned.join().expect("no stack overflow"));
}

/// Nothing is lost at the end of time: a timer's clock stops at 2^61 ns
/// (about 73 years), where deadlines saturate too, so a deadline reads as
/// the time it will come, and no clock passes a pending timeout's deadline.
#[test]
fn the_end_of_time_is_one_for_the_clock_and_the_deadlines() {
    let timer = manual(MS);
    let start = timer.now();
    let end = Duration::from_nanos(u64::MAX >> 3);
    let year = Duration::from_secs(365 * 86_400);
    timer.advance(year * 72);
    let near = timer.new_timeout(|_| {}, year).unwrap();
    let past_the_end = timer.new_timeout(|_| {}, year * 2).unwrap();
    assert_eq!(near.deadline(), start + year * 73);
    assert_eq!(past_the_end.deadline(), start + end, "saturated");
    timer.advance(year * 10);
    assert_eq!(timer.now(), start + end, "the clock stops at the end");
    assert!(near.is_expired(), "due before the end: fired");
    assert!(past_the_end.is_pending() && timer.now() <= past_the_end.deadline());
    assert_eq!(timer.advance_to_next(), None, "nothing pending can fire");
}

/// A wheel turn must end before the end of the timer's time (2^61 ns, 73 years): with a longer
/// tick, even a 1 ms timeout's deadline rounded up to its tick's end was past the end, and it
/// never fired though the build was accepted. The longest turn accepted still fires each timeout.
#[test]
fn a_wheel_turn_past_the_end_of_time_is_refused_and_the_longest_accepted_fires() {
    let end = (u64::MAX >> 3) as u128;
    let build = |tick: Duration, ticks: usize| {
        let b = HashedWheelTimer::builder().manual_clock();
        b.tick_duration(tick).ticks_per_wheel(ticks).build()
    };
    let century = Duration::from_secs(100 * 365 * 86_400);
    for (tick, ticks) in [
        (century, 1),
        (Duration::from_nanos(((end + 1) / 512) as u64), 512),
    ] {
        let refused = build(tick, ticks).err();
        assert!(
            matches!(refused, Some(TimerError::WheelDurationOverflow { tick: t, .. }) if t == tick),
            "{tick:?} x {ticks}: {refused:?}"
        );
    }
    let longest = Duration::from_nanos(((end - 1) / 512) as u64);
    let timer = build(longest, 512).unwrap();
    let fired = Fired::default();
    fired.schedule(&timer, 0, MS);
    fired.schedule(&timer, 1, longest * 300);
    timer.advance(longest);
    assert_eq!(
        fired.labels(),
        vec![0],
        "a 1 ms timeout fires at its tick's end"
    );
    timer.advance(longest * 300);
    assert_eq!(fired.labels(), vec![0, 1]);
}
