//! Timers that keep firing while tokio workers are stuck (issue 29, part 3).
//! A real-clock timer's driver is its own thread: its wake-ups reach any
//! free worker, and callbacks need no worker at all. These run on the real
//! clock (a blocked worker cannot be faked on a virtual one), so each
//! promise has a margin of 50x: 10 ms sleeps, 500 ms allowed.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hashed_wheel_timer::HashedWheelTimer;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

const SLEEP: Duration = Duration::from_millis(10);
const ALLOWED: Duration = Duration::from_millis(500);
const BLOCKED_FOR: Duration = Duration::from_secs(2);

fn runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// Blocks `workers` of `rt`'s workers for `BLOCKED_FOR`, each in a task that
/// never yields; returns once every one of them is blocked.
fn block_workers(rt: &Runtime, workers: usize) {
    let started = Arc::new(Barrier::new(workers + 1));
    for _ in 0..workers {
        let started = started.clone();
        rt.spawn(async move {
            started.wait();
            std::thread::sleep(BLOCKED_FOR);
        });
    }
    started.wait();
}

/// A task that sleeps `SLEEP` on `timer`, and says how long it slept.
fn spawn_sleep(timer: &HashedWheelTimer) -> JoinHandle<Duration> {
    let timer = timer.clone();
    tokio::spawn(async move {
        let made = Instant::now();
        timer.sleep(SLEEP).await;
        made.elapsed()
    })
}

/// Every one of `sleeps` woke, none early, all by `ALLOWED` after `start`.
fn assert_in_time(rt: &Runtime, sleeps: Vec<JoinHandle<Duration>>, start: Instant) {
    for slept in sleeps {
        let slept = rt.block_on(slept).unwrap();
        assert!(slept >= SLEEP, "woke {slept:?} after {SLEEP:?}: early");
    }
    let took = start.elapsed();
    assert!(took < ALLOWED, "100 sleeps of {SLEEP:?} took {took:?}");
}

#[test]
fn sleeps_complete_in_time_while_one_of_two_workers_is_blocked() {
    let rt = runtime(2);
    let timer = HashedWheelTimer::new();
    block_workers(&rt, 1);
    let start = Instant::now();
    let sleeps = {
        let _in_runtime = rt.enter();
        (0..100).map(|_| spawn_sleep(&timer)).collect()
    };
    assert_in_time(&rt, sleeps, start);
    rt.shutdown_background();
}

/// The sleeps are spawned by the task that then blocks its worker, which
/// polls some of them first: their entries are made on that worker. (A
/// timer whose wheel is per worker, as tokio's alternative timer, wakes
/// those only once the worker is free again: 2 s.)
#[test]
fn sleeps_made_on_a_worker_that_then_blocks_complete_in_time() {
    let rt = runtime(2);
    let timer = HashedWheelTimer::new();
    let (handed, handles) = mpsc::channel();
    let start = Instant::now();
    rt.spawn(async move {
        let sleeps: Vec<_> = (0..100).map(|_| spawn_sleep(&timer)).collect();
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        handed.send(sleeps).unwrap();
        std::thread::sleep(BLOCKED_FOR);
    });
    assert_in_time(&rt, handles.recv().unwrap(), start);
    rt.shutdown_background();
}

#[test]
fn callbacks_fire_in_time_while_every_worker_is_blocked() {
    let rt = runtime(2);
    let timer = HashedWheelTimer::new();
    block_workers(&rt, 2);
    let (fired, fires) = mpsc::channel();
    let made = Instant::now();
    for _ in 0..100 {
        let fired = fired.clone();
        timer
            .new_timeout(move |_| fired.send(made.elapsed()).unwrap(), SLEEP)
            .unwrap();
    }
    for _ in 0..100 {
        let after = fires
            .recv_timeout(ALLOWED)
            .expect("a callback fired while every worker was blocked");
        assert!(after >= SLEEP, "fired {after:?} after a {SLEEP:?} delay");
        assert!(after < ALLOWED, "fired {after:?} after a {SLEEP:?} delay");
    }
    rt.shutdown_background();
}
