//! Edges a Netty user leans on, beside the ported suite
//! (`netty_hashed_wheel_timer_suite.rs`): panicking tasks and destructors
//! at each place a task ends, `stop()` racing `new_timeout` from other
//! threads, `stats()` after random mixes of operations, `reset` once a
//! timeout ended, absolute deadlines in the past and far future, and huge
//! `advance` values. Manual clock, except where a race needs threads; no
//! assertion reads the wall clock.

use hashed_wheel_timer::{HashedWheelTimer, Job, Timeout, TimerError, TimerTask};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

mod common;
use common::assert_stats_add_up;

const MS: Duration = Duration::from_millis(1);

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// Counts its drop, then panics.
struct PanicsOnDrop(Arc<AtomicUsize>);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("captured state panicked in Drop");
    }
}

/// A task whose captured state panics when dropped, after it ran or unrun.
fn bomb_task(drops: &Arc<AtomicUsize>, ran: &Arc<AtomicUsize>) -> impl FnOnce(&Timeout) + Send {
    let bomb = PanicsOnDrop(drops.clone());
    let ran = ran.clone();
    move |_: &Timeout| {
        ran.fetch_add(1, SeqCst);
        let _keep = &bomb;
    }
}

fn still_fires(timer: &HashedWheelTimer) -> bool {
    let fired = Arc::new(AtomicBool::new(false));
    let f = fired.clone();
    timer
        .new_timeout(move |_| f.store(true, SeqCst), MS)
        .unwrap();
    timer.advance(MS);
    fired.load(SeqCst)
}

// Netty logs a TimerTask's exception and carries on; here the captured
// state's destructor panics at the end of a run, on cancel, after stop, and
// when the last timer handle drops. Each panic is caught where it happens.
#[test]
fn a_task_whose_captured_state_panics_in_drop_at_fire_cancel_stop_and_timer_drop() {
    let (drops, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // fire: the closure is consumed by its run, and its state dropped there
    let timer = manual();
    let fired = timer.new_timeout(bomb_task(&drops, &ran), MS).unwrap();
    timer.advance(MS);
    assert_eq!((ran.load(SeqCst), drops.load(SeqCst)), (1, 1));
    assert!(fired.is_expired());
    assert!(still_fires(&timer));
    // cancel: dropped on the cancelling thread, and cancel still says true
    let cancelled = timer.new_timeout(bomb_task(&drops, &ran), MS).unwrap();
    let won = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cancelled.cancel()));
    assert!(
        matches!(won, Ok(true)),
        "the panic does not escape cancel()"
    );
    assert_eq!(drops.load(SeqCst), 2);
    assert!(cancelled.is_cancelled());
    assert!(still_fires(&timer));
    // stop: the task is kept for take_task, dropped with the last handle
    let stopped = timer.new_timeout(bomb_task(&drops, &ran), MS * 5).unwrap();
    let returned = timer.stop().unwrap();
    assert_eq!(returned, vec![stopped.clone()]);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drop(returned);
        drop(stopped);
    }));
    assert!(dropped.is_ok(), "the panic does not escape a handle's drop");
    assert_eq!(drops.load(SeqCst), 3);
    assert_stats_add_up(&timer);
    // timer drop: pending tasks are dropped with the last handle
    let timer = manual();
    let t = timer.new_timeout(bomb_task(&drops, &ran), MS * 5).unwrap();
    let u = timer.new_timeout(bomb_task(&drops, &ran), MS * 5).unwrap();
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drop(timer);
        drop(t);
        drop(u);
    }));
    assert!(
        dropped.is_ok(),
        "the panic does not escape the timer's drop"
    );
    assert_eq!(
        drops.load(SeqCst),
        5,
        "both dropped, the second after the first panicked"
    );
    assert_eq!(ran.load(SeqCst), 1);
}

/// Panics when run; its state drops quietly.
struct Panics;

impl TimerTask for Panics {
    fn run(self: Box<Self>, _: &Timeout) {
        panic!("the task failed");
    }
}

