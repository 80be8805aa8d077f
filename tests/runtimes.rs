//! Where the futures run: tokio's `current_thread` and `multi_thread`
//! runtimes, and no runtime at all. Real clock; the tests check that each
//! future completes and is never early on the timer's clock, never how long
//! it took.

use hashed_wheel_timer::HashedWheelTimer;
use std::future::pending;
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);

/// Sleeps, times out and ticks on `timer`, checking each result. The
/// caller checks the pending count once every user of `timer` is done.
async fn exercise(timer: HashedWheelTimer) {
    let sleep = timer.sleep(MS * 3);
    let deadline = sleep.deadline();
    sleep.await;
    assert!(timer.now() >= deadline, "never early");

    let err = timer.timeout(MS * 2, pending::<()>()).await.unwrap_err();
    assert!(!err.is_shutdown());
    assert_eq!(timer.timeout(MS * 2, async { 5 }).await, Ok(5));

    let mut interval = timer.interval(MS * 2);
    let first = interval.tick().await;
    let second = interval.tick().await;
    assert_eq!(second - first, MS * 2);
    assert!(timer.now() >= second);
    drop(interval);
}

/// Runs `exercise` and then checks that it left nothing pending.
async fn exercise_alone(timer: HashedWheelTimer) {
    exercise(timer.clone()).await;
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn on_a_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(exercise_alone(HashedWheelTimer::new()));
}

#[test]
fn on_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let tasks: Vec<_> = (0..8).map(|_| rt.spawn(exercise(timer.clone()))).collect();
    rt.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    assert_eq!(
        timer.pending_timeouts(),
        0,
        "all eight tasks left nothing behind"
    );
}

#[test]
fn with_no_runtime_at_all() {
    futures::executor::block_on(exercise_alone(HashedWheelTimer::new()));
}

#[test]
fn a_sleep_moved_between_runtimes_wakes_its_new_task() {
    let timer = HashedWheelTimer::new();
    let first = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // A second, not 20 ms: the first poll must find it pending, and a thread held off the CPU
    // for 20 ms between the two would find it ready.
    let mut sleep = timer.sleep(MS * 1000);
    // Poll once on one runtime, then finish on another executor.
    first.block_on(async {
        let polled = futures::poll!(&mut sleep);
        assert!(polled.is_pending());
    });
    drop(first);
    futures::executor::block_on(&mut sleep);
    assert!(sleep.is_elapsed());
}

#[test]
fn stop_from_another_thread_lets_waiting_futures_wait_out_their_deadlines() {
    let timer = HashedWheelTimer::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    // Both futures must be registered, and the timer stopped under them, before either deadline:
    // 2 s, not 300 ms, so that a thread held off the CPU for a while cannot let one pass first.
    let wait = Duration::from_secs(2);
    let sleeper = rt.spawn({
        let timer = timer.clone();
        async move {
            let sleep = timer.sleep(wait);
            let deadline = sleep.deadline();
            sleep.await;
            deadline
        }
    });
    let caller = rt.spawn({
        let timer = timer.clone();
        async move { timer.timeout(wait, pending::<()>()).await }
    });
    // Wait until both are registered, then stop the timer under them.
    while timer.pending_timeouts() < 2 {
        std::thread::sleep(MS);
    }
    assert!(timer.stop().unwrap().is_empty());
    rt.block_on(async {
        // Neither ends at once, nor hangs: each waits out its deadline on
        // the default timer.
        let deadline = sleeper.await.unwrap();
        assert!(Instant::now() >= deadline, "never early");
        assert!(caller.await.unwrap().unwrap_err().is_shutdown());
    });
}
