//! What a stopped timer's futures do, and the process-wide default timer,
//! which refuses to stop. Sleeps here are real but short, and the bounds
//! are loose: they catch a busy loop (thousands of rounds) or a hang, not a
//! late wake-up.

use hashed_wheel_timer::{default_timer, HashedWheelTimer, TimerError};
use std::time::{Duration, Instant};

mod common;
use common::paused::paused_runtime;

const MS: Duration = Duration::from_millis(1);

#[test]
fn the_default_timer_refuses_stop_and_keeps_working() {
    assert_eq!(
        default_timer().stop().unwrap_err(),
        TimerError::StopDefaultTimer
    );
    assert!(!default_timer().is_shutdown());
    futures::executor::block_on(hashed_wheel_timer::sleep(MS));
    let (tx, rx) = std::sync::mpsc::channel();
    hashed_wheel_timer::new_timeout(move |_| tx.send(()).unwrap(), MS).unwrap();
    rx.recv_timeout(Duration::from_secs(60))
        .expect("it still fires");
}

/// Rounds of `body` in `span` of real time.
async fn rounds_in(
    span: Duration,
    mut body: impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
) -> u32 {
    let start = Instant::now();
    let mut rounds = 0;
    while start.elapsed() < span {
        body().await;
        rounds += 1;
    }
    rounds
}

#[tokio::test]
async fn a_sleep_loop_on_a_stopped_timer_neither_spins_nor_hangs() {
    for timer in [
        HashedWheelTimer::new(),
        HashedWheelTimer::builder().manual_clock().build().unwrap(),
    ] {
        timer.stop().unwrap();
        let t = timer.clone();
        let rounds = rounds_in(MS * 200, move || Box::pin(t.sleep(MS * 10))).await;
        // About 20 rounds of 10 ms; a busy loop would make hundreds of
        // thousands, and a hang none.
        assert!(
            (1..=40).contains(&rounds),
            "{rounds} rounds of a 10 ms sleep in 200 ms"
        );
    }
}

#[tokio::test]
async fn an_interval_loop_on_a_stopped_timer_neither_spins_nor_hangs() {
    let timer = HashedWheelTimer::new();
    let mut iv = timer.interval(MS * 10);
    iv.tick().await;
    timer.stop().unwrap();
    assert!(
        iv.try_tick().await.unwrap_err().is_shutdown(),
        "try_tick ends the loop at once"
    );
    let start = Instant::now();
    let mut ticks = 0;
    while start.elapsed() < MS * 200 {
        iv.tick().await;
        ticks += 1;
    }
    assert!(
        (1..=40).contains(&ticks),
        "{ticks} ticks of a 10 ms interval in 200 ms"
    );
}

#[tokio::test]
async fn a_timeout_on_a_stopped_timer_still_gives_the_call_its_time() {
    let timer = HashedWheelTimer::new();
    timer.stop().unwrap();
    let quick = async {
        tokio::time::sleep(MS * 5).await;
        7
    };
    assert_eq!(timer.timeout(Duration::from_secs(60), quick).await, Ok(7));
    let start = Instant::now();
    let slow = timer.timeout(MS * 20, std::future::pending::<()>()).await;
    assert!(slow.unwrap_err().is_shutdown());
    assert!(start.elapsed() >= MS * 20, "never before its deadline");
}

const HOUR: Duration = Duration::from_secs(3600);

/// Runs `test` on a paused runtime on a thread of its own, and fails rather
/// than hangs if it takes a minute of real time: auto-advance makes an hour
/// of paused time take milliseconds, while a wait on the real clock takes
/// the hour.
fn on_a_paused_runtime<F>(test: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        paused_runtime().block_on(test());
        tx.send(()).unwrap();
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => thread.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(thread.join().unwrap_err())
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("still waiting after a minute of real time")
        }
    }
}

#[test]
fn a_stopped_tokio_clock_timers_futures_wait_out_their_time_on_its_paused_clock() {
    on_a_paused_runtime(|| async {
        let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
        let start = tokio::time::Instant::now();
        let mut polled = timer.sleep(HOUR);
        assert!(futures::poll!(&mut polled).is_pending());
        let unpolled = timer.sleep(HOUR);
        let call = timer.timeout(HOUR, std::future::pending::<()>());
        timer.stop().unwrap();
        let ((), (), called) = futures::join!(polled, unpolled, call);
        assert!(called.unwrap_err().is_shutdown());
        let waited = tokio::time::Instant::now() - start;
        assert!(
            waited >= HOUR,
            "never early on the timer's clock: {waited:?}"
        );
    });
}

#[test]
fn a_sleep_whose_tokio_clock_runtime_is_gone_ends_at_once() {
    let runtime = paused_runtime();
    let timer = runtime.block_on(async { HashedWheelTimer::builder().tokio_clock().build() });
    let timer = timer.unwrap();
    let (sleep, call) = (
        timer.sleep(HOUR),
        timer.timeout(HOUR, std::future::pending::<()>()),
    );
    drop(runtime);
    // Its paused clock can never move again: waiting would never end.
    on_a_paused_runtime(|| async move {
        sleep.await;
        assert!(call.await.unwrap_err().is_shutdown());
    });
}

/// A multi-thread runtime's clock is the real one, which goes on without it: a sleep waits out
/// its time (on the default timer), and a retry loop of timeouts is paced, not a spin.
#[test]
fn a_sleep_whose_multi_thread_runtime_is_gone_waits_out_its_time() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let timer = runtime.block_on(async { HashedWheelTimer::builder().tokio_clock().build() });
    let timer = timer.unwrap();
    let start = Instant::now();
    let made_before = timer.sleep(MS * 50);
    drop(runtime);
    futures::executor::block_on(made_before);
    futures::executor::block_on(timer.sleep(MS * 50));
    assert!(
        start.elapsed() >= MS * 100,
        "ended early: {:?}",
        start.elapsed()
    );
    let mut calls = 0;
    while start.elapsed() < MS * 300 {
        let call = timer.timeout(MS * 10, std::future::pending::<()>());
        assert!(futures::executor::block_on(call).is_err());
        calls += 1;
    }
    assert!(calls <= 40, "{calls} timeouts of 10 ms in 200 ms");
}

#[test]
fn an_interval_of_a_stopped_tokio_clock_timer_keeps_its_pace_in_paused_time() {
    on_a_paused_runtime(|| async {
        let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
        let mut iv = timer.interval(MS * 10);
        iv.tick().await;
        timer.stop().unwrap();
        let start = tokio::time::Instant::now();
        for _ in 0..5 {
            iv.tick().await;
        }
        let took = tokio::time::Instant::now() - start;
        assert!(
            took >= MS * 50,
            "five 10 ms ticks in {took:?} of paused time"
        );
    });
}

#[test]
fn an_interval_whose_tokio_clock_runtime_is_gone_neither_spins_nor_hangs() {
    for paused in [true, false] {
        let runtime = if paused {
            paused_runtime()
        } else {
            tokio::runtime::Runtime::new().unwrap()
        };
        let timer = runtime.block_on(async { HashedWheelTimer::builder().tokio_clock().build() });
        let mut iv = timer.unwrap().interval(MS * 10);
        drop(runtime);
        let start = Instant::now();
        let mut ticks = 0;
        while start.elapsed() < MS * 200 {
            futures::executor::block_on(iv.tick());
            ticks += 1;
        }
        assert!(
            (1..=40).contains(&ticks),
            "{ticks} ticks of a 10 ms interval in 200 ms (paused: {paused})"
        );
    }
}