// Netty: an exception thrown by a TimerTask is logged, and the worker goes
// on with the same tick's other timeouts. On the advance thread and on an
// executor, the rest of the tick fires and the counts add up.
#[test]
fn a_panicking_task_does_not_cost_the_rest_of_its_tick() {
    for on_executor in [false, true] {
        let mut b = HashedWheelTimer::builder().manual_clock();
        if on_executor {
            b = b.executor(|job: Job| job());
        }
        let timer = b.build().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let mut ts = Vec::new();
        for i in 0..10 {
            if i % 3 == 0 {
                ts.push(timer.new_timeout_task(Panics, MS).unwrap());
            } else {
                let f = fired.clone();
                let task = move |_: &Timeout| {
                    f.fetch_add(1, SeqCst);
                };
                ts.push(timer.new_timeout(task, MS).unwrap());
            }
        }
        timer.advance(MS);
        assert_eq!(fired.load(SeqCst), 6, "executor {on_executor}");
        let panicked = ts.iter().filter(|t| t.is_panicked()).count();
        assert_eq!(panicked, 4);
        assert!(ts.iter().all(|t| t.is_expired() && !t.cancel()));
        assert_eq!(timer.stats().fired, 10);
        assert_stats_add_up(&timer);
    }
}

// Nothing lost (DESIGN.md invariant 3): threads call new_timeout while
// another advances and the test stops the timer. Every Ok(timeout) is
// exactly one of: fired, cancelled, returned by stop(); every refusal is
// `Shutdown`; the counts add up.
#[test]
fn stop_racing_new_timeout_from_other_threads_loses_nothing() {
    for round in 0..20u64 {
        let timer = manual();
        let producers = 3;
        let start = Arc::new(Barrier::new(producers + 2));
        let fired: Arc<Mutex<HashSet<usize>>> = Arc::default();
        let mut handles = Vec::new();
        for p in 0..producers {
            let (timer, start, fired) = (timer.clone(), start.clone(), fired.clone());
            handles.push(std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(round * 10 + p as u64);
                let mut made = Vec::new();
                start.wait();
                for i in 0..2_000 {
                    let id = p * 1_000_000 + i;
                    let f = fired.clone();
                    let task = move |_: &Timeout| assert!(f.lock().unwrap().insert(id));
                    match timer.new_timeout(task, MS * rng.u32(0..5)) {
                        Ok(t) => {
                            if rng.u8(0..8) == 0 {
                                t.cancel();
                            }
                            made.push((id, t));
                        }
                        Err(e) => {
                            assert_eq!(e, TimerError::Shutdown);
                            break;
                        }
                    }
                }
                made
            }));
        }
        let advancer = {
            let (timer, start) = (timer.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                while !timer.is_shutdown() {
                    timer.advance(MS);
                }
            })
        };
        start.wait();
        for _ in 0..(round * 37 % 500) {
            std::thread::yield_now();
        }
        let stopped = timer.stop().unwrap();
        assert_eq!(timer.pending_timeouts(), 0);
        let made: Vec<(usize, Timeout)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        advancer.join().unwrap();
        let fired = fired.lock().unwrap();
        let stopped: HashSet<Timeout> = stopped.into_iter().collect();
        for (id, t) in &made {
            let states = [fired.contains(id), t.is_cancelled(), stopped.contains(t)];
            assert_eq!(
                states.iter().filter(|&&s| s).count(),
                1,
                "round {round}: timeout {id} fired/cancelled/stopped = {states:?}, {t:?}"
            );
            assert_eq!(t.is_expired(), fired.contains(id));
            assert_eq!(t.is_stopped(), stopped.contains(t));
        }
        let s = timer.stats();
        assert_eq!(s.scheduled, made.len() as u64, "round {round}: {s:?}");
        assert_eq!(s.fired, fired.len() as u64);
        assert_eq!(s.stopped, stopped.len() as u64);
        assert_stats_add_up(&timer);
    }
}

