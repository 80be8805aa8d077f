//! A timer on tokio's clock (`Builder::tokio_clock`), tested as tokio code
//! is: on a paused runtime, moved by `tokio::time::advance` and by
//! auto-advance.

use hashed_wheel_timer::{HashedWheelTimer, MissedTickBehavior, Timeout, TimerError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn timer() -> HashedWheelTimer {
    HashedWheelTimer::builder().tokio_clock().build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_slow_backend_times_out_as_in_production() {
    let timer = timer();
    let slow = tokio::time::sleep(Duration::from_secs(3600));
    let result = timer.timeout(MS * 50, slow).await;
    assert!(result.is_err(), "the timeout must win: {result:?}");
}

#[tokio::test(start_paused = true)]
async fn an_hours_sleep_takes_no_real_hour_and_moves_tokios_clock() {
    let timer = timer();
    let (real, virtual_start) = (std::time::Instant::now(), Instant::now());
    timer.sleep(Duration::from_secs(3600)).await;
    assert!(Instant::now() - virtual_start >= Duration::from_secs(3600));
    assert!(Instant::now() - virtual_start < Duration::from_secs(3600) + MS * 2);
    assert!(
        real.elapsed() < Duration::from_secs(5),
        "{:?}",
        real.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn advance_fires_what_is_due_and_nothing_later() {
    let timer = timer();
    let fired = Arc::new(AtomicUsize::new(0));
    let (one, two) = (fired.clone(), fired.clone());
    let d = MS * 100;
    let first = timer
        .new_timeout(
            move |_: &Timeout| {
                one.fetch_add(1, Ordering::SeqCst);
            },
            d,
        )
        .unwrap();
    let second = timer
        .new_timeout(
            move |_: &Timeout| {
                two.fetch_add(10, Ordering::SeqCst);
            },
            d * 2,
        )
        .unwrap();
    tokio::time::advance(d).await;
    tokio::task::yield_now().await; // let the driver task run
    assert!(first.is_expired());
    assert!(!second.is_expired());
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert_eq!(second.remaining(), d);
    tokio::time::advance(d).await;
    tokio::task::yield_now().await;
    assert_eq!(fired.load(Ordering::SeqCst), 11);
}

#[tokio::test(start_paused = true)]
async fn an_interval_ticks_at_exact_virtual_times() {
    let timer = timer();
    let start = timer.now();
    let mut iv = timer.interval(MS * 10);
    iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for n in 0..5u32 {
        let at = iv.tick().await;
        assert_eq!(at - start, MS * 10 * n);
        assert_eq!(timer.now() - start, MS * 10 * n, "tick {n} fired on time");
    }
}

#[tokio::test(start_paused = true)]
async fn now_and_remaining_read_tokios_clock() {
    let timer = timer();
    let start = timer.now();
    let t = timer.new_timeout(|_| {}, Duration::from_secs(10)).unwrap();
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(timer.now() - start, Duration::from_secs(4));
    assert_eq!(t.remaining(), Duration::from_secs(6));
}

#[test]
fn outside_a_runtime_it_is_a_typed_error() {
    let built = HashedWheelTimer::builder().tokio_clock().build();
    assert_eq!(built.unwrap_err(), TimerError::NoTokioRuntime);
}

#[test]
fn the_timer_shuts_down_with_its_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { timer() });
    let t = timer.new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
    drop(rt);
    assert!(timer.is_shutdown());
    assert_eq!(
        timer.new_timeout(|_| {}, MS).unwrap_err(),
        TimerError::Shutdown
    );
    assert!(!t.is_expired());
    assert_eq!(timer.pending_timeouts(), 0);
}

/// Code under test written against the free functions, as an RPC client's.
async fn call_backend_with_deadline() -> Result<(), hashed_wheel_timer::Elapsed> {
    let slow_backend = tokio::time::sleep(Duration::from_secs(3600));
    hashed_wheel_timer::timeout(MS * 50, slow_backend).await
}

#[tokio::test(start_paused = true)]
async fn free_functions_under_set_default_give_the_production_answer() {
    let _guard = hashed_wheel_timer::set_default(timer());
    assert!(call_backend_with_deadline().await.is_err());
    let start = Instant::now();
    hashed_wheel_timer::sleep(Duration::from_secs(3600)).await;
    assert!(Instant::now() - start >= Duration::from_secs(3600));
}

#[test]
fn set_default_guards_nest_and_restore() {
    let manual = || HashedWheelTimer::builder().manual_clock().build().unwrap();
    let (outer, inner) = (manual(), manual());
    let scheduled = |t: &HashedWheelTimer| t.stats().scheduled;
    let on_default = || hashed_wheel_timer::new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
    {
        let _outer = hashed_wheel_timer::set_default(outer.clone());
        on_default();
        assert_eq!((scheduled(&outer), scheduled(&inner)), (1, 0));
        {
            let _inner = hashed_wheel_timer::set_default(inner.clone());
            on_default();
            let mut sleep = tokio_test::task::spawn(hashed_wheel_timer::sleep(MS * 5));
            assert!(sleep.poll().is_pending());
            assert_eq!((scheduled(&outer), scheduled(&inner)), (1, 2));
        }
        on_default();
        assert_eq!(
            (scheduled(&outer), scheduled(&inner)),
            (2, 2),
            "the outer one is back"
        );
        // Another thread has its own default: the process-wide one.
        let before = scheduled(hashed_wheel_timer::default_timer());
        std::thread::spawn(on_default).join().unwrap();
        assert!(scheduled(hashed_wheel_timer::default_timer()) > before);
        assert_eq!(scheduled(&outer), 2);
    }
    let before = scheduled(hashed_wheel_timer::default_timer());
    on_default().cancel();
    assert!(
        scheduled(hashed_wheel_timer::default_timer()) > before,
        "the process-wide one is back"
    );
    assert_eq!((scheduled(&outer), scheduled(&inner)), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn never_early_and_at_most_a_tick_late_on_the_paused_clock() {
    let timer = timer();
    let mut rng = fastrand::Rng::with_seed(11);
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let timer = timer.clone();
            let delay = Duration::from_micros(rng.u64(0..500_000));
            tokio::spawn(async move {
                let deadline = Instant::now() + delay;
                timer.sleep(delay).await;
                (Instant::now(), deadline)
            })
        })
        .collect();
    for task in tasks {
        let (woke, deadline) = task.await.unwrap();
        assert!(woke >= deadline, "early by {:?}", deadline - woke);
        assert!(
            woke - deadline <= MS,
            "late by {:?}: more than a tick",
            woke - deadline
        );
    }
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_task_of_another_runtime_reads_the_timers_own_clock() {
    const HOUR: Duration = Duration::from_secs(3600);
    let a = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = a.block_on(async {
        let timer = timer();
        tokio::time::advance(HOUR).await;
        timer
    });
    let b = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let on_b = timer.clone();
    let (t, sleep, now_on_b) = b.block_on(async move {
        let task = tokio::spawn(async move {
            let t = on_b.new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
            (t, on_b.sleep(Duration::from_secs(60)), on_b.now())
        });
        task.await.unwrap()
    });
    assert_eq!(now_on_b, timer.now(), "A's paused clock, from B's task");
    assert_eq!(t.remaining(), Duration::from_secs(60));
    assert_eq!(sleep.deadline() - timer.now(), Duration::from_secs(60));
    a.block_on(async {
        tokio::time::advance(MS * 5).await;
        for _ in 0..10 {
            tokio::task::yield_now().await; // let the driver task run
        }
    });
    assert!(
        !t.is_expired(),
        "fired {:?} early",
        Duration::from_secs(60) - MS * 5
    );
    assert!(!sleep.is_elapsed());
}

/// When a sleep until `base + deadline` completes on a fresh paused runtime:
/// on this crate's timer, built half a millisecond into tokio's time (so its
/// ticks end half-way through tokio's milliseconds), or on tokio's. The sleep
/// is made `wait` after that.
fn completes_at(on_this_timer: bool, wait: Duration, deadline: Duration) -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let base = Instant::now();
        tokio::time::advance(Duration::from_micros(500)).await;
        let timer = timer();
        tokio::time::advance(wait).await;
        if on_this_timer {
            timer.sleep_until(base + deadline).await;
        } else {
            tokio::time::sleep_until(base + deadline).await;
        }
        Instant::now() - base
    })
}

