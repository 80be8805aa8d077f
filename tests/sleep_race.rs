//! Real races on a real clock: futures polled, moved, reset and dropped
//! while the worker fires. The tests count wake-ups and completions; time
//! only bounds a hang (a lost wake-up), it is never asserted on.

mod common;

use common::{poll_with, CountingWaker};
use hashed_wheel_timer::{HashedWheelTimer, Sleep};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

/// How long a lost wake-up may hang before the test says so.
const HANG: Duration = Duration::from_secs(60);

fn fast_timer() -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .tick_duration(Duration::from_micros(100))
        .build()
        .unwrap()
}

/// Polls once, so the future is registered with this task's waker.
async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    futures::poll!(future)
}

#[test]
fn no_wake_up_is_lost_when_tasks_sleep_move_reset_and_drop_at_random() {
    const TASKS: u64 = 20_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    let timer = fast_timer();
    let done = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let (timer, done, dropped) = (timer.clone(), done.clone(), dropped.clone());
            rt.spawn(async move {
                let mut rng = fastrand::Rng::with_seed(i);
                let mut sleep = timer.sleep(Duration::from_micros(rng.u64(0..3_000)));
                match rng.u8(0..4) {
                    0 => sleep.await,
                    1 => {
                        // Dropped at a random moment, racing the fire.
                        let _ = poll_once(&mut sleep).await;
                        for _ in 0..rng.u8(0..20) {
                            tokio::task::yield_now().await;
                        }
                        drop(sleep);
                        dropped.fetch_add(1, Ordering::SeqCst);
                    }
                    2 => {
                        // Polled here, finished by another task: only that
                        // task's waker may be woken, and it must be.
                        let _ = poll_once(&mut sleep).await;
                        tokio::spawn(sleep).await.unwrap();
                    }
                    _ => {
                        let _ = poll_once(&mut sleep).await;
                        let to = timer.now() + Duration::from_micros(rng.u64(0..3_000));
                        sleep.reset(to);
                        sleep.await;
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let all = async {
        for handle in handles {
            handle.await.unwrap();
        }
    };
    let finished = rt.block_on(async { tokio::time::timeout(HANG, all).await.is_ok() });
    let done = done.load(Ordering::SeqCst);
    assert!(
        finished,
        "lost wake-ups: {} of {TASKS} tasks never finished",
        TASKS as usize - done
    );
    assert_eq!(done, TASKS as usize);
    assert!(dropped.load(Ordering::SeqCst) > 0);
    assert_eq!(timer.pending_timeouts(), 0, "every entry counted out once");
}

#[test]
fn drop_racing_the_worker_counts_once_and_wakes_at_most_once() {
    let timer = fast_timer();
    for round in 0..50u64 {
        // Sleeps of 50..500 µs, each polled once with its own waker. One
        // already due at that poll is ready and files nothing: left out.
        let sleeps: Vec<(Sleep, Arc<CountingWaker>)> = (0..200u64)
            .filter_map(|i| {
                let (counter, waker) = CountingWaker::new();
                let micros = ((i + round) % 10 + 1) * 50;
                let mut sleep = timer.sleep(Duration::from_micros(micros));
                let pending = poll_with(&mut sleep, &waker).is_pending();
                pending.then_some((sleep, counter))
            })
            .collect();
        let (to_drop, mut kept): (Vec<_>, Vec<_>) = sleeps
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let dropped_counters: Vec<_> = to_drop.iter().map(|(_, (_, c))| c.clone()).collect();
        thread::scope(|s| {
            s.spawn(move || {
                for _ in 0..round * 997 % 20_000 {
                    std::hint::spin_loop();
                }
                drop(to_drop);
            });
        });
        // Every kept sleep must be woken, exactly once, and then be ready.
        let start = Instant::now();
        for (i, (sleep, counter)) in &mut kept {
            while counter.wakes() == 0 {
                assert!(
                    start.elapsed() < HANG,
                    "lost wake-up: sleep {i}, round {round}"
                );
                thread::sleep(Duration::from_micros(100));
            }
            assert_eq!(counter.wakes(), 1);
            let waker = futures::task::waker(counter.clone());
            assert!(poll_with(sleep, &waker).is_ready());
        }
        for counter in dropped_counters {
            assert!(counter.wakes() <= 1);
        }
    }
    assert_eq!(timer.pending_timeouts(), 0, "every entry counted out once");
}