// stats() consistency (invariant 5) after random mixes of operations on
// the manual clock: schedules (relative, absolute past and future,
// periodic), cancels, resets, advances, tasks cancelling others, and stop.
#[test]
fn stats_add_up_after_random_operation_mixes() {
    for seed in 0..40u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .tick_duration(MS * rng.u32(1..4))
            .ticks_per_wheel(rng.usize(1..64))
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let all: Arc<Mutex<Vec<Timeout>>> = Arc::default();
        for _ in 0..400 {
            let delay = MS * rng.u32(0..300);
            let (r, a) = (ran.clone(), all.clone());
            let victim = rng.usize(..1_000);
            let task = move |_: &Timeout| {
                r.fetch_add(1, SeqCst);
                let a = a.lock().unwrap();
                if victim < a.len() {
                    a[victim].cancel();
                }
            };
            let made = match rng.u8(0..12) {
                0..=3 => timer.new_timeout(task, delay).ok(),
                4 => timer.new_timeout_at(task, timer.now() + delay).ok(),
                5 => {
                    let past = timer.now().checked_sub(delay).unwrap_or(timer.now());
                    timer.new_timeout_at(task, past).ok()
                }
                6 => timer
                    .schedule_at_fixed_rate(|_| {}, delay, MS * rng.u32(1..50))
                    .ok(),
                _ => None,
            };
            let mut a = all.lock().unwrap();
            if let Some(t) = made {
                a.push(t);
            }
            match rng.u8(0..6) {
                0 if !a.is_empty() => {
                    let t = a[rng.usize(..a.len())].clone();
                    drop(a);
                    t.cancel();
                }
                1 if !a.is_empty() => {
                    let t = a[rng.usize(..a.len())].clone();
                    drop(a);
                    let was = t.is_pending() && !t.is_periodic();
                    assert_eq!(t.reset(MS * rng.u32(0..200)), was, "{t:?}");
                }
                2 => {
                    drop(a);
                    timer.advance(MS * rng.u32(0..40));
                }
                3 => {
                    drop(a);
                    timer.advance_to_next();
                }
                _ => {}
            }
            assert_stats_add_up(&timer);
        }
        timer.advance(MS * rng.u32(0..500));
        let stopped = timer.stop().unwrap();
        let s = timer.stats();
        assert_eq!(s.stopped, stopped.len() as u64, "seed {seed}: {s:?}");
        assert_eq!(s.pending, 0);
        assert_stats_add_up(&timer);
        let all = all.lock().unwrap();
        let ended = |t: &&Timeout| t.is_expired() || t.is_cancelled() || t.is_stopped();
        assert_eq!(all.iter().filter(ended).count(), all.len(), "seed {seed}");
    }
}

// Netty has no reset; the crate's `reset` must say false, changing
// nothing, once a timeout fired, was cancelled, or was stopped.
#[test]
fn reset_after_fire_cancel_or_stop_returns_false_and_changes_nothing() {
    let timer = manual();
    let fired = timer.new_timeout(|_| {}, MS).unwrap();
    let cancelled = timer.new_timeout(|_| {}, MS * 10).unwrap();
    let stopped = timer.new_timeout(|_| {}, MS * 10).unwrap();
    timer.advance(MS);
    assert!(cancelled.cancel());
    for t in [&fired, &cancelled] {
        assert!(!t.reset(MS * 100) && !t.reset(Duration::ZERO));
        assert!(!t.reset_at(timer.now() + MS));
    }
    assert_eq!(timer.stop().unwrap(), vec![stopped.clone()]);
    assert!(!stopped.reset(MS) && !stopped.reset_at(timer.now()));
    assert!(fired.is_expired() && cancelled.is_cancelled() && stopped.is_stopped());
    assert_eq!(stopped.remaining(), Duration::ZERO);
    assert!(
        stopped.take_task().is_some(),
        "a refused reset kept the task"
    );
    let s = timer.stats();
    assert_eq!((s.fired, s.cancelled, s.stopped, s.pending), (1, 1, 1, 0));
}