/// tokio wakes its driver up to a millisecond late. Asked for a tick's end,
/// the timer fired a tick after tokio's own sleep; it asks for the tick's
/// start, and fires what is due by the time tokio wakes it.
#[test]
fn a_deadline_inside_a_tick_fires_with_tokios_own_sleep() {
    let at = |on_this_timer| completes_at(on_this_timer, Duration::ZERO, MS * 17 / 10);
    assert_eq!(at(true), at(false), "this timer's sleep, then tokio's");
}

/// Woken by tokio before the tick's end but after the deadline, the turn
/// fires it then, not a tick later.
#[test]
fn a_turn_before_the_ticks_end_fires_what_is_due() {
    let (wait, deadline) = (MS * 7 / 10, MS * 21 / 10);
    let ours = completes_at(true, wait, deadline);
    assert!(ours >= deadline, "early: {ours:?}");
    assert!(ours < completes_at(false, wait, deadline), "{ours:?}");
}

/// A fixed-rate task far behind catches up a run a tick, as on the other
/// clocks: a turn that fires what is due before its tick's end leaves a
/// periodic task to its tick.
#[tokio::test(start_paused = true)]
async fn a_periodic_task_behind_runs_once_a_tick_on_tokios_clock_too() {
    let timer = timer();
    let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = runs.clone();
    let task = move |_: &Timeout| seen.lock().unwrap().push(Instant::now());
    let _periodic = timer.schedule_at_fixed_rate(task, MS, MS).unwrap();
    tokio::time::sleep(MS * 3 / 2).await;
    tokio::time::advance(MS * 10).await;
    tokio::time::sleep(MS * 5).await;
    let runs = runs.lock().unwrap().clone();
    assert!(runs.len() >= 5, "{runs:?}");
    assert!(
        runs.windows(2).all(|w| w[1] > w[0]),
        "two runs at one instant: {runs:?}"
    );
}