// java.util.Timer.schedule(task, Date) with a date in the past runs at
// once; far in the future, never within the test. Also an instant before
// the timer was built.
#[test]
fn new_timeout_at_in_the_past_and_far_future() {
    let timer = manual();
    timer.advance(Duration::from_secs(10));
    let fired = Arc::new(AtomicUsize::new(0));
    let count = || {
        let f = fired.clone();
        move |_: &Timeout| {
            f.fetch_add(1, SeqCst);
        }
    };
    let now = timer.now();
    let before_start = now.checked_sub(Duration::from_secs(3_600));
    let mut past = vec![now, now - MS, now - Duration::from_secs(10)];
    past.extend(before_start);
    for &at in &past {
        let t = timer.new_timeout_at(count(), at).unwrap();
        assert_eq!(t.remaining(), Duration::ZERO);
        assert!(t.is_pending(), "not before a turn");
    }
    timer.advance(Duration::ZERO);
    assert_eq!(
        fired.load(SeqCst),
        past.len(),
        "all fire at the next advance"
    );

    let year = Duration::from_secs(365 * 86_400);
    let far: Vec<_> = [year, year * 100, year * 10_000]
        .into_iter()
        .filter_map(|d| now.checked_add(d))
        .map(|at| timer.new_timeout_at(count(), at).unwrap())
        .collect();
    timer.advance(year);
    assert_eq!(fired.load(SeqCst), past.len() + 1, "the one a year on");
    assert!(far[1..]
        .iter()
        .all(|t| t.is_pending() && t.remaining() > year));
    assert_eq!(timer.stop().unwrap(), far[1..].to_vec());
    assert_stats_add_up(&timer);
}

// Huge advance values: Duration::MAX, and many u64::MAX-nanosecond steps,
// fire what is due, return, and leave the timer usable for cancel and stop.
#[test]
fn huge_advances_fire_what_is_due_and_return() {
    let timer = manual();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let soon = timer
        .new_timeout(
            move |_| {
                f.fetch_add(1, SeqCst);
            },
            MS,
        )
        .unwrap();
    let far = timer.new_timeout(|_| {}, Duration::MAX).unwrap();
    for _ in 0..5 {
        timer.advance(Duration::from_nanos(u64::MAX));
    }
    timer.advance(Duration::MAX);
    timer.advance(Duration::MAX);
    assert_eq!(fired.load(SeqCst), 1);
    assert!(soon.is_expired() && far.is_pending());
    assert_eq!(timer.advance_to_next(), None);
    let later = timer.new_timeout(|_| {}, MS).unwrap();
    assert!(later.cancel());
    assert_eq!(timer.stop().unwrap(), vec![far]);
    timer.advance(Duration::MAX);
    assert_stats_add_up(&timer);
}

// `stop()`'s docs: "Afterwards pending_timeouts() is 0", and the README's
// "When any stop() returns ... pending_timeouts() is 0"; a refused call
// "counts nowhere", and `scheduled` is a total since the timer was built.
// A `new_timeout` racing `stop()` reserves its count before it sees the
// shutdown: once `stop()` has returned, that reservation must not show in
// `pending_timeouts()` nor in `stats()` (where `scheduled` then shrank).
// Threads only make the race likely; nothing reads the wall clock.
#[test]
fn after_stop_returns_a_refused_racing_new_timeout_counts_nowhere() {
    for round in 0..300 {
        let timer = manual();
        let go = Arc::new(Barrier::new(3));
        let producers: Vec<_> = (0..2)
            .map(|_| {
                let (timer, go) = (timer.clone(), go.clone());
                std::thread::spawn(move || {
                    go.wait();
                    while timer
                        .new_timeout(|_| {}, Duration::from_secs(3_600))
                        .is_ok()
                    {}
                })
            })
            .collect();
        go.wait();
        while timer.pending_timeouts() < 50 {
            std::thread::yield_now();
        }
        let stopped = timer.stop().unwrap().len() as u64;
        let (pending, s) = (timer.pending_timeouts(), timer.stats());
        producers.into_iter().for_each(|p| p.join().unwrap());
        let later = timer.stats();
        assert_eq!(pending, 0, "round {round}: pending after stop() returned");
        assert_eq!(
            (s.pending, s.scheduled),
            (0, stopped),
            "round {round}: {s:?}"
        );
        assert_eq!(later.scheduled, stopped, "round {round}: {later:?}");
    }
}