/// A jump of tokio's paused clock past 26 days (when a lane's 32-bit stamps of the push time wrap
/// to a negative age) still fires what fell due: a 30-day timeout fires on a 30-day advance.
#[tokio::test(start_paused = true)]
async fn a_thirty_day_jump_of_the_paused_clock_fires_a_thirty_day_timeout() {
    let timer = timer();
    let month = Duration::from_secs(30 * 24 * 3600);
    let timeout = timer.new_timeout(|_: &Timeout| {}, month).unwrap();
    tokio::time::advance(month + MS * 2).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(timeout.is_expired(), "due, and not fired");
}

/// A dropped `Sleep` leaves nothing for tokio's auto-advance to jump to, as a dropped
/// `tokio::time::Sleep` does not: the paused clock stays put while the test waits on a thread
/// outside the runtime. (The driver lingered a wheel round, 512 ms, after producers cancelled
/// young, and the paused clock jumped there.)
#[tokio::test(start_paused = true)]
async fn a_dropped_sleep_leaves_the_paused_clock_where_it_is() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut sleep = Box::pin(timer.sleep(Duration::from_secs(10)));
    assert!(futures::poll!(&mut sleep).is_pending());
    drop(sleep);
    let start = Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.send(())
    });
    rx.await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "the paused clock jumped");
    assert_eq!(timer.pending_timeouts(), 0);
}

/// Batches of dropped `Sleep`s, and cancels of filed timeouts, ask the driver for housekeeping:
/// on a paused clock it answers at once, not at the next tick, to which the clock would jump.
/// (Each batch moved the paused clock 1 ms.)
#[tokio::test(start_paused = true)]
async fn cancels_that_ask_for_housekeeping_leave_the_paused_clock_where_it_is() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let start = Instant::now();
    let wait_outside_the_runtime = || {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(())
        });
        rx
    };
    for _ in 0..3 {
        for _ in 0..100 {
            let mut sleep = Box::pin(timer.sleep(Duration::from_secs(10)));
            assert!(futures::poll!(&mut sleep).is_pending());
        }
        wait_outside_the_runtime().await.unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "dropped sleeps moved the paused clock"
        );
        let filed = timer.new_timeout(|_| {}, Duration::from_millis(5)).unwrap();
        tokio::task::yield_now().await;
        assert!(filed.cancel());
        wait_outside_the_runtime().await.unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "a cancel moved the paused clock"
        );
    }
    assert_eq!(timer.pending_timeouts(), 0);
}
